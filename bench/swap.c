/* `spillway demo` (the main job) and `spillway bench swap`.
 *
 * demo = part 1, the ragged prefill batch of prefill_cmds.c (unchanged),
 * then part 2: a long context of a real model shape (16 query / 2 kv heads,
 * d256, block 16) whose KV is larger than both the engine's pool and the
 * store's host tier is offloaded to a store in a scratch directory, and
 * decode steps run exact attention over all of it through the swap engine,
 * each step checked against an fp64 reference. It prints tokens/s, bytes
 * read per step and per second against a raw O_DIRECT read of the same file
 * system measured in the same run, and where the blocks came from (pool,
 * host tier, disk). Exit status 1 if either part fails its check.
 *
 * bench swap = the same machinery over three cases (disk-bound, host-tier-
 * bound, all-resident), each figure written with the raw figure of the same
 * run it is held against. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "swap_run.h"

#include <math.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB 1048576.0

typedef struct swap_opts {
    int64_t context;
    int32_t batch, layers, steps, warmup, check_heads;
    double pool_pct, host_pct;
    uint64_t raw_mb;
    const char *dir, *json, *cases;
    int keep, quick;
    int host_pool;  /* --host-pool: the CPU engine even with a GPU */
    int32_t prefetch_depth; /* --prefetch-depth; -1 = the engine's default */
    int32_t tile;           /* --tile: blocks per tile; 0 = the case's / engine's */
    int32_t io_buffer_mb;   /* --io-buffer-mb: the store's bounce buffer; 0 = its default */
} swap_opts;

/* Parses one swap option at argv[*i]; 1 = taken, 0 = not a swap option,
 * -1 = bad value. */
static int swap_opt(int argc, char **argv, int *i, swap_opts *o)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--keep")) {
        o->keep = 1;
        return 1;
    }
    if (!strcmp(a, "--host-pool")) {
        o->host_pool = 1;
        return 1;
    }
    static const char *const with_value[] = {"--context", "--batch", "--layers", "--steps",
                                             "--pool-pct", "--host-pct", "--check-heads",
                                             "--raw-mb", "--dir", "--warmup-steps",
                                             "--prefetch-depth", "--tile", "--io-buffer-mb"};
    int known = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
        known |= !strcmp(a, with_value[k]);
    if (!known)
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "spillway: option '%s' needs a value\n", a);
        return -1;
    }
    const char *v = argv[++*i];
    if (!strcmp(a, "--dir")) o->dir = v;
    else if (!strcmp(a, "--context")) o->context = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--batch")) o->batch = atoi(v);
    else if (!strcmp(a, "--layers")) o->layers = atoi(v);
    else if (!strcmp(a, "--steps")) o->steps = atoi(v);
    else if (!strcmp(a, "--warmup-steps")) o->warmup = atoi(v);
    else if (!strcmp(a, "--check-heads")) o->check_heads = atoi(v);
    else if (!strcmp(a, "--pool-pct")) o->pool_pct = atof(v);
    else if (!strcmp(a, "--host-pct")) o->host_pct = atof(v);
    else if (!strcmp(a, "--raw-mb")) o->raw_mb = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--prefetch-depth")) o->prefetch_depth = atoi(v);
    else if (!strcmp(a, "--tile")) o->tile = atoi(v);
    else if (!strcmp(a, "--io-buffer-mb")) {
        char *end = NULL;
        const long mb = strtol(v, &end, 10);
        o->io_buffer_mb = end != v && !*end && mb >= 0 && mb <= 4096 ? (int32_t)mb : -1;
    }
    return 1;
}

static int swap_opts_check(const swap_opts *o)
{
    if (o->context < 16 || o->context > (1 << 24) || o->batch < 1 || o->batch > 64 ||
        o->layers < 1 || o->layers > 64 || o->steps < 1 || o->warmup < 0 ||
        o->check_heads < 0 || !(o->pool_pct > 0 && o->pool_pct <= 200) ||
        !(o->host_pct >= 0 && o->host_pct <= 200) || o->raw_mb < 16 ||
        o->prefetch_depth < -1 || o->prefetch_depth > 32 || o->tile < 0 || o->tile > 65536 ||
        o->io_buffer_mb < 0 || o->io_buffer_mb > 4096) {
        fprintf(stderr, "spillway: need --context 16..16M, --batch 1..64, --layers 1..64, "
                        "--steps >= 1, --warmup-steps >= 0, --check-heads >= 0, "
                        "--pool-pct in (0, 200], --host-pct in [0, 200], --raw-mb >= 16, "
                        "--prefetch-depth 0..32, --tile 0..65536, --io-buffer-mb 0..4096\n");
        return 2;
    }
    return 0;
}

/* 1 when the engine runs its device pool (GPU 0). */
static int use_device(const swap_opts *o)
{
    return !o->host_pool && sw_cuda_device_count() > 0;
}

/* The model shape of the demo and the bench: h16-2/d256, block 16. A device
 * pool reads `dev_tile` blocks per tile (0 = every block of a sequence):
 * each tile read is one store call and each tile one kernel launch, so
 * larger tiles amortise both. */
static swt_case make_case(const char *name, const swap_opts *o, double pool_pct, double host_pct,
                          int32_t dev_tile)
{
    swt_case c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.qo_heads = 16;
    c.kv_heads = 2;
    c.head_dim = 256;
    c.block_size = 16;
    c.layers = o->layers;
    c.batch = o->batch;
    c.context = o->context;
    c.warmup = o->warmup;
    c.steps = o->steps;
    c.prefetch_depth = o->prefetch_depth;
    c.io_buffer_bytes = (uint64_t)o->io_buffer_mb << 20;
    c.check_heads = o->check_heads;
    const int64_t blocks = (int64_t)c.batch * c.layers *
                           ((c.context + c.warmup + c.steps + c.block_size - 1) / c.block_size);
    const double blk_bytes = 2.0 * c.kv_heads * c.block_size * c.head_dim * 2;
    int64_t pool = (int64_t)(blocks * pool_pct / 100.0);
    if (pool_pct >= 100)
        pool = blocks + 32; /* every block, plus the tiles streamed through */
    c.resident_blocks = (int32_t)(pool < 16 ? 16 : pool);
    c.host_tier_bytes = (uint64_t)(blocks * blk_bytes * host_pct / 100.0);
    c.device_pool = use_device(o);
    if (o->tile > 0)
        c.tile_blocks = o->tile < c.resident_blocks ? o->tile : c.resident_blocks;
    if (c.device_pool && o->tile <= 0) {
        int64_t t = dev_tile > 0 ? dev_tile : blocks / (c.batch * c.layers) + 1;
        if (t > c.resident_blocks && dev_tile > 0)
            t = c.resident_blocks / 2 > 1 ? c.resident_blocks / 2 : 1; /* keep read-ahead */
        c.tile_blocks = (int32_t)t;
    }
    return c;
}

