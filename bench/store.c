/* spillway-bench-store (`spillway bench store`; disk and host tier): a
 * client of the block store's public API (spillway_store.h); --engine-ab
 * opens its second arm with the store's internal tuning
 * (store/store_internal.h).
 *
 * It measures, on one file system and in one run: the disk's own O_DIRECT
 * sequential and 64 KiB random reads (minimal loops of its own over a file
 * it wrote and fsync'ed), the store's batched tile reads (8 KiB stripes, a
 * tile = tile_blocks consecutive blocks of one stream) in two orders --
 * every tile shuffled, and the engine's order (sequence by sequence, tiles
 * in block order, the K and V streams of every kv head of a tile together)
 * -- host-tier hits, and a plain memcpy of the same bytes; prints the
 * ratios and writes them to a results file (bench/common.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"
#include "store/store_internal.h"

#define PROG "spillway-bench-store"

#include "spillway_store_profile.h"

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
    fprintf(stderr, PROG ": %s: %s: %s\n", what, sw_status_str(st),
            sw_last_error());
    return 1;
}

/* tuning: NULL = the library's own (sw_store_open). */
static sw_status open_existing_tuned(const char *dir, uint64_t host_bytes, uint64_t io_buffer,
                                     const sw_store_tuning *tuning, sw_store **s)
{
    sw_store_config c;
    sw_store_config_init(&c);
    c.io_buffer_bytes = io_buffer;
    c.dir = dir;
    c.create = 0;
    c.stripe_bytes = 0; /* as created */
    c.run_blocks = 0;
    c.host_tier_bytes = host_bytes;
    return sw_store_open_tuned(&c, tuning, s);
}

