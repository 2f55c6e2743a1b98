/* Device helpers shared by the swap engine's tensor-core tile kernels
 * (swap_tile_stream.cu, swap_tile_bulk.cu; the variants in bench/dev): cp.async with
 * zero fill, the m16n8k16 BF16 product, the 8x8 transpose, BF16 packing, the
 * staged rows' swizzle and E4M3 widening; for the kernels that stage a
 * 16-token group with a header (stream, bulk): the block descriptor, the
 * token header, the Q fragments, the running state and the group's
 * arithmetic; the CTA epilogue and the launch helpers. Included by .cu
 * files only. */
#ifndef SW_CUDA_SWAP_MMA_COMMON_CUH
#define SW_CUDA_SWAP_MMA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <climits>
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "core/sw_cuda_check.h"
#include "swap/swap_cuda.h"

static __device__ __forceinline__ void cp_async16z(void *smem, const void *gmem, int bytes)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(bytes));
}
static __device__ __forceinline__ void cp_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> static __device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static __device__ __forceinline__ void mma16816(float *c, uint32_t a0, uint32_t a1, uint32_t a2,
                                                uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* 8x8 b16 transpose across the warp (lane holds row lane/4, cols 2(lane%4), +1). */
static __device__ __forceinline__ uint32_t mov_trans(uint32_t x)
{
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
    return l | (h << 16);
}

/* Swizzle of a staged row's 16-byte pieces (low 3 bits of the piece index):
 * K fragment loads (rows g, g + 1 of a quarter warp, 4 consecutive pieces)
 * and V fragment loads (rows 2t, t = 0..3, 2 consecutive pieces) both hit 8
 * distinct bank groups. Rows r and r + 16 (K and V of a token) share it. */
static __device__ __forceinline__ int swz(int row)
{
    return (((row >> 1) & 3) << 1) ^ ((row & 1) << 2);
}
template <int D> static __device__ __forceinline__ int soff(int row, int piece)
{
    return row * (D * 2) + ((piece ^ swz(row)) << 4); /* rows of D BF16 */
}

/* E4M3 -> fp32 (through fp16's exponent, NaN for S.1111.111). */
static __device__ __forceinline__ float e4m3_f32(uint32_t b)
{
    const uint32_t x = b & 0x7fu;
    float v = __half2float(__ushort_as_half((unsigned short)(x << 7))) * 256.0f;
    if (x == 0x7fu)
        v = __int_as_float(0x7fc00000);
    return (b & 0x80u) ? -v : v;
}

static __device__ __forceinline__ unsigned long long tile_shfl_u64(unsigned long long v, int src)
{
    const unsigned lo = __shfl_sync(0xffffffffu, (unsigned)v, src);
    const unsigned hi = __shfl_sync(0xffffffffu, (unsigned)(v >> 32), src);
    return ((unsigned long long)hi << 32) | lo;
}

/* ------------------------------------------- staged 16-token groups -- */
/* A block descriptor as a lane holds it between its load and its use. */
struct tile_desc {
    int4 d;   /* slot, block, valid, dtype */
    float2 s; /* k_scale, v_scale */
};

/* The descriptor of block bi when `ok`, else zeros (a token that is
 * dropped). */
static __device__ __forceinline__ tile_desc tile_load_desc(const sw_cuda_swap_blk *blk, int bi,
                                                           bool ok)
{
    tile_desc r;
    if (ok) {
        const int4 *p = reinterpret_cast<const int4 *>(blk + bi);
        r.d = __ldg(p);
        r.s = __ldg(reinterpret_cast<const float2 *>(p + 1));
    } else {
        r.d = make_int4(0, 0, 0, 0);
        r.s = make_float2(0.0f, 0.0f);
    }
    return r;
}

/* The header of one staged token (lanes 0..15 each stage one token of a
 * 16-token group, from block descriptor dc at position tt; ok: the token
 * exists): its row mask (bit n: row n of the group sees it, from the row
 * limits rl and kbase as in tile_row_limits) and scales go to hd[lane], and
 * lane 0's last word carries the group's visible and FP8 token masks.
 * Returns the row mask; *fp8: whether the token's block is FP8. Every lane
 * of the warp calls it (two ballots). */
static __device__ __forceinline__ unsigned tile_token_header(const tile_desc &dc, bool ok, int tt,
                                                             int B, int kbase,
                                                             const int (&rl)[8], uint4 *hd,
                                                             int lane, bool *fp8)
{
    const bool f = ok && dc.d.w != 0;
    long long dp = (long long)dc.d.y * B + tt - kbase;
    dp = dp > INT_MAX ? INT_MAX : dp < INT_MIN + 1 ? INT_MIN + 1 : dp;
    unsigned mask = 0;
#pragma unroll
    for (int n = 0; n < 8; n++)
        mask |= (ok && (int)dp <= rl[n]) ? 1u << n : 0u;
    const unsigned vis = __ballot_sync(0xffffffffu, mask != 0) & 0xffffu;
    const unsigned f8 = __ballot_sync(0xffffffffu, f) & 0xffffu;
    if (lane < 16)
        hd[lane] = make_uint4(mask, __float_as_uint(dc.s.x), __float_as_uint(dc.s.y),
                              lane == 0 ? (vis | (f8 << 16)) : 0u);
    *fp8 = f;
    return mask;
}

/* Row n of row group y (of `rows` rows, G per query row) sees key position
 * p when p - kbase <= rl[n], kbase = len - ql (causal) or len - 1 (INT_MIN:
 * no such row); 32-bit limits keep the registers for the pipeline. */
static __device__ __forceinline__ void tile_row_limits(int y, int rows, int G, int causal,
                                                       int (&rl)[8])
{
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const int r = y * 8 + n;
        rl[n] = r >= rows ? INT_MIN : causal ? r / G : 0;
    }
}

