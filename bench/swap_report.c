/* The swap benchmark's options, cases, scratch directory and report,
 * shared by spillway-bench-swap (swap.c) and part 2 of `spillway demo`
 * (tools/demo.c); swap_run.c runs a case. */
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

const char swt_opts_help[] =
    "  --context N      tokens per sequence, 16..16777216\n"
    "  --batch N        sequences decoded together, 1..64\n"
    "  --layers N       layers, 1..64\n"
    "  --shape hQ-K/dD  query heads Q, kv heads K (dividing Q), head_dim D in 64, 128,\n"
    "                   256 (default h16-2/d256; h32-8/d128 is Llama-3-8B's)\n"
    "  --steps N        timed decode steps, after --warmup-steps N\n"
    "  --pool-pct P     engine pool, % of the KV blocks, (0, 200] (>= 100: all resident)\n"
    "  --host-pct P     store host tier, % of the KV bytes, [0, 200] (0 = none)\n"
    "  --check-heads N  query heads checked per sequence, layer and step (0 = all)\n"
    "  --raw-mb N       size of the raw-read file, MiB, 16..65536\n"
    "  --dir D          parent of the scratch directory (default /var/tmp; a disk, not\n"
    "                   tmpfs: the file system type is printed)\n"
    "  --keep           keep the scratch directory\n"
    "  --host-pool      run the engine's host pool (CPU attention) even with a GPU; by\n"
    "                   default a usable GPU gets the device pool (GPU 0)\n"
    "  --prefetch-depth N  tiles whose reads are in flight while one computes, 0..32\n"
    "                   (default: the engine's, 4)\n"
    "  --tile N         blocks per tile, 0..65536 (default 0: the engine's; the bench's\n"
    "                   cases set their own with a GPU; at most the pool)\n"
    "  --io-buffer-mb N the store's pinned bounce buffer for reads, MiB, 0..4096 (default\n"
    "                   0: the store's, 32 MiB; read tickets in flight or not yet waited\n"
    "                   for hold regions of it)\n";

int swt_opt_parse(int argc, char **argv, int *i, swt_opts *o)
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
                                             "--prefetch-depth", "--tile", "--io-buffer-mb",
                                             "--shape"};
    if (!bench_opt_is(a, with_value, sizeof with_value / sizeof with_value[0]))
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "spillway: option '%s' needs a value\n", a);
        return -1;
    }
    const char *v = argv[++*i];
    int64_t num = 0;
    int bad = 0;
#define SWT_INT(opt, lo, hi, field)                                                    \
    else if (!strcmp(a, opt)) {                                                       \
        bad = bench_arg_i64("spillway", a, v, (lo), (hi), "", &num) != 0;             \
        field = num;                                                                  \
    }
    if (!strcmp(a, "--dir")) o->dir = v;
    SWT_INT("--context", 16, (int64_t)1 << 24, o->context)
    SWT_INT("--batch", 1, 64, o->batch)
    SWT_INT("--layers", 1, 64, o->layers)
    SWT_INT("--steps", 1, 1000000, o->steps)
    SWT_INT("--warmup-steps", 0, 1000000, o->warmup)
    SWT_INT("--check-heads", 0, 256, o->check_heads)
    SWT_INT("--raw-mb", 16, 65536, o->raw_mb)
    SWT_INT("--prefetch-depth", 0, 32, o->prefetch_depth)
    SWT_INT("--tile", 0, 65536, o->tile)
#undef SWT_INT
    else if (!strcmp(a, "--pool-pct") || !strcmp(a, "--host-pct")) {
        /* a whole number, or one with a fraction; nothing after it */
        char *end = NULL;
        const double x = strtod(v, &end);
        bad = end == v || *end;
        if (bad)
            fprintf(stderr, "spillway: %s wants a number, not '%s'\n", a, v);
        else if (!strcmp(a, "--pool-pct"))
            o->pool_pct = x;
        else
            o->host_pct = x;
    }
    else if (!strcmp(a, "--shape")) {
        int q = 0, k = 0, d = 0, n = 0;
        if (sscanf(v, "h%d-%d/d%d%n", &q, &k, &d, &n) != 3 || v[n] != '\0' || q < 1 || k < 1 ||
            q > 256 || q % k != 0 || (d != 64 && d != 128 && d != 256)) {
            fprintf(stderr, "spillway: --shape %s: want hQ-K/dD, K dividing Q (Q <= 256), D "
                            "64, 128 or 256 (e.g. h32-8/d128)\n", v);
            return -1;
        }
        o->qo_heads = q;
        o->kv_heads = k;
        o->head_dim = d;
    }
    else if (!strcmp(a, "--io-buffer-mb")) {
        char *end = NULL;
        const long mb = strtol(v, &end, 10);
        o->io_buffer_mb = end != v && !*end && mb >= 0 && mb <= 4096 ? (int32_t)mb : -1;
    }
    return bad ? -1 : 1;
}

int swt_opts_check(const swt_opts *o)
{
    if (o->context < 16 || o->context > (1 << 24) || o->batch < 1 || o->batch > 64 ||
        o->layers < 1 || o->layers > 64 || o->steps < 1 || o->warmup < 0 ||
        o->check_heads < 0 || !(o->pool_pct > 0 && o->pool_pct <= 200) ||
        !(o->host_pct >= 0 && o->host_pct <= 200) || o->raw_mb < 16 || o->raw_mb > 65536 ||
        o->prefetch_depth < -1 || o->prefetch_depth > 32 || o->tile < 0 || o->tile > 65536 ||
        o->io_buffer_mb < 0 || o->io_buffer_mb > 4096) {
        fprintf(stderr, "spillway: need --context 16..16M, --batch 1..64, --layers 1..64, "
                        "--steps >= 1, --warmup-steps >= 0, --check-heads >= 0, "
                        "--pool-pct in (0, 200], --host-pct in [0, 200], --raw-mb 16..65536, "
                        "--prefetch-depth 0..32, --tile 0..65536, --io-buffer-mb 0..4096\n");
        return 2;
    }
    return 0;
}

