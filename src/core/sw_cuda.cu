/* The CUDA runtime wrappers of core/sw_cuda.h, so that the C sources (front
 * end, planner, store, swap engine) never include a CUDA header. Each one
 * maps a runtime error to SW_STATUS_CUDA through SW_CUDA_CHECK. */
#include "core/sw_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <string.h>

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

/* Staging buffers: the pinned tables a plan uploads with each run. A caller
 * that plans every decode step (Python's paged calls) makes and destroys a
 * plan a call; cudaFreeHost waits for the whole device and cudaMallocHost
 * pins pages through the driver, so a buffer given back goes to a pool of
 * its size class and is taken again once the last copy out of it is done:
 * an event recorded after each copy tells. A class keeps at most
 * STAGE_PER_CLASS buffers; when all of them are still being copied out, the
 * next taker waits for the oldest copy alone. Buffers over STAGE_MAX_LOG2,
 * or copied inside a stream capture (the graph copies from them at times
 * the pool does not see), or from two streams at once, are freed as
 * before. */
enum { STAGE_HDR = 256, STAGE_MIN_LOG2 = 12, STAGE_MAX_LOG2 = 22, STAGE_PER_CLASS = 8,
       STAGE_DEVICES = 64 };
enum { STAGE_CLASSES = STAGE_MAX_LOG2 - STAGE_MIN_LOG2 + 1 };

typedef struct stage_hdr {
    struct stage_hdr *next; /* the pool's list of its class, oldest first */
    size_t cap;             /* usable bytes after the header */
    int device, cls;        /* cls -1: not pooled */
    int unsafe;             /* freed at release, never pooled */
    cudaEvent_t ev;         /* recorded after each copy out; NULL: none made */
    cudaStream_t last;      /* that copy's stream */
    int recorded;
} stage_hdr;

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static stage_hdr *stage_pool[STAGE_DEVICES][STAGE_CLASSES];
static sw_cuda_staging_stats stage_stats;

static stage_hdr *stage_of(void *p) { return (stage_hdr *)((char *)p - STAGE_HDR); }

/* 1 when no copy out of h is pending (an error counts as pending). */
static int stage_idle(stage_hdr *h)
{
    if (!h->recorded)
        return 1;
    const cudaError_t e = cudaEventQuery(h->ev);
    if (e == cudaSuccess)
        return 1;
    (void)cudaGetLastError(); /* NotReady is not sticky; a sticky error stays */
    return 0;
}

static void stage_destroy(stage_hdr *h)
{
    if (h->ev)
        (void)cudaEventDestroy(h->ev);
    (void)cudaFreeHost(h);
}

extern "C" sw_status sw_cuda_staging_alloc(void **p, size_t bytes)
{
    *p = NULL;
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    int cls = -1;
    for (int c = 0; c < STAGE_CLASSES; c++)
        if (bytes <= ((size_t)1 << (c + STAGE_MIN_LOG2))) {
            cls = c;
            break;
        }
    if (dev >= STAGE_DEVICES)
        cls = -1;
    if (cls >= 0) {
        stage_hdr *got = NULL, *wait = NULL;
        int n = 0;
        pthread_mutex_lock(&stage_lock);
        for (stage_hdr **pp = &stage_pool[dev][cls]; *pp; n++) {
            if (stage_idle(*pp)) {
                got = *pp;
                *pp = got->next;
                break;
            }
            pp = &(*pp)->next;
        }
        if (!got && n >= STAGE_PER_CLASS) { /* all busy: the oldest copy's end */
            wait = stage_pool[dev][cls];
            stage_pool[dev][cls] = wait->next;
        }
        if (got)
            stage_stats.reused++;
        else if (wait)
            stage_stats.waited++;
        pthread_mutex_unlock(&stage_lock);
        if (wait) {
            if (cudaEventSynchronize(wait->ev) != cudaSuccess) {
                (void)cudaGetLastError();
                stage_destroy(wait); /* broken: a fresh buffer instead */
            } else {
                got = wait;
            }
        }
        if (got) {
            got->next = NULL;
            *p = (char *)got + STAGE_HDR;
            return SW_OK;
        }
    }
    const size_t cap = cls >= 0 ? (size_t)1 << (cls + STAGE_MIN_LOG2) : bytes;
    void *base = NULL;
    SW_TRY(sw_cuda_host_alloc(&base, STAGE_HDR + cap));
    stage_hdr *h = (stage_hdr *)base;
    memset(h, 0, sizeof *h);
    h->cap = cap;
    h->device = dev;
    h->cls = cls;
    if (cudaEventCreateWithFlags(&h->ev, cudaEventDisableTiming) != cudaSuccess) {
        (void)cudaGetLastError();
        h->ev = NULL;
        h->unsafe = 1;
    }
    pthread_mutex_lock(&stage_lock);
    stage_stats.allocated++;
    pthread_mutex_unlock(&stage_lock);
    *p = (char *)base + STAGE_HDR;
    return SW_OK;
}

extern "C" void sw_cuda_staging_copied(void *p, void *stream)
{
    if (!p)
        return;
    stage_hdr *h = stage_of(p);
    const int capturing = sw_cuda_stream_capturing(stream);
    pthread_mutex_lock(&stage_lock);
    if (!h->unsafe) {
        if (capturing || (h->recorded && h->last != (cudaStream_t)stream && !stage_idle(h))) {
            h->unsafe = 1;
        } else if (cudaEventRecord(h->ev, (cudaStream_t)stream) != cudaSuccess) {
            (void)cudaGetLastError();
            h->unsafe = 1;
        } else {
            h->recorded = 1;
            h->last = (cudaStream_t)stream;
        }
    }
    pthread_mutex_unlock(&stage_lock);
}

extern "C" void sw_cuda_staging_free(void *p)
{
    if (!p)
        return;
    stage_hdr *h = stage_of(p), *drop = NULL;
    pthread_mutex_lock(&stage_lock);
    if (h->cls < 0 || h->unsafe) {
        drop = h;
    } else {
        /* to the tail; a class over its count loses an idle buffer, else its oldest */
        stage_hdr **pp = &stage_pool[h->device][h->cls], **idle = NULL;
        int n = 0;
        for (; *pp; pp = &(*pp)->next, n++)
            if (!idle && stage_idle(*pp))
                idle = pp;
        h->next = NULL;
        *pp = h;
        if (n + 1 > STAGE_PER_CLASS) {
            stage_hdr **victim = idle ? idle : &stage_pool[h->device][h->cls];
            drop = *victim;
            *victim = drop->next;
        }
    }
    if (drop)
        stage_stats.freed++;
    pthread_mutex_unlock(&stage_lock);
    if (drop)
        stage_destroy(drop); /* cudaFreeHost: waits for the device */
}

extern "C" void sw_cuda_staging_get_stats(sw_cuda_staging_stats *st)
{
    pthread_mutex_lock(&stage_lock);
    *st = stage_stats;
    pthread_mutex_unlock(&stage_lock);
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
