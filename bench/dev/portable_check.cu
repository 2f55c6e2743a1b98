/* bench/dev/portable_check.cu - development driver for the portable (mma.sync)
 * prefill kernel in src/cuda/attn/: correctness against an fp64 CPU reference
 * and timing of the benchmark shapes, in one program so that one device call
 * does both.
 *
 * Versions measured on the H200 against PyTorch's FA2 varlen op (portable_fa2.py;
 * docs/perf/prefill.md, "Portable kernel"):
 *   v1  FA2 schedule (one K + one V buffer), 128-row Q tiles, 4 warps x 32
 *       rows at d64/d128, 8 warps x 16 rows at d256, padded smem rows
 *       (swizzled at d256), persistent longest-first grid. d128 ragged
 *       1.07x FA2, d256 ragged 1.00x, d256 16x1k 0.92x.
 *   v2  next item's Q + K prefetched inside the last tile, O stored straight
 *       from registers, optional double-buffered K/V: d256 -8..12%. Rejected.
 *   v3  K prefetched in the last tile, Q after the loop: d256 -5..9%, the
 *       direct epilogue alone -1..6% at d256. Rejected.
 *   v4  lazy O rescale + Q prefetched after the loop with O staged in the
 *       K/V buffers: d64/d128 +1..3%, d256 -2..3%; shipped for d64/d128
 *       only (portable_config.cuh).
 *   v5  d256: 64-row tiles, 4 warps x 16 rows, 2 CTAs/SM, with v4's lazy
 *       rescale + Q prefetch: d256 +4..16% over v4, 1.04-1.16x FA2.
 *
 * Build (device machine, from the repository root):
 *   nvcc -std=c++17 -O3 -Iinclude -Isrc -gencode=arch=compute_90a,code=sm_90a \
 *        -o /tmp/pc bench/dev/portable_check.cu src/cuda/attn/prefill_portable*.cu \
 *        src/core/sw_cuda.cu
 * Run: /tmp/pc [--check] [--bench] [--json FILE] [--seed N] [--reps N]
 * Exit: 0 pass, 1 fail, 77 no GPU (skip).
 *
 * The work list comes from a local copy of the planner contract in
 * attn_internal.h (sw_plan_work), so this driver does not depend on
 * src/attn/planner.c being there. */
