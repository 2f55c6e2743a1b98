/* Instantiates the portable prefill kernel for head_dim 64 (bf16, fp16 x
 * causal, non-causal). One unit per head_dim so that a parallel build
 * compiles them side by side. */
#include "portable_kernel.cuh"
#include "portable_launch.h"

int sw_portable_kernel_d64(sw_dtype dtype, int causal, sw_portable_kernel *k)
{
    using namespace sw_portable;
    using TR = traits<64>;
    if (dtype == SW_DTYPE_BF16)
        k->fn = causal ? (const void *)prefill_kernel<64, bf16_t, true>
                       : (const void *)prefill_kernel<64, bf16_t, false>;
    else if (dtype == SW_DTYPE_F16)
        k->fn = causal ? (const void *)prefill_kernel<64, f16_t, true>
                       : (const void *)prefill_kernel<64, f16_t, false>;
    else
        return 0;
    k->threads = TR::NT;
    k->tile_m = TR::BM;
    for (int m = 0; m < SW_KV_MODES; ++m)
        k->smem[m] = TR::smem_bytes(m);
    return 1;
}
