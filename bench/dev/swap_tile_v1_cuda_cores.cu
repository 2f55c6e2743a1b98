/* bench/dev/swap_tile_v1_cuda_cores.cu - swap tile kernel variant 1 (kernel 1
 * of the former SW_KNOB_TILE_KERNEL, the engine's first tile kernel and
 * later the fallback where a tensor-core kernel had no instance;
 * bench/dev/README.md). Not built by default; swap_tile_check.cu links it.
 *
 * Tile kernel: one CTA of 128 threads per (block range c, kv head h, row
 * group y of 8 (query row, group head) pairs), so the query heads of a GQA
 * group share every K/V load. The range's tokens are walked in chunks of 32
 * staged into shared memory with 16-byte cp.async, double-buffered (the
 * next chunk's loads are in flight while this one computes). A thread owns
 * 8 consecutive dims of a token row (head_dim/8 lanes per row, 16-byte
 * loads): S = q.k for the 8 rows is reduced across those lanes with a
 * reduce-scatter (each lane ends with one row's sum), the online softmax
 * runs one row per warp pass with lane = token, and P.V accumulates fp32
 * acc[8 rows][8 dims] per thread; the token groups of the CTA are summed at
 * the end. FP8 E4M3 rows are dequantised in registers (k_scale folded into
 * the score, v_scale into P). */

#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"
#include "cuda/swap/swap_carve.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#define RG SW_CUDA_SWAP_RG
#define NT 128 /* threads of a tile CTA */
#define TC 32  /* tokens per staged chunk (= warp size: softmax lane = token) */

/* ------------------------------------------------------------ helpers -- */
static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
static __device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* E4M3 (bias 7) -> fp32 through fp16: the 7 magnitude bits shifted into
 * fp16's exponent/mantissa give the value times 2^-8 (normal and subnormal
 * alike); S.1111.111 is NaN. */
static __device__ __forceinline__ float e4m3_to_f32(uint32_t b)
{
    const uint32_t x = b & 0x7fu;
    float v = __half2float(__ushort_as_half((unsigned short)(x << 7))) * 256.0f;
    if (x == 0x7fu)
        v = __int_as_float(0x7fc00000);
    return (b & 0x80u) ? -v : v;
}

/* 8 elements of a staged row at byte offset `off` (16-byte aligned for BF16,
 * 8-byte aligned for FP8) as fp32. */
static __device__ __forceinline__ void load8(const uint8_t *row, int dg, int fp8, float *x)
{
    if (!fp8) {
        const uint4 u = *reinterpret_cast<const uint4 *>(row + dg * 16);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            x[2 * i] = __uint_as_float(w[i] << 16);
            x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    } else {
        const uint2 u = *reinterpret_cast<const uint2 *>(row + dg * 8);
        const uint32_t w[2] = {u.x, u.y};
#pragma unroll
        for (int i = 0; i < 8; i++)
            x[i] = e4m3_to_f32((w[i / 4] >> (8 * (i % 4))) & 0xffu);
    }
}

/* -------------------------------------------------------------- tile -- */
template <int D> struct tile_smem {
    static constexpr int ROWB = D * 2;                       /* bytes of a staged row */
    static constexpr size_t KV = (size_t)2 * TC * ROWB;      /* one of K, V: 2 buffers */
    static constexpr size_t S_OFF = 2 * KV;                  /* scores / probabilities */
    static constexpr size_t ST_OFF = S_OFF + sizeof(float) * RG * TC;
    static constexpr size_t BYTES = ST_OFF + sizeof(float) * 3 * RG + sizeof(long long) * RG;
};

template <int D>
__global__ void __launch_bounds__(NT) swap_tile_kernel(const sw_cuda_swap_tile_args a)
{
    constexpr int LPT = D / 8;     /* lanes per token row */
    constexpr int TPP = NT / LPT;  /* tokens per pass */
    constexpr int ROWB = tile_smem<D>::ROWB;
    static_assert(LPT >= 8 && LPT <= 32 && TC % TPP == 0, "head_dim 64, 128 or 256");
    extern __shared__ __align__(16) uint8_t smem[];
    uint8_t *Ks = smem, *Vs = smem + tile_smem<D>::KV;
    float *S = reinterpret_cast<float *>(smem + tile_smem<D>::S_OFF);
    float *m_s = reinterpret_cast<float *>(smem + tile_smem<D>::ST_OFF);
    float *l_s = m_s + RG, *c_s = l_s + RG;
    long long *lim_s = reinterpret_cast<long long *>(c_s + RG);

    const int c = blockIdx.x, h = blockIdx.y, y = blockIdx.z;
    const int tid = threadIdx.x, dg = tid % LPT, tl = tid / LPT;
    const int lane = tid % 32, warp = tid / 32;
    const int32_t B = a.B;
    const int b0 = (int)((int64_t)a.nblk * c / a.nchunks);
    const int b1 = (int)((int64_t)a.nblk * (c + 1) / a.nchunks);
    const int ntok = (b1 - b0) * B;
    const int rows = a.ql * a.G;

    /* This CTA's rows: query, and the last key position each may see. */
    float q[RG][8];
    long long maxlim = -1;
#pragma unroll
    for (int r = 0; r < RG; r++) {
        const int ridx = y * RG + r;
        long long lim = -1;
        if (ridx < rows) {
            const int qrow = ridx / a.G, g = ridx % a.G;
            const uint4 u = *reinterpret_cast<const uint4 *>(
                a.q + ((size_t)qrow * a.Hq + (size_t)h * a.G + g) * D + dg * 8);
            const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                q[r][2 * i] = __uint_as_float(w[i] << 16) * a.qscale;
                q[r][2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u) * a.qscale;
            }
            lim = a.causal ? (long long)qrow + a.len - a.ql : a.len - 1;
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++)
                q[r][i] = 0.0f;
        }
        maxlim = lim > maxlim ? lim : maxlim;
        if (tid == 0) {
            lim_s[r] = lim;
            m_s[r] = -INFINITY;
            l_s[r] = 0.0f;
        }
    }
    float acc[RG][8];
