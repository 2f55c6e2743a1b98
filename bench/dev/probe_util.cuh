/* probe_util.cuh - what the bench/dev CUDA probes share (one-file programs built with nvcc
 * alone; each includes this by its relative name): CK(call), a CUDA runtime call that prints
 * the call, its place and the error and exits on failure; probe_huge_pinned, host memory as the
 * store's host tier holds it. */
#ifndef SW_BENCH_DEV_PROBE_UTIL_CUH
#define SW_BENCH_DEV_PROBE_UTIL_CUH

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <sys/mman.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* `bytes` rounded up to whole 2 MiB (*rounded) of anonymous memory with
 * huge pages advised, every byte `fill`, then registered with
 * cudaHostRegister(flags): the store's host tier. Exits on failure. */
static inline uint8_t *probe_huge_pinned(size_t bytes, unsigned flags, int fill, size_t *rounded)
{
    const size_t big = (bytes + (2u << 20) - 1) & ~((size_t)(2u << 20) - 1);
    void *h = mmap(nullptr, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (h == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(h, big, MADV_HUGEPAGE);
    memset(h, fill, big);
    CK(cudaHostRegister(h, big, flags));
    if (rounded)
        *rounded = big;
    return (uint8_t *)h;
}

#endif
