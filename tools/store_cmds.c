/* `spillway store bench|verify|inspect`: a thin client of the block store's
 * public API (spillway_store.h), in the spirit of mdb_stat.
 *
 * bench measures, on one file system and in one run: the disk's own
 * O_DIRECT sequential and 64 KiB random reads (minimal loops of its own over
 * a file it wrote and fsync'ed), the store's batched tile reads (8 KiB
 * stripes, a tile = tile_blocks consecutive blocks of one stream read by one
 * sw_store_read call), host-tier hits, and a plain memcpy of the same bytes;
 * prints the ratios and writes a JSON list of results. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tool_common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

static int die_status(const char *what, sw_status st)
{
    fprintf(stderr, "spillway store: %s: %s: %s\n", what, sw_status_str(st), sw_last_error());
    return 1;
}

static sw_status open_existing(const char *dir, uint64_t host_bytes, sw_store **s)
{
    sw_store_config c;
    sw_store_config_init(&c);
    c.dir = dir;
    c.create = 0;
    c.stripe_bytes = 0; /* as created */
    c.run_blocks = 0;
    c.host_tier_bytes = host_bytes;
    return sw_store_open(&c, s);
}

static const char *fs_name(long type)
{
    switch ((unsigned long)type) {
    case EXT4_SUPER_MAGIC: return "ext2/3/4";
    case XFS_SUPER_MAGIC: return "xfs";
    case BTRFS_SUPER_MAGIC: return "btrfs";
    case TMPFS_MAGIC: return "tmpfs";
    case OVERLAYFS_SUPER_MAGIC: return "overlayfs";
    case NFS_SUPER_MAGIC: return "nfs";
    case 0x65735546: return "fuse";
    case 0x2fc12fc1: return "zfs";
    default: return "unknown";
    }
}

/* ------------------------------------------------------------- inspect -- */
typedef struct ns_count {
    uint64_t ns, stripes, bytes, k, v;
    uint32_t layer_max, kv_head_max;
} ns_count;

typedef struct ns_table {
    ns_count *a;
    size_t n, cap;
    int oom;
} ns_table;

static int ns_visit(void *ctx, const sw_store_entry *e)
{
    ns_table *t = (ns_table *)ctx;
    size_t i = 0;
    while (i < t->n && t->a[i].ns != e->key.ns)
        i++;
    if (i == t->n) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 16;
            ns_count *a = (ns_count *)realloc(t->a, cap * sizeof *a);
            if (!a) {
                t->oom = 1;
                return 1;
            }
            t->a = a;
            t->cap = cap;
        }
        memset(&t->a[t->n], 0, sizeof t->a[0]);
        t->a[t->n++].ns = e->key.ns;
    }
    ns_count *c = &t->a[i];
    c->stripes++;
    c->bytes += e->length;
    if (e->key.kind == SW_STORE_KIND_K)
        c->k++;
    else
        c->v++;
    if (e->key.layer > c->layer_max)
        c->layer_max = e->key.layer;
    if (e->key.kv_head > c->kv_head_max)
        c->kv_head_max = e->key.kv_head;
    return 0;
}

static const char *need_dir(int argc, char **argv, const char *cmd)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return NULL;
        else {
            fprintf(stderr, "spillway store %s: unknown option '%s'\n", cmd, argv[i]);
            return NULL;
        }
    }
    if (!dir)
        fprintf(stderr, "usage: spillway store %s --dir DIR\n", cmd);
    return dir;
}

static void print_stats(const sw_store_stats *st)
{
    double mib = 1048576.0;
    printf("geometry:   stripe %llu B, extent %llu B, run %llu extents + %llu B header, "
           "%llu runs\n",
           (unsigned long long)st->stripe_bytes, (unsigned long long)st->extent_bytes,
           (unsigned long long)st->run_blocks, (unsigned long long)st->run_header_bytes,
           (unsigned long long)st->runs_total);
    printf("data file:  %.1f MiB, capacity %.1f MiB in %llu extents, store id %016llx\n",
           st->file_bytes / mib, st->capacity_bytes / mib,
           (unsigned long long)st->extents_total, (unsigned long long)st->store_id);
    printf("occupancy:  %llu of %llu extents (%.1f%%), %.1f MiB used, %.1f MiB payload, "
           "%llu of %llu runs in use\n",
           (unsigned long long)st->extents_used, (unsigned long long)st->extents_total,
           st->extents_total ? 100.0 * st->extents_used / st->extents_total : 0.0,
           st->used_bytes / mib, st->payload_bytes / mib, (unsigned long long)st->runs_used,
           (unsigned long long)st->runs_total);
    printf("journal:    %llu records, %llu dropped at open, generation %llu\n",
           (unsigned long long)st->journal_records, (unsigned long long)st->journal_dropped,
           (unsigned long long)st->generation);
    printf("i/o:        %s, %s, queue depth %llu, buffer %.1f MiB\n",
           sw_store_io_backend_name(st->io_backend), st->direct_io ? "O_DIRECT" : "buffered",
           (unsigned long long)st->queue_depth, st->io_buffer_bytes / mib);
}

