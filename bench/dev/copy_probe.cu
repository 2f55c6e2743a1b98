/* copy_probe.cu - the pinned host-to-device copy engine's rate by copy size and by the number of
 * streams the copies alternate over (the swap engine's host tier: its landing copies of 2-8 MiB
 * ran at ~52-53 GB/s where one copy of 256 MiB runs at 55.5, as if each copy cost a fixed ~6 us).
 * A pass moves 48 MiB (the bench's host-tier step) in copies of S MiB, issued back to back on
 * N streams in turn; with N > 1 each copy's completion event also waits for the previous copy's
 * (the engine's launches are consumed in order), as the engine would have to. GPU time from an
 * event before the first copy to the join of every stream, median of 15 after 3 warm-ups.
 * Sources: cudaMallocHost memory, and huge-page memory (madvise) registered with
 * cudaHostRegister (the store's host tier).
 * Build here: nvcc -O2 -std=c++17 -arch=sm_90a bench/dev/copy_probe.cu -o copy_probe
 * Usage: copy_probe [total_MiB=48]
 * Measured on the H200: copies of 8-16 MiB within 1-2% of one 48 MiB copy (51.7-53.2 GB/s),
 * 4 MiB -3%, 2 MiB -5%, 1 MiB -14%, 256 KiB -37%; two or three streams in turn no faster than
 * one. So the landing copies in launches of >= 8 MiB (docs/perf/swap.md). */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_util.cuh"

int main(int argc, char **argv)
{
    const size_t total = (size_t)(argc > 1 ? atoi(argv[1]) : 48) << 20;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    printf("copy_probe: %s, async engines %d, %zu MiB a pass; GPU ms median of 15 after 3\n",
           pr.name, pr.asyncEngineCount, total >> 20);
    uint8_t *dev = nullptr, *h1 = nullptr;
    CK(cudaMalloc(&dev, total));
    CK(cudaMallocHost(&h1, total));
    uint8_t *h2 = probe_huge_pinned(total, cudaHostRegisterDefault, 1, nullptr);
    memset(h1, 1, total);
    const int NS = 4;
    cudaStream_t st[NS];
    for (int i = 0; i < NS; i++)
        CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    std::vector<cudaEvent_t> ev(1024);
    for (auto &e : ev)
        CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    auto pass = [&](const uint8_t *src, size_t piece, int ns) {
        CK(cudaEventRecord(t0, st[0]));
        for (int i = 1; i < ns; i++)
            CK(cudaStreamWaitEvent(st[i], t0, 0));
        int k = 0;
        for (size_t off = 0; off < total; off += piece, k++) {
            const size_t n = std::min(piece, total - off);
            cudaStream_t s = st[k % ns];
            CK(cudaMemcpyAsync(dev + off, src + off, n, cudaMemcpyHostToDevice, s));
            if (ns > 1 && k > 0)
                CK(cudaStreamWaitEvent(s, ev[k - 1], 0));
            CK(cudaEventRecord(ev[k], s));
        }
        CK(cudaStreamWaitEvent(st[0], ev[k - 1], 0));
        CK(cudaEventRecord(t1, st[0]));
        CK(cudaEventSynchronize(t1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        return ms;
    };
    printf("%-10s %9s %3s %9s %8s\n", "source", "piece_KiB", "ns", "GPU_ms", "GB/s");
    const size_t pieces[] = {total, 16u << 20, 8u << 20, 4u << 20, 2u << 20, 1u << 20, 256u << 10};
    for (int src = 0; src < 2; src++)
        for (size_t piece : pieces)
            for (int ns : {1, 2, 3}) {
                if (piece == total && ns > 1)
                    continue;
                std::vector<float> t;
                for (int r = 0; r < 18; r++) {
                    const float ms = pass(src ? h2 : h1, piece, ns);
                    if (r >= 3)
                        t.push_back(ms);
                }
                std::sort(t.begin(), t.end());
                const float med = t[t.size() / 2];
                printf("%-10s %9zu %3d %9.4f %8.2f\n", src ? "registered" : "mallochost",
                       piece >> 10, ns, med, (double)total / (med * 1e-3) / 1e9);
            }
    return 0;
}
