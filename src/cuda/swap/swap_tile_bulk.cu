/* Bulk-copy tile kernel of the swap engine's device pool
 * (the tile kernel on sm_90 and later; swap_tile.cu). Same contract and
 * partial-state layout as swap_tile_stream.cu: CTA (block
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
 *   well be: the descriptor-window variant in bench/dev takes the CTA's
 *   descriptors into shared memory with one bulk copy at the start
 *   instead, faster but with a race not found yet).
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
#include "swap_carve.cuh"
#include <cuda_runtime.h>
#include <climits>
#include <math.h>
#include <stdint.h>

#include "cuda/swap/swap_mma_common.cuh"

#define SW_BK_FULL 0xffffffffu
#define SW_BK_NS_MAX 64             /* stages (mbarrier pairs in the head) */
#define SW_BK_PD 4                  /* groups of descriptors ahead */
/* head: FP8 table (512 B), per-warp m and l ([16][8] floats each), full and
 * empty mbarriers ([SW_BK_NS_MAX] each; at most SW_BK_NS_MAX - 1 stages, as
 * the variants with a descriptor window's barrier had) */
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

/* warps: one producer, NCW consumers (bench/dev/swap_tile_v3_bulk_variants.cu
 * holds the variants measured against this shape: 2 producers, 2 CTAs an SM
 * with 4 consumers, descriptors in shared memory, ...) */
