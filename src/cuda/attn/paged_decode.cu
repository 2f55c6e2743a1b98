/* Paged K/V on the GPU (attn/attn_internal.h, "Paged K/V on a CUDA backend";
 * docs/perf/paged.md): the split-KV decode kernel, the merge of its partial
 * states, and the gather of pages into dense K/V that longer queries run
 * the ragged prefill kernels over.
 *
 * Decode kernel. A CTA of 4 warps takes one item: the R <= 16 query rows of
 * a (request, kv head) -- q_len tokens x the group's heads, GQA packed so a
 * page is read once per group -- over the keys [k0, k1) of the request.
 * Rows are the M side of m16n8k16 products (Q in shared memory, rows past R
 * zero), 16-key tiles the N side of S = Q K^T and the K side of O += P V.
 * The warps take the item's 16-key tiles in turn (warp w: tiles w, w + 4,
 * ...), each with its own ring of `nsw` cp.async stages and its own online
 * softmax, so the loop has no CTA barrier; the four states are combined in
 * shared memory at the end. A tile's 32 rows (16 K, 16 V) have one page
 * lookup each, by one lane; the page number is loaded one tile ahead of the
 * tile's copies, so the table's round trip is never waited for.
 *
 * An item that covers all of its request's keys writes O and LSE; the
 * others write a normalised partial (o, lse) that the merge folds:
 * lse = log sum exp lse_i, o = sum exp(lse_i - lse) o_i -- a merge kernel
 * launched after this one, or (args.merge_count set: the swap engine's
 * resident path) the last of the pair's items to finish, counted by an
 * atomic per merge, so that a call is one launch.
 *
 * The plan (offsets, items, merges) is read from device memory, or
 * (args.inl: the swap engine's resident path) from the launch's own
 * parameters, a __grid_constant__ copy read through the constant cache:
 * then no upload runs on the stream between two calls' kernels. */
#include "attn/attn_internal.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"
#include "mma_utils.cuh"
#include "paged_gather.cuh"

#include <atomic>
#include <cuda_runtime.h>
#include <math.h>

namespace sw_paged {

using sw_portable::bf16_t;
using sw_portable::cp_async16;
using sw_portable::cp_async_commit;
using sw_portable::f16_t;
using sw_portable::fast_exp2;

/* max(m, e) that keeps a NaN (fmaxf drops it): a part that saw a NaN key
 * makes the merged row NaN, as over the whole context. */
__device__ __forceinline__ float nan_max(float m, float e)
{
    return e > m || e != e ? e : m;
}
using sw_portable::ldsm_x4;
using sw_portable::ldsm_x4_trans;
using sw_portable::smem_u32;
using sw_portable::swz;

constexpr int NW = 4;               /* warps per CTA */
constexpr int NT = NW * 32;
constexpr int BN = 16;              /* keys per warp tile */
constexpr int ROWS = SW_DECODE_ROWS; /* query rows per item (M of the mma) */

/* Stages per warp at most (the launch takes fewer where shared memory is
 * short). More CTAs beat deeper rings on the H200 (docs/perf/paged.md):
 * d128 with two stages (68 KB, three CTAs an SM) reads 2-4% faster than
 * with three (100 KB, two CTAs) and 18% faster than with four; d256 with
 * three stages (one CTA either way) 3-4% slower than with two. */
template <int D> struct traits {
    static constexpr int CPR = D / 8;                  /* 16-byte chunks per row */
    static constexpr int TILE = BN * D * 2;            /* bytes of one K or V tile */
    static constexpr int Q_BYTES = ROWS * D * 2;
    static constexpr int NSW_MAX = D == 64 ? 6 : D == 128 ? 2 : 2;
    static constexpr int COMBINE = NW * ROWS * D * 4;  /* fp32 acc of every warp */
    static __host__ __device__ constexpr int ring(int nsw) { return NW * nsw * 2 * TILE; }
    static __host__ __device__ constexpr int smem(int nsw)
    {
        return Q_BYTES + (ring(nsw) > COMBINE ? ring(nsw) : COMBINE);
    }
};

__device__ __forceinline__ void cp_async_wait_n(int n)
{
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::); break;
    default: asm volatile("cp.async.wait_group 5;\n" ::); break;
    }
}