/* ---------------------------------------------------------- scratch -- */
typedef struct scratch {
    char work[4096], raw[4200];
    const char *fs;
    int tmpfs, keep;
    uint64_t raw_bytes;
    double raw_gbps[2];
    int raw_n;
} scratch;

static int scratch_open(scratch *s, const char *dir, int keep, const char *tag)
{
    memset(s, 0, sizeof *s);
    s->keep = keep;
    snprintf(s->work, sizeof s->work, "%s/spillway-%s-XXXXXX", dir, tag);
    if (!mkdtemp(s->work)) {
        fprintf(stderr, "spillway: mkdtemp in '%s': %s\n", dir, strerror(errno));
        return 1;
    }
    s->fs = swt_fs_name(s->work, &s->tmpfs);
    snprintf(s->raw, sizeof s->raw, "%s/raw", s->work);
    return 0;
}

static void scratch_close(scratch *s)
{
    if (!s->work[0])
        return;
    if (s->keep)
        printf("  kept %s\n", s->work);
    else
        swt_rmtree(s->work);
}

/* The raw O_DIRECT read of the same file system, measured by its own loop
 * over a file it wrote (O_DIRECT, fsync'ed): once before and once after the
 * timed work; the limit is the better pass. tmpfs is said, not hidden. */
static void scratch_raw_write(scratch *s, uint64_t bytes)
{
    s->raw_bytes = bytes;
    int e = swt_raw_write(s->raw, bytes);
    if (e) {
        printf("  raw O_DIRECT file: cannot write (%s): no raw-read figure%s\n", strerror(-e),
               s->tmpfs ? " (tmpfs)" : "");
        s->raw_bytes = 0;
    }
}

static void scratch_raw_pass(scratch *s)
{
    if (!s->raw_bytes || s->raw_n >= 2)
        return;
    double g = swt_raw_read(s->raw, s->raw_bytes);
    if (g > 0)
        s->raw_gbps[s->raw_n++] = g;
}

static double scratch_raw_best(const scratch *s)
{
    double b = -1;
    for (int i = 0; i < s->raw_n; i++)
        b = s->raw_gbps[i] > b ? s->raw_gbps[i] : b;
    return b;
}

static void print_raw(const scratch *s)
{
    if (!s->raw_n) {
        printf("  raw O_DIRECT sequential read: not measured (O_DIRECT refused on %s)\n", s->fs);
        return;
    }
    printf("  raw O_DIRECT sequential read of %.0f MiB on %s: %.3f GB/s", s->raw_bytes / MIB,
           s->fs, s->raw_gbps[0]);
    if (s->raw_n > 1)
        printf(" before, %.3f GB/s after the decode steps", s->raw_gbps[1]);
    printf(" (its own loop: 4 MiB QD1 / 1 MiB QD4, the better)%s\n",
           s->tmpfs ? " -- tmpfs is RAM, not a disk: this says nothing about I/O" : "");
}

/* The disk case's interleaved raw passes: per shape, each pass's figure,
 * and the engine's disk rate over the steps between two passes beside the
 * passes on either side. */
static void print_raw_interleaved(const swt_result *r, double before_after)
{
    printf("  raw O_DIRECT reads interleaved with the disk case's timed steps: %d passes "
           "(before the first step, then every few steps and after the last; each a slice of "
           "the raw file per shape): 4 MiB QD1 %.3f, 1 MiB QD4 %.3f GB/s (bytes / time over the "
           "passes); the limit is the better, %.3f GB/s (the before / after passes' better: "
           "%.3f%s)\n",
           r->raw_passes, r->raw_secs[0] > 0 ? r->raw_bytes[0] / r->raw_secs[0] / 1e9 : 0.0,
           r->raw_secs[1] > 0 ? r->raw_bytes[1] / r->raw_secs[1] / 1e9 : 0.0,
           swt_raw_interleaved_gbps(r), before_after > 0 ? before_after : 0.0,
           before_after > 0 ? "" : ", not measured");
    const double per_step = r->steps > 0 ? (double)r->file_bytes_read / r->steps : 0;
    printf("    per pass, the better shape (GB/s), and between passes the engine's disk reads "
           "(payload per step, mean, / those steps' time):");
    const int32_t np = r->raw_passes < SWT_RAW_PASSES ? r->raw_passes : SWT_RAW_PASSES;
    for (int32_t j = 0; j < np; j++) {
        if (r->raw_pass_gbps[j] > 0)
            printf(" %s%.2f", j ? "| " : "", r->raw_pass_gbps[j]);
        else
            printf(" %s-", j ? "| " : ""); /* both shapes failed */
        if (j + 1 < np) {
            double ms = 0;
            const int32_t a = r->raw_pass_after[j], b = r->raw_pass_after[j + 1];
            /* steps past the first 64 are not kept one by one (step_ms) */
            if (b <= r->nstep_ms)
                for (int32_t i = a; i < b; i++)
                    ms += r->step_ms[i];
            if (ms > 0 && b > a)
                printf(" [%.2f]", per_step * (b - a) / (ms * 1e-3) / 1e9);
        }
    }
    if (np < r->raw_passes)
        printf(" (the first %d of %d passes)", np, r->raw_passes);
    printf("\n");
}

/* ----------------------------------------------------------- report -- */
typedef struct derived {
    double step_s, tokens_per_s, read_per_step, gbps, disk_gbps, host_gbps;
    double visits_per_step, pool_rate, host_share, disk_share, host_tier_rate;
    double kv_gbps; /* KV bytes attended per second */
} derived;

/* The step time at rank q (0 = min, 0.5 = median, 1 = max) of the recorded
 * timed steps; 0 when none. */
