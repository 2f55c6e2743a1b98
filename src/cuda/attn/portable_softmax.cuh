/* Online softmax over the K/V tiles of one Q tile, in fp32.
 *
 * Each thread keeps, for each of its rows, the running max m (raw score
 * units) and a partial sum l over the columns it holds; the four threads of
 * a quad that share a row agree on m (quad shuffle) but add their partial l
 * only once, in finalize, since rescaling commutes with the sum.
 *
 * exp(scale * (s - m)) is computed as ex2(s * scale_log2 - m * scale_log2):
 * log2(e) is folded into the scale so each probability is one FFMA + one
 * MUFU.EX2. A row whose max is still -inf (no visible key yet: causal rows
 * above the diagonal, kv_len = 0) uses 0 as its offset, so its masked
 * scores give ex2(-inf) = 0 and the rescale factor ex2(-inf - 0) = 0 instead
 * of NaN from (-inf) - (-inf). */
#ifndef SW_CUDA_PORTABLE_SOFTMAX_CUH
#define SW_CUDA_PORTABLE_SOFTMAX_CUH

#include "mma_utils.cuh"

namespace sw_portable {

template <int MT> struct softmax_state {
    float m[MT][2];
    float l[MT][2];

    __device__ __forceinline__ void init()
    {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                m[mt][h] = -INFINITY;
                l[mt][h] = 0.f;
            }
    }

    /* Folds one S tile in: rescales O and l by the change of max and turns
     * s into unnormalised probabilities (still fp32; packed by the PV
     * product). Every row's new max is computed first and the O rescale is
     * skipped when no row of the warp moved (the factor is then exactly 1):
     * a warp vote and a branch per tile against D/4 FMULs per row pair. */
    template <int NS, int NO>
    __device__ __forceinline__ void update(float (&s)[MT][NS][4], float (&o)[MT][NO][4],
                                           float scale_log2)
    {
        float off[MT][2], alpha[MT][2];
        bool moved = false;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float mx = m[mt][h];
#pragma unroll
                for (int nt = 0; nt < NS; ++nt)
                    mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
#if SW_MAX_SLACK
                /* the offset moves only when the max grows by more than 8
                 * in log2 units (P <= 2^8 otherwise, exact; l, O and the LSE
                 * share the offset): most tiles then skip the rescale
                 * (-inf - -inf is NaN: no growth) */
                if (!((mx - m[mt][h]) * scale_log2 > 8.f))
                    mx = m[mt][h];
#endif
                off[mt][h] = mx == -INFINITY ? 0.f : mx * scale_log2;
                alpha[mt][h] = fast_exp2(m[mt][h] * scale_log2 - off[mt][h]);
                moved |= mx != m[mt][h];
                m[mt][h] = mx;
            }
        /* ex2(0) is exactly 1: when no row of the warp has a new max the
         * rescale is an identity, and skipping it saves D/4 FMULs per row
         * pair (128 per thread per tile at d256). */
        if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NO; ++nt) {
                    o[mt][nt][0] *= alpha[mt][0];
                    o[mt][nt][1] *= alpha[mt][0];
                    o[mt][nt][2] *= alpha[mt][1];
                    o[mt][nt][3] *= alpha[mt][1];
                }
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float sum = l[mt][h] * alpha[mt][h];
#pragma unroll
                for (int nt = 0; nt < NS; ++nt) {
                    const float p0 = fast_exp2(fmaf(s[mt][nt][2 * h], scale_log2, -off[mt][h]));
                    const float p1 =
                        fast_exp2(fmaf(s[mt][nt][2 * h + 1], scale_log2, -off[mt][h]));
                    s[mt][nt][2 * h] = p0;
                    s[mt][nt][2 * h + 1] = p1;
                    sum += p0 + p1;
                }
                l[mt][h] = sum;
            }
    }

    /* Full row sums (quad reduction), the factor that normalises O (0 for a
     * row that saw no key: its O is already 0) and the natural-log LSE. */
    __device__ __forceinline__ void finalize(float (&inv)[MT][2], float (&lse)[MT][2],
                                             float scale_log2) const
    {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float sum = l[mt][h];
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                /* (a NaN sum is a row that saw a NaN score: NaN out and
                 * NaN LSE, not the empty row's zeros and -inf) */
                const bool any = sum != 0.f;
                inv[mt][h] = any ? 1.f / sum : 0.f;
                lse[mt][h] = any ? (m[mt][h] * scale_log2 + __log2f(sum)) * 0.69314718055994531f
                                 : -INFINITY;
            }
    }
};

} // namespace sw_portable

#endif
