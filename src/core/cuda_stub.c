/* CUDA entry points for builds without CUDA: every call reports that no
 * device exists, so the front end falls back to the CPU. */
#include "../attn/attn_internal.h"
#include "sw_core.h"

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
/* Declared in store/store_internal.h (the block store's device reads). */
sw_status sw_cuda_stream_sync(void *stream);
sw_status sw_cuda_stream_sync(void *stream) { (void)stream; return no_cuda(); }
int sw_cuda_is_device_ptr(const void *p);
int sw_cuda_is_device_ptr(const void *p) { (void)p; return 0; }
sw_status sw_cuda_host_alloc(void **p, size_t bytes) { (void)bytes; *p = NULL; return no_cuda(); }
void sw_cuda_host_free(void *p) { (void)p; }
sw_status sw_cuda_host_register(void *p, size_t bytes) { (void)p; (void)bytes; return no_cuda(); }
void sw_cuda_host_unregister(void *p) { (void)p; }
sw_status sw_cuda_prefill_portable_config(int32_t device, int32_t head_dim, sw_dtype dtype,
                                          int32_t *tile_m, int32_t *grid_ctas)
{
    (void)device; (void)head_dim; (void)dtype; (void)tile_m; (void)grid_ctas;
    return no_cuda();
}
sw_status sw_cuda_prefill_portable_launch(const sw_cuda_prefill_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_prefill_hopper_config(int32_t device, int32_t head_dim, sw_dtype dtype,
                                        int32_t *tile_m, int32_t *grid_ctas)
{
    (void)device; (void)head_dim; (void)dtype; (void)tile_m; (void)grid_ctas;
    return no_cuda();
}
sw_status sw_cuda_prefill_hopper_launch(const sw_cuda_prefill_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}

/* The swap engine's device pool (src/swap/swap_cuda.h). */
#include "../swap/swap_cuda.h"
sw_status sw_cuda_swap_alloc(void **p, size_t bytes) { (void)bytes; *p = NULL; return no_cuda(); }
void sw_cuda_swap_free(void *p) { (void)p; }
sw_status sw_cuda_swap_stream_create(void **stream) { *stream = NULL; return no_cuda(); }
void sw_cuda_swap_stream_destroy(void *stream) { (void)stream; }
sw_status sw_cuda_swap_event_create(void **ev, int timing)
{
    (void)timing;
    *ev = NULL;
    return no_cuda();
}
void sw_cuda_swap_event_destroy(void *ev) { (void)ev; }
sw_status sw_cuda_swap_event_record(void *ev, void *stream) { (void)ev; (void)stream; return no_cuda(); }
sw_status sw_cuda_swap_stream_wait(void *stream, void *ev) { (void)ev; (void)stream; return no_cuda(); }
sw_status sw_cuda_swap_event_sync(void *ev) { (void)ev; return no_cuda(); }
sw_status sw_cuda_swap_event_ms(float *ms, void *start, void *stop)
{
    (void)start; (void)stop;
    *ms = 0;
    return no_cuda();
}
sw_status sw_cuda_swap_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst; (void)src; (void)bytes; (void)stream;
    return no_cuda();
}
int sw_cuda_swap_fused_merge(void) { return 0; }
void sw_cuda_swap_preload(int32_t D) { (void)D; }
sw_status sw_cuda_swap_merge_wide(const sw_cuda_swap_tile_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_merge_split(const sw_cuda_swap_tile_args *a, float *part2,
                                   size_t part2_floats, int32_t sms, void *stream)
{
    (void)a; (void)part2; (void)part2_floats; (void)sms; (void)stream;
    return no_cuda();
}
int sw_cuda_swap_direct_ok(int32_t D, int32_t B, int32_t nrg)
{
    (void)D; (void)B; (void)nrg;
    return 0;
}
sw_status sw_cuda_swap_tile_direct(const sw_cuda_swap_direct_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_zero(void *dst, size_t bytes, void *stream)
{
    (void)dst; (void)bytes; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_sm_count(int32_t device, int32_t *sms)
{
    (void)device;
    *sms = 0;
    return no_cuda();
}
int sw_cuda_swap_head_dim_ok(int32_t d) { (void)d; return 0; }
sw_status sw_cuda_swap_scatter(const sw_cuda_swap_scatter_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_tile(const sw_cuda_swap_tile_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_merge(const sw_cuda_swap_tile_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_state_init(float *m, float *l, float *acc, int64_t n, int32_t D,
                                  void *stream)
{
    (void)m; (void)l; (void)acc; (void)n; (void)D; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_finalize(const float *m, const float *l, const float *acc, int64_t n,
                                int32_t D, uint16_t *o, float *lse, float *of32, void *stream)
{
    (void)m; (void)l; (void)acc; (void)n; (void)D; (void)o; (void)lse; (void)of32; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_project(const float *P, int32_t D, int32_t R, const uint16_t *x,
                               int64_t rows, float *out, void *stream)
{
    (void)P; (void)D; (void)R; (void)x; (void)rows; (void)out; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_score(const float *qp, const float *arena, const sw_cuda_swap_sblk *blk,
                             int32_t nblk, int32_t H, int32_t G, int32_t B, int32_t R,
                             float *scores, void *stream)
{
    (void)qp; (void)arena; (void)blk; (void)nblk; (void)H; (void)G; (void)B; (void)R;
    (void)scores; (void)stream;
    return no_cuda();
}
