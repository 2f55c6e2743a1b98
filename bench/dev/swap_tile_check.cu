/* bench/dev/swap_tile_check.cu - development driver for the swap engine's
 * tile kernels: correctness of every kernel (0, 1: bench/dev variants; 2, 3:
 * src/cuda/swap, README.md here) against an fp64 CPU reference
 * on random shapes, and the all-resident timing of `spillway bench swap`
 * (h16-2/d256, block 16, one tile of 2050 blocks = 32774 tokens of BF16 K/V,
 * one decode row), in one program so that one device call does both.
 *
 * Kernels: 1 CUDA cores (swap_tile_v1_cuda_cores.cu), 0 tensor cores
 * (swap_tile_v0_mma.cu; 1109 GB/s in the bench), 2 tensor cores with a
 * descriptor-free streaming loop (swap_tile_stream.cu, the library's before
 * sm_90; ~1800 GB/s iso), 3 bulk copies into an mbarrier ring, producer warp
 * + 8 consumer warps (swap_tile_bulk.cu, the library's on sm_90+;
 * swap_stream_probe.cu times its variants).
 *
 * Timing, per kernel (CTAs per SM as each kernel was run, --per overrides):
 *   iso   as the bench's events: stream idle (synchronised), a small
 *         descriptor upload, event, tile kernel, event, merge; mean of reps.
 *         Includes the host's launch latency after the first event.
 *   b2b   the same tile kernel launched reps times back to back between two
 *         events (no host gap): GPU time per launch.
 * GB/s = K/V bytes of the tile (2 x H x tokens x D x 2) / time; the limit is
 * a 1 GiB device-to-device cudaMemcpy counted as 2 x bytes / time, best of
 * 5, in the same run (as bench/swap_run.c measures it).
 *
 * Build (device machine, from the repository root):
 *   nvcc -std=c++17 -O3 -Iinclude -Isrc -gencode=arch=compute_90a,code=sm_90a \
 *        -o /tmp/stc bench/dev/swap_tile_check.cu bench/dev/swap_tile_v0_mma.cu \
 *        bench/dev/swap_tile_v1_cuda_cores.cu src/cuda/swap/swap_tile.cu \
 *        src/cuda/swap/swap_tile_stream.cu src/cuda/swap/swap_tile_bulk.cu \
 *        src/cuda/swap/swap_tile_direct.cu src/cuda/swap/swap_gather.cu
 * Run: /tmp/stc [--check] [--bench] [--cases N] [--seed N] [--reps N]
 *               [--kernels 0,1,2,3] [--per K] [--big] [--blocks N]
 * --big: check cases of 16000-40000 blocks in one tile; --blocks: the bench
 * tile's blocks (2050: 64 MiB; 32768: 1 GiB, the D2D reference's size).
 * Exit: 0 pass, 1 fail, 77 no GPU (skip). */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

/* ---------------------------------------------------------------- glue -- */
/* sw_fail and sw_env_int live in src/core; when that is linked they win
 * over these. */
static char g_err[512];
extern "C" __attribute__((weak)) sw_status sw_fail(sw_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return s;
}
extern "C" __attribute__((weak)) int64_t sw_env_int(const char *name, int64_t def)
{
    const char *v = getenv(name);
    return v && *v ? strtoll(v, NULL, 10) : def;
}

#define CK(call)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                \
                    cudaGetErrorString(e_));                                            \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)