static int cmd_store_inspect(int argc, char **argv)
{
    const char *dir = need_dir(argc, argv, "inspect");
    if (!dir)
        return 2;
    sw_store *s = NULL;
    sw_status st = open_existing(dir, 0, &s);
    if (st != SW_OK)
        return die_status("open", st);
    sw_store_stats ss;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    printf("store:      %s\n", dir);
    print_stats(&ss);
    ns_table t = {0};
    st = sw_store_iterate(s, ns_visit, &t);
    if (st != SW_OK || t.oom) {
        free(t.a);
        sw_store_close(s);
        return die_status("iterate", st != SW_OK ? st : SW_STATUS_NO_MEMORY);
    }
    printf("namespaces: %zu\n", t.n);
    if (t.n)
        printf("  %-18s %10s %10s %10s %12s %7s %8s\n", "namespace", "stripes", "K", "V",
               "payload MiB", "layers", "kv_heads");
    for (size_t i = 0; i < t.n; i++)
        printf("  0x%016llx %10llu %10llu %10llu %12.1f %7u %8u\n",
               (unsigned long long)t.a[i].ns, (unsigned long long)t.a[i].stripes,
               (unsigned long long)t.a[i].k, (unsigned long long)t.a[i].v,
               t.a[i].bytes / 1048576.0, t.a[i].layer_max + 1, t.a[i].kv_head_max + 1u);
    free(t.a);
    st = sw_store_close(s);
    return st == SW_OK ? 0 : die_status("close", st);
}

/* -------------------------------------------------------------- verify -- */
typedef struct bad_list {
    unsigned printed;
} bad_list;

static int verify_visit(void *ctx, const sw_store_entry *e)
{
    bad_list *b = (bad_list *)ctx;
    if (e->status != SW_OK && b->printed < 20) {
        b->printed++;
        printf("  %s: ns 0x%016llx layer %u block %u kv_head %u %c gen %llu extent %llu\n",
               sw_status_str(e->status), (unsigned long long)e->key.ns, e->key.layer,
               e->key.block, e->key.kv_head, e->key.kind ? 'V' : 'K',
               (unsigned long long)e->generation, (unsigned long long)e->extent);
    }
    return 0;
}

static int cmd_store_verify(int argc, char **argv)
{
    const char *dir = need_dir(argc, argv, "verify");
    if (!dir)
        return 2;
    sw_store *s = NULL;
    sw_status st = open_existing(dir, 0, &s);
    if (st != SW_OK)
        return die_status("open", st);
    sw_store_stats ss;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    bad_list b = {0};
    sw_store_verify_result r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    double t0 = tool_now();
    sw_status vst = sw_store_verify(s, verify_visit, &b, &r);
    double dt = tool_now() - t0;
    char err[512];
    snprintf(err, sizeof err, "%s", sw_last_error());
    printf("store %s: %llu stripes checked: %llu ok, %llu corrupt, %llu unreadable; "
           "%.1f MiB in %llu reads, %.2f s (%.2f GB/s)\n",
           dir, (unsigned long long)r.extents_checked, (unsigned long long)r.extents_ok,
           (unsigned long long)r.extents_corrupt, (unsigned long long)r.extents_io_error,
           r.bytes_read / 1048576.0, (unsigned long long)r.read_requests, dt,
           dt > 0 ? r.bytes_read / dt / 1e9 : 0.0);
    if (ss.journal_dropped)
        printf("journal: %llu damaged record(s) were dropped at open\n",
               (unsigned long long)ss.journal_dropped);
    sw_status cst = sw_store_close(s);
    if (vst != SW_OK) {
        fprintf(stderr, "spillway store verify: %s: %s\n", sw_status_str(vst), err);
        return 1;
    }
    if (cst != SW_OK)
        return die_status("close", cst);
    printf("ok\n");
    return 0;
}

/* --------------------------------------------------------------- bench -- */
typedef struct bench_opts {
    const char *dir;
    const char *json;
    uint64_t size_mb, host_mb;
    uint32_t tile_blocks, tiles_per_call, qd, stream_blocks;
    uint32_t inflight; /* store case: requests outstanding (read tickets); 0 = sw_store_read */
    int keep;
    uint32_t passes, host_passes;
} bench_opts;

#define MAX_PASSES 64

typedef struct result {
    char name[64];
    const char *impl;
    double gbps, seconds;
    uint64_t bytes, ops;
    double pass[MAX_PASSES]; /* per-pass figures; gbps is their median */
    int npass;
} result;

static uint64_t rng = 0x5eed5707eull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

/* I/O and copy buffers of the baselines: 2 MiB aligned and advised for
 * transparent huge pages, as the store's own bounce buffer and host tier
 * (sw_store_big_alloc), so that the raw reads and memcpy get the same
 * physically contiguous pages (fewer DMA segments, fewer TLB misses). */
static void *xalloc_huge(size_t n)
{
    size_t huge = (size_t)2 << 20, rounded = (n + huge - 1) & ~(huge - 1);
    void *p = NULL;
    if (posix_memalign(&p, huge, rounded) != 0) {
        fprintf(stderr, "spillway store bench: out of memory (%zu bytes)\n", rounded);
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    memset(p, 0, rounded);
    return p;
}

static void *xalloc_aligned(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, n) != 0) {
        fprintf(stderr, "spillway store bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    memset(p, 0, n);
    return p;
}

#define RAW_CHUNK (4u << 20)

static int raw_write(const char *path, uint64_t bytes, double *gbps)
{
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(path);
        return -1;
    }
    char *buf = (char *)xalloc_huge(RAW_CHUNK);
    for (size_t i = 0; i < RAW_CHUNK; i += 8) {
        uint64_t r = rnd();
        memcpy(buf + i, &r, 8);
    }
    double t0 = tool_now();
    for (uint64_t off = 0; off < bytes; off += RAW_CHUNK) {
        memcpy(buf, &off, sizeof off);
        if (pwrite(fd, buf, RAW_CHUNK, (off_t)off) != (ssize_t)RAW_CHUNK) {
            perror("raw write");
            close(fd);
            free(buf);
            return -1;
        }
    }
    if (fsync(fd) != 0)
        perror("fsync");
    *gbps = bytes / (tool_now() - t0) / 1e9;
    free(buf);
    close(fd);
    return 0;
}

