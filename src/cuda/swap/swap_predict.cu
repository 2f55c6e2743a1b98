/* Predictor kernels of the swap engine: the low-rank projection of BF16
 * rows (keys at offload, queries at attend) and block scoring. Both follow
 * the CPU reference (src/swap/predictor.c) operation for operation in fp32
 * with explicit roundings (__fmul_rn / __fadd_rn: no FMA contraction), so
 * the device scores equal the host ones bit for bit and the two pools evict
 * the same blocks. */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_runtime.h>
#include <math.h>

static __device__ __forceinline__ float bf16_to_f32(uint16_t h)
{
    return __uint_as_float((uint32_t)h << 16);
}

/* One thread per output (row, j): the CPU loop accumulates c in order. */
__global__ void swap_project_kernel(const float *__restrict__ P, int32_t D, int32_t R,
                                    const uint16_t *__restrict__ x, int64_t rows,
                                    float *__restrict__ out)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * R)
        return;
    const int64_t r = i / R;
    const int32_t j = (int32_t)(i % R);
    const uint16_t *xr = x + r * D;
    float acc = 0.0f;
    for (int32_t c = 0; c < D; c++)
        acc = __fadd_rn(acc, __fmul_rn(bf16_to_f32(xr[c]), P[(size_t)c * R + j]));
    out[i] = acc;
}

extern "C" sw_status sw_cuda_swap_project(const float *P, int32_t D, int32_t R,
                                          const uint16_t *x, int64_t rows, float *out,
                                          void *stream)
{
    if (rows <= 0)
        return SW_OK;
    const int64_t n = rows * R;
    const int threads = 128;
    swap_project_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0,
                          (cudaStream_t)stream>>>(P, D, R, x, rows, out);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

/* One CTA per block: threads take (kv head, token, query row, group head)
 * combinations, each a sequential rank-long dot product; max over all. */
__global__ void __launch_bounds__(128) swap_score_kernel(const float *__restrict__ qp,
                                                         const float *__restrict__ arena,
                                                         const sw_cuda_swap_sblk *__restrict__ blk,
                                                         int32_t H, int32_t G, int32_t B,
                                                         int32_t R, float *__restrict__ scores)
{
    __shared__ float red[128];
    const sw_cuda_swap_sblk e = blk[blockIdx.x];
    float best = -INFINITY;
    if (e.entry >= 0 && e.valid > 0) {
        const int32_t Hq = H * G;
        const float *kp = arena + (size_t)e.entry * H * B * R;
        const int64_t combos = (int64_t)H * e.valid * e.ql * G;
        for (int64_t i = threadIdx.x; i < combos; i += blockDim.x) {
            const int32_t g = (int32_t)(i % G);
            const int32_t qi = (int32_t)((i / G) % e.ql);
            const int32_t t = (int32_t)((i / ((int64_t)G * e.ql)) % e.valid);
            const int32_t h = (int32_t)(i / ((int64_t)G * e.ql * e.valid));
            const float *kt = kp + ((size_t)h * B + t) * R;
            const float *qv = qp + (((size_t)e.row0 + qi) * Hq + (size_t)h * G + g) * R;
            float acc = 0.0f;
            for (int32_t j = 0; j < R; j++)
                acc = __fadd_rn(acc, __fmul_rn(qv[j], kt[j]));
            best = fmaxf(best, acc);
        }
    }
    red[threadIdx.x] = best;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        scores[blockIdx.x] = red[0];
}

extern "C" sw_status sw_cuda_swap_score(const float *qp, const float *arena,
                                        const sw_cuda_swap_sblk *blk, int32_t nblk, int32_t H,
                                        int32_t G, int32_t B, int32_t R, float *scores,
                                        void *stream)
{
    if (nblk <= 0)
        return SW_OK;
    swap_score_kernel<<<(unsigned)nblk, 128, 0, (cudaStream_t)stream>>>(qp, arena, blk, H, G,
                                                                        B, R, scores);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}
