/* Which keys a query row may see, and masking of one S tile.
 *
 * A row's visibility is a single bound: key j is visible iff j < limit, with
 * limit = kv_len (not causal) or min(kv_len, token + 1 + kv_len - q_len)
 * (causal, bottom-right aligned), clamped at 0. The mainloop only calls
 * mask_tile on tiles that straddle some row's bound (the diagonal tiles and
 * the ragged last tile); every other tile is fully visible to every row and
 * skips the compares. */
#ifndef SW_CUDA_PORTABLE_MASK_CUH
#define SW_CUDA_PORTABLE_MASK_CUH

namespace sw_portable {

template <bool CAUSAL>
__device__ __forceinline__ int row_key_limit(int tok, int q_len, int kv_len)
{
    if (!CAUSAL)
        return kv_len;
    int lim = tok + 1 + (kv_len - q_len);
    return lim < 0 ? 0 : (lim > kv_len ? kv_len : lim);
}

/* s[mt][nt][c]: this thread's scores, rows (mt, c / 2), key n0 + 8 nt + 2t +
 * (c & 1). Masked scores become -inf so that exp2 maps them to exactly 0. */
template <int MT, int NS>
__device__ __forceinline__ void mask_tile(float (&s)[MT][NS][4], int n0, const int (&lim)[MT][2],
                                          int lane)
{
    const int k0 = n0 + 2 * (lane & 3);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NS; ++nt)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int key = k0 + nt * 8 + (c & 1);
                if (key >= lim[mt][c >> 1])
                    s[mt][nt][c] = -INFINITY;
            }
}

} // namespace sw_portable

#endif