template <int D> __device__ __forceinline__ uint32_t tile_at(int row, int chunk)
{
    return (uint32_t)(row * D * 2) + swz(row, chunk);
}

/* Page of request-local key `tok` (the caller keeps tok < kv_len). */
__device__ __forceinline__ int page_of(const sw_cuda_paged_args &a, int pbase, int tok)
{
    const int i = a.ps_log2 >= 0 ? tok >> a.ps_log2 : tok / a.page_size;
    return __ldg(a.page_indices + pbase + i);
}

template <int D, class T, int W>
__device__ __forceinline__ void merge_pair(const sw_cuda_paged_args &a, const int32_t *qo_indptr,
                                           const sw_decode_merge mg, float *s_w, float *s_fin,
                                           int slice, int nslices);

/* The decode kernel's third parameter: the plan's words by value
 * (sw_decode_inline, read through the constant cache) or nothing. */
struct no_inline {
    int32_t unused;
};
template <bool INL> struct inline_of {
    using type = no_inline;
};
template <> struct inline_of<true> {
    using type = sw_decode_inline;
};

template <int D, class T, bool INL>
__global__ void __launch_bounds__(NT)
    decode_kernel(const sw_cuda_paged_args a, int nsw,
                  const __grid_constant__ typename inline_of<INL>::type inl)
{
    using TR = traits<D>;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ float s_ml[NW][ROWS][2];
    __shared__ float s_fin[ROWS][2]; /* per row: 1 / L (0 when no key), LSE */

    if (a.num_items_dev && (int)blockIdx.x >= __ldg(a.num_items_dev))
        return; /* a fixed grid's spare CTA */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t *qo_indptr = a.qo_indptr, *kv_indptr = a.kv_indptr,
                  *page_indptr = a.page_indptr;
    const sw_decode_item *items = a.items;
    const sw_decode_merge *merges = a.merges;
    if constexpr (INL) {
        qo_indptr = inl.w + inl.qo;
        kv_indptr = inl.w + inl.kv;
        page_indptr = inl.w + inl.pi;
        items = reinterpret_cast<const sw_decode_item *>(inl.w + inl.items);
        merges = reinterpret_cast<const sw_decode_merge *>(inl.w + inl.merges);
    }
    const sw_decode_item it = items[blockIdx.x];
    const int G = a.num_qo_heads / a.num_kv_heads;
    const int q_start = qo_indptr[it.req];
    const int q_len = qo_indptr[it.req + 1] - q_start;
    const int kv_len = kv_indptr[it.req + 1] - kv_indptr[it.req];
    const int pbase = page_indptr[it.req];
    const int R = q_len * G;
    const uint32_t sQ = smem_u32(smem);
    const uint32_t sRing = sQ + TR::Q_BYTES;

    /* Q rows: row r = query token r / G, head kvh * G + r % G; rows past R
     * are zeros (finite scores, never written). */
    for (int idx = tid; idx < ROWS * TR::CPR; idx += NT) {
        const int r = idx / TR::CPR, c = idx % TR::CPR;
        const bool ok = r < R;
        const char *src = (const char *)a.q;
        if (ok)
            src += ((int64_t)(q_start + r / G) * a.q_stride + (int64_t)(it.kvh * G + r % G) * D +
                    c * 8) * 2;
        cp_async16(sQ + tile_at<D>(r, c), src, ok ? 16 : 0);
    }
    cp_async_commit();

    /* This lane's row of each tile: lanes 0-15 K row `lane`, 16-31 V row
     * lane - 16; its pool strides. */
    const bool is_v = lane >= 16;
    const int myrow = lane & 15;
    const int64_t tstride = is_v ? a.v_tok : a.k_tok;
    const int64_t pstride = is_v ? a.v_page : a.k_page;
    const int64_t hoff = (int64_t)it.kvh * (is_v ? a.v_head : a.k_head);
    const char *kbase = (const char *)a.k_pool, *vbase = (const char *)a.v_pool;

    const int n_tiles = (it.k1 - it.k0 + BN - 1) / BN;
    const int my_tiles = warp < n_tiles ? (n_tiles - warp + NW - 1) / NW : 0;
    const uint32_t wring = sRing + (uint32_t)(warp * nsw * 2 * TR::TILE);

    /* The page number of this lane's row in warp tile i (-1: past k1). */
    auto row_page = [&](int i) -> int {
        const int tok = it.k0 + (warp + i * NW) * BN + myrow;
        return (i < my_tiles && tok < it.k1) ? page_of(a, pbase, tok) : -1;
    };
    auto issue = [&](int i, int page) {
        const uint32_t st = wring + (uint32_t)((i % nsw) * 2 * TR::TILE);
        const int tok = it.k0 + (warp + i * NW) * BN + myrow;
        const int in_page = a.ps_log2 >= 0 ? tok & (a.page_size - 1) : tok % a.page_size;
        const int64_t off = page < 0 ? -1
                                     : ((int64_t)page * pstride + (int64_t)in_page * tstride + hoff) * 2;
#pragma unroll
        for (int j = 0; j < BN * TR::CPR / 32; ++j) {
            const int idx = j * 32 + lane, r = idx / TR::CPR, c = idx % TR::CPR;
            const long long ko = __shfl_sync(0xffffffffu, (long long)off, r);
            const long long vo = __shfl_sync(0xffffffffu, (long long)off, 16 + r);
            cp_async16(st + tile_at<D>(r, c), ko < 0 ? kbase : kbase + ko + c * 16, ko < 0 ? 0 : 16);
            cp_async16(st + TR::TILE + tile_at<D>(r, c), vo < 0 ? vbase : vbase + vo + c * 16,
                       vo < 0 ? 0 : 16);
        }
    };

    /* Prologue: nsw - 1 tiles in flight, the next tile's page loaded. */
    int pg = row_page(0);
    for (int i = 0; i < nsw - 1; ++i) {
        const int nxt = row_page(i + 1);
        if (i < my_tiles)
            issue(i, pg);
        cp_async_commit();
        pg = nxt;
    }
    cp_async_wait_n(nsw - 1); /* Q's group, the first committed */
    __syncthreads();          /* Q, loaded by every thread, has landed */

    const float scale_log2 = a.sm_scale * 1.4426950408889634f;
    const int g = lane >> 2, t4 = lane & 3;
    /* visible keys of this thread's rows g, g + 8 (bottom-right causal) */
    int lim[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = g + 8 * h;
        lim[h] = it.k1;
        if (a.causal && r < R)
            lim[h] = min(it.k1, kv_len - q_len + r / G + 1);
    }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

    /* ldmatrix lane rows: Q (A, rows) and K (B, keys) and V (trans B) */
    const int mq = lane >> 3;
    const int q_r = (mq & 1) * 8 + (lane & 7), q_cb = mq >> 1;
    const int k_r = (mq >> 1) * 8 + (lane & 7), k_cb = mq & 1;
    const int v_r = (mq & 1) * 8 + (lane & 7), v_cb = mq >> 1;

    for (int i = 0; i < my_tiles; ++i) {
        {
            const int nxt = row_page(i + nsw);
            if (i + nsw - 1 < my_tiles)
                issue(i + nsw - 1, pg);
            cp_async_commit();
            pg = nxt;
        }
        cp_async_wait_n(nsw - 1);
        __syncwarp();
        const uint32_t sK = wring + (uint32_t)((i % nsw) * 2 * TR::TILE), sV = sK + TR::TILE;

        float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
            uint32_t qa[4], kb[4];
            ldsm_x4(qa, sQ + tile_at<D>(q_r, 2 * ks + q_cb));
            ldsm_x4(kb, sK + tile_at<D>(k_r, 2 * ks + k_cb));
            T::mma(s[0], qa, kb[0], kb[1]);
            T::mma(s[1], qa, kb[2], kb[3]);
        }
        const int tok0 = it.k0 + (warp + i * NW) * BN;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int h = e >> 1, tok = tok0 + n * 8 + 2 * t4 + (e & 1);
                s[n][e] = tok < lim[h] ? s[n][e] * scale_log2 : -INFINITY;
                mx[h] = fmaxf(mx[h], s[n][e]);
            }
        float corr[2], base[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            const float mn = fmaxf(m[h], mx[h]);
            base[h] = mn == -INFINITY ? 0.f : mn;
            corr[h] = fast_exp2(m[h] - base[h]);
            m[h] = mn;
            l[h] *= corr[h];
        }
        uint32_t pa[4];