#pragma unroll
    for (int r = 0; r < RG; r++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[r][i] = 0.0f;

    /* Stages chunk ck's K and V rows (valid, visible tokens only). */
    auto issue = [&](int ck, int buf) {
        constexpr int PPR = D / 8; /* 16-byte pieces of a BF16 row */
        for (int p = tid; p < TC * 2 * PPR; p += NT) {
            const int tok = p / (2 * PPR), rem = p % (2 * PPR);
            const int kind = rem / PPR, pc = rem % PPR;
            const int j = ck * TC + tok;
            if (j >= ntok)
                continue;
            const sw_cuda_swap_blk e = a.blk[b0 + j / B];
            const int t = j % B;
            const size_t es = e.dtype ? 1 : 2;
            if (t >= e.valid || (long long)e.block * B + t > maxlim || (size_t)pc * 16 >= D * es)
                continue;
            const uint8_t *src = a.pool + (size_t)e.slot * a.slot_bytes +
                                 (kind ? a.v_off : 0) + ((size_t)h * B + t) * D * es + pc * 16;
            uint8_t *dst = (kind ? Vs : Ks) + ((size_t)buf * TC + tok) * ROWB + pc * 16;
            cp_async16(dst, src);
        }
        cp_async_commit();
    };

    const int nck = (ntok + TC - 1) / TC;
    if (nck > 0)
        issue(0, 0);
    __syncthreads(); /* m_s, l_s, lim_s */
    for (int ck = 0; ck < nck; ck++) {
        const int buf = ck & 1;
        if (ck + 1 < nck)
            issue(ck + 1, buf ^ 1);
        else
            cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        /* ---- S = q.k, one token per LPT lanes ---- */
        for (int tt = tl; tt < TC; tt += TPP) {
            const int j = ck * TC + tt;
            bool ok = j < ntok;
            long long kpos = 0;
            float kscale = 1.0f;
            int fp8 = 0;
            if (ok) {
                const sw_cuda_swap_blk e = a.blk[b0 + j / B];
                const int t = j % B;
                kpos = (long long)e.block * B + t;
                ok = t < e.valid && kpos <= maxlim;
                kscale = e.k_scale;
                fp8 = e.dtype != 0;
            }
            float v[RG];
            if (ok) {
                float k[8];
                load8(Ks + ((size_t)buf * TC + tt) * ROWB, dg, fp8, k);
#pragma unroll
                for (int r = 0; r < RG; r++) {
                    float s = 0.0f;
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        s = fmaf(q[r][i], k[i], s);
                    v[r] = s;
                }
            } else {
#pragma unroll
                for (int r = 0; r < RG; r++)
                    v[r] = 0.0f;
            }
            /* Reduce-scatter of the 8 row sums over the LPT lanes of the
             * token: 4 + 2 + 1 shuffles leave one row per lane, the rest
             * finish the sum (shuffles stay inside the token's lanes). */
            const bool h4 = (lane & (LPT / 2)) != 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float send = h4 ? v[i] : v[i + 4];
                const float keep = h4 ? v[i + 4] : v[i];
                v[i] = keep + __shfl_xor_sync(0xffffffffu, send, LPT / 2);
            }
            const bool h2 = (lane & (LPT / 4)) != 0;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const float send = h2 ? v[i] : v[i + 2];
                const float keep = h2 ? v[i + 2] : v[i];
                v[i] = keep + __shfl_xor_sync(0xffffffffu, send, LPT / 4);
            }
            const bool h1 = (lane & (LPT / 8)) != 0;
            {
                const float send = h1 ? v[0] : v[1];
                const float keep = h1 ? v[1] : v[0];
                v[0] = keep + __shfl_xor_sync(0xffffffffu, send, LPT / 8);
            }
#pragma unroll
            for (int w = LPT / 16; w >= 1; w /= 2)
                v[0] += __shfl_xor_sync(0xffffffffu, v[0], w);
            const int rr = (h4 ? 4 : 0) + (h2 ? 2 : 0) + (h1 ? 1 : 0);
            if ((lane & (LPT / 8 - 1)) == 0) {
                float s = v[0] * kscale;
                if (!ok || kpos > lim_s[rr])
                    s = -INFINITY;
                S[rr * TC + tt] = s;
            }
        }
        __syncthreads();

        /* ---- online softmax: a warp per row, lane = token ---- */
        for (int rr = warp; rr < RG; rr += NT / 32) {
            const float s = S[rr * TC + lane];
            float mx = s;
#pragma unroll
            for (int w = 16; w >= 1; w /= 2)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
            const float m_old = m_s[rr];
            const float m_new = fmaxf(m_old, mx);
            const float p = s == -INFINITY ? 0.0f : exp2f(s - m_new);
            float sum = p;
#pragma unroll
            for (int w = 16; w >= 1; w /= 2)
                sum += __shfl_xor_sync(0xffffffffu, sum, w);
            S[rr * TC + lane] = p;
            __syncwarp();
            if (lane == 0) {
                const float corr = m_old == -INFINITY ? 0.0f : exp2f(m_old - m_new);
                c_s[rr] = corr;
                l_s[rr] = l_s[rr] * corr + sum;
                m_s[rr] = m_new;
            }
        }
        __syncthreads();

        /* ---- acc = acc * corr + P.V ---- */