/* Q^T fragments (B operand of S^T) of row group y, kv head h: row n = g,
 * dims 32j + 8t .. +7; zeros for a row past the last (q: [ql][Hq][D]). */
template <int D>
static __device__ __forceinline__ void tile_q_frags(const uint16_t *q, int32_t Hq, int rows, int G,
                                                    int y, int h, int g, int t,
                                                    uint4 (&qf)[D / 32])
{
    const int r = y * 8 + g;
    if (r < rows) {
        const uint16_t *qp = q + ((size_t)(r / G) * Hq + (size_t)h * G + (size_t)(r % G)) * D;
#pragma unroll
        for (int j = 0; j < D / 32; j++)
            qf[j] = *reinterpret_cast<const uint4 *>(qp + 32 * j + 8 * t);
    } else {
#pragma unroll
        for (int j = 0; j < D / 32; j++)
            qf[j] = make_uint4(0u, 0u, 0u, 0u);
    }
}

/* Running state of a lane: rows 2t, 2t + 1 (max, sum) and its O^T tiles. */
template <int D> struct tile_state {
    float m0, m1, l0, l1;
    float o[D / 64][4][4];
};
template <int D> static __device__ __forceinline__ void tile_state_init(tile_state<D> &S)
{
    S.m0 = S.m1 = -INFINITY;
    S.l0 = S.l1 = 0.0f;
#pragma unroll
    for (int cc = 0; cc < D / 64; cc++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                S.o[cc][i][e] = 0.0f;
}

/* Elements e0 .. e0 + 7 of staged row `row` as 4 BF16 pairs: one 16-byte
 * load for a BF16 row, 8 bytes widened through the table for FP8 (F8: the
 * group may hold FP8 rows). SWZ: rows swizzled as soff (cp.async staging),
 * else plain rows at a 2D-byte stride (bulk copies cannot swizzle);
 * zeros when !keep. */
template <int D, bool F8, bool SWZ>
static __device__ __forceinline__ void tile_row8(const uint8_t *st, int row, int e0, bool fp8,
                                                 const uint16_t *lut, uint32_t *w,
                                                 bool keep = true)
{
    if (!F8 || !fp8) {
        const uint4 u = *reinterpret_cast<const uint4 *>(
            SWZ ? st + soff<D>(row, e0 >> 3) : st + (size_t)row * (D * 2) + 2 * e0);
        w[0] = u.x;
        w[1] = u.y;
        w[2] = u.z;
        w[3] = u.w;
    } else {
        const uint2 u = *reinterpret_cast<const uint2 *>(
            SWZ ? st + soff<D>(row, e0 >> 4) + (e0 & 8) : st + (size_t)row * (D * 2) + e0);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t src = i < 2 ? u.x : u.y;
            const int sh = (i & 1) * 16;
            w[i] = (uint32_t)lut[(src >> sh) & 0xffu] |
                   ((uint32_t)lut[(src >> (sh + 8)) & 0xffu] << 16);
        }
    }
    if (!keep)
        w[0] = w[1] = w[2] = w[3] = 0u;
}