#pragma unroll
        for (int n = 0; n < 2; ++n) {
            float p[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                p[e] = fast_exp2(s[n][e] - base[e >> 1]);
                l[e >> 1] += p[e];
            }
            pa[2 * n] = T::pack(p[0], p[1]);
            pa[2 * n + 1] = T::pack(p[2], p[3]);
        }
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
            o[n][0] *= corr[0];
            o[n][1] *= corr[0];
            o[n][2] *= corr[1];
            o[n][3] *= corr[1];
        }
#pragma unroll
        for (int j = 0; j < D / 16; ++j) {
            uint32_t vb[4];
            ldsm_x4_trans(vb, sV + tile_at<D>(v_r, 2 * j + v_cb));
            T::mma(o[2 * j], pa, vb[0], vb[1]);
            T::mma(o[2 * j + 1], pa, vb[2], vb[3]);
        }
        __syncwarp(); /* the stage is read: the next issue may overwrite it */
    }
    asm volatile("cp.async.wait_all;\n" ::);

    /* Combine the four warps: (m_w, l_w) -> M, L; acc_w x 2^(m_w - M). */
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    if (t4 == 0) {
        s_ml[warp][g][0] = m[0];
        s_ml[warp][g][1] = l[0];
        s_ml[warp][g + 8][0] = m[1];
        s_ml[warp][g + 8][1] = l[1];
    }
    __syncthreads(); /* every warp is past its loop: the ring is free */
    float *comb = (float *)(smem + TR::Q_BYTES);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = g + 8 * h;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; ++w)
            M = fmaxf(M, s_ml[w][r][0]);
        const float f = m[h] == -INFINITY ? 0.f : fast_exp2(m[h] - M);
        float *dst = comb + ((size_t)warp * ROWS + r) * D;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
            dst[n * 8 + 2 * t4] = o[n][2 * h] * f;
            dst[n * 8 + 2 * t4 + 1] = o[n][2 * h + 1] * f;
        }
        if (warp == 0 && t4 == 0) {
            float L = 0.f;
#pragma unroll
            for (int w = 0; w < NW; ++w)
                if (s_ml[w][r][0] != -INFINITY || s_ml[w][r][1] != 0.f) /* (l NaN: it saw a NaN) */
                    L += s_ml[w][r][1] * fast_exp2(s_ml[w][r][0] - M);
            /* (L NaN: NaN out and NaN LSE; 0: no key) */
            s_fin[r][0] = L != 0.f ? 1.f / L : 0.f;
            s_fin[r][1] = L != 0.f ? (M + __log2f(L)) * 0.6931471805599453f : -INFINITY;
        }
    }
    __syncthreads();
    /* Rows r < R, 8 dims a thread and step. */
    for (int idx = tid; idx < R * (D / 8); idx += NT) {
        const int r = idx / (D / 8), c8 = (idx % (D / 8)) * 8;
        const float inv = s_fin[r][0];
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            float acc = 0.f;
#pragma unroll
            for (int w = 0; w < NW; ++w)
                acc += comb[((size_t)w * ROWS + r) * D + c8 + e];
            v[e] = acc * inv;
        }
        if (it.part < 0) {
            uint4 pk;
            pk.x = T::pack(v[0], v[1]);
            pk.y = T::pack(v[2], v[3]);
            pk.z = T::pack(v[4], v[5]);
            pk.w = T::pack(v[6], v[7]);
            char *dst = (char *)a.o + ((int64_t)(q_start + r / G) * a.o_stride +
                                       (int64_t)(it.kvh * G + r % G) * D + c8) * 2;
            *(uint4 *)dst = pk;
        } else {
            float *dst = a.part_o + ((size_t)it.part * ROWS + r) * D + c8;
            *(float4 *)dst = make_float4(v[0], v[1], v[2], v[3]);
            *(float4 *)(dst + 4) = make_float4(v[4], v[5], v[6], v[7]);
        }
    }
    if (tid < R) {
        if (it.part < 0) {
            if (a.lse)
                a.lse[(int64_t)(q_start + tid / G) * a.num_qo_heads + it.kvh * G + tid % G] =
                    s_fin[tid][1];
        } else {
            a.part_lse[(size_t)it.part * ROWS + tid] = s_fin[tid][1];
        }
    }
    if (a.merge_count && it.part >= 0) {
        /* the fused merge: this item's partial is out (every thread's
         * writes fenced); the merge's last item to arrive folds them all,
         * in the ring's shared memory (no longer read) */
        __shared__ int s_last;
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            const int prev = atomicAdd(a.merge_count + it.merge, 1);
            s_last = prev == merges[it.merge].parts - 1;
        }
        __syncthreads();
        if (s_last) {
            __threadfence();
            float *w = (float *)smem;
            merge_pair<D, T, 8>(a, qo_indptr, merges[it.merge], w,
                                w + ROWS * SW_DECODE_MAX_SPLITS, 0, 1);
            if (tid == 0)
                a.merge_count[it.merge] = 0; /* for the next launch */
        }
    }
}

