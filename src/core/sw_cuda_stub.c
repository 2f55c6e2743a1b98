/* core/sw_cuda.h for builds without CUDA: every call reports that no device
 * exists, so each caller falls back to its CPU path. */
#include "core/sw_cuda.h"
#include "core/sw_core.h"

#include <string.h>

int sw_cuda_built(void) { return 0; }
const char *sw_cuda_archs(void) { return ""; }
int32_t sw_cuda_devices(void) { return 0; }

static sw_status no_cuda(void)
{
    return sw_fail(SW_STATUS_NO_DEVICE, "this build of Spillway has no CUDA support");
}

sw_status sw_cuda_set_device(int32_t device) { (void)device; return no_cuda(); }
sw_status sw_cuda_memcpy_h2d_async(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst; (void)src; (void)bytes; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_memset_async(void *dst, int value, size_t bytes, void *stream)
{
    (void)dst; (void)value; (void)bytes; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_stream_sync(void *stream) { (void)stream; return no_cuda(); }
int sw_cuda_stream_capturing(void *stream) { (void)stream; return 1; }
int sw_cuda_is_device_ptr(const void *p) { (void)p; return 0; }
sw_status sw_cuda_host_alloc(void **p, size_t bytes) { (void)bytes; *p = NULL; return no_cuda(); }
void sw_cuda_host_free(void *p) { (void)p; }
sw_status sw_cuda_staging_alloc(sw_staging **s, void **p, size_t bytes)
{
    (void)bytes;
    *s = NULL;
    *p = NULL;
    return no_cuda();
}
void sw_cuda_staging_copied(sw_staging *s, void *stream) { (void)s; (void)stream; }
void sw_cuda_staging_free(sw_staging *s) { (void)s; }
void sw_cuda_staging_get_stats(sw_cuda_staging_stats *st) { memset(st, 0, sizeof *st); }
sw_status sw_cuda_host_register(void *p, size_t bytes) { (void)p; (void)bytes; return no_cuda(); }
void sw_cuda_host_unregister(void *p) { (void)p; }
