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
 * the pool does not see), or from a second stream while a copy on the first
 * is pending, are freed as before. The bookkeeping lives in malloc memory:
 * a pooled buffer is checked to be pinned memory still (cudaDeviceReset
 * frees it) before it is handed out. */
enum { STAGE_MIN_LOG2 = 12, STAGE_MAX_LOG2 = 22, STAGE_PER_CLASS = 8, STAGE_DEVICES = 64 };
enum { STAGE_CLASSES = STAGE_MAX_LOG2 - STAGE_MIN_LOG2 + 1 };

struct sw_staging {
    struct sw_staging *next; /* the pool's list of its class, oldest first */
    void *mem;               /* cudaMallocHost memory, cap bytes */
    size_t cap;
    int device, cls;         /* cls -1: not pooled */
    int unsafe;              /* freed at release, never pooled */
    int recorded;            /* ev holds the last copy out */
    cudaEvent_t ev;          /* NULL: none could be made (unsafe) */
    unsigned long long last; /* that copy's stream (cudaStreamGetId) */
};

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static sw_staging *stage_pool[STAGE_DEVICES][STAGE_CLASSES];
static sw_cuda_staging_stats stage_stats;

/* The calls below are legal while another thread captures a stream in
 * global mode only with this thread's capture mode relaxed. */
static cudaStreamCaptureMode stage_relax(void)
{
    cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) {
        (void)cudaGetLastError();
        m = cudaStreamCaptureModeRelaxed;
    }
    return m;
}

static void stage_restore(cudaStreamCaptureMode m)
{
    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess)
        (void)cudaGetLastError();
}

/* 1 when no copy out of s is pending; 0 while one is, or on an error (the
 * error is cleared: cudaErrorNotReady leaves none). */
static int stage_idle(sw_staging *s)
{
    if (!s->recorded)
        return 1;
    const cudaError_t e = cudaEventQuery(s->ev);
    if (e == cudaSuccess)
        return 1;
    if (e != cudaErrorNotReady)
        (void)cudaGetLastError();
    return 0;
}

/* 1 when s->mem is still this process's pinned memory. */
static int stage_alive(const sw_staging *s)
{
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, s->mem) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return at.type == cudaMemoryTypeHost;
}

static void stage_destroy(sw_staging *s, int alive)
{
    if (alive) {
        if (s->ev && cudaEventDestroy(s->ev) != cudaSuccess)
            (void)cudaGetLastError();
        if (cudaFreeHost(s->mem) != cudaSuccess) /* waits for the device */
            (void)cudaGetLastError();
    }
    free(s);
}

extern "C" sw_status sw_cuda_staging_alloc(sw_staging **out, void **p, size_t bytes)
{
    *out = NULL;
    *p = NULL;
    int dev = 0;
    SW_CUDA_CHECK(cudaGetDevice(&dev));
    int cls = -1;
    for (int c = 0; c < STAGE_CLASSES && dev < STAGE_DEVICES; c++)
        if (bytes <= ((size_t)1 << (c + STAGE_MIN_LOG2))) {
            cls = c;
            break;
        }
    if (cls >= 0) {
        const cudaStreamCaptureMode m = stage_relax();
        sw_staging *got = NULL, *wait = NULL, *dead = NULL;
        int n = 0;
        pthread_mutex_lock(&stage_lock);
        for (sw_staging **pp = &stage_pool[dev][cls]; *pp; n++) {
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
        pthread_mutex_unlock(&stage_lock);
        if (wait) {
            if (cudaEventSynchronize(wait->ev) == cudaSuccess) {
                got = wait;
            } else {
                (void)cudaGetLastError();
                dead = wait;
            }
        }
        if (got && !stage_alive(got)) { /* freed under the pool (a device reset) */
            dead = got;
            got = NULL;
        }
        if (dead) {
            const int alive = stage_alive(dead);
            stage_destroy(dead, alive);
        }
        stage_restore(m);
        pthread_mutex_lock(&stage_lock);
        if (got && got == wait)
            stage_stats.waited++;
        else if (got)
            stage_stats.reused++;
        if (dead)
            stage_stats.freed++;
        pthread_mutex_unlock(&stage_lock);
        if (got) {
            got->next = NULL;
            got->recorded = 0;
            *out = got;
            *p = got->mem;
            return SW_OK;
        }
    }
    sw_staging *s = (sw_staging *)calloc(1, sizeof *s);
    if (!s)
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot allocate a staging buffer's record");
    s->cap = cls >= 0 ? (size_t)1 << (cls + STAGE_MIN_LOG2) : bytes;
    s->device = dev;
    s->cls = cls;
    const sw_status st = sw_cuda_host_alloc(&s->mem, s->cap);
    if (st != SW_OK) {
        free(s);
        return st;
    }
    if (cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming) != cudaSuccess) {
        (void)cudaGetLastError();
        s->ev = NULL;
        s->unsafe = 1;
    }
    pthread_mutex_lock(&stage_lock);
    stage_stats.allocated++;
    pthread_mutex_unlock(&stage_lock);
    *out = s;
    *p = s->mem;
    return SW_OK;
}

extern "C" void sw_cuda_staging_copied(sw_staging *s, void *stream)
{
    if (!s || s->unsafe)
        return;
    /* A plan's buffer is its own until it is given back: no pool lock. Two
     * threads running one plan at once race here only over whether it is
     * pooled later; the stream ids keep a pending copy on another stream
     * (another thread's per-thread stream has the same handle) from being
     * forgotten. */
    unsigned long long id = 0;
    if (sw_cuda_stream_capturing(stream)) {
        s->unsafe = 1;
        return;
    }
    if (cudaStreamGetId((cudaStream_t)stream, &id) != cudaSuccess) {
        (void)cudaGetLastError();
        s->unsafe = 1;
        return;
    }
    if (s->recorded && s->last != id) {
        const cudaStreamCaptureMode m = stage_relax();
        s->unsafe = !stage_idle(s);
        stage_restore(m);
        if (s->unsafe)
            return;
    }
    if (cudaEventRecord(s->ev, (cudaStream_t)stream) != cudaSuccess) {
        (void)cudaGetLastError();
        s->unsafe = 1;
        return;
    }
    s->recorded = 1;
    s->last = id;
}

extern "C" void sw_cuda_staging_free(sw_staging *s)
{
    if (!s)
        return;
    sw_staging *drop = NULL;
    const cudaStreamCaptureMode m = stage_relax();
    pthread_mutex_lock(&stage_lock);
    if (s->cls < 0 || s->unsafe) {
        drop = s;
    } else {
        /* to the tail; a class over its count loses an idle buffer, else
         * its oldest (cudaFreeHost then waits for the device) */
        sw_staging **pp = &stage_pool[s->device][s->cls];
        int n = 0;
        for (; *pp; pp = &(*pp)->next)
            n++;
        s->next = NULL;
        *pp = s;
        if (n + 1 > STAGE_PER_CLASS) {
            sw_staging **victim = &stage_pool[s->device][s->cls];
            for (sw_staging **q = victim; *q; q = &(*q)->next)
                if (stage_idle(*q)) {
                    victim = q;
                    break;
                }
            drop = *victim;
            *victim = drop->next;
        }
    }
    if (drop)
        stage_stats.freed++;
    pthread_mutex_unlock(&stage_lock);
    if (drop)
        stage_destroy(drop, 1);
    stage_restore(m);
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
