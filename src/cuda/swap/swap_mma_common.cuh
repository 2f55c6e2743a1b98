/* Device helpers shared by the swap engine's tensor-core tile kernels
 * (swap_tile_mma.cu, swap_tile_stream.cu): cp.async with zero fill, the
 * m16n8k16 BF16 product, the 8x8 transpose, BF16 packing, the staged rows'
 * swizzle and E4M3 widening. Included by .cu files only. */
#ifndef SW_CUDA_SWAP_MMA_COMMON_CUH
#define SW_CUDA_SWAP_MMA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
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
