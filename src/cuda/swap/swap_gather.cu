/* Gather of a tile's host-tier hits (swap/swap_cuda.h, sw_cuda_swap_gather):
 * each stripe is read by the GPU straight out of the store's pinned host
 * tier, written into its pool slot, and checked against the CRC32C the
 * store holds for it, with no CPU copy of the payload (the path it replaces
 * -- the store memcpy'd every stripe into pinned staging, one upload per
 * tile -- moved 4.6 GB/s of the H200's 55.5 GB/s pinned host-to-device
 * rate, docs/perf/swap.md).
 *
 * A CTA of 128 threads takes a stripe at a time, in segments of 8 KiB (one
 * segment for the usual 8 KiB stripe): the threads read the segment with
 * coalesced 16-byte loads, all four of a thread's loads in flight at once
 * (PCIe latency is hidden by the many CTAs in flight together), store them
 * to the slot, and run the byte-table CRC over each 16-byte piece they hold
 * (four independent chains); the 512 piece CRCs are combined with the GF(2)
 * shift operators of store/crc32c_gf2.h (the split is modelled on the CPU
 * there and checked against the store's CRC by tests/test_crc32c_gf2.c).
 * Shared memory: the byte table and 32 bytes of reduction (the first form
 * staged the segment there, 10.5 KiB a CTA, for 64-byte chunks per thread).
 *
 * The grid is `ctas` CTAs (the engine: half the SMs) walking the stripes
 * with a stride, the next stripe's descriptor loaded while the current one
 * is processed: ~0.5 MiB in flight on an H200 still fills PCIe, and CTAs of
 * ~2 KiB of shared memory and 40 registers fit beside the tile kernel's
 * (~215 KiB, ~46k registers). With one CTA per stripe (ctas = 0, the first
 * form) a 768-stripe gather filled every SM with its CTAs. */
#include "swap/swap_cuda.h"
#include "store/crc32c_gf2.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"
#include "swap_carve.cuh"
#include "swap_crc.cuh"

#include <cuda_runtime.h>

#define NT SW_CRC32C_GATHER_NT
#define PPT SW_CRC32C_GATHER_PPT /* 16-byte pieces per thread and segment */
#define SEG SW_CRC32C_GATHER_SEG

static_assert(NT % 32 == 0 && SW_CRC32C_GATHER_P == 16, "gather split");

/* 12 CTAs per SM's worth of registers (<= 40 a thread): a few CTAs must fit
 * beside the tile kernel's ~46k registers */
__global__ void __launch_bounds__(NT, 12)
    swap_gather_kernel(const sw_cuda_swap_gather_args a, const sw_crc32c_gather_consts k)
{
    __shared__ uint32_t tab[256];
    __shared__ uint32_t red[2][NT / 32]; /* by segment parity: one barrier per segment */
    const int t = threadIdx.x;
    for (int i = t; i < 256; i += NT)
        tab[i] = sw_crc32c_tab_entry((uint32_t)i);
    uint32_t mul[PPT]; /* piece j * NT + t's multiplier, x^(8 (SEG - 16 p - 16)) */
    {
        const uint32_t lane = sw_crc32c_gather_lane(t);
#pragma unroll
        for (int j = 0; j < PPT; j++)
            mul[j] = sw_crc32c_gf2_mul(k.row[j], lane);
    }
    __syncthreads();
    int par = 0;
    sw_cuda_swap_gather_item nx = a.g[blockIdx.x];
    for (int32_t it = blockIdx.x; it < a.n; it += gridDim.x) {
        const sw_cuda_swap_gather_item g = nx;
        if (it + (int32_t)gridDim.x < a.n)
            nx = a.g[it + gridDim.x]; /* the next descriptor's PCIe read, in the shadow */
        const uint64_t len = g.length;
        const uint64_t nseg = (len + SEG - 1) / SEG;
        const uint64_t pad = nseg * SEG - len; /* leading zeros: a multiple of 16 */
        const uint4 *src = reinterpret_cast<const uint4 *>(g.src);
        uint4 *dst = reinterpret_cast<uint4 *>(a.pool + g.dst);
        uint32_t acc = 0; /* thread 0's */
        for (uint64_t sg = 0; sg < nseg; sg++) {
            uint4 v[PPT];
#pragma unroll
            for (int j = 0; j < PPT; j++) {
                const uint64_t o = sg * SEG + ((uint64_t)j * NT + (uint64_t)t) * 16;
                v[j] = o >= pad ? __ldcs(src + (o - pad) / 16) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int j = 0; j < PPT; j++) {
                const uint64_t o = sg * SEG + ((uint64_t)j * NT + (uint64_t)t) * 16;
                if (o >= pad)
                    dst[(o - pad) / 16] = v[j];
            }
            /* the four pieces' raw CRCs, times their multipliers, over the warp */
            const uint32_t c = swap_crc_pieces_warp(v, tab, mul);
            if ((t & 31) == 0)
                red[par][t >> 5] = c;
            __syncthreads();
            if (t == 0) {
                uint32_t s = 0;
#pragma unroll
                for (int i = 0; i < NT / 32; i++)
                    s ^= red[par][i];
                acc = (sg ? sw_crc32c_gf2_mul(acc, k.seg) : 0u) ^ s;
            }
            par ^= 1; /* the next segment writes the other half while thread 0 reads this */
        }
        if (t == 0 && acc != g.crc_raw) {
            const uint32_t i = atomicAdd(a.bad, 1u);
            if (i < a.bad_cap)
                a.bad[1 + i] = g.id;
        }
    }
}

static sw_crc32c_gather_consts make_consts()
{
    sw_crc32c_gather_consts k;
    sw_crc32c_gather_consts_fill(&k);
    return k;
}

extern "C" void sw_cuda_swap_gather_preload(void)
{
    sw_swap_preload_fn(swap_gather_kernel);
}

extern "C" sw_status sw_cuda_swap_gather(const sw_cuda_swap_gather_args *a, void *stream)
{
    if (a->n <= 0)
        return SW_OK;
    static const sw_crc32c_gather_consts k = make_consts(); /* thread-safe init */
    static volatile int carved[64];
    SW_TRY(sw_swap_carve_max(swap_gather_kernel, carved));
    const int32_t grid = a->ctas > 0 && a->ctas < a->n ? a->ctas : a->n;
    swap_gather_kernel<<<(unsigned)grid, NT, 0, (cudaStream_t)stream>>>(*a, k);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}
