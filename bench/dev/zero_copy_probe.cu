/* zero_copy_probe.cu - how fast the SMs read pinned host memory themselves (mapped, through
 * unified addressing) against the copy engine's pinned host-to-device cudaMemcpy of the same
 * bytes: the swap engine's host tier lands its hits with copy-engine copies, then a tile kernel
 * reads the landed stripes; a kernel reading the leased stripes in place would need no copy at
 * all, if the SMs reach the link's rate. A pass reads 48 MiB (the bench's host-tier step at
 * d256; 96 MiB at d128) as stripes of S KiB (4 KiB: d128's, 8 KiB: d256's) in a random order of
 * the buffer's stripes, a warp a stripe at a time, U 16-byte loads a lane in flight; each CTA
 * writes one checksum. GPU time from an event before to one after, median of 15 after 3.
 * Sources: cudaMallocHost memory, and huge-page memory (madvise) registered with
 * cudaHostRegister (the store's host tier).
 * Build here: nvcc -O2 -std=c++17 -arch=sm_90a bench/dev/zero_copy_probe.cu -o zero_copy_probe
 * Usage: zero_copy_probe [total_MiB=48] */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_util.cuh"

/* Stripe order[i] (stripe_bytes each) of src, warp by warp over the grid. */
template <int U>
__global__ void __launch_bounds__(256) read_stripes(const uint4 *src, const int *order, int n,
                                                    int stripe_vec, unsigned *sum)
{
    const int lane = threadIdx.x & 31;
    const int warps = gridDim.x * 8, w0 = blockIdx.x * 8 + (threadIdx.x >> 5);
    unsigned acc = 0;
    for (int i = w0; i < n; i += warps) {
        const uint4 *s = src + (size_t)order[i] * stripe_vec;
        for (int v0 = 0; v0 < stripe_vec; v0 += 32 * U) {
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int v = v0 + u * 32 + lane;
                x[u] = v < stripe_vec ? __ldcs(s + v) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
                acc += x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
        }
    }
    acc += __shfl_xor_sync(0xffffffffu, acc, 16);
    acc += __shfl_xor_sync(0xffffffffu, acc, 8);
    if (lane == 0)
        atomicAdd(sum + blockIdx.x, acc);
}

int main(int argc, char **argv)
{
    const size_t total = (size_t)(argc > 1 ? atoi(argv[1]) : 48) << 20;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    printf("zero_copy_probe: %s, %d SMs, %zu MiB a pass; GPU ms median of 15 after 3\n", pr.name,
           pr.multiProcessorCount, total >> 20);
    uint8_t *dev = nullptr, *h1 = nullptr;
    CK(cudaMalloc(&dev, total));
    CK(cudaMallocHost(&h1, total));
    size_t big = 0;
    uint8_t *h2 = probe_huge_pinned(total, cudaHostRegisterDefault, 0, &big);
    for (size_t i = 0; i < big; i++)
        h2[i] = (uint8_t)(i * 131u);
    memcpy(h1, h2, total);
    unsigned *sum = nullptr;
    CK(cudaMalloc(&sum, 4096 * sizeof(unsigned)));
    int *order = nullptr;
    CK(cudaMalloc(&order, (total / 4096) * sizeof(int)));
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    auto median = [&](auto &&fn) {
        std::vector<float> t;
        for (int r = 0; r < 18; r++) {
            CK(cudaEventRecord(t0));
            fn();
            CK(cudaEventRecord(t1));
            CK(cudaEventSynchronize(t1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, t0, t1));
            if (r >= 3)
                t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    };
    auto gbps = [&](float ms) { return (double)total / (ms * 1e-3) / 1e9; };
    for (int src = 0; src < 2; src++) {
        const uint8_t *h = src ? h2 : h1;
        const char *name = src ? "registered" : "mallochost";
        const float mc = median([&] {
            CK(cudaMemcpyAsync(dev, h, total, cudaMemcpyHostToDevice, 0));
        });
        printf("%-10s memcpy %zu MiB: %.4f ms, %.2f GB/s\n", name, total >> 20, mc, gbps(mc));
        uint8_t *hd = nullptr;
        CK(cudaHostGetDevicePointer((void **)&hd, (void *)h, 0));
        printf("%-10s %6s %8s %3s %5s %9s %8s %7s\n", name, "stripe", "order", "U", "ctas",
               "GPU_ms", "GB/s", "of_copy");
        for (int skib : {4, 8}) {
            const int n = (int)(total / ((size_t)skib << 10));
            std::vector<int> ord(n);
            for (int shuffled = 0; shuffled < 2; shuffled++) {
                for (int i = 0; i < n; i++)
                    ord[i] = i;
                if (shuffled) {
                    uint64_t x = 0x9e3779b97f4a7c15ull;
                    for (int i = n - 1; i > 0; i--) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        std::swap(ord[i], ord[(int)(x % (uint64_t)(i + 1))]);
                    }
                }
                CK(cudaMemcpy(order, ord.data(), n * sizeof(int), cudaMemcpyHostToDevice));
                const int vec = (skib << 10) / 16;
                for (int ctas : {132, 264, 528, 1056})
                    for (int u : {1, 2, 4}) {
                        const float ms = median([&] {
                            if (u == 1)
                                read_stripes<1><<<ctas, 256>>>((const uint4 *)hd, order, n, vec, sum);
                            else if (u == 2)
                                read_stripes<2><<<ctas, 256>>>((const uint4 *)hd, order, n, vec, sum);
                            else
                                read_stripes<4><<<ctas, 256>>>((const uint4 *)hd, order, n, vec, sum);
                        });
                        CK(cudaGetLastError());
                        printf("%-10s %4dKiB %8s %3d %5d %9.4f %8.2f %6.1f%%\n", name, skib,
                               shuffled ? "shuffled" : "in-order", u, ctas, ms, gbps(ms),
                               100.0 * mc / ms);
                    }
            }
        }
    }
    return 0;
}
