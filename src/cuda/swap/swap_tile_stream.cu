/* Streaming tile kernel of the swap engine's device pool (the tile kernel
 * before sm_90, where the bulk-copy one has no instance; docs/swap.md, "Tile
 * kernel"). Same contract and partial-state layout as swap_tile_bulk.cu and
 * the variants in bench/dev: CTA (block
 * range c, kv head h, row group y of 8 (query row, group head) pairs)
 * writes the (max, sum, acc) state of its 8 rows over its range into a.part,
 * swap_merge_kernel folds the partials.
 *
 * Why another kernel: the tensor-core kernel measured 1109 GB/s on the H200
 * in the all-resident bench (26% of the device copy). Its SASS shows why:
 * each loop iteration loads the block descriptors of the group it is about
 * to stage (and again of the group it computes) with plain global loads,
 * and the cp.async issue waits on them, so every 16-token group costs one
 * or two dependent global round trips (~1-2 us under full HBM load) on top
 * of the copy itself; with 2 groups in flight per warp that, not HBM, set
 * the pace. Here the loop's only global traffic is the cp.async stream:
 * - a warp's groups (warp, warp + NW, ... of the CTA's range, so the warps
 *   of a CTA stream neighbouring 16 KiB pieces) go through NST stages;
 *   group i + NST - 1 is staged while group i is computed;
 * - the block descriptors of a group are loaded into registers two
 *   iterations before the group is staged (rotating pair), so the load is
 *   never waited for in steady state;
 * - at staging time the token's facts the compute needs (which of the 8
 *   rows see it -- causal limit, ragged block, range end --, FP8 or not, its
 *   scales) go into a 16-byte header entry next to the stage, so the compute
 *   reads shared memory only;
 * - one CTA per SM with ~195 KiB of stages: 4 warps x 3 x 16 KiB at head_dim
 *   256 (8 warps x 3 x 8 KiB at 128, 8 x 6 x 4 KiB at 64): 128-130 KiB of
 *   K/V in flight per SM, ~3x what 4.8 TB/s x ~1 us of loaded latency
 *   needs per SM (36 KiB).
 * The arithmetic is the tensor-core kernel's (mma.sync m16n8k16 BF16, fp32
 * accumulation, S^T = K Q^T with the reduction index permuted so every
 * operand is a 16-byte load of a plain row, P^T by movmatrix, swizzled
 * rows; see bench/dev/swap_tile_v0_mma.cu), with two changes: S^T uses two accumulators
 * (half the dependent mma chain), and a group with no FP8 token runs a
 * branch-free BF16 body. FP8 E4M3 rows are widened through a 256-entry
 * table (exact); k_scale multiplies S, v_scale multiplies P before its BF16
 * rounding. */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "swap_carve.cuh"
#include <cuda_runtime.h>
#include <climits>
#include <math.h>
#include <stdint.h>

#define SW_NW_MAX 8      /* warps per CTA at most */
#define SW_HEAD 1024     /* FP8 table (512 B) + per-warp m, l (2 x 8 x 8 floats) */

/* Stages per warp and warps per CTA (at most; fewer where the device's
 * shared memory opt-in is smaller) for head_dim D. */
template <int D> struct st_geo {
    static constexpr int NST = D >= 128 ? 3 : 6;
    static constexpr int NW = D >= 256 ? 4 : 8;
    static constexpr int ROWB = D * 2;                   /* bytes of a staged row */
    static constexpr size_t STAGE = (size_t)32 * ROWB;   /* 16 K rows, then 16 V rows */
    static constexpr size_t HDR = 16 * 16;               /* one 16-byte entry per token */
    static constexpr size_t WARP = (size_t)NST * (STAGE + HDR);
};

#include "cuda/swap/swap_mma_common.cuh"

