/* Tile shapes of the portable prefill kernel, one per head_dim.
 *
 * Every config uses a 64-key K/V tile and warps that each own whole 16-row
 * m-tiles; the Q tile height BM (the planner's tile_m, reported by
 * sw_cuda_prefill_portable_config) is per head_dim:
 *  - d64, d128: BM = 128, 4 warps x 32 rows. Two m-tiles per warp let each
 *    K/V fragment fetched by ldmatrix feed two mma's, halving shared-memory
 *    traffic per mma; at 16 rows per warp the K/V reads alone would need
 *    ~170 B/clk/SM at the sm_90 mma.sync rate against 128 B/clk available.
 *  - d256: BM = 64, 4 warps x 16 rows, two CTAs per SM. 32 rows per warp
 *    would need 256 fp32 accumulator registers per thread for O alone.
 * Q stays in registers only at d64: at d128 the 2x32 extra registers on top
 * of 128 (O) + 64 (S) would spill, so Q is re-read from shared memory per
 * k-step (FlashAttention-2 makes the same choice).
 *
 * Row layout in shared memory: d64/d128 pad each row by 16 bytes, so the 8
 * rows an ldmatrix phase reads fall in 8 different bank groups and every
 * ldmatrix address is a per-lane base plus an immediate (no per-k-step XOR
 * arithmetic in the unrolled loops). d256 uses the XOR swizzle instead
 * (conflict-free without padding): its 96 KB + static smem must fit the
 * 99 KB per-block limit of sm_86/sm_89/sm_120/sm_121, and padding would add
 * 3 KB.
 *
 * Shared memory: Q tile + one K tile + one V tile (FA2's schedule: V(j) loads
 * during S = QK^T, K(j-1) during softmax and PV): d64 36 KB, d128 68 KB,
 * d256 96 KB. d256 can also run with K and V sharing one buffer (64 KB),
 * chosen at run time from cudaDevAttrMaxSharedMemoryPerBlockOptin only
 * where the split buffers do not fit (no compiled target since v5).
 *
 * After the last K/V tile each item requests the next item's Q rows and
 * stages its O in the then idle K + V buffers (2 * BN >= BM rows); the
 * softmax skips the O rescale when no row max moved (portable_softmax.cuh).
 * Both measured faster on the H200 at every head_dim (docs/perf/prefill.md,
 * v4 and v5). */
#ifndef SW_CUDA_PORTABLE_CONFIG_CUH
#define SW_CUDA_PORTABLE_CONFIG_CUH

namespace sw_portable {

template <int D> struct cfg_base {
    static constexpr int HEAD_DIM = D;
    static constexpr int BN = 64;
    static constexpr int CPR = D / 8;             /* 16-byte chunks per row */
    static constexpr int ROW_BYTES = D * 2;
};

template <int D> struct cfg;

template <> struct cfg<64> : cfg_base<64> {
    /* MIN_CTAS = 3 (168 registers) spills ~400 bytes: Q fragments (32) +
     * O (64) + S (64) leave no room. */
    static constexpr int NWARPS = 4, MT = 2, MIN_CTAS = 2;
    static constexpr bool Q_IN_REGS = true, PAD = true, MAY_SHARE_KV = false;
};
template <> struct cfg<128> : cfg_base<128> {
    static constexpr int NWARPS = 4, MT = 2, MIN_CTAS = 2;
    static constexpr bool Q_IN_REGS = false, PAD = true, MAY_SHARE_KV = false;
};
/* d256: 64-row tiles so that two CTAs fit an SM (96 KB each) and one CTA's
 * item prologue (Q + first K tile) and epilogue overlap the other's mma's;
 * 8 warps x 16 rows with one 128 KB CTA per SM was 4..14% slower on the
 * H200 (docs/perf/prefill.md, v5). Per warp the tile work is unchanged. */
template <> struct cfg<256> : cfg_base<256> {
    static constexpr int NWARPS = 4, MT = 1, MIN_CTAS = 2;
    static constexpr bool Q_IN_REGS = false, PAD = false, MAY_SHARE_KV = true;
};

template <int D> struct traits : cfg<D> {
    using C = cfg<D>;
    static constexpr int NT = C::NWARPS * 32;         /* threads per CTA */
    static constexpr int RPW = C::MT * 16;            /* rows per warp */
    static constexpr int BM = C::NWARPS * RPW;        /* Q tile rows */
    static constexpr int PITCH = C::ROW_BYTES + (C::PAD ? 16 : 0); /* bytes per smem row */
    static constexpr int Q_BYTES = BM * PITCH;
    static constexpr int KV_BYTES = C::BN * PITCH;
    static constexpr int NS = C::BN / 8;              /* 8-key n-tiles of S */
    static constexpr int NO = D / 8;                  /* 8-column n-tiles of O */
    /* K/V tile copy: KV_TPR threads share a row, each taking KV_CPT chunks
     * KV_TPR apart (the same swizzle phase, so chunk j is at +j * KV_TPR * 16
     * bytes in both global and shared memory), for rows KV_ROW_STEP apart. */
    static constexpr int KV_TPR = C::CPR < NT / 8 ? C::CPR : NT / 8;
    static constexpr int KV_CPT = C::CPR / KV_TPR;
    static constexpr int KV_ROW_STEP = NT / KV_TPR;
    static constexpr int KV_LOADS = C::BN / KV_ROW_STEP;  /* rows per thread per tile */
    static constexpr int Q_LOADS = RPW * C::CPR / 32;     /* per lane, own rows only */
    static_assert(BM <= 128, "item_geom's pack divide is exact for rows < 128");
    static_assert(2 * C::BN >= BM, "the K + V buffers must hold a BM-row O stage");
    static_assert(KV_ROW_STEP % 8 == 0, "swizzle phase must not change across a thread's rows");
    static_assert(KV_CPT == 1 || KV_TPR % 8 == 0, "a thread's chunks must share a swizzle phase");
    static_assert(C::BN % KV_ROW_STEP == 0 && C::CPR % KV_TPR == 0,
                  "K/V tile must split evenly over threads");
    static_assert(32 % C::CPR == 0 || C::CPR == 32, "a lane's Q/O chunks share one column");

    /* Dynamic smem of a K/V mode (portable_launch.h); 0 if not compiled. */
    static constexpr int smem_bytes(int kv_mode)
    {
        return kv_mode == 0 ? Q_BYTES + 2 * KV_BYTES : (C::MAY_SHARE_KV ? Q_BYTES + KV_BYTES : 0);
    }
};

} // namespace sw_portable

#endif
