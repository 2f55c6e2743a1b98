/* Bulk-copy tile kernel of the swap engine's device pool
 * (SPILLWAY_SWAP_TILE_KERNEL=3; sm_90 and later). Same contract and
 * partial-state layout as swap_tile.cu / swap_tile_stream.cu: CTA (block
 * range c, kv head h, row group y of 8 (query row, group head) pairs)
 * writes the (max, sum, acc) state of its 8 rows over its range into a.part,
 * swap_merge_kernel folds the partials.
 *
 * Why another kernel: kernel 2 (swap_tile_stream.cu) streams at ~2 TB/s on
 * the H200 (1780-1815 GB/s iso, 2012 back to back; bench/results/
 * swap-tile-check-h200.log) with ~128 KiB of cp.async in flight per SM on
 * paper. Each of its 4 warps both issues 32 cp.async per 16-token group and
 * computes it, alone on its SM sub-partition: the warp's own compute and
 * issue latencies sit between a group's arrival and the next group's issue,
 * so the bytes really in flight are far fewer. Here loading and computing
 * are decoupled:
 * - warp 0 is the producer: per 16-token group it writes the group's token
 *   header (which of the 8 rows see each token, FP8 or not, scales) and
 *   issues 1D bulk copies (cp.async.bulk, the TMA engine) into a ring of
 *   stages; a run of rows contiguous in the pool and in the stage (BF16
 *   rows of one block) is one copy, so a 16-token group of a 16-token BF16
 *   block is 2 copies of 8 KiB (K, V) instead of 1024 16-byte cp.async;
 *   tokens no row sees are not copied at all;
 * - stage completion is an mbarrier with a transaction count (full), its
 *   release another (empty): the producer runs up to NS stages ahead of
 *   the consumers, whatever their pace (NS = 13 at head_dim 256: ~208 KiB
 *   of K/V in flight per SM when the consumers keep up);
 * - 8 consumer warps take the groups round robin (group i: warp 1 + i % 8)
 *   and keep their own (m, l, O) state as in kernel 2 (mma.sync m16n8k16
 *   BF16, fp32 accumulation, S^T = K Q^T with the reduction index permuted
 *   so every operand is a 16-byte load of a plain row, P^T by movmatrix);
 *   8 warps hide each other's mma / shuffle / exp latencies;
 * - the block descriptors are loaded four groups ahead into the producer's
 *   registers, so their global round trip is not on the issue path.
 * Stages are plain rows (D BF16 or D E4M3 bytes at a 2D-byte stride; a bulk
 * copy cannot swizzle): the K fragment loads meet 2-way bank conflicts, V's
 * none; a few % of the SM's shared-memory bandwidth at HBM rate. Rows of
 * tokens no row sees hold stale or never written bytes (possibly NaN): the
 * S values of such tokens are replaced by -inf and, in a group with any
 * such token, their V rows are read as zeros (0 x NaN would poison O). */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "cuda/sw_cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <climits>
#include <math.h>
#include <stdint.h>

#include "cuda/swap/swap_mma_common.cuh"

#define SW_BK_FULL 0xffffffffu
#define SW_BK_NCW 8                 /* consumer warps */
#define SW_BK_NT ((SW_BK_NCW + 1) * 32)
#define SW_BK_NS_MAX 64             /* stages (mbarrier pairs in the head) */
#define SW_BK_PD 4                  /* groups of descriptors ahead */
/* head: FP8 table (512 B), per-warp m and l ([16][8] floats each), full and
 * empty mbarriers ([SW_BK_NS_MAX] each) */
#define SW_BK_WM 512
#define SW_BK_WL (SW_BK_WM + 16 * 8 * 4)
#define SW_BK_BAR (SW_BK_WL + 16 * 8 * 4)
#define SW_BK_HEAD (SW_BK_BAR + 2 * SW_BK_NS_MAX * 8)

template <int D> struct bk_geo {
    static constexpr int ROWB = D * 2;                 /* bytes of a staged row */
    static constexpr size_t STAGE = (size_t)32 * ROWB; /* 16 K rows, then 16 V rows */
    static constexpr size_t HDR = 16 * 16;             /* one 16-byte entry per token */
    /* stages wanted: ~208-213 KiB of ring, within the H100/H200 opt-in */
    static constexpr int NS = D >= 256 ? 13 : D >= 128 ? 26 : 48;
};