/* Folds the `parts` partial states of (req, kvh), in order, into O and LSE:
 * one CTA, or `nslices` CTAs each taking every nslices-th group of W dims
 * of a row (W = 4 or 8); s_w [ROWS][SW_DECODE_MAX_SPLITS] and s_fin
 * [ROWS][2] shared memory. Every value is the same fold in part order
 * whatever W and the slices (identical results); the partials' loads go
 * out MB parts at a time (a long request's pair has ~130 parts: one at a
 * time, an L2 round trip each, the merge of 1 x 512k at d256 took ~60 us
 * on one CTA under ncu against ~280 us for the decode). The partials are
 * read past L1 (__ldcg): in the fused merge they were written by other
 * multiprocessors during this launch. */
template <int D, class T, int W>
__device__ __forceinline__ void merge_pair(const sw_cuda_paged_args &a, const int32_t *qo_indptr,
                                           const sw_decode_merge mg, float *s_w, float *s_fin,
                                           int slice, int nslices)
{
    constexpr int MB = 8;
    constexpr int NV = W / 4; /* float4 a part */
    const int G = a.num_qo_heads / a.num_kv_heads;
    const int q_start = qo_indptr[mg.req];
    const int R = (qo_indptr[mg.req + 1] - q_start) * G;
    const int tid = threadIdx.x;
    if (tid < R) {
        const float *pl = a.part_lse + (size_t)mg.part0 * ROWS + tid;
        float *ws = s_w + tid * SW_DECODE_MAX_SPLITS;
        float mx = -INFINITY;
        int p = 0;
        for (; p + MB <= mg.parts; p += MB) {
            float e[MB];
#pragma unroll
            for (int u = 0; u < MB; ++u)
                e[u] = __ldcg(pl + (size_t)(p + u) * ROWS);
#pragma unroll
            for (int u = 0; u < MB; ++u) {
                ws[p + u] = e[u];
                mx = nan_max(mx, e[u]);
            }
        }
        for (; p < mg.parts; ++p) {
            const float e = __ldcg(pl + (size_t)p * ROWS);
            ws[p] = e;
            mx = nan_max(mx, e);
        }
        float sum = 0.f;
        for (p = 0; p < mg.parts; ++p) {
            const float w = mx == -INFINITY ? 0.f : __expf(ws[p] - mx);
            ws[p] = w;
            sum += w;
        }
        s_fin[tid * 2] = sum != 0.f ? 1.f / sum : 0.f; /* (NaN: a part saw a NaN) */
        s_fin[tid * 2 + 1] = sum != 0.f ? mx + __logf(sum) : -INFINITY;
        if (a.lse && slice == 0)
            a.lse[(int64_t)(q_start + tid / G) * a.num_qo_heads + mg.kvh * G + tid % G] =
                s_fin[tid * 2 + 1];
    }
    __syncthreads();
    for (int idx = slice * NT + tid; idx < R * (D / W); idx += NT * nslices) {
        const int r = idx / (D / W), cw = (idx % (D / W)) * W;
        float v[W];
#pragma unroll
        for (int e = 0; e < W; ++e)
            v[e] = 0.f;
        const float *src0 = a.part_o + ((size_t)mg.part0 * ROWS + r) * D + cw;
        const float *wr = s_w + r * SW_DECODE_MAX_SPLITS;
        auto fold = [&](float w, const float4 *x) {
#pragma unroll
            for (int j = 0; j < NV; ++j) {
                v[4 * j + 0] += w * x[j].x;
                v[4 * j + 1] += w * x[j].y;
                v[4 * j + 2] += w * x[j].z;
                v[4 * j + 3] += w * x[j].w;
            }
        };
        int p = 0;
        for (; p + MB <= mg.parts; p += MB) {
            float4 x[MB][NV];
#pragma unroll
            for (int u = 0; u < MB; ++u)
#pragma unroll
                for (int j = 0; j < NV; ++j)
                    x[u][j] = __ldcg((const float4 *)(src0 + (size_t)(p + u) * ROWS * D) + j);
#pragma unroll
            for (int u = 0; u < MB; ++u)
                fold(wr[p + u], x[u]);
        }
        for (; p < mg.parts; ++p) {
            float4 x[NV];
#pragma unroll
            for (int j = 0; j < NV; ++j)
                x[j] = __ldcg((const float4 *)(src0 + (size_t)p * ROWS * D) + j);
            fold(wr[p], x);
        }
        const float inv = s_fin[r * 2];
        uint32_t pk[W / 2];
#pragma unroll
        for (int e = 0; e < W / 2; ++e)
            pk[e] = T::pack(v[2 * e] * inv, v[2 * e + 1] * inv);
        char *dst = (char *)a.o + ((int64_t)(q_start + r / G) * a.o_stride +
                                   (int64_t)(mg.kvh * G + r % G) * D + cw) * 2;
        if constexpr (W == 8)
            *(uint4 *)dst = make_uint4(pk[0], pk[1], pk[2], pk[3]);
        else
            *(uint2 *)dst = make_uint2(pk[0], pk[1]);
    }
}

