/* Streaming tile kernel of the swap engine's device pool
 * (SPILLWAY_SWAP_TILE_KERNEL=2; docs/swap.md, "Tile kernel"). Same contract
 * and partial-state layout as swap_tile.cu / swap_tile_mma.cu: CTA (block
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
 * rows; see swap_tile_mma.cu), with two changes: S^T uses two accumulators
 * (half the dependent mma chain), and a group with no FP8 token runs a
 * branch-free BF16 body. FP8 E4M3 rows are widened through a 256-entry
 * table (exact); k_scale multiplies S, v_scale multiplies P before its BF16
 * rounding. */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "cuda/sw_cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <climits>
#include <math.h>
#include <stdint.h>

#define SW_NW_MAX 8      /* warps per CTA at most */
#define SW_FULL 0xffffffffu
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

/* ------------------------------------------------------------ helpers -- */
/* Elements e0 .. e0 + 7 of staged row `row` as 4 BF16 pairs. */
template <int D, bool F8>
static __device__ __forceinline__ void st_row8(const uint8_t *st, int row, int e0, bool fp8,
                                               const uint16_t *lut, uint32_t *w)
{
    if (!F8 || !fp8) {
        const uint4 u = *reinterpret_cast<const uint4 *>(st + soff<D>(row, e0 >> 3));
        w[0] = u.x;
        w[1] = u.y;
        w[2] = u.z;
        w[3] = u.w;
    } else {
        const uint2 u = *reinterpret_cast<const uint2 *>(st + soff<D>(row, e0 >> 4) + (e0 & 8));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t src = i < 2 ? u.x : u.y;
            const int sh = (i & 1) * 16;
            w[i] = (uint32_t)lut[(src >> sh) & 0xffu] |
                   ((uint32_t)lut[(src >> (sh + 8)) & 0xffu] << 16);
        }
    }
}

static __device__ __forceinline__ unsigned long long st_shfl64(unsigned long long v, int src)
{
    const unsigned lo = __shfl_sync(SW_FULL, (unsigned)v, src);
    const unsigned hi = __shfl_sync(SW_FULL, (unsigned)(v >> 32), src);
    return ((unsigned long long)hi << 32) | lo;
}

/* A block descriptor as a lane holds it between its load and its use. */
struct st_desc {
    int4 d;    /* slot, block, valid, dtype */
    float2 s;  /* k_scale, v_scale */
};

/* Running state of a lane: rows 2t, 2t + 1 (max, sum) and its O^T tiles. */
template <int D> struct st_state {
    float m0, m1, l0, l1;
    float o[D / 64][4][4];
};

/* One staged group: S^T = K Q^T, online softmax, O^T += V^T P^T.
 * e0, e1: header entries of tokens g and g + 8; f8: the group's FP8 tokens. */
template <int D, bool F8>
static __device__ __forceinline__ void st_group(const uint8_t *st, const uint4 *qf, uint4 e0,
                                                uint4 e1, unsigned f8, float qscale,
                                                const uint16_t *lut, int g, int t,
                                                st_state<D> &S)
{
    constexpr int NJ = D / 32, NC = D / 64;
    float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bool kf0 = F8 && ((f8 >> g) & 1u), kf1 = F8 && ((f8 >> (g + 8)) & 1u);
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        uint32_t w[4], x[4];
        st_row8<D, F8>(st, g, 32 * j + 8 * t, kf0, lut, w);
        st_row8<D, F8>(st, g + 8, 32 * j + 8 * t, kf1, lut, x);
        mma16816(sa, w[0], x[0], w[1], x[1], qf[j].x, qf[j].y);
        mma16816(sb, w[2], x[2], w[3], x[3], qf[j].z, qf[j].w);
    }
    /* c0 (token g, row 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1) */
    const float sc0 = qscale * __uint_as_float(e0.y), sc1 = qscale * __uint_as_float(e1.y);
    const float v0 = (e0.x >> (2 * t)) & 1u ? (sa[0] + sb[0]) * sc0 : -INFINITY;
    const float v1 = (e0.x >> (2 * t + 1)) & 1u ? (sa[1] + sb[1]) * sc0 : -INFINITY;
    const float v2 = (e1.x >> (2 * t)) & 1u ? (sa[2] + sb[2]) * sc1 : -INFINITY;
    const float v3 = (e1.x >> (2 * t + 1)) & 1u ? (sa[3] + sb[3]) * sc1 : -INFINITY;
    float mx0 = fmaxf(v0, v2), mx1 = fmaxf(v1, v3);
