/* Page tables copied inside device memory (swap/swap_cuda.h,
 * sw_cuda_swap_copy_tables): a CUDA graph's step takes its sequences'
 * tables from the resident path's arena, where the offloads keep them, so
 * that preparing a step reads no block on the host. One CTA per sequence,
 * the table's entries read and written by consecutive threads. */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
copy_tables_kernel(int32_t *__restrict__ dst, int32_t pitch, const int32_t *__restrict__ src,
                   const int32_t *__restrict__ src_off, const int32_t *__restrict__ kv_indptr,
                   int32_t block)
{
    const int b = blockIdx.x;
    const int64_t keys = (int64_t)kv_indptr[b + 1] - kv_indptr[b];
    const int64_t n = (keys + block - 1) / block;
    const int32_t *s = src + src_off[b];
    int32_t *d = dst + (int64_t)b * pitch;
    for (int64_t i = threadIdx.x; i < n; i += kThreads)
        d[i] = s[i];
}

} // namespace

extern "C" sw_status sw_cuda_swap_copy_tables(int32_t *dst, int32_t pitch, const int32_t *src,
                                              const int32_t *src_off, const int32_t *kv_indptr,
                                              int32_t block, int32_t batch, void *stream)
{
    if (batch <= 0)
        return SW_OK;
    copy_tables_kernel<<<(unsigned)batch, kThreads, 0, (cudaStream_t)stream>>>(
        dst, pitch, src, src_off, kv_indptr, block);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}