/* The merges when the decode kernel does not fold them itself: merge
 * blockIdx.x over gridDim.y CTAs (merge_slices: the rows' groups of 4 dims
 * spread over them, so that a pair of many parts is not one CTA's loads). */
template <int D> constexpr int merge_slices() { return (ROWS * (D / 4) + NT - 1) / NT; }

template <int D, class T> __global__ void __launch_bounds__(NT) merge_kernel(const sw_cuda_paged_args a)
{
    __shared__ float s_w[ROWS * SW_DECODE_MAX_SPLITS];
    __shared__ float s_fin[ROWS * 2];
    merge_pair<D, T, 4>(a, a.qo_indptr, a.merges[blockIdx.x], s_w, s_fin, blockIdx.y, gridDim.y);
}

/* Pages -> dense [total_kv][num_kv_heads][D], K and V. A warp copies one
 * key at a time (its request found once, by binary search over kv_indptr,
 * the same address for every lane), 16 bytes a lane and step over the
 * key's heads x D / 8 chunks of K and of V, all of a lane's loads before
 * its stores. Before: a thread per 16 bytes did the search and three
 * 64-bit divisions for each, and the gather ran well below the copy rate
 * (docs/perf/paged.md). */
__global__ void __launch_bounds__(256) gather_kernel(const sw_cuda_paged_args a)
{
    const int cpr_log2 = a.head_dim == 64 ? 3 : a.head_dim == 128 ? 4 : 5; /* D / 8 */
    const int per_key = a.num_kv_heads << cpr_log2, row = a.num_kv_heads * a.head_dim * 2;
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t key = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
         key < a.total_kv; key += warps) {
        int lo = 0, hi = a.batch - 1; /* the last request whose kv_indptr <= key */
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (__ldg(a.kv_indptr + mid) <= key)
                lo = mid;
            else
                hi = mid - 1;
        }
        const int tok = (int)key - __ldg(a.kv_indptr + lo);
        const int page = page_of(a, __ldg(a.page_indptr + lo), tok);
        const int in_page = a.ps_log2 >= 0 ? tok & (a.page_size - 1) : tok % a.page_size;
        const char *ks = (const char *)a.k_pool +
                         ((int64_t)page * a.k_page + (int64_t)in_page * a.k_tok) * 2;
        const char *vs = (const char *)a.v_pool +
                         ((int64_t)page * a.v_page + (int64_t)in_page * a.v_tok) * 2;
        sw_gather::copy_key<4>(ks, vs, a.k_head, a.v_head, (char *)a.k_dense + key * row,
                               (char *)a.v_dense + key * row, per_key, cpr_log2, lane);
    }
}