static double ms_rank(const double *ms, int32_t nms, double q)
{
    double v[64];
    const int n = nms < 64 ? nms : 64;
    if (n < 1)
        return 0;
    for (int i = 0; i < n; i++)
        v[i] = ms[i];
    for (int i = 1; i < n; i++) /* insertion sort: at most 64 */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            const double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    if (q == 0.5 && n % 2 == 0)
        return 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return v[(int)(q * (n - 1) + 0.5)];
}

static double step_ms_rank(const swt_result *r, double q)
{
    return ms_rank(r->step_ms, r->nstep_ms, q);
}

static derived derive(const swt_case *c, const swt_result *r)
{
    derived d;
    memset(&d, 0, sizeof d);
    const double st = r->step_seconds > 0 ? r->step_seconds : 1e-9;
    const double blk_bytes = 2.0 * c->kv_heads * c->block_size * c->head_dim * 2;
    d.step_s = st / r->steps;
    d.tokens_per_s = (double)r->steps * c->batch / st;
    d.read_per_step = (double)r->bytes_read / r->steps;
    d.gbps = r->bytes_read / st / 1e9;
    d.disk_gbps = r->file_bytes_read / st / 1e9;
    d.host_gbps = r->host_bytes_read / st / 1e9;
    const double visits = (double)(r->hits + r->misses);
    d.visits_per_step = visits / r->steps;
    d.kv_gbps = visits * blk_bytes / st / 1e9;
    if (visits > 0) {
        const double stripes = (double)(r->host_stripes + r->file_stripes);
        d.pool_rate = r->hits / visits;
        d.host_share = stripes > 0 ? r->misses / visits * r->host_stripes / stripes : 0;
        d.disk_share = stripes > 0 ? r->misses / visits * r->file_stripes / stripes : 0;
        d.host_tier_rate = stripes > 0 ? r->host_stripes / stripes : 0;
    }
    return d;
}

static void print_case(const swt_case *c, const swt_result *r, double raw)
{
    const derived d = derive(c, r);
    const sw_store_stats *ss = &r->store;
    printf("  offload: %lld blocks (%.1f MiB of K+V) written in %.2f s (%.3f GB/s)\n",
           (long long)(r->total_blocks - (int64_t)c->batch * c->layers *
                                             ((r->context_end - c->context + c->block_size - 1) /
                                              c->block_size)),
           (double)c->batch * c->layers * c->context * c->kv_heads * c->head_dim * 4 / MIB,
           r->offload_seconds,
           (double)c->batch * c->layers * c->context * c->kv_heads * c->head_dim * 4 /
               (r->offload_seconds > 0 ? r->offload_seconds : 1e-9) / 1e9);
    printf("  decode: %d timed step(s) after %d warm-up, batch %d, %d layer(s), context %lld -> "
           "%lld tokens\n",
           r->steps, c->warmup, c->batch, c->layers, (long long)c->context,
           (long long)r->context_end);
    printf("    %.1f ms per step (offload of the new token + attention of every layer): "
           "%.2f tokens/s\n",
           d.step_s * 1e3, d.tokens_per_s);
    if (r->nstep_ms > 1)
        printf("    steps: min %.1f, median %.1f, max %.1f ms (the figures are of the mean)\n",
               step_ms_rank(r, 0.0), step_ms_rank(r, 0.5), step_ms_rank(r, 1.0));
    if (r->nstep_ms > 1) {
        printf("    attend calls: min %.2f, median %.2f, max %.2f ms; each:",
               ms_rank(r->attend_ms, r->nstep_ms, 0.0), ms_rank(r->attend_ms, r->nstep_ms, 0.5),
               ms_rank(r->attend_ms, r->nstep_ms, 1.0));
        for (int32_t i = 0; i < r->nstep_ms; i++)
            printf(" %.2f", r->attend_ms[i]);
        printf("\n");
    }
    printf("    per step: %.1f ms computing, %.1f ms waiting for reads "
           "(%llu of %llu tiles read ahead)\n",
           r->compute_seconds / r->steps * 1e3, r->read_wait_seconds / r->steps * 1e3,
           (unsigned long long)r->prefetched_tiles, (unsigned long long)r->tiles);
    printf("    per step, host side: %.1f ms scoring, %.1f ms planning tiles, %.1f ms "
           "submitting reads, %.1f ms finishing (device pool: merge, gather verdict, wait for "
           "the GPU)\n",
           r->score_seconds / r->steps * 1e3, r->plan_seconds / r->steps * 1e3,
           r->submit_seconds / r->steps * 1e3, r->finish_seconds / r->steps * 1e3);
    printf("    read per step: %.1f MiB (host tier %.1f MiB, disk %.1f MiB) = %.3f GB/s\n",
           d.read_per_step / MIB, r->host_bytes_read / MIB / r->steps,
           r->file_bytes_read / MIB / r->steps, d.gbps);
    if (raw > 0)
        printf("    disk reads: %.3f GB/s = %.1f%% of the raw O_DIRECT read (%.3f GB/s, %s)\n",
               d.disk_gbps, 100 * d.disk_gbps / raw, raw,
               swt_raw_interleaved_gbps(r) > 0 ? "passes interleaved with the steps"
                                               : "the better of the passes before / after");
    else
        printf("    disk reads: %.3f GB/s (no raw figure to hold them against)\n", d.disk_gbps);
    swt_print_disk_path(r);
    printf("    block visits per step: %.0f, served by: pool %.1f%%, host tier %.1f%%, "
           "disk %.1f%%\n",
           d.visits_per_step, 100 * d.pool_rate, 100 * d.host_share, 100 * d.disk_share);
    printf("    hit rates: pool %.1f%% of visits; host tier %.1f%% of pool misses; disk "
           "served the other %.1f%%\n",
           100 * d.pool_rate, 100 * d.host_tier_rate,
           r->host_stripes + r->file_stripes ? 100 * (1 - d.host_tier_rate) : 0.0);
    printf("  check: %lld head rows against the fp64 reference over every token: max rel L2 "
           "%.1e (bound 1e-2) %s (%s)\n",
           (long long)r->heads_checked, r->max_rel_l2, r->ok ? "ok" : "FAIL",
           r->checked_after ? "each step's rows kept, checked after the steps"
                            : "each step checked before the next");
    printf("  engine: pool %d slots, tile %d blocks, rank %d, read-ahead %d tiles, policy %s; "
           "%llu evictions in the timed steps\n",
           r->swap.resident_blocks, r->swap.tile_blocks, r->swap.predictor_rank,
           r->swap.prefetch, sw_swap_policy_name(r->swap.policy),
           (unsigned long long)r->evictions);
    printf("  store: %s, %s; %llu stripes, %llu B extents, %llu of %llu extents used; host tier "
           "%.1f of %.1f MiB; %llu writes, %llu host hits, %llu file hits, %llu read ranges "
           "(%llu I/Os), %llu corruptions, %llu I/O errors\n",
           sw_store_io_backend_name(ss->io_backend), ss->direct_io ? "O_DIRECT" : "buffered",
           (unsigned long long)ss->extents_used, (unsigned long long)ss->extent_bytes,
           (unsigned long long)ss->extents_used, (unsigned long long)ss->extents_total,
           ss->host_used_bytes / MIB, ss->host_capacity_bytes / MIB,
           (unsigned long long)ss->writes, (unsigned long long)ss->host_hits,
           (unsigned long long)ss->file_hits, (unsigned long long)ss->read_requests,
           (unsigned long long)ss->read_ios, (unsigned long long)ss->corruptions,
           (unsigned long long)ss->io_errors);
}