/* One staged group (16 K rows, then their 16 V rows): S^T = K Q^T, online
 * softmax, O^T += V^T P^T. e0, e1: header entries of tokens g and g + 8;
 * f8: the group's FP8 tokens. PART: some tokens are seen by no row (vis:
 * the tokens some row sees); their rows may hold stale bytes (NaN), so their
 * V rows are read as zeros (0 x NaN would poison O); their S is -inf by the
 * header masks either way. */
template <int D, bool F8, bool PART, bool SWZ>
static __device__ __forceinline__ void tile_group(const uint8_t *st, const uint4 *qf, uint4 e0,
                                                  uint4 e1, unsigned f8, unsigned vis,
                                                  float qscale, const uint16_t *lut, int g,
                                                  int t, tile_state<D> &S)
{
    constexpr int NJ = D / 32, NC = D / 64;
    float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bool kf0 = F8 && ((f8 >> g) & 1u), kf1 = F8 && ((f8 >> (g + 8)) & 1u);
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        uint32_t w[4], x[4];
        tile_row8<D, F8, SWZ>(st, g, 32 * j + 8 * t, kf0, lut, w);
        tile_row8<D, F8, SWZ>(st, g + 8, 32 * j + 8 * t, kf1, lut, x);
        mma16816(sa, w[0], x[0], w[1], x[1], qf[j].x, qf[j].y);
        mma16816(sb, w[2], x[2], w[3], x[3], qf[j].z, qf[j].w);
    }
    /* c0 (token g, row 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1) */
    const float sc0 = qscale * __uint_as_float(e0.y), sc1 = qscale * __uint_as_float(e1.y);
    const float v0 = (e0.x >> (2 * t)) & 1u ? (sa[0] + sb[0]) * sc0 : -INFINITY;
    const float v1 = (e0.x >> (2 * t + 1)) & 1u ? (sa[1] + sb[1]) * sc0 : -INFINITY;
    const float v2 = (e1.x >> (2 * t)) & 1u ? (sa[2] + sb[2]) * sc1 : -INFINITY;
    const float v3 = (e1.x >> (2 * t + 1)) & 1u ? (sa[3] + sb[3]) * sc1 : -INFINITY;
    float mx0 = fmaxf(v0, v2), mx1 = fmaxf(v1, v3);