#pragma unroll
    for (int off = 4; off <= 16; off <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(SW_FULL, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(SW_FULL, mx1, off));
    }
    const float mn0 = fmaxf(S.m0, mx0), mn1 = fmaxf(S.m1, mx1);
    const float cr0 = S.m0 == -INFINITY ? 0.0f : exp2f(S.m0 - mn0);
    const float cr1 = S.m1 == -INFINITY ? 0.0f : exp2f(S.m1 - mn1);
    S.m0 = mn0;
    S.m1 = mn1;
    const float p0 = v0 == -INFINITY ? 0.0f : exp2f(v0 - mn0);
    const float p1 = v1 == -INFINITY ? 0.0f : exp2f(v1 - mn1);
    const float p2 = v2 == -INFINITY ? 0.0f : exp2f(v2 - mn0);
    const float p3 = v3 == -INFINITY ? 0.0f : exp2f(v3 - mn1);
    S.l0 = S.l0 * cr0 + p0 + p2;
    S.l1 = S.l1 * cr1 + p1 + p3;
    const float vs0 = __uint_as_float(e0.z), vs1 = __uint_as_float(e1.z);
    const uint32_t pb0 = mov_trans(pack_bf16(p0 * vs0, p1 * vs0));
    const uint32_t pb1 = mov_trans(pack_bf16(p2 * vs1, p3 * vs1));
    const bool vf0 = F8 && ((f8 >> (2 * t)) & 1u), vf1 = F8 && ((f8 >> (2 * t + 1)) & 1u);
    const bool vf2 = F8 && ((f8 >> (2 * t + 8)) & 1u), vf3 = F8 && ((f8 >> (2 * t + 9)) & 1u);
#pragma unroll
    for (int cc = 0; cc < NC; cc++) {
        uint32_t va[4], vb[4], vc[4], vd[4];
        const int el = 64 * cc + 8 * g;
        st_row8<D, F8>(st, 16 + 2 * t, el, vf0, lut, va);
        st_row8<D, F8>(st, 17 + 2 * t, el, vf1, lut, vb);
        st_row8<D, F8>(st, 24 + 2 * t, el, vf2, lut, vc);
        st_row8<D, F8>(st, 25 + 2 * t, el, vf3, lut, vd);
#pragma unroll
        for (int i2 = 0; i2 < 4; i2++) {
            float *acc = S.o[cc][i2];
            acc[0] *= cr0;
            acc[1] *= cr1;
            acc[2] *= cr0;
            acc[3] *= cr1;
            mma16816(acc, __byte_perm(va[i2], vb[i2], 0x5410), __byte_perm(va[i2], vb[i2], 0x7632),
                   __byte_perm(vc[i2], vd[i2], 0x5410), __byte_perm(vc[i2], vd[i2], 0x7632), pb0,
                   pb1);
        }
    }
}

