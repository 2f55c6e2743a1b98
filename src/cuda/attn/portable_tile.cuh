/* Per-work-item geometry shared by the loads, the mask and the epilogue.
 *
 * Tile row r (0..BM-1, BM <= 128) of a work item is query token q_tok0 + r / pack of
 * head head0 + r % pack (attn_internal.h). The planner advances q_tok0 by
 * tile_m / pack tokens, so when pack does not divide BM the last
 * BM % pack rows repeat tokens of the next tile: they are computed like the
 * others but count as invalid, as do rows past q_len, so that no row is ever
 * written by two CTAs. */
#ifndef SW_CUDA_PORTABLE_TILE_CUH
#define SW_CUDA_PORTABLE_TILE_CUH

#include "attn/attn_internal.h"

namespace sw_portable {

/* The scheduler's counter after a CTA's last claim, `past` (its first index
 * past the list). Every CTA claims until it gets such an index, exactly
 * once, so a run makes num_work + gridDim.x claims and the CTA that made the
 * last of them resets the counter: the workspace is left as the upload found
 * it, and the same plan runs again on it without an upload (prefill.c,
 * workspace_tag). Called once, after the claim loop (no register in it). */
__device__ __forceinline__ void reset_counter_after(int32_t *counter, int past, int num_work)
{
    if (past == num_work + (int)gridDim.x - 1)
        atomicExch(counter, 0);
}

struct item_geom {
    int q_start, q_len, kv_start, kv_len;
    int q_tok0, head0, pack, kvh;
    int rows_valid;  /* rows [0, rows_valid) map to distinct (token, head) */
    int magic;       /* r / pack == (r * magic) >> 16 for r < 128: no divide per row */
    int n_tiles;     /* K/V tiles holding any key visible to a valid row */
    int n_unmasked;  /* tiles [0, n_unmasked) are visible to every row */

    template <int BM, int BN, bool CAUSAL>
    static __device__ __forceinline__ item_geom of(const sw_cuda_prefill_args &a, int item)
    {
        item_geom g;
        g.set<BM, BN, CAUSAL>(a, item);
        return g;
    }

    template <int BM, int BN, bool CAUSAL>
    __device__ __forceinline__ void set(const sw_cuda_prefill_args &a, int item)
    {
        const sw_work_item w = a.work[item];
        const sw_req_info rq = a.reqs[w.req];
        q_start = rq.q_start;
        q_len = rq.q_len;
        kv_start = rq.kv_start;
        kv_len = rq.kv_len;
        q_tok0 = w.q_tok0;
        head0 = w.head0;
        pack = w.pack;
        kvh = head0 / (a.num_qo_heads / a.num_kv_heads);
        const int toks = BM / pack;
        magic = (65536 + pack - 1) / pack;
        rows_valid = toks * pack;
        int kv_end = kv_len, kv_all = kv_len;
        if (CAUSAL) {
            const int off = kv_len - q_len;
            const int tok_hi = min(q_tok0 + toks - 1, q_len - 1);
            kv_end = max(0, min(kv_len, tok_hi + 1 + off));
            kv_all = max(0, min(kv_len, q_tok0 + 1 + off));
        }
        n_tiles = (kv_end + BN - 1) / BN;
        n_unmasked = kv_all / BN;
    }

    /* Token (relative to the request) and head of tile row r. */
    /* Exact while r * pack < 2^16 (rows < 256 -- the Hopper d64 items have
     * 192 -- and pack <= 256): ceil(2^16 / pack) overshoots r / pack by less
     * than r / 2^16 < 1 / pack. */
    __device__ __forceinline__ int tok_of(int r) const { return q_tok0 + ((r * magic) >> 16); }
    __device__ __forceinline__ int head_of(int r) const
    {
        return head0 + r - ((r * magic) >> 16) * pack;
    }
    __device__ __forceinline__ bool row_valid(int r) const
    {
        return r < rows_valid && tok_of(r) < q_len;
    }
};

} // namespace sw_portable

#endif
