/* The machinery behind part 2 of `spillway demo` and spillway-bench-swap
 * (public API only): a synthetic long-context KV cache for a real model
 * shape is offloaded to a block store in a scratch directory, then decode
 * steps run exact attention through the swap engine, each step's output
 * checked against an fp64 reference of the tool's own over every token.
 * Also the raw figures the results are held against, measured in the same
 * run by minimal loops of their own: O_DIRECT sequential reads of a file on
 * the same file system (as spillway-bench-store does) and memcpy of
 * stripe-sized pieces. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "swap_run.h"

#include "opp_cudnn.h"
#include "core/sw_core.h"         /* sw_cpu_count */
#include "swap/swap_internal.h" /* sw_swap_create_tuned: --tune */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/magic.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define NS 0xdec0de5ba9ull

/* ------------------------------------------------------------ helpers -- */
static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static double bf2d(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct rng {
    uint64_t s;
} rng;
static uint64_t rng_next(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s * 0x2545f4914f6cdd1dull;
}
/* Sum of four 16-bit uniforms from one draw: mean 0, variance 1, cheap
 * enough for hundreds of MiB of synthetic KV. */
static float rng_normal(rng *r)
{
    uint64_t x = rng_next(r);
    float s = (float)(x & 0xffff) + (float)((x >> 16) & 0xffff) + (float)((x >> 32) & 0xffff) +
              (float)(x >> 48);
    return (s / 65536.0f - 2.0f) * 1.7320508f;
}
static double rng_uniform(rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1p-53;
}

void *swt_xalloc(size_t n, int aligned)
{
    void *p = NULL;
    if (aligned ? posix_memalign(&p, 4096, n) != 0 : (p = malloc(n)) == NULL) {
        fprintf(stderr, "spillway: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    memset(p, 0, n);
    return p;
}

/* ----------------------------------------------------------- progress -- */
void swt_progress_start(swt_progress *p, const char *what, int64_t total)
{
    p->tty = isatty(2);
    p->what = what;
    p->total = total > 0 ? total : 1;
    p->shown = -1;
    p->last_t = 0;
    p->t0 = bench_now();
    swt_progress_update(p, 0, NULL);
}

/* A bar redrawn in place on a terminal (at most ~10 times a second); on a
 * pipe or a CI log, one plain line per quarter, so the log stays readable. */
void swt_progress_update(swt_progress *p, int64_t done, const char *extra)
{
    int pct = (int)(100 * done / p->total);
    double now = bench_now();
    if (p->tty) {
        if (done < p->total && now - p->last_t < 0.1 && p->shown >= 0)
            return;
        p->last_t = now;
        p->shown = pct;
        char bar[31];
        int fill = (int)(30 * done / p->total);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r  %-8s [%s] %3d%% %lld/%lld %5.1fs %s\033[K", p->what, bar, pct,
                (long long)done, (long long)p->total, now - p->t0, extra ? extra : "");
        if (done >= p->total)
            fputc('\n', stderr);
    } else {
        int q = pct / 25;
        if (q <= p->shown && done < p->total)
            return;
        if (done >= p->total && p->shown == 4)
            return;
        p->shown = done >= p->total ? 4 : q;
        fprintf(stderr, "  %s: %3d%% (%lld/%lld) %.1fs %s\n", p->what, pct, (long long)done,
                (long long)p->total, now - p->t0, extra ? extra : "");
    }
    fflush(stderr);
}

/* --------------------------------------------------------- scratch dir -- */
static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(path);
}

void swt_rmtree(const char *dir)
{
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

const char *swt_fs_name(const char *path, int *is_tmpfs)
{
    struct statfs sfs;
    *is_tmpfs = 0;
    if (statfs(path, &sfs) != 0)
        return "unknown";
    switch ((unsigned long)sfs.f_type) {
    case EXT4_SUPER_MAGIC: return "ext2/3/4";
    case XFS_SUPER_MAGIC: return "xfs";
    case BTRFS_SUPER_MAGIC: return "btrfs";
    case TMPFS_MAGIC: *is_tmpfs = 1; return "tmpfs";
    case OVERLAYFS_SUPER_MAGIC: return "overlayfs";
    case NFS_SUPER_MAGIC: return "nfs";
    case 0x65735546: return "fuse";
    case 0x2fc12fc1: return "zfs";
    default: return "unknown";
    }
}

/* ------------------------------------------------------ raw references -- */
#define RAW_CHUNK (4u << 20)

int swt_raw_write(const char *path, uint64_t bytes)
{
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    char *buf = (char *)swt_xalloc(RAW_CHUNK, 1);
    rng r = {0x7a11e5ull};
    for (size_t i = 0; i < RAW_CHUNK; i += 8) {
        uint64_t x = rng_next(&r);
        memcpy(buf + i, &x, 8);
    }
    int rc = 0;
    for (uint64_t off = 0; off < bytes && !rc; off += RAW_CHUNK) {
        memcpy(buf, &off, sizeof off); /* no two chunks alike */
        if (pwrite(fd, buf, RAW_CHUNK, (off_t)off) != (ssize_t)RAW_CHUNK)
            rc = errno ? -errno : -EIO;
    }
    if (!rc && fsync(fd) != 0)
        rc = -errno;
    free(buf);
    close(fd);
    return rc;
}

typedef struct raw_job {
    int fd;
    uint64_t bytes, first, stride, ops;
    size_t chunk;
    int err;
} raw_job;

static void *raw_thread(void *arg)
{
    raw_job *j = (raw_job *)arg;
    char *buf = (char *)swt_xalloc(j->chunk, 1);
    for (uint64_t off = j->first; off + j->chunk <= j->bytes; off += j->stride) {
        if (pread(j->fd, buf, j->chunk, (off_t)off) != (ssize_t)j->chunk)
            j->err = 1;
        j->ops++;
    }
    free(buf);
    return NULL;
}

/* One sequential O_DIRECT pass over [start, start + bytes) of the file:
 * `threads` readers interleave chunks (so `threads` requests are in
 * flight). GB/s, or < 0 on error; *secs (optional) = its time. */
static double raw_seq_at(const char *path, uint64_t start, uint64_t bytes, size_t chunk, int threads,
                         double *secs)
{
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0)
        return -1;
    raw_job jobs[8];
    pthread_t th[8];
    double t0 = bench_now();
    for (int t = 0; t < threads; t++) {
        jobs[t] = (raw_job){fd, start + bytes, start + (uint64_t)t * chunk,
                            (uint64_t)threads * chunk, 0, chunk, 0};
        pthread_create(&th[t], NULL, raw_thread, &jobs[t]);
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
    if (secs)
        *secs = dt;
    return err ? -1 : (double)ops * chunk / dt / 1e9;
}

/* The better of 4 MiB reads at QD1 and 1 MiB reads at QD4 (the disk of the
 * VM this was written on prefers either, depending on the day). */
double swt_raw_read(const char *path, uint64_t bytes)
{
    double a = raw_seq_at(path, 0, bytes, RAW_CHUNK, 1, NULL);
    double b = raw_seq_at(path, 0, bytes, 1u << 20, 4, NULL);
    return a > b ? a : b;
}

/* One interleaved raw pass (swt_case.raw_every): both shapes of
 * swt_raw_read over the next slice of the raw file, which shape goes first
 * alternating by pass; bytes and seconds added per shape. */
static void raw_interleaved_pass(const swt_case *c, swt_result *res, int32_t steps_done)
{
    const int k = res->raw_passes;
    const uint64_t nslices = c->raw_file_bytes / c->raw_slice_bytes;
    const uint64_t start = (uint64_t)k % (nslices ? nslices : 1) * c->raw_slice_bytes;
    double g[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const int shape = (i + k) % 2; /* 0: 4 MiB x 1, 1: 1 MiB x 4 */
        double secs = 0;
        g[shape] = raw_seq_at(c->raw_path, start, c->raw_slice_bytes,
                              shape ? (size_t)1 << 20 : RAW_CHUNK, shape ? 4 : 1, &secs);
        if (g[shape] > 0) {
            res->raw_bytes[shape] += (double)c->raw_slice_bytes;
            res->raw_secs[shape] += secs;
        }
    }
    if (k < SWT_RAW_PASSES) { /* each pass listed up to there; the sums go on */
        res->raw_pass_gbps[k] = g[0] > g[1] ? g[0] : g[1];
        res->raw_pass_after[k] = steps_done;
    }
    res->raw_passes++;
}

double swt_raw_interleaved_gbps(const swt_result *r)
{
    double best = -1;
    for (int s = 0; s < 2; s++)
        if (r->raw_secs[s] > 0 && r->raw_bytes[s] / r->raw_secs[s] / 1e9 > best)
            best = r->raw_bytes[s] / r->raw_secs[s] / 1e9;
    return best;
}

/* memcpy of `piece`-byte pieces out of a `set`-byte buffer into a ring the
 * size of a tile read, best of 3 passes: what serving a stripe from host RAM
 * costs at the least. */
double swt_memcpy_pieces(uint64_t set, size_t piece, size_t ring_pieces)
{
    set -= set % piece;
    char *src = (char *)swt_xalloc(set, 1), *dst = (char *)swt_xalloc(piece * ring_pieces, 1);
    double best = 0;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = bench_now();
        size_t k = 0;
        for (uint64_t off = 0; off < set; off += piece) {
            memcpy(dst + (k % ring_pieces) * piece, src + off, piece);
            k++;
        }
        double g = set / (bench_now() - t0) / 1e9;
        best = g > best ? g : best;
    }
    volatile char sink = dst[piece - 1];
    (void)sink;
    free(src);
    free(dst);
    return best;
}

/* ------------------------------------------------------ GPU references -- */
double swt_h2d_pinned(uint64_t bytes)
{
    if (sw_cuda_device_count() < 1)
        return -1;
    void *h = bench_pinned_alloc(bytes, "h2d reference, host buffer");
    void *d = h ? bench_gpu_alloc(bytes, "h2d reference, device buffer") : NULL;
    double g = -1;
    if (d) {
        memset(h, 1, bytes);
        g = bench_gpu_copy_gbps(d, h, bytes, 1.0);
    }
    bench_pinned_free(h);
    bench_gpu_free(d);
    return g;
}

double swt_d2d_copy(uint64_t bytes)
{
    if (sw_cuda_device_count() < 1)
        return -1;
    void *a = bench_gpu_alloc(bytes, "d2d reference, source");
    void *b = a ? bench_gpu_alloc(bytes, "d2d reference, destination") : NULL;
    double g = -1;
    if (b && !bench_gpu_fill(a, 1, bytes, "d2d reference, fill"))
        g = bench_gpu_copy_gbps(b, a, bytes, 2.0);
    bench_gpu_free(a);
    bench_gpu_free(b);
    return g;
}

/* ------------------------------------------------------- synthetic KV -- */
/* One sequence's KV in one layer, kept by the tool in the engine's block
 * layout k/v[block][H][B][D] (BF16), so blocks are offloaded without a copy
 * and the reference reads exactly the offloaded bits. */
typedef struct kvbuf {
    uint16_t *k, *v;
} kvbuf;

typedef struct ctx {
    const swt_case *c;
    int32_t H, Hq, D, B, G;
    int32_t max_blocks;
    int64_t len;          /* tokens per sequence, every layer */
    kvbuf *kv;            /* [batch][layers] */
    kvbuf *dkv;           /* device pool: the same KV on the GPU, where an
                           * engine's new K/V are: offloaded from there */
    /* a step's offload batch, one item a (sequence, layer), allocated once */
    sw_swap_block *items;
    const sw_swap_block **kvp;
    uint64_t *item_ids;
    int32_t *item_layers, *item_blocks;
    float *topic;         /* [layers][H][D] unit directions */
    rng r;
    sw_store *store;
    sw_swap *swap;
    uint16_t *q, *o;      /* [layers][batch][Hq][D] */
    void *dq, *dout;      /* device pool: their GPU copies */
    void *stream;         /* device pool: a cudaStream_t */
    uint64_t *ids;
    int32_t *indptr;
    double *ref, *sc;
} ctx;

static kvbuf *kv_at(const ctx *x, int32_t seq, int32_t layer)
{
    return &x->kv[(size_t)seq * x->c->layers + layer];
}

/* Keys N(0, 0.5^2) with, in 30% of the blocks, two tokens per kv head
 * pulled towards the layer's topic direction; values N(0, 1); queries lean
 * on the topic (see gen_queries). So attention is peaked on a few blocks
 * spread over the whole context, as with a needle, not uniform. */
static void gen_token(const ctx *x, int32_t seq, int32_t layer, int64_t t)
{
    const int32_t H = x->H, D = x->D, B = x->B;
    /* each token its own draws (tokens made on threads, gen_tokens) */
    uint64_t z = (uint64_t)t + ((uint64_t)seq << 40) + ((uint64_t)layer << 52) + 0x5b177a11ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; /* splitmix64's finaliser */
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    rng r = {(z ^ (z >> 31)) | 1};
    const int64_t blk = t / B;
    const int32_t row = (int32_t)(t % B);
    uint64_t hb = ((uint64_t)blk * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)seq << 40) ^
                  ((uint64_t)layer << 52);
    hb ^= hb >> 29;
    hb *= 0xbf58476d1ce4e5b9ull;
    hb ^= hb >> 32;
    const int heavy = (hb % 10) < 3 && row < 2;
    const float s = 4.0f + (float)((hb >> 8) % 1000) * 0.008f; /* 4..12 */
    const kvbuf *kb = kv_at(x, seq, layer);
    for (int32_t h = 0; h < H; h++) {
        const size_t base = (((size_t)blk * H + h) * B + row) * D;
        const float *u = x->topic + ((size_t)layer * H + h) * D;
        for (int32_t c = 0; c < D; c++) {
            float k = 0.5f * rng_normal(&r) + (heavy ? s * u[c] : 0.0f);
            kb->k[base + c] = f2bf(k);
            kb->v[base + c] = f2bf(rng_normal(&r));
        }
    }
}

/* Threads for `units` pieces of host work (the synthetic KV, the checks):
 * one a CPU, at most HOST_THREADS, at least 1. */
enum { HOST_THREADS = 16 };
static int64_t host_threads(int64_t units)
{
    int64_t n = sw_cpu_count();
    n = n < HOST_THREADS ? n : HOST_THREADS;
    n = n < units ? n : units;
    return n > 1 ? n : 1;
}

/* Tokens [t0, t1) of (seq, layer), on threads of the host when many. */
typedef struct gen_job {
    const ctx *x;
    int32_t seq, layer;
    int64_t t0, t1;
} gen_job;

static void *gen_worker(void *arg)
{
    const gen_job *j = (const gen_job *)arg;
    for (int64_t t = j->t0; t < j->t1; t++)
        gen_token(j->x, j->seq, j->layer, t);
    return NULL;
}

static void gen_tokens(const ctx *x, int32_t seq, int32_t layer, int64_t t0, int64_t t1)
{
    enum { MIN_TOKENS = 256 }; /* a thread's least share */
    gen_job jobs[HOST_THREADS];
    pthread_t th[HOST_THREADS];
    int started[HOST_THREADS] = {0};
    const int64_t n = host_threads((t1 - t0) / MIN_TOKENS);
    for (int64_t i = 0; i < n; i++) {
        jobs[i] = (gen_job){x, seq, layer, t0 + (t1 - t0) * i / n, t0 + (t1 - t0) * (i + 1) / n};
        if (i > 0)
            started[i] = pthread_create(&th[i], NULL, gen_worker, &jobs[i]) == 0;
    }
    gen_worker(&jobs[0]);
    for (int64_t i = 1; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            gen_worker(&jobs[i]); /* no thread: made here */
    }
}

static void gen_queries(ctx *x)
{
    const swt_case *c = x->c;
    for (int32_t l = 0; l < c->layers; l++)
        for (int32_t b = 0; b < c->batch; b++)
            for (int32_t h = 0; h < x->Hq; h++) {
                const float *u = x->topic + ((size_t)l * x->H + h / x->G) * x->D;
                uint16_t *q = x->q + (((size_t)l * c->batch + b) * x->Hq + h) * x->D;
                for (int32_t d = 0; d < x->D; d++)
                    q[d] = f2bf(2.0f * u[d] + 0.3f * rng_normal(&x->r));
            }
}

/* Block blk of (seq, layer) as an offload item: from the GPU copy with a
 * device pool (after kv_upload), else from host memory. */
static void block_item(ctx *x, int32_t seq, int32_t layer, int32_t blk, sw_swap_block *b)
{
    const size_t stride = (size_t)x->H * x->B * x->D;
    const kvbuf *kb = x->dkv ? &x->dkv[(size_t)seq * x->c->layers + layer] : kv_at(x, seq, layer);
    int64_t valid = x->len - (int64_t)blk * x->B;
    sw_swap_block_init(b);
    b->dtype = SW_SWAP_KV_BF16;
    b->valid_tokens = (int32_t)(valid < x->B ? valid : x->B);
    b->k = kb->k + (size_t)blk * stride;
    b->v = kb->v + (size_t)blk * stride;
    b->k_bytes = b->v_bytes = stride * 2;
    b->on_device = x->dkv != NULL;
}

/* Blocks first..last of (seq, layer) to its GPU copy (device pool; outside
 * the timed region, as the model's writes of K/V would be). */
static int kv_upload(ctx *x, int32_t seq, int32_t layer, int32_t first, int32_t last)
{
    if (!x->dkv)
        return 0;
    const size_t stride = (size_t)x->H * x->B * x->D, off = (size_t)first * stride;
    const size_t n = (size_t)(last - first + 1) * stride * 2;
    const kvbuf *h = kv_at(x, seq, layer), *d = &x->dkv[(size_t)seq * x->c->layers + layer];
    return bench_gpu_copy(d->k + off, h->k + off, n, x->stream, "K to the GPU") ||
           bench_gpu_copy(d->v + off, h->v + off, n, x->stream, "V to the GPU");
}

/* Blocks a call when the context is offloaded before the steps. */
enum { OFFLOAD_CALL_BLOCKS = 128 };

/* Block blk of every (sequence, layer) in one sw_swap_offload_batch on the
 * attend's stream: a decode step's new tokens, as an engine offloads them. */
static sw_status offload_step(ctx *x, int32_t blk)
{
    const int32_t n = x->c->batch * x->c->layers;
    int32_t i = 0;
    for (int32_t b = 0; b < x->c->batch; b++)
        for (int32_t l = 0; l < x->c->layers; l++, i++) {
            block_item(x, b, l, blk, &x->items[i]);
            x->kvp[i] = &x->items[i];
            x->item_ids[i] = x->ids[b];
            x->item_layers[i] = l;
            x->item_blocks[i] = blk;
        }
    return sw_swap_offload_batch(x->swap, n, x->item_ids, x->item_layers, x->item_blocks, x->kvp,
                                 x->stream, NULL);
}

/* Relative L2 of query head h's output row o (its query q) against the
 * fp64 attention over the first len tokens of (seq, layer) (a decode row
 * sees the whole cache). sc: len doubles of scratch, acc: D. */
static double check_row(const ctx *x, int32_t seq, int32_t layer, int32_t h, const uint16_t *q,
                        const uint16_t *o, int64_t len, double *sc, double *acc)
{
    const int32_t D = x->D, B = x->B, H = x->H, kh = h / x->G;
    const kvbuf *kb = kv_at(x, seq, layer);
    double qd[1024];
    for (int32_t d = 0; d < D; d++) {
        qd[d] = bf2d(q[d]);
        acc[d] = 0;
    }
    const double scale = 1.0 / sqrt((double)D);
    double mx = -INFINITY;
    for (int64_t t = 0; t < len; t++) {
        const uint16_t *k = kb->k + (((size_t)(t / B) * H + kh) * B + (size_t)(t % B)) * D;
        double a = 0;
        for (int32_t d = 0; d < D; d++)
            a += qd[d] * bf2d(k[d]);
        sc[t] = a * scale;
        mx = sc[t] > mx ? sc[t] : mx;
    }
    double sum = 0;
    for (int64_t t = 0; t < len; t++) {
        const uint16_t *v = kb->v + (((size_t)(t / B) * H + kh) * B + (size_t)(t % B)) * D;
        const double p = exp(sc[t] - mx);
        sum += p;
        for (int32_t d = 0; d < D; d++)
            acc[d] += p * bf2d(v[d]);
    }
    double num = 0, den = 0;
    for (int32_t d = 0; d < D; d++) {
        const double ref = acc[d] / sum, got = bf2d(o[d]);
        num += (got - ref) * (got - ref);
        den += ref * ref;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double check_head(ctx *x, int32_t seq, int32_t layer, int32_t h)
{
    const size_t qi = (((size_t)layer * x->c->batch + seq) * x->Hq + h) * x->D;
    return check_row(x, seq, layer, h, x->q + qi, x->o + qi, x->len, x->sc, x->ref);
}

/* The checked head of step `step`, sample i (the check's choice, spread over
 * the kv groups). */
static int32_t checked_head(const ctx *x, int32_t step, int32_t heads, int32_t i)
{
    return (int32_t)(((int64_t)i * x->Hq + step) / heads) % x->Hq;
}

/* The checks the steps left (check_after), row r of step r / per_step in
 * the steps' order (layer, sequence, checked head), on threads of the
 * host: the fp64 reference over 512k tokens is ~0.2 s a row. */
typedef struct check_job {
    const ctx *x;
    const uint16_t *q, *o;  /* the kept rows */
    const int64_t *len;     /* each step's context */
    int32_t heads;          /* checked heads a sequence and layer */
    size_t per_step, rows;
    double *err;            /* [rows] */
    pthread_mutex_t mu;
    size_t next;            /* the next row not taken */
} check_job;

static void *check_worker(void *arg)
{
    check_job *j = (check_job *)arg;
    const ctx *x = j->x;
    const int64_t max_len = x->c->context + x->c->warmup + x->c->steps;
    double *sc = (double *)swt_xalloc(sizeof(double) * (size_t)max_len, 0);
    double *acc = (double *)swt_xalloc(sizeof(double) * (size_t)x->D, 0);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        const size_t r = j->next < j->rows ? j->next++ : j->rows;
        pthread_mutex_unlock(&j->mu);
        if (r == j->rows)
            break;
        const int32_t step = (int32_t)(r / j->per_step);
        const size_t in = r % j->per_step;
        const int32_t i = (int32_t)(in % (size_t)j->heads);
        const int32_t b = (int32_t)(in / (size_t)j->heads % (size_t)x->c->batch);
        const int32_t l = (int32_t)(in / ((size_t)j->heads * (size_t)x->c->batch));
        j->err[r] = check_row(x, b, l, checked_head(x, step, j->heads, i), j->q + r * x->D,
                              j->o + r * x->D, j->len[step], sc, acc);
    }
    free(sc);
    free(acc);
    return NULL;
}

/* err[r] for every kept row, on host_threads (the caller's alone when none
 * can be started). */
static void check_rows(check_job *j)
{
    const size_t nt = (size_t)host_threads((int64_t)j->rows);
    pthread_t th[HOST_THREADS];
    size_t started = 0;
    pthread_mutex_init(&j->mu, NULL);
    j->next = 0;
    for (; started + 1 < nt; started++)
        if (pthread_create(&th[started], NULL, check_worker, j) != 0)
            break;
    check_worker(j);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j->mu);
}

static int fail_status(const char *what, sw_status st)
{
    fprintf(stderr, "spillway: %s: %s: %s\n", what, sw_status_str(st), sw_last_error());
    return 1;
}

static void ctx_free(ctx *x)
{
    sw_swap_destroy(x->swap);
    bench_gpu_free(x->dq);
    bench_gpu_free(x->dout);
    bench_gpu_stream_destroy(x->stream);
    if (x->store) {
        sw_status st = sw_store_close(x->store);
        if (st != SW_OK)
            fail_status("store close", st);
    }
    if (x->kv)
        for (int32_t i = 0; i < x->c->batch * x->c->layers; i++) {
            free(x->kv[i].k);
            free(x->kv[i].v);
        }
    if (x->dkv) /* one allocation a layer: sequence 0's entries */
        for (int32_t l = 0; l < x->c->layers; l++) {
            bench_gpu_free(x->dkv[l].k);
            bench_gpu_free(x->dkv[l].v);
        }
    free(x->dkv);
    free(x->items); free(x->kvp); free(x->item_ids); free(x->item_layers); free(x->item_blocks);
    free(x->kv); free(x->topic); free(x->q); free(x->o); free(x->ids); free(x->indptr);
    free(x->ref); free(x->sc);
}

static int cmp_ms(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One attend of the step's queries at layer l, every sequence: from and
 * into the GPU copies with a device pool, else host memory (the steps,
 * the kernel loop, the host-time rounds, beside_loop). */
static sw_status attend_layer(ctx *x, int32_t l)
{
    const swt_case *c = x->c;
    sw_swap_attend_params p;
    sw_swap_attend_params_init(&p);
    p.layer = l;
    p.batch = c->batch;
    p.seq_ids = x->ids;
    p.q_indptr = x->indptr;
    const size_t off = (size_t)l * c->batch * x->Hq * x->D;
    p.q = c->device_pool ? (const void *)((uint16_t *)x->dq + off) : (const void *)(x->q + off);
    p.o = c->device_pool ? (void *)((uint16_t *)x->dout + off) : (void *)(x->o + off);
    return sw_swap_attend(x->swap, &p, NULL, x->stream);
}

/* The kernel loop's step beside the same KV read as pages through
 * sw_prefill: each layer's GPU copy is a pool of HND pages of block_size
 * tokens, sequence b's blocks pages b * max_blocks + 0.. (the engine read
 * exactly these bits at offload). One decode row a sequence, as the
 * engine's calls. Rounds of `reps` steps of each in turn; the median of
 * the rounds' medians. Fills res->beside_*. */
static void beside_loop(ctx *x, swt_result *res, int reps)
{
    const swt_case *c = x->c;
    res->beside_swap_ms = res->beside_paged_ms = res->beside_fi_ms = res->beside_cudnn_ms = -1;
    res->beside_paged_rel = res->beside_fi_rel = res->beside_cudnn_rel = -1;
    res->beside_cudnn_version = 0;
    const int32_t B = c->batch, nb = (int32_t)((x->len + x->B - 1) / x->B);
    int32_t *qo = (int32_t *)swt_xalloc(sizeof(int32_t) * (B + 1), 0);
    int32_t *pi = (int32_t *)swt_xalloc(sizeof(int32_t) * (B + 1), 0);
    int32_t *last = (int32_t *)swt_xalloc(sizeof(int32_t) * B, 0);
    int32_t *idx = (int32_t *)swt_xalloc(sizeof(int32_t) * (size_t)B * nb, 0);
    for (int32_t b = 0; b < B; b++) {
        qo[b + 1] = b + 1;
        pi[b + 1] = (b + 1) * nb;
        last[b] = (int32_t)(x->len - (int64_t)(nb - 1) * x->B);
        for (int32_t i = 0; i < nb; i++)
            idx[(size_t)b * nb + i] = b * x->max_blocks + i;
    }
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_BF16;
    p.num_qo_heads = x->Hq;
    p.num_kv_heads = x->H;
    p.head_dim = x->D;
    sw_paged_kv pk;
    sw_paged_kv_init(&pk);
    pk.page_size = x->B;
    pk.layout = SW_KV_HND;
    pk.num_pages = B * x->max_blocks;
    pk.page_indptr = pi;
    pk.page_indices = idx;
    pk.last_page_len = last;
    sw_prefill_plan *pl[2] = {NULL, NULL}; /* ours, FlashInfer's */
    void *ws[2] = {NULL, NULL};
    size_t wsb[2] = {0, 0};
    const size_t qn = (size_t)B * x->Hq * x->D;
    uint16_t *of[2] = {NULL, NULL}; /* their outputs: x->dout keeps the swap attend's */
    bench_gpu_timer tm;
    int have_tm = bench_gpu_timer_create(&tm) == 0;
    for (int k = 0; k < 2 && have_tm; k++) {
        p.backend = k ? SW_BACKEND_OPPONENT_FLASHINFER : SW_BACKEND_AUTO;
        const sw_status st = sw_prefill_plan_create_paged(&p, B, qo, &pk, &pl[k]);
        if (st != SW_OK) {
            snprintf(res->beside_note, sizeof res->beside_note, "%s: %s",
                     k ? "FlashInfer" : "paged decode", sw_last_error());
            pl[k] = NULL;
            continue;
        }
        wsb[k] = sw_prefill_plan_workspace_size(pl[k]);
        if ((wsb[k] && !(ws[k] = bench_gpu_alloc(wsb[k], "workspace"))) ||
            !(of[k] = bench_gpu_alloc(qn * 2 * c->layers, "O beside"))) {
            snprintf(res->beside_note, sizeof res->beside_note, "%s: no GPU memory",
                     k ? "FlashInfer" : "paged decode");
            sw_prefill_plan_destroy(pl[k]);
            pl[k] = NULL;
        }
    }
    /* cuDNN's paged SDPA over the same pool and page table */
    bench_cudnn_decode *cd = NULL;
    uint16_t *ocd = NULL;
    char cwhy[256] = "";
    if (have_tm) {
        int32_t *lens = (int32_t *)swt_xalloc(sizeof(int32_t) * B, 0);
        for (int32_t b = 0; b < B; b++)
            lens[b] = (int32_t)x->len;
        bench_cudnn_decode_shape cs = {.batch = B, .qo_heads = x->Hq, .kv_heads = x->H,
                                       .head_dim = x->D, .page_size = x->B,
                                       .num_pages = pk.num_pages, .pages_per_seq = nb,
                                       .page_table = idx, .kv_len = lens, .f16 = 0,
                                       .sm_scale = (float)(1.0 / sqrt((double)x->D))};
        cd = bench_cudnn_decode_create(&cs, cwhy, sizeof cwhy);
        free(lens);
        if (cd && !(ocd = bench_gpu_alloc(qn * 2 * c->layers, "O beside (cuDNN)"))) {
            snprintf(cwhy, sizeof cwhy, "cuDNN: no GPU memory for its output");
            bench_cudnn_decode_destroy(cd);
            cd = NULL;
        }
        if (cd)
            res->beside_cudnn_version = bench_cudnn_version();
        else
            printf("  beside the kernel loop: %s\n", cwhy);
    }
    /* one step of implementation w (0 swap attend, 1 ours paged, 2 FlashInfer, 3 cuDNN) */
    double med[4][16];
    int nround = 0;
    for (int round = 0; round < 16 && pl[0]; round++, nround++) {
        for (int w = 0; w < 4; w++) {
            if ((w == 2 && !pl[1]) || (w == 3 && !cd)) {
                med[w][round] = -1;
                continue;
            }
            double t[64];
            const int n = reps < 64 ? reps : 64;
            int dropped = 0; /* cuDNN failed: the others go on without it */
            for (int r = -1; r < n && !dropped; r++) { /* r = -1: warm-up */
                bench_gpu_timer_start(&tm, x->stream);
                for (int32_t l = 0; l < c->layers && !dropped; l++) {
                    const size_t off = (size_t)l * qn;
                    sw_status st;
                    if (w == 0) {
                        st = attend_layer(x, l);
                    } else if (w == 3) {
                        if (bench_cudnn_decode_run(cd, (const uint16_t *)x->dq + off, x->dkv[l].k,
                                                   x->dkv[l].v, ocd + off, x->stream, cwhy,
                                                   sizeof cwhy)) {
                            snprintf(res->beside_note, sizeof res->beside_note, "%s", cwhy);
                            dropped = 1;
                        }
                        st = SW_OK;
                    } else {
                        const int k = w - 1;
                        sw_prefill_tensors t0;
                        sw_prefill_tensors_init(&t0);
                        t0.q = (const uint16_t *)x->dq + off;
                        t0.k = x->dkv[l].k;
                        t0.v = x->dkv[l].v;
                        t0.o = of[k] + off;
                        t0.q_rows = B;
                        t0.workspace = ws[k];
                        t0.workspace_bytes = wsb[k];
                        st = sw_prefill_run(pl[k], &t0, x->stream);
                    }
                    if (st != SW_OK) {
                        snprintf(res->beside_note, sizeof res->beside_note, "%s: %s",
                                 w == 0 ? "swap attend" : w == 1 ? "paged decode" : "FlashInfer",
                                 sw_last_error());
                        goto done;
                    }
                }
                const double ms = bench_gpu_timer_stop_ms(&tm, x->stream);
                if (r >= 0)
                    t[r] = ms;
            }
            if (dropped) {
                printf("  beside the kernel loop: %s (cuDNN left out)\n", cwhy);
                bench_cudnn_decode_destroy(cd);
                cd = NULL;
                med[w][round] = -1;
                continue;
            }
            qsort(t, (size_t)n, sizeof(double), cmp_ms);
            med[w][round] = t[n / 2];
        }
    }
    if (nround > 0) {
        double *out[4] = {&res->beside_swap_ms, &res->beside_paged_ms, &res->beside_fi_ms,
                          &res->beside_cudnn_ms};
        for (int w = 0; w < 4; w++) {
            if ((w == 2 && !pl[1]) || (w == 3 && !cd))
                continue;
            qsort(med[w], (size_t)nround, sizeof(double), cmp_ms);
            *out[w] = med[w][nround / 2];
        }
    }
    /* their rows against the swap attend's (the last step's queries) */
    const size_t n = qn * c->layers;
    uint16_t *a = (uint16_t *)swt_xalloc(n * 2, 0), *f = (uint16_t *)swt_xalloc(n * 2, 0);
    double *rel[3] = {&res->beside_paged_rel, &res->beside_fi_rel, &res->beside_cudnn_rel};
    for (int k = 0; k < 3 && nround > 0; k++) {
        if ((k < 2 ? !pl[k] : !cd) || bench_gpu_copy(a, x->dout, n * 2, x->stream, "O") ||
            bench_gpu_copy(f, k < 2 ? of[k] : ocd, n * 2, x->stream, "O beside"))
            continue;
        double e2 = 0, r2 = 0;
        for (size_t i = 0; i < n; i++) {
            const double u = bf2d(a[i]), v = bf2d(f[i]);
            e2 += (u - v) * (u - v);
            r2 += u * u;
        }
        *rel[k] = sqrt(e2 / (r2 > 0 ? r2 : 1));
    }
    free(a);
    free(f);
done:
    if (have_tm)
        bench_gpu_timer_destroy(&tm);
    for (int k = 0; k < 2; k++) {
        sw_prefill_plan_destroy(pl[k]);
        bench_gpu_free(ws[k]);
        bench_gpu_free(of[k]);
    }
    bench_cudnn_decode_destroy(cd);
    bench_gpu_free(ocd);
    free(qo);
    free(pi);
    free(last);
    free(idx);
}

/* Opens the store, creates the engine, builds and offloads the context,
 * runs warmup + steps decode steps (each: one new token per sequence in
 * every layer, offloaded; then exact attention of every layer for the
 * batch, timed; then the check). Fills *res; returns 0, or 1 on an error
 * (a failed check is res->ok = 0, not an error). */
int swt_run_case(const swt_case *c, const char *store_dir, swt_result *res)
{
    memset(res, 0, sizeof *res);
    ctx x;
    memset(&x, 0, sizeof x);
    uint16_t *keep_q = NULL, *keep_o = NULL; /* check_after's rows (below) */
    int64_t *keep_len = NULL;
    x.c = c;
    x.H = c->kv_heads;
    x.Hq = c->qo_heads;
    x.D = c->head_dim;
    x.B = c->block_size;
    x.G = x.Hq / x.H;
    x.r.s = 0x5b177a11ull;
    const int64_t final_len = c->context + c->warmup + c->steps;
    x.max_blocks = (int32_t)((final_len + x.B - 1) / x.B);
    const size_t stripe = (size_t)x.B * x.D * 2;
    const size_t blk_bytes = 2 * (size_t)x.H * stripe; /* K and V of all kv heads */
    const int64_t total_blocks = (int64_t)c->batch * c->layers * x.max_blocks;
    res->kv_bytes = (uint64_t)total_blocks * blk_bytes;
    res->total_blocks = total_blocks;
    res->max_rel_l2 = 0;
    int rc = 1;

    /* Store: one stream per (sequence, layer, kv head, kind) of max_blocks
     * stripes; room for each stream's runs plus slack for the overwritten
     * last blocks. REFUSE, not EVICT: a KV stripe silently evicted would
     * only show up as NOT_FOUND later. */
    const uint64_t run_blocks = 64, ext = (stripe + 4095) / 4096 * 4096;
    const uint64_t streams = (uint64_t)c->batch * c->layers * x.H * 2;
    const uint64_t runs = streams * ((uint64_t)(x.max_blocks + run_blocks - 1) / run_blocks + 1) + 4;
    sw_store_config sc;
    sw_store_config_init(&sc);
    sc.dir = store_dir;
    sc.stripe_bytes = (uint32_t)stripe;
    sc.run_blocks = (uint32_t)run_blocks;
    sc.capacity_bytes = runs * (run_blocks * ext + 65536);
    sc.host_tier_bytes = c->host_tier_bytes;
    sc.io_buffer_bytes = c->io_buffer_bytes;
    sc.full_policy = SW_STORE_FULL_REFUSE;
    sw_status st = sw_store_open(&sc, &x.store);
    if (st != SW_OK) {
        fprintf(stderr, "spillway: store in %s\n", store_dir);
        fail_status("store open", st);
        goto out;
    }

    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = c->layers;
    m.num_kv_heads = x.H;
    m.num_qo_heads = x.Hq;
    m.head_dim = x.D;
    m.block_size = x.B;
    sw_swap_config cfg;
    sw_swap_config_init(&cfg);
    cfg.resident_blocks = c->resident_blocks;
    cfg.tile_blocks = c->tile_blocks;
    if (c->prefetch_depth >= 0)
        cfg.prefetch_depth = c->prefetch_depth;
    if (c->device_pool) {
        cfg.pool = SW_SWAP_POOL_DEVICE;
        cfg.device = 0;
    }
    st = sw_swap_create_tuned(&m, &cfg, x.store, c->tune, &x.swap);
    if (st != SW_OK) {
        fail_status("swap create", st);
        goto out;
    }
    x.ids = (uint64_t *)swt_xalloc(sizeof(uint64_t) * c->batch, 0);
    x.indptr = (int32_t *)swt_xalloc(sizeof(int32_t) * (c->batch + 1), 0);
    for (int32_t b = 0; b < c->batch; b++) {
        x.ids[b] = 1000 + (uint64_t)b;
        x.indptr[b + 1] = b + 1;
        st = sw_swap_seq_add(x.swap, x.ids[b], NS, (uint32_t)b * (uint32_t)x.max_blocks,
                             (uint32_t)x.max_blocks);
        if (st != SW_OK) {
            fail_status("seq add", st);
            goto out;
        }
    }

    /* Synthetic KV of the whole context. */
    x.topic = (float *)swt_xalloc(sizeof(float) * (size_t)c->layers * x.H * x.D, 0);
    for (int32_t i = 0; i < c->layers * x.H; i++) {
        float *u = x.topic + (size_t)i * x.D;
        double n2 = 0;
        for (int32_t d = 0; d < x.D; d++) {
            u[d] = rng_normal(&x.r);
            n2 += (double)u[d] * u[d];
        }
        for (int32_t d = 0; d < x.D; d++)
            u[d] = (float)(u[d] / sqrt(n2));
    }
    x.kv = (kvbuf *)swt_xalloc(sizeof(kvbuf) * (size_t)c->batch * c->layers, 0);
    for (int32_t i = 0; i < c->batch * c->layers; i++) {
        x.kv[i].k = (uint16_t *)swt_xalloc((size_t)x.max_blocks * blk_bytes / 2, 0);
        x.kv[i].v = (uint16_t *)swt_xalloc((size_t)x.max_blocks * blk_bytes / 2, 0);
    }
    const size_t qn = (size_t)c->layers * c->batch * x.Hq * x.D;
    x.q = (uint16_t *)swt_xalloc(qn * 2, 0);
    x.o = (uint16_t *)swt_xalloc(qn * 2, 0);
    x.ref = (double *)swt_xalloc(sizeof(double) * x.D, 0);
    if (c->device_pool && (!(x.dq = bench_gpu_alloc(qn * 2, "queries on the GPU")) ||
                           !(x.dout = bench_gpu_alloc(qn * 2, "outputs on the GPU")) ||
                           !(x.stream = bench_gpu_stream_create("the attend's stream"))))
        goto out;
    if (c->device_pool) {
        /* a layer's sequences in one allocation: a page pool (beside_loop) */
        x.dkv = (kvbuf *)swt_xalloc(sizeof(kvbuf) * (size_t)c->batch * c->layers, 0);
        const size_t per = (size_t)x.max_blocks * blk_bytes / 2; /* bytes of K (or V) a sequence */
        for (int32_t l = 0; l < c->layers; l++) {
            uint16_t *k = bench_gpu_alloc(per * c->batch, "K on the GPU");
            uint16_t *v = k ? bench_gpu_alloc(per * c->batch, "V on the GPU") : NULL;
            x.dkv[l].k = k;
            x.dkv[l].v = v;
            if (!k || !v)
                goto out;
            for (int32_t b = 1; b < c->batch; b++) {
                x.dkv[(size_t)b * c->layers + l].k = k + b * per / 2;
                x.dkv[(size_t)b * c->layers + l].v = v + b * per / 2;
            }
        }
    }
    x.sc = (double *)swt_xalloc(sizeof(double) * (size_t)final_len, 0);
    {
        /* a step's offload (an item a sequence and layer) or a call of the
         * context's offload below */
        size_t n = (size_t)c->batch * c->layers;
        n = n > OFFLOAD_CALL_BLOCKS ? n : OFFLOAD_CALL_BLOCKS;
        x.items = (sw_swap_block *)swt_xalloc(sizeof(sw_swap_block) * n, 0);
        x.kvp = (const sw_swap_block **)swt_xalloc(sizeof(void *) * n, 0);
        x.item_ids = (uint64_t *)swt_xalloc(sizeof(uint64_t) * n, 0);
        x.item_layers = (int32_t *)swt_xalloc(sizeof(int32_t) * n, 0);
        x.item_blocks = (int32_t *)swt_xalloc(sizeof(int32_t) * n, 0);
    }

    /* The context offloaded as an engine offloads a prefill: a (sequence,
     * layer)'s blocks in calls of up to OFFLOAD_CALL_BLOCKS, each one
     * sw_swap_offload_batch (one group of store writes, one staging copy). */
    swt_progress pg;
    const int32_t ctx_blocks = (int32_t)((c->context + x.B - 1) / x.B);
    swt_progress_start(&pg, "offload", (int64_t)c->batch * c->layers * ctx_blocks);
    double t0 = bench_now(), gen_s = 0;
    int64_t done = 0;
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t l = 0; l < c->layers; l++)
            for (int32_t first = 0; first < ctx_blocks; first += OFFLOAD_CALL_BLOCKS) {
                const int32_t n = ctx_blocks - first < OFFLOAD_CALL_BLOCKS ? ctx_blocks - first
                                                                         : OFFLOAD_CALL_BLOCKS;
                double g0 = bench_now();
                int64_t end = (int64_t)(first + n) * x.B;
                end = end < c->context ? end : c->context;
                gen_tokens(&x, b, l, (int64_t)first * x.B, end);
                x.len = end;
                if (kv_upload(&x, b, l, first, first + n - 1))
                    goto out;
                gen_s += bench_now() - g0;
                for (int32_t i = 0; i < n; i++) {
                    block_item(&x, b, l, first + i, &x.items[i]);
                    x.kvp[i] = &x.items[i];
                    x.item_ids[i] = x.ids[b];
                    x.item_layers[i] = l;
                    x.item_blocks[i] = first + i;
                }
                st = sw_swap_offload_batch(x.swap, n, x.item_ids, x.item_layers, x.item_blocks,
                                           x.kvp, x.stream, NULL);
                if (st != SW_OK) {
                    fail_status("offload", st);
                    goto out;
                }
                done += n;
                swt_progress_update(&pg, done, NULL);
            }
    x.len = c->context;
    res->offload_seconds = bench_now() - t0 - gen_s;

    /* Decode. */
    sw_swap_stats s0, s1;
    sw_store_stats t0s, t1s;
    s0.struct_size = s1.struct_size = sizeof s0;
    t0s.struct_size = t1s.struct_size = sizeof t0s;
    const int32_t nsteps = c->warmup + c->steps;
    const int32_t heads = c->check_heads > 0 && c->check_heads < x.Hq ? c->check_heads : x.Hq;
    swt_iosrc ios;
    swt_iosrc_open(&ios, store_dir);
    snprintf(res->io_dev, sizeof res->io_dev, "%s", ios.have_dev ? ios.name : "");
    /* check_after: each step's checked rows (query, output) and length kept
     * for the checks after the loop, so that the steps run back to back */
    const size_t rows_per_step = (size_t)c->layers * c->batch * heads;
    if (c->check_after) {
        const size_t n = rows_per_step * (size_t)nsteps * (size_t)x.D;
        if (n <= ((size_t)64 << 20)) {
            keep_q = malloc(n * 2);
            keep_o = malloc(n * 2);
            keep_len = malloc(sizeof(int64_t) * (size_t)nsteps);
        }
        if (!keep_q || !keep_o || !keep_len) {
            free(keep_q);
            free(keep_o);
            free(keep_len);
            keep_q = keep_o = NULL;
            keep_len = NULL; /* too many rows: checked during the steps */
        }
    }
    swt_progress_start(&pg, "decode", nsteps);
    const int interleave = c->raw_path && c->raw_every > 0 && c->raw_slice_bytes > 0 &&
                           c->raw_file_bytes >= c->raw_slice_bytes;
    for (int32_t step = 0; step < nsteps; step++) {
        if (step == c->warmup) {
            if (interleave)
                raw_interleaved_pass(c, res, 0); /* before the first timed step */
            sw_swap_get_stats(x.swap, &s0);
            sw_store_get_stats(x.store, &t0s);
        }
        /* New token (the decode pattern: the last block is rewritten as it
         * grows) and fresh queries; generated outside the timed region. */
        for (int32_t b = 0; b < c->batch; b++)
            for (int32_t l = 0; l < c->layers; l++)
                gen_token(&x, b, l, x.len);
        x.len++;
        gen_queries(&x);
        /* On the attend's stream (bench_gpu_copy: a plain cudaMemcpy from
         * pageable memory would run on the legacy stream, which x.stream
         * does not wait for). */
        if (c->device_pool && bench_gpu_copy(x.dq, x.q, qn * 2, x.stream, "query upload"))
            goto out;
        const int32_t last = (int32_t)((x.len - 1) / x.B);
        for (int32_t b = 0; b < c->batch; b++)
            for (int32_t l = 0; l < c->layers; l++)
                if (kv_upload(&x, b, l, last, last))
                    goto out;
        swt_iostat io0, io1;
        swt_iostat_read(&ios, &io0); /* outside the timed region */
        if (step >= c->warmup)
            swt_qprof_begin(x.store);
        double ts = bench_now();
        st = offload_step(&x, last);
        if (st != SW_OK) {
            fail_status("offload (decode)", st);
            goto out;
        }
        const double ta = bench_now();
        for (int32_t l = 0; l < c->layers; l++) {
            st = attend_layer(&x, l);
            if (st != SW_OK) {
                fail_status("attend", st);
                goto out;
            }
        }
        if (c->device_pool && bench_gpu_sync(x.stream, "attend on the GPU"))
            goto out;
        const double te = bench_now(), dt = te - ts;
        swt_iostat_read(&ios, &io1);
        if (step >= c->warmup) {
            swt_iostat_add(&res->io, &io0, &io1);
            swt_qprof_add(x.store, &res->qp);
            res->step_seconds += dt;
            if (res->nstep_ms < (int32_t)(sizeof res->step_ms / sizeof res->step_ms[0])) {
                res->attend_ms[res->nstep_ms] = (te - ta) * 1e3;
                res->step_ms[res->nstep_ms++] = dt * 1e3;
            }
            res->attend_seconds += te - ta;
        } else {
            res->warmup_seconds += dt;
        }
        /* raw passes between blocks of raw_every timed steps and after the
         * last (outside the timed region: the disk's raw rate over the same
         * minutes as the steps) */
        if (interleave && step >= c->warmup &&
            ((step - c->warmup + 1) % c->raw_every == 0 || step == nsteps - 1))
            raw_interleaved_pass(c, res, step - c->warmup + 1);
        if (c->device_pool && bench_gpu_copy(x.o, x.dout, qn * 2, x.stream, "output download"))
            goto out;
        /* Check: every sampled head of every sequence and layer, spread
         * over the kv groups. */
        double worst = 0;
        size_t r = (size_t)step * rows_per_step;
        for (int32_t l = 0; l < c->layers; l++)
            for (int32_t b = 0; b < c->batch; b++)
                for (int32_t i = 0; i < heads; i++, r++) {
                    const int32_t h = checked_head(&x, step, heads, i);
                    if (keep_q) {
                        const size_t qi = (((size_t)l * c->batch + b) * x.Hq + h) * x.D;
                        memcpy(keep_q + r * x.D, x.q + qi, (size_t)x.D * 2);
                        memcpy(keep_o + r * x.D, x.o + qi, (size_t)x.D * 2);
                        continue;
                    }
                    double e = check_head(&x, b, l, h);
                    if (!(e <= worst))
                        worst = e; /* NaN stays the worst */
                    res->heads_checked++;
                }
        char extra[96];
        if (keep_q) {
            keep_len[step] = x.len;
            snprintf(extra, sizeof extra, "step %.3fs%s", dt,
                     step < c->warmup ? " (warm-up)" : "");
        } else {
            if (!(worst <= res->max_rel_l2))
                res->max_rel_l2 = worst;
            snprintf(extra, sizeof extra, "step %.3fs, rel L2 %.1e%s", dt, worst,
                     step < c->warmup ? " (warm-up)" : "");
        }
        swt_progress_update(&pg, step + 1, extra);
    }
    sw_swap_get_stats(x.swap, &s1);
    sw_store_get_stats(x.store, &t1s);
    (void)rng_uniform;
    /* Steady state: (1) the attends of the last step's queries back to
     * back, every layer, kernel_reps times (no check, no host work in
     * between, so the GPU runs at its working clocks as during the
     * reference copies), timed from the first call to the last result on
     * the stream: what a decode loop waits for (the engine's kernel_timing
     * stays off: it makes each call wait for its kernels).
     * (2) the host time of a call with the GPU's queue short: rounds of 8
     * calls after a stream sync, each timed to its return -- a decode
     * loop's calls between two samplings (calls queued far ahead of the
     * GPU wait for it: the resident ring's reuse, blob_get in
     * src/swap/dev_fast.c). Every
     * block is resident in the case that asks for it: nothing is read. */
    if (c->device_pool && c->kernel_reps > 0) {
        sw_swap_stats k0, k1;
        k0.struct_size = k1.struct_size = sizeof k0;
        sw_swap_get_stats(x.swap, &k0);
        const double tk = bench_now();
        for (int32_t rep = 0; rep < c->kernel_reps && st == SW_OK; rep++)
            for (int32_t l = 0; l < c->layers && st == SW_OK; l++)
                st = attend_layer(&x, l);
        if (st != SW_OK) {
            fail_status("attend (kernel loop)", st);
            goto out;
        }
        if (bench_gpu_sync(x.stream, "kernel loop on the GPU"))
            goto out;
        res->loop_attend_seconds = bench_now() - tk;
        sw_swap_get_stats(x.swap, &k1);
        double host_t[160], host_pos[8] = {0};
        int32_t host_n = 0;
        for (int32_t round = 0; round < 20 && st == SW_OK; round++) {
            if (bench_gpu_sync(x.stream, "host-time loop on the GPU"))
                goto out;
            for (int32_t i = 0; i < 8 && st == SW_OK; i++) {
                const double th = bench_now();
                st = attend_layer(&x, (round * 8 + i) % c->layers);
                host_t[host_n++] = bench_now() - th;
                host_pos[i] += host_t[host_n - 1] / 20;
            }
        }
        if (st != SW_OK) {
            fail_status("attend (host-time loop)", st);
            goto out;
        }
        if (bench_gpu_sync(x.stream, "host-time loop on the GPU"))
            goto out;
        double host_sum = 0;
        for (int32_t i = 0; i < host_n; i++)
            host_sum += host_t[i];
        qsort(host_t, (size_t)host_n, sizeof(double), cmp_ms);
        res->loop_host_us_mean = host_n ? host_sum / host_n * 1e6 : 0;
        res->loop_host_us_median = host_n ? host_t[host_n / 2] * 1e6 : 0;
        res->loop_host_us_max = host_n ? host_t[host_n - 1] * 1e6 : 0;
        printf("  host time of an attend call, rounds of 8 after a sync: mean %.1f, median %.1f, "
               "max %.1f us; by place in the round:", res->loop_host_us_mean,
               res->loop_host_us_median, res->loop_host_us_max);
        for (int i = 0; i < 8; i++)
            printf(" %.1f", host_pos[i] * 1e6);
        printf("\n");
        res->loop_reps = c->kernel_reps;
        res->loop_kernel_kv_bytes = k1.kernel_kv_bytes - k0.kernel_kv_bytes;
        res->loop_bytes_read = k1.bytes_read - k0.bytes_read;
        if (x.dkv)
            beside_loop(&x, res, 10);
    }
    res->checked_after = keep_q != NULL;
    if (keep_q) {
        /* the checks the steps left (check_after), each against the context
         * of its step (tokens only ever appended: those are unchanged) */
        check_job j;
        memset(&j, 0, sizeof j);
        j.x = &x;
        j.q = keep_q;
        j.o = keep_o;
        j.len = keep_len;
        j.heads = heads;
        j.per_step = rows_per_step;
        j.rows = rows_per_step * (size_t)nsteps;
        j.err = (double *)swt_xalloc(sizeof(double) * j.rows, 0);
        swt_progress_start(&pg, "check", nsteps);
        check_rows(&j);
        for (int32_t step = 0; step < nsteps; step++) {
            double worst = 0;
            for (size_t r = (size_t)step * rows_per_step; r < (size_t)(step + 1) * rows_per_step;
                 r++) {
                if (!(j.err[r] <= worst))
                    worst = j.err[r]; /* NaN stays the worst */
                res->heads_checked++;
            }
            if (!(worst <= res->max_rel_l2))
                res->max_rel_l2 = worst;
            char extra[64];
            snprintf(extra, sizeof extra, "rel L2 %.1e", worst);
            swt_progress_update(&pg, step + 1, extra);
        }
        free(j.err);
    }

    res->context_end = x.len;
    res->steps = c->steps;
    res->hits = s1.hits - s0.hits;
    res->misses = s1.misses - s0.misses;
    res->bytes_read = s1.bytes_read - s0.bytes_read;
    res->host_bytes_read = t1s.host_bytes_read - t0s.host_bytes_read;
    res->file_bytes_read = t1s.file_bytes_read - t0s.file_bytes_read;
    res->host_stripes = t1s.host_hits - t0s.host_hits;
    res->file_stripes = t1s.file_hits - t0s.file_hits;
    res->read_wait_seconds = s1.read_wait_seconds - s0.read_wait_seconds;
    res->compute_seconds = s1.compute_seconds - s0.compute_seconds;
    res->plan_seconds = s1.plan_seconds - s0.plan_seconds;
    res->submit_seconds = s1.submit_seconds - s0.submit_seconds;
    res->score_seconds = s1.score_seconds - s0.score_seconds;
    res->finish_seconds = s1.finish_seconds - s0.finish_seconds;
    res->prefetched_tiles = s1.prefetched_tiles - s0.prefetched_tiles;
    res->tiles = s1.tiles - s0.tiles;
    res->evictions = s1.evictions - s0.evictions;
    res->kept_visits = s1.kept_visits - s0.kept_visits;
    res->ahead_blocks = s1.ahead_blocks - s0.ahead_blocks;
    res->ahead_used = s1.ahead_used - s0.ahead_used;
    res->read_calls = s1.read_calls - s0.read_calls;
    res->store_ranges = t1s.read_requests - t0s.read_requests;
    res->store_ios = t1s.read_ios - t0s.read_ios;
    res->swap = s1;
    res->store = t1s;
    res->ok = res->max_rel_l2 <= 1e-2;
    rc = 0;
out:
    free(keep_q);
    free(keep_o);
    free(keep_len);
    ctx_free(&x);
    return rc;
}
