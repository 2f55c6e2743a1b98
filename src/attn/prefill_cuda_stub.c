/* The prefill kernels' entry points (attn/attn_internal.h) for builds
 * without CUDA: SW_STATUS_NO_DEVICE, so the front end runs on the CPU. */
#include "attn/attn_internal.h"
#include "core/sw_core.h"

static sw_status no_cuda(void)
{
    return sw_fail(SW_STATUS_NO_DEVICE, "this build of Spillway has no CUDA support");
}

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
sw_status sw_cuda_paged_decode_config(int32_t device, int32_t head_dim, sw_dtype dtype,
                                      int32_t *sms, int32_t *ctas_per_sm)
{
    (void)device; (void)head_dim; (void)dtype; (void)sms; (void)ctas_per_sm;
    return no_cuda();
}
sw_status sw_cuda_paged_decode_launch(const sw_cuda_paged_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}
sw_status sw_cuda_paged_gather_launch(const sw_cuda_paged_args *a, void *stream)
{
    (void)a; (void)stream;
    return no_cuda();
}
