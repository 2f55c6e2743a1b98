/* The one CUDA error check of Spillway's CUDA sources: a failing runtime call
 * becomes SW_STATUS_CUDA with the call, the CUDA error name and file:line in
 * sw_last_error(), and the enclosing function returns it. The library never
 * aborts on a CUDA error (STYLE.md "Errors"). */
#ifndef SW_CUDA_CHECK_H
#define SW_CUDA_CHECK_H

#include "core/sw_core.h"

#include <cuda_runtime.h>

#define SW_CUDA_CHECK(call)                                                            \
    do {                                                                               \
        cudaError_t sw_cuda_e_ = (call);                                               \
        if (sw_cuda_e_ != cudaSuccess)                                                 \
            return sw_fail(SW_STATUS_CUDA, "%s: %s (%s) at %s:%d", #call,              \
                           cudaGetErrorName(sw_cuda_e_), cudaGetErrorString(sw_cuda_e_), \
                           __FILE__, __LINE__);                                        \
    } while (0)

#endif
