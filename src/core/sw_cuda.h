/* The CUDA runtime as the C sources see it: thin wrappers so that no C file
 * needs a CUDA header. Implemented in core/sw_cuda.cu when the library is
 * built with CUDA; in a build without it core/sw_cuda_stub.c reports that no
 * device exists (SW_STATUS_NO_DEVICE, 0 devices), so every caller falls
 * back to its CPU path. Each wrapper turns a runtime error into a status
 * (SW_STATUS_CUDA, or SW_STATUS_NO_MEMORY for pinned memory exhaustion)
 * with the detail in sw_last_error(). */
#ifndef SW_CUDA_H
#define SW_CUDA_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int sw_cuda_built(void);          /* 1 when compiled with CUDA */
const char *sw_cuda_archs(void);  /* "sm_80 sm_90a ...": the compiled targets */
/* Usable devices; 0 without a driver, a device or a new enough driver. */
int32_t sw_cuda_devices(void);
/* SW_STATUS_NO_DEVICE when `device` is not one of them. */
sw_status sw_cuda_set_device(int32_t device);

sw_status sw_cuda_memcpy_h2d_async(void *dst, const void *src, size_t bytes, void *stream);
sw_status sw_cuda_memset_async(void *dst, int value, size_t bytes, void *stream);
sw_status sw_cuda_stream_sync(void *stream);
/* 1 when `stream` is being captured into a CUDA graph, or when that cannot
 * be told (the caller then takes the careful path); 0 otherwise. */
int sw_cuda_stream_capturing(void *stream);
/* 1 when p is device (or managed) memory of this process, 0 for host or
 * unknown memory: a host buffer passed as a device destination gets a
 * clear SW_STATUS_INVALID from its caller instead of a CUDA error. */
int sw_cuda_is_device_ptr(const void *p);

/* Pinned host memory (cudaMallocHost) and its release. */
sw_status sw_cuda_host_alloc(void **p, size_t bytes);
void sw_cuda_host_free(void *p);
/* Staging buffers for the tables a plan copies to the device at each run:
 * pinned, from a pool (core/sw_cuda.cu), so that destroying a plan does not
 * wait for the device. sw_cuda_staging_alloc gives the buffer's record and
 * its memory (on the current device); sw_cuda_staging_copied is called
 * after each copy out of it is enqueued on `stream`; a buffer given back is
 * taken again only once that copy is done. Taking one may wait for the
 * oldest copy out of its size class when 8 given back are all pending. */
typedef struct sw_staging sw_staging;
sw_status sw_cuda_staging_alloc(sw_staging **s, void **p, size_t bytes);
void sw_cuda_staging_copied(sw_staging *s, void *stream);
void sw_cuda_staging_free(sw_staging *s);
typedef struct {
    uint64_t allocated; /* fresh pinned buffers */
    uint64_t reused;    /* taken from the pool, their copies done */
    uint64_t waited;    /* taken from the pool after waiting for the oldest copy */
    uint64_t freed;     /* given back to the driver (cudaFreeHost) */
} sw_cuda_staging_stats;
void sw_cuda_staging_get_stats(sw_cuda_staging_stats *st);
/* Pins existing host memory (cudaHostRegister) / releases that. */
sw_status sw_cuda_host_register(void *p, size_t bytes);
void sw_cuda_host_unregister(void *p);

#ifdef __cplusplus
}
#endif
#endif
