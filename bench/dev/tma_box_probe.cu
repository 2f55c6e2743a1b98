/* tma_box_probe.cu - how fast one CTA an SM fills a ring of 32 KiB K tiles (128 keys x d128,
 * BF16, the Hopper prefill kernel's tile) by TMA: one box of the whole tile from dense K (the
 * ragged kernel's load), against 16 boxes of (16 keys, one 128-byte chunk) from 16-key pages
 * of an NHD pool ([page][token][head][d], random pages), issued by one thread (the paged try
 * of dc81a1b / 0f44c57, 46-50% of the ragged kernel) or by 16 lanes of the producer warp, one
 * box each. A consumer warp frees each stage as soon as it lands, so the ring's rate is the
 * loads' alone. Pools of 32 MiB (in L2, as most of a prefill's K reads are) and 1 GiB.
 * Build here: nvcc -O2 -std=c++17 -arch=sm_90a bench/dev/tma_box_probe.cu -o tma_box_probe
 * Usage: tma_box_probe */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_util.cuh"

constexpr int HEADS = 8, D = 128, PAGE = 16, BN = 128, ST = 4;
constexpr int TILE = BN * D * 2; /* 32 KiB */

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint32_t b, uint32_t n)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t b)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(b)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t b, uint32_t bytes)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(b),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t b, uint32_t parity)
{
    asm volatile("{\n.reg .pred p;\nW_%=:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra W_%=;\n}" ::"r"(b),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void tma4(uint32_t dst, const CUtensorMap *m, uint32_t bar, int x, int y,
                                     int z, int w)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(dst),
                 "l"((uint64_t)m), "r"(bar), "r"(x), "r"(y), "r"(z), "r"(w)
                 : "memory");
}
__device__ __forceinline__ void tma5(uint32_t dst, const CUtensorMap *m, uint32_t bar, int x, int y,
                                     int z, int w, int v)
{
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];" ::"r"(dst),
                 "l"((uint64_t)m), "r"(bar), "r"(x), "r"(y), "r"(z), "r"(w), "r"(v)
                 : "memory");
}

/* mode 0: dense, one box a tile; 1: paged, 16 boxes by lane 0; 2: paged, one box a lane */
__global__ void __launch_bounds__(64) ring(const __grid_constant__ CUtensorMap dense,
                                           const __grid_constant__ CUtensorMap paged, int mode,
                                           int tiles, int pages, int rows)
{
    extern __shared__ __align__(1024) unsigned char sm[];
    unsigned char *base = (unsigned char *)(((uintptr_t)sm + 1023) & ~(uintptr_t)1023);
    __shared__ __align__(8) uint64_t full[ST], empty[ST];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(smem_u32(&full[s]), 1);
            mbar_init(smem_u32(&empty[s]), 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    uint32_t x = 0x9e3779b9u * (blockIdx.x + 1);
    for (int t = 0; t < tiles; t++) {
        const int s = t % ST;
        const uint32_t ph = (uint32_t)(t / ST) & 1;
        if (warp == 0) {
            mbar_wait(smem_u32(&empty[s]), ph ^ 1);
            const uint32_t dst = smem_u32(base + s * TILE);
            const int head = (t + blockIdx.x) % HEADS;
            if (mode == 0) {
                if (lane == 0) {
                    mbar_arrive_tx(smem_u32(&full[s]), TILE);
                    x = x * 1664525u + 1013904223u;
                    const int row = (int)((x >> 8) % (uint32_t)(rows / BN)) * BN;
                    tma4(dst, &dense, smem_u32(&full[s]), 0, head, row, 0);
                }
            } else {
                if (lane == 0)
                    mbar_arrive_tx(smem_u32(&full[s]), TILE);
                __syncwarp();
                for (int b = 0; b < 16; b++) {
                    x = x * 1664525u + 1013904223u;
                    if (mode == 2 ? lane == b : lane == 0) {
                        const int piece = b >> 1, chunk = b & 1;
                        const int page = (int)((x >> 8) % (uint32_t)pages);
                        tma5(dst + chunk * (TILE / 2) + piece * PAGE * 128, &paged,
                             smem_u32(&full[s]), 0, 0, head, page, chunk);
                    }
                }
            }
        } else if (lane == 0) {
            mbar_wait(smem_u32(&full[s]), ph);
            mbar_arrive(smem_u32(&empty[s]));
        }
    }
}

int main()
{
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                        &q));
    auto encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    printf("tma_box_probe: %s, %d SMs; one CTA an SM, a ring of %d x 32 KiB K tiles; GPU ms "
           "median of 7 after 2\n",
           pr.name, pr.multiProcessorCount, ST);
    printf("%-8s %-22s %9s %9s %10s\n", "pool", "load", "GPU_ms", "TB/s", "boxes/us/SM");
    for (size_t pool_mib : {32, 1024}) {
        const size_t bytes = pool_mib << 20;
        void *buf = nullptr;
        CK(cudaMalloc(&buf, bytes));
        CK(cudaMemset(buf, 1, bytes));
        const int pages = (int)(bytes / (PAGE * HEADS * D * 2));
        const int rows = (int)(bytes / (HEADS * D * 2));
        CUtensorMap dense, paged;
        {
            const cuuint64_t dims[4] = {64, HEADS, (cuuint64_t)rows, D / 64};
            const cuuint64_t str[3] = {D * 2, HEADS * D * 2, 128};
            const cuuint32_t box[4] = {64, 1, BN, D / 64};
            const cuuint32_t es[4] = {1, 1, 1, 1};
            if (encode(&dense, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, buf, dims, str, box, es,
                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)) {
                fprintf(stderr, "encode dense failed\n");
                return 1;
            }
        }
        {
            const cuuint64_t dims[5] = {64, PAGE, HEADS, (cuuint64_t)pages, D / 64};
            const cuuint64_t str[4] = {HEADS * D * 2, D * 2, (cuuint64_t)PAGE * HEADS * D * 2, 128};
            const cuuint32_t box[5] = {64, PAGE, 1, 1, 1};
            const cuuint32_t es[5] = {1, 1, 1, 1, 1};
            if (encode(&paged, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5, buf, dims, str, box, es,
                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)) {
                fprintf(stderr, "encode paged failed\n");
                return 1;
            }
        }
        const int smem = ST * TILE + 1024;
        CK(cudaFuncSetAttribute(ring, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const int tiles = 4000;
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        const char *names[3] = {"dense, 1 box a tile", "paged, 16 boxes, 1 lane",
                                "paged, 16 boxes, 16 lanes"};
        for (int mode = 0; mode < 3; mode++) {
            std::vector<float> t;
            for (int r = 0; r < 9; r++) {
                CK(cudaEventRecord(a));
                ring<<<pr.multiProcessorCount, 64, smem>>>(dense, paged, mode, tiles, pages, rows);
                CK(cudaEventRecord(b));
                CK(cudaEventSynchronize(b));
                CK(cudaGetLastError());
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, a, b));
                if (r >= 2)
                    t.push_back(ms);
            }
            std::sort(t.begin(), t.end());
            const float ms = t[t.size() / 2];
            const double moved = (double)pr.multiProcessorCount * tiles * TILE;
            const double boxes = (double)tiles * (mode ? 16 : 1);
            printf("%5zuMiB %-26s %8.3f %9.2f %10.2f\n", pool_mib, names[mode], ms,
                   moved / (ms * 1e-3) / 1e12, boxes / (ms * 1e3));
        }
        CK(cudaFree(buf));
    }
    return 0;
}