/* -------------------------------------------------------------- tile -- */
template <int D>
__global__ void __launch_bounds__(st_geo<D>::NW * 32, 1)
    swap_tile_stream_kernel(const sw_cuda_swap_tile_args a)
{
    constexpr int PPR = D / 8;    /* 16-byte pieces of a BF16 row */
    constexpr int RPI = 32 / PPR; /* rows per cp.async instruction of the warp */
    constexpr int NJ = D / 32, NST = st_geo<D>::NST;
    constexpr size_t STAGE = st_geo<D>::STAGE;
    extern __shared__ __align__(16) uint8_t smem[];
    uint16_t *lut = reinterpret_cast<uint16_t *>(smem);
    float *wm = reinterpret_cast<float *>(smem + 512); /* [SW_NW_MAX][8] */
    float *wl = wm + SW_NW_MAX * 8;

    const int NW = (int)(blockDim.x / 32);
    const int c = blockIdx.x, h = blockIdx.y, y = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3, tk = lane & 15;
    const int32_t B = a.B, G = a.G;
    const int b0 = (int)((int64_t)a.nblk * c / a.nchunks);
    const int b1 = (int)((int64_t)a.nblk * (c + 1) / a.nchunks);
    const int ntok = (b1 - b0) * B;
    const int rows = a.ql * G;
    const int ngr = (ntok + 15) / 16;
    const int nwg = warp < ngr ? (ngr - warp + NW - 1) / NW : 0;
    uint8_t *ws = smem + SW_HEAD + (size_t)warp * st_geo<D>::WARP; /* NST stages, NST headers */
    uint4 *hdr = reinterpret_cast<uint4 *>(ws + NST * STAGE);

    /* Row n sees key position p when p - kbase <= rl[n] */
    const long long kbase = a.causal ? a.len - a.ql : a.len - 1;
    int rl[8];
    tile_row_limits(y, rows, G, a.causal, rl);

    /* Descriptor of token tk of the warp's i-th group (a clamped index past
     * the range: the token is then dropped by the j < ntok test). */
    auto load_desc = [&](int i) -> tile_desc {
        const int j = (warp + NW * i) * 16 + tk;
        return tile_load_desc(a.blk, b0 + (j < ntok ? j / B : 0), i < nwg);
    };

    /* Stages the warp's i-th group with descriptor dc: row r < 16 is token
     * r's K, r >= 16 token r - 16's V; zero-fill for a token no row sees. */
    auto issue = [&](int i, const tile_desc &dc) {
        if (i < nwg) {
            const int j = (warp + NW * i) * 16 + tk;
            const int tt = j % B;
            bool fp8;
            const unsigned mask = tile_token_header(dc, j < ntok && tt < dc.d.z, tt, B, kbase, rl,
                                                    hdr + (size_t)(i % NST) * 16, lane, &fp8);
            const unsigned long long koff =
                (unsigned long long)dc.d.x * a.slot_bytes +
                ((unsigned long long)h * B + (unsigned long long)tt) * D * (fp8 ? 1u : 2u);
            const unsigned long long fl = (mask ? 1ull : 0ull) | (fp8 ? 2ull : 0ull);
            const unsigned long long kenc = koff | fl, venc = (koff + a.v_off) | fl;
            uint8_t *st = ws + (size_t)(i % NST) * STAGE;
#pragma unroll 8
            for (int it = 0; it < 32 / RPI; it++) {
                const int row = it * RPI + lane / PPR, pc = lane % PPR;
                /* rows of one instruction are all K or all V (RPI divides 16) */
                const unsigned long long enc = tile_shfl_u64(it * RPI < 16 ? kenc : venc, row & 15);
                /* an FP8 row has D bytes: its second half is zero-filled
                 * (never read) rather than branched around */
                const bool ld = (enc & 1ull) != 0 && !((enc & 2ull) && pc >= PPR / 2);
                const uint8_t *src = ld ? a.pool + (enc & ~15ull) + pc * 16 : a.pool;
                cp_async16z(st + soff<D>(row, pc), src, ld ? 16 : 0);
            }
        }
        cp_commit();
    };

    /* Prologue: the first NST - 1 groups go out before anything else. */
    tile_desc dn1, dn2;
    {
        tile_desc d0[NST - 1];
#pragma unroll
        for (int i = 0; i < NST - 1; i++)
            d0[i] = load_desc(i);
        dn1 = load_desc(NST - 1);
        dn2 = load_desc(NST);
#pragma unroll
        for (int i = 0; i < NST - 1; i++)
            issue(i, d0[i]);
    }

    for (int i = tid; i < 256; i += blockDim.x)
        lut[i] = __bfloat16_as_ushort(__float2bfloat16_rn(e4m3_f32((uint32_t)i)));
    /* Q^T fragments (B operand of S^T): row n = g, dims 32j + 8t .. +7. */
    uint4 qf[NJ];
    tile_q_frags<D>(a.q, a.Hq, rows, G, y, h, g, t, qf);
    tile_state<D> S;
    tile_state_init(S);
    __syncthreads(); /* the table */

    for (int i = 0; i < nwg; i++) {
        issue(i + NST - 1, dn1);
        dn1 = dn2;
        dn2 = load_desc(i + NST + 1);
        cp_wait<NST - 1>();
        __syncwarp(); /* every lane's copies and header writes of group i */
        const uint4 *hd = hdr + (size_t)(i % NST) * 16;
        const unsigned sum = hd[0].w;
        if (sum & 0xffffu) { /* warp-uniform: some row sees some token */
            const uint8_t *st = ws + (size_t)(i % NST) * STAGE;
            const uint4 e0 = hd[g], e1 = hd[g + 8];
            const unsigned f8 = sum >> 16;
            if (f8)
                tile_group<D, true, false, true>(st, qf, e0, e1, f8, 0u, a.qscale, lut, g, t, S);
            else
                tile_group<D, false, false, true>(st, qf, e0, e1, 0u, 0u, a.qscale, lut, g, t, S);
        }
        __syncwarp(); /* the stage is refilled by the issue of group i + NST */
    }
    cp_wait<0>();

    /* ---- combine the warps' states into the CTA's partial ---- */
    tile_partial_out<D>(S.o, S.m0, S.m1, S.l0, S.l1, wm, wl,
                        reinterpret_cast<float *>(smem + SW_HEAD), a);
}

