/* Warp-level building blocks of the portable (sm_80+) prefill kernel:
 * cp.async copies, ldmatrix loads, m16n8k16 tensor-core products, the
 * shared-memory swizzle, and the fp32 -> 16-bit packing of P.
 *
 * Fragment layouts are PTX's for mma.m16n8k16 .row.col: with g = lane / 4 and
 * t = lane % 4, the accumulator of one 16x8 tile holds rows g (c0, c1) and
 * g + 8 (c2, c3) at columns 2t, 2t + 1. Everything else in the kernel is
 * written against that layout. */
#ifndef SW_CUDA_MMA_UTILS_CUH
#define SW_CUDA_MMA_UTILS_CUH

/* v12 (docs/perf/prefill.md): a row's softmax offset moves only when its max
 * grows by more than 8 (log2 units), in both prefill kernels (the Hopper
 * row_softmax, the portable softmax_state). On by default (H200: Hopper
 * d64 +2-3%, d256 +4-6%, d128 even; test_prefill_cuda passes with it);
 * -DSW_MAX_SLACK=0 builds v10's exact-max softmax for A/B runs. */
#ifndef SW_MAX_SLACK
#define SW_MAX_SLACK 1
#endif

/* v14 (docs/perf/prefill.md): the causal Hopper kernels' steps after an
 * item's first compute P at the rows' running offsets without the tile's
 * max, and fall back to the max when a row's sum says some P grew past the
 * slack. On by default (H200: d64 / d128 causal +5-9%, d256 even;
 * test_prefill_cuda with its rising-score cases passes); -DSW_NOMAX=0
 * builds v12's steps for A/B runs. Needs SW_MAX_SLACK. */
#ifndef SW_NOMAX
#define SW_NOMAX 1
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace sw_portable {

/* --- element type traits --------------------------------------------------
 * The two 16-bit inputs differ only in the mma opcode and in how fp32 pairs
 * are rounded into a 32-bit register. */
struct bf16_t {
    static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1)
    {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    /* cvt packs its first operand into the upper half: pass (hi, lo). */
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        uint32_t r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
};

struct f16_t {
    static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1)
    {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        uint32_t r;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
};

/* --- shared memory ---------------------------------------------------------
 * Tiles are stored row-major, one row = head_dim 16-bit elements = D/8
 * 16-byte chunks. In the swizzled layout (d256, see portable_config.cuh)
 * chunk c of row r lives at chunk (c ^ (r & 7)): ldmatrix reads one chunk
 * from each of 8 consecutive rows per phase, and the XOR puts those 8 chunks
 * in 8 different 16-byte bank groups, so neither ldmatrix nor the 16-byte
 * cp.async writes conflict without any padding. */
__device__ __forceinline__ uint32_t swz(int row, int chunk)
{
    return (uint32_t)((chunk ^ (row & 7)) << 4);
}

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16-byte async global->shared copy; src_bytes = 0 zero-fills the chunk
 * without reading (rows past the end of a request must become finite zeros,
 * not whatever the neighbouring request holds: 0 * NaN would poison O). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* ldmatrix is volatile so that it is never hoisted above the barrier that
 * publishes the cp.async data it reads. */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* --- arithmetic -------------------------------------------------------------
 * ex2.approx: one MUFU op; the softmax scale is pre-multiplied by log2(e) so
 * exp(x * scale) becomes ex2(x * scale_log2) with a single FFMA in front.
 * ftz: denormal probabilities are far below bf16 resolution of the sum. */
__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

} // namespace sw_portable

#endif
