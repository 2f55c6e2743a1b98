/* The CUDA runtime wrappers of core/sw_cuda.h, so that the C sources (front
 * end, planner, store, swap engine) never include a CUDA header. Each one
 * maps a runtime error to SW_STATUS_CUDA through SW_CUDA_CHECK. */
#include "core/sw_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_runtime.h>

extern "C" int32_t sw_cuda_devices(void)
{
    int n = 0;
    /* No driver, no device or a driver older than the runtime all mean "no
     * usable GPU" here; the error is cleared so that the next runtime call
     * does not report it again. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (int32_t)n;
}

extern "C" sw_status sw_cuda_set_device(int32_t device)
{
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess)
        (void)cudaGetLastError();
    else if (cur == device)
        return SW_OK; /* the common case costs no driver call */
    int32_t n = sw_cuda_devices();
    if (device < 0 || device >= n)
        return sw_fail(SW_STATUS_NO_DEVICE, "CUDA device %d requested, %d usable", (int)device,
                       (int)n);
    SW_CUDA_CHECK(cudaSetDevice(device));
    return SW_OK;
}

extern "C" sw_status sw_cuda_memcpy_h2d_async(void *dst, const void *src, size_t bytes,
                                              void *stream)
{
    if (bytes == 0)
        return SW_OK;
    SW_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                  (cudaStream_t)stream));
    return SW_OK;
}

extern "C" sw_status sw_cuda_memset_async(void *dst, int value, size_t bytes, void *stream)
{
    if (bytes == 0)
        return SW_OK;
    SW_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, (cudaStream_t)stream));
    return SW_OK;
}

/* The block store waits for its copies out of a bounce buffer before it
 * reuses the buffer. */
extern "C" sw_status sw_cuda_stream_sync(void *stream)
{
    SW_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return SW_OK;
}

extern "C" int sw_cuda_stream_capturing(void *stream)
{
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &st) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return st != cudaStreamCaptureStatusNone;
}

/* 1 when p is device (or managed) memory of this process, 0 for host or
 * unknown memory. A caller that passes a host buffer as a device
 * destination gets a clear SW_STATUS_INVALID instead of a CUDA error from
 * the copy. */
extern "C" int sw_cuda_is_device_ptr(const void *p)
{
    cudaPointerAttributes at;
    if (!p || cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        return 0;
    }
    return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

extern "C" sw_status sw_cuda_host_alloc(void **p, size_t bytes)
{
    *p = NULL;
    cudaError_t e = cudaMallocHost(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        /* Pinned memory exhaustion is an allocation failure, not a broken
         * context: report it as such so callers can fall back to pageable. */
        if (e == cudaErrorMemoryAllocation)
            return sw_fail(SW_STATUS_NO_MEMORY, "cudaMallocHost(%zu bytes): %s", bytes,
                           cudaGetErrorString(e));
        return sw_fail(SW_STATUS_CUDA, "cudaMallocHost(%zu bytes): %s (%s) at %s:%d", bytes,
                       cudaGetErrorName(e), cudaGetErrorString(e), __FILE__, __LINE__);
    }
    return SW_OK;
}

extern "C" void sw_cuda_host_free(void *p)
{
    if (p)
        (void)cudaFreeHost(p);
}

extern "C" sw_status sw_cuda_host_register(void *p, size_t bytes)
{
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return sw_fail(e == cudaErrorMemoryAllocation ? SW_STATUS_NO_MEMORY : SW_STATUS_CUDA,
                       "cudaHostRegister(%zu bytes): %s", bytes, cudaGetErrorString(e));
    }
    return SW_OK;
}

extern "C" void sw_cuda_host_unregister(void *p)
{
    if (p && cudaHostUnregister(p) != cudaSuccess)
        (void)cudaGetLastError();
}

extern "C" int sw_cuda_built(void) { return 1; }

/* The architectures this object was compiled for: CMake passes the list it
 * built from SPILLWAY_CUDA_ARCHS as SW_CUDA_ARCH_LIST; a build without it
 * (a standalone nvcc line) reports the documented default. */
#ifndef SW_CUDA_ARCH_LIST
#define SW_CUDA_ARCH_LIST "sm_80 sm_90a sm_120 sm_121"
#endif
extern "C" const char *sw_cuda_archs(void) { return SW_CUDA_ARCH_LIST; }