static sw_status open_existing(const char *dir, uint64_t host_bytes, uint64_t io_buffer,
                               sw_store **s)
{
    return open_existing_tuned(dir, host_bytes, io_buffer, NULL, s);
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

/* --------------------------------------------------------------- bench -- */
typedef struct bench_opts {
    const char *dir;
    const char *json;
    uint64_t size_mb, host_mb;
    uint32_t tile_blocks, tiles_per_call, qd, stream_blocks;
    uint32_t inflight; /* store case: requests outstanding (read tickets); 0 = sw_store_read */
    int keep;
    uint32_t eng_per, eng_inflight; /* engine-order case: tiles per request, in flight */
    uint64_t io_buffer_mb;
    int zero_fill;
    uint32_t passes, host_passes;
    const char *engine_ab; /* "NAME=VALUE[,NAME=VALUE]": engine order again with these */
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
        fprintf(stderr, PROG ": out of memory (%zu bytes)\n", rounded);
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
        fprintf(stderr, PROG ": out of memory (%zu bytes)\n", n);
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
    double t0 = bench_now();
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
    *gbps = bytes / (bench_now() - t0) / 1e9;
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
    double t0 = bench_now();
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
    double dt = bench_now() - t0;
    close(fd);
    if (err) {
        fprintf(stderr, PROG ": raw read failed\n");
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
    /* Streams in the engine's write order (sw_swap offload: per block, for
     * each kv head its K then its V stripe): kind fastest, then kv_head (8),
     * then layer. The store fills runs in that order too, so the 16 streams
     * of a layer own adjacent runs for each 64-block chunk. */
    sw_store_key k = {0x5b11a7ull, stream / 16, block, (uint16_t)((stream / 2) % 8),
                      (uint8_t)(stream % 2), 0};
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
            "usage: spillway-bench-store [options]\n"
            "(also run as 'spillway bench store')\n"
            "  --dir D              parent directory of the scratch files (default /var/tmp;\n"
            "                       a disk, not tmpfs: the file system type is printed)\n"
            "  --size-mb N          raw file and store data file size (default 2048)\n"
            "  --tile-blocks N      blocks of one stream per tile (default 64)\n"
            "  --tiles-per-call N   tiles per read request (default 1)\n"
            "  --inflight N         store case: read requests outstanding at once\n"
            "                       (sw_store_read_submit/_wait; default 8); 0 = one\n"
            "                       synchronous sw_store_read per request\n"
            "  --engine-tiles-per-req N  engine-order case: tiles per read request (default 2:\n"
            "                       one kv head's K and V tile, adjacent runs, one device\n"
            "                       request)\n"
            "  --engine-inflight N  engine-order case: requests outstanding (default 16:\n"
            "                       two engine tiles of 8 kv heads, the engine's one tile\n"
            "                       read ahead); 0 = synchronous sw_store_read\n"
            "  --io-buffer-mb N     the store's bounce buffer (default 32; the requests in\n"
            "                       flight must fit)\n"
            "  --zero-fill 0|1      create the store with sw_store_config.zero_fill\n"
            "                       (default 1)\n"
            "  --stream-blocks N    blocks per stream (default 512)\n"
            "  --qd N               store queue depth (default 64)\n"
            "  --host-mb N          host tier for the hit case (default 256)\n"
            "  --passes N           interleaved raw-seq / store passes over the whole file\n"
            "                       (default 5; medians and the median per-pass ratio)\n"
            "  --host-passes N      interleaved host-tier / memcpy passes (default 11)\n"
            "  --engine-ab NAME=VALUE[,NAME=VALUE...]\n"
            "                       also read the engine order in every pass with these\n"
            "                       fields of the store's tuning set (e.g.\n"
            "                       read_inflight_bytes=8388608; the names are in\n"
            "                       src/store/store_internal.h) on a handle reopened for\n"
            "                       it: an A/B of library settings in the same passes (the\n"
            "                       two reads take turns in going first)\n"
            "  --json PATH          results (default: a new bench/results/store-<host>-<UTC\n"
            "                       time>.json, never a committed record; ./ without bench/results)\n"
            "  --keep               keep the scratch directory\n"
            "Exit status: 0 when every stripe read back right, 1 on an error, 2 on a usage\n"
            "error. The remote tier's bench is spillway-bench-remote.\n");
}

static int parse_bench(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.dir = "/var/tmp", .size_mb = 2048, .host_mb = 256, .tile_blocks = 64,
                      .tiles_per_call = 1, .qd = 64, .stream_blocks = 512, .inflight = 8,
                      .passes = 5, .host_passes = 11, .eng_per = 2, .eng_inflight = 16,
                      .io_buffer_mb = 32, .zero_fill = 1};
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
        static const char *const valued[] = {
            "--dir", "--json", "--engine-ab", "--size-mb", "--host-mb", "--tile-blocks",
            "--tiles-per-call", "--inflight", "--engine-tiles-per-req", "--engine-inflight",
            "--io-buffer-mb", "--zero-fill", "--stream-blocks", "--qd", "--passes",
            "--host-passes"};
        if (!bench_opt_is(a, valued, sizeof valued / sizeof valued[0])) {
            fprintf(stderr, PROG ": unknown option '%s'\n", a);
            bench_usage(stderr);
            return 2;
        }
        if (!v) {
            fprintf(stderr, PROG ": option '%s' needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--dir"))
            o->dir = v;
        else if (!strcmp(a, "--json"))
            o->json = v;
        else if (!strcmp(a, "--engine-ab"))
            o->engine_ab = v;
        else if (!strcmp(a, "--size-mb"))
            BENCH_NUM(o->size_mb, 64, (int64_t)1 << 24);
        else if (!strcmp(a, "--host-mb"))
            BENCH_NUM(o->host_mb, 0, (int64_t)1 << 24);
        else if (!strcmp(a, "--tile-blocks"))
            BENCH_NUM(o->tile_blocks, 1, 1 << 20);
        else if (!strcmp(a, "--tiles-per-call"))
            BENCH_NUM(o->tiles_per_call, 1, 1 << 20);
        else if (!strcmp(a, "--inflight"))
            BENCH_NUM(o->inflight, 0, 64);
        else if (!strcmp(a, "--engine-tiles-per-req"))
            BENCH_NUM(o->eng_per, 1, 1 << 20);
        else if (!strcmp(a, "--engine-inflight"))
            BENCH_NUM(o->eng_inflight, 0, 64);
        else if (!strcmp(a, "--io-buffer-mb"))
            BENCH_NUM(o->io_buffer_mb, 1, 1 << 16);
        else if (!strcmp(a, "--zero-fill"))
            BENCH_NUM(o->zero_fill, 0, 1);
        else if (!strcmp(a, "--stream-blocks"))
            BENCH_NUM(o->stream_blocks, 1, 1 << 30);
        else if (!strcmp(a, "--qd"))
            BENCH_NUM(o->qd, 1, 1 << 16);
        else if (!strcmp(a, "--passes"))
            BENCH_NUM(o->passes, 1, MAX_PASSES);
        else if (!strcmp(a, "--host-passes"))
            BENCH_NUM(o->host_passes, 1, MAX_PASSES);
        else {
            fprintf(stderr, PROG ": unknown option '%s'\n", a);
            bench_usage(stderr);
            return 2;
        }
    }
    if (o->size_mb < 64 || !o->tile_blocks || !o->tiles_per_call || !o->qd || !o->passes ||
        !o->host_passes || o->passes > MAX_PASSES || o->host_passes > MAX_PASSES ||
        o->inflight > 64 || !o->eng_per || o->eng_inflight > 64 || !o->io_buffer_mb ||
        o->stream_blocks < o->tile_blocks || o->stream_blocks % o->tile_blocks) {
        fprintf(stderr, PROG ": need --size-mb >= 64, positive counts (passes "
                        "<= 64), --inflight and --engine-inflight <= 64, "
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
    double t0 = bench_now();
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
    double dt = bench_now() - t0;
    free(keys);
    free(dp);
    free(sts);
    if (bad) {
        fprintf(stderr, PROG ": a stripe came back with the wrong bytes\n");
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
    double t0 = bench_now();
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
    double dt = bench_now() - t0;
    free(keys);
    free(dp);
    free(sts);
    if (bad) {
        /* outstanding tickets are released by sw_store_close */
        fprintf(stderr, PROG ": a stripe came back with the wrong bytes\n");
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
/* The engine's order (src/swap/attend.c): one attend call walks the
 * sequences of a batch one after the other for one layer; for a sequence it
 * reads a tile of tile_blocks blocks at a time, in block order, and a
 * tile's read is one batched sw_store_read of every kv head's K and V
 * stripes of those blocks (the prefetch worker reads tile i + 1 while tile
 * i computes). Here a "sequence" is one bench layer: ENGINE_STREAMS streams
 * (8 kv heads x K, V); the sequences are visited in a shuffled order (where
 * a sequence sits in the file depends on when it was written), each one
 * tile by tile in block order, and the 16 streams of a tile are read as 16
 * requests (one per stream, kv head by kv head, K then V) so that the
 * same read tickets keep the same number of requests in flight as in the
 * shuffled case. */
#define ENGINE_STREAMS 16u

static void engine_order(uint32_t *ord, uint32_t *groups, uint32_t nstreams,
                         uint32_t tiles_per_stream)
{
    uint32_t ng = (nstreams + ENGINE_STREAMS - 1) / ENGINE_STREAMS, n = 0;
    for (uint32_t g = 0; g < ng; g++)
        groups[g] = g;
    shuffle(groups, ng);
    for (uint32_t i = 0; i < ng; i++) {
        uint32_t s0 = groups[i] * ENGINE_STREAMS;
        uint32_t s1 = s0 + ENGINE_STREAMS < nstreams ? s0 + ENGINE_STREAMS : nstreams;
        for (uint32_t j = 0; j < tiles_per_stream; j++)
            for (uint32_t q = s0; q < s1; q++)
                ord[n++] = q * tiles_per_stream + j;
    }
}

static void get_stats(sw_store *s, sw_store_stats *st)
{
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
    sw_store_get_stats(s, st);
}

/* Adds the read tickets' profile of one pass to *acc (times and counts
 * summed, the mean weighted by time, the peak the largest). */
static void profile_add(sw_store_read_profile *acc, const sw_store_read_profile *p)
{
    double t = (double)acc->elapsed_ns + (double)p->elapsed_ns;
    if (t > 0)
        acc->mean_bytes = (acc->mean_bytes * (double)acc->elapsed_ns +
                           p->mean_bytes * (double)p->elapsed_ns) / t;
    acc->cap_bytes = p->cap_bytes;
    acc->elapsed_ns += p->elapsed_ns;
    acc->busy_ns += p->busy_ns;
    acc->below_cap_ns += p->below_cap_ns;
    acc->below_cap_queued_ns += p->below_cap_queued_ns;
    acc->below_cap_processing_ns += p->below_cap_processing_ns;
    acc->below_cap_waiting_ns += p->below_cap_waiting_ns;
    if (p->peak_bytes > acc->peak_bytes)
        acc->peak_bytes = p->peak_bytes;
    acc->process_ns += p->process_ns;
    acc->wait_ns += p->wait_ns;
    acc->requests += p->requests;
    acc->request_bytes += p->request_bytes;
    acc->reaps_found += p->reaps_found;
    acc->reap_gap_ns += p->reap_gap_ns;
    for (int i = 0; i < SW_STORE_PROFILE_SIZES; i++)
        acc->sizes[i] += p->sizes[i];
}

/* The device queue of a case's read tickets, summed over its passes. */
static void print_profile(const char *what, const sw_store_read_profile *p)
{
    if (!p->elapsed_ns || !p->requests)
        return;
    double T = (double)p->elapsed_ns / 100.0;
    printf("  %-12s: tickets' device queue (cap %.0f KiB): mean %.2f MiB, peak %.2f MiB; "
           "busy %.1f%%, below the cap %.1f%% of the time (with a ticket held back %.1f%%, "
           "while checking/copying %.1f%%, while waiting %.1f%%)\n",
           what, p->cap_bytes / 1024.0,
           p->mean_bytes / 1048576.0, p->peak_bytes / 1048576.0, p->busy_ns / T,
           p->below_cap_ns / T, p->below_cap_queued_ns / T, p->below_cap_processing_ns / T,
           p->below_cap_waiting_ns / T);
    printf("  %-12s  calling thread: checking/copying %.1f%%, blocked in io_uring %.1f%%, "
           "other %.1f%%; %llu completions-found looks, %.1f us since the previous look\n",
           "", p->process_ns / T, p->wait_ns / T,
           100.0 - (p->process_ns + p->wait_ns) / T, (unsigned long long)p->reaps_found,
           p->reaps_found ? p->reap_gap_ns / 1e3 / (double)p->reaps_found : 0.0);
    printf("  %-12s  %llu requests, %.0f KiB mean:", "", (unsigned long long)p->requests,
           p->request_bytes / 1024.0 / (double)p->requests);
    for (int i = 0; i < SW_STORE_PROFILE_SIZES; i++) {
        if (!p->sizes[i])
            continue;
        if (i + 1 < SW_STORE_PROFILE_SIZES)
            printf(" <=%uK %.1f%%", 4u << i, 100.0 * (double)p->sizes[i] / (double)p->requests);
        else
            printf(" >4M %.1f%%", 100.0 * (double)p->sizes[i] / (double)p->requests);
    }
    printf("\n");
}

/* One store pass over `order`; adds the pass's read counters to *acc and
 * the tickets' profile to *prof. */
static int store_pass(sw_store *s, const bench_opts *o0, uint32_t per, uint32_t inflight,
                      const uint32_t *order, uint32_t ntiles, char *dst, result *r,
                      sw_store_stats *acc, sw_store_read_profile *prof)
{
    bench_opts o1 = *o0, *o = &o1;
    o1.tiles_per_call = per;
    o1.inflight = inflight;
    sw_store_stats b0, b1;
    sw_store_read_profile pf;
    memset(&pf, 0, sizeof pf);
    pf.struct_size = sizeof pf;
    (void)sw_store_read_profile_get(s, &pf, 1);
    get_stats(s, &b0);
    int rc = o->inflight ? store_tiles_async(s, o, order, ntiles, dst, r)
                         : store_tiles(s, o, order, ntiles, dst, r);
    get_stats(s, &b1);
    if (sw_store_read_profile_get(s, &pf, 0) == SW_OK)
        profile_add(prof, &pf);
    acc->file_hits += b1.file_hits - b0.file_hits;
    acc->file_bytes_read += b1.file_bytes_read - b0.file_bytes_read;
    acc->host_hits += b1.host_hits - b0.host_hits;
    acc->host_bytes_read += b1.host_bytes_read - b0.host_bytes_read;
    acc->read_requests += b1.read_requests - b0.read_requests;
    acc->read_ios += b1.read_ios - b0.read_ios;
    acc->corruptions += b1.corruptions - b0.corruptions;
    acc->io_errors += b1.io_errors - b0.io_errors;
    acc->not_found += b1.not_found - b0.not_found;
    return rc;
}

static void print_store_delta(const char *what, const sw_store_stats *d, uint64_t asked)
{
    printf("  %-12s: %llu stripes asked, %llu from the file (%.3f GiB, CRC-checked), %llu "
           "host-tier hits, %llu not found, %llu corrupt, %llu I/O errors; %llu merged ranges, "
           "%llu device requests (%.0f KiB each)\n",
           what, (unsigned long long)asked, (unsigned long long)d->file_hits,
           d->file_bytes_read / 1073741824.0, (unsigned long long)d->host_hits,
           (unsigned long long)d->not_found, (unsigned long long)d->corruptions,
           (unsigned long long)d->io_errors, (unsigned long long)d->read_requests,
           (unsigned long long)d->read_ios,
           d->read_ios ? d->file_bytes_read / 1024.0 / d->read_ios : 0.0);
}

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
    double t0 = bench_now();
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
    double dt = bench_now() - t0;
    if (bad) {
        fprintf(stderr, PROG ": memcpy baseline copied the wrong bytes\n");
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

int main(int argc, char **argv)
{
    bench_opts o;
    int pr = parse_bench(argc, argv, &o);
    if (pr)
        return pr == 1 ? 0 : 2;
    sw_store_tuning ab;
    sw_store_tuning_auto(&ab);
    if (o.engine_ab && sw_store_tuning_parse(&ab, o.engine_ab) != SW_OK) {
        fprintf(stderr, PROG ": --engine-ab: %s\n", sw_last_error());
        return 2;
    }

    char work[4096];
    snprintf(work, sizeof work, "%s/spillway-bench-XXXXXX", o.dir);
    if (!mkdtemp(work)) {
        fprintf(stderr, PROG ": mkdtemp in '%s': %s\n", o.dir, strerror(errno));
        return 1;
    }
    if (!o.keep)
        bench_scratch_guard(work); /* (removed on SIGINT / SIGTERM too) */
    struct statfs sfs;
    const char *fs = "unknown";
    if (statfs(work, &sfs) == 0)
        fs = fs_name((long)sfs.f_type);
    double load0[3] = {0, 0, 0}, load1[3] = {0, 0, 0};
    (void)getloadavg(load0, 3);
    printf(PROG ": %s (file system: %s%s)\n", work, fs,
           !strcmp(fs, "tmpfs") ? " -- RAM, not a disk: the figures say nothing about I/O" : "");
    printf("  size %llu MiB, stripes %u B, tile %u blocks; engine order: %u tile(s) per read "
           "request, %u in flight; shuffled: %u tile(s) per request, %u in flight; qd %u, "
           "host tier %llu MiB, %u interleaved disk passes, %u host passes\n",
           (unsigned long long)o.size_mb, STRIPE, o.tile_blocks, o.eng_per, o.eng_inflight,
           o.tiles_per_call, o.inflight, o.qd,
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
    uint32_t *order = NULL, *eorder = NULL, *groups = NULL, *pos = NULL, *horder = NULL;
    sw_status st;

    /* 1. raw file; the random-read figure once */
    double wgbps = 0;
    if (raw_write(raw_path, bytes, &wgbps))
        goto out;
    printf("  raw file written (O_DIRECT, 4 MiB writes) and fsync'ed: %.3f GB/s\n", wgbps);
    result *raw4 = &res[nres++], *raw1 = &res[nres++], *raw8 = &res[nres++];
    result *rnd64 = &res[nres++];
    snprintf(raw4->name, sizeof raw4->name, "seq 4MiB qd1");
    raw4->impl = "raw-seq";
    snprintf(raw1->name, sizeof raw1->name, "seq 1MiB qd4 (4 threads)");
    raw1->impl = "raw-seq";
    snprintf(raw8->name, sizeof raw8->name, "seq 512KiB qd8 (8 threads)");
    raw8->impl = "raw-seq";
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
    c.io_buffer_bytes = o.io_buffer_mb << 20;
    c.zero_fill = o.zero_fill;
    double t0 = bench_now();
    st = sw_store_open(&c, &s);
    double cdt = bench_now() - t0;
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
    printf("  store: %s, %s, %llu extents, %u streams of %u blocks, bounce buffer %llu MiB; "
           "created in %.2f s (%s)\n",
           sw_store_io_backend_name(ss.io_backend), ss.direct_io ? "O_DIRECT" : "buffered",
           (unsigned long long)ss.extents_total, nstreams, o.stream_blocks,
           (unsigned long long)(ss.io_buffer_bytes >> 20), cdt,
           o.zero_fill ? "posix_fallocate + zero fill" : "posix_fallocate only");
    /* The read tickets' device bytes in flight are the library's setting
     * (the store's tuning); printed so that a run says which it used. */
    sw_store_read_profile cap_pf;
    memset(&cap_pf, 0, sizeof cap_pf);
    cap_pf.struct_size = sizeof cap_pf;
    if (sw_store_read_profile_get(s, &cap_pf, 0) == SW_OK)
        printf("  read tickets: at most %llu bytes in flight%s\n",
               (unsigned long long)cap_pf.cap_bytes, o.engine_ab ? " (A arm)" : "");
    /* The fill, in the engine's write order, in chunks of FILL_CHUNK
     * stripes taken alternately by single writes (sw_store_write) and by one
     * batch (sw_store_write_batch): the two ways of writing, interleaved on
     * the same store and the same data. */
    enum { FILL_CHUNK = 256 };
    const uint32_t nfill = nstreams * o.stream_blocks;
    char *fillbuf = (char *)malloc((size_t)FILL_CHUNK * STRIPE);
    sw_store_key fkeys[FILL_CHUNK];
    const void *fsrc[FILL_CHUNK];
    size_t flen[FILL_CHUNK];
    double fsec[2] = {0, 0};
    uint64_t fcount[2] = {0, 0};
    result *fill_r[2] = {&res[nres++], &res[nres++]};
    snprintf(fill_r[0]->name, sizeof fill_r[0]->name, "fill 8KiB stripes");
    fill_r[0]->impl = "write";
    snprintf(fill_r[1]->name, sizeof fill_r[1]->name, "fill 8KiB stripes, %u per call",
             (unsigned)FILL_CHUNK);
    fill_r[1]->impl = "write-batch";
    if (!fillbuf) {
        fprintf(stderr, "bench store: out of memory\n");
        goto out;
    }
    t0 = bench_now();
    for (uint32_t i0 = 0, chunk = 0; i0 < nfill; i0 += FILL_CHUNK, chunk++) {
        uint32_t n = nfill - i0 < FILL_CHUNK ? nfill - i0 : FILL_CHUNK;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t i = i0 + j, q = i % nstreams, b = i / nstreams;
            fkeys[j] = bench_key(q, b);
            fill_stripe(fillbuf + (size_t)j * STRIPE, STRIPE, q, b);
            fsrc[j] = fillbuf + (size_t)j * STRIPE;
            flen[j] = STRIPE;
        }
        int batch = chunk & 1;
        double c0 = bench_now();
        if (batch) {
            st = sw_store_write_batch(s, n, fkeys, fsrc, flen, NULL, NULL);
        } else {
            st = SW_OK;
            for (uint32_t j = 0; j < n && st == SW_OK; j++)
                st = sw_store_write(s, &fkeys[j], fsrc[j], STRIPE, NULL);
        }
        fsec[batch] += bench_now() - c0;
        fcount[batch] += n;
        if (st != SW_OK) {
            free(fillbuf);
            die_status(batch ? "write batch" : "write", st);
            goto out;
        }
    }
    free(fillbuf);
    double wdt = bench_now() - t0;
    for (int k = 0; k < 2; k++) {
        fill_r[k]->bytes = fcount[k] * STRIPE;
        fill_r[k]->seconds = fsec[k];
        fill_r[k]->gbps = fsec[k] > 0 ? (double)fill_r[k]->bytes / fsec[k] / 1e9 : 0;
        fill_r[k]->ops = fcount[k];
    }
    const double fill_ratio = fill_r[0]->gbps > 0 ? fill_r[1]->gbps / fill_r[0]->gbps : 0;
    printf("  store filled: %u stripes in %.1f s; single writes %.0f us per stripe, batches "
           "of %u %.1f us per stripe (%.1fx)\n",
           nfill, wdt, fcount[0] ? fsec[0] * 1e6 / (double)fcount[0] : 0, (unsigned)FILL_CHUNK,
           fcount[1] ? fsec[1] * 1e6 / (double)fcount[1] : 0, fill_ratio);
    st = sw_store_close(s);
    s = NULL;
    if (st != SW_OK) {
        die_status("close", st);
        goto out;
    }

    /* 3. interleaved passes: raw seq (three configurations; the pass's best
     * is the baseline), then every tile of the store twice from the file
     * tier (no host tier: every stripe comes from the disk) -- in the
     * engine's order (the verdict) and shuffled -- and the raw-tiles
     * context. The verdict is the median of the per-pass ratios store /
     * best raw-seq of the same pass, so that one noisy pass of the disk
     * cannot decide it. */
    st = open_existing(store_dir, 0, o.io_buffer_mb << 20, &s);
    if (st != SW_OK) {
        die_status("reopen", st);
        goto out;
    }
    order = (uint32_t *)malloc(sizeof *order * ntiles);
    eorder = (uint32_t *)malloc(sizeof *eorder * ntiles);
    pos = (uint32_t *)malloc(sizeof *pos * ntiles);
    groups = (uint32_t *)malloc(sizeof *groups * (nstreams / ENGINE_STREAMS + 1));
    for (uint32_t i = 0; i < ntiles; i++)
        order[i] = i;
    /* the caller's: plain pages; one part per outstanding request (the
     * larger of the two cases' needs) */
    size_t dst_bytes = (size_t)o.tile_blocks * o.tiles_per_call * STRIPE *
                       (o.inflight ? o.inflight : 1);
    size_t eng_bytes = (size_t)o.tile_blocks * o.eng_per * STRIPE *
                       (o.eng_inflight ? o.eng_inflight : 1);
    dst = (char *)xalloc_aligned(dst_bytes > eng_bytes ? dst_bytes : eng_bytes);
    result *eng_r = &res[nres++], *store_r = &res[nres++];
    if (o.eng_inflight)
        snprintf(eng_r->name, sizeof eng_r->name, "tiles %ux8KiB, %u/req, %u in flight, engine",
                 o.tile_blocks, o.eng_per, o.eng_inflight);
    else
        snprintf(eng_r->name, sizeof eng_r->name, "tiles %ux8KiB, %u/call, engine order",
                 o.tile_blocks, o.eng_per);
    if (o.inflight) {
        snprintf(store_r->name, sizeof store_r->name, "tiles %ux8KiB, %u/req, %u in flight, shuf",
                 o.tile_blocks, o.tiles_per_call, o.inflight);
    } else {
        snprintf(store_r->name, sizeof store_r->name, "tiles %ux8KiB, %u/call, shuffled",
                 o.tile_blocks, o.tiles_per_call);
    }
    eng_r->impl = "store";
    store_r->impl = "store";
    /* Context, not the verdict: the disk's own figure for the shuffled
     * case's access pattern -- whole runs (one tile each) of the store's
     * data file at random run offsets, O_DIRECT pread, as many threads as
     * requests in flight (QD), no check, no copy. */
    result *rtile = &res[nres++];
    uint64_t run_bytes = ss.run_header_bytes + ss.run_blocks * ss.extent_bytes;
    uint32_t rt_threads = o.inflight ? (o.inflight < 16 ? o.inflight : 16) : 1;
    char data_path[4300];
    snprintf(data_path, sizeof data_path, "%s/data", store_dir);
    snprintf(rtile->name, sizeof rtile->name, "runs %lluKiB qd%u, random (store file)",
             (unsigned long long)(run_bytes >> 10), rt_threads);
    rtile->impl = "raw-tiles";
    double pair_ratio[MAX_PASSES], raw_best[MAX_PASSES], tile_ratio[MAX_PASSES];
    double eng_ratio[MAX_PASSES];
    sw_store_stats eng_st, shuf_st;
    memset(&eng_st, 0, sizeof eng_st);
    memset(&shuf_st, 0, sizeof shuf_st);
    sw_store_read_profile eng_pf, shuf_pf, ab_pf;
    memset(&eng_pf, 0, sizeof eng_pf);
    memset(&shuf_pf, 0, sizeof shuf_pf);
    memset(&ab_pf, 0, sizeof ab_pf);
    sw_store_stats ab_st;
    memset(&ab_st, 0, sizeof ab_st);
    double ab_ratio[MAX_PASSES];
    result *ab_r = NULL;
    if (o.engine_ab) {
        ab_r = &res[nres++];
        snprintf(ab_r->name, sizeof ab_r->name, "engine order, --engine-ab");
        ab_r->impl = "store-ab";
    }
    int np = 0;
    for (uint32_t p = 0; p < o.passes && np < MAX_PASSES; p++, np++) {
        result a, b, c8, t, e;
        if (raw_read(raw_path, bytes, RAW_CHUNK, 1, 0, 0, &a) ||
            raw_read(raw_path, bytes, 1u << 20, 4, 0, 0, &b) ||
            raw_read(raw_path, bytes, 512u << 10, 8, 0, 0, &c8))
            goto out;
        engine_order(eorder, groups, nstreams, tiles_per_stream);
        /* With --engine-ab the two reads of the engine order take turns in
         * going first: on a virtual disk whose host caches the image, the
         * second read of the same data right after the first won 11 of 13
         * passes whatever its settings (docs/perf/store.md, v11 tried). */
        for (int k = 0; k < (ab_r ? 2 : 1); k++) {
            if (!ab_r || k == (int)(p & 1)) {
                if (ab_r) {
                    /* a fresh handle too, as the variant gets: the first
                     * ticket's setup falls in both timed reads alike */
                    sw_store_close(s);
                    s = NULL;
                    st = open_existing(store_dir, 0, o.io_buffer_mb << 20, &s);
                    if (st != SW_OK) {
                        die_status("reopen", st);
                        goto out;
                    }
                }
                if (store_pass(s, &o, o.eng_per, o.eng_inflight, eorder, ntiles, dst, &e,
                               &eng_st, &eng_pf))
                    goto out;
                continue;
            }
            /* the same order on a handle opened with the tuning set (a
             * handle's tuning is decided at open) */
            result e2;
            sw_store_close(s);
            s = NULL;
            st = open_existing_tuned(store_dir, 0, o.io_buffer_mb << 20, &ab, &s);
            int bad = st != SW_OK ||
                      store_pass(s, &o, o.eng_per, o.eng_inflight, eorder, ntiles, dst, &e2,
                                 &ab_st, &ab_pf);
            if (s)
                sw_store_close(s);
            s = NULL;
            if (bad) {
                if (st != SW_OK)
                    die_status("reopen (--engine-ab)", st);
                goto out;
            }
            st = open_existing(store_dir, 0, o.io_buffer_mb << 20, &s);
            if (st != SW_OK) {
                die_status("reopen", st);
                goto out;
            }
            add_pass(ab_r, &e2);
        }
        shuffle(order, ntiles);
        if (store_pass(s, &o, o.tiles_per_call, o.inflight, order, ntiles, dst, &t, &shuf_st,
                       &shuf_pf))
            goto out;
        result rt;
        if (raw_read(data_path, ss.runs_total * run_bytes, (size_t)run_bytes, (int)rt_threads, 1,
                     ss.runs_total, &rt))
            goto out;
        add_pass(raw4, &a);
        add_pass(raw1, &b);
        add_pass(raw8, &c8);
        add_pass(eng_r, &e);
        add_pass(store_r, &t);
        add_pass(rtile, &rt);
        raw_best[np] = a.gbps > b.gbps ? a.gbps : b.gbps;
        if (c8.gbps > raw_best[np])
            raw_best[np] = c8.gbps;
        eng_ratio[np] = e.gbps / raw_best[np];
        pair_ratio[np] = t.gbps / raw_best[np];
        tile_ratio[np] = t.gbps / rt.gbps;
        printf("  pass %u: raw-seq 4MiB qd1 %.3f, 1MiB qd4 %.3f, 512KiB qd8 %.3f; store engine "
               "order %.3f GB/s: %.1f%%, shuffled %.3f: %.1f%%; raw-tiles %.3f\n",
               p, a.gbps, b.gbps, c8.gbps, e.gbps, 100.0 * eng_ratio[np], t.gbps,
               100.0 * pair_ratio[np], rt.gbps);
        if (ab_r) {
            ab_ratio[np] = ab_r->pass[ab_r->npass - 1] / raw_best[np];
            printf("  pass %u: engine order with %s %.3f GB/s: %.1f%%\n", p, o.engine_ab,
                   ab_r->pass[ab_r->npass - 1], 100.0 * ab_ratio[np]);
        }
    }
    double eng_ratio_pp = median(eng_ratio, np);
    double eng_ratio_med = eng_r->gbps / median(raw_best, np);
    double store_ratio = median(pair_ratio, np);
    double store_ratio_med = store_r->gbps / median(raw_best, np);
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    sw_store_get_stats(s, &ss);
    printf("  store: %s, %s, host tier %llu bytes (disabled for these passes)\n",
           sw_store_io_backend_name(ss.io_backend), ss.direct_io ? "O_DIRECT" : "buffered",
           (unsigned long long)ss.host_capacity_bytes);
    print_store_delta("engine order", &eng_st, (uint64_t)np * ntiles * o.tile_blocks);
    print_store_delta("shuffled", &shuf_st, (uint64_t)np * ntiles * o.tile_blocks);
    print_profile("engine order", &eng_pf);
    print_profile("shuffled", &shuf_pf);
    if (ab_r) {
        print_store_delta("engine A/B", &ab_st, (uint64_t)np * ntiles * o.tile_blocks);
        print_profile("engine A/B", &ab_pf);
    }
    if (!ss.direct_io || ss.host_capacity_bytes || eng_st.host_hits || shuf_st.host_hits ||
        eng_st.file_hits != (uint64_t)np * ntiles * o.tile_blocks ||
        shuf_st.file_hits != (uint64_t)np * ntiles * o.tile_blocks || eng_st.corruptions ||
        shuf_st.corruptions || eng_st.io_errors || shuf_st.io_errors || ab_st.corruptions ||
        ab_st.io_errors || ab_st.host_hits ||
        (ab_r && ab_st.file_hits != (uint64_t)np * ntiles * o.tile_blocks)) {
        fprintf(stderr, PROG ": the disk passes did not read every stripe from "
                        "the file with O_DIRECT (see the counters above)\n");
        goto out;
    }
    sw_store_close(s);
    s = NULL;
    (void)unlink(raw_path);

    /* 4. host-tier hits vs memcpy of the same bytes, interleaved passes */
    uint64_t host_bytes = o.host_mb << 20;
    uint32_t host_tiles = (uint32_t)(host_bytes / ((uint64_t)o.tile_blocks * STRIPE));
    if (host_tiles > ntiles)
        host_tiles = ntiles;
    host_tiles -= host_tiles % o.tiles_per_call;
    st = open_existing(store_dir, host_bytes + (4u << 20), o.io_buffer_mb << 20, &s);
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
    print_passes("raw-seq 512KiB qd8", raw8->pass, raw8->npass);
    print_passes("raw-seq best", raw_best, np);
    print_passes("store engine order", eng_r->pass, eng_r->npass);
    print_passes("engine/raw per pass", eng_ratio, np);
    if (ab_r) {
        print_passes("engine A/B", ab_r->pass, ab_r->npass);
        print_passes("engine A/B/raw per pass", ab_ratio, np);
    }
    print_passes("store shuffled", store_r->pass, store_r->npass);
    print_passes("shuffled/raw per pass", pair_ratio, np);
    print_passes("raw-tiles (context)", rtile->pass, rtile->npass);
    print_passes("store/raw-tiles", tile_ratio, np);
    print_passes("host-tier", hv, nh);
    print_passes("memcpy", mv, nh);
    print_passes("host/memcpy per pass", hpair, nh);
    printf("\n  %-34s %-12s %13s   (medians of interleaved passes)\n", "case", "impl",
           "bandwidth");
    for (int i = 0; i < nres; i++)
        print_result(&res[i], 0);
    printf("\n  store (engine order) / raw-seq: median of per-pass ratios = %6.1f%%, ratio of "
           "medians = %6.1f%%  (target >= 90%%)\n",
           100.0 * eng_ratio_pp, 100.0 * eng_ratio_med);
    if (ab_r)
        printf("  store (engine order, %s) / raw-seq: median of per-pass ratios = %6.1f%%\n",
               o.engine_ab, 100.0 * median(ab_ratio, np));
    printf("  store (shuffled tiles, context) / raw-seq: median of per-pass ratios = %6.1f%%, "
           "ratio of medians = %6.1f%%\n",
           100.0 * store_ratio, 100.0 * store_ratio_med);
    printf("  store (shuffled) / raw-tiles (the same access pattern, context only): median of "
           "per-pass ratios = %6.1f%%\n", 100.0 * median(tile_ratio, np));
    printf("  host-tier / memcpy: median of per-pass ratios = %6.1f%%, ratio of medians = "
           "%6.1f%%  (target >= 85%%)\n",
           100.0 * host_ratio, 100.0 * host_ratio_med);
    printf("  load average at end: %.2f %.2f %.2f\n", load1[0], load1[1], load1[2]);

    /* JSON */
    char host[128], path[4300];
    bench_host_slug(host, sizeof host);
    FILE *f = bench_result_open(o.json, "store", path, sizeof path);
    if (!f) {
        perror(path);
        goto out;
    }
    bench_json_begin(f, "store", argc, argv);
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
        if (&res[i] == eng_r)
            fprintf(f, ", \"ratio\": %.4f, \"ratio_of_medians\": %.4f, \"target\": 0.90, "
                    "\"note\": \"the verdict: the engine's order (sequence by sequence, tiles "
                    "in block order, every kv head's K and V of a tile together); every stripe "
                    "from the file (O_DIRECT, no host tier), CRC-checked and copied\"",
                    eng_ratio_pp, eng_ratio_med);
        if (&res[i] == store_r)
            fprintf(f, ", \"ratio\": %.4f, \"ratio_of_medians\": %.4f, \"note\": \"context: "
                    "every tile in a shuffled order (no locality); same checks\"",
                    store_ratio, store_ratio_med);
        if (&res[i] == ab_r)
            fprintf(f, ", \"ratio\": %.4f, \"env\": \"%s\", \"note\": \"the engine order "
                    "again, on a handle opened with these environment variables\"",
                    median(ab_ratio, np), o.engine_ab);
        if (&res[i] == rtile)
            fprintf(f, ", \"store_over_this\": %.4f, \"note\": \"context: the store's "
                    "shuffled case's access pattern on its own data file, not the verdict "
                    "baseline\"",
                    median(tile_ratio, np));
        if (&res[i] == fill_r[1])
            fprintf(f, ", \"over_single_writes\": %.4f, \"note\": \"chunks of the fill "
                    "alternate between single writes and one batch; each figure sums its "
                    "chunks\"", fill_ratio);
        if (&res[i] == host_r)
            fprintf(f, ", \"ratio\": %.4f, \"ratio_of_medians\": %.4f, \"target\": 0.85",
                    host_ratio, host_ratio_med);
        fprintf(f, ", \"load_start\": %.2f, \"load_end\": %.2f}%s\n", load0[0], load1[0],
                i + 1 < nres ? "," : "");
    }
    bench_json_end(f);
    if (fclose(f)) {
        perror(path);
        goto out;
    }
    printf("  results: %s\n", path);
    rc = 0;
out:
    if (s)
        sw_store_close(s);
    free(dst);
    free(src);
    free(order);
    free(eorder);
    free(groups);
    free(pos);
    free(horder);
    if (!o.keep) {
        bench_scratch_unguard(work);
        nftw(work, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    }
    else
        printf("  kept %s\n", work);
    return rc;
}