typedef struct raw_job {
    int fd;
    uint64_t bytes, first, stride;
    size_t chunk;
    int random;
    uint64_t ops, seed;
    int err;
} raw_job;

static void *raw_read_thread(void *arg)
{
    raw_job *j = (raw_job *)arg;
    char *buf = (char *)xalloc_huge(j->chunk);
    uint64_t st = j->seed | 1;
    if (j->random) {
        uint64_t nchunks = j->bytes / j->chunk;
        for (uint64_t i = 0; i < j->ops; i++) {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            uint64_t off = (st % nchunks) * j->chunk;
            if (pread(j->fd, buf, j->chunk, (off_t)off) != (ssize_t)j->chunk)
                j->err = 1;
        }
    } else {
        for (uint64_t off = j->first; off + j->chunk <= j->bytes; off += j->stride) {
            if (pread(j->fd, buf, j->chunk, (off_t)off) != (ssize_t)j->chunk)
                j->err = 1;
            j->ops++;
        }
    }
    free(buf);
    return NULL;
}

/* Sequential (threads interleave chunks: QD = threads) or random reads. */
static int raw_read(const char *path, uint64_t bytes, size_t chunk, int threads, int random,
                    uint64_t random_ops, result *r)
{
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        perror(path);
        return -1;
    }
    raw_job jobs[16];
    pthread_t th[16];
    double t0 = tool_now();
    for (int t = 0; t < threads; t++) {
        jobs[t] = (raw_job){fd, bytes, (uint64_t)t * chunk, (uint64_t)threads * chunk, chunk,
                            random, random ? random_ops / threads : 0, rnd(), 0};
        pthread_create(&th[t], NULL, raw_read_thread, &jobs[t]);
    }
    uint64_t ops = 0;
    int err = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        ops += jobs[t].ops;
        err |= jobs[t].err;
    }
    double dt = tool_now() - t0;
    close(fd);
    if (err) {
        fprintf(stderr, "spillway store bench: raw read failed\n");
        return -1;
    }
    r->bytes = ops * chunk;
    r->ops = ops;
    r->seconds = dt;
    r->gbps = r->bytes / dt / 1e9;
    return 0;
}

static sw_store_key bench_key(uint32_t stream, uint32_t block)
{
    /* streams: kv_head fastest, then kind, then layer */
    sw_store_key k = {0x5b11a7ull, stream / 16, block, (uint16_t)(stream % 8),
                      (uint8_t)((stream / 8) % 2), 0};
    return k;
}

static void fill_stripe(char *p, size_t n, uint32_t stream, uint32_t block)
{
    uint64_t tag = ((uint64_t)stream << 32) | block;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = tag * 0x9e3779b97f4a7c15ull + i;
        memcpy(p + i, &v, 8);
    }
    memcpy(p, &tag, 8);
}

static int check_stripe(const char *p, uint32_t stream, uint32_t block)
{
    uint64_t tag = ((uint64_t)stream << 32) | block, got;
    memcpy(&got, p, 8);
    return got == tag;
}

static void print_result(const result *r, double ref)
{
    printf("  %-34s %-12s %8.3f GB/s", r->name, r->impl, r->gbps);
    if (ref > 0)
        printf("   %6.1f%%", 100.0 * r->gbps / ref);
    printf("\n");
}

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: spillway store bench [options]\n"
            "  --dir D              parent directory of the scratch files (default /var/tmp;\n"
            "                       a disk, not tmpfs: the file system type is printed)\n"
            "  --size-mb N          raw file and store data file size (default 2048)\n"
            "  --tile-blocks N      blocks of one stream per tile (default 64)\n"
            "  --tiles-per-call N   tiles per read request (default 1)\n"
            "  --inflight N         store case: read requests outstanding at once\n"
            "                       (sw_store_read_submit/_wait; default 8); 0 = one\n"
            "                       synchronous sw_store_read per request\n"
            "  --stream-blocks N    blocks per stream (default 512)\n"
            "  --qd N               store queue depth (default 64)\n"
            "  --host-mb N          host tier for the hit case (default 256)\n"
            "  --passes N           interleaved raw-seq / store passes over the whole file\n"
            "                       (default 5; medians and the median per-pass ratio)\n"
            "  --host-passes N      interleaved host-tier / memcpy passes (default 11)\n"
            "  --json PATH          results (default bench/results/store-<host>.json when\n"
            "                       bench/results exists, else ./store-<host>.json)\n"
            "  --keep               keep the scratch directory\n"
            "  --remote [HOST:PORT] the remote tier vs redis-benchmark GET instead (see\n"
            "                       'spillway store bench --remote --help')\n");
}

