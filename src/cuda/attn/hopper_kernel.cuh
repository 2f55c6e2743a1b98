/* The Hopper prefill kernel (sm_90a): warp-specialised, TMA-fed, wgmma.
 *
 * One CTA = 3 warpgroups (384 threads; d64: 4, 512), persistent over the planner's work
 * list (longest first, claimed through the same atomic counter as the
 * portable kernel):
 *   warpgroup 0  gives most of its registers back (setmaxnreg). One thread
 *                (the producer) claims items and issues every bulk tensor
 *                copy: the item's Q tile, then K and V tiles into two
 *                rings (K_ST and V_ST stages; K one tile ahead of V), each
 *                slot guarded by full/empty mbarriers.
 *                One warp (the V fixer) zeroes the rows of a request's last
 *                V tile that lie past its end, then releases the tile.
 *   warpgroups 1, 2  consumers (d64: 1, 2, 3): 64 query rows each of the
 *                item's 128-row (d64: 192-row) tile. Per K/V tile j: S_j = Q K_j^T (wgmma, both operands in
 *                shared memory) is issued together with the previous tile's
 *                O += P V (P straight from registers: the S accumulator
 *                layout is the A-operand layout; V read transposed by the
 *                instruction); the softmax of S_j then runs while P V still
 *                does. The two warpgroups take turns issuing (ping-pong), so
 *                one's softmax overlaps the other's products. The epilogue
 *                stores O / l (16 bytes per thread after a transpose across
 *                each quad) and the LSE straight from the accumulators.
 *   The producer publishes each item's geometry in shared memory (item_slot),
 *   so that an item starts without global loads.
 *
 * Shared-memory tiles are [chunk][row][64 elements], 128-byte rows in the
 * 128-byte swizzle that TMA writes and wgmma reads (one descriptor layout
 * for both), chunk = 64 columns of head_dim. Q rows are (token, head) pairs,
 * so a 4-D tensor map (element, head, token, chunk) loads GQA-packed tiles
 * (pack query heads of one kv head per token) with the same code as plain
 * ones.
 *
 * Tiles are visited from the last (the only ones that need the causal or
 * length mask) to the first, like FlashAttention-3. Keys past the request's
 * end are masked by select, and their V rows zeroed by the V fixer, so
 * values outside the request never reach the result. */
#ifndef SW_CUDA_HOPPER_KERNEL_CUH
#define SW_CUDA_HOPPER_KERNEL_CUH

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SW_HOPPER_ARCH 1
#endif

#include "attn/attn_internal.h"
#include "hopper_sync.cuh"
#include "hopper_wgmma.cuh"
#include "mma_utils.cuh"
#include "paged_gather.cuh"
#include "portable_tile.cuh"

#include <climits>

