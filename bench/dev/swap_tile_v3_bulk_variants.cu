/* bench/dev/swap_tile_v3_bulk_variants.cu - swap tile kernel variant 3: the
 * bulk-copy kernel (src/cuda/swap/swap_tile_bulk.cu, the library's variant
 * 0 of it) with its measured variants as template bits (bench/dev/README.md):
 * the descriptor-window variant SW_BK_V_FIX, once the library's opt-in
 * (SW_KNOB_BULK_VARIANT=1: faster on the bench tile, but a launch failure
 * at 32768 blocks and one out-of-tolerance run on the H200), and the
 * diagnostic ones swap_stream_probe.cu times. Not built by default;
 * swap_stream_probe.cu includes it. Its launcher picks SW_BK_V_FIX when
 * sw_bk_variant (below) is 1.
 *
 * Bulk-copy tile kernel of the swap engine's device pool (sm_90 and later). Same contract and
 * partial-state layout as swap_tile.cu / swap_tile_stream.cu: CTA (block
 * range c, kv head h, row group y of 8 (query row, group head) pairs)
 * writes the (max, sum, acc) state of its 8 rows over its range into a.part,
 * swap_merge_kernel folds the partials.
 *
 * Why another kernel: kernel 2 (swap_tile_stream.cu) streams at ~2 TB/s on
 * the H200 (1780-1815 GB/s iso, 2012 back to back; bench/results/
 * the log added in 0e4f8bf) with ~128 KiB of cp.async in flight per SM on
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
 *   registers, so their global round trip is not on the issue path (with
 *   an empty HBM queue; behind the ~27 MiB the rings keep queued it may
 *   well be: the variant SW_BK_V_DWIN, below, takes the CTA's descriptors
 *   into shared memory with one bulk copy at the start instead).
 * Stages are plain rows (D BF16 or D E4M3 bytes at a 2D-byte stride; a bulk
 * copy cannot swizzle): the K fragment loads meet 2-way bank conflicts, V's
 * none; a few % of the SM's shared-memory bandwidth at HBM rate. Rows of
 * tokens no row sees hold stale or never written bytes (possibly NaN): the
 * S values of such tokens are replaced by -inf and, in a group with any
 * such token, their V rows are read as zeros (0 x NaN would poison O). */
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

#include "cuda/swap/swap_mma_common.cuh"

#define SW_BK_FULL 0xffffffffu
#define SW_BK_NS_MAX 64             /* stages (mbarrier pairs in the head) */
#define SW_BK_PD 4                  /* groups of descriptors ahead */
#define SW_BK_DW_MAX 256            /* blocks of a descriptor window (8 KiB) */
/* head: FP8 table (512 B), per-warp m and l ([16][8] floats each), full and
 * empty mbarriers ([SW_BK_NS_MAX] each; the last full one is the descriptor
 * window's, so at most SW_BK_NS_MAX - 1 stages) */
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

/* Kernel variants (template V, bits). The library runs 0; this file runs
 * SW_BK_V_FIX where a CTA's blocks fit the descriptor window when
 * sw_bk_variant = 1 (once the library's opt-in SW_KNOB_BULK_VARIANT=1);
 * the others exist for
 * bench/dev/swap_stream_probe.cu, which instantiates them to find where the
 * all-resident stream stops at ~2.1 TB/s (H200; docs/perf/swap.md):
 * - DWIN: the CTA's block descriptors (<= SW_BK_DW_MAX) come in with one
 *   bulk copy at the start into shared memory, instead of a global load
 *   4 groups ahead that waits behind the HBM queue the ring itself fills;
 * - NOMATH: consumers release each stage unread (memory + producer ceiling);
 * - L2SRC: every group copies its lane's rows of the CTA's first group
 *   (L2-resident: producer + consumer ceiling without HBM);
 * - CONTIG: no block table: group i of CTA (c, h) is the i-th 16 KiB of a
 *   contiguous region of the pool (BF16, B = 16 only: the bench tile);
 * - CTA2: 4 consumer warps, 2 CTAs per SM (launch bounds), the launcher's
 *   half ring each;
 * - PROD2: two producer warps, even and odd groups;
 * - NODIV (with DWIN): the producer steps its token's (block, offset) and
 *   its (stage, round) instead of 3 integer divisions by run-time values
 *   per group (~70 of the loop's ~250 SASS instructions, dependent chains
 *   through MUFU.RCP), which the one producer warp pays between copies.
 * SW_BK_V_FIX = DWIN | NODIV is the library's variant 1 (H200, bench tile,
 * in the probe, the log added in 4a79b8e: iso 2056 GB/s
 * against 1840 for 0, back to back 2483 against 2125, bit-identical output). DWIN | PROD2 |
 * NODIV passed swap_tile_check's 24 random cases but failed with a launch
 * error on the bench tile (its fix log, 0e4f8bf): PROD2 is for the
 * probe only until that is understood. */