/* ------------------------------------------------------ mbarrier / TMA -- */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
static __device__ __forceinline__ unsigned bk_sa(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void bk_bar_init(uint64_t *b, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bk_sa(b)), "r"(count)
                 : "memory");
}
static __device__ __forceinline__ void bk_bar_arrive(uint64_t *b)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bk_sa(b)) : "memory");
}
static __device__ __forceinline__ void bk_bar_arrive_tx(uint64_t *b, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bk_sa(b)),
                 "r"(bytes)
                 : "memory");
}
/* Waits until the phase of parity `par` of *b has completed. */
static __device__ __forceinline__ void bk_bar_wait(uint64_t *b, unsigned par)
{
    const unsigned a = bk_sa(b);
    unsigned ok = 0;
    do {
        asm volatile("{\n .reg .pred p;\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(ok)
                     : "r"(a), "r"(par)
                     : "memory");
    } while (!ok);
}
/* bytes (a multiple of 16) from global src to shared dst, completing on *b */
static __device__ __forceinline__ void bk_copy(void *dst, const void *src, unsigned bytes,
                                               uint64_t *b)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];\n" ::"r"(bk_sa(dst)),
                 "l"(src), "r"(bytes), "r"(bk_sa(b))
                 : "memory");
}
#endif

/* A block descriptor as the producer holds it between its load and its use. */
struct bk_desc {
    int4 d;   /* slot, block, valid, dtype */
    float2 s; /* k_scale, v_scale */
};

/* Running state of a consumer lane: rows 2t, 2t + 1 (max, sum), O^T tiles. */
template <int D> struct bk_state {
    float m0, m1, l0, l1;
    float o[D / 64][4][4];
};

/* Elements e0 .. e0 + 7 of plain staged row `row` as 4 BF16 pairs (zeros
 * when !keep). */
template <int D, bool F8>
static __device__ __forceinline__ void bk_row8(const uint8_t *st, int row, int e0, bool fp8,
                                               bool keep, const uint16_t *lut, uint32_t *w)
{
    const uint8_t *p = st + (size_t)row * (D * 2);
    if (!F8 || !fp8) {
        const uint4 u = *reinterpret_cast<const uint4 *>(p + 2 * e0);
        w[0] = u.x;
        w[1] = u.y;
        w[2] = u.z;
        w[3] = u.w;
    } else {
        const uint2 u = *reinterpret_cast<const uint2 *>(p + e0);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t src = i < 2 ? u.x : u.y;
            const int sh = (i & 1) * 16;
            w[i] = (uint32_t)lut[(src >> sh) & 0xffu] |
                   ((uint32_t)lut[(src >> (sh + 8)) & 0xffu] << 16);
        }
    }
    if (!keep)
        w[0] = w[1] = w[2] = w[3] = 0u;
}

/* One staged group: S^T = K Q^T, online softmax, O^T += V^T P^T.
 * e0, e1: header entries of tokens g and g + 8; f8: the group's FP8 tokens;
 * vis: the tokens some row sees (PART: not all 16, zero the others' V). */
