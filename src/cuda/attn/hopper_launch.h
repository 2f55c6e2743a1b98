/* Host-side handle on the compiled Hopper kernels (prefill_hopper_d*.cu):
 * each unit exposes its four kernels (dtype x causal) as function pointers;
 * prefill_hopper.cu does the tensor maps, attributes and the launch. */
#ifndef SW_CUDA_HOPPER_LAUNCH_H
#define SW_CUDA_HOPPER_LAUNCH_H

#include "attn/attn_internal.h"

typedef struct sw_hopper_kernel {
    const void *fn;  /* __global__ void (4 x CUtensorMap, sw_cuda_prefill_args) */
    int threads;
    int tile_m;      /* query rows per item */
    int tile_n;      /* keys per K/V tile */
    int smem;        /* dynamic shared memory */
} sw_hopper_kernel;

/* `wide`: the wide K/V tile kernel where one exists (d128 non-causal);
 * `paged`: the kernel whose gatherers copy paged K/V by bulk copies
 * (sw_cuda_gather_args.bulk; never wide). */
int sw_hopper_kernel_d64(sw_dtype dtype, int causal, int wide, int paged, sw_hopper_kernel *k);
int sw_hopper_kernel_d128(sw_dtype dtype, int causal, int wide, int paged, sw_hopper_kernel *k);
int sw_hopper_kernel_d256(sw_dtype dtype, int causal, int wide, int paged, sw_hopper_kernel *k);

/* Fills the handle of head_dim D's kernel; 0 when the dtype is not compiled.
 * Only the instantiation units include the kernel and call this. */
#ifdef SW_CUDA_HOPPER_KERNEL_CUH
template <int D, class T> const void *hopper_fn(int causal, int wide, int paged)
{
    using namespace sw_hopper;
    if (paged)
        return causal ? (const void *)prefill_kernel<D, T, true, false, true>
                      : (const void *)prefill_kernel<D, T, false, false, true>;
    if (causal)
        return (const void *)prefill_kernel<D, T, true, false>;
    if constexpr (D == 128)
        if (wide)
            return (const void *)prefill_kernel<D, T, false, true>;
    return (const void *)prefill_kernel<D, T, false, false>;
}

template <class TR> void hopper_geometry(sw_hopper_kernel *k)
{
    k->threads = TR::NT;
    k->tile_m = TR::BM;
    k->tile_n = TR::BN;
    k->smem = TR::SMEM;
}

template <int D>
int hopper_describe(sw_dtype dtype, int causal, int wide, int paged, sw_hopper_kernel *k)
{
    using sw_portable::bf16_t;
    using sw_portable::f16_t;
    if (paged)
        wide = 0;
    if (dtype == SW_DTYPE_BF16)
        k->fn = hopper_fn<D, bf16_t>(causal, wide, paged);
    else if (dtype == SW_DTYPE_F16)
        k->fn = hopper_fn<D, f16_t>(causal, wide, paged);
    else
        return 0;
    /* Wide K/V tiles: d128 non-causal only (tile_m and threads are the same). */
    if (paged)
        hopper_geometry<sw_hopper::traits<D, false, true>>(k);
    else if (D == 128 && wide && !causal)
        hopper_geometry<sw_hopper::traits<128, true>>(k);
    else
        hopper_geometry<sw_hopper::traits<D, false>>(k);
    return 1;
}
#endif

#endif