namespace sw_hopper {

using sw_portable::bf16_t;
using sw_portable::f16_t;
using sw_portable::item_geom;

template <class T> struct wg_type;
template <> struct wg_type<bf16_t> { using type = wg_bf16; };
template <> struct wg_type<f16_t> { using type = wg_f16; };

/* Keys per K/V tile of the wide d128 kernel (v10, non-causal batches of
 * long requests, sw_plan_wide_kv): the per-tile costs (waits, row max
 * shuffles, the O rescale) spread over more keys. 144 is the widest at which
 * S, both P buffers and O still fit in 240 registers (160 spills). Shared
 * memory: one Q buffer, 3 K and 2 V stages of 36 KB. */
#ifndef SW_HOPPER_WIDE_BN
#define SW_HOPPER_WIDE_BN 144
#endif
#ifndef SW_HOPPER_WIDE_KST
#define SW_HOPPER_WIDE_KST 3
#endif

/* PAGED: the kernel of paged K/V whose pieces the gatherers copy by bulk
 * copies (sw_cuda_gather_args.bulk): STAGE bytes of shared memory for them,
 * taken at d128 and d256 from one K stage. */
template <int D, bool WIDE = false, bool PAGED = false> struct traits {
    static_assert(!WIDE || D == 128, "wide K/V tiles exist for d128 only");
    static_assert(!(WIDE && PAGED), "no wide kernel over paged K/V");
    static constexpr int HEAD_DIM = D;
    static constexpr bool BULK_GATHER = PAGED;
    /* Consumer warpgroups, 64 query rows each. d64 (v9): three, as
     * FlashAttention-3 does there: a d64 step has half the products of d128
     * for the same softmax, and a third warpgroup gives the tensor cores
     * another one's products to run while two are in their softmax. Its
     * 96-key tiles keep S, two P buffers and O within 160 registers. */
    static constexpr int NCW = D == 64 ? 3 : 2;
    static constexpr int BM = 64 * NCW;            /* query rows per item */
    static constexpr int BN = D == 256 ? 64 : D == 64 ? 96 : WIDE ? SW_HOPPER_WIDE_BN : 128;
    /* K and V rings: K one tile ahead of V (the producer issues K_t before
     * V_{t-1}), one more K stage where shared memory allows, so the next
     * item's first K can land while this item's last tiles still compute. */
    /* the wide kernel: 3 K stages and one Q buffer (its batches are long
     * requests: one Q load per ~100 tiles), 1.5% ahead of 2 K + 2 Q on
     * 1x16k (SW_HOPPER_WIDE_KST=2, docs/perf/prefill.md v10) */
    static constexpr int K_ST = WIDE ? SW_HOPPER_WIDE_KST : PAGED && D != 64 ? 2 : 3;
    static constexpr int V_ST = D == 64 ? 3 : 2;
    static constexpr int CH = D / 64;              /* 128-byte chunks per row */
    static constexpr int Q_BYTES = BM * D * 2;
    static constexpr int KV_BYTES = BN * D * 2;
    static constexpr int Q_CHUNK = BM * 128;       /* bytes of one chunk column */
    static constexpr int KV_CHUNK = BN * 128;
    static constexpr int NT = 128 * (NCW + 1);
    static constexpr int CONSUMERS = 128 * NCW;
    /* barriers and the two item slots after the tiles; 1024 of alignment slack */
    static constexpr int BAR_BYTES = PAGED ? 512 : 384;
    /* the bulk gatherers' staging: two warps x (K, V) x SW_GATHER_BULK_BYTES,
     * 128-byte aligned after the barrier block */
    static constexpr int STAGE = PAGED ? 2 * 2 * SW_GATHER_BULK_BYTES : 0;
    /* Q double buffered where it fits (d64, d128): the next item's Q loads
     * while this one computes. */
    static constexpr int Q_BUFS = D == 256 || (WIDE && K_ST > 2) ? 1 : 2;
    /* setmaxnreg split (128 x P + CONSUMERS x C <= 64K): d256's 128 O
     * accumulators leave the consumers short at 232, so its producer warps
     * make do with 24 (a few spills in one thread, off the hot loop). */
    static constexpr int PRODUCER_REGS = D == 128 && !WIDE ? 40 : D == 64 ? 32 : 24;
    static constexpr int CONSUMER_REGS = D == 256 || WIDE ? 240 : D == 128 ? 232 : 160;
    static_assert(128 * PRODUCER_REGS + CONSUMERS * CONSUMER_REGS <= 65536, "register file");
    static constexpr int SMEM =
        1024 + Q_BUFS * Q_BYTES + (K_ST + V_ST) * KV_BYTES + BAR_BYTES + (PAGED ? 128 + STAGE : 0);
    static_assert(SMEM <= 227 * 1024, "over sm_90's 227 KB of shared memory per block");
    static_assert(K_ST <= 4 && V_ST <= 4, "the barrier block holds 4 stages per ring");
};

/* Barrier block layout (byte offsets from `bars`). */
enum {
    B_Q_FULL = 0,       /* 2 Q buffers each */
    B_Q_EMPTY = 16,
    B_SCHED_FULL = 32,  /* 2 slots */
    B_SCHED_EMPTY = 48, /* 2 slots */
    B_K_FULL = 64,      /* up to 4 stages each */
    B_K_EMPTY = 96,
    B_V_FULL = 128,
    B_V_EMPTY = 160,
    B_V_READY = 192,
    B_SLOTS = 256,      /* item_slot[2] */
    B_GATHER = 384      /* PAGED: the bulk gatherers' K and V barriers, 2 a warp */
};

/* A claimed item as the producer publishes it (slot n & 1 for the n-th item):
 * its index (>= num_work: no more work) and its geometry, so that the
 * consumers and the V fixer start an item without global loads or integer
 * divisions (those were ~2 dependent L2 round trips per item, in both
 * consumer warpgroups at once). */
struct item_slot {
    int item;
    int pad[3];
    item_geom g;
};
static_assert(sizeof(item_slot) == 64, "two slots fill B_SLOTS..B_SLOTS+128");
enum {
    BAR_TURN0 = 1, /* named barriers of the consumer turns: BAR_TURN0 + warpgroup */
    TURN_THREADS = 256 /* each turn barrier: the waiting and the passing warpgroup */
};

template <class TR, bool CAUSAL>
__device__ __forceinline__ void producer(const CUtensorMap *tm_q1, const CUtensorMap *tm_qg,
                                         const CUtensorMap *tm_k, const CUtensorMap *tm_v,
                                         const sw_cuda_prefill_args &a, uint32_t sQ,
                                         uint32_t sK, uint32_t sV, uint32_t bars,
                                         item_slot *slots)
{
    tma_prefetch_desc(tm_q1);
    tma_prefetch_desc(tm_qg);
    tma_prefetch_desc(tm_k);
    tma_prefetch_desc(tm_v);
    int it = 0;
    /* Paged K/V gathered by this kernel (gatherer): a tile's keys are read
     * once its counter shows every piece copied. Counters [ok[0], ok[1]]
     * are known complete (a request's tiles have consecutive counters in
     * the order the items visit them, so the range mostly grows); once
     * every gatherer has finished, or with dense K/V, the range is every
     * counter. The range lives in slot 0's padding, which only this thread
     * uses: in registers it made ptxas spill in this 40-register warp. */
    int *ok = &slots[0].pad[1];
    ok[0] = a.gather.num_tiles > 0 ? 1 : INT_MIN;
    ok[1] = a.gather.num_tiles > 0 ? 0 : INT_MAX;
    auto wait_tile = [&](int c) {
        if (c >= ok[0] && c <= ok[1])
            return;
        const int *done = a.gather.tile_done;
        for (;;) {
            const int d = relaxed_load(done + c), w = relaxed_load(done + a.gather.num_tiles);
            if (w >= 2 * (int)gridDim.x) {
                ok[0] = INT_MIN;
                ok[1] = INT_MAX;
                break;
            }
            if (d >= a.gather.tile_keys / a.gather.piece_keys) {
                if (c == ok[1] + 1)
                    ok[1] = c;
                else if (c == ok[0] - 1)
                    ok[0] = c;
                else
                    ok[0] = ok[1] = c;
                break;
            }
            __nanosleep(64);
        }
        fence_acquire_gpu();
        fence_proxy_async_global();
    };
    /* Item n: claimed, published with its geometry through slot n & 1, its
     * Q loaded into buffer n % Q_BUFS. With two Q buffers the producer runs
     * one item ahead: it claims item n + 1 and loads its Q right after item
     * n's first K tile (before: ahead of it, so the claim's atomic and the
     * geometry loads delayed the K that both consumers wait for at the item
     * boundary). */
    auto claim = [&](int n) -> int {
        const int item = atomicAdd(a.counter, 1);
        const int slot = n & 1;
        mbar_wait(bars + B_SCHED_EMPTY + 8 * slot, ((n >> 1) & 1) ^ 1);
        slots[slot].item = item;
        if (item < a.num_work) {
            const int tb = a.gather.num_tiles > 0 ? __ldg(a.gather.tile_base + a.work[item].req)
                                                  : 0;
            const item_geom g = item_geom::of<TR::BM, TR::BN, CAUSAL>(a, item);
            slots[slot].g = g;
            /* the counter of the request's tile j is pad[0] - j */
            slots[slot].pad[0] = tb + (g.kv_len + TR::BN - 1) / TR::BN - 1;
        }
        mbar_arrive(bars + B_SCHED_FULL + 8 * slot);
        return item;
    };
    auto load_q = [&](int n) {
        const item_geom &g = slots[n & 1].g;
        const int qb = n % TR::Q_BUFS;
        /* the buffer's previous item must be done with its S products */
        mbar_wait(bars + B_Q_EMPTY + 8 * qb, ((n / TR::Q_BUFS) & 1) ^ 1);
        mbar_arrive_tx(bars + B_Q_FULL + 8 * qb, TR::Q_BYTES);
        tma_load_4d(sQ + qb * TR::Q_BYTES, g.pack > 1 ? tm_qg : tm_q1, bars + B_Q_FULL + 8 * qb,
                    0, g.head0, g.q_start + g.q_tok0, 0);
    };
    int item = claim(0);
    if (TR::Q_BUFS > 1 && item < a.num_work)
        load_q(0);
    for (int n = 0; item < a.num_work; ++n) {
        /* slot n & 1 holds this item until claim(n + 2), after this loop */
        const item_geom g = slots[n & 1].g;
        int next = a.num_work;
        bool claimed = false;
        auto claim_next = [&]() {
            next = claim(n + 1);
            if (TR::Q_BUFS > 1 && next < a.num_work)
                load_q(n + 1);
            claimed = true;
        };
        if (TR::Q_BUFS == 1)
            load_q(n);
        auto load_v = [&](int t, int row) {
            const int sv = t % TR::V_ST;
            mbar_wait(bars + B_V_EMPTY + 8 * sv, ((uint32_t)(t / TR::V_ST) & 1) ^ 1);
            mbar_arrive_tx(bars + B_V_FULL + 8 * sv, TR::KV_BYTES);
            tma_load_4d(sV + sv * TR::KV_BYTES, tm_v, bars + B_V_FULL + 8 * sv, 0, g.kvh, row, 0);
        };
        for (int j = g.n_tiles - 1; j >= 0; --j, ++it) {
            const int sk = it % TR::K_ST;
            const int row = g.kv_start + j * TR::BN;
            wait_tile(slots[n & 1].pad[0] - j);
            mbar_wait(bars + B_K_EMPTY + 8 * sk, ((uint32_t)(it / TR::K_ST) & 1) ^ 1);
            mbar_arrive_tx(bars + B_K_FULL + 8 * sk, TR::KV_BYTES);
            tma_load_4d(sK + sk * TR::KV_BYTES, tm_k, bars + B_K_FULL + 8 * sk, 0, g.kvh, row, 0);
            if (j < g.n_tiles - 1)
                load_v(it - 1, row + TR::BN); /* V of the previous (later-keyed) tile */
            else if (TR::Q_BUFS > 1)
                claim_next();
        }
        if (g.n_tiles > 0)
            load_v(it - 1, g.kv_start); /* V of the item's first keys */
        if (!claimed)
            claim_next(); /* one Q buffer, or an item without keys */
        item = next;
    }
    sw_portable::reset_counter_after(a.counter, item, a.num_work);
}

/* The gatherers (warps 2 and 3, idle otherwise) of a run over paged K/V
 * (sw_cuda_gather_args): each claims pieces in list order from a counter
 * (the one after the gatherers' count), so the pieces are copied about in
 * the order the items first read their tiles, and the gatherers of the
 * CTAs that run copy every piece whether or not the whole grid is
 * resident at once (a piece per CTA by index would leave a waiting
 * producer to a CTA that cannot start: a deadlock on a partitioned GPU).
 * The next claim is made before a piece is copied, so its round trip
 * overlaps the copy (copy_piece, UNR vectors of K and of V in flight in
 * the producer warpgroup's few registers). A piece is counted into its
 * tile's counter with a release once every lane's stores are fenced for
 * the async proxy (the producer's TMA reads them); each gatherer counts
 * itself done in the slot after the tiles. */
template <class TR>
__device__ __forceinline__ void gatherer(const sw_cuda_prefill_args &a, int lane)
{
    const sw_cuda_gather_args &g = a.gather;
    constexpr int UNR = TR::HEAD_DIM == 256 ? 1 : 2;
    constexpr int CPR_LOG2 = TR::HEAD_DIM == 64 ? 3 : TR::HEAD_DIM == 128 ? 4 : 5;
    const int per_key = a.num_kv_heads << CPR_LOG2;
    const int ppt = g.tile_keys / g.piece_keys, total = g.num_tiles * ppt;
    int *claims = g.tile_done + g.num_tiles + 1;
    int p = __shfl_sync(0xffffffffu, lane == 0 ? atomicAdd(claims, 1) : 0, 0);
    while (p < total) {
        const int next = lane == 0 ? atomicAdd(claims, 1) : 0;
        const int t = sw_gather::copy_piece<UNR, CPR_LOG2>(g, p, ppt, per_key, lane);
        fence_proxy_async_global();
        __syncwarp();
        if (lane == 0)
            release_add(g.tile_done + t, 1);
        p = __shfl_sync(0xffffffffu, next, 0);
    }
    __syncwarp();
    if (lane == 0)
        release_add(g.tile_done + g.num_tiles, 1);
}

/* The gatherers of a run whose pieces are bulk-copyable (gather.bulk: a
 * piece's K rows, and its V rows, contiguous in one page, at most
 * SW_GATHER_BULK_BYTES): lane 0 of each copies a piece's K and V through
 * its two staging slots of shared memory by bulk copies (global -> shared
 * on an mbarrier, then shared -> global in a bulk group), no registers
 * holding the rows. Claims as gatherer(). Its pieces overlap: the next
 * piece's loads go out before the previous piece's stores are waited for
 * and counted (a release after the async proxy's writes are complete and
 * fenced); the slots are reloaded only once those stores have read them.
 * `w` is the gatherer's index (0, 1), `stage` the staging base. */
template <class TR>
__device__ __forceinline__ void gatherer_bulk(const sw_cuda_prefill_args &a, int lane, int w,
                                              uint32_t stage, uint32_t bars)
{
    if (lane != 0)
        return;
    const sw_cuda_gather_args &g = a.gather;
    const int64_t row = (int64_t)a.num_kv_heads * TR::HEAD_DIM * 2;
    const int ppt = g.tile_keys / g.piece_keys, total = g.num_tiles * ppt;
    int *claims = g.tile_done + g.num_tiles + 1;
    const uint32_t sk = stage + (uint32_t)(w * 2 * SW_GATHER_BULK_BYTES);
    const uint32_t sv = sk + SW_GATHER_BULK_BYTES;
    const uint32_t bk = bars + B_GATHER + 16 * w, bv = bk + 8;
    uint32_t ph = 0;
    int prev = -1; /* the tile of the piece whose stores are in flight */
    auto count_prev = [&]() {
        if (prev < 0)
            return;
        bulk_wait<0>();
        fence_proxy_async_global();
        release_add(g.tile_done + prev, 1);
        prev = -1;
    };
    int p = atomicAdd(claims, 1);
    while (p < total) {
        const int next = atomicAdd(claims, 1);
        const int t = p / ppt, k0 = (p - t * ppt) * g.piece_keys;
        const sw_gather_tile tl = g.tiles[t];
        const int nk = min(g.piece_keys, tl.keys - k0);
        if (nk <= 0) {
            release_add(g.tile_done + t, 1); /* past the tile's keys: nothing to copy */
        } else {
            int64_t ko, vo;
            sw_gather::key_offsets(g, tl, tl.tok0 + k0, &ko, &vo);
            const char *ks = (const char *)g.k_pool + ko, *vs = (const char *)g.v_pool + vo;
            const int64_t drow = (int64_t)(tl.row0 + k0) * row;
            const uint32_t bytes = (uint32_t)(nk * row);
            bulk_wait_read<0>(); /* the previous piece's stores are done with the slots */
            mbar_arrive_tx(bk, bytes);
            bulk_g2s(sk, ks, bytes, bk);
            mbar_arrive_tx(bv, bytes);
            bulk_g2s(sv, vs, bytes, bv);
            count_prev();
            mbar_wait(bk, ph);
            bulk_s2g((char *)g.k_dense + drow, sk, bytes);
            mbar_wait(bv, ph);
            bulk_s2g((char *)g.v_dense + drow, sv, bytes);
            bulk_commit();
            ph ^= 1;
            prev = t;
        }
        p = next;
    }
    count_prev();
    release_add(g.tile_done + g.num_tiles, 1);
}

/* The V fixer (one warp): follows the same tiles as the producer; once a V
 * tile has landed, zeroes its rows past the request's end (a request's last,
 * partial tile: TMA has loaded whatever follows it, the next request's rows
 * or padding) and then releases the tile to the consumers through V_READY.
 * So values outside a request never reach its result, not even as
 * 0 * inf = NaN, and the consumers never stop for it. A row is one 128-byte
 * line per chunk whatever the swizzle. */
template <class TR, bool CAUSAL>
__device__ __forceinline__ void v_fixer(const sw_cuda_prefill_args &a, uint32_t bars,
                                        item_slot *slots, unsigned char *sV_generic,
                                        int lane)
{
    int it = 0;
    for (int n = 0;; ++n) {
        const int slot = n & 1;
        mbar_wait(bars + B_SCHED_FULL + 8 * slot, (n >> 1) & 1);
        const int item = slots[slot].item;
        const item_geom g = slots[slot].g;
        __syncwarp();
        if (lane == 0)
            mbar_arrive(bars + B_SCHED_EMPTY + 8 * slot);
        if (item >= a.num_work)
            break;
        for (int j = g.n_tiles - 1; j >= 0; --j, ++it) {
            const int st = it % TR::V_ST;
            const uint32_t ph = (uint32_t)(it / TR::V_ST) & 1;
            mbar_wait(bars + B_V_FULL + 8 * st, ph);
            const int rem = g.kv_len - j * TR::BN;
            if (rem < TR::BN) {
                unsigned char *vt = sV_generic + st * TR::KV_BYTES;
                const int tail = TR::BN - rem;
                for (int i = lane; i < tail * TR::CH * 8; i += 32) {
                    const int line = i >> 3, piece = i & 7;
                    const int c = line / tail, rr = rem + line % tail;
                    *(uint4 *)(vt + c * TR::KV_CHUNK + rr * 128 + piece * 16) =
                        make_uint4(0, 0, 0, 0);
                }
                fence_proxy_async();
            }
            __syncwarp();
            if (lane == 0)
                mbar_arrive(bars + B_V_READY + 8 * st);
        }
    }
}

/* Visible keys of tile row r (causal: bottom-right aligned). */
template <bool CAUSAL>
__device__ __forceinline__ int row_limit(const item_geom &g, int r)
{
    if (!CAUSAL)
        return g.kv_len;
    const int v = g.tok_of(r) + 1 + g.kv_len - g.q_len;
    return max(0, min(g.kv_len, v));
}

/* Per-thread softmax state of its two rows and the scores -> P step. */
template <int BN> struct row_softmax {
    /* v12's max slack (SW_MAX_SLACK) in every kernel but the wide
     * non-causal d128 one (BN = SW_HOPPER_WIDE_BN): there it measured 3%
     * slower (1x16k non-causal 642-644 vs 656-663 TFLOP/s, H200,
     * docs/perf/prefill.md), so that kernel keeps v10's exact-max softmax. */
    static constexpr bool SLACK = SW_MAX_SLACK && BN != SW_HOPPER_WIDE_BN;
    /* v14 (SW_NOMAX): in the causal kernels, steps after an item's first
     * try the scores against the rows' current offsets without their max
     * (update_nomax; in the non-causal ones it made ptxas spill). */
    static constexpr bool NOMAX = SW_NOMAX && SLACK;
    /* update_nomax's bound on a row's sum over the tile: below it no P
     * exceeds BN x 2^8 (< FP16's 65504), and above it some P exceeds
     * 2^8, i.e. the max grew by more than v12's slack (8) anyway. */
    static constexpr float SUM_LIM = 256.f * BN;
    static_assert(!NOMAX || 256 * BN < 65504, "P bound must fit FP16");
    float m[2], l[2];

    __device__ __forceinline__ void init()
    {
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.f;
    }

    /* Masks tile j (keys j*BN ...) against the rows' limits. */
    __device__ __forceinline__ static void mask(float (&s)[BN / 2], int j, int t4,
                                                const int (&lim)[2])
    {
        const int kv0 = j * BN + 2 * t4;
#pragma unroll
        for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    if (kv0 + nb * 8 + e >= lim[h])
                        s[4 * nb + 2 * h + e] = -INFINITY;
    }

    /* s -> unnormalised probabilities in place; returns the factors that
     * rescale the rows' accumulators. A row with no visible key yet keeps
     * max -inf and uses 0 as its offset (exp2(-inf) = 0, no NaN). */
    __device__ __forceinline__ void update(float (&s)[BN / 2], float scale_log2, float (&corr)[2])
    {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = -INFINITY;
#pragma unroll
            for (int nb = 0; nb < BN / 8; ++nb)
                mx = fmaxf(mx, fmaxf(s[4 * nb + 2 * h], s[4 * nb + 2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float off;
            if constexpr (SLACK) {
                /* v12: the row's offset moves only when its max grows by
                 * more than 8 (log2 units); otherwise P <= 2^8 (v14's
                 * update_nomax steps allow up to 256 x BN), exact in
                 * BF16/FP16 and in the fp32 sums alike, and O and l keep
                 * their scale (corr = 1), so most steps rescale nothing
                 * (rescale() skips a warp whose rows all have corr 1) and
                 * the P V product is issued right after S. The result is
                 * the same softmax: every term and the LSE use the same
                 * offset. */
                const float m_cand = fmaxf(m[h], mx * scale_log2);
                const bool grow = m_cand > m[h] + 8.f; /* m = -inf: any finite max grows */
                const float m_new = grow ? m_cand : m[h];
                off = m_new == -INFINITY ? 0.f : m_new;
                corr[h] = grow ? sw_portable::fast_exp2(m[h] - off) : 1.f;
                m[h] = m_new;
            } else {
                const float m_new = fmaxf(m[h], mx * scale_log2);
                off = m_new == -INFINITY ? 0.f : m_new;
                corr[h] = sw_portable::fast_exp2(m[h] - off);
                m[h] = m_new;
            }
            float sum = 0.f;
#pragma unroll
            for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float &x = s[4 * nb + 2 * h + e];
                    x = sw_portable::fast_exp2(x * scale_log2 - off);
                    sum += x;
                }
            l[h] = l[h] * corr[h] + sum;
        }
    }

    /* v14: P straight from the scores at the rows' current offsets m,
     * into pn, without the tile's max (a step's one FMNMX per score gone;
     * the d64 kernel is issue-bound, docs/perf/prefill.md). Kept when every
     * row of the warp sums to at most SUM_LIM (so no P overflows, and the
     * same offsets serve: corr = 1); otherwise the caller runs update()
     * on the untouched scores and packs again. A row with no key seen yet
     * (m = -inf) sums to inf or NaN and so takes that path too. */
    template <class T>
    __device__ __forceinline__ bool update_nomax(const float (&s)[BN / 2], float scale_log2,
                                                 uint32_t (&pn)[BN / 16][4])
    {
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int h = q & 1; /* s[8 kk + 2 q + e] is row h's (pack_p's order) */
                const float x0 = sw_portable::fast_exp2(s[8 * kk + 2 * q] * scale_log2 - m[h]);
                const float x1 =
                    sw_portable::fast_exp2(s[8 * kk + 2 * q + 1] * scale_log2 - m[h]);
                sum[h] += x0;
                sum[h] += x1;
                pn[kk][q] = T::pack(x0, x1);
            }
        bool ok = true;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float t = sum[h] + __shfl_xor_sync(0xffffffffu, sum[h], 1);
            t += __shfl_xor_sync(0xffffffffu, t, 2);
            ok = ok && t <= SUM_LIM; /* false for NaN */
        }
        if (!__all_sync(0xffffffffu, ok))
            return false;
        l[0] += sum[0];
        l[1] += sum[1];
        return true;
    }
};