struct kernel_ref {
    const void *decode, *decode_inl, *merge;
    int max_nsw, smem_per_stage_all, q_bytes, combine, merge_slices;
};

template <int D> kernel_ref ref_of(sw_dtype dt)
{
    using TR = traits<D>;
    kernel_ref k;
    if (dt == SW_DTYPE_BF16) {
        k.decode = (const void *)decode_kernel<D, bf16_t, false>;
        k.decode_inl = (const void *)decode_kernel<D, bf16_t, true>;
        k.merge = (const void *)merge_kernel<D, bf16_t>;
    } else {
        k.decode = (const void *)decode_kernel<D, f16_t, false>;
        k.decode_inl = (const void *)decode_kernel<D, f16_t, true>;
        k.merge = (const void *)merge_kernel<D, f16_t>;
    }
    k.max_nsw = TR::NSW_MAX;
    k.smem_per_stage_all = NW * 2 * TR::TILE;
    k.q_bytes = TR::Q_BYTES;
    k.combine = TR::COMBINE;
    k.merge_slices = merge_slices<D>();
    return k;
}

sw_status get_ref(int32_t head_dim, sw_dtype dt, kernel_ref *k)
{
    if (dt != SW_DTYPE_BF16 && dt != SW_DTYPE_F16)
        return sw_fail(SW_STATUS_UNSUPPORTED, "paged CUDA decode: dtype %d is not BF16 or F16",
                       (int)dt);
    switch (head_dim) {
    case 64: *k = ref_of<64>(dt); return SW_OK;
    case 128: *k = ref_of<128>(dt); return SW_OK;
    case 256: *k = ref_of<256>(dt); return SW_OK;
    default: break;
    }
    return sw_fail(SW_STATUS_UNSUPPORTED, "paged CUDA decode: head_dim %d is not 64, 128 or 256",
                   (int)head_dim);
}

