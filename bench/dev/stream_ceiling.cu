/* stream_ceiling.cu - how fast can any kernel read N bytes of HBM on this GPU?
 * (the swap bench's all-resident case: the tile kernel reads a 64 MiB
 * attend at ~2.2 TB/s iso against a 1 GiB cudaMemcpy's 4.25 TB/s counted as
 * 2 x bytes / time; this is the ceiling for the same byte count with no
 * attention, no block table, no pipeline of ours.)
 *
 * Kernels: plain vectorised read (16-byte loads, grid-stride, 4 loads in
 * flight per thread, XOR-folded so nothing is optimised away); timed iso
 * (stream synchronised, event, kernel, event; median of reps) and back to back
 * (20 launches between two events), for 64 MiB and 1 GiB, over grid shapes.
 * cudaMemcpy D2D of the same byte counts, reported both as read bytes / time
 * and as 2 x bytes / time (the bench's D2D figure).
 * Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o stream_ceiling stream_ceiling.cu */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#include "probe_util.cuh"

/* XOR-folds p[i], p[i + s], ... below e, 4 loads in flight per thread, and
 * stores the fold only when it is a value that practically never occurs
 * (so nothing is optimised away). */
static __device__ __forceinline__ void fold_range(const uint4 *__restrict__ p, size_t i, size_t e,
                                                  size_t s, uint4 *sink)
{
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (; i + 3 * s < e; i += 4 * s) {
        uint4 a = __ldcs(p + i), b = __ldcs(p + i + s), c = __ldcs(p + i + 2 * s),
              d = __ldcs(p + i + 3 * s);
        acc.x ^= a.x ^ b.x ^ c.x ^ d.x;
        acc.y ^= a.y ^ b.y ^ c.y ^ d.y;
        acc.z ^= a.z ^ b.z ^ c.z ^ d.z;
        acc.w ^= a.w ^ b.w ^ c.w ^ d.w;
    }
    for (; i < e; i += s) {
        uint4 a = __ldcs(p + i);
        acc.x ^= a.x;
        acc.y ^= a.y;
        acc.z ^= a.z;
        acc.w ^= a.w;
    }
    if ((acc.x & acc.y & acc.z & acc.w) == 0x12345678u)
        sink[threadIdx.x] = acc;
}

/* Grid-stride over the whole buffer. */
__global__ void read_kernel(const uint4 *__restrict__ p, size_t n16, uint4 *sink)
{
    fold_range(p, (size_t)blockIdx.x * blockDim.x + threadIdx.x, n16,
               (size_t)gridDim.x * blockDim.x, sink);
}

/* Contiguous per-CTA chunks instead of grid-stride (the tile kernel's shape:
 * each CTA streams its own range). */
__global__ void read_chunk_kernel(const uint4 *__restrict__ p, size_t n16, uint4 *sink)
{
    const size_t per = (n16 + gridDim.x - 1) / gridDim.x;
    const size_t b = per * blockIdx.x, e = b + per < n16 ? b + per : n16;
    fold_range(p, b + threadIdx.x, e, blockDim.x, sink);
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main()
{
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t big = (size_t)1 << 30;
    void *buf, *dst;
    uint4 *sink;
    CK(cudaMalloc(&buf, big));
    CK(cudaMalloc(&dst, big));
    CK(cudaMalloc(&sink, 1024 * sizeof(uint4)));
    CK(cudaMemset(buf, 1, big));
    /* something to evict L2 between iso reps */
    void *flush;
    const size_t fl = (size_t)256 << 20;
    CK(cudaMalloc(&flush, fl));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const size_t sizes[2] = {(size_t)64 << 20, big};
    printf("%d SMs\n", sms);
    for (size_t bytes : sizes) {
        const size_t n16 = bytes / 16;
        /* D2D memcpy of the same bytes */
        std::vector<double> t;
        for (int r = 0; r < 30; r++) {
            CK(cudaMemsetAsync(flush, r, fl, st));
            CK(cudaStreamSynchronize(st));
            CK(cudaEventRecord(e0, st));
            CK(cudaMemcpyAsync(dst, buf, bytes, cudaMemcpyDeviceToDevice, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            t.push_back(ms);
        }
        double m = median(t);
        printf("%5zu MiB memcpy D2D iso %.4f ms: read %.0f GB/s, 2 x bytes %.0f GB/s\n", bytes >> 20,
               m, bytes / m / 1e6, 2.0 * bytes / m / 1e6);
        const int shapes[][2] = {{1, 1024}, {2, 1024}, {4, 512}, {8, 256}, {16, 256}, {1, 512}};
        for (int kind = 0; kind < 2; kind++)
            for (auto &sh : shapes) {
                const int grid = sms * sh[0], thr = sh[1];
                std::vector<double> iso;
                for (int r = 0; r < 30; r++) {
                    CK(cudaMemsetAsync(flush, r, fl, st));
                    CK(cudaStreamSynchronize(st));
                    CK(cudaEventRecord(e0, st));
                    if (kind == 0)
                        read_kernel<<<grid, thr, 0, st>>>((const uint4 *)buf, n16, sink);
                    else
                        read_chunk_kernel<<<grid, thr, 0, st>>>((const uint4 *)buf, n16, sink);
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    iso.push_back(ms);
                }
                CK(cudaGetLastError());
                std::vector<double> b2b;
                for (int r = 0; r < 7; r++) {
                    CK(cudaStreamSynchronize(st));
                    CK(cudaEventRecord(e0, st));
                    for (int k = 0; k < 20; k++) {
                        if (kind == 0)
                            read_kernel<<<grid, thr, 0, st>>>((const uint4 *)buf, n16, sink);
                        else
                            read_chunk_kernel<<<grid, thr, 0, st>>>((const uint4 *)buf, n16, sink);
                    }
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    b2b.push_back(ms / 20);
                }
                const double mi = median(iso), mb = median(b2b);
                printf("%5zu MiB %-10s grid %4d x %4d: iso %.4f ms = %5.0f GB/s; b2b %.4f ms = %5.0f "
                       "GB/s\n",
                       bytes >> 20, kind ? "chunked" : "gridstride", grid, thr, mi,
                       bytes / mi / 1e6, mb, bytes / mb / 1e6);
            }
    }
    /* empty-kernel launch cost, iso */
    std::vector<double> t0;
    for (int r = 0; r < 30; r++) {
        CK(cudaStreamSynchronize(st));
        CK(cudaEventRecord(e0, st));
        read_kernel<<<sms, 128, 0, st>>>((const uint4 *)buf, 0, sink);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t0.push_back(ms);
    }
    printf("empty kernel iso %.4f ms\n", median(t0));
    return 0;
}
