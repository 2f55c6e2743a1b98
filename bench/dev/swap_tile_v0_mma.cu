/* bench/dev/swap_tile_v0_mma.cu - swap tile kernel variant 0 (kernel 0 of
 * the former SW_KNOB_TILE_KERNEL; bench/dev/README.md): the first
 * tensor-core tile kernel, 1109 GB/s in the all-resident bench on the H200
 * (26% of the D2D copy), replaced by the streaming kernel
 * (src/cuda/swap/swap_tile_stream.cu) and the bulk-copy kernel
 * (swap_tile_bulk.cu). Not built by default; swap_tile_check.cu links it.
 * Same contract as the CUDA-core kernel (swap_tile_v1_cuda_cores.cu): CTA (block range c, kv head h, row group y of 8 (query row,
 * group head) pairs) writes the (max, sum, acc) partial state of its 8 rows
 * into a.part; swap_merge_kernel folds the partials.
 *
 * Decode attention is memory-bound (8 FLOP per byte of K/V for a GQA group
 * of 8), so the kernel is built to keep loads in flight, not to compute:
 * - every warp streams its own 16-token groups (groups warp, warp + NW, ...
 *   of the CTA's range) through MSTAGES shared-memory stages filled with
 *   16-byte cp.async (zero-fill for tokens no row may see), so MSTAGES - 1
 *   groups of 16 tokens (16 KiB at head_dim 256) per warp are in flight
 *   while one is used; there is no block-wide barrier in the loop;
 * - S^T (16 tokens x 8 rows) = K Q^T and O^T (16 dims x 8 rows) += V^T P^T
 *   are mma.sync m16n8k16 BF16 products with fp32 accumulation. The
 *   reduction index of both products may be permuted freely (the same
 *   permutation on both operands), which lets every operand come from
 *   16-byte shared-memory loads of plain token rows:
 *     S^T, k-step pair (2j, 2j+1): lane (g = lane/4, t = lane%4) holds dims
 *     32j + 8t .. +7 of token rows g and g + 8 (the A operand) and of query
 *     row g (the B operand, kept in registers);
 *     O^T, m-tile (c, i): row M = g is dim 64c + 8g + 2i, M = g + 8 is dim
 *     64c + 8g + 2i + 1; the lane loads dims 64c + 8g .. +7 of tokens 2t,
 *     2t + 1, 2t + 8, 2t + 9 and pairs them per dim with byte permutes;
 * - P^T (the B operand of O^T) is the S^T accumulator transposed per 8x8
 *   quarter with movmatrix.trans, so a lane's softmax rows (2t, 2t + 1)
 *   are also its O^T accumulator columns: the rescale is lane-local;
 * - the running max is shared by the 8 lanes of a row (3 shuffles per
 *   group), the running sum stays per lane until the end;
 * - shared-memory rows are XOR-swizzled per 16-byte piece (swz) so that
 *   both the K and the V fragment loads are free of bank conflicts.
 * FP8 E4M3 rows are widened to BF16 through a 256-entry table (exact);
 * k_scale multiplies S, v_scale multiplies P before its BF16 rounding.
 * P is rounded to BF16 for the product (the sum uses fp32 P). */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "cuda/swap/swap_carve.cuh"
#include <cuda_runtime.h>
#include <climits>
#include <math.h>
#include <stdint.h>

#define MW_MAX 4                  /* warps per CTA at most */
#define MSTAGES 3                 /* shared-memory stages per warp */
#define FULL 0xffffffffu
#define HEAD_BYTES 768            /* table (512 B) + per-warp m, l (256 B) */

template <int D> struct mma_geo {
    static constexpr int ROWB = D * 2;                 /* bytes of a staged row */
    static constexpr size_t STAGE = (size_t)32 * ROWB; /* 16 K rows, then 16 V rows */
    static constexpr size_t WARP = (size_t)MSTAGES * STAGE;
};

#include "cuda/swap/swap_mma_common.cuh"

/* ------------------------------------------------------------ helpers -- */
static __device__ __forceinline__ long long shfl_ll(long long v, int src)
{
    const int lo = __shfl_sync(FULL, (int)(v & 0xffffffffll), src);
    const int hi = __shfl_sync(FULL, (int)(v >> 32), src);
    return (long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo);
}