static int parse_bench(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){"/var/tmp", NULL, 2048, 256, 64, 1, 64, 512, 8, 0, 5, 11};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            return 1;
        } else if (!strcmp(a, "--keep")) {
            o->keep = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "spillway store bench: option '%s' needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--dir"))
            o->dir = v;
        else if (!strcmp(a, "--json"))
            o->json = v;
        else if (!strcmp(a, "--size-mb"))
            o->size_mb = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--host-mb"))
            o->host_mb = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--tile-blocks"))
            o->tile_blocks = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--tiles-per-call"))
            o->tiles_per_call = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--inflight"))
            o->inflight = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--stream-blocks"))
            o->stream_blocks = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--qd"))
            o->qd = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--passes"))
            o->passes = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--host-passes"))
            o->host_passes = (uint32_t)strtoul(v, NULL, 10);
        else {
            fprintf(stderr, "spillway store bench: unknown option '%s'\n", a);
            bench_usage(stderr);
            return 2;
        }
    }
    if (o->size_mb < 64 || !o->tile_blocks || !o->tiles_per_call || !o->qd || !o->passes ||
        !o->host_passes || o->passes > MAX_PASSES || o->host_passes > MAX_PASSES ||
        o->inflight > 64 ||
        o->stream_blocks < o->tile_blocks || o->stream_blocks % o->tile_blocks) {
        fprintf(stderr, "spillway store bench: need --size-mb >= 64, positive counts (passes "
                        "<= 64), --inflight <= 64, "
                        "stream-blocks a multiple of tile-blocks\n");
        return 2;
    }
    return 0;
}

#define STRIPE 8192u /* 16 tokens x d256 x BF16 */

/* Reads every tile (shuffled) of `ntiles` with one sw_store_read per
 * tiles_per_call tiles; checks every stripe's tag. */
static int store_tiles(sw_store *s, const bench_opts *o, const uint32_t *order, uint32_t ntiles,
                       char *dst, result *r)
{
    uint32_t per = o->tile_blocks * o->tiles_per_call;
    sw_store_key *keys = (sw_store_key *)calloc(per, sizeof *keys);
    void **dp = (void **)calloc(per, sizeof *dp);
    sw_status *sts = (sw_status *)calloc(per, sizeof *sts);
    uint32_t tiles_per_stream = o->stream_blocks / o->tile_blocks;
    for (uint32_t i = 0; i < per; i++)
        dp[i] = dst + (size_t)i * STRIPE;
    uint64_t bytes = 0, calls = 0;
    int bad = 0;
    double t0 = tool_now();
    for (uint32_t t = 0; t < ntiles; t += o->tiles_per_call) {
        uint32_t n = 0;
        for (uint32_t u = t; u < ntiles && u < t + o->tiles_per_call; u++) {
            uint32_t tile = order[u];
            uint32_t stream = tile / tiles_per_stream;
            uint32_t b0 = (tile % tiles_per_stream) * o->tile_blocks;
            for (uint32_t b = 0; b < o->tile_blocks; b++)
                keys[n++] = bench_key(stream, b0 + b);
        }
        sw_status st = sw_store_read(s, n, keys, dp, STRIPE, NULL, NULL, sts);
        if (st != SW_OK) {
            die_status("sw_store_read", st);
            bad = 1;
            break;
        }
        for (uint32_t i = 0; i < n; i++) {
            uint32_t tile = order[t + i / o->tile_blocks];
            if (!check_stripe((const char *)dp[i], tile / tiles_per_stream, keys[i].block))
                bad = 1;
        }
        bytes += (uint64_t)n * STRIPE;
        calls++;
    }
    double dt = tool_now() - t0;
    free(keys);
    free(dp);
    free(sts);
    if (bad) {
        fprintf(stderr, "spillway store bench: a stripe came back with the wrong bytes\n");
        return -1;
    }
    r->bytes = bytes;
    r->ops = calls;
    r->seconds = dt;
    r->gbps = bytes / dt / 1e9;
    return 0;
}

/* As store_tiles, but with o->inflight requests outstanding: request r
 * (tiles_per_call tiles) is submitted with sw_store_read_submit into its own
 * part of dst (inflight parts, each the size of one request), and waited for
 * inflight requests later, when its stripes' tags are checked. Each request
 * is still one tile's read as far as the caller is concerned. */
