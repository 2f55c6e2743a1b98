/* Host-side handle on the compiled portable kernels: each instantiation unit
 * (prefill_portable_d64/128/256.cu) exposes its four kernels (dtype x
 * causal) as plain function pointers, and prefill_portable.cu does all the
 * attribute, occupancy and launch work in one place. */
#ifndef SW_CUDA_PORTABLE_LAUNCH_H
#define SW_CUDA_PORTABLE_LAUNCH_H

#include "attn/attn_internal.h"

/* K/V buffering of the mainloop, chosen per device from its smem limit
 * (the kernel argument `kv_mode`). */
enum {
    SW_KV_SPLIT = 0,  /* one K and one V buffer (FlashAttention-2's schedule) */
    SW_KV_SHARED = 1, /* K and V take turns in one buffer (d256 below 97 KB) */
    SW_KV_MODES = 2
};

typedef struct sw_portable_kernel {
    const void *fn;          /* __global__ void (sw_cuda_prefill_args, int kv_mode) */
    int threads;             /* block size */
    int tile_m;              /* Q tile rows (the planner's tile_m) */
    int smem[SW_KV_MODES];   /* dynamic smem per mode; 0 = mode not compiled in */
} sw_portable_kernel;

/* Fills *k for (dtype, causal); returns 0 when the dtype is not compiled. */
int sw_portable_kernel_d64(sw_dtype dtype, int causal, sw_portable_kernel *k);
int sw_portable_kernel_d128(sw_dtype dtype, int causal, sw_portable_kernel *k);
int sw_portable_kernel_d256(sw_dtype dtype, int causal, sw_portable_kernel *k);

#endif