template <class T, int BN>
__device__ __forceinline__ void pack_p(const float (&s)[BN / 2], uint32_t (&pa)[BN / 16][4])
{
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
        for (int q = 0; q < 4; ++q)
            pa[kk][q] = T::pack(s[8 * kk + 2 * q], s[8 * kk + 2 * q + 1]);
}

template <int D, bool SLACK>
__device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&corr)[2])
{
    if constexpr (SLACK) {
        if (!__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f))
            return;
    }
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            o[4 * nb + 2 * h] *= corr[h];
            o[4 * nb + 2 * h + 1] *= corr[h];
        }
}

/* The consumer warpgroups take turns issuing their tensor-core work
 * (ping-pong, round robin): a warpgroup waits for its turn, issues its
 * products, and passes the turn to the next, then runs its softmax while
 * the others' products run. All do the same number of turns per item, so
 * the turns go round strictly (the last warpgroup hands warpgroup 0 its
 * first turn at the start, and warpgroup 0 takes one last turn at the end
 * to consume the final hand-off). */
template <int NCW> __device__ __forceinline__ void turn_wait(int cw)
{
    named_sync(BAR_TURN0 + cw, TURN_THREADS);
}
template <int NCW> __device__ __forceinline__ void turn_pass(int cw)
{
    const int next = cw + 1 == NCW ? 0 : cw + 1;
    asm volatile("bar.arrive %0, %1;" ::"r"(BAR_TURN0 + next), "n"((int)TURN_THREADS)
                 : "memory");
}