template <int D, bool F8, bool PART>
static __device__ __forceinline__ void bk_group(const uint8_t *st, const uint4 *qf, uint4 e0,
                                                uint4 e1, unsigned f8, unsigned vis,
                                                float qscale, const uint16_t *lut, int g, int t,
                                                bk_state<D> &S)
{
    constexpr int NJ = D / 32, NC = D / 64;
    float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bool kf0 = F8 && ((f8 >> g) & 1u), kf1 = F8 && ((f8 >> (g + 8)) & 1u);
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        uint32_t w[4], x[4];
        bk_row8<D, F8>(st, g, 32 * j + 8 * t, kf0, true, lut, w);
        bk_row8<D, F8>(st, g + 8, 32 * j + 8 * t, kf1, true, lut, x);
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
        mx0 = fmaxf(mx0, __shfl_xor_sync(SW_BK_FULL, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(SW_BK_FULL, mx1, off));
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
    /* this lane's V rows: tokens 2t, 2t + 1, 2t + 8, 2t + 9 */
    const bool vf0 = F8 && ((f8 >> (2 * t)) & 1u), vf1 = F8 && ((f8 >> (2 * t + 1)) & 1u);
    const bool vf2 = F8 && ((f8 >> (2 * t + 8)) & 1u), vf3 = F8 && ((f8 >> (2 * t + 9)) & 1u);
    const bool k0 = !PART || ((vis >> (2 * t)) & 1u), k1 = !PART || ((vis >> (2 * t + 1)) & 1u);
    const bool k2 = !PART || ((vis >> (2 * t + 8)) & 1u),
               k3 = !PART || ((vis >> (2 * t + 9)) & 1u);
#pragma unroll
    for (int cc = 0; cc < NC; cc++) {
        uint32_t va[4], vb[4], vc[4], vd[4];
        const int el = 64 * cc + 8 * g;
        bk_row8<D, F8>(st, 16 + 2 * t, el, vf0, k0, lut, va);
        bk_row8<D, F8>(st, 17 + 2 * t, el, vf1, k1, lut, vb);
        bk_row8<D, F8>(st, 24 + 2 * t, el, vf2, k2, lut, vc);
        bk_row8<D, F8>(st, 25 + 2 * t, el, vf3, k3, lut, vd);
#pragma unroll
        for (int i2 = 0; i2 < 4; i2++) {
            float *acc = S.o[cc][i2];
            acc[0] *= cr0;
            acc[1] *= cr1;
            acc[2] *= cr0;
            acc[3] *= cr1;
            mma16816(acc, __byte_perm(va[i2], vb[i2], 0x5410), __byte_perm(va[i2], vb[i2], 0x7632),
                     __byte_perm(vc[i2], vd[i2], 0x5410), __byte_perm(vc[i2], vd[i2], 0x7632),
                     pb0, pb1);
        }
    }
}

/* -------------------------------------------------------------- tile -- */
/* ns: stages of the ring (1 .. SW_BK_NS_MAX, the launcher's choice). */
template <int D>
__global__ void __launch_bounds__(SW_BK_NT, 1)
    swap_tile_bulk_kernel(const sw_cuda_swap_tile_args a, const int ns)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int NJ = D / 32, NC = D / 64;
    constexpr size_t STAGE = bk_geo<D>::STAGE;
    extern __shared__ __align__(128) uint8_t smem[];
    uint16_t *lut = reinterpret_cast<uint16_t *>(smem);
    float *wm = reinterpret_cast<float *>(smem + SW_BK_WM);
    float *wl = reinterpret_cast<float *>(smem + SW_BK_WL);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + SW_BK_BAR);
    uint64_t *empty = full + SW_BK_NS_MAX;
    uint8_t *ring = smem + SW_BK_HEAD;                /* ns stages */
    uint4 *hdr = reinterpret_cast<uint4 *>(ring + (size_t)ns * STAGE); /* ns x 16 entries */

    const int c = blockIdx.x, h = blockIdx.y, y = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3, tk = lane & 15;
    const int32_t B = a.B, G = a.G;
    const int b0 = (int)((int64_t)a.nblk * c / a.nchunks);
    const int b1 = (int)((int64_t)a.nblk * (c + 1) / a.nchunks);
    const int ntok = (b1 - b0) * B;
    const int rows = a.ql * G;
    const int ngr = (ntok + 15) / 16;

    bk_state<D> S;
    S.m0 = S.m1 = -INFINITY;
    S.l0 = S.l1 = 0.0f;
