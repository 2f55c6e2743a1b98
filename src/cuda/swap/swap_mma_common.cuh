/* Device helpers shared by the swap engine's tensor-core tile kernels
 * (swap_tile_mma.cu, swap_tile_stream.cu): cp.async with zero fill, the
 * m16n8k16 BF16 product, the 8x8 transpose, BF16 packing, the staged rows'
 * swizzle and E4M3 widening. Included by .cu files only. */
#ifndef SW_CUDA_SWAP_MMA_COMMON_CUH
#define SW_CUDA_SWAP_MMA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda/sw_cuda_check.h"
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

/* E4M3 -> fp32 (as swap_tile.cu: through fp16's exponent, NaN for S.1111.111). */
static __device__ __forceinline__ float e4m3_f32(uint32_t b)
{
    const uint32_t x = b & 0x7fu;
    float v = __half2float(__ushort_as_half((unsigned short)(x << 7))) * 256.0f;
    if (x == 0x7fu)
        v = __int_as_float(0x7fc00000);
    return (b & 0x80u) ? -v : v;
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
            if (mw != -INFINITY)
                L += exp2f(mw - M) * wl[w * 8 + tid];
        }
        a.part[(base + tid) * (D + 2)] = M;
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

#endif
