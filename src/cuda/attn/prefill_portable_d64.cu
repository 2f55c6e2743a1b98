/* Instantiates the portable prefill kernel for head_dim 64 (bf16, fp16 x
 * causal, non-causal). One unit per head_dim so that a parallel build
 * compiles them side by side. */
#include "portable_kernel.cuh"

int sw_portable_kernel_d64(sw_dtype dtype, int causal, sw_portable_kernel *k)
{
    return portable_describe<64>(dtype, causal, k);
}