#pragma unroll
    for (int cc = 0; cc < NC; cc++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                S.o[cc][i][e] = 0.0f;

    if (warp == 0) {
        /* ------------------------------------------------- producer -- */
        /* Row n sees key position p when p - kbase <= rl[n] (INT_MIN: no
         * such row). */
        const long long kbase = a.causal ? a.len - a.ql : a.len - 1;
        int rl[8];
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const int r = y * 8 + n;
            rl[n] = r >= rows ? INT_MIN : a.causal ? r / G : 0;
        }
        /* Descriptor of token tk of group i (lanes tk and tk + 16 hold the
         * same one); past the range: zeros, the token is dropped by j < ntok. */
        auto load_desc = [&](int i) -> bk_desc {
            const int j = i * 16 + tk;
            bk_desc r;
            if (i < ngr && j < ntok) {
                const int4 *p = reinterpret_cast<const int4 *>(a.blk + b0 + j / B);
                r.d = __ldg(p);
                r.s = __ldg(reinterpret_cast<const float2 *>(p + 1));
            } else {
                r.d = make_int4(0, 0, 0, 0);
                r.s = make_float2(0.0f, 0.0f);
            }
            return r;
        };
        bk_desc q0 = load_desc(0), q1 = load_desc(1), q2 = load_desc(2), q3 = load_desc(3);
        if (lane == 0) {
            for (int s = 0; s < ns; s++) {
                bk_bar_init(&full[s], 1u);
                bk_bar_init(&empty[s], 1u);
            }
            /* visible to the consumers (named barrier 1) and to the async
             * proxy that completes the copies' transactions */
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        }
        __syncwarp();
        /* the consumers wait there for the barriers; the producer goes on
         * (its first copies need not wait for their Q loads) */
        asm volatile("bar.arrive 1, %0;\n" ::"n"(SW_BK_NT) : "memory");
        const bool isv = lane >= 16;
        for (int i = 0; i < ngr; i++) {
            const bk_desc dc = q0;
            q0 = q1;
            q1 = q2;
            q2 = q3;
            q3 = load_desc(i + SW_BK_PD);
            const int s = i % ns, r = i / ns;
            if (r > 0)
                bk_bar_wait(&empty[s], (unsigned)(r - 1) & 1u);
            const int j = i * 16 + tk;
            const int tt = j % B;
            const bool ok = j < ntok && tt < dc.d.z;
            const bool fp8 = ok && dc.d.w != 0;
            long long dp = (long long)dc.d.y * B + tt - kbase;
            dp = dp > INT_MAX ? INT_MAX : dp < INT_MIN + 1 ? INT_MIN + 1 : dp;
            unsigned mask = 0;
#pragma unroll
            for (int n = 0; n < 8; n++)
                mask |= (ok && (int)dp <= rl[n]) ? 1u << n : 0u;
            const unsigned vis = __ballot_sync(SW_BK_FULL, mask != 0) & 0xffffu;
            const unsigned f8 = __ballot_sync(SW_BK_FULL, fp8) & 0xffffu;
            uint4 *hd = hdr + (size_t)s * 16;
            if (lane < 16)
                hd[lane] = make_uint4(mask, __float_as_uint(dc.s.x), __float_as_uint(dc.s.y),
                                      lane == 0 ? (vis | (f8 << 16)) : 0u);
            /* This lane's row (K of token tk, or its V) is copied when some
             * row sees the token. It continues the previous lane's run when
             * both are BF16 rows of one block, consecutive in the pool and
             * in the stage: then the run's first lane copies it. */
            const bool ld = mask != 0;
            const unsigned long long src =
                (unsigned long long)dc.d.x * a.slot_bytes + (isv ? a.v_off : 0) +
                ((unsigned long long)h * B + (unsigned long long)tt) * D * (fp8 ? 1u : 2u);
            const unsigned long long psrc = __shfl_up_sync(SW_BK_FULL, src, 1);
            const unsigned pok = __shfl_up_sync(SW_BK_FULL, (unsigned)(ld && !fp8), 1);
            const bool cont = tk > 0 && ld && !fp8 && pok && psrc + D * 2 == src;
            const unsigned run = __ballot_sync(SW_BK_FULL, cont);
            /* run length: this start lane and the continuing lanes after it */
            const unsigned after = ~run & ~((2u << lane) - 1u); /* lanes > lane not continuing */
            const int stop = after ? __ffs(after) - 1 : 32;
            const int nrow = (ld && !cont) ? stop - lane : 0;
            const unsigned bytes = fp8 ? (unsigned)D : (unsigned)nrow * D * 2;
            const unsigned mine = (ld && !cont) ? bytes : 0u;
            const unsigned total = __reduce_add_sync(SW_BK_FULL, mine);
            __syncwarp(); /* the header entries are written */
            if (lane == 0)
                bk_bar_arrive_tx(&full[s], total);
            __syncwarp();
            if (mine)
                bk_copy(ring + (size_t)s * STAGE + (size_t)lane * (D * 2), a.pool + src, mine,
                        &full[s]);
        }
    } else {
        /* ------------------------------------------------- consumers -- */
        for (int i = tid - 32; i < 256; i += SW_BK_NT - 32)
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
        /* the barriers are initialised, the table written */
        asm volatile("bar.sync 1, %0;\n" ::"n"(SW_BK_NT) : "memory");
        for (int i = warp - 1; i < ngr; i += SW_BK_NCW) {
            const int s = i % ns, r = i / ns;
            bk_bar_wait(&full[s], (unsigned)r & 1u);
            const uint4 *hd = hdr + (size_t)s * 16;
            const unsigned sum = hd[0].w, vis = sum & 0xffffu;
            if (vis) { /* warp-uniform: some row sees some token */
                const uint8_t *st = ring + (size_t)s * STAGE;
                const uint4 e0 = hd[g], e1 = hd[g + 8];
                const unsigned f8 = sum >> 16;
                if (f8)
                    bk_group<D, true, true>(st, qf, e0, e1, f8, vis, a.qscale, lut, g, t, S);
                else if (vis != 0xffffu)
                    bk_group<D, false, true>(st, qf, e0, e1, 0u, vis, a.qscale, lut, g, t, S);
                else
                    bk_group<D, false, false>(st, qf, e0, e1, 0u, vis, a.qscale, lut, g, t, S);
            }
            __syncwarp(); /* every lane is done with the stage */
            if (lane == 0)
                bk_bar_arrive(&empty[s]);
        }
    }

    /* ---- combine the warps' states into the CTA's partial (the producer
     * adds nothing: m = -inf) ---- */
    tile_partial_out<D>(S.o, S.m0, S.m1, S.l0, S.l1, wm, wl, reinterpret_cast<float *>(ring), a);
