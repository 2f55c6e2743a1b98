/* probe_check.cuh - CK(call): a CUDA runtime call of a bench/dev probe, which prints the call,
 * its place and the error and exits on failure (the probes are one-file programs built with
 * nvcc alone; each includes this by its relative name). */
#ifndef SW_BENCH_DEV_PROBE_CHECK_CUH
#define SW_BENCH_DEV_PROBE_CHECK_CUH

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif
