/* fakecudart.c - the few CUDA runtime calls the CLI, the swap bench and
 * tests/test_swap_cuda.c themselves make, answered without a GPU (device
 * memory is host memory), so that they link against the faked library of
 * bench/dev/fake_gpu/build.sh, which builds them. For host-side profiles
 * and host-side checks only; results are garbage. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
static int dm;
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = (cudaEvent_t)&dm; return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) { (void)a; (void)b; *ms = 1.0f; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { (void)e; (void)s; return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return cudaSuccess; }
void fake_unregister(void *p);
cudaError_t cudaFree(void *p) { fake_unregister(p); free(p); return cudaSuccess; }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { (void)e; return "fake"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
void fake_register(void *p, size_t b);
cudaError_t cudaMalloc(void **p, size_t b) { *p = calloc(1, b); fake_register(*p, b); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaMallocHost(void **p, size_t b) { *p = calloc(1, b); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t b, enum cudaMemcpyKind k) { (void)k; memcpy(d, s, b); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t b, enum cudaMemcpyKind k, cudaStream_t st) { (void)k; (void)st; memcpy(d, s, b); return cudaSuccess; }
cudaError_t cudaMemset(void *d, int v, size_t b) { memset(d, v, b); return cudaSuccess; }
cudaError_t cudaMemsetAsync(void *d, int v, size_t b, cudaStream_t s) { (void)s; memset(d, v, b); return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) { (void)dev; memset(p, 0, sizeof *p); strcpy(p->name, "fake"); p->multiProcessorCount = 132; p->major = 9; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *p, int dev) { return cudaGetDeviceProperties(p, dev); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f) { (void)f; *s = (cudaStream_t)&dm; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