#else
    (void)a;
    (void)ns;
#endif
}

/* Stages for head_dim D on the current device (0: no instance: before
 * sm_90, or too little shared memory for the epilogue's [9][8][D] fp32
 * sums); the kernel's attribute is set once per device. */
template <int D> static sw_status bulk_stages(int *ns)
{
    static volatile int cached[64];
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 64 && cached[dev]) {
        *ns = cached[dev] - 1;
        return SW_OK;
    }
    int major = 0, optin = 0;
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    constexpr size_t per = bk_geo<D>::STAGE + bk_geo<D>::HDR;
    long long n = ((long long)optin - SW_BK_HEAD) / (long long)per;
    n = n > bk_geo<D>::NS ? bk_geo<D>::NS : n < 0 ? 0 : n;
    if (major < 9 || (size_t)n * bk_geo<D>::STAGE < (size_t)(SW_BK_NCW + 1) * 8 * D * sizeof(float))
        n = 0;
    if (n > 0)
        SW_CUDA_CHECK(cudaFuncSetAttribute(swap_tile_bulk_kernel<D>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)(SW_BK_HEAD + (size_t)n * per)));
    if (dev < 64)
        cached[dev] = (int)n + 1;
    *ns = (int)n;
    return SW_OK;
}

template <int D> static sw_status launch_bulk(const sw_cuda_swap_tile_args *a, cudaStream_t st,
                                              int *launched)
{
    int ns = 0;
    *launched = 0;
    SW_TRY(bulk_stages<D>(&ns));
    if (ns < 1)
        return SW_OK;
    const size_t smem = SW_BK_HEAD + (size_t)ns * (bk_geo<D>::STAGE + bk_geo<D>::HDR);
    dim3 grid((unsigned)a->nchunks, (unsigned)a->H, (unsigned)a->nrg);
    swap_tile_bulk_kernel<D><<<grid, SW_BK_NT, smem, st>>>(*a, ns);
    SW_CUDA_CHECK(cudaGetLastError());
    *launched = 1;
    return SW_OK;
}

/* Called by sw_cuda_swap_tile (swap_tile.cu) for kernel 3; *launched = 0
 * when this device or head_dim has no instance. */
extern "C" sw_status sw_cuda_swap_tile_bulk(const sw_cuda_swap_tile_args *a, void *stream,
                                            int *launched)
{
    cudaStream_t st = (cudaStream_t)stream;
    *launched = 0;
    switch (a->D) {
    case 64: return launch_bulk<64>(a, st, launched);
    case 128: return launch_bulk<128>(a, st, launched);
    case 256: return launch_bulk<256>(a, st, launched);
    default: return SW_OK;
    }
}