/* S = Q K^T for one warpgroup's 64 rows: head_dim / 16 instructions. */
template <class TR, class WS>
__device__ __forceinline__ void issue_s(float (&s)[TR::BN / 2], uint32_t qa, uint32_t k_tile)
{
#pragma unroll
    for (int c = 0; c < TR::CH; ++c)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            WS::ss(s, smem_desc(qa + c * TR::Q_CHUNK + kk * 32, 16, 1024),
                   smem_desc(k_tile + c * TR::KV_CHUNK + kk * 32, 16, 1024), (c | kk) != 0);
}

/* O += P V: BN / 16 instructions, V read transposed (MN-major: 64-column
 * chunks at the leading byte offset, 8-row groups at the stride offset). */
template <class TR, class WO>
__device__ __forceinline__ void issue_pv(float (&o)[TR::HEAD_DIM / 2],
                                         const uint32_t (&pa)[TR::BN / 16][4], uint32_t v_tile)
{
#pragma unroll
    for (int kk = 0; kk < TR::BN / 16; ++kk)
        WO::rs(o, pa[kk], smem_desc(v_tile + kk * 16 * 128, TR::KV_CHUNK, 1024), 1);
}

/* One K/V tile after the first: issue S_j and the previous tile's P V
 * (P in `pa`), softmax S_j while P V runs, then P_j into `pn`. P is double
 * buffered so that writing P_j never touches the registers the in-flight
 * P V reads: otherwise ptxas hoists the P V wait above the softmax. */
