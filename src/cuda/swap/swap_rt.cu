/* CUDA runtime wrappers of the swap engine's device pool (declared in
 * swap/swap_cuda.h): allocation, streams, events, copies. Every runtime
 * error becomes SW_STATUS_CUDA through SW_CUDA_CHECK. */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_runtime.h>
#include <string.h>

extern "C" sw_status sw_cuda_swap_alloc(void **p, size_t bytes)
{
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        if (e == cudaErrorMemoryAllocation)
            return sw_fail(SW_STATUS_NO_MEMORY, "cudaMalloc(%zu bytes): %s", bytes,
                           cudaGetErrorString(e));
        return sw_fail(SW_STATUS_CUDA, "cudaMalloc(%zu bytes): %s (%s)", bytes,
                       cudaGetErrorName(e), cudaGetErrorString(e));
    }
    return SW_OK;
}

extern "C" void sw_cuda_swap_free(void *p)
{
    if (p)
        (void)cudaFree(p);
}

extern "C" sw_status sw_cuda_swap_stream_create(void **stream)
{
    cudaStream_t s = NULL;
    *stream = NULL;
    SW_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = (void *)s;
    return SW_OK;
}

extern "C" void sw_cuda_swap_stream_destroy(void *stream)
{
    if (stream)
        (void)cudaStreamDestroy((cudaStream_t)stream);
}

extern "C" sw_status sw_cuda_swap_event_create(void **ev, int timing)
{
    cudaEvent_t e = NULL;
    *ev = NULL;
    SW_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault
                                                      : cudaEventDisableTiming));
    *ev = (void *)e;
    return SW_OK;
}

extern "C" void sw_cuda_swap_event_destroy(void *ev)
{
    if (ev)
        (void)cudaEventDestroy((cudaEvent_t)ev);
}

extern "C" sw_status sw_cuda_swap_event_record(void *ev, void *stream)
{
    SW_CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream));
    return SW_OK;
}

extern "C" sw_status sw_cuda_swap_stream_wait(void *stream, void *ev)
{
    SW_CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev, 0));
    return SW_OK;
}

extern "C" sw_status sw_cuda_swap_event_sync(void *ev)
{
    SW_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)ev));
    return SW_OK;
}

/* 1 when `stream` is being captured into a CUDA graph, 0 when not; an
 * error status (< 0) otherwise. */
extern "C" int sw_cuda_swap_capturing(void *stream)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaError_t e = cudaStreamIsCapturing((cudaStream_t)stream, &cs);
    if (e != cudaSuccess)
        return (int)sw_fail(SW_STATUS_CUDA, "cudaStreamIsCapturing: %s", cudaGetErrorString(e));
    return cs == cudaStreamCaptureStatusActive;
}

/* In a capture: an event record node (each replay records `ev`), the
 * event's state outside the graph untouched. */
extern "C" sw_status sw_cuda_swap_event_record_node(void *ev, void *stream)
{
    SW_CUDA_CHECK(cudaEventRecordWithFlags((cudaEvent_t)ev, (cudaStream_t)stream,
                                           cudaEventRecordExternal));
    return SW_OK;
}

/* 1 when the event's work is done, 0 when not yet; an error status (< 0)
 * otherwise. */
extern "C" int sw_cuda_swap_event_done(void *ev)
{
    const cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaSuccess)
        return 1;
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* not sticky */
        return 0;
    }
    return (int)sw_fail(SW_STATUS_CUDA, "cudaEventQuery: %s (%s)", cudaGetErrorName(e),
                        cudaGetErrorString(e));
}

extern "C" sw_status sw_cuda_swap_event_ms(float *ms, void *start, void *stop)
{
    SW_CUDA_CHECK(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)stop));
    return SW_OK;
}

extern "C" sw_status sw_cuda_swap_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0)
        return SW_OK;
    SW_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream));
    return SW_OK;
}

#if CUDART_VERSION >= 12080
/* 1 once the driver refused cudaMemcpyBatchAsync as unsupported (an older
 * driver under minor-version compatibility): one call a copy from then on. */
static int batch_unsupported;
#endif

extern "C" sw_status sw_cuda_swap_copy_batch(void *const *dst, const void *const *src,
                                             const size_t *bytes, size_t n, void *stream)
{
#if CUDART_VERSION >= 12080
    /* One call for the batch: the landing's launches are runs of stripes,
     * up to ~50 copies, each ~3.6 us of host time through cudaMemcpyAsync
     * (docs/perf/swap.md). Not on the legacy stream, which it refuses. */
    if (n > 1 && stream && !__atomic_load_n(&batch_unsupported, __ATOMIC_RELAXED)) {
        cudaMemcpyAttributes a;
        memset(&a, 0, sizeof a);
        a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        size_t first = 0;
#if CUDART_VERSION >= 13000
        const cudaError_t e =
            cudaMemcpyBatchAsync(dst, src, bytes, n, &a, &first, 1, (cudaStream_t)stream);
#else
        size_t fail = 0;
        const cudaError_t e = cudaMemcpyBatchAsync((void **)dst, (void **)src, (size_t *)bytes,
                                                   n, &a, &first, 1, &fail, (cudaStream_t)stream);
#endif
        if (e == cudaSuccess)
            return SW_OK;
        if (e != cudaErrorNotSupported && e != cudaErrorCallRequiresNewerDriver)
            return sw_fail(SW_STATUS_CUDA, "cudaMemcpyBatchAsync of %zu copies: %s (%s)", n,
                           cudaGetErrorName(e), cudaGetErrorString(e));
        (void)cudaGetLastError(); /* not sticky: cleared, the copies go one by one */
        __atomic_store_n(&batch_unsupported, 1, __ATOMIC_RELAXED);
    }
#endif
    for (size_t i = 0; i < n; i++) {
        const sw_status st = sw_cuda_swap_copy(dst[i], src[i], bytes[i], stream);
        if (st != SW_OK)
            return st;
    }
    return SW_OK;
}

extern "C" sw_status sw_cuda_swap_zero(void *dst, size_t bytes, void *stream)
{
    if (bytes == 0)
        return SW_OK;
    SW_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, (cudaStream_t)stream));
    return SW_OK;
}

extern "C" sw_status sw_cuda_swap_sm_count(int32_t device, int32_t *sms)
{
    int n = 0;
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, (int)device));
    *sms = (int32_t)n;
    return SW_OK;
}