#pragma unroll
    for (int off = 4; off <= 16; off <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(S.m0, mx0), mn1 = fmaxf(S.m1, mx1);
    const float cr0 = S.m0 == -INFINITY ? 0.0f : exp2f(S.m0 - mn0);
    const float cr1 = S.m1 == -INFINITY ? 0.0f : exp2f(S.m1 - mn1);
    S.m0 = mn0;
    S.m1 = mn1;
    const float p0 = v0 == -INFINITY ? 0.0f : exp2f(v0 - mn0);
    const float p1 = v1 == -INFINITY ? 0.0f : exp2f(v1 - mn1);
    const float p2 = v2 == -INFINITY ? 0.0f : exp2f(v2 - mn0);
    const float p3 = v3 == -INFINITY ? 0.0f : exp2f(v3 - mn1);
    S.l0 = S.l0 * cr0 + p0 + p2;
    S.l1 = S.l1 * cr1 + p1 + p3;
    const float vs0 = __uint_as_float(e0.z), vs1 = __uint_as_float(e1.z);
    const uint32_t pb0 = mov_trans(pack_bf16(p0 * vs0, p1 * vs0));
    const uint32_t pb1 = mov_trans(pack_bf16(p2 * vs1, p3 * vs1));
    /* this lane's V rows: tokens 2t, 2t + 1, 2t + 8, 2t + 9 */
    const bool vf0 = F8 && ((f8 >> (2 * t)) & 1u), vf1 = F8 && ((f8 >> (2 * t + 1)) & 1u);
    const bool vf2 = F8 && ((f8 >> (2 * t + 8)) & 1u), vf3 = F8 && ((f8 >> (2 * t + 9)) & 1u);
    const bool k0 = !PART || ((vis >> (2 * t)) & 1u), k1 = !PART || ((vis >> (2 * t + 1)) & 1u);
    const bool k2 = !PART || ((vis >> (2 * t + 8)) & 1u),
               k3 = !PART || ((vis >> (2 * t + 9)) & 1u);
#pragma unroll
    for (int cc = 0; cc < NC; cc++) {
        uint32_t va[4], vb[4], vc[4], vd[4];
        const int el = 64 * cc + 8 * g;
        tile_row8<D, F8, SWZ>(st, 16 + 2 * t, el, vf0, lut, va, k0);
        tile_row8<D, F8, SWZ>(st, 17 + 2 * t, el, vf1, lut, vb, k1);
        tile_row8<D, F8, SWZ>(st, 24 + 2 * t, el, vf2, lut, vc, k2);
        tile_row8<D, F8, SWZ>(st, 25 + 2 * t, el, vf3, lut, vd, k3);
#pragma unroll
        for (int i2 = 0; i2 < 4; i2++) {
            float *acc = S.o[cc][i2];
            acc[0] *= cr0;
            acc[1] *= cr1;
            acc[2] *= cr0;
            acc[3] *= cr1;
            mma16816(acc, __byte_perm(va[i2], vb[i2], 0x5410), __byte_perm(va[i2], vb[i2], 0x7632),
                     __byte_perm(vc[i2], vd[i2], 0x5410), __byte_perm(vc[i2], vd[i2], 0x7632),
                     pb0, pb1);
        }
    }
}

/* The CTA's partial state from its warps' (every thread of the CTA calls
 * it): each warp holds, for rows 2t and 2t + 1 of its lanes (g = lane / 4,
 * t = lane % 4), the running max m0/m1, its lane's share of the sums
 * l0/l1 and the O^T fragments o. Per row: the max over the warps, each
 * warp's O and sum rescaled to it and added up, written as (M, L, O[D]) to
 * a.part at (chunk, kv head, row group) = blockIdx. wm, wl: [>= NW][8]
 * floats; co: [NW][8][D] floats of shared memory that the warps may reuse
 * once every warp is past the barrier here (their stages). */
template <int D>
static __device__ __forceinline__ void tile_partial_out(const float (&o)[D / 64][4][4], float m0,
                                                        float m1, float l0, float l1, float *wm,
                                                        float *wl, float *co,
                                                        const sw_cuda_swap_tile_args &a)
{
    const int NW = (int)(blockDim.x / 32);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int off = 4; off <= 16; off <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, off);
        l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
    if (g == 0) {
        wm[warp * 8 + 2 * t] = m0;
        wm[warp * 8 + 2 * t + 1] = m1;
        wl[warp * 8 + 2 * t] = l0;
        wl[warp * 8 + 2 * t + 1] = l1;
    }
    __syncthreads(); /* also: every warp is done with its stages */
    float M0 = -INFINITY, M1 = -INFINITY;
    for (int w = 0; w < NW; w++) {
        M0 = fmaxf(M0, wm[w * 8 + 2 * t]);
        M1 = fmaxf(M1, wm[w * 8 + 2 * t + 1]);
    }
    const float f0 = m0 == -INFINITY ? 0.0f : exp2f(m0 - M0);
    const float f1 = m1 == -INFINITY ? 0.0f : exp2f(m1 - M1);
    float *r0p = co + ((size_t)warp * 8 + 2 * t) * D, *r1p = r0p + D;
#pragma unroll
    for (int cc = 0; cc < D / 64; cc++)