/* One token of the tile as a lane sees it. */
struct tok_t {
    long long pos;            /* key position; LLONG_MAX when not a valid token */
    unsigned long long koff;  /* byte offset of its K row in the pool */
    float ks, vs;
    int fp8;
    int load;                 /* some row of the CTA may see it */
};

/* -------------------------------------------------------------- tile -- */
template <int D>
__global__ void __launch_bounds__(MW_MAX * 32, 1) swap_tile_mma_kernel(const sw_cuda_swap_tile_args a)
{
    constexpr int PPR = D / 8;       /* 16-byte pieces of a BF16 row */
    constexpr int RPI = 32 / PPR;    /* rows per cp.async instruction of the warp */
    constexpr int NJ = D / 32;       /* k-step pairs of S^T */
    constexpr int NC = D / 64;       /* 64-dim groups of O^T (4 m-tiles each) */
    constexpr size_t STAGE = mma_geo<D>::STAGE;
    constexpr int ROWB = mma_geo<D>::ROWB;
    extern __shared__ __align__(16) uint8_t smem[];
    uint16_t *lut = reinterpret_cast<uint16_t *>(smem);
    float *wm = reinterpret_cast<float *>(smem + 512); /* [MW_MAX][8] */
    float *wl = wm + MW_MAX * 8;
    uint8_t *stages = smem + HEAD_BYTES;

    const int NW = (int)(blockDim.x / 32);
    const int c = blockIdx.x, h = blockIdx.y, y = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    for (int i = tid; i < 256; i += blockDim.x)
        lut[i] = __bfloat16_as_ushort(__float2bfloat16_rn(e4m3_f32((uint32_t)i)));

    const int32_t B = a.B, G = a.G;
    const int b0 = (int)((int64_t)a.nblk * c / a.nchunks);
    const int b1 = (int)((int64_t)a.nblk * (c + 1) / a.nchunks);
    const int ntok = (b1 - b0) * B;
    const int rows = a.ql * G;

    /* Rows: n = 0..7 is (query row, group head) pair y * 8 + n. */
    auto row_lim = [&](int n) -> long long {
        const int r = y * 8 + n;
        if (r >= rows)
            return -1;
        return a.causal ? (long long)(r / G) + a.len - a.ql : a.len - 1;
    };
    long long maxlim = -1;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const long long l = row_lim(n);
        maxlim = l > maxlim ? l : maxlim;
    }
    const long long lim0 = row_lim(2 * t), lim1 = row_lim(2 * t + 1);

    /* Q^T fragments (B operand of S^T): query row n = g, dims 32j + 8t .. +7. */
    uint4 qf[NJ];
    tile_q_frags<D>(a.q, a.Hq, rows, G, y, h, g, t, qf);

    auto info = [&](int k, int tok) -> tok_t {
        tok_t r;
        r.pos = LLONG_MAX;
        r.koff = 0;
        r.ks = r.vs = 0.0f;
        r.fp8 = 0;
        r.load = 0;
        const int j = k * 16 + tok;
        if (j >= ntok)
            return r;
        const sw_cuda_swap_blk e = a.blk[b0 + j / B];
        const int tt = j % B;
        if (tt >= e.valid)
            return r;
        r.fp8 = e.dtype != 0;
        r.ks = e.k_scale;
        r.vs = e.v_scale;
        r.pos = (long long)e.block * B + tt;
        r.koff = (unsigned long long)e.slot * a.slot_bytes +
                 ((unsigned long long)h * B + (unsigned long long)tt) * D * (r.fp8 ? 1u : 2u);
        r.load = r.pos <= maxlim;
        return r;
    };

    const int ngr = (ntok + 15) / 16;
    const int nwg = warp < ngr ? (ngr - warp + NW - 1) / NW : 0;
    uint8_t *ws = stages + (size_t)warp * mma_geo<D>::WARP;

    /* Stages the warp's i-th group: row r < 16 is token r's K, r >= 16 token
     * r - 16's V. Offsets are multiples of 16: bit 0 = load, bit 1 = FP8. */
    auto issue = [&](int i) {
        if (i < nwg) {
            const tok_t ti = info(warp + NW * i, lane & 15);
            const unsigned long long fl = (ti.load ? 1ull : 0ull) | (ti.fp8 ? 2ull : 0ull);
            const unsigned long long kenc = ti.koff | fl, venc = (ti.koff + a.v_off) | fl;
            uint8_t *st = ws + (size_t)(i % MSTAGES) * STAGE;
#pragma unroll 4
            for (int it = 0; it < 32 / RPI; it++) {
                const int row = it * RPI + lane / PPR, pc = lane % PPR;
                /* rows of one instruction are all K or all V (RPI divides 16) */
                const unsigned long long enc = tile_shfl_u64(it * RPI < 16 ? kenc : venc, row & 15);
                if ((enc & 2ull) && pc >= PPR / 2)
                    continue; /* an FP8 row has D bytes */
                const bool ok = (enc & 1ull) != 0;
                const uint8_t *src = ok ? a.pool + (enc & ~15ull) + pc * 16 : a.pool;
                cp_async16z(st + soff<D>(row, pc), src, ok ? 16 : 0);
            }
        }
        cp_commit();
    };

    float mr0 = -INFINITY, mr1 = -INFINITY, lr0 = 0.0f, lr1 = 0.0f;
    float o[NC][4][4];
