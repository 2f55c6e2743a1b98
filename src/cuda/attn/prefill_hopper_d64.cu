/* Instantiates the Hopper prefill kernel for head_dim 64 (bf16, fp16 x
 * causal, non-causal; each also over bulk-gathered paged K/V). Machine code
 * only for compute_90a; other targets get a trapping stub that the
 * dispatcher never launches. */
#include "hopper_kernel.cuh"
#include "hopper_launch.h"

int sw_hopper_kernel_d64(sw_dtype dtype, int causal, int wide, int paged,
                          sw_hopper_kernel *k)
{
    return hopper_describe<64>(dtype, causal, wide, paged, k);
}
