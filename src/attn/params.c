/* Validation of prefill parameters and ragged offsets. Every rejection names
 * the offending field and value, so a caller can fix the call from the
 * message alone. */
#include "attn_internal.h"
#include "../core/sw_core.h"

#include <math.h>
#include <stddef.h>

sw_status sw_prefill_validate_params(const sw_prefill_params *p)
{
    if (!p)
        return sw_fail(SW_STATUS_INVALID, "params is NULL");
    if (p->struct_size < offsetof(sw_prefill_params, num_threads) + sizeof(p->num_threads))
        return sw_fail(SW_STATUS_INVALID,
                       "params->struct_size=%u is smaller than this library's sw_prefill_params "
                       "(%zu); call sw_prefill_params_init()",
                       p->struct_size, sizeof(sw_prefill_params));
    if (p->dtype != SW_DTYPE_F32 && p->dtype != SW_DTYPE_F16 && p->dtype != SW_DTYPE_BF16)
        return sw_fail(SW_STATUS_UNSUPPORTED, "dtype=%d is not one of F32, F16, BF16", (int)p->dtype);
    if (p->num_qo_heads < 1 || p->num_kv_heads < 1)
        return sw_fail(SW_STATUS_INVALID, "num_qo_heads=%d and num_kv_heads=%d must be >= 1",
                       p->num_qo_heads, p->num_kv_heads);
    if (p->num_qo_heads % p->num_kv_heads != 0)
        return sw_fail(SW_STATUS_INVALID,
                       "num_qo_heads=%d is not divisible by num_kv_heads=%d (GQA needs a whole "
                       "number of query heads per kv head)",
                       p->num_qo_heads, p->num_kv_heads);
    if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256)
        return sw_fail(SW_STATUS_UNSUPPORTED, "head_dim=%d is not supported (64, 128 or 256)",
                       p->head_dim);
    if (p->causal != 0 && p->causal != 1)
        return sw_fail(SW_STATUS_INVALID, "causal=%d must be 0 or 1", p->causal);
    if (!isfinite(p->sm_scale))
        return sw_fail(SW_STATUS_INVALID, "sm_scale=%g is not finite", (double)p->sm_scale);
    if (p->backend < SW_BACKEND_AUTO || p->backend > SW_BACKEND_CUDA_HOPPER)
        return sw_fail(SW_STATUS_INVALID, "backend=%d is not a sw_backend value", (int)p->backend);
    if (p->num_threads < 0)
        return sw_fail(SW_STATUS_INVALID, "num_threads=%d must be >= 0", p->num_threads);
    if (p->device < 0)
        return sw_fail(SW_STATUS_INVALID, "device=%d must be >= 0", p->device);
    return SW_OK;
}

static sw_status check_one_indptr(const char *name, int32_t batch, const int32_t *ip)
{
    if (!ip)
        return sw_fail(SW_STATUS_INVALID, "%s is NULL", name);
    if (ip[0] != 0)
        return sw_fail(SW_STATUS_INVALID, "%s[0]=%d, must be 0", name, ip[0]);
    for (int32_t b = 0; b < batch; b++)
        if (ip[b + 1] < ip[b])
            return sw_fail(SW_STATUS_INVALID, "%s[%d]=%d < %s[%d]=%d: offsets must not decrease",
                           name, b + 1, ip[b + 1], name, b, ip[b]);
    if (ip[batch] > SW_MAX_ROWS)
        return sw_fail(SW_STATUS_UNSUPPORTED, "%s[%d]=%d: more than SW_MAX_ROWS (%d) rows in all",
                       name, batch, ip[batch], SW_MAX_ROWS);
    return SW_OK;
}

sw_status sw_prefill_validate_indptr(int32_t batch, const int32_t *qo_indptr,
                                     const int32_t *kv_indptr)
{
    if (batch < 0)
        return sw_fail(SW_STATUS_INVALID, "batch=%d must be >= 0", batch);
    SW_TRY(check_one_indptr("qo_indptr", batch, qo_indptr));
    SW_TRY(check_one_indptr("kv_indptr", batch, kv_indptr));
    return SW_OK;
}

double sw_attn_flops(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch,
                     int32_t num_qo_heads, int32_t head_dim, int32_t causal)
{
    double total = 0.0;
    for (int32_t b = 0; b < batch; b++) {
        int32_t ql = qo_indptr[b + 1] - qo_indptr[b];
        int32_t kl = kv_indptr[b + 1] - kv_indptr[b];
        double vis = 0.0; /* sum over rows of visible keys = q_len * kv_eff */
        if (!causal) {
            vis = (double)ql * kl;
        } else {
            for (int32_t t = 0; t < ql; t++)
                vis += sw_visible_keys(t, ql, kl, 1);
        }
        total += 4.0 * vis * head_dim * num_qo_heads;
    }
    return total;
}