template <class TR, class T, bool MASK, bool CAUSAL>
__device__ __forceinline__ void step(int j, int it, float (&s)[TR::BN / 2],
                                     float (&o)[TR::HEAD_DIM / 2],
                                     const uint32_t (&pa)[TR::BN / 16][4],
                                     uint32_t (&pn)[TR::BN / 16][4], float (&corr)[2],
                                     row_softmax<TR::BN> &sm, const int (&lim)[2], uint32_t qa,
                                     uint32_t sK, uint32_t sV, uint32_t bars, int cw, int t4,
                                     float scale_log2, bool pp)
{
    using WS = wgmma<TR::BN, typename wg_type<T>::type>;
    using WO = wgmma<TR::HEAD_DIM, typename wg_type<T>::type>;
    const int st = it % TR::K_ST;       /* this tile's K */
    const int pv = (it - 1) % TR::V_ST; /* the previous tile's V */
    mbar_wait(bars + B_K_FULL + 8 * st, (uint32_t)(it / TR::K_ST) & 1);
    mbar_wait(bars + B_V_READY + 8 * pv, (uint32_t)((it - 1) / TR::V_ST) & 1);
    if (pp)
        turn_wait<TR::NCW>(cw);
    reg_fence(s);
    wg_fence();
    issue_s<TR, WS>(s, qa, sK + st * TR::KV_BYTES);
    wg_commit();
    /* O to the previous tile's max, while S runs (FlashAttention-3's
     * order: after the P V wait only P's conversion is left, so ptxas has
     * no reason to hoist that wait above the softmax). */
    rescale<TR::HEAD_DIM, row_softmax<TR::BN>::SLACK>(o, corr);
    reg_fence(o);
    /* A fence per batch: ptxas then tracks S and P V as two pipeline
     * stages (one batch serialises every wgmma). */
    wg_fence();
    issue_pv<TR, WO>(o, pa, sV + pv * TR::KV_BYTES);
    wg_commit();
    if (pp)
        turn_pass<TR::NCW>(cw);
    wg_wait<1>();
    reg_fence(s);
    mbar_arrive(bars + B_K_EMPTY + 8 * st);
    if (MASK)
        row_softmax<TR::BN>::mask(s, j, t4, lim);
    bool done = false;
    if constexpr (row_softmax<TR::BN>::NOMAX && CAUSAL) {
        done = sm.template update_nomax<T>(s, scale_log2, pn);
        if (done)
            corr[0] = corr[1] = 1.f;
    }
    if (!done)
        sm.update(s, scale_log2, corr);
    reg_fence(s);
    reg_fence(corr);
    wg_wait<0>();
    reg_fence(o);
    mbar_arrive(bars + B_V_EMPTY + 8 * pv);
    if (!done)
        pack_p<T, TR::BN>(s, pn);
}

