/* gather_probe.cu - where the swap host tier's step goes on the GPU side: the rate at
 * which a GPU pulls 8 KiB stripes scattered over a pinned host arena into device memory, by
 * every way we have or could have:
 *   memcpy        one cudaMemcpyAsync of the same bytes, contiguous (the bench's reference)
 *   gather/N      the engine's gather kernel (src/cuda/swap/swap_gather.cu: zero-copy reads + CRC32C),
 *                 launches of N stripes back to back on two streams, one CTA per stripe (its first form)
 *   gatherp/N     the same with one CTA per SM walking the stripes (the engine's gather kernel as it runs now)
 *   zc/N          a plain zero-copy copy kernel, one 128-thread CTA per stripe (the gather without CRC)
 *   zcw/N         a zero-copy copy with one warp per stripe, 16 x 16-byte loads in flight per lane
 *   batch/N       cudaMemcpyBatchAsync of N stripes per call (copy engines; no CRC)
 * Each: GPU time by CUDA events over a whole step's stripes (6144 x 8 KiB = 48 MiB, the host-tier
 * case of `spillway bench swap`), median of 15 after 3 warm-ups; and the host time to enqueue.
 * Build here (nothing compiles on the device):
 *   nvcc -O2 -std=c++17 -arch=sm_90a -Isrc -Iinclude bench/dev/gather_probe.cu \
 *     src/cuda/swap/swap_gather.cu src/core/status.c src/store/crc32c.c -o gather_probe
 * Usage: gather_probe [stripes=6144] [stripe_bytes=8192]
 * Measured on the H200: the SM gathers 49-50 GB/s alone (~38 GB/s beside the tile kernels)
 * against 55.4 GB/s for one contiguous copy; docs/perf/swap.md. */
#include "swap/swap_cuda.h"
#include "store/crc32c_gf2.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <vector>

extern "C" uint32_t sw_crc32c(const void *data, size_t len);

#include "probe_util.cuh"

struct item {
    const uint4 *src;
    uint4 *dst;
};

__global__ void zc_cta(const item *it, int n16)
{
    const item g = it[blockIdx.x];
    uint4 v[8];
    for (int base = 0; base < n16; base += 8 * blockDim.x) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int i = base + j * blockDim.x + threadIdx.x;
            if (i < n16)
                v[j] = __ldcs(g.src + i);
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int i = base + j * blockDim.x + threadIdx.x;
            if (i < n16)
                g.dst[i] = v[j];
        }
    }
}

__global__ void zc_warp(const item *it, int n, int n16)
{
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (w >= n)
        return;
    const item g = it[w];
    for (int base = 0; base < n16; base += 16 * 32) {
        uint4 v[16];
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int i = base + j * 32 + lane;
            if (i < n16)
                v[j] = __ldcs(g.src + i);
        }
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int i = base + j * 32 + lane;
            if (i < n16)
                g.dst[i] = v[j];
        }
    }
}

static double now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