#define SW_BK_NCW 8
#define SW_BK_NT ((SW_BK_NCW + 1) * 32)

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
template <int D>
__global__ void __launch_bounds__(SW_BK_NT, 1)
    swap_tile_bulk_kernel(const sw_cuda_swap_tile_args a, const int ns)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int NJ = D / 32;
    constexpr size_t STAGE = bk_geo<D>::STAGE;
    constexpr int NCW = SW_BK_NCW, NT = SW_BK_NT;
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

    if (warp == 0) {
        /* ------------------------------------------------- producer -- */
        /* Row n sees key position p when p - kbase <= rl[n] */
        const long long kbase = a.causal ? a.len - a.ql : a.len - 1;
        int rl[8];
        tile_row_limits(y, rows, G, a.causal, rl);
        /* Descriptor of token tk of group i (lanes tk and tk + 16 hold the
         * same one); past the range: zeros, the token is dropped by j < ntok. */
        auto load_desc = [&](int i) -> tile_desc {
            const int j = i * 16 + tk;
            tile_desc r;
            if (i < ngr && j < ntok)
                r = tile_load_desc(a.blk, b0 + j / B, true);
            else
                r = tile_load_desc(a.blk, 0, false);
            return r;
        };
        /* descriptors loaded SW_BK_PD groups ahead */
        tile_desc q0 = load_desc(0), q1 = load_desc(1), q2 = load_desc(2), q3 = load_desc(3);
        if (lane == 0) {
            for (int s = 0; s < ns; s++) {
                bk_bar_init(&full[s], 1u);
                bk_bar_init(&empty[s], 1u);
            }
            /* visible to the consumers (named barrier 1) and to the
             * async proxy that completes the copies' transactions */
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        }
        __syncwarp();
        /* the consumers wait there for the barriers; the producer goes on
         * (its first copies need not wait for their Q loads) */
        asm volatile("bar.arrive 1, %0;\n" ::"n"(NT) : "memory");
        const bool isv = lane >= 16;
        for (int i = 0; i < ngr; i++) {
            const tile_desc dc = q0;
            q0 = q1;
            q1 = q2;
            q2 = q3;
            q3 = load_desc(i + SW_BK_PD);
            const int s = i % ns, r = i / ns;
            if (r > 0)
                bk_bar_wait(&empty[s], (unsigned)(r - 1) & 1u);
            const int j = i * 16 + tk;
            const int tt = j % B;
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
        for (int i = tid - 32; i < 256; i += NT - 32)
            lut[i] = __bfloat16_as_ushort(__float2bfloat16_rn(e4m3_f32((uint32_t)i)));
        uint4 qf[NJ];
        tile_q_frags<D>(a.q, a.Hq, rows, G, y, h, g, t, qf);
        /* the barriers are initialised, the table written */
        asm volatile("bar.sync 1, %0;\n" ::"n"(NT) : "memory");
        for (int i = warp - 1; i < ngr; i += NCW) {
            const int s = i % ns, r = i / ns;
            bk_bar_wait(&full[s], (unsigned)r & 1u);
            const uint4 *hd = hdr + (size_t)s * 16;
            const unsigned sum = hd[0].w, vis = sum & 0xffffu;
            if (vis) { /* warp-uniform: some row sees some token */
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

/* Shared memory with ns stages. */
template <int D> static constexpr size_t bulk_smem(int ns)
{
    return SW_BK_HEAD + (size_t)ns * (bk_geo<D>::STAGE + bk_geo<D>::HDR);
}

/* Stages for head_dim D on the current device (0: no instance: before
 * sm_90, or too little shared memory for the epilogue's [warps][8][D] fp32
 * sums); the kernel's attribute is set once per device (`cache`, one per
 * instance). One CTA an SM. */
template <int D> static sw_status bulk_stages(volatile int *cache, int *ns)
{
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 64 && cache[dev]) {
        *ns = cache[dev] - 1;
        return SW_OK;
    }
    int major = 0, optin = 0;
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    constexpr size_t per_st = bk_geo<D>::STAGE + bk_geo<D>::HDR;
    long long n = ((long long)optin - (long long)bulk_smem<D>(0)) / (long long)per_st;
    n = n > bk_geo<D>::NS ? bk_geo<D>::NS : n < 0 ? 0 : n;
    n = n > SW_BK_NS_MAX - 1 ? SW_BK_NS_MAX - 1 : n;
    constexpr size_t sums = (size_t)(SW_BK_NCW + 1) * 8 * D * sizeof(float);
    if (major < 9 || (size_t)n * bk_geo<D>::STAGE < sums)
        n = 0;
    if (n > 0)
        SW_CUDA_CHECK(cudaFuncSetAttribute(swap_tile_bulk_kernel<D>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)bulk_smem<D>((int)n)));
    if (dev < 64)
        cache[dev] = (int)n + 1;
    *ns = (int)n;
    return SW_OK;
}

/* Launches the kernel with its stages; *launched = 0 when it has no
 * instance here. */
template <int D>
static sw_status launch_bulk(const sw_cuda_swap_tile_args *a, cudaStream_t st, int *launched)
{
    static volatile int cached[64];
    int ns = 0;
    *launched = 0;
    SW_TRY(bulk_stages<D>(cached, &ns));
    if (ns < 1)
        return SW_OK;
    dim3 grid((unsigned)a->nchunks, (unsigned)a->H, (unsigned)a->nrg);
    swap_tile_bulk_kernel<D><<<grid, SW_BK_NT, bulk_smem<D>(ns), st>>>(*a, ns);
    SW_CUDA_CHECK(cudaGetLastError());
    *launched = 1;
    return SW_OK;
}

extern "C" void sw_cuda_swap_tile_bulk_preload(int32_t D)
{
    (void)tile_head_dim_call(D, [&](auto d) {
        sw_swap_preload_fn(swap_tile_bulk_kernel<decltype(d)::value>);
        return SW_OK;
    });
}

/* Called by sw_cuda_swap_tile (swap_tile.cu); *launched = 0 when this
 * device or head_dim has no instance. */
extern "C" sw_status sw_cuda_swap_tile_bulk(const sw_cuda_swap_tile_args *a, void *stream,
                                            int *launched)
{
    *launched = 0;
    return tile_head_dim_call(a->D, [&](auto d) {
        return launch_bulk<decltype(d)::value>(a, (cudaStream_t)stream, launched);
    });
}
