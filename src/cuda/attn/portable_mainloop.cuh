/* The K/V loop of one work item: loads, S = Q K^T, mask, online softmax,
 * O += P V.
 *
 * Schedule (FlashAttention-2's): one K and one V buffer. At the top of tile j
 * K(j) has landed; V(j) is requested and lands while S = Q K(j)^T and the
 * softmax run; after the second barrier K(j-1) is requested and lands while
 * O += P V(j) runs. Tiles go from the last visible one down to 0, so the
 * only tiles that need masking (the causal diagonal and the ragged end of
 * the keys) come first and the rest run without compares.
 *
 * With shared_kv (d256 where the split buffers do not fit) V(j) goes into
 * the K buffer once every warp has finished reading K(j); the loads then
 * overlap only the softmax, which is the price of fitting in 64 KB.
 *
 * Across items (split mode): after the last PV the CTA already requests the
 * next item's Q rows (thread 0 claimed the item at the start of this one)
 * and the epilogue stages O in the then idle K/V buffers, so Q lands during
 * the epilogue instead of being waited for at the next item's start. */
#ifndef SW_CUDA_PORTABLE_MAINLOOP_CUH
#define SW_CUDA_PORTABLE_MAINLOOP_CUH

#include "mma_utils.cuh"
#include "portable_config.cuh"
#include "portable_mask.cuh"
#include "portable_softmax.cuh"
#include "portable_tile.cuh"

namespace sw_portable {

/* Shared-memory byte offset of 16-byte chunk `chunk` of tile row `row`. */
template <class TR> __device__ __forceinline__ uint32_t smem_at(int row, int chunk)
{
    return (uint32_t)(row * TR::PITCH) + (TR::PAD ? (uint32_t)(chunk << 4) : swz(row, chunk));
}

/* ldmatrix offset of k-step `step` (chunks 2 step, 2 step + 1) relative to a
 * lane base that already holds the lane's row and chunk bit. Padded rows:
 * an immediate. Swizzled rows: the XOR only touches the low three chunk
 * bits, so with y = (row & 7) ^ bit precomputed it is one of four lane
 * constants plus an immediate. */
template <class TR> __device__ __forceinline__ uint32_t step_off(int step, int y)
{
    if (TR::PAD)
        return (uint32_t)(step * 32);
    return (uint32_t)(((step >> 2) << 7) | ((((step & 3) << 1) ^ y) << 4));
}

/* This warp's rows of the Q tile (per-row addresses: GQA packing maps rows
 * to (token, head) pairs). Rows that map to no valid query are zero-filled so
 * they stay finite. */
template <class TR>
__device__ __forceinline__ void load_q_rows(const sw_cuda_prefill_args &a, const item_geom &g,
                                            uint32_t sQ, int warp, int lane)
{
    const char *q = (const char *)a.q;
    const int c = lane % TR::CPR;
#pragma unroll
    for (int i = 0; i < TR::Q_LOADS; ++i) {
        const int r = warp * TR::RPW + lane / TR::CPR + i * (32 / TR::CPR);
        const bool ok = g.row_valid(r);
        const char *src = q;
        if (ok)
            src = q + ((int64_t)(g.q_start + g.tok_of(r)) * a.q_stride +
                       (int64_t)g.head_of(r) * TR::HEAD_DIM + c * 8) * 2;
        cp_async16(sQ + smem_at<TR>(r, c), src, ok ? 16 : 0);
    }
}

/* One K or V tile (keys n0 .. n0 + BN - 1) by the whole CTA; keys past
 * kv_len are zero-filled. Each thread always copies the same KV_CPT 16-byte
 * column chunks (the first at byte offset `col` within the kv head's row) of
 * tile rows row0 + i * KV_ROW_STEP; `dst` already holds row0's smem offset.
 * The tensor base and stride come straight from the kernel parameters, so
 * they take no registers across the loop. */
template <class TR>
__device__ __forceinline__ void load_kv_tile(uint32_t dst, const void *base, int64_t stride,
                                             int kv_row0, int col, int n0, int row0, int kv_len)
{
    const char *src = (const char *)base + (int64_t)(kv_row0 + n0) * stride * 2 + col;
#pragma unroll
    for (int i = 0; i < TR::KV_LOADS; ++i) {
        const bool ok = n0 + row0 + i * TR::KV_ROW_STEP < kv_len;
        const char *p = ok ? src + (int64_t)i * TR::KV_ROW_STEP * stride * 2 : (const char *)base;
#pragma unroll
        for (int j = 0; j < TR::KV_CPT; ++j)
            cp_async16(dst + i * TR::KV_ROW_STEP * TR::PITCH + j * TR::KV_TPR * 16,
                       p + (ok ? j * TR::KV_TPR * 16 : 0), ok ? 16 : 0);
    }
}

/* Per-lane ldmatrix bases, fixed for the whole kernel. x4 loads: lane i
 * gives the row address of matrix i / 8. */
struct lane_addrs {
    uint32_t q;   /* A operand (Q): this warp's row lane & 15, chunk bit lane >> 4 */
    uint32_t v;   /* trans-B operand (V): key row lane & 15, chunk bit lane >> 4 */
    uint32_t k;   /* B operand (K): key row (lane & 7) + 8 (lane >> 4), chunk bit (lane >> 3) & 1 */
    int qv_y, k_y; /* swizzle phase ^ chunk bit (swizzled layout only) */