/* -------------------------------------------------------------- tile -- */
template <int D>
__global__ void __launch_bounds__(st_geo<D>::NW * 32, 1)
    swap_tile_stream_kernel(const sw_cuda_swap_tile_args a)
{
    constexpr int PPR = D / 8;    /* 16-byte pieces of a BF16 row */
    constexpr int RPI = 32 / PPR; /* rows per cp.async instruction of the warp */
    constexpr int NJ = D / 32, NC = D / 64, NST = st_geo<D>::NST;
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

    /* Row n sees key position p when p - kbase <= rl[n] (INT_MIN: no such
     * row); 32-bit limits keep the registers for the pipeline. */
    const long long kbase = a.causal ? a.len - a.ql : a.len - 1;
    int rl[8];
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const int r = y * 8 + n;
        rl[n] = r >= rows ? INT_MIN : a.causal ? r / G : 0;
    }

    /* Descriptor of token tk of the warp's i-th group (a clamped index past
     * the range: the token is then dropped by the j < ntok test). */
    auto load_desc = [&](int i) -> st_desc {
        const int j = (warp + NW * i) * 16 + tk;
        const int bi = b0 + (j < ntok ? j / B : 0);
        st_desc r;
        if (i < nwg) {
            const int4 *p = reinterpret_cast<const int4 *>(a.blk + bi);
            r.d = __ldg(p);
            r.s = __ldg(reinterpret_cast<const float2 *>(p + 1));
        } else {
            r.d = make_int4(0, 0, 0, 0);
            r.s = make_float2(0.0f, 0.0f);
        }
        return r;
    };

    /* Stages the warp's i-th group with descriptor dc: row r < 16 is token
     * r's K, r >= 16 token r - 16's V; zero-fill for a token no row sees. */
    auto issue = [&](int i, const st_desc &dc) {
        if (i < nwg) {
            const int j = (warp + NW * i) * 16 + tk;
            const int tt = j % B;
            const bool ok = j < ntok && tt < dc.d.z;
            const bool fp8 = ok && dc.d.w != 0;
            long long dp = (long long)dc.d.y * B + tt - kbase;
            dp = dp > INT_MAX ? INT_MAX : dp < INT_MIN + 1 ? INT_MIN + 1 : dp;
            unsigned mask = 0;
#pragma unroll
            for (int n = 0; n < 8; n++)
                mask |= (ok && (int)dp <= rl[n]) ? 1u << n : 0u;
            const unsigned vis = __ballot_sync(SW_FULL, mask != 0) & 0xffffu;
            const unsigned f8 = __ballot_sync(SW_FULL, fp8) & 0xffffu;
            uint4 *hd = hdr + (size_t)(i % NST) * 16;
            if (lane < 16)
                hd[lane] = make_uint4(mask, __float_as_uint(dc.s.x), __float_as_uint(dc.s.y),
                                      lane == 0 ? (vis | (f8 << 16)) : 0u);
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
                const unsigned long long enc = st_shfl64(it * RPI < 16 ? kenc : venc, row & 15);
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
    st_desc dn1, dn2;
    {
        st_desc d0[NST - 1];
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
    {
        const int r = y * 8 + g;
        if (r < rows) {
            const uint16_t *qp =
                a.q + ((size_t)(r / G) * a.Hq + (size_t)h * G + (size_t)(r % G)) * D;
#pragma unroll
            for (int j = 0; j < NJ; j++)
                qf[j] = *reinterpret_cast<const uint4 *>(qp + 32 * j + 8 * t);
        } else {
#pragma unroll
            for (int j = 0; j < NJ; j++)
                qf[j] = make_uint4(0u, 0u, 0u, 0u);
        }
    }
    st_state<D> S;
    S.m0 = S.m1 = -INFINITY;
    S.l0 = S.l1 = 0.0f;
#pragma unroll
    for (int cc = 0; cc < NC; cc++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                S.o[cc][i][e] = 0.0f;
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
                st_group<D, true>(st, qf, e0, e1, f8, a.qscale, lut, g, t, S);
            else
                st_group<D, false>(st, qf, e0, e1, 0u, a.qscale, lut, g, t, S);
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

/* Called by sw_cuda_swap_tile (swap_tile.cu) for kernel 2; *launched = 0
 * when this device or head_dim has no instance. */
extern "C" sw_status sw_cuda_swap_tile_stream(const sw_cuda_swap_tile_args *a, void *stream,
                                              int *launched)
{
    cudaStream_t st = (cudaStream_t)stream;
    *launched = 0;
    switch (a->D) {
    case 64: return launch_stream<64>(a, st, launched);
    case 128: return launch_stream<128>(a, st, launched);
    case 256: return launch_stream<256>(a, st, launched);
    default: return SW_OK;
    }
}
