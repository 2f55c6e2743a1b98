/* Writes one work item's result: O normalised and rounded to 16 bits, and
 * the optional LSE.
 *
 * The accumulator layout gives each thread 4-byte pieces of 8 rows per
 * instruction. Stored straight to global memory that is 4x the store
 * instructions of 16-byte stores, which measured 1-6% slower at d256
 * (docs/perf/prefill.md, v2). So each warp stages its own rows in shared
 * memory (`stage`: the warp's rows of the Q buffer, which only this warp
 * reads, or of the K/V buffers once the whole CTA is past its last PV) and
 * writes whole 16-byte chunks, a row's chunks contiguous across lanes. Rows
 * are addressed one by one because GQA packing interleaves heads; invalid
 * rows (past q_len, or duplicates when pack does not divide the tile) are
 * not written. */
#ifndef SW_CUDA_PORTABLE_EPILOGUE_CUH
#define SW_CUDA_PORTABLE_EPILOGUE_CUH

#include "mma_utils.cuh"
#include "portable_mainloop.cuh"
#include "portable_softmax.cuh"
#include "portable_tile.cuh"

namespace sw_portable {

template <class TR, class T>
__device__ __forceinline__ void epilogue(const sw_cuda_prefill_args &a, const item_geom &g,
                                         const float (&o)[TR::MT][TR::NO][4],
                                         const softmax_state<TR::MT> &sm, unsigned char *stage,
                                         float scale_log2, int warp, int lane)
{
    float inv[TR::MT][2], lse[TR::MT][2];
    sm.finalize(inv, lse, scale_log2);

    __syncwarp(); /* all lanes past their last ldmatrix of these rows */
#pragma unroll
    for (int mt = 0; mt < TR::MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = warp * TR::RPW + mt * 16 + h * 8 + (lane >> 2);
            unsigned char *row = stage + 4 * (lane & 3);
#pragma unroll
            for (int nt = 0; nt < TR::NO; ++nt)
                *(uint32_t *)(row + smem_at<TR>(r, nt)) =
                    T::pack(o[mt][nt][2 * h] * inv[mt][h], o[mt][nt][2 * h + 1] * inv[mt][h]);
        }
    __syncwarp();

    char *out = (char *)a.o;
    const int c = lane % TR::CPR;
#pragma unroll
    for (int i = 0; i < TR::Q_LOADS; ++i) {
        const int r = warp * TR::RPW + lane / TR::CPR + i * (32 / TR::CPR);
        const uint4 v = *(const uint4 *)(stage + smem_at<TR>(r, c));
        if (g.row_valid(r))
            *(uint4 *)(out + ((int64_t)(g.q_start + g.tok_of(r)) * a.o_stride +
                              (int64_t)g.head_of(r) * TR::HEAD_DIM + c * 8) * 2) = v;
    }

    if (a.lse != nullptr && (lane & 3) == 0) {
#pragma unroll
        for (int mt = 0; mt < TR::MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = warp * TR::RPW + mt * 16 + h * 8 + (lane >> 2);
                if (g.row_valid(r))
                    a.lse[(int64_t)(g.q_start + g.tok_of(r)) * a.num_qo_heads + g.head_of(r)] =
                        lse[mt][h];
            }
    }
}

} // namespace sw_portable

#endif