#pragma unroll
        for (int i2 = 0; i2 < 4; i2++) {
            const int d0 = 64 * cc + 8 * g + 2 * i2;
            r0p[d0] = o[cc][i2][0] * f0;
            r1p[d0] = o[cc][i2][1] * f1;
            r0p[d0 + 1] = o[cc][i2][2] * f0;
            r1p[d0 + 1] = o[cc][i2][3] * f1;
        }
    __syncthreads();
    const size_t base = (((size_t)blockIdx.x * a.H + blockIdx.y) * a.nrg + blockIdx.z) * 8;
    for (int i = tid; i < 8 * D; i += blockDim.x) {
        const int r = i / D, d = i % D;
        float sum = 0.0f;
        for (int w = 0; w < NW; w++)
            sum += co[((size_t)w * 8 + r) * D + d];
        a.part[(base + r) * (D + 2) + 2 + d] = sum;
    }
    if (tid < 8) {
        float M = -INFINITY, L = 0.0f;
        for (int w = 0; w < NW; w++)
            M = fmaxf(M, wm[w * 8 + tid]);
        for (int w = 0; w < NW; w++) {
            const float mw = wm[w * 8 + tid];
            /* (a warp whose visible keys all scored NaN: max -inf, sum NaN) */
            if (mw != -INFINITY || wl[w * 8 + tid] != 0.0f)
                L += exp2f(mw - M) * wl[w * 8 + tid];
        }
        /* a NaN sum under a max of -inf gets 0, so that the merges, which
         * skip a part whose max is -inf (no visible key), carry the NaN */
        a.part[(base + tid) * (D + 2)] = M == -INFINITY && L != 0.0f ? 0.0f : M;
        a.part[(base + tid) * (D + 2) + 1] = L;
    }
}

/* Warps per CTA for a tile kernel with `head` + nw x `warp` bytes of dynamic
 * shared memory on the current device: what its opt-in allows, at most
 * max_w, and 0 when fewer than nw x `need_warp` bytes of stages (the
 * epilogue's sums) would fit; the kernel's attribute is set once per device
 * (`cache`, one per kernel instance). 0 = the device cannot run it. */
template <class K>
static sw_status tile_kernel_warps(K kernel, size_t head, size_t warp, int max_w, size_t need_warp,
                                   volatile int *cache, int *nw)
{
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 64 && cache[dev]) {
        *nw = cache[dev] - 1;
        return SW_OK;
    }
    int optin = 0;
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    long long n = ((long long)optin - (long long)head) / (long long)warp;
    n = n > max_w ? max_w : n < 0 ? 0 : n;
    if (need_warp > warp)
        n = 0;
    if (n > 0)
        SW_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)(head + (size_t)n * warp)));
    if (dev < 64)
        cache[dev] = (int)n + 1;
    *nw = (int)n;
    return SW_OK;
}

/* Launches a tile kernel (grid chunks x kv heads x row groups, nw warps);
 * *launched = 0 when nw < 1 (the caller falls back to the CUDA-core one). */
template <class K>
static sw_status tile_kernel_launch(K kernel, int nw, size_t head, size_t warp,
                                    const sw_cuda_swap_tile_args *a, cudaStream_t st, int *launched)
{
    *launched = 0;
    if (nw < 1)
        return SW_OK;
    dim3 grid((unsigned)a->nchunks, (unsigned)a->H, (unsigned)a->nrg);
    kernel<<<grid, 32 * nw, head + (size_t)nw * warp, st>>>(*a);
    SW_CUDA_CHECK(cudaGetLastError());
    *launched = 1;
    return SW_OK;
}

/* Calls f(std::integral_constant<int, D>()) for head_dim d = 64, 128, 256;
 * SW_OK without a call for any other (the kernel has no instance). */
template <class F> static sw_status tile_head_dim_call(int32_t d, F f)
{
    switch (d) {
    case 64: return f(std::integral_constant<int, 64>());
    case 128: return f(std::integral_constant<int, 128>());
    case 256: return f(std::integral_constant<int, 256>());
    default: return SW_OK;
    }
}

#endif