/* 1 when the engine runs its device pool (GPU 0). */
int swt_use_device(const swt_opts *o)
{
    return !o->host_pool && sw_cuda_device_count() > 0;
}

/* The options' model shape (--shape; default h16-2/d256), block 16. A device
 * pool reads `dev_tile` blocks per tile (0 = every block of a sequence):
 * each tile read is one store call and each tile one kernel launch, so
 * larger tiles amortise both. */
swt_case swt_make_case(const char *name, const swt_opts *o, double pool_pct, double host_pct,
                       int32_t dev_tile)
{
    swt_case c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.qo_heads = o->qo_heads;
    c.kv_heads = o->kv_heads;
    c.head_dim = o->head_dim;
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
    c.device_pool = swt_use_device(o);
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

int swt_scratch_open(swt_scratch *s, const char *dir, int keep, const char *tag)
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
    if (!keep)
        bench_scratch_guard(s->work); /* (removed on SIGINT / SIGTERM too) */
    return 0;
}

void swt_scratch_close(swt_scratch *s)
{
    if (!s->work[0])
        return;
    if (s->keep)
        printf("  kept %s\n", s->work);
    else {
        bench_scratch_unguard(s->work);
        swt_rmtree(s->work);
    }
}

/* The raw O_DIRECT read of the same file system, measured by its own loop
 * over a file it wrote (O_DIRECT, fsync'ed): once before and once after the
 * timed work; the limit is the better pass. tmpfs is said, not hidden. */
void swt_scratch_raw_write(swt_scratch *s, uint64_t bytes)
{
    s->raw_bytes = bytes;
    int e = swt_raw_write(s->raw, bytes);
    if (e) {
        printf("  raw O_DIRECT file: cannot write (%s): no raw-read figure%s\n", strerror(-e),
               s->tmpfs ? " (tmpfs)" : "");
        s->raw_bytes = 0;
    }
}

void swt_scratch_raw_pass(swt_scratch *s)
{
    if (!s->raw_bytes || s->raw_n >= 2)
        return;
    double g = swt_raw_read(s->raw, s->raw_bytes);
    if (g > 0)
        s->raw_gbps[s->raw_n++] = g;
}

double swt_scratch_raw_best(const swt_scratch *s)
{
    double b = -1;
    for (int i = 0; i < s->raw_n; i++)
        b = s->raw_gbps[i] > b ? s->raw_gbps[i] : b;
    return b;
}

void swt_print_raw(const swt_scratch *s)
{
    if (!s->raw_n) {
        /* (no file, when its write failed: said when it did) */
        printf("  raw O_DIRECT sequential read: not measured (%s %s)\n",
               s->raw_bytes ? "O_DIRECT refused on" : "no raw file written on", s->fs);
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
void swt_print_raw_interleaved(const swt_result *r, double before_after)
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

/* The step time at rank q (0 = min, 0.5 = median, 1 = max) of the recorded
 * timed steps; 0 when none. */
double swt_ms_rank(const double *ms, int32_t nms, double q)
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

double swt_step_ms_rank(const swt_result *r, double q)
{
    return swt_ms_rank(r->step_ms, r->nstep_ms, q);
}

swt_derived swt_derive(const swt_case *c, const swt_result *r)
{
    swt_derived d;
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

void swt_print_case(const swt_case *c, const swt_result *r, double raw)
{
    const swt_derived d = swt_derive(c, r);
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
               swt_step_ms_rank(r, 0.0), swt_step_ms_rank(r, 0.5), swt_step_ms_rank(r, 1.0));
    if (r->nstep_ms > 1) {
        printf("    attend calls: min %.2f, median %.2f, max %.2f ms; each:",
               swt_ms_rank(r->attend_ms, r->nstep_ms, 0.0), swt_ms_rank(r->attend_ms, r->nstep_ms, 0.5),
               swt_ms_rank(r->attend_ms, r->nstep_ms, 1.0));
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
           "%llu evictions, %llu block visits through kept host-tier leases, %llu of %llu "
           "blocks landed ahead read by their call in the timed steps\n",
           r->swap.resident_blocks, r->swap.tile_blocks, r->swap.predictor_rank,
           r->swap.prefetch, sw_swap_policy_name(r->swap.policy),
           (unsigned long long)r->evictions, (unsigned long long)r->kept_visits,
           (unsigned long long)r->ahead_used, (unsigned long long)r->ahead_blocks);
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

void swt_print_setup(const swt_case *c)
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

void swt_print_engine(const swt_opts *o)
{
    if (swt_use_device(o))
        printf("  engine: device pool on GPU 0 (slots in GPU memory, CUDA tile kernels)\n");
    else if (sw_cuda_device_count() > 0)
        printf("  engine: host pool with CPU attention (--host-pool), although a GPU is present\n");
    else
        printf("  engine: host pool with CPU attention (no usable GPU)\n");
}

void swt_opts_default(swt_opts *o)
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
    o->qo_heads = 16;
    o->kv_heads = 2;
    o->head_dim = 256;
}

