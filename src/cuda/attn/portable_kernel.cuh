/* The portable prefill kernel: a persistent CTA that claims work items in
 * list order (the planner sorts them longest first) until the list runs
 * out, so one launch covers the whole ragged batch and the long causal
 * tiles start first instead of forming the tail.
 *
 * Only the instantiation units (prefill_portable_d*.cu) include this file. */
#ifndef SW_CUDA_PORTABLE_KERNEL_CUH
#define SW_CUDA_PORTABLE_KERNEL_CUH

#include "portable_epilogue.cuh"
#include "portable_launch.h"
#include "portable_mainloop.cuh"

namespace sw_portable {

template <int D, class T, bool CAUSAL>
__global__ void __launch_bounds__(traits<D>::NT, traits<D>::MIN_CTAS)
    prefill_kernel(const sw_cuda_prefill_args a, int kv_mode)
{
    using TR = traits<D>;
    extern __shared__ __align__(128) unsigned char smem[];
    /* Two slots so that thread 0 can publish item i+1 while slow threads
     * may still be reading item i's slot (no second barrier per item). Each
     * slot is written once per item it carries, by thread 0: item i+1 goes
     * into the slot that item i-1 used, either by the mainloop (after its
     * last PV, so that the next Q can be requested during the epilogue) or,
     * when the mainloop did not publish it, after item i's epilogue. Every
     * reader of item i-1's slot passed item i's top barrier before either
     * write. (Writing the slot again at the loop's top, as this loop once
     * did, raced with the mainloop's readers of it: racecheck reported it;
     * it wrote the same value, but a race is a race.) */
    __shared__ int s_item[2];
    __shared__ int s_lim[TR::BM];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t sQ = smem_u32(smem);
    const uint32_t sK = sQ + TR::Q_BYTES;
    const bool shared_kv = TR::MAY_SHARE_KV && kv_mode == SW_KV_SHARED;
    const uint32_t sV = shared_kv ? sK : sK + TR::KV_BYTES;
    const float scale_log2 = a.sm_scale * 1.4426950408889634f;
    lane_addrs la;
    la.template init<TR>(warp, lane);

    /* Thread 0 claims the next item as soon as the current one is known;
     * the atomic's round trip hides behind a whole item of work. */
    int next = 0;
    if (tid == 0) {
        next = atomicAdd(a.counter, 1);
        s_item[0] = next;
    }
    bool q_ready = false; /* this item's Q rows already requested */
    for (int slot = 0;; slot ^= 1) {
        __syncthreads(); /* publishes s_item[slot]; the previous item is done with all smem */
        const int item = s_item[slot];
        if (item >= a.num_work) {
            if (tid == 0)
                reset_counter_after(a.counter, item, a.num_work);
            break;
        }
        if (tid == 0)
            next = atomicAdd(a.counter, 1);

        item_geom g = item_geom::of<TR::BM, TR::BN, CAUSAL>(a, item);
        float o[TR::MT][TR::NO][4];
        softmax_state<TR::MT> sm;
        const int ml = mainloop<TR, T, CAUSAL>(a, g, o, sm, sQ, sK, sV, shared_kv, scale_log2,
                                               la, s_lim, &s_item[slot ^ 1], next, q_ready, tid);
        q_ready = (ml & SW_ML_Q_READY) != 0;
        /* Reloaded (item index from smem, geometry from L1) rather than kept
         * live across the K/V loop, where the d128 kernel is at 255
         * registers. The loop's barriers make the compiler re-read. */
        g = item_geom::of<TR::BM, TR::BN, CAUSAL>(a, s_item[slot]);
        epilogue<TR, T>(a, g, o, sm, smem + (q_ready ? TR::Q_BYTES : 0), scale_log2, warp,
                        lane);
        if (tid == 0 && !(ml & SW_ML_PUBLISHED))
            s_item[slot ^ 1] = next;
    }
}

} // namespace sw_portable

/* Fills the host handle of head_dim D's kernel for (dtype, causal); 0 when the
 * dtype is not compiled. The instantiation units are one call each. */
template <int D> int portable_describe(sw_dtype dtype, int causal, sw_portable_kernel *k)
{
    using namespace sw_portable;
    using TR = traits<D>;
    if (dtype == SW_DTYPE_BF16)
        k->fn = causal ? (const void *)prefill_kernel<D, bf16_t, true>
                       : (const void *)prefill_kernel<D, bf16_t, false>;
    else if (dtype == SW_DTYPE_F16)
        k->fn = causal ? (const void *)prefill_kernel<D, f16_t, true>
                       : (const void *)prefill_kernel<D, f16_t, false>;
    else
        return 0;
    k->threads = TR::NT;
    k->tile_m = TR::BM;
    for (int m = 0; m < SW_KV_MODES; ++m)
        k->smem[m] = TR::smem_bytes(m);
    return 1;
}

#endif
