/* Hopper (sm_90a) primitives of the warp-specialised prefill kernel, as
 * inline PTX: mbarriers (init, arrive, arrive with an expected transaction
 * count, parity wait), bulk tensor copies (TMA) completing on an mbarrier,
 * the wgmma fence/commit/wait trio, named barriers, register reallocation
 * and the shared-memory matrix descriptors.
 *
 * Everything that emits an sm_90a-only instruction sits under
 * SW_HOPPER_ARCH, which hopper_kernel.cuh defines only while compiling for
 * compute_90a; other targets get empty bodies (and the kernel itself traps
 * there, so a mis-dispatch cannot pass silently). */
#ifndef SW_CUDA_HOPPER_SYNC_CUH
#define SW_CUDA_HOPPER_SYNC_CUH

#include <cuda.h> /* CUtensorMap */
#include <stdint.h>

namespace sw_hopper {

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ------------------------------------------------------------ mbarrier -- */

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
#endif
}

/* Makes the initialised barriers visible to the async (TMA) proxy. */
__device__ __forceinline__ void mbar_init_fence()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar)
                 : "memory");
#endif
}

/* One arrival that also announces `bytes` of TMA traffic for this phase. */
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(
                     bar),
                 "r"(bytes)
                 : "memory");
#endif
}

/* Blocks until the phase of parity `parity` has completed. A freshly
 * initialised barrier is in phase 0, so waiting for parity 1 returns at once
 * (the "previous phase" counts as complete): producers wait on empty slots
 * with the flipped parity. */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n"
                 "}" ::"r"(bar),
                 "r"(parity)
                 : "memory");
#endif
}

/* ----------------------------------------------------------------- TMA -- */

/* 4-D tiled bulk copy global -> shared, completing on `bar` (coordinates
 * innermost first). */
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                            int x, int y, int z, int w)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "r"(x), "r"(y), "r"(z), "r"(w)
                 : "memory");
#endif
}

/* Bulk (non-tensor) copies: `bytes` (a multiple of 16, both ends 16-byte
 * aligned) global -> shared completing on `bar`, and shared -> global in
 * this thread's bulk group; commit closes the group, wait_read<N> waits
 * until at most N groups still read shared memory, wait<N> until at most N
 * are incomplete (their writes done). */
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes,
                                         uint32_t bar)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"((uint64_t)__cvta_generic_to_global(src)), "r"(bytes), "r"(bar)
                 : "memory");
#endif
}

__device__ __forceinline__ void bulk_s2g(void *dst, uint32_t src, uint32_t bytes)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                     (uint64_t)__cvta_generic_to_global(dst)),
                 "r"(src), "r"(bytes)
                 : "memory");
#endif
}

__device__ __forceinline__ void bulk_commit()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void bulk_wait_read()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
#endif
}

template <int N> __device__ __forceinline__ void bulk_wait()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap *map)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)map) : "memory");
#endif
}

/* Orders this thread's ordinary shared-memory writes before later reads by
 * the async proxy (wgmma operands, TMA). */
__device__ __forceinline__ void fence_proxy_async()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/* Global memory written by other CTAs through the generic proxy, read here
 * by TMA (the in-kernel gather of paged K/V): the writer's pieces are
 * counted with release_add after fence_proxy_async_global; the reader
 * sees the count with relaxed_load, then fence_acquire_gpu and
 * fence_proxy_async_global before its TMA loads. */
__device__ __forceinline__ void fence_proxy_async_global()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}

__device__ __forceinline__ void release_add(int *p, int v)
{
#ifdef SW_HOPPER_ARCH
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#endif
}


__device__ __forceinline__ int relaxed_load(const int *p)
{
    int v = 0;
#ifdef SW_HOPPER_ARCH
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#endif
    return v;
}

/* After relaxed loads that saw counts released by other CTAs: orders this
 * thread's later reads (and, with fence_proxy_async_global, its TMA loads)
 * after the writes those counts published. */
__device__ __forceinline__ void fence_acquire_gpu()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
}

/* --------------------------------------------------------------- wgmma -- */

__device__ __forceinline__ void wg_fence()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void wg_commit()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void wg_wait()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

/* Keeps the compiler from moving accumulator reads/writes across a wgmma
 * wait: the registers are changed behind its back by the async unit. */
template <int R> __device__ __forceinline__ void reg_fence(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* Shared-memory matrix descriptor (PTX "matrix descriptor"): start address,
 * leading and stride byte offsets (all >> 4) and the swizzle mode in bits
 * 62-63 (1 = 128-byte swizzle). Base offset 0: every swizzle atom (8 rows of
 * 128 bytes) starts 1024-byte aligned. */
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

/* ------------------------------------------------- barriers, registers -- */

/* Named barrier over `count` threads (ids 1..15; 0 is __syncthreads). */
__device__ __forceinline__ void named_sync(int id, int count)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

template <int REGS> __device__ __forceinline__ void regs_dealloc()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
#endif
}

template <int REGS> __device__ __forceinline__ void regs_alloc()
{
#ifdef SW_HOPPER_ARCH
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
#endif
}

} // namespace sw_hopper

#endif