static void print_setup(const swt_case *c)
{
    const double blk_bytes = 2.0 * c->kv_heads * c->block_size * c->head_dim * 2;
    const int64_t blocks = (int64_t)c->batch * c->layers *
                           ((c->context + c->warmup + c->steps + c->block_size - 1) /
                            c->block_size);
    const double kv = blocks * blk_bytes;
    printf("  model: %d query / %d kv heads, d%d, block %d, BF16; %d layer(s), batch %d x "
           "%lld tokens\n",
           c->qo_heads, c->kv_heads, c->head_dim, c->block_size, c->layers, c->batch,
           (long long)c->context);
    printf("  KV: %lld blocks, %.1f MiB; pool %d slots = %.1f MiB (%.0f%% of the KV); host "
           "tier %.1f MiB (%.0f%% of the KV)%s\n",
           (long long)blocks, kv / MIB, c->resident_blocks, c->resident_blocks * blk_bytes / MIB,
           100 * c->resident_blocks * blk_bytes / kv, c->host_tier_bytes / MIB,
           100 * c->host_tier_bytes / kv, c->host_tier_bytes ? "" : " = none");
}

static void gpu_note(const swap_opts *o)
{
    if (use_device(o))
        printf("  engine: device pool on GPU 0 (slots in GPU memory, CUDA tile kernels)\n");
    else if (sw_cuda_device_count() > 0)
        printf("  engine: host pool with CPU attention (--host-pool), although a GPU is present\n");
    else
        printf("  engine: host pool with CPU attention (no usable GPU)\n");
}

/* ------------------------------------------------------ demo part 2 -- */
static int demo_swap(const swap_opts *o)
{
    swt_case c = make_case("demo", o, o->pool_pct, o->host_pct, 64);
    printf("\n== part 2: exact decode attention over a KV cache larger than the pool and the "
           "host tier ==\n");
    gpu_note(o);
    scratch s;
    if (scratch_open(&s, o->dir, o->keep, "demo"))
        return 1;
    printf("  scratch: %s (file system: %s%s; removed at exit%s)\n", s.work, s.fs,
           s.tmpfs ? " -- RAM, not a disk" : "", o->keep ? " unless --keep: kept" : "");
    print_setup(&c);
    fflush(stdout); /* before the progress lines on stderr */
    const double t0 = tool_now();
    const uint64_t kv = (uint64_t)c.batch * c.layers * (uint64_t)c.context * c.kv_heads *
                        c.head_dim * 4;
    uint64_t raw = o->raw_mb << 20;
    if (kv < raw)
        raw = kv < (64u << 20) ? (64u << 20) : (kv + (4u << 20) - 1) / (4u << 20) * (4u << 20);
    scratch_raw_write(&s, raw);
    scratch_raw_pass(&s);
    char store_dir[4300];
    snprintf(store_dir, sizeof store_dir, "%s/store", s.work);
    swt_result r;
    int rc = swt_run_case(&c, store_dir, &r);
    if (!rc) {
        scratch_raw_pass(&s);
        print_raw(&s);
        print_case(&c, &r, scratch_raw_best(&s));
    }
    scratch_close(&s);
    const int ok = !rc && r.ok;
    printf("part 2 (swap decode): %s in %.1f s\n", ok ? "PASS" : "FAIL", tool_now() - t0);
    return ok ? 0 : 1;
}

static void swap_defaults(swap_opts *o)
{
    memset(o, 0, sizeof *o);
    o->context = 32768;
    o->batch = 2;
    o->layers = 2;
    o->steps = 8;
    o->warmup = 1;
    o->pool_pct = 25;
    o->host_pct = 25;
    o->raw_mb = 256;
    o->dir = "/var/tmp";
    o->prefetch_depth = -1;
}

