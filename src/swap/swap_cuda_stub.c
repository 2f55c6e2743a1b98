/* The swap engine's CUDA entry points (swap/swap_cuda.h) for builds
 * without CUDA: SW_STATUS_NO_DEVICE, so no device pool is ever created. */
#include "swap/swap_cuda.h"
#include "core/sw_core.h"

static sw_status no_cuda(void)
{
    return sw_fail(SW_STATUS_NO_DEVICE, "this build of Spillway has no CUDA support");
}

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
int sw_cuda_swap_event_done(void *ev) { (void)ev; return (int)no_cuda(); }
int sw_cuda_swap_capturing(void *stream) { (void)stream; return (int)no_cuda(); }
sw_status sw_cuda_swap_event_record_node(void *ev, void *stream)
{
    (void)ev;
    (void)stream;
    return no_cuda();
}
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
sw_status sw_cuda_swap_copy_batch(void *const *dst, const void *const *src, const size_t *bytes,
                                  size_t n, void *stream)
{
    (void)dst; (void)src; (void)bytes; (void)n; (void)stream;
    return no_cuda();
}
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
sw_status sw_cuda_swap_merge_ranges(const sw_cuda_swap_tile_args *a, int32_t n, float *part2,
                                    size_t part2_floats, int32_t sms, void *stream)
{
    (void)a; (void)n; (void)part2; (void)part2_floats; (void)sms; (void)stream;
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
sw_status sw_cuda_swap_gather(const sw_cuda_swap_gather_args *a, void *stream)
{
    (void)a;
    (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_pack(const sw_cuda_swap_pack_item *items, int32_t n, uint8_t *dst,
                            int32_t *tab, void *stream)
{
    (void)items; (void)n; (void)dst; (void)tab; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_swap_copy_tables(int32_t *dst, int32_t pitch, const int32_t *src,
                                   const int32_t *src_off, const int32_t *kv_indptr,
                                   int32_t block, int32_t batch, void *stream)
{
    (void)dst; (void)pitch; (void)src; (void)src_off; (void)kv_indptr; (void)block;
    (void)batch; (void)stream;
    return no_cuda();
}
