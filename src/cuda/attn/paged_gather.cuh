/* The gather of paged K/V into dense rows by a warp: a key's row (the
 * gather kernel before the portable prefill kernel) and a piece of keys
 * (sw_cuda_gather_args: the Hopper prefill kernel's gatherer warps). */
#ifndef SW_CUDA_PAGED_GATHER_CUH
#define SW_CUDA_PAGED_GATHER_CUH

#include "attn/attn_internal.h"

#include <stdint.h>

namespace sw_gather {

/* One key's K and V rows from the pool (ks / vs: its token's place, heads
 * k_head / v_head elements apart) into dense rows kd / vd of per_key
 * 16-byte vectors (num_kv_heads << cpr_log2), 16 bytes a lane, UNR
 * vectors of K and of V in flight, all of them loaded before any store. */
template <int UNR>
__device__ __forceinline__ void copy_key(const char *ks, const char *vs, int64_t k_head,
                                         int64_t v_head, char *kd, char *vd, int per_key,
                                         int cpr_log2, int lane)
{
    for (int i0 = 0; i0 < per_key; i0 += 32 * UNR) {
        uint4 kx[UNR], vx[UNR];
#pragma unroll
        for (int u = 0; u < UNR; ++u) {
            const int i = i0 + u * 32 + lane;
            if (i < per_key) {
                const int h = i >> cpr_log2, c = i & ((1 << cpr_log2) - 1);
                kx[u] = __ldg((const uint4 *)(ks + h * k_head * 2) + c);
                vx[u] = __ldg((const uint4 *)(vs + h * v_head * 2) + c);
            }
        }
#pragma unroll
        for (int u = 0; u < UNR; ++u) {
            const int i = i0 + u * 32 + lane;
            if (i < per_key) {
                ((uint4 *)kd)[i] = kx[u];
                ((uint4 *)vd)[i] = vx[u];
            }
        }
    }
}

/* Bulk prefetch of `bytes` at `p` into L2 (sm_90+; a no-op before). */
__device__ __forceinline__ void prefetch_l2(const void *p, uint32_t bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

/* Byte offsets in the K and V pools of token tok of tile tl's request
 * (its pages from tl.pbase in the page list). */
__device__ __forceinline__ void key_offsets(const sw_cuda_gather_args &g, const sw_gather_tile &tl,
                                            int tok, int64_t *ko, int64_t *vo)
{
    const int pg = __ldg(g.page_indices + tl.pbase +
                         (g.ps_log2 >= 0 ? tok >> g.ps_log2 : tok / g.page_size));
    const int in_page = g.ps_log2 >= 0 ? tok & (g.page_size - 1) : tok % g.page_size;
    *ko = ((int64_t)pg * g.k_page + (int64_t)in_page * g.k_tok) * 2;
    *vo = ((int64_t)pg * g.v_page + (int64_t)in_page * g.v_tok) * 2;
}

/* Piece p of the list (tile p / ppt, its keys from (p mod ppt) x piece_keys)
 * by one warp: the keys' pages from one lookup a lane, every (key, head)
 * row of K and V asked of L2 at once (a bulk prefetch each: the copy
 * loop's loads then wait for L2, not for HBM, one round trip after
 * another), then each key row 16 bytes a lane, UNR vectors of K and of V
 * in flight (a gatherer has few registers). per_key is the row's 16-byte
 * vectors (num_kv_heads x D / 8 = num_kv_heads << CPR_LOG2). Returns the
 * tile. */
template <int UNR, int CPR_LOG2>
__device__ __forceinline__ int copy_piece(const sw_cuda_gather_args &g, int p, int ppt,
                                          int per_key, int lane)
{
    const int t = p / ppt, k0 = (p - t * ppt) * g.piece_keys;
    const sw_gather_tile tl = g.tiles[t];
    const int nk = min(g.piece_keys, tl.keys - k0);
    int64_t ko = 0, vo = 0;
    if (lane < nk)
        key_offsets(g, tl, tl.tok0 + k0 + lane, &ko, &vo);
    const int heads = per_key >> CPR_LOG2;
    for (int i0 = 0; i0 < g.piece_keys * heads * 2; i0 += 32) {
        const int i = i0 + lane, kk = min((i >> 1) / heads, max(nk - 1, 0));
        const int64_t kq = __shfl_sync(0xffffffffu, ko, kk), vq = __shfl_sync(0xffffffffu, vo, kk);
        if (i < nk * heads * 2) {
            const int h = (i >> 1) % heads;
            prefetch_l2(i & 1 ? (const char *)g.v_pool + vq + (int64_t)h * g.v_head * 2
                              : (const char *)g.k_pool + kq + (int64_t)h * g.k_head * 2,
                        (16u << CPR_LOG2));
        }
    }
    const int64_t row = (int64_t)per_key * 16;
    for (int kk = 0; kk < nk; ++kk) {
        const char *ks = (const char *)g.k_pool + __shfl_sync(0xffffffffu, ko, kk);
        const char *vs = (const char *)g.v_pool + __shfl_sync(0xffffffffu, vo, kk);
        const int64_t drow = (int64_t)(tl.row0 + k0 + kk) * row;
        copy_key<UNR>(ks, vs, g.k_head, g.v_head, (char *)g.k_dense + drow,
                      (char *)g.v_dense + drow, per_key, CPR_LOG2, lane);
    }
    return t;
}

} // namespace sw_gather

#endif