static const char demo_usage[] =
    "usage: spillway demo [--part prefill|swap|all] [part 1 options] [part 2 options]\n"
    "The main job, in two parts; exit status 1 when either fails its check.\n"
    "Part 1 (prefill): a ragged batch (mix-a: 10 requests of 100..8192 tokens, BF16, causal,\n"
    "GQA 32/8, d128) on the GPU when one is usable (else all CPU cores, lengths scaled by\n"
    "1/8 unless --scale is given), checked row by row against the fp64 reference.\n"
    "  --cpu --full --scale F --reps N --warmup N --cases LIST --shapes LIST --samples N\n"
    "Part 2 (swap): a long context (16 query / 2 kv heads, d256, block 16, BF16) whose KV\n"
    "is larger than the engine's pool and the store's host tier is offloaded to a store in a\n"
    "scratch directory; decode steps (a new token and fresh queries each) run exact attention\n"
    "over every token, each checked against an fp64 reference (rel L2 <= 1e-2); prints\n"
    "tokens/s, bytes read per step and per second against a raw O_DIRECT read of the same\n"
    "file system measured in the same run, and the share of pool, host tier and disk.\n"
    "  --context N      tokens per sequence (default 32768)\n"
    "  --batch N        sequences decoded together (default 2)\n"
    "  --layers N       layers (default 2)\n"
    "  --steps N        timed decode steps (default 8), after --warmup-steps N (default 1)\n"
    "  --pool-pct P     engine pool, %% of the KV blocks (default 25; >= 100: all resident)\n"
    "  --host-pct P     store host tier, %% of the KV bytes (default 25; 0 = none)\n"
    "  --check-heads N  query heads checked per sequence, layer and step (default 0 = all)\n"
    "  --raw-mb N       size of the raw-read file (default 256, at most the KV's size)\n"
    "  --dir D          parent of the scratch directory (default /var/tmp; a disk, not\n"
    "                   tmpfs: the file system type is printed)\n"
    "  --keep           keep the scratch directory\n"
    "  --host-pool      run the engine's host pool (CPU attention) even with a GPU; by\n"
    "                   default a usable GPU gets the device pool (GPU 0)\n"
    "  --prefetch-depth N  tiles whose reads are in flight while one computes, 0..32\n"
    "                   (default: the engine's, 4)\n"
    "  --tile N         blocks per tile (default: the engine's; bench swap: its case's\n"
    "                   with a GPU; at most the pool)\n"
    "  --io-buffer-mb N the store's pinned bounce buffer for reads, MiB (default 0: the\n"
    "                   store's, 8 MiB; read tickets in flight or not yet waited for hold\n"
    "                   regions of it, SPILLWAY_STORE_READ_WINDOW)\n"
    "A progress bar goes to stderr when it is a terminal, plain lines otherwise.\n";

int cmd_demo(int argc, char **argv)
{
    swap_opts o;
    swap_defaults(&o);
    const char *part = "all";
    char **rest = (char **)calloc((size_t)argc + 1, sizeof(char *));
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s", demo_usage);
            free(rest);
            return 0;
        }
        if (!strcmp(argv[i], "--part")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "spillway: --part needs prefill, swap or all\n");
                free(rest);
                return 2;
            }
            part = argv[++i];
            continue;
        }
        int t = swap_opt(argc, argv, &i, &o);
        if (t < 0) {
            free(rest);
            return 2;
        }
        if (!t)
            rest[nrest++] = argv[i];
    }
    const int do_prefill = !strcmp(part, "all") || !strcmp(part, "prefill");
    const int do_swap = !strcmp(part, "all") || !strcmp(part, "swap");
    if (!do_prefill && !do_swap) {
        fprintf(stderr, "spillway: --part prefill|swap|all, not '%s'\n", part);
        free(rest);
        return 2;
    }
    int rc = swap_opts_check(&o);
    /* Part 1's options are checked even when only part 2 runs. */
    if (!rc)
        rc = demo_prefill(nrest, rest, demo_usage, 1);
    if (rc) {
        free(rest);
        return rc;
    }
    const double t0 = tool_now();
    int rc1 = 0, rc2 = 0;
    double t1 = t0;
    if (do_prefill) {
        printf("== part 1: ragged prefill batch checked against the reference ==\n");
        fflush(stdout);
        rc1 = demo_prefill(nrest, rest, demo_usage, 0);
        t1 = tool_now();
    }
    free(rest);
    if (do_swap)
        rc2 = demo_swap(&o);
    printf("\nsummary:");
    if (do_prefill)
        printf(" part 1 (prefill) %s (%.1f s);", rc1 ? "FAIL" : "PASS", t1 - t0);
    if (do_swap)
        printf(" part 2 (swap decode) %s (%.1f s);", rc2 ? "FAIL" : "PASS", tool_now() - t1);
    printf(" %s in %.1f s\n", rc1 || rc2 ? "FAIL" : "PASS", tool_now() - t0);
    return rc1 || rc2 ? 1 : 0;
}

/* ------------------------------------------------------- bench swap -- */
static const char bench_usage[] =
    "usage: spillway bench swap [--quick] [--cases disk,host,resident] [--json PATH]\n"
    "                           [part 2 options of 'spillway demo --help']\n"
    "Runs the demo's decode machinery over three cases, each a fresh store:\n"
    "  disk      disk-bound: no host tier, pool 25%% of the KV blocks\n"
    "  host      host-tier-bound: the host tier holds all the KV, pool 25%%\n"
    "  resident  all-resident: the pool holds every block\n"
    "and writes a JSON list of {case, metric, value, limit}, limit being the raw figure\n"
    "measured in the same run that the value is held against, or null. Host pool (CPU):\n"
    "disk vs raw O_DIRECT sequential read of the same file system; host tier and resident\n"
    "vs memcpy of 8 KiB pieces. Device pool (a GPU, unless --host-pool): disk read rate vs\n"
    "the raw O_DIRECT read (and the step time vs the raw time for its disk bytes); host-tier\n"
    "bytes per second of attend vs a pinned host-to-device cudaMemcpy; the tile kernel's\n"
    "K/V read rate (CUDA events) vs a device-to-device cudaMemcpy (2 x bytes / time).\n"
    "Defaults: context 32768, batch 1, 1 layer, 5 steps after 1 warm-up (with a GPU, the\n"
    "disk and host-tier cases 30);\n"
    "--quick: context 4096, 2 steps, 64 MiB raw file.\n"
    "  --resident-context N  the all-resident case's context (default with a GPU:\n"
    "                   524288 tokens = 1 GiB of K/V per attend, the byte count of the\n"
    "                   device-to-device reference, 2 steps after 1 warm-up: a 64 MiB\n"
    "                   attend is mostly the launch's fixed cost, docs/perf/swap.md;\n"
    "                   else, or with --quick, --context)\n"
    "  --host-tile N    the host-tier case's tile, as --tile N for that case alone\n"
    "                   (default with a GPU: 512 blocks, the pool's size)\n"
    "  --raw-every N    the disk case's limit: raw O_DIRECT passes (both shapes, a 64 MiB\n"
    "                   slice each) before its first timed step and after every N of them\n"
    "                   and the last, bytes / time over the passes (default 5; 0 = the\n"
    "                   better of the passes before and after all the cases)\n"
    "  --check-during   check each step's output against the fp64 reference before the\n"
    "                   next step (default: the checked rows are kept and checked after\n"
    "                   the steps, which then run back to back as in a decode loop; the\n"
    "                   check of 16 heads over 32k tokens takes ~0.2 s, an idle GPU)\n"
    "  --json PATH      default: a new bench/results/swap-<host>-<UTC time>.json (never a\n"
    "                   committed record; ./ when there is no bench/results)\n";