#pragma unroll
        for (int r = 0; r < RG; r++) {
            const float cr = c_s[r];
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[r][i] *= cr;
        }
        for (int tt = tl; tt < TC; tt += TPP) {
            const int j = ck * TC + tt;
            if (j >= ntok)
                continue;
            const sw_cuda_swap_blk e = a.blk[b0 + j / B];
            const int t = j % B;
            if (t >= e.valid || (long long)e.block * B + t > maxlim)
                continue;
            float vv[8];
            load8(Vs + ((size_t)buf * TC + tt) * ROWB, dg, e.dtype != 0, vv);
#pragma unroll
            for (int r = 0; r < RG; r++) {
                const float p = S[r * TC + tt] * e.v_scale;
#pragma unroll
                for (int i = 0; i < 8; i++)
                    acc[r][i] = fmaf(p, vv[i], acc[r][i]);
            }
        }
        __syncthreads(); /* buf is staged again by the next-but-one issue */
    }
    cp_async_wait<0>();

    /* Sum the token groups' acc (the staging area is free now). */
    float *red = reinterpret_cast<float *>(smem);
    for (int i = tid; i < RG * D; i += NT)
        red[i] = 0.0f;
    __syncthreads();
    for (int g = 0; g < TPP; g++) {
        if (tl == g)
#pragma unroll
            for (int r = 0; r < RG; r++)
#pragma unroll
                for (int i = 0; i < 8; i++)
                    red[r * D + dg * 8 + i] += acc[r][i];
        __syncthreads();
    }
    const size_t base = (((size_t)c * a.H + h) * a.nrg + y) * RG;
    for (int i = tid; i < RG * D; i += NT) {
        const int r = i / D, d = i % D;
        a.part[(base + r) * (D + 2) + 2 + d] = red[i];
    }
    if (tid < RG) {
        a.part[(base + tid) * (D + 2)] = m_s[tid];
        a.part[(base + tid) * (D + 2) + 1] = l_s[tid];
    }
}

template <int D> static sw_status launch_tile(const sw_cuda_swap_tile_args *a, cudaStream_t st)
{
    const size_t smem = tile_smem<D>::BYTES;
    /* The shared-memory opt-in is per device; setting it twice is harmless,
     * so the flags need no lock. */
    static volatile unsigned char attr_set[64];
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev >= 64 || !attr_set[dev]) {
        SW_CUDA_CHECK(cudaFuncSetAttribute(swap_tile_kernel<D>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem));
        if (dev < 64)
            attr_set[dev] = 1;
    }
    dim3 grid((unsigned)a->nchunks, (unsigned)a->H, (unsigned)a->nrg);
    swap_tile_kernel<D><<<grid, NT, smem, st>>>(*a);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}


/* The CUDA-core tile kernel for a->D (64, 128, 256). */
extern "C" sw_status sw_cuda_swap_tile_cuda_cores(const sw_cuda_swap_tile_args *a, void *stream)
{
    if (a->nblk <= 0 || a->ql <= 0)
        return SW_OK;
    cudaStream_t st = (cudaStream_t)stream;
    switch (a->D) {
    case 64: return launch_tile<64>(a, st);
    case 128: return launch_tile<128>(a, st);
    case 256: return launch_tile<256>(a, st);
    default:
        return sw_fail(SW_STATUS_UNSUPPORTED, "swap tile kernel: head_dim %d (have 64, 128, 256)",
                       (int)a->D);
    }
}
