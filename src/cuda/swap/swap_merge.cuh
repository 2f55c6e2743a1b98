/* The fold of a tile's partial states into the running state, one (query
 * row, group head) row of one kv head, in the merge kernels of
 * swap_tile.cu: swap_merge_row (chunks one after another) and
 * swap_merge_row_wide (chunks in parallel, identical results). */
#ifndef SW_CUDA_SWAP_MERGE_CUH
#define SW_CUDA_SWAP_MERGE_CUH

#include "swap/swap_cuda.h"

#include <cuda_runtime.h>
#include <math.h>

/* Every thread of the CTA calls it for the same row (it has a barrier):
 * row ridx (< ql x G) of kv head h folds the nchunks partials of a.part
 * into (m, l, acc). */
static __device__ __forceinline__ void swap_merge_row(const sw_cuda_swap_tile_args &a, int h,
                                                      int ridx)
{
    auto ld = [](const float *p) -> float { return *p; };
    const int y = ridx / SW_CUDA_SWAP_RG, r = ridx % SW_CUDA_SWAP_RG;
    const int qrow = ridx / a.G, g = ridx % a.G;
    const int D = a.D;
    const size_t si = ((size_t)a.row0 + qrow) * a.Hq + (size_t)h * a.G + g;
    const float m_old = a.m[si];
    float M = m_old;
    for (int c = 0; c < a.nchunks; c++) {
        const size_t pi = (((size_t)c * a.H + h) * a.nrg + y) * SW_CUDA_SWAP_RG + r;
        M = fmaxf(M, ld(&a.part[pi * (D + 2)]));
    }
    if (M == -INFINITY)
        return; /* no visible key so far */
    const float cg = m_old == -INFINITY ? 0.0f : exp2f(m_old - M);
    float L = a.l[si] * cg;
    for (int c = 0; c < a.nchunks; c++) {
        const size_t pi = (((size_t)c * a.H + h) * a.nrg + y) * SW_CUDA_SWAP_RG + r;
        const float mc = ld(&a.part[pi * (D + 2)]);
        if (mc != -INFINITY)
            L += exp2f(mc - M) * ld(&a.part[pi * (D + 2) + 1]);
    }
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float o = a.acc[si * D + d] * cg;
        for (int c = 0; c < a.nchunks; c++) {
            const size_t pi = (((size_t)c * a.H + h) * a.nrg + y) * SW_CUDA_SWAP_RG + r;
            const float mc = ld(&a.part[pi * (D + 2)]);
            if (mc != -INFINITY)
                o += exp2f(mc - M) * ld(&a.part[pi * (D + 2) + 2 + d]);
        }
        a.acc[si * D + d] = o;
    }
    __syncthreads(); /* every thread read m_old / l before they change */
    if (threadIdx.x == 0) {
        a.m[si] = M;
        a.l[si] = L;
    }
}

/* The same fold with the chunks spread over the threads (the merge kernel's
 * second form, swap_merge_wide_kernel): every partial's (max, sum) read in
 * parallel into shared memory (w: the chunk's weight exp2(m_c - M), -1 for
 * a chunk without a visible key; ls: its sum), then each dim's sum over the
 * chunks with the loads of several chunks in flight. The first form read
 * the chunks one after another three times over, a load latency each
 * (~64 chunks a tile: tens of microseconds a merge). The same operations
 * in the same order per value: results identical to swap_merge_row's.
 * Shared memory: 2 * nchunks floats + 32. */
static __device__ __forceinline__ void swap_merge_row_wide(const sw_cuda_swap_tile_args &a, int h,
                                                           int ridx, float *w, float *ls)
{
    __shared__ float red[32];
    const int y = ridx / SW_CUDA_SWAP_RG, r = ridx % SW_CUDA_SWAP_RG;
    const int qrow = ridx / a.G, g = ridx % a.G;
    const int D = a.D, nt = blockDim.x, t = threadIdx.x;
    const size_t si = ((size_t)a.row0 + qrow) * a.Hq + (size_t)h * a.G + g;
    const float m_old = a.m[si];
    auto pidx = [&](int c) -> size_t {
        return ((((size_t)c * a.H + h) * a.nrg + y) * SW_CUDA_SWAP_RG + r) * (size_t)(D + 2);
    };
    float M = -INFINITY;
    for (int c = t; c < a.nchunks; c += nt) {
        const float mc = a.part[pidx(c)];
        w[c] = mc;
        ls[c] = a.part[pidx(c) + 1];
        M = fmaxf(M, mc);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    if ((t & 31) == 0)
        red[t >> 5] = M;
    __syncthreads();
    M = m_old;
    for (int i = 0; i < (nt + 31) / 32; i++)
        M = fmaxf(M, red[i]);
    if (M == -INFINITY)
        return; /* no visible key so far (every thread returns) */
    for (int c = t; c < a.nchunks; c += nt)
        w[c] = w[c] == -INFINITY ? -1.0f : exp2f(w[c] - M);
    __syncthreads();
    const float cg = m_old == -INFINITY ? 0.0f : exp2f(m_old - M);
    for (int d = t; d < D; d += nt) {
        float o = a.acc[si * D + d] * cg;
        const float *pa = a.part + pidx(0) + 2 + d;
        const size_t stride = sw_cuda_swap_chunk_floats(a.H, a.nrg, D);
#pragma unroll 8
        for (int c = 0; c < a.nchunks; c++) {
            const float x = pa[(size_t)c * stride];
            const float wc = w[c];
            if (wc >= 0.0f)
                o += wc * x;
        }
        a.acc[si * D + d] = o;
    }
    if (t == 0) {
        float L = a.l[si] * cg;
        for (int c = 0; c < a.nchunks; c++)
            if (w[c] >= 0.0f)
                L += w[c] * ls[c];
        a.m[si] = M;
        a.l[si] = L;
    }
}

#endif
