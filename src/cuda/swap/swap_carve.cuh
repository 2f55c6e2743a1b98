/* The shared-memory carve-out of the swap kernels that run beside each
 * other (the tile kernels, their scatter and merge, the host-tier gather):
 * all at the largest, the configuration the tile kernels need. An SM holding
 * a CTA of a kernel launched with a smaller carve-out cannot take a CTA that
 * needs the larger one until it drains, which serialised the gathers and
 * the tile computes (docs/perf/swap.md). Set once per device and
 * function. */
#ifndef SW_SWAP_CARVE_CUH
#define SW_SWAP_CARVE_CUH

#include "core/sw_cuda_check.h"

#include <cuda_runtime.h>

template <class F> static sw_status sw_swap_carve_max(F *fn, volatile int (&done)[64])
{
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 64 && done[dev])
        return SW_OK;
    SW_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                       (int)cudaSharedmemCarveoutMaxShared));
    if (dev < 64)
        done[dev] = 1;
    return SW_OK;
}


/* Loads f now (CUDA's lazy loading would on its first launch, ~0.7 ms in the
 * middle of a call on the H200); an instance this device lacks is skipped. */
template <class F> static void sw_swap_preload_fn(F *f)
{
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, f) != cudaSuccess)
        (void)cudaGetLastError();
}

#endif