/* Stages per warp and dynamic smem on the current device: the most stages
 * (up to the kernel's maximum) that fit its per-block opt-in limit. */
sw_status choose_stages(const kernel_ref &k, int dev, int *nsw, int *smem)
{
    int optin = 0;
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const int reserve = 2048; /* the kernel's static smem */
    for (int n = k.max_nsw; n >= 1; --n) {
        const int ring = n * k.smem_per_stage_all;
        const int bytes = k.q_bytes + (ring > k.combine ? ring : k.combine);
        if (bytes + reserve <= optin) {
            *nsw = n;
            *smem = bytes;
            return SW_OK;
        }
    }
    return sw_fail(SW_STATUS_UNSUPPORTED, "paged CUDA decode: device %d allows %d bytes of shared "
                   "memory per block, too few", dev, optin);
}

/* The dynamic shared memory size last set on each decode kernel (head
 * dim x dtype x inline plan), per device (0: never). */
constexpr int SMEM_SET_DEVICES = 64;
std::atomic<int> smem_set[SMEM_SET_DEVICES][12];

} // namespace sw_paged

extern "C" sw_status sw_cuda_paged_decode_config(int32_t device, int32_t head_dim, sw_dtype dtype,
                                                 int32_t *sms, int32_t *ctas_per_sm)
{
    using namespace sw_paged;
    kernel_ref k;
    SW_TRY(get_ref(head_dim, dtype, &k));
    int old = 0, n = 0, blocks = 0, nsw = 0, smem = 0, count = 0;
    SW_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device < 0 || device >= count)
        return sw_fail(SW_STATUS_NO_DEVICE, "CUDA device %d requested, %d usable", (int)device,
                       count);
    SW_CUDA_CHECK(cudaGetDevice(&old));
    SW_CUDA_CHECK(cudaSetDevice(device));
    sw_status st = choose_stages(k, device, &nsw, &smem);
    /* (both forms: this loads them, where CUDA loads kernels lazily) */
    if (st == SW_OK && (cudaFuncSetAttribute(k.decode, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             smem) != cudaSuccess ||
                        cudaFuncSetAttribute(k.decode_inl,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             smem) != cudaSuccess))
        st = sw_fail(SW_STATUS_CUDA, "cudaFuncSetAttribute: %s", cudaGetErrorString(cudaGetLastError()));
    /* the fewer CTAs an SM of the two forms (their registers differ) */
    int blocks_inl = 0;
    if (st == SW_OK &&
        (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.decode, NT, (size_t)smem) !=
             cudaSuccess ||
         cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_inl, k.decode_inl, NT,
                                                       (size_t)smem) != cudaSuccess))
        st = sw_fail(SW_STATUS_CUDA, "cudaOccupancyMaxActiveBlocksPerMultiprocessor: %s",
                     cudaGetErrorString(cudaGetLastError()));
    if (blocks_inl < blocks)
        blocks = blocks_inl;
    if (st == SW_OK &&
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        st = sw_fail(SW_STATUS_CUDA, "cudaDeviceGetAttribute: %s",
                     cudaGetErrorString(cudaGetLastError()));
    (void)cudaSetDevice(old);
    if (st != SW_OK)
        return st;
    *sms = n;
    *ctas_per_sm = blocks > 0 ? blocks : 1;
    return SW_OK;
}