/* The epilogue: O / l rounded to T, and the LSE. Both rows' l sums first
 * (their shuffles would otherwise queue behind the first row's stores).
 * The accumulator layout gives each thread of a quad 2 columns of every
 * 8-column block; a 4x4 transpose across the quad (two shuffle steps)
 * gives each thread whole 8-column blocks, stored as 16 bytes: a quarter of
 * the store instructions, and every 32-byte sector written whole (the
 * 4-byte stores filled half a sector each and queued the warp behind them:
 * ~15% of the consumers' stall samples on 16x1k d128, docs/perf/prefill.md). */
__device__ __forceinline__ void quad_transpose(uint32_t (&v)[4], int t4)
{
    /* step 1 (xor 2): swap the off-diagonal 2x2 blocks */
#pragma unroll
    for (int b = 0; b < 2; ++b) {
        const uint32_t x = (t4 & 2) ? v[b] : v[2 + b];
        const uint32_t y = __shfl_xor_sync(0xffffffffu, x, 2);
        if (t4 & 2)
            v[b] = y;
        else
            v[2 + b] = y;
    }
    /* step 2 (xor 1): transpose inside the 2x2 blocks */
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        const uint32_t x = (t4 & 1) ? v[2 * c] : v[2 * c + 1];
        const uint32_t y = __shfl_xor_sync(0xffffffffu, x, 1);
        if (t4 & 1)
            v[2 * c] = y;
        else
            v[2 * c + 1] = y;
    }
}

template <class T, int D, int BN>
__device__ __forceinline__ void store_o(const sw_cuda_prefill_args &a, const item_geom &g,
                                        const float (&o)[D / 2], const row_softmax<BN> &sm,
                                        int r0, int t4)
{
    float lt[2] = {sm.l[0], sm.l[1]};
#pragma unroll
    for (int h = 0; h < 2; ++h)
        lt[h] += __shfl_xor_sync(0xffffffffu, lt[h], 1);
#pragma unroll
    for (int h = 0; h < 2; ++h)
        lt[h] += __shfl_xor_sync(0xffffffffu, lt[h], 2);
    char *out = (char *)a.o;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        /* (NaN sum: a row that saw a NaN score, NaN out; 0: no key) */
        const float inv = lt[h] != 0.f ? 1.f / lt[h] : 0.f;
        const int r = r0 + 8 * h;
        const bool valid = g.row_valid(r); /* the same for the 4 threads of a quad */
        const int64_t row = (int64_t)(g.q_start + g.tok_of(r));
        char *dst = out + (row * a.o_stride + (int64_t)g.head_of(r) * D) * 2;
#pragma unroll
        for (int grp = 0; grp < D / 32; ++grp) {
            uint32_t v[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int nb = 4 * grp + j;
                v[j] = T::pack(o[4 * nb + 2 * h] * inv, o[4 * nb + 2 * h + 1] * inv);
            }
            quad_transpose(v, t4);
            if (valid)
                *(uint4 *)(dst + (4 * grp + t4) * 16) = make_uint4(v[0], v[1], v[2], v[3]);
        }
        if (valid && a.lse != nullptr && t4 == 0)
            a.lse[row * a.num_qo_heads + g.head_of(r)] =
                lt[h] != 0.f ? (sm.m[h] + __log2f(lt[h])) * 0.6931471805599453f : -INFINITY;
    }
}

/* An item's first K/V tile (its last keys): waits for K and the turn,
 * issues S = Q K^T alone and passes the turn; the caller waits for it. */