static void json_rec(FILE *f, int *first, const char *cas, const char *metric, double v,
                     double limit, int has_limit)
{
    fprintf(f, "%s  {\"case\": \"%s\", \"metric\": \"%s\", \"value\": %.6g, \"limit\": ",
            *first ? "" : ",\n", cas, metric, v);
    if (has_limit)
        fprintf(f, "%.6g}", limit);
    else
        fprintf(f, "null}");
    *first = 0;
}

static int in_list(const char *list, const char *name)
{
    if (!list)
        return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

typedef struct bench_row {
    const char *metric;
    double v, lim;
    int has;
    double target; /* the line on value / limit: > 0 at least, < 0 at
                    * most |target|; 0 = none */
} bench_row;

int cmd_bench_swap(int argc, char **argv)
{
    swap_opts o;
    swap_defaults(&o);
    o.batch = 1;
    o.layers = 1;
    o.steps = 5;
    int set_ctx = 0, set_steps = 0, set_raw = 0;
    int64_t res_ctx = 0; /* --resident-context; 0 = the default */
    int64_t host_tile = 0; /* --host-tile; 0 = the case's default */
    int check_during = 0;  /* --check-during: each step checked before the next */
    int64_t raw_every = 5; /* --raw-every: the disk case's interleaved raw passes */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s", bench_usage);
            return 0;
        } else if (!strcmp(a, "--host-tile") && i + 1 < argc) {
            char *end = NULL;
            host_tile = strtoll(argv[++i], &end, 10);
            if (!end || *end || host_tile < 1 || host_tile > (1 << 20)) {
                fprintf(stderr, "spillway bench swap: --host-tile wants 1..1048576 blocks, "
                                "not '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--resident-context") && i + 1 < argc) {
            char *end = NULL;
            res_ctx = strtoll(argv[++i], &end, 10);
            if (!end || *end || res_ctx < 16 || res_ctx > ((int64_t)1 << 24)) {
                fprintf(stderr, "spillway bench swap: --resident-context wants 16..16777216 "
                                "tokens, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--raw-every") && i + 1 < argc) {
            char *end = NULL;
            const char *v = argv[++i];
            raw_every = strtoll(v, &end, 10);
            if (!end || end == v || *end || raw_every < 0 || raw_every > 1000) {
                fprintf(stderr, "spillway bench swap: --raw-every wants 0..1000 steps, not '%s'\n",
                        argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--quick")) {
            o.quick = 1;
        } else if (!strcmp(a, "--check-during")) {
            check_during = 1;
        } else if ((!strcmp(a, "--json") || !strcmp(a, "--cases")) && i + 1 < argc) {
            if (!strcmp(a, "--json"))
                o.json = argv[++i];
            else
                o.cases = argv[++i];
        } else {
            int t = swap_opt(argc, argv, &i, &o);
            if (t < 0)
                return 2;
            if (!t) {
                fprintf(stderr, "spillway bench swap: unknown option '%s'\n%s", a, bench_usage);
                return 2;
            }
            set_ctx |= !strcmp(a, "--context");
            set_steps |= !strcmp(a, "--steps");
            set_raw |= !strcmp(a, "--raw-mb");
        }
    }
    if (o.quick) {
        if (!set_ctx)
            o.context = 4096;
        if (!set_steps)
            o.steps = 2;
        if (!set_raw)
            o.raw_mb = 64;
    }
    if (swap_opts_check(&o))
        return 2;

    static const struct {
        const char *key, *name;
        double pool, host;
        int32_t dev_tile;
    } cases[] = {{"disk", "disk-bound", 25, 0, 64},
                 {"host", "host-tier-bound", 25, 125, 512},
                 {"resident", "all-resident", 100, 0, 0}};
    scratch s;
    if (scratch_open(&s, o.dir, o.keep, "bench-swap"))
        return 1;
    printf("spillway %s bench swap: %s (file system: %s%s)\n", sw_version_string(), s.work, s.fs,
           s.tmpfs ? " -- RAM, not a disk: the disk figures say nothing about I/O" : "");
    gpu_note(&o);
    const int dev = use_device(&o);
    const uint64_t kv = (uint64_t)o.batch * o.layers * (uint64_t)o.context * 2 * 256 * 4;
    uint64_t raw = o.raw_mb << 20;
    scratch_raw_write(&s, raw);
    scratch_raw_pass(&s);
    const uint64_t set = kv < (512u << 20) ? kv : (512u << 20);
    const double mc = swt_memcpy_pieces(set > (16u << 20) ? set : (16u << 20), 8192, 64);
    printf("  memcpy of 8 KiB pieces over %.0f MiB: %.3f GB/s (best of 3)\n",
           (set > (16u << 20) ? set : (16u << 20)) / MIB, mc);
    double h2d = -1, d2d = -1;
    if (dev) {
        h2d = swt_h2d_pinned(256u << 20);
        d2d = swt_d2d_copy(1024u << 20);
        printf("  GPU 0: pinned host-to-device cudaMemcpy of 256 MiB: %.2f GB/s; device-to-device "
               "cudaMemcpy of 1 GiB: %.1f GB/s (2 x bytes / time); best of 5, CUDA events\n",
               h2d, d2d);
    }

    swt_result res[3];
    swt_case cs[3];
    int ran[3] = {0, 0, 0}, failed = 0, err = 0;
    for (int k = 0; k < 3; k++) {
        if (!in_list(o.cases, cases[k].key))
            continue;
        swap_opts ok = o;
        if (k == 1 && host_tile > 0)
            ok.tile = (int32_t)host_tile;
        if (k < 2 && use_device(&o) && !o.quick && !set_steps)
            ok.steps = 30; /* a GPU's step is 1-30 ms: five gave means 20% apart (session 11) */
        if (k == 2 && use_device(&o) && !o.quick) {
            /* the all-resident case at the D2D reference's byte count */
            ok.context = res_ctx > 0 ? res_ctx : 524288;
            if (ok.context > o.context) {
                ok.steps = o.steps < 2 ? o.steps : 2;
                ok.warmup = o.warmup < 1 ? o.warmup : 1;
            }
        } else if (k == 2 && res_ctx > 0) {
            ok.context = res_ctx;
        }
        cs[k] = make_case(cases[k].name, &ok, cases[k].pool, cases[k].host, cases[k].dev_tile);
        cs[k].check_after = !check_during;
        if (k == 0 && raw_every > 0 && s.raw_bytes >= (16u << 20)) {
            /* the disk case's limit: raw passes between its timed steps */
            uint64_t slice = s.raw_bytes / 4 / (4u << 20) * (4u << 20);
            cs[k].raw_path = s.raw;
            cs[k].raw_file_bytes = s.raw_bytes;
            cs[k].raw_slice_bytes = slice < (64u << 20) ? slice : (64u << 20);
            cs[k].raw_every = (int32_t)raw_every;
        }
        printf("\n-- %s --\n", cases[k].name);
        print_setup(&cs[k]);
        if (cs[k].device_pool)
            printf("  device pool: tile %d blocks\n", cs[k].tile_blocks);
        fflush(stdout);
        char store_dir[4300];
        snprintf(store_dir, sizeof store_dir, "%s/store-%s", s.work, cases[k].key);
        /* The tile kernels are timed with CUDA events in the all-resident
         * case only (the engine then waits for its kernels each call). */
        if (cs[k].device_pool && k == 2) {
            cs[k].kernel_timing = 1;
            cs[k].kernel_reps = 20;
        }
        const int rc = swt_run_case(&cs[k], store_dir, &res[k]);
        if (rc) {
            err = 1;
            break;
        }
        if (!o.keep)
            swt_rmtree(store_dir);
        ran[k] = 1;
        failed += !res[k].ok;
    }
    scratch_raw_pass(&s);
    const double rawb = scratch_raw_best(&s);
    /* The disk case is held against the raw passes interleaved with its
     * steps when they ran (the same minutes: on the H200's VM disk one pass
     * of the same shape read 2.0-2.8 GB/s from round to round,
     * the logs added in 54b7b66), else the better of before / after. */
    const double rawi = ran[0] ? swt_raw_interleaved_gbps(&res[0]) : -1;
    const double rawd = rawi > 0 ? rawi : rawb;
    printf("\n");
    print_raw(&s);
    if (rawi > 0)
        print_raw_interleaved(&res[0], rawb);
    else if (ran[0] && res[0].raw_passes > 0)
        printf("  raw O_DIRECT reads interleaved with the disk case's steps: every pass failed; "
               "its limit is the before / after passes' better\n");
    for (int k = 0; k < 3; k++)
        if (ran[k]) {
            printf("\n-- %s --\n", cases[k].name);
            print_case(&cs[k], &res[k], k == 0 ? rawd : rawb);
        }

    /* Table + JSON. */
    char host[128], path[4096];
    tool_host_slug(host, sizeof host);
    FILE *js = tool_result_open(o.json, "swap", path, sizeof path);
    if (!js)
        fprintf(stderr, "spillway bench swap: %s: %s\n", path, strerror(errno));
    int first = 1;
    if (js) {
        fprintf(js, "[\n");
        if (rawb > 0)
            json_rec(js, &first, "reference", "raw_odirect_seq_read_GBps", rawb, 0, 0);
        if (rawi > 0)
            json_rec(js, &first, "reference", "raw_odirect_interleaved_GBps", rawi, 0, 0);
        json_rec(js, &first, "reference", "memcpy_8KiB_pieces_GBps", mc, 0, 0);
        if (h2d > 0)
            json_rec(js, &first, "reference", "h2d_pinned_GBps", h2d, 0, 0);
        if (d2d > 0)
            json_rec(js, &first, "reference", "d2d_copy_GBps", d2d, 0, 0);
    }
    printf("\n%-16s %-22s %12s %12s %8s  %s\n", "case", "metric", "value", "limit", "ratio",
           "target");
    for (int k = 0; k < 3; k++) {
        if (!ran[k])
            continue;
        const derived d = derive(&cs[k], &res[k]);
        const char *n = cases[k].name;
        bench_row rows[48];
        int nr = 0;
        const swt_result *rr = &res[k];
        if (k == 0) {
            /* "a decode step takes <= 1.15 x (bytes read from disk / raw
             * bandwidth)": bytes per step / step time >= raw / 1.15 (the
             * issue's GPU line; held against the CPU engine too, without a
             * target on the rate) */
            rows[nr++] = (bench_row){"disk_read_GBps", d.disk_gbps, rawd, rawd > 0,
                                     cs[k].device_pool ? 1.0 / 1.15 : 0};
            const double raw_ms = rawd > 0 ? rr->file_bytes_read / rr->steps / (rawd * 1e9) * 1e3
                                           : 0;
            rows[nr++] = (bench_row){"step_ms_vs_1.15x_disk_ms", d.step_s * 1e3, 1.15 * raw_ms,
                                     raw_ms > 0, -1.0};
            /* context: against the better of the before / after passes */
            if (rawi > 0 && rawb > 0)
                rows[nr++] = (bench_row){"disk_read_GBps_vs_raw_before_after", d.disk_gbps,
                                         rawb, 1, 0};
            /* context for a noisy disk: not the verdict (that is the mean) */
            rows[nr++] = (bench_row){"step_ms_median", step_ms_rank(rr, 0.5), 0, 0, 0};
        } else if (cs[k].device_pool) {
            /* The other two GPU figures, each against its same-run
             * limit and its target. */
            if (k == 1) {
                const double g = rr->attend_seconds > 0
                                     ? rr->host_bytes_read / rr->attend_seconds / 1e9 : 0;
                rows[nr++] = (bench_row){"host_tier_read_GBps", g, h2d, h2d > 0, 0.80};
                /* context for a jittery host: not the verdict (that is the mean) */
                const double med = ms_rank(rr->attend_ms, rr->nstep_ms, 0.5);
                rows[nr++] = (bench_row){"attend_ms_median", med, 0, 0, 0};
                if (med > 0)
                    rows[nr++] = (bench_row){"host_tier_read_GBps_at_median",
                                             rr->host_bytes_read / rr->steps / (med * 1e-3) / 1e9,
                                             h2d, h2d > 0, 0};
            } else {
                /* steady state (the kernel loop) is the figure; the per-step
                 * one follows seconds of host-side checking (idle GPU) */
                const double gl = rr->loop_kernel_seconds > 0
                                      ? rr->loop_kernel_kv_bytes / rr->loop_kernel_seconds / 1e9
                                      : 0;
                if (rr->loop_reps > 0) {
                    rows[nr++] = (bench_row){"tile_kernel_read_GBps", gl, d2d, d2d > 0, 0.60};
                    rows[nr++] = (bench_row){"tile_kernel_ms_per_attend",
                                             rr->loop_kernel_seconds / rr->loop_reps /
                                                 cs[k].layers * 1e3, 0, 0, 0};
                    rows[nr++] = (bench_row){"loop_attend_ms",
                                             rr->loop_attend_seconds / rr->loop_reps /
                                                 cs[k].layers * 1e3, 0, 0, 0};
                }
                const double g = rr->kernel_seconds > 0
                                     ? rr->kernel_kv_bytes / rr->kernel_seconds / 1e9 : 0;
                rows[nr++] = (bench_row){"tile_kernel_GBps_steps", g, d2d, d2d > 0, 0};
                rows[nr++] = (bench_row){"tile_kernel_ms_per_step",
                                         rr->kernel_seconds / rr->steps * 1e3, 0, 0, 0};
            }
        } else if (k == 1)
            rows[nr++] = (bench_row){"host_tier_read_GBps", d.host_gbps, mc, 1, 0};
        else
            rows[nr++] = (bench_row){"kv_attended_GBps", d.kv_gbps, mc, 1, 0};
        if (cs[k].device_pool)
            rows[nr++] = (bench_row){"attend_ms_per_step", rr->attend_seconds / rr->steps * 1e3,
                                     0, 0, 0};
        rows[nr++] = (bench_row){"tokens_per_s", d.tokens_per_s, 0, 0, 0};
        rows[nr++] = (bench_row){"bytes_read_per_step", d.read_per_step, 0, 0, 0};
        rows[nr++] = (bench_row){"pool_hit_rate", d.pool_rate, 0, 0, 0};
        rows[nr++] = (bench_row){"host_tier_hit_rate", d.host_tier_rate, 0, 0, 0};
        rows[nr++] = (bench_row){"compute_ms_per_step",
                                 res[k].compute_seconds / res[k].steps * 1e3, 0, 0, 0};
        rows[nr++] = (bench_row){"read_wait_ms_per_step",
                                 res[k].read_wait_seconds / res[k].steps * 1e3, 0, 0, 0};
        rows[nr++] = (bench_row){"score_ms_per_step",
                                 res[k].score_seconds / res[k].steps * 1e3, 0, 0, 0};
        rows[nr++] = (bench_row){"plan_ms_per_step",
                                 res[k].plan_seconds / res[k].steps * 1e3, 0, 0, 0};
        rows[nr++] = (bench_row){"submit_ms_per_step",
                                 res[k].submit_seconds / res[k].steps * 1e3, 0, 0, 0};
        rows[nr++] = (bench_row){"finish_ms_per_step",
                                 res[k].finish_seconds / res[k].steps * 1e3, 0, 0, 0};
        rows[nr++] = (bench_row){"read_ahead_tiles", res[k].swap.prefetch, 0, 0, 0};
        const swt_diskpath dp = swt_disk_path(&res[k]);
        if (dp.has_store) {
            rows[nr++] = (bench_row){"read_tickets_per_step", dp.tickets, 0, 0, 0};
            rows[nr++] = (bench_row){"store_requests_per_step", dp.ios, 0, 0, 0};
            rows[nr++] = (bench_row){"store_request_KiB", dp.io_kib, 0, 0, 0};
        }
        if (dp.has_proc)
            rows[nr++] = (bench_row){"read_through_ratio", dp.through, 0, 0, 0};
        const swt_qprof *qp = &res[k].qp;
        if (qp->ok && qp->elapsed_ns > 0 && qp->requests > 0) {
            const double e = qp->elapsed_ns;
            rows[nr++] = (bench_row){"queue_mean_MiB_on_device", qp->byte_ns / e / MIB, 0, 0, 0};
            rows[nr++] = (bench_row){"queue_idle_frac", 1 - qp->busy_ns / e, 0, 0, 0};
            rows[nr++] = (bench_row){"queue_request_KiB",
                                     (double)qp->request_bytes / qp->requests / 1024, 0, 0, 0};
        }
        if (dp.has_dev) {
            rows[nr++] = (bench_row){"dev_read_KiB", dp.dev_kib, 0, 0, 0};
            rows[nr++] = (bench_row){"dev_busy_frac", dp.busy, 0, 0, 0};
            rows[nr++] = (bench_row){"dev_reads_in_flight", dp.in_flight, 0, 0, 0};
            rows[nr++] = (bench_row){"dev_ms_per_read", dp.read_ms, 0, 0, 0};
        }
        rows[nr++] = (bench_row){"max_rel_l2", res[k].max_rel_l2, 1e-2, 1, -1.0};
        for (int i = 0; i < nr; i++) {
            if (rows[i].has && rows[i].target != 0) {
                const double ratio = rows[i].v / rows[i].lim, t = rows[i].target;
                const int met = t > 0 ? ratio >= t : ratio <= -t;
                printf("%-16s %-22s %12.4g %12.4g %7.1f%%  %s%.0f%% %s\n", n, rows[i].metric,
                       rows[i].v, rows[i].lim, 100 * ratio, t > 0 ? ">=" : "<=", 100 * fabs(t),
                       met ? "met" : "MISSED");
            } else if (rows[i].has)
                printf("%-16s %-22s %12.4g %12.4g %7.1f%%\n", n, rows[i].metric, rows[i].v,
                       rows[i].lim, 100 * rows[i].v / rows[i].lim);
            else
                printf("%-16s %-22s %12.4g %12s %8s\n", n, rows[i].metric, rows[i].v, "-", "");
            if (js)
                json_rec(js, &first, n, rows[i].metric, rows[i].v, rows[i].lim, rows[i].has);
        }
    }
    if (js) {
        fprintf(js, "\n]\n");
        fclose(js);
        printf("results: %s\n", path);
    }
    scratch_close(&s);
    if (err || failed)
        printf("FAIL: %s\n", err ? "a case stopped on an error" : "a case missed the reference");
    return err || failed ? 1 : 0;
}
