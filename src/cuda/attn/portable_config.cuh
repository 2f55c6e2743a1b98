/* Tile shapes of the portable prefill kernel, one per head_dim.
 *
 * Every config uses a 128-row Q tile (the tile_m the planner must use), a
 * 64-key K/V tile and warps that each own whole 16-row m-tiles:
 *  - d64, d128: 4 warps x 32 rows. Two m-tiles per warp let each K/V
 *    fragment fetched by ldmatrix feed two mma's, halving shared-memory
 *    traffic per mma; at 16 rows per warp the K/V reads alone would need
 *    ~170 B/clk/SM at the sm_90 mma.sync rate against 128 B/clk available.
 *  - d256: 8 warps x 16 rows. 32 rows would need 256 fp32 accumulator
 *    registers per thread for O alone.
 * Q stays in registers only at d64: at d128 the 2x32 extra registers on top
 * of 128 (O) + 64 (S) would spill, so Q is re-read from shared memory per
 * k-step (FlashAttention-2 makes the same choice).
 *
 * Row layout in shared memory: d64/d128 pad each row by 16 bytes, so the 8
 * rows an ldmatrix phase reads fall in 8 different bank groups and every
 * ldmatrix address is a per-lane base plus an immediate (no per-k-step XOR
 * arithmetic in the unrolled loops). d256 uses the XOR swizzle instead
 * (conflict-free without padding): its small-smem mode needs 96 KB + the
 * static smem, and padding would add 3 KB and miss the 99 KB limit.
 *
 * Shared memory: Q tile + one K tile + one V tile (FA2's schedule: V(j) loads
 * during S = QK^T, K(j-1) during softmax and PV). At d256 that is 128 KB,
 * more than sm_86/sm_89/sm_120/sm_121 allow per block (99 KB); there the
 * same kernel runs with K and V sharing one buffer (96 KB), chosen at run
 * time from cudaDevAttrMaxSharedMemoryPerBlockOptin, so no extra
 * instantiation is compiled. */
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

/* LAZY_RESCALE (portable_softmax.cuh) and Q_PREFETCH (portable_mainloop.cuh)
 * are on where they measured faster on the H200 (docs/perf/NOTES.md, v4):
 * +1..3% at d64/d128, but -2..3% at d256, so d256 keeps the plain schedule. */
template <> struct cfg<64> : cfg_base<64> {
    /* MIN_CTAS = 3 (168 registers) spills ~400 bytes: Q fragments (32) +
     * O (64) + S (64) leave no room. */
    static constexpr int NWARPS = 4, MT = 2, MIN_CTAS = 2;
    static constexpr bool Q_IN_REGS = true, PAD = true, MAY_SHARE_KV = false;
    static constexpr bool LAZY_RESCALE = true, Q_PREFETCH = true;
};
template <> struct cfg<128> : cfg_base<128> {
    static constexpr int NWARPS = 4, MT = 2, MIN_CTAS = 2;
    static constexpr bool Q_IN_REGS = false, PAD = true, MAY_SHARE_KV = false;
    static constexpr bool LAZY_RESCALE = true, Q_PREFETCH = true;
};
template <> struct cfg<256> : cfg_base<256> {
    static constexpr int NWARPS = 8, MT = 1, MIN_CTAS = 1;
    static constexpr bool Q_IN_REGS = false, PAD = false, MAY_SHARE_KV = true;
    static constexpr bool LAZY_RESCALE = false, Q_PREFETCH = false;
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
    static constexpr int KV_LOADS = C::BN * C::CPR / NT;  /* 16B chunks per thread per tile */
    static constexpr int KV_ROW_STEP = NT / C::CPR;
    static constexpr int Q_LOADS = RPW * C::CPR / 32;     /* per lane, own rows only */
    static_assert(BM == 128, "the planner assumes tile_m = 128");
    static_assert(2 * C::BN == BM, "the K + V buffers must hold a BM-row O stage");
    static_assert(KV_ROW_STEP % 8 == 0, "swizzle phase must not change across a thread's rows");
    static_assert(C::BN * C::CPR % NT == 0, "K/V tile must split evenly over threads");
    static_assert(32 % C::CPR == 0 || C::CPR == 32, "a lane's Q/O chunks share one column");

    /* Dynamic smem of a K/V mode (portable_launch.h); 0 if not compiled. */
    static constexpr int smem_bytes(int kv_mode)
    {
        return kv_mode == 0 ? Q_BYTES + 2 * KV_BYTES : (C::MAY_SHARE_KV ? Q_BYTES + KV_BYTES : 0);
    }
};

} // namespace sw_portable

#endif
