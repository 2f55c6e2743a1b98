/* Packing of offloaded device blocks (swap/swap_cuda.h, sw_cuda_swap_pack):
 * each item is one stripe (a kv head's K or V rows of one block) read from
 * wherever the caller's KV cache keeps it -- token-major pages, strided
 * views -- and written densely into the engine's device staging, from
 * which one copy takes the whole batch to pinned host memory.
 *
 * A CTA per item, 128 threads walking the item's units (16 bytes when the
 * source, its pitch, the row and the destination allow, else the largest
 * power of two that divides them all), so consecutive threads read
 * consecutive bytes of a row. */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_runtime.h>

#define PACK_NT 128

template <typename T>
__device__ __forceinline__ void pack_rows(const sw_cuda_swap_pack_item &it, uint8_t *dst)
{
    const int32_t upr = it.row_bytes / (int32_t)sizeof(T);
    const int64_t units = (int64_t)it.rows * upr;
    uint8_t *out = dst + it.dst_off;
    for (int64_t u = threadIdx.x; u < units; u += PACK_NT) {
        const int64_t r = u / upr, c = u - r * upr;
        const T x = *(const T *)(it.src + r * it.src_pitch + c * (int64_t)sizeof(T));
        *(T *)(out + u * (int64_t)sizeof(T)) = x;
    }
}

__global__ void __launch_bounds__(PACK_NT) swap_pack_kernel(const sw_cuda_swap_pack_item *items,
                                                            uint8_t *dst, int32_t *tab)
{
    if (threadIdx.x == 0) {
        const int64_t t1 = items[blockIdx.x].tab1;
        if (t1 > 0)
            tab[t1 - 1] = items[blockIdx.x].tab_val;
    }
    const sw_cuda_swap_pack_item it = items[blockIdx.x];
    switch (it.vec) {
    case 16: pack_rows<uint4>(it, dst); break;
    case 8: pack_rows<uint2>(it, dst); break;
    case 4: pack_rows<uint32_t>(it, dst); break;
    case 2: pack_rows<uint16_t>(it, dst); break;
    default: pack_rows<uint8_t>(it, dst); break;
    }
}

extern "C" sw_status sw_cuda_swap_pack(const sw_cuda_swap_pack_item *items, int32_t n,
                                       uint8_t *dst, int32_t *tab, void *stream)
{
    if (n <= 0)
        return SW_OK;
    swap_pack_kernel<<<(unsigned)n, PACK_NT, 0, (cudaStream_t)stream>>>(items, dst, tab);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}
