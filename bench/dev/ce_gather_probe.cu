/* ce_gather_probe.cu - paged K/V gathered into dense rows by the copy engines instead of the SMs:
 * the paged prefill's gather (docs/perf/paged.md) costs the ragged kernel 5-9% at mix-b, its
 * gatherer warps few registers. Pieces of S KiB (32: an NHD page of 16 tokens x 8 heads x d128;
 * 4: one head's 16 tokens of an HND page) from random places of a 1 GiB pool into 128 MiB of
 * dense rows, in batches of B copies (cudaMemcpyBatchAsync), against a gather kernel (a warp a
 * piece, 4 x 16 bytes a lane in flight, the whole grid) and a single D2D copy of 128 MiB;
 * then the batches on a second stream while a compute-bound kernel holds every SM (as the
 * prefill kernel would). GPU ms (events) and the host's ms for the issuing calls, median of 7
 * after 2.
 * Build here: nvcc -O2 -std=c++17 -arch=sm_90a bench/dev/ce_gather_probe.cu -o ce_gather_probe
 * Usage: ce_gather_probe */
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_util.cuh"

__global__ void __launch_bounds__(256) gather(const uint4 *pool, uint4 *dense, const int *src,
                                              int n, int vec)
{
    const int lane = threadIdx.x & 31;
    for (int p = blockIdx.x * 8 + (threadIdx.x >> 5); p < n; p += gridDim.x * 8) {
        const uint4 *s = pool + (size_t)src[p] * vec;
        uint4 *d = dense + (size_t)p * vec;
        for (int v0 = 0; v0 < vec; v0 += 128) {
            uint4 x[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (v0 + u * 32 + lane < vec)
                    x[u] = __ldcs(s + v0 + u * 32 + lane);
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (v0 + u * 32 + lane < vec)
                    d[v0 + u * 32 + lane] = x[u];
        }
    }
}

/* About `iters` dependent FMAs a thread on every SM: tensor-core-free busy work. */
__global__ void spin(float *out, int iters)
{
    float a = threadIdx.x * 1e-3f, b = 1.0001f;
    for (int i = 0; i < iters; i++)
        a = a * b + 1e-7f;
    if (a == 12345.f)
        out[0] = a;
}

int main()
{
    const size_t pool_bytes = 1ull << 30, dense_bytes = 128ull << 20;
    char *pool = nullptr, *dense = nullptr;
    float *junk = nullptr;
    CK(cudaMalloc(&pool, pool_bytes));
    CK(cudaMalloc(&dense, dense_bytes));
    CK(cudaMalloc(&junk, 64));
    CK(cudaMemset(pool, 3, pool_bytes));
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    cudaStream_t s0, s1;
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    cudaEvent_t a, b, c;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventCreate(&c));
    printf("ce_gather_probe: %s, 128 MiB gathered from a 1 GiB pool; GPU ms median of 7 after 2\n",
           pr.name);
    auto med = [](std::vector<float> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    /* GPU ms of fn's work on s0, median of `reps` after 2 */
    auto timed = [&](auto &&fn, int reps) {
        std::vector<float> t;
        for (int r = 0; r < reps + 2; r++) {
            CK(cudaEventRecord(a, s0));
            fn();
            CK(cudaEventRecord(b, s0));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            if (r >= 2)
                t.push_back(ms);
        }
        return med(t);
    };
    {
        const float ms = timed(
            [&] { CK(cudaMemcpyAsync(dense, pool, dense_bytes, cudaMemcpyDeviceToDevice, s0)); },
            7);
        printf("one D2D copy of 128 MiB: %.4f ms, %.0f GB/s copied\n", ms,
               dense_bytes / (ms * 1e-3) / 1e9);
    }
    printf("%6s %-26s %6s %9s %9s %9s\n", "piece", "how", "batch", "GPU_ms", "GB/s", "host_ms");
    for (int kib : {32, 8, 4}) {
        const size_t piece = (size_t)kib << 10;
        const int n = (int)(dense_bytes / piece);
        const int slots = (int)(pool_bytes / piece);
        std::vector<int> src(n);
        uint64_t x = 0x2545f4914f6cdd1dull;
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            src[i] = (int)(x % (uint64_t)slots);
        }
        int *dsrc = nullptr;
        CK(cudaMalloc(&dsrc, n * sizeof(int)));
        CK(cudaMemcpy(dsrc, src.data(), n * sizeof(int), cudaMemcpyHostToDevice));
        std::vector<void *> dp(n);
        std::vector<const void *> sp(n);
        std::vector<size_t> sz(n, piece);
        for (int i = 0; i < n; i++) {
            dp[i] = dense + (size_t)i * piece;
            sp[i] = pool + (size_t)src[i] * piece;
        }
        {
            const float ms = timed(
                [&] {
                    gather<<<pr.multiProcessorCount * 8, 256, 0, s0>>>(
                        (const uint4 *)pool, (uint4 *)dense, dsrc, n, (int)(piece / 16));
                    CK(cudaGetLastError());
                },
                7);
            printf("%4dKiB %-26s %6s %9.4f %9.0f %9s\n", kib, "gather kernel", "-", ms,
                   dense_bytes / (ms * 1e-3) / 1e9, "-");
        }
        cudaMemcpyAttributes at;
        memset(&at, 0, sizeof at);
        at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        size_t first = 0;
        for (int busy = 0; busy < 2; busy++)
            for (int batch : {256, 4096, n}) {
                if (batch > n)
                    continue;
                std::vector<float> t, th;
                for (int r = 0; r < 9; r++) {
                    if (busy) {
                        CK(cudaEventRecord(c, s0));
                        spin<<<pr.multiProcessorCount * 4, 512, 0, s0>>>(junk, 400000);
                        CK(cudaStreamWaitEvent(s1, c, 0));
                    }
                    CK(cudaEventRecord(a, s1));
                    const auto h0 = std::chrono::steady_clock::now();
                    for (int i = 0; i < n; i += batch) {
                        const int k = std::min(batch, n - i);
                        CK(cudaMemcpyBatchAsync(dp.data() + i, sp.data() + i, sz.data() + i, k, &at,
                                                &first, 1, s1));
                    }
                    const auto h1 = std::chrono::steady_clock::now();
                    CK(cudaEventRecord(b, s1));
                    CK(cudaEventSynchronize(b));
                    CK(cudaStreamSynchronize(s0));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, a, b));
                    if (r >= 2) {
                        t.push_back(ms);
                        th.push_back(std::chrono::duration<float, std::milli>(h1 - h0).count());
                    }
                }
                const float ms = med(t);
                char how[64];
                snprintf(how, sizeof how, "batched copies%s", busy ? ", SMs busy" : "");
                printf("%4dKiB %-26s %6d %9.4f %9.0f %9.3f\n", kib, how, batch, ms,
                       dense_bytes / (ms * 1e-3) / 1e9, med(th));
            }
        CK(cudaFree(dsrc));
    }
    printf("the busy kernel alone: %.3f ms\n",
           timed([&] { spin<<<pr.multiProcessorCount * 4, 512, 0, s0>>>(junk, 400000); }, 5));
    return 0;
}