#include "attn/attn_internal.h"
#include "core/sw_half.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- glue -- */
/* sw_fail lives in src/core; when that is linked it wins over this one. */
static char g_err[512];
extern "C" __attribute__((weak)) sw_status sw_fail(sw_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return s;
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

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_normal(void)
{
    /* sum of 4 uniforms, rescaled: close enough to N(0,1) for test data */
    float s = 0.f;
    for (int i = 0; i < 4; ++i)
        s += (float)(rnd_u32() & 0xffffff) / 16777216.f;
    return (s - 2.f) * 1.7320508f;
}

static float from16(uint16_t h, sw_dtype dt)
{
    return dt == SW_DTYPE_BF16 ? sw_bf16_to_f32(h) : sw_f16_to_f32(h);
}
static uint16_t f32_to_f16(float f)
{
    __half h = __float2half_rn(f);
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static uint16_t enc(float f, sw_dtype dt)
{
    return dt == SW_DTYPE_BF16 ? sw_f32_to_bf16(f) : f32_to_f16(f);
}

/* ------------------------------------------------------- local planner -- */
typedef struct {
    sw_work_item it;
    int64_t cost;
} costed_item;

static int cmp_items(const void *pa, const void *pb)
{
    const costed_item *a = (const costed_item *)pa, *b = (const costed_item *)pb;
    if (a->cost != b->cost)
        return a->cost > b->cost ? -1 : 1;
    if (a->it.req != b->it.req)
        return a->it.req - b->it.req;
    if (a->it.head0 != b->it.head0)
        return a->it.head0 - b->it.head0;
    return a->it.q_tok0 - b->it.q_tok0;
}

/* Same contract as sw_plan_work: pack = group when group > 1 and q_len <=
 * pack_max_q_len; q_tok0 advances by tile_m / pack; longest first. */
static int plan_local(const int32_t *qo, const int32_t *kv, int batch, int hq, int hkv, int causal,
                      int tile_m, int pack_max, sw_work_item **out)
{
    const int group = hq / hkv;
    int cap = 0;
    for (int b = 0; b < batch; ++b) {
        int ql = qo[b + 1] - qo[b];
        if (ql == 0)
            continue;
        int pack = (group > 1 && ql <= pack_max) ? group : 1;
        int tpt = tile_m / pack;
        cap += ((ql + tpt - 1) / tpt) * (pack == 1 ? hq : hkv);
    }
    costed_item *ci = (costed_item *)malloc(sizeof(costed_item) * (size_t)(cap ? cap : 1));
    int n = 0;
    for (int b = 0; b < batch; ++b) {
        int ql = qo[b + 1] - qo[b], kl = kv[b + 1] - kv[b];
        if (ql == 0)
            continue;
        int pack = (group > 1 && ql <= pack_max) ? group : 1;
        int tpt = tile_m / pack;
        int nh = pack == 1 ? hq : hkv;
        for (int h = 0; h < nh; ++h)
            for (int t0 = 0; t0 < ql; t0 += tpt) {
                int last = t0 + tpt - 1 < ql - 1 ? t0 + tpt - 1 : ql - 1;
                ci[n].it.req = b;
                ci[n].it.q_tok0 = t0;
                ci[n].it.head0 = pack == 1 ? h : h * group;
                ci[n].it.pack = pack;
                ci[n].cost = sw_visible_keys(last, ql, kl, causal);
                ++n;
            }
    }
    qsort(ci, (size_t)n, sizeof *ci, cmp_items);
    *out = (sw_work_item *)malloc(sizeof(sw_work_item) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; ++i)
        (*out)[i] = ci[i].it;
    free(ci);
    return n;
}

/* ---------------------------------------------------------- one problem -- */
typedef struct {
    sw_dtype dt;
    int d, hq, hkv, causal, batch;
    const int *qlens, *kvlens;
    int want_lse;
    int extra_stride; /* extra elements per row in every tensor */
    float scale;      /* 0 = 1/sqrt(d) */
    int pack_max;
} problem;

typedef struct {
    int32_t *qo, *kv;         /* host indptr */
    int64_t tq, tk;
    int64_t qs, ks, vs, os;   /* strides (elements) */
    void *dq, *dk, *dv, *dout;
    float *dlse;
    sw_work_item *dwork;
    sw_req_info *dreqs;
    int32_t *dcounter;
    sw_cuda_prefill_args args;
    int nwork;
} device_run;

static double flops_of(const problem *p, const int32_t *qo, const int32_t *kv)
{
    double f = 0;
    for (int b = 0; b < p->batch; ++b) {
        int ql = qo[b + 1] - qo[b], kl = kv[b + 1] - kv[b];
        double vis = 0;
        for (int t = 0; t < ql; ++t)
            vis += sw_visible_keys(t, ql, kl, p->causal);
        f += 4.0 * vis * p->d * p->hq; /* = 4 q_len kv_eff d Hq */
    }
    return f;
}

static int setup_run(const problem *p, device_run *r, const uint16_t *hq_, const uint16_t *hk_,
                     const uint16_t *hv_)
{
    r->qo = (int32_t *)malloc(sizeof(int32_t) * (p->batch + 1));
    r->kv = (int32_t *)malloc(sizeof(int32_t) * (p->batch + 1));
    r->qo[0] = r->kv[0] = 0;
    for (int b = 0; b < p->batch; ++b) {
        r->qo[b + 1] = r->qo[b] + p->qlens[b];
        r->kv[b + 1] = r->kv[b] + p->kvlens[b];
    }
    r->tq = r->qo[p->batch];
    r->tk = r->kv[p->batch];
    r->qs = (int64_t)p->hq * p->d + p->extra_stride;
    r->os = r->qs;
    r->ks = (int64_t)p->hkv * p->d + p->extra_stride;
    r->vs = r->ks;
    size_t qb = (size_t)(r->tq ? r->tq : 1) * r->qs * 2, kb = (size_t)(r->tk ? r->tk : 1) * r->ks * 2;
    CK(cudaMalloc(&r->dq, qb));
    CK(cudaMalloc(&r->dk, kb));
    CK(cudaMalloc(&r->dv, kb));
    CK(cudaMalloc(&r->dout, qb));
    CK(cudaMalloc((void **)&r->dlse, sizeof(float) * (size_t)(r->tq ? r->tq : 1) * p->hq));
    if (hq_) {
        CK(cudaMemcpy(r->dq, hq_, (size_t)r->tq * r->qs * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(r->dk, hk_, (size_t)r->tk * r->ks * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(r->dv, hv_, (size_t)r->tk * r->vs * 2, cudaMemcpyHostToDevice));
    }
    int32_t tile_m = 0, grid = 0;
    sw_status st = sw_cuda_prefill_portable_config(0, p->d, p->dt, &tile_m, &grid);
    if (st != SW_OK) {
        fprintf(stderr, "config failed: %d %s\n", (int)st, g_err);
        return -1;
    }
    sw_work_item *work = NULL;
    r->nwork = plan_local(r->qo, r->kv, p->batch, p->hq, p->hkv, p->causal, tile_m, p->pack_max,
                          &work);
    sw_req_info *reqs = (sw_req_info *)malloc(sizeof(sw_req_info) * p->batch);
    for (int b = 0; b < p->batch; ++b) {
        reqs[b].q_start = r->qo[b];
        reqs[b].q_len = r->qo[b + 1] - r->qo[b];
        reqs[b].kv_start = r->kv[b];
        reqs[b].kv_len = r->kv[b + 1] - r->kv[b];
    }
    CK(cudaMalloc((void **)&r->dwork, sizeof(sw_work_item) * (size_t)(r->nwork ? r->nwork : 1)));
    CK(cudaMalloc((void **)&r->dreqs, sizeof(sw_req_info) * (size_t)p->batch));
    CK(cudaMalloc((void **)&r->dcounter, sizeof(int32_t)));
    if (r->nwork)
        CK(cudaMemcpy(r->dwork, work, sizeof(sw_work_item) * r->nwork, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(r->dreqs, reqs, sizeof(sw_req_info) * p->batch, cudaMemcpyHostToDevice));
    free(work);
    free(reqs);

    sw_cuda_prefill_args *a = &r->args;
    memset(a, 0, sizeof *a);
    a->dtype = p->dt;
    a->num_qo_heads = p->hq;
    a->num_kv_heads = p->hkv;
    a->head_dim = p->d;
    a->causal = p->causal;
    a->sm_scale = p->scale != 0.f ? p->scale : 1.f / sqrtf((float)p->d);
    a->q = r->dq;
    a->k = r->dk;
    a->v = r->dv;
    a->o = r->dout;
    a->lse = p->want_lse ? r->dlse : NULL;
    a->q_stride = r->qs;
    a->k_stride = r->ks;
    a->v_stride = r->vs;
    a->o_stride = r->os;
    a->work = r->dwork;
    a->num_work = r->nwork;
    a->reqs = r->dreqs;
    a->batch = p->batch;
    a->counter = r->dcounter;
    a->grid = grid;
    return 0;
}

static void free_run(device_run *r)
{
    cudaFree(r->dq);
    cudaFree(r->dk);
    cudaFree(r->dv);
    cudaFree(r->dout);
    cudaFree(r->dlse);
    cudaFree(r->dwork);
    cudaFree(r->dreqs);
    cudaFree(r->dcounter);
    free(r->qo);
    free(r->kv);
}

static int launch(device_run *r, cudaStream_t s)
{
    CK(cudaMemsetAsync(r->dcounter, 0, sizeof(int32_t), s));
    sw_status st = sw_cuda_prefill_portable_launch(&r->args, s);
    if (st != SW_OK) {
        fprintf(stderr, "launch failed: %d %s\n", (int)st, g_err);
        return -1;
    }
    return 0;
}

/* fp64 reference for one (token row, head); returns lse (natural log). */
static double ref_row(const problem *p, const device_run *r, const uint16_t *hq_,
                      const uint16_t *hk_, const uint16_t *hv_, int b, int t, int h, double *o)
{
    const int ql = r->qo[b + 1] - r->qo[b], kl = r->kv[b + 1] - r->kv[b];
    const int nvis = sw_visible_keys(t, ql, kl, p->causal);
    const int kvh = h / (p->hq / p->hkv);
    const double scale = r->args.sm_scale;
    const uint16_t *q = hq_ + (int64_t)(r->qo[b] + t) * r->qs + (int64_t)h * p->d;
    for (int i = 0; i < p->d; ++i)
        o[i] = 0;
    if (nvis == 0)
        return -INFINITY;
    double *sc = (double *)malloc(sizeof(double) * nvis);
    double mx = -INFINITY;
    for (int j = 0; j < nvis; ++j) {
        const uint16_t *k = hk_ + (int64_t)(r->kv[b] + j) * r->ks + (int64_t)kvh * p->d;
        double acc = 0;
        for (int i = 0; i < p->d; ++i)
            acc += (double)from16(q[i], p->dt) * (double)from16(k[i], p->dt);
        sc[j] = acc * scale;
        if (sc[j] > mx)
            mx = sc[j];
    }
    double sum = 0;
    for (int j = 0; j < nvis; ++j) {
        double e = exp(sc[j] - mx);
        sum += e;
        const uint16_t *v = hv_ + (int64_t)(r->kv[b] + j) * r->vs + (int64_t)kvh * p->d;
        for (int i = 0; i < p->d; ++i)
            o[i] += e * (double)from16(v[i], p->dt);
    }
    for (int i = 0; i < p->d; ++i)
        o[i] /= sum;
    free(sc);
    return mx + log(sum);
}

/* ---------------------------------------------------------- correctness -- */
static int run_check(const char *name, const problem *p)
{
    int32_t tq = 0, tk = 0;
    for (int b = 0; b < p->batch; ++b) {
        tq += p->qlens[b];
        tk += p->kvlens[b];
    }
    const int64_t qs = (int64_t)p->hq * p->d + p->extra_stride;
    const int64_t ks = (int64_t)p->hkv * p->d + p->extra_stride;
    uint16_t *hq_ = (uint16_t *)malloc((size_t)(tq ? tq : 1) * qs * 2);
    uint16_t *hk_ = (uint16_t *)malloc((size_t)(tk ? tk : 1) * ks * 2);
    uint16_t *hv_ = (uint16_t *)malloc((size_t)(tk ? tk : 1) * ks * 2);
    for (int64_t i = 0; i < (int64_t)tq * qs; ++i)
        hq_[i] = enc(rnd_normal(), p->dt);
    for (int64_t i = 0; i < (int64_t)tk * ks; ++i) {
        hk_[i] = enc(rnd_normal(), p->dt);
        hv_[i] = enc(rnd_normal(), p->dt);
    }
    device_run r;
    if (setup_run(p, &r, hq_, hk_, hv_) != 0)
        return 1;
    /* Poison: 0xFFFF is a NaN in both bf16 and fp16; 0xFFFFFFFF a NaN float. */
    CK(cudaMemset(r.dout, 0xff, (size_t)(tq ? tq : 1) * qs * 2));
    CK(cudaMemset(r.dlse, 0xff, sizeof(float) * (size_t)(tq ? tq : 1) * p->hq));
    if (launch(&r, 0) != 0)
        return 1;
    CK(cudaDeviceSynchronize());
    uint16_t *ho = (uint16_t *)malloc((size_t)(tq ? tq : 1) * qs * 2);
    float *hl = (float *)malloc(sizeof(float) * (size_t)(tq ? tq : 1) * p->hq);
    CK(cudaMemcpy(ho, r.dout, (size_t)tq * qs * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl, r.dlse, sizeof(float) * (size_t)tq * p->hq, cudaMemcpyDeviceToHost));

    int bad_unwritten = 0, bad_pad = 0, bad_empty = 0;
    double e2 = 0, r2 = 0, lse_err = 0;
    double *o = (double *)malloc(sizeof(double) * p->d);
    for (int b = 0; b < p->batch; ++b) {
        const int ql = p->qlens[b], kl = p->kvlens[b];
        for (int t = 0; t < ql; ++t) {
            const int64_t row = r.qo[b] + t;
            /* every element of a valid row written (no NaN left) */
            for (int h = 0; h < p->hq; ++h)
                for (int i = 0; i < p->d; ++i)
                    if (isnan(from16(ho[row * qs + (int64_t)h * p->d + i], p->dt)))
                        ++bad_unwritten;
            for (int i = p->hq * p->d; i < qs; ++i)
                if (ho[row * qs + i] != 0xffff)
                    ++bad_pad;
            const int sample = ql <= 40 || t < 6 || t >= ql - 6 || (rnd_u32() % (ql / 16 + 1)) == 0;
            if (!sample)
                continue;
            for (int h = 0; h < p->hq; ++h) {
                double lse = ref_row(p, &r, hq_, hk_, hv_, b, t, h, o);
                const uint16_t *got = ho + row * qs + (int64_t)h * p->d;
                if (sw_visible_keys(t, ql, kl, p->causal) == 0) {
                    for (int i = 0; i < p->d; ++i)
                        if (from16(got[i], p->dt) != 0.f)
                            ++bad_empty;
                    if (p->want_lse && !(isinf(hl[row * p->hq + h]) && hl[row * p->hq + h] < 0))
                        ++bad_empty;
                    continue;
                }
                for (int i = 0; i < p->d; ++i) {
                    double g = from16(got[i], p->dt);
                    e2 += (g - o[i]) * (g - o[i]);
                    r2 += o[i] * o[i];
                }
                if (p->want_lse) {
                    double le = fabs((double)hl[row * p->hq + h] - lse);
                    if (isnan(le))
                        lse_err = INFINITY;
                    else if (le > lse_err)
                        lse_err = le;
                }
            }
        }
    }
    const double rel = r2 > 0 ? sqrt(e2 / r2) : 0;
    const int ok = bad_unwritten == 0 && bad_pad == 0 && bad_empty == 0 && rel <= 1e-2 &&
                   (!p->want_lse || lse_err <= 2e-3);
    printf("check %-44s items=%5d rel_l2=%.2e lse_abs=%.1e unwritten=%d pad_touched=%d "
           "empty_bad=%d  %s\n",
           name, r.nwork, rel, lse_err, bad_unwritten, bad_pad, bad_empty, ok ? "PASS" : "FAIL");
    free(o);
    free(ho);
    free(hl);
    free(hq_);
    free(hk_);
    free(hv_);
    free_run(&r);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------ benchmark -- */
__global__ void fill_random(uint16_t *x, int64_t n, uint32_t seed, int is_bf16)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9E3779B1u ^ seed;
        h ^= h >> 15;
        h *= 0x2C1B3C6Du;
        h ^= h >> 12;
        h *= 0x297A2D39u;
        h ^= h >> 15;
        /* uniform in [-1.73, 1.73): unit variance */
        float f = ((float)(h & 0xffffff) / 16777216.f - 0.5f) * 3.4641016f;
        if (is_bf16) {
            __nv_bfloat16 b = __float2bfloat16_rn(f);
            x[i] = *(uint16_t *)&b;
        } else {
            __half b = __float2half_rn(f);
            x[i] = *(uint16_t *)&b;
        }
    }
}

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static int run_bench(const char *name, const problem *p, int reps, FILE *json)
{
    device_run r;
    if (setup_run(p, &r, NULL, NULL, NULL) != 0)
        return 1;
    fill_random<<<1024, 256>>>((uint16_t *)r.dq, r.tq * r.qs, 1u, p->dt == SW_DTYPE_BF16);
    fill_random<<<1024, 256>>>((uint16_t *)r.dk, r.tk * r.ks, 2u, p->dt == SW_DTYPE_BF16);
    fill_random<<<1024, 256>>>((uint16_t *)r.dv, r.tk * r.vs, 3u, p->dt == SW_DTYPE_BF16);
    CK(cudaGetLastError());
    CK(cudaMemset(r.dout, 0xff, (size_t)r.tq * r.qs * 2));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i)
        if (launch(&r, 0) != 0)
            return 1;
    CK(cudaDeviceSynchronize());
    float *ms = (float *)malloc(sizeof(float) * reps);
    for (int i = 0; i < reps; ++i) {
        CK(cudaEventRecord(e0));
        launch(&r, 0);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms[i], e0, e1));
    }
    CK(cudaGetLastError());
    qsort(ms, (size_t)reps, sizeof(float), cmp_f);
    const float med = ms[reps / 2];
    const double fl = flops_of(p, r.qo, r.kv);

    /* Spot check at scale: 6 rows x 2 heads of the longest request. */
    int bl = 0;
    for (int b = 0; b < p->batch; ++b)
        if (p->qlens[b] > p->qlens[bl])
            bl = b;
    uint16_t *hq_ = (uint16_t *)malloc((size_t)r.tq * r.qs * 2);
    uint16_t *hk_ = (uint16_t *)malloc((size_t)r.tk * r.ks * 2);
    uint16_t *hv_ = (uint16_t *)malloc((size_t)r.tk * r.vs * 2);
    uint16_t *ho = (uint16_t *)malloc((size_t)r.tq * r.qs * 2);
    CK(cudaMemcpy(hq_, r.dq, (size_t)r.tq * r.qs * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hk_, r.dk, (size_t)r.tk * r.ks * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hv_, r.dv, (size_t)r.tk * r.vs * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ho, r.dout, (size_t)r.tq * r.qs * 2, cudaMemcpyDeviceToHost));
    double e2 = 0, r2 = 0, *o = (double *)malloc(sizeof(double) * p->d);
    int nan_rows = 0;
    const int ql = p->qlens[bl];
    const int rows[6] = {0, 1, ql / 3, ql / 2, ql - 2, ql - 1};
    for (int k = 0; k < 6; ++k)
        for (int hh = 0; hh < 2; ++hh) {
            int h = hh == 0 ? 0 : p->hq - 1, t = rows[k];
            ref_row(p, &r, hq_, hk_, hv_, bl, t, h, o);
            const uint16_t *got = ho + (int64_t)(r.qo[bl] + t) * r.qs + (int64_t)h * p->d;
            for (int i = 0; i < p->d; ++i) {
                double g = from16(got[i], p->dt);
                if (isnan(g))
                    ++nan_rows;
                e2 += (g - o[i]) * (g - o[i]);
                r2 += o[i] * o[i];
            }
        }
    const double rel = sqrt(e2 / r2);
    const int ok = nan_rows == 0 && rel <= 1e-2;
    printf("bench %-28s items=%6d grid=%4d  %8.3f ms  %7.1f TFLOP/s   spot rel_l2=%.2e %s\n", name,
           r.nwork, r.args.grid, med, fl / (med * 1e-3) / 1e12, rel, ok ? "ok" : "BAD");
    if (json) {
        fprintf(json, "{\"name\":\"%s\",\"hq\":%d,\"hkv\":%d,\"d\":%d,\"causal\":%d,\"lens\":[", name,
                p->hq, p->hkv, p->d, p->causal);
        for (int b = 0; b < p->batch; ++b)
            fprintf(json, "%s%d", b ? "," : "", p->qlens[b]);
        fprintf(json, "],\"ms\":%.5f,\"min_ms\":%.5f,\"flops\":%.6e,\"tflops\":%.2f}\n", med, ms[0],
                fl, fl / (med * 1e-3) / 1e12);
        fflush(json);
    }
    free(ms);
    free(o);
    free(hq_);
    free(hk_);
    free(hv_);
    free(ho);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free_run(&r);
    return ok ? 0 : 1;
}

/* ----------------------------------------------------------------- main -- */
int main(int argc, char **argv)
{
    int do_check = 0, do_bench = 0, reps = 25;
    const char *json_path = NULL;
    uint64_t seed = 12345;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--check"))
            do_check = 1;
        else if (!strcmp(argv[i], "--bench"))
            do_bench = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
    }
    if (!do_check && !do_bench)
        do_check = do_bench = 1;
    if (sw_cuda_devices() < 1) {
        printf("no CUDA device: skip\n");
        return 77;
    }
    g_rng ^= seed * 0x2545F4914F6CDD1Dull;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s sm_%d%d, %d SMs, smem optin %zu, seed %llu\n", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, prop.sharedMemPerBlockOptin,
           (unsigned long long)seed);
    for (int d = 64; d <= 256; d *= 2) {
        int32_t tm = 0, grid = 0;
        sw_status st = sw_cuda_prefill_portable_config(0, d, SW_DTYPE_BF16, &tm, &grid);
        printf("config d%d: status %d tile_m %d grid %d (%d per SM)\n", d, (int)st, tm, grid,
               grid / prop.multiProcessorCount);
    }
    {   /* unsupported combination */
        int32_t tm = 0, grid = 0;
        sw_status st = sw_cuda_prefill_portable_config(0, 96, SW_DTYPE_BF16, &tm, &grid);
        printf("config d96 -> %d (expect %d UNSUPPORTED)\n", (int)st, (int)SW_STATUS_UNSUPPORTED);
    }
    int fails = 0;
    if (do_check) {
        static const int q1[] = {0, 1, 17, 128, 129, 300, 1000}, k1[] = {0, 1, 17, 128, 129, 300, 1000};
        static const int q2[] = {1, 17, 100, 257, 5}, k2[] = {5, 300, 1000, 257, 0};
        static const int q3[] = {33, 200, 64, 9}, k3[] = {100, 150, 64, 3};
        static const int q4[] = {1, 17, 130, 513}, k4[] = {1, 40, 130, 700};
        static const int q5[] = {77, 200}, k5[] = {300, 64};
        static const int q6[] = {300, 0, 5, 65}, k6[] = {300, 7, 0, 63};
        static const int q7[] = {600, 3}, k7[] = {900, 1};
        static const int q8[] = {50, 200, 43}, k8[] = {60, 200, 43};
        static const int q9[] = {700, 64, 191}, k9[] = {700, 1200, 191};
        struct {
            const char *name;
            problem p;
        } cs[] = {
            {"d128 bf16 gqa4 causal ragged", {SW_DTYPE_BF16, 128, 8, 2, 1, 7, q1, k1, 1, 0, 0, 64}},
            {"d128 bf16 gqa4 noncausal ragged", {SW_DTYPE_BF16, 128, 8, 2, 0, 7, q1, k1, 1, 0, 0, 64}},
            {"d128 fp16 gqa1 noncausal q<kv kv0", {SW_DTYPE_F16, 128, 4, 4, 0, 5, q2, k2, 1, 0, 0, 64}},
            {"d128 bf16 gqa2 causal q<kv kv0", {SW_DTYPE_BF16, 128, 4, 2, 1, 5, q2, k2, 1, 0, 0, 64}},
            {"d64 fp16 gqa8 causal packed q>kv", {SW_DTYPE_F16, 64, 8, 1, 1, 4, q3, k3, 1, 0, 0, 64}},
            {"d64 bf16 gqa8 noncausal packed", {SW_DTYPE_BF16, 64, 8, 1, 0, 4, q3, k3, 1, 0, 0, 64}},
            {"d256 bf16 gqa2 causal lse stride", {SW_DTYPE_BF16, 256, 4, 2, 1, 4, q4, k4, 1, 24, 0, 64}},
            {"d256 fp16 gqa1 noncausal", {SW_DTYPE_F16, 256, 2, 2, 0, 2, q5, k5, 0, 0, 0, 64}},
            {"d256 bf16 gqa8 causal packed", {SW_DTYPE_BF16, 256, 8, 1, 1, 4, q3, k3, 1, 0, 0, 64}},
            {"d64 bf16 gqa1 causal kv0 q0", {SW_DTYPE_BF16, 64, 4, 4, 1, 4, q6, k6, 1, 8, 0, 64}},
            {"d128 fp16 gqa8 causal packed-long", {SW_DTYPE_F16, 128, 16, 2, 1, 2, q7, k7, 1, 0, 0, 100000}},
            {"d128 bf16 gqa3 causal pack3", {SW_DTYPE_BF16, 128, 6, 2, 1, 3, q8, k8, 1, 0, 0, 100}},
            {"d64 fp16 gqa3 noncausal pack3", {SW_DTYPE_F16, 64, 6, 2, 0, 3, q8, k8, 1, 0, 0, 100}},
            {"d128 bf16 gqa2 causal scale0.35", {SW_DTYPE_BF16, 128, 4, 2, 1, 3, q9, k9, 1, 0, 0.35f, 64}},
            {"d256 fp16 gqa4 causal q<kv stride", {SW_DTYPE_F16, 256, 8, 2, 1, 3, q9, k9, 1, 8, 0, 64}},
            {"d64 bf16 gqa2 causal q<kv", {SW_DTYPE_BF16, 64, 4, 2, 1, 3, q9, k9, 1, 0, 0, 64}},
        };
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; ++i)
            fails += run_check(cs[i].name, &cs[i].p);
        printf("checks: %d failed\n", fails);
    }
    if (do_bench) {
        FILE *json = json_path ? fopen(json_path, "w") : NULL;
        static int l16x1k[16], l4x4k[4], l1x16k[1] = {16384};
        static const int lrag[] = {8192, 3000, 1800, 1200, 700, 500, 300, 200, 100, 124};
        static const int lmixa[] = {8192, 3000, 1500, 1200, 800, 600, 400, 300, 200, 100};
        static const int lmixb[] = {4096, 4096, 2048, 2048, 2048, 1777, 1500, 1024,
                                    1024, 1000, 900,  800,  700,  600,  513,  500,
                                    400,  300,  257,  200,  150,  100,  100,  100,
                                    3000, 2500, 1200, 999,  640,  333,  129,  100};
        for (int i = 0; i < 16; ++i)
            l16x1k[i] = 1024;
        for (int i = 0; i < 4; ++i)
            l4x4k[i] = 4096;
        struct {
            int hq, hkv, d;
        } hs[] = {{16, 2, 256}, {32, 8, 128}, {32, 8, 64}};
        struct {
            const char *n;
            int batch;
            const int *lens;
        } sh[] = {{"16x1k", 16, l16x1k}, {"4x4k", 4, l4x4k}, {"1x16k", 1, l1x16k},
                  {"ragged", 10, lrag}, {"mix-a", 10, lmixa}, {"mix-b", 32, lmixb}};
        for (size_t i = 0; i < sizeof hs / sizeof hs[0]; ++i)
            for (size_t j = 0; j < sizeof sh / sizeof sh[0]; ++j) {
                char name[96];
                snprintf(name, sizeof name, "d%d h%d/%d %s", hs[i].d, hs[i].hq, hs[i].hkv, sh[j].n);
                problem p = {SW_DTYPE_BF16, hs[i].d, hs[i].hq, hs[i].hkv, 1, sh[j].batch,
                             sh[j].lens, sh[j].lens, 1, 0, 0, 64};
                fails += run_bench(name, &p, reps, json);
            }
        if (json)
            fclose(json);
    }
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