#define SW_BK_V_DWIN 1
#define SW_BK_V_NOMATH 2
#define SW_BK_V_L2SRC 4
#define SW_BK_V_CONTIG 8
#define SW_BK_V_CTA2 16
#define SW_BK_V_PROD2 32
#define SW_BK_V_NODIV 64
/* sw_bk_variant = 1 (once the library's SW_KNOB_BULK_VARIANT=1) */
#define SW_BK_V_FIX (SW_BK_V_DWIN | SW_BK_V_NODIV)
template <int V> struct bk_var {
    static_assert(!(V & SW_BK_V_NODIV) || (V & SW_BK_V_DWIN), "NODIV reads the window");
    static constexpr int NCW = (V & SW_BK_V_CTA2) ? 4 : 8; /* consumer warps */
    static constexpr int NP = (V & SW_BK_V_PROD2) ? 2 : 1; /* producer warps */
    static constexpr int NT = (NCW + NP) * 32;
    static constexpr int MINB = (V & SW_BK_V_CTA2) ? 2 : 1;
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

/* -------------------------------------------------------------- tile -- */
/* ns: stages of the ring (1 .. SW_BK_NS_MAX - 1, the launcher's choice). */
template <int D, int V>
__global__ void __launch_bounds__(bk_var<V>::NT, bk_var<V>::MINB)
    swap_tile_bulk_kernel(const sw_cuda_swap_tile_args a, const int ns)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int NJ = D / 32;
    constexpr size_t STAGE = bk_geo<D>::STAGE;
    constexpr int NCW = bk_var<V>::NCW, NP = bk_var<V>::NP, NT = bk_var<V>::NT;
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

    tile_state<D> S;
    tile_state_init(S);

    if (NP == 1 ? warp == 0 : warp < NP) {
        /* ------------------------------------------------- producer -- */
        const int pw = NP > 1 ? warp : 0; /* this warp's groups: pw, pw + NP, ... */
        /* Row n sees key position p when p - kbase <= rl[n] */
        const long long kbase = a.causal ? a.len - a.ql : a.len - 1;
        int rl[8];
        tile_row_limits(y, rows, G, a.causal, rl);
        /* DWIN: the range's descriptors, after the headers */
        const sw_cuda_swap_blk *dw =
            reinterpret_cast<const sw_cuda_swap_blk *>(hdr + (size_t)ns * 16);
        uint64_t *dbar = full + SW_BK_NS_MAX - 1;
        /* Descriptor of token tk of group i (lanes tk and tk + 16 hold the
         * same one); past the range: zeros, the token is dropped by j < ntok. */
        auto load_desc = [&](int i) -> tile_desc {
            const int j = i * 16 + tk;
            tile_desc r;
            if (i < ngr && j < ntok) {
                if constexpr ((V & SW_BK_V_CONTIG) != 0) {
                    r.d = make_int4(0, b0 + j / B, B, 0);
                    r.s = make_float2(1.0f, 1.0f);
                } else if constexpr ((V & SW_BK_V_DWIN) != 0) {
                    const int4 *p = reinterpret_cast<const int4 *>(dw + j / B);
                    r.d = *p;
                    r.s = *reinterpret_cast<const float2 *>(p + 1);
                } else {
                    r = tile_load_desc(a.blk, b0 + j / B, true);
                }
            } else {
                r = tile_load_desc(a.blk, 0, false);
            }
            return r;
        };
        constexpr bool REGQ = (V & (SW_BK_V_DWIN | SW_BK_V_CONTIG)) == 0; /* loads ahead */
        constexpr bool NODIV = (V & SW_BK_V_NODIV) != 0;
        tile_desc q0, q1, q2, q3;
        if constexpr (REGQ) {
            q0 = load_desc(pw);
            q1 = load_desc(pw + NP);
            q2 = load_desc(pw + 2 * NP);
            q3 = load_desc(pw + 3 * NP);
        }
        if (NP == 1 || warp == 0) {
            if (lane == 0) {
                for (int s = 0; s < ns; s++) {
                    bk_bar_init(&full[s], 1u);
                    bk_bar_init(&empty[s], 1u);
                }
                if constexpr ((V & SW_BK_V_DWIN) != 0)
                    bk_bar_init(dbar, 1u);
                /* visible to the consumers (named barrier 1) and to the
                 * async proxy that completes the copies' transactions */
                asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                if constexpr ((V & SW_BK_V_DWIN) != 0) {
                    const unsigned db = (unsigned)(b1 - b0) * (unsigned)sizeof(sw_cuda_swap_blk);
                    bk_bar_arrive_tx(dbar, db);
                    bk_copy(const_cast<sw_cuda_swap_blk *>(dw), a.blk + b0, db, dbar);
                }
            }
            __syncwarp();
        }
        /* PROD2: warp 1 waits for the barriers' init on a barrier of the
         * two producer warps only, not for the consumers' Q loads */
        if constexpr (NP > 1)
            asm volatile("bar.sync 2, %0;\n" ::"n"(NP * 32) : "memory");
        /* the consumers wait there for the barriers; the producer goes on
         * (its first copies need not wait for their Q loads) */
        asm volatile("bar.arrive 1, %0;\n" ::"n"(NT) : "memory");
        if constexpr ((V & SW_BK_V_DWIN) != 0)
            bk_bar_wait(dbar, 0u);
        const bool isv = lane >= 16;
        unsigned long long src0 = 0;
        /* NODIV: token j = i * 16 + tk of group i as block jq, offset jt
         * of the range, and group i's stage cs, round cr, stepped */
        int jq = 0, jt = 0, sq = 0, sr = 0, cs = 0, cr = 0;
        if constexpr (NODIV) {
            jq = (pw * 16 + tk) / B;
            jt = (pw * 16 + tk) % B;
            sq = 16 * NP / B;
            sr = 16 * NP % B;
            cs = pw % ns;
            cr = pw / ns;
        }
        for (int i = pw; i < ngr; i += NP) {
            tile_desc dc;
            if constexpr (REGQ) {
                dc = q0;
                q0 = q1;
                q1 = q2;
                q2 = q3;
                q3 = load_desc(i + SW_BK_PD * NP);
            } else if constexpr (NODIV) {
                if (i * 16 + tk < ntok) {
                    const int4 *p = reinterpret_cast<const int4 *>(dw + jq);
                    dc.d = *p;
                    dc.s = *reinterpret_cast<const float2 *>(p + 1);
                } else {
                    dc.d = make_int4(0, 0, 0, 0);
                    dc.s = make_float2(0.0f, 0.0f);
                }
            } else {
                dc = load_desc(i);
            }
            const int s = NODIV ? cs : i % ns, r = NODIV ? cr : i / ns;
            if (r > 0)
                bk_bar_wait(&empty[s], (unsigned)(r - 1) & 1u);
            const int j = i * 16 + tk;
            const int tt = NODIV ? jt : j % B;
            bool fp8;
            const unsigned mask = tile_token_header(dc, j < ntok && tt < dc.d.z, tt, B, kbase, rl,
                                                    hdr + (size_t)s * 16, lane, &fp8);
            /* This lane's row (K of token tk, or its V) is copied when some
             * row sees the token. It continues the previous lane's run when
             * both are BF16 rows of one block, consecutive in the pool and
             * in the stage: then the run's first lane copies it. */
            const bool ld = mask != 0;
            unsigned long long src =
                (unsigned long long)dc.d.x * a.slot_bytes + (isv ? a.v_off : 0) +
                ((unsigned long long)h * B + (unsigned long long)tt) * D * (fp8 ? 1u : 2u);
            if constexpr ((V & SW_BK_V_CONTIG) != 0)
                src = ((unsigned long long)b0 * a.H + (unsigned long long)h * (b1 - b0)) *
                          (unsigned long long)B * (4 * D) +
                      (unsigned long long)i * STAGE + (unsigned long long)lane * (D * 2);
            if constexpr ((V & SW_BK_V_L2SRC) != 0) {
                if (i == pw)
                    src0 = src;
                src = src0;
            }
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
            if constexpr (NODIV) {
                jq += sq;
                jt += sr;
                if (jt >= B) {
                    jt -= B;
                    jq++;
                }
                for (cs += NP; cs >= ns; cs -= ns)
                    cr++;
            }
        }
        (void)src0;
        (void)jq;
        (void)jt;
        (void)sq;
        (void)sr;
        (void)cs;
        (void)cr;
    } else {
        /* ------------------------------------------------- consumers -- */
        for (int i = tid - 32 * NP; i < 256; i += NT - 32 * NP)
            lut[i] = __bfloat16_as_ushort(__float2bfloat16_rn(e4m3_f32((uint32_t)i)));
        uint4 qf[NJ];
        tile_q_frags<D>(a.q, a.Hq, rows, G, y, h, g, t, qf);
        /* the barriers are initialised, the table written */
        asm volatile("bar.sync 1, %0;\n" ::"n"(NT) : "memory");
        for (int i = warp - NP; i < ngr; i += NCW) {
            const int s = i % ns, r = i / ns;
            bk_bar_wait(&full[s], (unsigned)r & 1u);
            const uint4 *hd = hdr + (size_t)s * 16;
            const unsigned sum = hd[0].w, vis = sum & 0xffffu;
            if ((V & SW_BK_V_NOMATH) == 0 && vis) { /* warp-uniform: some row sees some token */
                const uint8_t *st = ring + (size_t)s * STAGE;
                const uint4 e0 = hd[g], e1 = hd[g + 8];
                const unsigned f8 = sum >> 16;
                if (f8)
                    tile_group<D, true, true, false>(st, qf, e0, e1, f8, vis, a.qscale, lut, g,
                                                     t, S);
                else if (vis != 0xffffu)
                    tile_group<D, false, true, false>(st, qf, e0, e1, 0u, vis, a.qscale, lut, g,
                                                      t, S);
                else
                    tile_group<D, false, false, false>(st, qf, e0, e1, 0u, vis, a.qscale, lut,
                                                       g, t, S);
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
    __trap(); /* no sm_90 code in this build: the launcher never gets here */
#endif
}

/* Shared memory of variant V with ns stages. */
template <int D, int V> static constexpr size_t bulk_smem(int ns)
{
    return SW_BK_HEAD + (size_t)ns * (bk_geo<D>::STAGE + bk_geo<D>::HDR) +
           ((V & SW_BK_V_DWIN) ? (size_t)SW_BK_DW_MAX * sizeof(sw_cuda_swap_blk) : 0);
}

/* Stages of variant V for head_dim D on the current device, with `per`
 * CTAs per SM sharing its shared memory (0: no instance: before sm_90, or
 * too little shared memory for the epilogue's [warps][8][D] fp32 sums); the
 * kernel's attribute is set once per device (`cache`, one per instance). */
template <int D, int V> static sw_status bulk_stages_per(int per, volatile int *cache, int *ns)
{
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 64 && cache[dev]) {
        *ns = cache[dev] - 1;
        return SW_OK;
    }
    int major = 0, optin = 0, sm = 0, rsv = 0;
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    SW_CUDA_CHECK(
        cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&rsv, cudaDevAttrReservedSharedMemoryPerBlock, dev));
    long long budget = per > 1 ? (long long)sm / per - rsv : optin;
    budget = budget > optin ? optin : budget;
    constexpr size_t per_st = bk_geo<D>::STAGE + bk_geo<D>::HDR;
    long long n = (budget - (long long)bulk_smem<D, V>(0)) / (long long)per_st;
    n = n > bk_geo<D>::NS ? bk_geo<D>::NS : n < 0 ? 0 : n;
    n = n > SW_BK_NS_MAX - 1 ? SW_BK_NS_MAX - 1 : n;
    constexpr size_t sums = (size_t)(bk_var<V>::NCW + bk_var<V>::NP) * 8 * D * sizeof(float);
    if (major < 9 || (size_t)n * bk_geo<D>::STAGE < sums)
        n = 0;
    if (n > 0)
        SW_CUDA_CHECK(cudaFuncSetAttribute(swap_tile_bulk_kernel<D, V>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)bulk_smem<D, V>((int)n)));
    if (dev < 64)
        cache[dev] = (int)n + 1;
    *ns = (int)n;
    return SW_OK;
}