extern "C" sw_status sw_cuda_paged_decode_launch(const sw_cuda_paged_args *a, void *stream)
{
    using namespace sw_paged;
    kernel_ref k;
    SW_TRY(get_ref(a->head_dim, a->dtype, &k));
    int dev = 0, nsw = 0, smem = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    SW_TRY(choose_stages(k, dev, &nsw, &smem));
    const int inl = a->inl != NULL;
    if (inl && a->num_merges > 0 && !a->merge_count)
        return sw_fail(SW_STATUS_INVALID, "paged CUDA decode: a plan in the launch's parameters "
                       "needs the fused merge (merge_count)");
    if (inl && sw_decode_inline_words(a->batch, a->num_items, a->num_merges) >
                   SW_DECODE_INLINE_WORDS)
        return sw_fail(SW_STATUS_INVALID, "paged CUDA decode: a plan of %d items and %d merges "
                       "over %d requests is too large for the launch's parameters",
                       (int)a->num_items, (int)a->num_merges, (int)a->batch);
    const void *kern = inl ? k.decode_inl : k.decode;
    /* once per kernel, device and size (a host cost per call otherwise) */
    const int slot = ((a->head_dim == 64 ? 0 : a->head_dim == 128 ? 1 : 2) * 2 +
                      (a->dtype == SW_DTYPE_BF16)) * 2 + inl;
    if (dev >= SMEM_SET_DEVICES || smem_set[dev][slot].load(std::memory_order_relaxed) != smem) {
        SW_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           smem));
        if (dev < SMEM_SET_DEVICES)
            smem_set[dev][slot].store(smem, std::memory_order_relaxed);
    }
    sw_cuda_paged_args args = *a;
    args.inl = NULL;
    if (a->num_items > 0) {
        no_inline none = {0};
        void *p[] = {&args, &nsw, inl ? (void *)a->inl : (void *)&none};
        SW_CUDA_CHECK(cudaLaunchKernel(kern, dim3((unsigned)a->num_items), dim3(NT), p,
                                       (size_t)smem, (cudaStream_t)stream));
    }
    if (a->num_merges > 0 && !a->merge_count) {
        void *p[] = {&args};
        SW_CUDA_CHECK(cudaLaunchKernel(k.merge, dim3((unsigned)a->num_merges,
                                                     (unsigned)k.merge_slices),
                                       dim3(NT), p, 0, (cudaStream_t)stream));
    }
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

extern "C" sw_status sw_cuda_paged_gather_launch(const sw_cuda_paged_args *a, void *stream)
{
    if (a->inl)
        return sw_fail(SW_STATUS_INVALID, "paged CUDA gather: the plan must be in device memory");
    if (a->total_kv <= 0)
        return SW_OK;
    int dev = 0, sms = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    /* a warp a key, 8 warps a block, at most 16 blocks an SM */
    int64_t blocks = ((int64_t)a->total_kv + 7) / 8;
    if (blocks > (int64_t)sms * 16)
        blocks = (int64_t)sms * 16;
    sw_cuda_paged_args args = *a;
    void *p[] = {&args};
    SW_CUDA_CHECK(cudaLaunchKernel((const void *)sw_paged::gather_kernel, dim3((unsigned)blocks),
                                   dim3(256), p, 0, (cudaStream_t)stream));
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}