static int store_tiles_async(sw_store *s, const bench_opts *o, const uint32_t *order,
                             uint32_t ntiles, char *dst, result *r)
{
    uint32_t per = o->tile_blocks * o->tiles_per_call, D = o->inflight;
    uint32_t tiles_per_stream = o->stream_blocks / o->tile_blocks;
    uint32_t nreq = (ntiles + o->tiles_per_call - 1) / o->tiles_per_call;
    sw_store_key *keys = (sw_store_key *)calloc(per, sizeof *keys);
    void **dp = (void **)calloc((size_t)per * D, sizeof *dp);
    sw_status *sts = (sw_status *)calloc(per, sizeof *sts);
    uint64_t tickets[64];
    uint32_t nkeys[64];
    for (uint32_t i = 0; i < per * D; i++)
        dp[i] = dst + (size_t)i * STRIPE;
    uint64_t bytes = 0;
    int bad = 0;
    double t0 = tool_now();
    for (uint32_t q = 0; q < nreq + D && !bad; q++) {
        if (q >= D) { /* request q - D is done with its part of dst */
            uint32_t w = q - D, k = w % D, t = w * o->tiles_per_call;
            sw_status st = sw_store_read_wait(s, tickets[k], nkeys[k], NULL, NULL, sts);
            if (st != SW_OK) {
                die_status("sw_store_read_wait", st);
                bad = 1;
                break;
            }
            for (uint32_t i = 0; i < nkeys[k]; i++) {
                uint32_t tile = order[t + i / o->tile_blocks];
                uint32_t b = (tile % tiles_per_stream) * o->tile_blocks + i % o->tile_blocks;
                if (!check_stripe((const char *)dp[(size_t)k * per + i], tile / tiles_per_stream,
                                  b))
                    bad = 1;
            }
            bytes += (uint64_t)nkeys[k] * STRIPE;
        }
        if (q < nreq) {
            uint32_t k = q % D, n = 0;
            for (uint32_t u = q * o->tiles_per_call;
                 u < ntiles && u < (q + 1) * o->tiles_per_call; u++) {
                uint32_t tile = order[u];
                uint32_t stream = tile / tiles_per_stream;
                uint32_t b0 = (tile % tiles_per_stream) * o->tile_blocks;
                for (uint32_t b = 0; b < o->tile_blocks; b++)
                    keys[n++] = bench_key(stream, b0 + b);
            }
            sw_status st = sw_store_read_submit(s, n, keys, dp + (size_t)k * per, STRIPE,
                                                &tickets[k]);
            if (st != SW_OK) {
                die_status("sw_store_read_submit", st);
                bad = 1;
                break;
            }
            nkeys[k] = n;
        }
    }
    double dt = tool_now() - t0;
    free(keys);
    free(dp);
    free(sts);
    if (bad) {
        /* outstanding tickets are released by sw_store_close */
        fprintf(stderr, "spillway store bench: a stripe came back with the wrong bytes\n");
        return -1;
    }
    r->bytes = bytes;
    r->ops = nreq;
    r->seconds = dt;
    r->gbps = bytes / dt / 1e9;
    return 0;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double t[MAX_PASSES];
    if (n <= 0)
        return 0;
    memcpy(t, v, sizeof *t * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmp_dbl);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static void shuffle(uint32_t *a, uint32_t n)
{
    for (uint32_t i = n ? n - 1 : 0; i > 0; i--) {
        uint32_t j = (uint32_t)(rnd() % (i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Stores one pass's figure; r->gbps is the median of the passes. */
static void add_pass(result *r, const result *one)
{
    if (r->npass < MAX_PASSES)
        r->pass[r->npass++] = one->gbps;
    r->bytes += one->bytes;
    r->ops += one->ops;
    r->seconds += one->seconds;
    r->gbps = median(r->pass, r->npass);
}

/* The memcpy baseline of the host tier: the same stripes at the same
 * addresses relative to the set (the host tier takes its entries in the
 * order the warm-up pass read them, so tile pos[tile] of the set sits at
 * pos[tile] * tile bytes), the same tile order, the same destination, the
 * same tag check of every stripe as store_tiles. */
static int memcpy_tiles(const char *set, const uint32_t *pos, const bench_opts *o,
                        const uint32_t *order, uint32_t ntiles, char *dst, result *r)
{
    uint32_t tiles_per_stream = o->stream_blocks / o->tile_blocks;
    size_t tile_bytes = (size_t)o->tile_blocks * STRIPE;
    int bad = 0;
    double t0 = tool_now();
    for (uint32_t t = 0; t < ntiles; t += o->tiles_per_call) {
        uint32_t n = 0;
        for (uint32_t u = t; u < ntiles && u < t + o->tiles_per_call; u++) {
            const char *p = set + (size_t)pos[order[u]] * tile_bytes;
            for (uint32_t b = 0; b < o->tile_blocks; b++, n++)
                memcpy(dst + (size_t)n * STRIPE, p + (size_t)b * STRIPE, STRIPE);
        }
        __asm__ __volatile__("" ::"r"(dst) : "memory");
        for (uint32_t i = 0; i < n; i++) {
            uint32_t tile = order[t + i / o->tile_blocks];
            uint32_t b = (tile % tiles_per_stream) * o->tile_blocks + i % o->tile_blocks;
            if (!check_stripe(dst + (size_t)i * STRIPE, tile / tiles_per_stream, b))
                bad = 1;
        }
    }
    double dt = tool_now() - t0;
    if (bad) {
        fprintf(stderr, "spillway store bench: memcpy baseline copied the wrong bytes\n");
        return -1;
    }
    r->bytes = (uint64_t)ntiles * tile_bytes;
    r->ops = ntiles;
    r->seconds = dt;
    r->gbps = r->bytes / dt / 1e9;
    return 0;
}

static void print_passes(const char *what, const double *v, int n)
{
    printf("  %-22s", what);
    for (int i = 0; i < n; i++)
        printf(" %7.3f", v[i]);
    printf("   median %7.3f\n", median(v, n));
}

static int cmd_store_bench(int argc, char **argv)
{
    bench_opts o;
    int pr = parse_bench(argc, argv, &o);
    if (pr)
        return pr == 1 ? 0 : 2;

    char work[4096];
    snprintf(work, sizeof work, "%s/spillway-bench-XXXXXX", o.dir);
    if (!mkdtemp(work)) {
        fprintf(stderr, "spillway store bench: mkdtemp in '%s': %s\n", o.dir, strerror(errno));
        return 1;
    }
    struct statfs sfs;
    const char *fs = "unknown";
    if (statfs(work, &sfs) == 0)
        fs = fs_name((long)sfs.f_type);
    double load0[3] = {0, 0, 0}, load1[3] = {0, 0, 0};
    (void)getloadavg(load0, 3);
    printf("spillway store bench: %s (file system: %s%s)\n", work, fs,
           !strcmp(fs, "tmpfs") ? " -- RAM, not a disk: the figures say nothing about I/O" : "");
    printf("  size %llu MiB, stripes %u B, tile %u blocks, %u tile(s) per read request, "
           "%u request(s) in flight (store case), qd %u, "
           "host tier %llu MiB, %u interleaved disk passes, %u host passes\n",
           (unsigned long long)o.size_mb, STRIPE, o.tile_blocks, o.tiles_per_call, o.inflight,
           o.qd,
           (unsigned long long)o.host_mb, o.passes, o.host_passes);
    printf("  load average at start: %.2f %.2f %.2f\n", load0[0], load0[1], load0[2]);

    result res[16];
    memset(res, 0, sizeof res);
    int nres = 0;
    int rc = 1;
    uint64_t bytes = o.size_mb << 20;
    char raw_path[4200], store_dir[4200];
    snprintf(raw_path, sizeof raw_path, "%s/raw", work);
    snprintf(store_dir, sizeof store_dir, "%s/store", work);
    sw_store *s = NULL;
    char *dst = NULL, *src = NULL;
    uint32_t *order = NULL, *pos = NULL, *horder = NULL;
    sw_status st;

    /* 1. raw file; the random-read figure once */
    double wgbps = 0;
    if (raw_write(raw_path, bytes, &wgbps))
        goto out;
    printf("  raw file written (O_DIRECT, 4 MiB writes) and fsync'ed: %.3f GB/s\n", wgbps);
    result *raw4 = &res[nres++], *raw1 = &res[nres++], *rnd64 = &res[nres++];
    snprintf(raw4->name, sizeof raw4->name, "seq 4MiB qd1");
    raw4->impl = "raw-seq";
    snprintf(raw1->name, sizeof raw1->name, "seq 1MiB qd4 (4 threads)");
    raw1->impl = "raw-seq";
    snprintf(rnd64->name, sizeof rnd64->name, "rand 64KiB qd1");
    rnd64->impl = "raw-rand64k";
    {
        result one;
        if (raw_read(raw_path, bytes, 65536, 1, 1, 8192, &one))
            goto out;
        add_pass(rnd64, &one);
    }

    /* 2. the store, filled with whole streams */
    sw_store_config c;
    sw_store_config_init(&c);
    c.dir = store_dir;
    c.capacity_bytes = bytes;
    c.stripe_bytes = STRIPE;
    c.run_blocks = 64;
    c.queue_depth = o.qd;
    st = sw_store_open(&c, &s);
    if (st != SW_OK) {
        die_status("open", st);
        goto out;
    }
    sw_store_stats ss;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    uint32_t nstreams = (uint32_t)(ss.extents_total / o.stream_blocks);
    uint32_t tiles_per_stream = o.stream_blocks / o.tile_blocks;
    uint32_t ntiles = nstreams * tiles_per_stream;
    printf("  store: %s, %s, %llu extents, %u streams of %u blocks\n",
           sw_store_io_backend_name(ss.io_backend), ss.direct_io ? "O_DIRECT" : "buffered",
           (unsigned long long)ss.extents_total, nstreams, o.stream_blocks);
    char stripe[STRIPE];
    double t0 = tool_now();
    for (uint32_t b = 0; b < o.stream_blocks; b++)
        for (uint32_t q = 0; q < nstreams; q++) {
            sw_store_key k = bench_key(q, b);
            fill_stripe(stripe, STRIPE, q, b);
            st = sw_store_write(s, &k, stripe, STRIPE, NULL);
            if (st != SW_OK) {
                die_status("write", st);
                goto out;
            }
        }
    double wdt = tool_now() - t0;
    printf("  store filled: %u stripes in %.1f s (%.3f GB/s, %.0f us per write)\n",
           nstreams * o.stream_blocks, wdt, (double)nstreams * o.stream_blocks * STRIPE / wdt / 1e9,
           wdt * 1e6 / ((double)nstreams * o.stream_blocks));
    st = sw_store_close(s);
    s = NULL;
    if (st != SW_OK) {
        die_status("close", st);
        goto out;
    }

    /* 3. interleaved passes: raw seq (both configurations), then every tile
     * of the store (file tier, a fresh shuffle per pass). The verdict is the
     * median of the per-pass ratios store / better raw-seq of the same pass,
     * so that one noisy pass of the disk cannot decide it. */
    st = open_existing(store_dir, 0, &s);
    if (st != SW_OK) {
        die_status("reopen", st);
        goto out;
    }
    order = (uint32_t *)malloc(sizeof *order * ntiles);
    pos = (uint32_t *)malloc(sizeof *pos * ntiles);
    for (uint32_t i = 0; i < ntiles; i++)
        order[i] = i;
    size_t call_bytes = (size_t)o.tile_blocks * o.tiles_per_call * STRIPE;
    /* the caller's: plain pages; one part per outstanding request */
    dst = (char *)xalloc_aligned(call_bytes * (o.inflight ? o.inflight : 1));
    result *store_r = &res[nres++];
    if (o.inflight)
        snprintf(store_r->name, sizeof store_r->name, "tiles %ux8KiB, %u/req, %u in flight, shuf",
                 o.tile_blocks, o.tiles_per_call, o.inflight);
    else
        snprintf(store_r->name, sizeof store_r->name, "tiles %ux8KiB, %u/call, shuffled",
                 o.tile_blocks, o.tiles_per_call);
    store_r->impl = "store";
    /* Context, not the verdict: the disk's own figure for the store's access
     * pattern -- whole runs (one tile each) of the store's data file at
     * random run offsets, O_DIRECT pread, as many threads as requests in
     * flight (QD), no check, no copy. */
    result *rtile = &res[nres++];
    uint64_t run_bytes = ss.run_header_bytes + ss.run_blocks * ss.extent_bytes;
    uint32_t rt_threads = o.inflight ? (o.inflight < 16 ? o.inflight : 16) : 1;
    char data_path[4300];
    snprintf(data_path, sizeof data_path, "%s/data", store_dir);
    snprintf(rtile->name, sizeof rtile->name, "runs %lluKiB qd%u, random (store file)",
             (unsigned long long)(run_bytes >> 10), rt_threads);
    rtile->impl = "raw-tiles";
    double pair_ratio[MAX_PASSES], raw_best[MAX_PASSES], tile_ratio[MAX_PASSES];
    int np = 0;
    for (uint32_t p = 0; p < o.passes && np < MAX_PASSES; p++, np++) {
        result a, b, t;
        if (raw_read(raw_path, bytes, RAW_CHUNK, 1, 0, 0, &a) ||
            raw_read(raw_path, bytes, 1u << 20, 4, 0, 0, &b))
            goto out;
        shuffle(order, ntiles);
        if (o.inflight ? store_tiles_async(s, &o, order, ntiles, dst, &t)
                       : store_tiles(s, &o, order, ntiles, dst, &t))
            goto out;
        result rt;
        if (raw_read(data_path, ss.runs_total * run_bytes, (size_t)run_bytes, (int)rt_threads, 1,
                     ss.runs_total, &rt))
            goto out;
        add_pass(raw4, &a);
        add_pass(raw1, &b);
        add_pass(store_r, &t);
        add_pass(rtile, &rt);
        raw_best[np] = a.gbps > b.gbps ? a.gbps : b.gbps;
        pair_ratio[np] = t.gbps / raw_best[np];
        tile_ratio[np] = t.gbps / rt.gbps;
        printf("  pass %u: raw-seq 4MiB qd1 %.3f, 1MiB qd4 %.3f, store %.3f GB/s: %.1f%%; "
               "raw-tiles %.3f GB/s\n", p, a.gbps, b.gbps, t.gbps, 100.0 * pair_ratio[np],
               rt.gbps);
    }
    double store_ratio = median(pair_ratio, np);
    double store_ratio_med = store_r->gbps / median(raw_best, np);
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    printf("  store reads: %llu merged ranges, %llu device requests for %llu stripes "
           "(%.0f KiB per request)\n",
           (unsigned long long)ss.read_requests, (unsigned long long)ss.read_ios,
           (unsigned long long)ss.file_hits,
           ss.read_ios ? ss.file_bytes_read / 1024.0 / ss.read_ios : 0.0);
    sw_store_close(s);
    s = NULL;
    (void)unlink(raw_path);

    /* 4. host-tier hits vs memcpy of the same bytes, interleaved passes */
    uint64_t host_bytes = o.host_mb << 20;
    uint32_t host_tiles = (uint32_t)(host_bytes / ((uint64_t)o.tile_blocks * STRIPE));
    if (host_tiles > ntiles)
        host_tiles = ntiles;
    host_tiles -= host_tiles % o.tiles_per_call;
    st = open_existing(store_dir, host_bytes + (4u << 20), &s);
    if (st != SW_OK || !host_tiles) {
        die_status("reopen with host tier", st);
        goto out;
    }
    shuffle(order, ntiles);
    result warm;
    if (store_tiles(s, &o, order, host_tiles, dst, &warm)) /* fills the host tier */
        goto out;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    uint64_t misses0 = ss.host_misses;
    /* The set as the host tier holds it: warm-up position u at u * tile. */
    size_t tile_bytes = (size_t)o.tile_blocks * STRIPE;
    size_t set = (size_t)host_tiles * tile_bytes;
    src = (char *)xalloc_huge(set); /* the same kind of memory as the host tier */
    horder = (uint32_t *)malloc(sizeof *horder * host_tiles);
    for (uint32_t u = 0; u < host_tiles; u++) {
        uint32_t tile = order[u];
        pos[tile] = u;
        horder[u] = tile;
        for (uint32_t b = 0; b < o.tile_blocks; b++)
            fill_stripe(src + u * tile_bytes + (size_t)b * STRIPE, STRIPE,
                        tile / tiles_per_stream, (tile % tiles_per_stream) * o.tile_blocks + b);
    }
    result *host_r = &res[nres++], *mem_r = &res[nres++];
    snprintf(host_r->name, sizeof host_r->name, "hits %ux8KiB/call, %llu MiB set",
             o.tile_blocks * o.tiles_per_call, (unsigned long long)(set >> 20));
    host_r->impl = "host-tier";
    snprintf(mem_r->name, sizeof mem_r->name, "memcpy 8KiB pieces, same set");
    mem_r->impl = "memcpy";
    double hpair[MAX_PASSES];
    double hv[MAX_PASSES], mv[MAX_PASSES];
    int nh = 0;
    for (uint32_t p = 0; p < o.host_passes && nh < MAX_PASSES; p++, nh++) {
        result h, m;
        shuffle(horder, host_tiles);
        if (store_tiles(s, &o, horder, host_tiles, dst, &h) ||
            memcpy_tiles(src, pos, &o, horder, host_tiles, dst, &m))
            goto out;
        add_pass(host_r, &h);
        add_pass(mem_r, &m);
        hv[nh] = h.gbps;
        mv[nh] = m.gbps;
        hpair[nh] = h.gbps / m.gbps;
    }
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    if (ss.host_misses != misses0)
        printf("  warning: %llu host-tier misses during the hit passes\n",
               (unsigned long long)(ss.host_misses - misses0));
    double host_ratio = median(hpair, nh);
    double host_ratio_med = host_r->gbps / mem_r->gbps;
    sw_store_close(s);
    s = NULL;
    (void)getloadavg(load1, 3);

    printf("\n  per pass (GB/s):\n");
    print_passes("raw-seq 4MiB qd1", raw4->pass, raw4->npass);
    print_passes("raw-seq 1MiB qd4", raw1->pass, raw1->npass);
    print_passes("store", store_r->pass, store_r->npass);
    print_passes("store/raw per pass", pair_ratio, np);
    print_passes("raw-tiles (context)", rtile->pass, rtile->npass);
    print_passes("store/raw-tiles", tile_ratio, np);
    print_passes("host-tier", hv, nh);
    print_passes("memcpy", mv, nh);
    print_passes("host/memcpy per pass", hpair, nh);
    printf("\n  %-34s %-12s %13s   (medians of interleaved passes)\n", "case", "impl",
           "bandwidth");
    for (int i = 0; i < nres; i++)
        print_result(&res[i], 0);
    printf("\n  store / raw-seq: median of per-pass ratios = %6.1f%%, ratio of medians = "
           "%6.1f%%  (target >= 90%%)\n",
           100.0 * store_ratio, 100.0 * store_ratio_med);
    printf("  store / raw-tiles (the same access pattern, context only): median of per-pass "
           "ratios = %6.1f%%\n", 100.0 * median(tile_ratio, np));
    printf("  host-tier / memcpy: median of per-pass ratios = %6.1f%%, ratio of medians = "
           "%6.1f%%  (target >= 85%%)\n",
           100.0 * host_ratio, 100.0 * host_ratio_med);
    printf("  load average at end: %.2f %.2f %.2f\n", load1[0], load1[1], load1[2]);

    /* JSON */
    char host[128], path[4300];
    tool_host_slug(host, sizeof host);
    struct stat dsb;
    if (o.json)
        snprintf(path, sizeof path, "%s", o.json);
    else if (stat("bench/results", &dsb) == 0 && S_ISDIR(dsb.st_mode))
        snprintf(path, sizeof path, "bench/results/store-%s.json", host);
    else
        snprintf(path, sizeof path, "store-%s.json", host);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        goto out;
    }
    fprintf(f, "[\n");
    for (int i = 0; i < nres; i++) {
        fprintf(f,
                "  {\"case\": \"%s\", \"impl\": \"%s\", \"gbps\": %.4f, \"stat\": \"median\", "
                "\"passes_gbps\": [",
                res[i].name, res[i].impl, res[i].gbps);
        for (int k = 0; k < res[i].npass; k++)
            fprintf(f, "%s%.4f", k ? ", " : "", res[i].pass[k]);
        fprintf(f, "], \"bytes\": %llu, \"seconds\": %.4f, \"fs\": \"%s\", \"size_mb\": %llu",
                (unsigned long long)res[i].bytes, res[i].seconds, fs,
                (unsigned long long)o.size_mb);
        if (&res[i] == store_r)
            fprintf(f, ", \"ratio\": %.4f, \"ratio_of_medians\": %.4f, \"target\": 0.90",
                    store_ratio, store_ratio_med);
        if (&res[i] == rtile)
            fprintf(f, ", \"store_over_this\": %.4f, \"note\": \"context: the store's "
                    "access pattern on its own data file, not the verdict baseline\"",
                    median(tile_ratio, np));
        if (&res[i] == host_r)
            fprintf(f, ", \"ratio\": %.4f, \"ratio_of_medians\": %.4f, \"target\": 0.85",
                    host_ratio, host_ratio_med);
        fprintf(f, ", \"load_start\": %.2f, \"load_end\": %.2f}%s\n", load0[0], load1[0],
                i + 1 < nres ? "," : "");
    }
    fprintf(f, "]\n");
    fclose(f);
    printf("  results: %s\n", path);
    rc = 0;
out:
    if (s)
        sw_store_close(s);
    free(dst);
    free(src);
    free(order);
    free(pos);
    free(horder);
    if (!o.keep)
        nftw(work, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    else
        printf("  kept %s\n", work);
    return rc;
}

int cmd_store(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "bench")) {
        for (int i = 2; i < argc; i++)
            if (!strcmp(argv[i], "--remote")) /* remote_bench.c */
                return cmd_store_bench_remote(argc - 1, argv + 1);
        return cmd_store_bench(argc - 1, argv + 1);
    }
    if (argc >= 2 && !strcmp(argv[1], "verify"))
        return cmd_store_verify(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inspect"))
        return cmd_store_inspect(argc - 1, argv + 1);
    fprintf(stderr, "usage: spillway store bench [options] | verify --dir D | inspect --dir D\n"
                    "run 'spillway store bench --help' for the bench's options\n");
    return 2;
}