    template <class TR> __device__ __forceinline__ void init(int warp, int lane)
    {
        const int qv_bit = lane >> 4, k_bit = (lane >> 3) & 1;
        const int k_r = (lane & 7) + ((lane >> 4) << 3);
        q = (uint32_t)((warp * TR::RPW + (lane & 15)) * TR::PITCH);
        v = (uint32_t)((lane & 15) * TR::PITCH);
        k = (uint32_t)(k_r * TR::PITCH);
        if (TR::PAD) {
            q += qv_bit * 16;
            v += qv_bit * 16;
            k += k_bit * 16;
        }
        qv_y = (lane & 7) ^ qv_bit;
        k_y = (lane & 7) ^ k_bit;
    }
};

template <class TR>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[TR::MT][TR::HEAD_DIM / 16][4],
                                             uint32_t sQ, const lane_addrs &la)
{
#pragma unroll
    for (int mt = 0; mt < TR::MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < TR::HEAD_DIM / 16; ++kk)
            ldsm_x4(qf[mt][kk], sQ + la.q + mt * 16 * TR::PITCH + step_off<TR>(kk, la.qv_y));
}

/* S = Q K^T for this warp's rows and the BN keys of the K buffer. */
template <class TR, class T>
__device__ __forceinline__ void gemm_qk(float (&s)[TR::MT][TR::NS][4],
                                        const uint32_t (&qf)[TR::MT][TR::HEAD_DIM / 16][4],
                                        uint32_t sQ, uint32_t sK, const lane_addrs &la)
{
#pragma unroll
    for (int mt = 0; mt < TR::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < TR::NS; ++nt)
#pragma unroll
            for (int c = 0; c < 4; ++c)
                s[mt][nt][c] = 0.f;
#pragma unroll
    for (int kk = 0; kk < TR::HEAD_DIM / 16; ++kk) {
        uint32_t qa[TR::MT][4];
#pragma unroll
        for (int mt = 0; mt < TR::MT; ++mt) {
            if constexpr (TR::Q_IN_REGS) {
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    qa[mt][c] = qf[mt][kk][c];
            } else {
                ldsm_x4(qa[mt], sQ + la.q + mt * 16 * TR::PITCH + step_off<TR>(kk, la.qv_y));
            }
        }
#pragma unroll
        for (int np = 0; np < TR::NS / 2; ++np) {
            uint32_t kb[4];
            ldsm_x4(kb, sK + la.k + np * 16 * TR::PITCH + step_off<TR>(kk, la.k_y));
#pragma unroll
            for (int mt = 0; mt < TR::MT; ++mt) {
                T::mma(s[mt][2 * np], qa[mt], kb[0], kb[1]);
                T::mma(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
            }
        }
    }
}

/* O += P V. P (probabilities, fp32 in the S accumulators) is rounded to 16
 * bits in registers: the accumulator layout of two adjacent 8-key n-tiles is
 * exactly the A-fragment layout of one 16-key k-step, so P never goes
 * through shared memory. It is packed one k-step at a time (packing all of
 * it up front, before the barrier, made ptxas spill at d128). V is read with
 * ldmatrix.trans: it is stored key-major and the mma wants K x N
 * column-major. */
template <class TR, class T>
__device__ __forceinline__ void gemm_pv(float (&o)[TR::MT][TR::NO][4],
                                        const float (&s)[TR::MT][TR::NS][4], uint32_t sV,
                                        const lane_addrs &la)
{
#pragma unroll
    for (int kk = 0; kk < TR::BN / 16; ++kk) {
        uint32_t pa[TR::MT][4];
#pragma unroll
        for (int mt = 0; mt < TR::MT; ++mt) {
            pa[mt][0] = T::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pa[mt][1] = T::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pa[mt][2] = T::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pa[mt][3] = T::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < TR::HEAD_DIM / 16; ++dp) {
            uint32_t vb[4];
            ldsm_x4_trans(vb, sV + la.v + kk * 16 * TR::PITCH + step_off<TR>(dp, la.qv_y));
#pragma unroll
            for (int mt = 0; mt < TR::MT; ++mt) {
                T::mma(o[mt][2 * dp], pa[mt], vb[0], vb[1]);
                T::mma(o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
            }
        }
    }
}

/* What mainloop did beyond its item: published the next item's index in
 * *s_next (else the caller does, after the epilogue), requested the next
 * item's Q rows (then O must be staged in the K/V buffers, not in Q). */
enum { SW_ML_PUBLISHED = 1, SW_ML_Q_READY = 2 };

/* Runs all K/V tiles of one item for this warp's rows; leaves O unnormalised
 * in `o` and the softmax state in `sm`. Every thread of the CTA calls it with
 * the same item (it contains CTA barriers). `q_ready`: this item's Q rows
 * were requested by the previous item. `next`: the next item's index, valid
 * in thread 0 only. Returns SW_ML_* flags. */
template <class TR, class T, bool CAUSAL>
__device__ __forceinline__ int mainloop(const sw_cuda_prefill_args &a, const item_geom &g,
                                         float (&o)[TR::MT][TR::NO][4], softmax_state<TR::MT> &sm,
                                         uint32_t sQ, uint32_t sK, uint32_t sV, bool shared_kv,
                                         float scale_log2, const lane_addrs &la, int *s_lim,
                                         int *s_next, int next, bool q_ready, int tid)
{
    const int lane = tid & 31, warp = tid >> 5;
    /* The shared-buffer schedule exists only where a config may need it
     * (d256): compiling it into d64/d128 costs them registers. */
    if (!TR::MAY_SHARE_KV)
        shared_kv = false;
#pragma unroll
    for (int mt = 0; mt < TR::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < TR::NO; ++nt)
#pragma unroll
            for (int c = 0; c < 4; ++c)
                o[mt][nt][c] = 0.f;
    sm.init();
    if (g.n_tiles == 0)
        return 0;

    /* Key bound of every tile row, kept in shared memory rather than in four
     * registers per thread: only the few masked tiles read it, and the d128
     * kernel is at the 255-register limit. Published by the loop's first
     * barrier; the previous item's readers finished before the item barrier. */
    if (tid < TR::BM)
        s_lim[tid] = row_key_limit<CAUSAL>(g.tok_of(tid), g.q_len, g.kv_len);

    /* This thread's K/V copy slot: tile row row0 (+ multiples of
     * KV_ROW_STEP, same swizzle phase), chunk c (+ multiples of KV_TPR) of
     * the kv head's row. */
    const int c = tid % TR::KV_TPR, row0 = tid / TR::KV_TPR;
    const int kv_row0 = g.kv_start + row0;
    const int col = (g.kvh * TR::HEAD_DIM + c * 8) * 2;
    const uint32_t dst = smem_at<TR>(row0, c);
    const int kv_len = g.kv_len, n_unmasked = g.n_unmasked;

    if (!q_ready)
        load_q_rows<TR>(a, g, sQ, warp, lane);
    cp_async_commit();
    int j = g.n_tiles - 1;
    load_kv_tile<TR>(sK + dst, a.k, a.k_stride, kv_row0, col, j * TR::BN, row0, kv_len);
    cp_async_commit();

    uint32_t qf[TR::MT][TR::HEAD_DIM / 16][4];
    if constexpr (TR::Q_IN_REGS) {
        /* Each warp reads only the Q rows it loaded itself: a warp barrier
         * suffices. (A prefetched Q is in the oldest pending group too.) */
        cp_async_wait<1>();
        __syncwarp();
        load_q_frags<TR>(qf, sQ, la);
    }

    for (; j >= 0; --j) {
        const int n0 = j * TR::BN;
        float s[TR::MT][TR::NS][4];
        cp_async_wait<0>();
        __syncthreads(); /* K(j) visible to all; everyone is done with V(j+1) */
        if (!shared_kv) {
            load_kv_tile<TR>(sV + dst, a.v, a.v_stride, kv_row0, col, n0, row0, kv_len);
            cp_async_commit();
        }
        gemm_qk<TR, T>(s, qf, sQ, sK, la);
        if (shared_kv) {
            __syncthreads(); /* everyone is done with K(j) */
            load_kv_tile<TR>(sK + dst, a.v, a.v_stride, kv_row0, col, n0, row0, kv_len);
            cp_async_commit();
        }
        auto mask = [&]() {
            int lim[TR::MT][2];
#pragma unroll
            for (int mt = 0; mt < TR::MT; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    lim[mt][h] = s_lim[warp * TR::RPW + mt * 16 + h * 8 + (lane >> 2)];
            mask_tile<TR::MT, TR::NS>(s, n0, lim, lane);
        };
        if (j >= n_unmasked)
            mask();
        sm.template update<TR::NS, TR::NO>(s, o, scale_log2);
        cp_async_wait<0>();
        __syncthreads(); /* V(j) visible; everyone is done with K(j) */
        if (j > 0 && !shared_kv) {
            load_kv_tile<TR>(sK + dst, a.k, a.k_stride, kv_row0, col, n0 - TR::BN, row0,
                             kv_len);
            cp_async_commit();
        }
        gemm_pv<TR, T>(o, s, shared_kv ? sK : sV, la);
        if (j > 0 && shared_kv) {
            __syncthreads(); /* everyone is done with V(j) */
            load_kv_tile<TR>(sK + dst, a.k, a.k_stride, kv_row0, col, n0 - TR::BN, row0,
                             kv_len);
            cp_async_commit();
        }
    }
    if (shared_kv)
        return 0; /* the one K/V buffer cannot hold a BM-row O stage */
    if (tid == 0)
        *s_next = next;
    __syncthreads(); /* publishes *s_next; everyone is done with the K/V buffers */
    const int nxt = *s_next;
    if (nxt >= a.num_work)
        return SW_ML_PUBLISHED;
    const item_geom gn = item_geom::of<TR::BM, TR::BN, CAUSAL>(a, nxt);
    if (gn.n_tiles == 0)
        return SW_ML_PUBLISHED;
    load_q_rows<TR>(a, gn, sQ, warp, lane);
    cp_async_commit();
    return SW_ML_PUBLISHED | SW_ML_Q_READY;
}

} // namespace sw_portable

#endif