/* at most st_geo<D>::NW warps; the epilogue's [NW][8][D] fp32 sums live in
 * the stages */
template <int D> static sw_status launch_stream(const sw_cuda_swap_tile_args *a, cudaStream_t st,
                                                int *launched)
{
    static volatile int cached[64];
    int nw = 0;
    *launched = 0;
    SW_TRY(tile_kernel_warps(swap_tile_stream_kernel<D>, SW_HEAD, st_geo<D>::WARP, st_geo<D>::NW,
                             (size_t)8 * D * sizeof(float), cached, &nw));
    return tile_kernel_launch(swap_tile_stream_kernel<D>, nw, SW_HEAD, st_geo<D>::WARP, a, st,
                              launched);
}

extern "C" void sw_cuda_swap_tile_stream_preload(int32_t D)
{
    (void)tile_head_dim_call(D, [&](auto d) {
        sw_swap_preload_fn(swap_tile_stream_kernel<decltype(d)::value>);
        return SW_OK;
    });
}

/* Called by sw_cuda_swap_tile (swap_tile.cu); *launched = 0 when this
 * device or head_dim has no instance. */
extern "C" sw_status sw_cuda_swap_tile_stream(const sw_cuda_swap_tile_args *a, void *stream,
                                              int *launched)
{
    *launched = 0;
    return tile_head_dim_call(a->D, [&](auto d) {
        return launch_stream<decltype(d)::value>(a, (cudaStream_t)stream, launched);
    });
}