template <class TR, class T>
__device__ __forceinline__ int first_s(int it, float (&s)[TR::BN / 2], uint32_t qa, uint32_t sK,
                                       uint32_t bars, int cw, bool pp)
{
    using WS = wgmma<TR::BN, typename wg_type<T>::type>;
    const int st = it % TR::K_ST;
    mbar_wait(bars + B_K_FULL + 8 * st, (uint32_t)(it / TR::K_ST) & 1);
    if (pp)
        turn_wait<TR::NCW>(cw);
    reg_fence(s);
    wg_fence();
    issue_s<TR, WS>(s, qa, sK + st * TR::KV_BYTES);
    wg_commit();
    if (pp)
        turn_pass<TR::NCW>(cw);
    return st;
}

/* The tiles after an item's first: S_j = Q K_j^T together with O +=
 * P_{j+1} V_{j+1}, the softmax of S_j while P V runs. Masked tiles
 * (crossing a row's limit) come first; two loops keep the mask out of the
 * unmasked body: a branch there splits the basic block and ptxas then
 * hoists the P V wait above the softmax. Returns which P buffer holds the
 * last tile's P (0: pa, 1: pb); `it` advances by the tiles done. */
template <class TR, class T, bool CAUSAL>
__device__ __forceinline__ int item_steps(const item_geom &g, int &it, float (&s)[TR::BN / 2],
                                          float (&o)[TR::HEAD_DIM / 2],
                                          uint32_t (&pa)[TR::BN / 16][4],
                                          uint32_t (&pb)[TR::BN / 16][4], float (&corr)[2],
                                          row_softmax<TR::BN> &sm, const int (&lim)[2],
                                          uint32_t qa, uint32_t sK, uint32_t sV, uint32_t bars,
                                          int cw, int t4, float scale_log2, bool pp)
{
    int j = g.n_tiles - 2, par = 0;
    for (; j >= 0 && j >= g.n_unmasked; --j, ++it, par ^= 1) {
        if (par)
            step<TR, T, true, CAUSAL>(j, it, s, o, pb, pa, corr, sm, lim, qa, sK, sV, bars, cw, t4,
                              scale_log2, pp);
        else
            step<TR, T, true, CAUSAL>(j, it, s, o, pa, pb, corr, sm, lim, qa, sK, sV, bars, cw, t4,
                              scale_log2, pp);
    }
    for (; j >= 0; --j, ++it, par ^= 1) {
        if (par)
            step<TR, T, false, CAUSAL>(j, it, s, o, pb, pa, corr, sm, lim, qa, sK, sV, bars, cw, t4,
                               scale_log2, pp);
        else
            step<TR, T, false, CAUSAL>(j, it, s, o, pa, pb, corr, sm, lim, qa, sK, sV, bars, cw, t4,
                               scale_log2, pp);
    }
    return par;
}

/* An item's last P V (its first keys), waited for; releases the V stage. */
template <class TR, class T>
__device__ __forceinline__ void last_pv(int it, float (&o)[TR::HEAD_DIM / 2],
                                        const uint32_t (&pa)[TR::BN / 16][4],
                                        const uint32_t (&pb)[TR::BN / 16][4], int par,
                                        const float (&corr)[2], uint32_t sV, uint32_t bars,
                                        int cw, bool pp)
{
    using WO = wgmma<TR::HEAD_DIM, typename wg_type<T>::type>;
    const int pv = (it - 1) % TR::V_ST;
    mbar_wait(bars + B_V_READY + 8 * pv, (uint32_t)((it - 1) / TR::V_ST) & 1);
    if (pp)
        turn_wait<TR::NCW>(cw);
    rescale<TR::HEAD_DIM, row_softmax<TR::BN>::SLACK>(o, corr);
    reg_fence(o);
    wg_fence();
    if (par)
        issue_pv<TR, WO>(o, pb, sV + pv * TR::KV_BYTES);
    else
        issue_pv<TR, WO>(o, pa, sV + pv * TR::KV_BYTES);
    wg_commit();
    if (pp)
        turn_pass<TR::NCW>(cw);
    wg_wait<0>();
    reg_fence(o);
    mbar_arrive(bars + B_V_EMPTY + 8 * pv);
}

/* Item n from the producer's slot (false: the end of the list). */
__device__ __forceinline__ bool next_item(const sw_cuda_prefill_args &a, int n, uint32_t bars,
                                          item_slot *slots, item_geom &g)
{
    const int slot = n & 1;
    mbar_wait(bars + B_SCHED_FULL + 8 * slot, (n >> 1) & 1);
    const int item = slots[slot].item;
    g = slots[slot].g;
    mbar_arrive(bars + B_SCHED_EMPTY + 8 * slot);
    return item < a.num_work;
}

/* After first_s: waits for the item's first S product, releases its K
 * stage (and the Q buffer qb when it is the only tile), and turns it into
 * P (always a masked tile); `it` moves to the next tile. */
template <class TR, class T>
__device__ __forceinline__ void first_softmax(const item_geom &g, int &it, int st, int qb,
                                              float (&s)[TR::BN / 2], row_softmax<TR::BN> &sm,
                                              float (&corr)[2], uint32_t (&pa)[TR::BN / 16][4],
                                              const int (&lim)[2], uint32_t bars, int t4,
                                              float scale_log2)
{
    wg_wait<0>();
    reg_fence(s);
    mbar_arrive(bars + B_K_EMPTY + 8 * st);
    if (g.n_tiles == 1)
        mbar_arrive(bars + B_Q_EMPTY + 8 * qb);
    row_softmax<TR::BN>::mask(s, g.n_tiles - 1, t4, lim);
    sm.update(s, scale_log2, corr);
    pack_p<T, TR::BN>(s, pa);
    ++it;
}