#pragma unroll
    for (int cc = 0; cc < NC; cc++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[cc][i][e] = 0.0f;

    __syncthreads(); /* the table */
#pragma unroll
    for (int i = 0; i < MSTAGES - 1; i++)
        issue(i);
    for (int i = 0; i < nwg; i++) {
        issue(i + MSTAGES - 1);
        cp_wait<MSTAGES - 1>();
        __syncwarp(); /* every lane's copies of group i are visible */
        const uint8_t *st = ws + (size_t)(i % MSTAGES) * STAGE;
        const tok_t ti = info(warp + NW * i, lane & 15);
        const unsigned vis = __ballot_sync(FULL, ti.load) & 0xffffu;
        const unsigned f8 = __ballot_sync(FULL, ti.fp8) & 0xffffu;
        const long long pos0 = shfl_ll(ti.pos, g), pos1 = shfl_ll(ti.pos, g + 8);
        const float ks0 = __shfl_sync(FULL, ti.ks, g), ks1 = __shfl_sync(FULL, ti.ks, g + 8);
        const float vs0 = __shfl_sync(FULL, ti.vs, g), vs1 = __shfl_sync(FULL, ti.vs, g + 8);
        if (vis) { /* warp-uniform: some row sees some token of the group */
            /* ---- S^T = K Q^T: c0 (tok g, row 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 ---- */
            float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const bool kf0 = (f8 >> g) & 1u, kf1 = (f8 >> (g + 8)) & 1u;
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                uint32_t w[4], x[4];
                tile_row8<D, true, true>(st, g, 32 * j + 8 * t, kf0, lut, w);
                tile_row8<D, true, true>(st, g + 8, 32 * j + 8 * t, kf1, lut, x);
                mma16816(s, w[0], x[0], w[1], x[1], qf[j].x, qf[j].y);
                mma16816(s, w[2], x[2], w[3], x[3], qf[j].z, qf[j].w);
            }
            /* ---- online softmax (log2 domain), rows 2t and 2t + 1 ---- */
            const float sc0 = a.qscale * ks0, sc1 = a.qscale * ks1;
            const float v0 = pos0 <= lim0 ? s[0] * sc0 : -INFINITY;
            const float v1 = pos0 <= lim1 ? s[1] * sc0 : -INFINITY;
            const float v2 = pos1 <= lim0 ? s[2] * sc1 : -INFINITY;
            const float v3 = pos1 <= lim1 ? s[3] * sc1 : -INFINITY;
            float mx0 = fmaxf(v0, v2), mx1 = fmaxf(v1, v3);
#pragma unroll
            for (int off = 4; off <= 16; off <<= 1) {
                mx0 = fmaxf(mx0, __shfl_xor_sync(FULL, mx0, off));
                mx1 = fmaxf(mx1, __shfl_xor_sync(FULL, mx1, off));
            }
            const float mn0 = fmaxf(mr0, mx0), mn1 = fmaxf(mr1, mx1);
            const float cr0 = mr0 == -INFINITY ? 0.0f : exp2f(mr0 - mn0);
            const float cr1 = mr1 == -INFINITY ? 0.0f : exp2f(mr1 - mn1);
            mr0 = mn0;
            mr1 = mn1;
            const float p0 = v0 == -INFINITY ? 0.0f : exp2f(v0 - mn0);
            const float p1 = v1 == -INFINITY ? 0.0f : exp2f(v1 - mn1);
            const float p2 = v2 == -INFINITY ? 0.0f : exp2f(v2 - mn0);
            const float p3 = v3 == -INFINITY ? 0.0f : exp2f(v3 - mn1);
            lr0 = lr0 * cr0 + p0 + p2;
            lr1 = lr1 * cr1 + p1 + p3;
            /* P^T (B operand of O^T): k = tokens 2t, 2t+1 | 2t+8, 2t+9, n = row g */
            const uint32_t pb0 = mov_trans(pack_bf16(p0 * vs0, p1 * vs0));
            const uint32_t pb1 = mov_trans(pack_bf16(p2 * vs1, p3 * vs1));
            /* ---- O^T = O^T * corr + V^T P^T ---- */
            const bool vf0 = (f8 >> (2 * t)) & 1u, vf1 = (f8 >> (2 * t + 1)) & 1u;
            const bool vf2 = (f8 >> (2 * t + 8)) & 1u, vf3 = (f8 >> (2 * t + 9)) & 1u;
#pragma unroll
            for (int cc = 0; cc < NC; cc++) {
                uint32_t va[4], vb[4], vc[4], vd[4];
                const int e0 = 64 * cc + 8 * g;
                tile_row8<D, true, true>(st, 16 + 2 * t, e0, vf0, lut, va);
                tile_row8<D, true, true>(st, 17 + 2 * t, e0, vf1, lut, vb);
                tile_row8<D, true, true>(st, 24 + 2 * t, e0, vf2, lut, vc);
                tile_row8<D, true, true>(st, 25 + 2 * t, e0, vf3, lut, vd);
#pragma unroll
                for (int i2 = 0; i2 < 4; i2++) {
                    float *acc = o[cc][i2];
                    acc[0] *= cr0;
                    acc[1] *= cr1;
                    acc[2] *= cr0;
                    acc[3] *= cr1;
                    mma16816(acc, __byte_perm(va[i2], vb[i2], 0x5410),
                             __byte_perm(va[i2], vb[i2], 0x7632),
                             __byte_perm(vc[i2], vd[i2], 0x5410),
                             __byte_perm(vc[i2], vd[i2], 0x7632), pb0, pb1);
                }
            }
        }
        __syncwarp(); /* the stage is refilled by the issue of group i + MSTAGES */
    }
    cp_wait<0>();

    /* ---- combine the warps' states into the CTA's partial ---- */
    tile_partial_out<D>(o, mr0, mr1, lr0, lr1, wm, wl, reinterpret_cast<float *>(stages), a);
    (void)ROWB;
}

template <int D> static sw_status launch_mma(const sw_cuda_swap_tile_args *a, cudaStream_t st,
                                             int *launched)
{
    static volatile int cached[64];
    int nw = 0;
    *launched = 0;
    SW_TRY(tile_kernel_warps(swap_tile_mma_kernel<D>, HEAD_BYTES, mma_geo<D>::WARP, MW_MAX, 0,
                             cached, &nw));
    return tile_kernel_launch(swap_tile_mma_kernel<D>, nw, HEAD_BYTES, mma_geo<D>::WARP, a, st,
                              launched);
}

extern "C" void sw_cuda_swap_tile_mma_preload(int32_t D)
{
    (void)tile_head_dim_call(D, [&](auto d) {
        sw_swap_preload_fn(swap_tile_mma_kernel<decltype(d)::value>);
        return SW_OK;
    });
}

/* *launched = 0 when this device or head_dim has no tensor-core instance. */
extern "C" sw_status sw_cuda_swap_tile_mma(const sw_cuda_swap_tile_args *a, void *stream,
                                           int *launched)
{
    *launched = 0;
    return tile_head_dim_call(a->D, [&](auto d) {
        return launch_mma<decltype(d)::value>(a, (cudaStream_t)stream, launched);
    });
}
