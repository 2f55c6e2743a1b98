/* The fold of a tile's partial states into the running state, one (query
 * row, group head) row of one kv head: the separate merge kernel
 * (swap_merge_kernel, swap_tile.cu) and the tile kernels' fused merge
 * (tile_fused_merge, swap_mma_common.cuh) both run this. */
#ifndef SW_CUDA_SWAP_MERGE_CUH
#define SW_CUDA_SWAP_MERGE_CUH

#include "swap/swap_cuda.h"

#include <cuda_runtime.h>
#include <math.h>

/* Every thread of the CTA calls it for the same row (it has a barrier):
 * row ridx (< ql x G) of kv head h folds the nchunks partials of a.part
 * into (m, l, acc). CG: read the partials through L2 (__ldcg), for
 * partials other CTAs of the same launch have just written. */
template <bool CG>
static __device__ __forceinline__ void swap_merge_row(const sw_cuda_swap_tile_args &a, int h,
                                                      int ridx)
{
    auto ld = [](const float *p) -> float {
        if constexpr (CG)
            return __ldcg(p);
        else
            return *p;
    };
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

#endif