template <class TR, class T, bool CAUSAL>
__device__ __forceinline__ void consumer(const sw_cuda_prefill_args &a, uint32_t sQ,
                                         uint32_t sK, uint32_t sV, uint32_t bars,
                                         item_slot *slots)
{
    constexpr int BN = TR::BN, D = TR::HEAD_DIM;
    using WS = wgmma<BN, typename wg_type<T>::type>;
    using WO = wgmma<D, typename wg_type<T>::type>;
    const int ctid = threadIdx.x - 128; /* 0 .. CONSUMERS - 1 */
    const int cw = ctid >> 7;           /* consumer warpgroup */
    const int warp = (ctid >> 5) & 3, lane = ctid & 31;
    const int g8 = lane >> 2, t4 = lane & 3;
    const int r0 = cw * 64 + warp * 16 + g8; /* this thread's rows: r0, r0 + 8 */
    const float scale_log2 = a.sm_scale * 1.4426950408889634f;

    const bool pp = true; /* ping-pong on (a switch kept for development A/B builds) */
    if (pp && cw == TR::NCW - 1)
        turn_pass<TR::NCW>(cw); /* warpgroup 0 goes first */

    int it = 0;
    for (int n = 0;; ++n) {
        item_geom g;
        if (!next_item(a, n, bars, slots, g))
            break;
        const int lim[2] = {row_limit<CAUSAL>(g, r0), row_limit<CAUSAL>(g, r0 + 8)};

        float o[D / 2];
#pragma unroll
        for (int i = 0; i < D / 2; ++i)
            o[i] = 0.f;
        row_softmax<BN> sm;
        sm.init();
        float s[BN / 2];
        uint32_t pa[BN / 16][4], pb[BN / 16][4]; /* P, double buffered */
        float corr[2];

        const int qb = n % TR::Q_BUFS;
        const uint32_t qa = sQ + qb * TR::Q_BYTES + cw * 64 * 128; /* this warpgroup's rows */
        mbar_wait(bars + B_Q_FULL + 8 * qb, (uint32_t)(n / TR::Q_BUFS) & 1);
        if (g.n_tiles == 0) {
            mbar_arrive(bars + B_Q_EMPTY + 8 * qb);
        } else {
            /* ---- first tile (the last keys): S only ---- */
            const int st = first_s<TR, T>(it, s, qa, sK, bars, cw, pp);
            first_softmax<TR, T>(g, it, st, qb, s, sm, corr, pa, lim, bars, t4, scale_log2);

            /* ---- the other tiles, then the first keys' P V ---- */
            const int par = item_steps<TR, T, CAUSAL>(g, it, s, o, pa, pb, corr, sm, lim, qa, sK, sV,
                                              bars, cw, t4, scale_log2, pp);
            if (g.n_tiles > 1)
                mbar_arrive(bars + B_Q_EMPTY + 8 * qb); /* the last S product is done */
            last_pv<TR, T>(it, o, pa, pb, par, corr, sV, bars, cw, pp);
        }

        /* ---- epilogue: O / l, rounded, straight to global ---- */
        store_o<T, D>(a, g, o, sm, r0, t4);
    }
    if (pp && cw == 0)
        turn_wait<TR::NCW>(cw); /* the hand-off the last warpgroup made after its last turn */
}

template <int D, class T, bool CAUSAL, bool WIDE, bool PAGED = false>
__global__ void __launch_bounds__(traits<D, WIDE, PAGED>::NT, 1)
    prefill_kernel(const __grid_constant__ CUtensorMap tm_q1,
                   const __grid_constant__ CUtensorMap tm_qg,
                   const __grid_constant__ CUtensorMap tm_k,
                   const __grid_constant__ CUtensorMap tm_v, const sw_cuda_prefill_args a)
{
#ifdef SW_HOPPER_ARCH
    using TR = traits<D, WIDE, PAGED>;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw = smem_addr(smem_raw);
    const uint32_t sQ = (raw + 1023u) & ~1023u;
    const uint32_t sK = sQ + TR::Q_BUFS * TR::Q_BYTES;
    const uint32_t sV = sK + TR::K_ST * TR::KV_BYTES;
    const uint32_t bars = sV + TR::V_ST * TR::KV_BYTES;
    item_slot *slots = (item_slot *)(smem_raw + (bars - raw) + B_SLOTS);

    if (threadIdx.x == 0) {
        for (int i = 0; i < 2; ++i) {
            mbar_init(bars + B_Q_FULL + 8 * i, 1);
            mbar_init(bars + B_Q_EMPTY + 8 * i, TR::CONSUMERS);
        }
        for (int i = 0; i < 2; ++i) {
            mbar_init(bars + B_SCHED_FULL + 8 * i, 1);
            mbar_init(bars + B_SCHED_EMPTY + 8 * i, TR::CONSUMERS + 1); /* + the V fixer */
        }
        for (int i = 0; i < TR::K_ST; ++i) {
            mbar_init(bars + B_K_FULL + 8 * i, 1);
            mbar_init(bars + B_K_EMPTY + 8 * i, TR::CONSUMERS);
        }
        for (int i = 0; i < TR::V_ST; ++i) {
            mbar_init(bars + B_V_FULL + 8 * i, 1);
            mbar_init(bars + B_V_EMPTY + 8 * i, TR::CONSUMERS);
            mbar_init(bars + B_V_READY + 8 * i, 1);
        }
        if constexpr (TR::BULK_GATHER)
            for (int i = 0; i < 4; ++i)
                mbar_init(bars + B_GATHER + 8 * i, 1); /* each phase: one arrival + the bytes */
        mbar_init_fence();
    }
    __syncthreads();

    if (threadIdx.x < 128) {
        regs_dealloc<TR::PRODUCER_REGS>();
        if (threadIdx.x == 0)
            producer<TR, CAUSAL>(&tm_q1, &tm_qg, &tm_k, &tm_v, a, sQ, sK, sV, bars, slots);
        else if (threadIdx.x >= 32 && threadIdx.x < 64)
            v_fixer<TR, CAUSAL>(a, bars, slots, smem_raw + (sV - raw), threadIdx.x & 31);
        else if (threadIdx.x >= 64 && a.gather.num_tiles > 0) {
            if constexpr (TR::BULK_GATHER)
                gatherer_bulk<TR>(a, threadIdx.x & 31, (threadIdx.x >> 5) - 2,
                                  (bars + TR::BAR_BYTES + 127u) & ~127u, bars);
            else
                gatherer<TR>(a, threadIdx.x & 31);
        }
    } else {
        regs_alloc<TR::CONSUMER_REGS>();
        consumer<TR, T, CAUSAL>(a, sQ, sK, sV, bars, slots);
    }
#else
    __trap();
#endif
}

} // namespace sw_hopper

#endif