/* Launches variant V with its stages for `per` CTAs per SM; *launched = 0
 * when it has no instance here. */
template <int D, int V>
static sw_status launch_bulk_v(const sw_cuda_swap_tile_args *a, cudaStream_t st, int per,
                               int *launched)
{
    static volatile int cached[64];
    int ns = 0;
    *launched = 0;
    SW_TRY((bulk_stages_per<D, V>(per, cached, &ns)));
    if (ns < 1)
        return SW_OK;
    dim3 grid((unsigned)a->nchunks, (unsigned)a->H, (unsigned)a->nrg);
    swap_tile_bulk_kernel<D, V><<<grid, bk_var<V>::NT, bulk_smem<D, V>(ns), st>>>(*a, ns);
    SW_CUDA_CHECK(cudaGetLastError());
    *launched = 1;
    return SW_OK;
}

static int sw_bk_variant = 0; /* 1: SW_BK_V_FIX where a CTA's blocks fit the window */

template <int D> static sw_status launch_bulk(const sw_cuda_swap_tile_args *a, cudaStream_t st,
                                              int *launched)
{
    /* the window holds the longest range of blocks a CTA gets */
    const int64_t most = ((int64_t)a->nblk + a->nchunks - 1) / a->nchunks + 1;
    if (sw_bk_variant == 1 && most <= SW_BK_DW_MAX)
        return launch_bulk_v<D, SW_BK_V_FIX>(a, st, 1, launched);
    return launch_bulk_v<D, 0>(a, st, 1, launched);
}

extern "C" void sw_cuda_swap_tile_bulk_preload(int32_t D)
{
    (void)tile_head_dim_call(D, [&](auto d) {
        sw_swap_preload_fn(swap_tile_bulk_kernel<decltype(d)::value, 0>);
        sw_swap_preload_fn(swap_tile_bulk_kernel<decltype(d)::value, SW_BK_V_FIX>);
        return SW_OK;
    });
}

/* Called by sw_cuda_swap_tile (swap_tile.cu) for kernel 3; *launched = 0
 * when this device or head_dim has no instance. */
extern "C" sw_status sw_cuda_swap_tile_bulk(const sw_cuda_swap_tile_args *a, void *stream,
                                            int *launched)
{
    *launched = 0;
    return tile_head_dim_call(a->D, [&](auto d) {
        return launch_bulk<decltype(d)::value>(a, (cudaStream_t)stream, launched);
    });
}