int main(int argc, char **argv)
{
    const int N = argc > 1 ? atoi(argv[1]) : 6144;
    const size_t SB = argc > 2 ? (size_t)atoll(argv[2]) : 8192;
    const size_t slots = (size_t)N * 5 / 3; /* the arena a little larger, as the host tier */
    const size_t arena = slots * SB;
    /* huge pages pinned by registration, as the store's I/O memory with a GPU */
    void *h = mmap(nullptr, arena, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    const char *kind = "MAP_HUGETLB";
    if (h == MAP_FAILED) {
        h = mmap(nullptr, arena, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        madvise(h, arena, MADV_HUGEPAGE);
        kind = "THP advice";
    }
    for (size_t i = 0; i < arena / 4; i++)
        ((uint32_t *)h)[i] = (uint32_t)(i * 2654435761u);
    CK(cudaHostRegister(h, arena, cudaHostRegisterMapped | cudaHostRegisterPortable));
    uint8_t *pool;
    CK(cudaMalloc(&pool, (size_t)N * SB));
    std::vector<size_t> perm(slots);
    for (size_t i = 0; i < slots; i++)
        perm[i] = i;
    srand(7);
    for (size_t i = slots - 1; i > 0; i--)
        std::swap(perm[i], perm[(size_t)rand() % (i + 1)]);
    /* gather items (pinned, read by the kernel over PCIe as the engine's are) */
    sw_cuda_swap_gather_item *gi;
    CK(cudaHostAlloc(&gi, sizeof *gi * N, cudaHostAllocMapped));
    item *zi;
    CK(cudaHostAlloc(&zi, sizeof *zi * N, cudaHostAllocMapped));
    std::vector<void *> bd(N), bs(N);
    std::vector<size_t> bz(N, SB);
    const uint32_t off = sw_crc32c_to_raw(0, SB);
    for (int i = 0; i < N; i++) {
        const uint8_t *src = (const uint8_t *)h + perm[i] * SB;
        gi[i].src = src;
        gi[i].dst = (uint64_t)i * SB;
        gi[i].length = (uint32_t)SB;
        gi[i].crc_raw = sw_crc32c(src, SB) ^ off;
        gi[i].id = (uint32_t)i;
        gi[i].pad = 0;
        zi[i].src = (const uint4 *)src;
        zi[i].dst = (uint4 *)(pool + (size_t)i * SB);
        bd[i] = pool + (size_t)i * SB;
        bs[i] = (void *)src;
    }
    uint32_t *bad;
    CK(cudaMalloc(&bad, 4 * 64));
    CK(cudaMemset(bad, 0, 4 * 64));
    cudaStream_t st[2];
    CK(cudaStreamCreateWithFlags(&st[0], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking));
    cudaEvent_t e0, e1, j0, j1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreateWithFlags(&j0, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&j1, cudaEventDisableTiming));
    uint8_t *contig = (uint8_t *)h; /* memcpy reference: the first N stripes of the arena */
    int dev = 0;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, dev));
    printf("gather_probe: %s, %d stripes x %zu B = %.1f MiB from a %.1f MiB pinned arena (%s), "
           "random order; median of 15 after 3 warm-ups\n",
           pr.name, N, SB, N * SB / 1048576.0, arena / 1048576.0, kind);
    printf("%-14s %10s %10s %12s\n", "method", "GPU ms", "GB/s", "host ms");

    auto run = [&](const char *name, int chunk, int method) {
        std::vector<float> g;
        std::vector<double> hs;
        for (int r = 0; r < 18; r++) {
            CK(cudaDeviceSynchronize());
            CK(cudaEventRecord(e0, st[0]));
            CK(cudaStreamWaitEvent(st[1], e0, 0));
            const double t0 = now_ms();
            int k = 0;
            for (int i0 = 0; i0 < N; i0 += chunk, k++) {
                const int n = std::min(chunk, N - i0);
                cudaStream_t s = st[k & 1];
                if (method == 0) {
                    CK(cudaMemcpyAsync(pool + (size_t)i0 * SB, contig + (size_t)i0 * SB,
                                       (size_t)n * SB, cudaMemcpyHostToDevice, s));
                } else if (method == 1 || method == 5) {
                    sw_cuda_swap_gather_args a;
                    memset(&a, 0, sizeof a);
                    a.ctas = method == 5 ? pr.multiProcessorCount : 0;
                    a.g = gi + i0;
                    a.n = n;
                    a.pool = pool;
                    a.bad = bad;
                    a.bad_cap = 63;
                    if (sw_cuda_swap_gather(&a, s) != 0) {
                        fprintf(stderr, "gather launch failed\n");
                        exit(1);
                    }
                } else if (method == 2) {
                    zc_cta<<<n, 128, 0, s>>>(zi + i0, (int)(SB / 16));
                } else if (method == 3) {
                    zc_warp<<<(n + 3) / 4, 128, 0, s>>>(zi + i0, n, (int)(SB / 16));
                } else {
                    cudaMemcpyAttributes at;
                    memset(&at, 0, sizeof at);
                    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
                    size_t idx = 0;
                    CK(cudaMemcpyBatchAsync(bd.data() + i0, bs.data() + i0, bz.data() + i0,
                                            (size_t)n, &at, &idx, 1, s));
                }
            }
            const double t1 = now_ms();
            CK(cudaEventRecord(j1, st[1]));
            CK(cudaStreamWaitEvent(st[0], j1, 0));
            CK(cudaEventRecord(e1, st[0]));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 3) {
                g.push_back(ms);
                hs.push_back(t1 - t0);
            }
        }
        std::sort(g.begin(), g.end());
        std::sort(hs.begin(), hs.end());
        const double m = g[g.size() / 2];
        printf("%-14s %10.3f %10.2f %12.3f\n", name, m, N * SB / (m * 1e6), hs[hs.size() / 2]);
        fflush(stdout);
    };
    run("memcpy", N, 0);
    run("memcpy/384", 384, 0);
    const int chunks[] = {384, 768, 1536, 6144};
    /* in the order of the printed table: method ids of run() */
    const struct {
        const char *name;
        int method;
    } ms[] = {{"gather", 1}, {"gatherp", 5}, {"zc", 2}, {"zcw", 3}, {"batch", 4}};
    char nm[32];
    for (const auto &m : ms)
        for (int c : chunks) {
            snprintf(nm, sizeof nm, "%s/%d", m.name, c);
            run(nm, c, m.method);
        }
    uint32_t nbad = 0;
    CK(cudaMemcpy(&nbad, bad, 4, cudaMemcpyDeviceToHost));
    /* the copies are right: every stripe of the pool equals its source (after the batch copies) */
    std::vector<uint8_t> back((size_t)N * SB);
    CK(cudaMemcpy(back.data(), pool, back.size(), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += memcmp(back.data() + (size_t)i * SB, (const uint8_t *)h + perm[i] * SB, SB) != 0;
    printf("gather CRC mismatches reported: %u (expected 0); stripes wrong after the copies: %d\n",
           nbad, wrong);
    return nbad || wrong;
}