#define SK(call)                                                                        \
    do {                                                                                \
        sw_status s_ = (call);                                                          \
        if (s_ != SW_OK) {                                                              \
            fprintf(stderr, "%s:%d %s: status %d: %s\n", __FILE__, __LINE__, #call,     \
                    (int)s_, g_err);                                                    \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static int rnd_int(int lo, int hi) /* inclusive */
{
    return lo + (int)(rnd_u32() % (uint32_t)(hi - lo + 1));
}
static float rnd_unit(void)
{
    return (float)(rnd_u32() & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static double bf2d(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double e4m3_to_d(uint8_t b)
{
    const int e = (b >> 3) & 15, m = b & 7;
    const double v = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
    return (b & 0x80) ? -v : v;
}
static uint8_t rnd_e4m3(void)
{
    uint8_t b;
    do
        b = (uint8_t)(rnd_u32() & 0xff);
    while ((b & 0x7f) == 0x7f || ((b >> 3) & 15) > 9); /* no NaN, |x| < 4 */
    return b;
}

/* device.c's sw_swap_dev_chunks (H1's file; kept in step by hand). */
static int32_t dev_chunks(int32_t nblk, int32_t H, int32_t nrg, int32_t ctas)
{
    if (nblk < 1)
        return 1;
    const int64_t per = (int64_t)(H > 0 ? H : 1) * (nrg > 0 ? nrg : 1);
    int64_t c = ((int64_t)(ctas > 0 ? ctas : 1) + per - 1) / per;
    const int64_t most = (nblk + 1) / 2;
    if (c > most)
        c = most;
    if (c < 1)
        c = 1;
    return (int32_t)c;
}
/* CTAs per SM per kernel (device.c's tile_ctas_per_sm, with kernels 2 and 3
 * at 1: their ~195-217 KiB of stages fill an SM). */
[[maybe_unused]] static int ctas_per_sm(int kernel, int D)
{
    if (kernel == 2 || kernel == 3)
        return 1;
    if (kernel != 0)
        return 2;
    return D >= 256 ? 1 : D >= 128 ? 2 : 4;
}

/* ------------------------------------------------------------ problem -- */
struct problem {
    int H, G, D, B, ql, causal, tile;  /* tile: blocks per tile kernel call */
    int nblk, last_valid, dtmode;      /* dtmode 0 bf16, 1 fp8, 2 mixed */
    int64_t len;
    size_t slot_bytes, v_off;
    int nslots;
    std::vector<uint8_t> pool;         /* host copy */
    std::vector<int> slot, dtype;      /* per logical block */
    std::vector<float> ks, vs;
    std::vector<uint16_t> q;           /* [ql][Hq][D] */
};

static void make_problem(problem &p, int H, int G, int D, int B, int nblk, int last_valid,
                         int ql, int causal, int dtmode, int tile, int extra_slots)
{
    p.H = H;
    p.G = G;
    p.D = D;
    p.B = B;
    p.nblk = nblk;
    p.last_valid = last_valid;
    p.ql = ql;
    p.causal = causal;
    p.dtmode = dtmode;
    p.tile = tile;
    p.len = (int64_t)(nblk - 1) * B + last_valid;
    p.v_off = (size_t)H * B * D * 2;
    p.slot_bytes = (2 * p.v_off + 63) / 64 * 64;
    p.nslots = nblk + extra_slots;
    p.pool.assign(p.slot_bytes * (size_t)p.nslots, 0);
    /* poison every byte: padding rows must never be read as data */
    for (size_t i = 0; i < p.pool.size(); i++)
        p.pool[i] = 0xff; /* BF16 0xffff and E4M3 0xff are NaN */
    std::vector<int> perm(p.nslots);
    for (int i = 0; i < p.nslots; i++)
        perm[i] = i;
    for (int i = p.nslots - 1; i > 0; i--) {
        int j = rnd_int(0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    p.slot.resize(nblk);
    p.dtype.resize(nblk);
    p.ks.resize(nblk);
    p.vs.resize(nblk);
    for (int b = 0; b < nblk; b++) {
        p.slot[b] = perm[b];
        p.dtype[b] = dtmode == 0 ? 0 : dtmode == 1 ? 1 : rnd_int(0, 1);
        p.ks[b] = p.dtype[b] ? 0.25f + 0.5f * (rnd_unit() + 1.0f) : 1.0f;
        p.vs[b] = p.dtype[b] ? 0.25f + 0.5f * (rnd_unit() + 1.0f) : 1.0f;
        const int valid = b == nblk - 1 ? last_valid : B;
        uint8_t *s = &p.pool[(size_t)p.slot[b] * p.slot_bytes];
        for (int kind = 0; kind < 2; kind++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < valid; t++)
                    for (int d = 0; d < D; d++) {
                        if (p.dtype[b]) {
                            s[(kind ? p.v_off : 0) + ((size_t)h * B + t) * D + d] = rnd_e4m3();
                        } else {
                            const uint16_t v = f2bf(rnd_unit() * 2.0f);
                            memcpy(s + (kind ? p.v_off : 0) + (((size_t)h * B + t) * D + d) * 2,
                                   &v, 2);
                        }
                    }
    }
    p.q.resize((size_t)ql * H * G * D);
    for (auto &x : p.q)
        x = f2bf(rnd_unit() * 2.0f);
}

static double kv_elem(const problem &p, int b, int kind, int h, int t, int d)
{
    const uint8_t *s = &p.pool[(size_t)p.slot[b] * p.slot_bytes + (kind ? p.v_off : 0)];
    if (p.dtype[b])
        return e4m3_to_d(s[((size_t)h * p.B + t) * p.D + d]) * (kind ? p.vs[b] : p.ks[b]);
    uint16_t v;
    memcpy(&v, s + (((size_t)h * p.B + t) * p.D + d) * 2, 2);
    return bf2d(v);
}

/* fp64 reference: out [ql][Hq][D] */
static void reference(const problem &p, double scale, std::vector<double> &out)
{
    const int Hq = p.H * p.G, D = p.D;
    out.assign((size_t)p.ql * Hq * D, 0.0);
    std::vector<double> sc;
    for (int r = 0; r < p.ql; r++)
        for (int hq = 0; hq < Hq; hq++) {
            const int h = hq / p.G;
            const int64_t lim = p.causal ? r + p.len - p.ql : p.len - 1;
            sc.assign((size_t)p.len, -INFINITY);
            double mx = -INFINITY;
            for (int64_t j = 0; j <= lim && j < p.len; j++) {
                const int b = (int)(j / p.B), t = (int)(j % p.B);
                double s = 0;
                for (int d = 0; d < D; d++)
                    s += bf2d(p.q[((size_t)r * Hq + hq) * D + d]) * kv_elem(p, b, 0, h, t, d);
                sc[j] = s * scale;
                mx = fmax(mx, sc[j]);
            }
            double l = 0;
            double *o = &out[((size_t)r * Hq + hq) * D];
            for (int64_t j = 0; j <= lim && j < p.len; j++) {
                const double e = exp(sc[j] - mx);
                l += e;
                const int b = (int)(j / p.B), t = (int)(j % p.B);
                for (int d = 0; d < D; d++)
                    o[d] += e * kv_elem(p, b, 1, h, t, d);
            }
            for (int d = 0; d < D && l > 0; d++)
                o[d] /= l;
        }
}

/* ------------------------------------------------------------- device -- */
struct dev_problem {
    uint8_t *pool;
    uint16_t *q;
    sw_cuda_swap_blk *blk;
    float *m, *l, *acc, *part, *of32;
    size_t part_floats;
};

static void dev_upload(const problem &p, dev_problem &d, int sms, int max_per)
{
    const int Hq = p.H * p.G;
    CK(cudaMalloc(&d.pool, p.pool.size()));
    CK(cudaMemcpy(d.pool, p.pool.data(), p.pool.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&d.q, p.q.size() * 2));
    CK(cudaMemcpy(d.q, p.q.data(), p.q.size() * 2, cudaMemcpyHostToDevice));
    std::vector<sw_cuda_swap_blk> bd(p.nblk);
    for (int b = 0; b < p.nblk; b++) {
        memset(&bd[b], 0, sizeof bd[b]);
        bd[b].slot = p.slot[b];
        bd[b].block = b;
        bd[b].valid = b == p.nblk - 1 ? p.last_valid : p.B;
        bd[b].dtype = p.dtype[b];
        bd[b].k_scale = p.ks[b];
        bd[b].v_scale = p.vs[b];
    }
    CK(cudaMalloc(&d.blk, sizeof(sw_cuda_swap_blk) * p.nblk));
    CK(cudaMemcpy(d.blk, bd.data(), sizeof(sw_cuda_swap_blk) * p.nblk, cudaMemcpyHostToDevice));
    const size_t hr = (size_t)p.ql * Hq;
    CK(cudaMalloc(&d.m, hr * 4));
    CK(cudaMalloc(&d.l, hr * 4));
    CK(cudaMalloc(&d.acc, hr * p.D * 4));
    CK(cudaMalloc(&d.of32, hr * p.D * 4));
    const int nrg = (p.ql * p.G + 7) / 8;
    const int nch = dev_chunks(p.tile, p.H, nrg, sms * max_per);
    d.part_floats = (size_t)nch * p.H * nrg * 8 * (p.D + 2);
    CK(cudaMalloc(&d.part, d.part_floats * 4));
}

static void dev_free(dev_problem &d)
{
    cudaFree(d.pool);
    cudaFree(d.q);
    cudaFree(d.blk);
    cudaFree(d.m);
    cudaFree(d.l);
    cudaFree(d.acc);
    cudaFree(d.of32);
    cudaFree(d.part);
}

static sw_cuda_swap_tile_args tile_args(const problem &p, const dev_problem &d, int b0, int n,
                                        int kernel, int ctas)
{
    sw_cuda_swap_tile_args a;
    memset(&a, 0, sizeof a);
    a.pool = d.pool;
    a.slot_bytes = p.slot_bytes;
    a.v_off = p.v_off;
    a.blk = d.blk + b0;
    a.nblk = n;
    a.q = d.q;
    a.ql = p.ql;
    a.Hq = p.H * p.G;
    a.H = p.H;
    a.G = p.G;
    a.D = p.D;
    a.B = p.B;
    a.len = p.len;
    a.causal = p.causal;
    a.qscale = (float)(1.0 / sqrt((double)p.D) * 1.4426950408889634);
    a.nrg = (p.ql * p.G + 7) / 8;
    a.nchunks = dev_chunks(n, p.H, a.nrg, ctas);
    (void)kernel; /* tile_launch's */
    a.part = d.part;
    a.row0 = 0;
    a.m = d.m;
    a.l = d.l;
    a.acc = d.acc;
    return a;
}

/* kernel 0, 1 (the variants here), 2 or 3 (src) on a's tile */
extern "C" sw_status sw_cuda_swap_tile_mma(const sw_cuda_swap_tile_args *a, void *stream,
                                           int *launched);
extern "C" sw_status sw_cuda_swap_tile_cuda_cores(const sw_cuda_swap_tile_args *a, void *stream);
extern "C" sw_status sw_cuda_swap_tile_stream(const sw_cuda_swap_tile_args *a, void *stream,
                                              int *launched);
extern "C" sw_status sw_cuda_swap_tile_bulk(const sw_cuda_swap_tile_args *a, void *stream,
                                            int *launched);
static sw_status tile_launch(int kernel, const sw_cuda_swap_tile_args *a, cudaStream_t st)
{
    int launched = 0;
    if (kernel == 3)
        SW_TRY(sw_cuda_swap_tile_bulk(a, st, &launched));
    if (!launched && (kernel == 2 || kernel == 3))
        SW_TRY(sw_cuda_swap_tile_stream(a, st, &launched));
    if (!launched && kernel == 0)
        SW_TRY(sw_cuda_swap_tile_mma(a, st, &launched));
    return launched ? SW_OK : sw_cuda_swap_tile_cuda_cores(a, st);
}

/* One attend: init, tiles (tile + merge each), finalize to fp32. */
[[maybe_unused]] static void dev_attend(const problem &p, dev_problem &d, int kernel, int ctas,
                                        cudaStream_t st)
{
    const int64_t hr = (int64_t)p.ql * p.H * p.G;
    SK(sw_cuda_swap_state_init(d.m, d.l, d.acc, hr, p.D, st));
    for (int b0 = 0; b0 < p.nblk; b0 += p.tile) {
        const int n = p.nblk - b0 < p.tile ? p.nblk - b0 : p.tile;
        sw_cuda_swap_tile_args a = tile_args(p, d, b0, n, kernel, ctas);
        if ((size_t)a.nchunks * p.H * a.nrg * 8 * (p.D + 2) > d.part_floats) {
            fprintf(stderr, "partials too small\n");
            exit(1);
        }
        SK(tile_launch(kernel, &a, st));
        SK(sw_cuda_swap_merge(&a, st));
    }
    SK(sw_cuda_swap_finalize(d.m, d.l, d.acc, hr, p.D, NULL, NULL, d.of32, st));
}

/* -------------------------------------------------------------- check -- */
#ifndef SW_TILE_CHECK_NO_MAIN /* bench/dev/swap_stream_probe.cu includes this file */
static int run_checks(int ncases, const std::vector<int> &kernels, int sms, uint64_t seed,
                      int big)
{
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    int fails = 0;
    for (int c = 0; c < ncases; c++) {
        g_rng = seed * 0x9E3779B97F4A7C15ull + (uint64_t)c * 7919 + 1;
        for (int i = 0; i < 4; i++)
            rnd_u32();
        static const int Ds[3] = {64, 128, 256}, Bs[6] = {1, 4, 5, 16, 16, 32},
                         Gs[5] = {1, 2, 4, 8, 8};
        const int D = Ds[rnd_int(0, 2)], B = Bs[rnd_int(0, 5)], G = Gs[rnd_int(0, 4)];
        const int H = rnd_int(1, 2);
        /* --big: long tiles (hundreds of blocks per CTA: kernel 3's
         * descriptor window beyond 256 blocks, fewer ring stages) */
        const int nblk = big ? rnd_int(16000, 40000) : rnd_int(1, c < 3 ? 400 : 90);
        const int last_valid = rnd_int(1, B);
        const int64_t len = (int64_t)(nblk - 1) * B + last_valid;
        const int ql = rnd_int(0, 2) == 0 ? 1 : rnd_int(1, (int)(len < 40 ? len : 40));
        const int causal = rnd_int(0, 3) != 0;
        const int dtmode = rnd_int(0, 2);
        const int tile = big || rnd_int(0, 1) ? nblk : rnd_int(1, nblk);
        problem p;
        make_problem(p, H, G, D, B, nblk, last_valid, ql, causal, dtmode, tile, rnd_int(0, 8));
        std::vector<double> ref;
        reference(p, 1.0 / sqrt((double)D), ref);
        double rn = 0;
        for (double x : ref)
            rn += x * x;
        dev_problem d;
        dev_upload(p, d, sms, 4);
        for (int k : kernels) {
            CK(cudaMemset(d.of32, 0xff, ref.size() * 4));
            dev_attend(p, d, k, sms * ctas_per_sm(k, D), st);
            CK(cudaStreamSynchronize(st));
            std::vector<float> o(ref.size());
            CK(cudaMemcpy(o.data(), d.of32, o.size() * 4, cudaMemcpyDeviceToHost));
            double en = 0;
            int bad = 0;
            for (size_t i = 0; i < o.size(); i++) {
                if (!isfinite(o[i]))
                    bad = 1;
                en += (o[i] - ref[i]) * (o[i] - ref[i]);
            }
            const double rel = rn > 0 ? sqrt(en / rn) : sqrt(en);
            const int ok = !bad && rel <= 1e-2;
            fails += !ok;
            printf("case %2d kernel %d H%d/%d D%d B%d nblk %d last %d ql %d %s %s tile %d: "
                   "rel_l2 %.2e %s\n",
                   c, k, H * G, H, D, B, nblk, last_valid, ql, causal ? "causal" : "full",
                   dtmode == 0 ? "bf16" : dtmode == 1 ? "fp8" : "mixed", tile, rel,
                   ok ? "ok" : "FAIL");
        }
        dev_free(d);
    }
    CK(cudaStreamDestroy(st));
    printf("check: %d failure(s) (seed %llu)\n", fails, (unsigned long long)seed);
    return fails;
}

#endif

/* -------------------------------------------------------------- bench -- */
static double d2d_gbps(void)
{
    const size_t n = (size_t)1 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemset(a, 1, n));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int i = 0; i < 6; i++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i > 0 && ms < best)
            best = ms;
    }
    cudaFree(a);
    cudaFree(b);
    return 2.0 * n / (best * 1e-3) / 1e9;
}

/* Mean GPU time of one launch(), in ms: *iso as the bench's events (stream
 * idle, a small host upload, event, launch, event, then after() outside
 * the window), *b2b with reps launches back to back between two events. */
template <class L, class A>
static void time_launch(L launch, A after, cudaStream_t st, int reps, double *iso, double *b2b)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    void *dbuf, *hbuf;
    CK(cudaMalloc(&dbuf, 65536));
    CK(cudaMallocHost(&hbuf, 65536));
    double sum = 0;
    for (int r = 0; r < reps; r++) {
        CK(cudaMemcpyAsync(dbuf, hbuf, 65536, cudaMemcpyHostToDevice, st));
        CK(cudaEventRecord(e0, st));
        launch();
        CK(cudaEventRecord(e1, st));
        after();
        CK(cudaStreamSynchronize(st));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        sum += ms;
    }
    *iso = sum / reps;
    CK(cudaEventRecord(e0, st));
    for (int r = 0; r < reps; r++)
        launch();
    CK(cudaEventRecord(e1, st));
    CK(cudaStreamSynchronize(st));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    *b2b = ms / reps;
    cudaFree(dbuf);
    cudaFreeHost(hbuf);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

#ifndef SW_TILE_CHECK_NO_MAIN
static void run_bench(const std::vector<int> &kernels, int sms, int per_override, int reps,
                      int blocks)
{
    /* bench/swap_report.c swt_make_case + bench/swap.c cases[] "resident": 16/2 heads,
     * d256, block 16, context 32768 + 1 warm-up + 5 steps = 32774 tokens,
     * pool = every block + 32, one tile of all 2050 blocks, q_len 1. */
    problem p;
    g_rng = 12345;
    make_problem(p, 2, 8, 256, 16, blocks, 6, 1, 1, 0, blocks, 32); /* --blocks: other sizes */
    const double kv = 2.0 * p.H * (double)p.len * p.D * 2;
    const double d2d = d2d_gbps();
    printf("bench: h16-2 d256 B16 bf16, %lld tokens in %d blocks (one tile), q_len 1, "
           "%.1f MiB of K/V per attend; D2D cudaMemcpy of 1 GiB %.1f GB/s (2 x bytes / time)\n",
           (long long)p.len, p.nblk, kv / 1048576.0, d2d);
    dev_problem d;
    dev_upload(p, d, sms, 32); /* partials for up to 32 CTAs per SM (--per) */
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    for (int k : kernels) {
        const int per = per_override > 0 ? (per_override > 32 ? 32 : per_override)
                                         : ctas_per_sm(k, p.D);
        sw_cuda_swap_tile_args a = tile_args(p, d, 0, p.nblk, k, sms * per);
        for (int i = 0; i < 3; i++)
            dev_attend(p, d, k, sms * per, st);
        CK(cudaStreamSynchronize(st));
        double iso, b2b;
        time_launch([&] { SK(tile_launch(k, &a, st)); },
                    [&] { SK(sw_cuda_swap_merge(&a, st)); }, st, reps, &iso, &b2b);
        printf("kernel %d: %d CTAs per SM, grid %d x %d x %d: iso %.4f ms = %.1f GB/s (%.1f%% of "
               "D2D); b2b %.4f ms = %.1f GB/s (%.1f%%)\n",
               k, per, a.nchunks, a.H, a.nrg, iso, kv / (iso * 1e-3) / 1e9,
               100.0 * kv / (iso * 1e-3) / 1e9 / d2d, b2b, kv / (b2b * 1e-3) / 1e9,
               100.0 * kv / (b2b * 1e-3) / 1e9 / d2d);
        fflush(stdout);
    }
    CK(cudaStreamDestroy(st));
    dev_free(d);
}

int main(int argc, char **argv)
{
    int check = 0, bench = 0, ncases = 40, reps = 50, per = 0, big = 0, blocks = 2050;
    uint64_t seed = 20250301;
    std::vector<int> kernels = {1, 0, 2, 3};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check"))
            check = 1;
        else if (!strcmp(argv[i], "--bench"))
            bench = 1;
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            ncases = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--per") && i + 1 < argc)
            per = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--big"))
            big = 1;
        else if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            blocks = atoi(argv[++i]) < 2 ? 2 : atoi(argv[i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) {
            kernels.clear();
            for (const char *s = argv[++i]; *s;) {
                kernels.push_back(atoi(s));
                while (*s && *s != ',')
                    s++;
                if (*s == ',')
                    s++;
            }
        } else {
            fprintf(stderr, "usage: %s [--check] [--bench] [--cases N] [--seed N] [--reps N] "
                            "[--kernels 0,1,2,3] [--per K] [--big] [--blocks N]\n", argv[0]);
            return 2;
        }
    }
    if (!check && !bench)
        check = bench = 1;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("no CUDA device: SKIPPED\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device 0: %s, sm_%d%d, %d SMs, %zu KiB shared memory per block (opt-in)\n", prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024);
    int fails = 0;
    if (check)
        fails = run_checks(ncases, kernels, prop.multiProcessorCount, seed, big);
    if (bench)
        run_bench(kernels, prop.multiProcessorCount, per, reps, blocks);
    return fails ? 1 : 0;
}
#endif
