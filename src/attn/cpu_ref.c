/* The oracle: straightforward loops, inputs widened to double, fp64
 * accumulation, two passes (max, then exp-sum). Every backend is compared
 * against this; it is deliberately unoptimised so that it stays obviously
 * right. */
#include "attn_internal.h"
#include "cpu_ref.h"
#include "../core/sw_core.h"
#include "../core/sw_half.h"

#include <math.h>
#include <stdlib.h>

static inline double load_elem(sw_dtype t, const void *base, int64_t idx)
{
    switch (t) {
    case SW_DTYPE_F32: return ((const float *)base)[idx];
    case SW_DTYPE_F16: return sw_f16_to_f32(((const uint16_t *)base)[idx]);
    case SW_DTYPE_BF16: return sw_bf16_to_f32(((const uint16_t *)base)[idx]);
    }
    return NAN;
}

static inline void store_elem(sw_dtype t, void *base, int64_t idx, double v)
{
    switch (t) {
    case SW_DTYPE_F32: ((float *)base)[idx] = (float)v; break;
    case SW_DTYPE_F16: ((uint16_t *)base)[idx] = sw_f32_to_f16((float)v); break;
    case SW_DTYPE_BF16: ((uint16_t *)base)[idx] = sw_f32_to_bf16((float)v); break;
    }
}

void sw_ref_row(const sw_attn_problem *pb, int32_t req, int32_t t, int32_t h, double *out,
                double *lse, double *scratch)
{
    const int32_t d = pb->head_dim;
    const int32_t group = pb->num_qo_heads / pb->num_kv_heads;
    const int32_t kvh = h / group;
    const int32_t q0 = pb->qo_indptr[req], ql = pb->qo_indptr[req + 1] - q0;
    const int32_t k0 = pb->kv_indptr[req], kl = pb->kv_indptr[req + 1] - k0;
    const int32_t nvis = sw_visible_keys(t, ql, kl, pb->causal);
    const int64_t qbase = (int64_t)(q0 + t) * pb->q_stride + (int64_t)h * d;

    for (int32_t c = 0; c < d; c++)
        out[c] = 0.0;
    if (nvis == 0) {
        *lse = -INFINITY;
        return;
    }
    double q[256]; /* the query row, widened once (head_dim <= 256: params.c) */
    for (int32_t c = 0; c < d; c++)
        q[c] = load_elem(pb->dtype, pb->q, qbase + c);
    double mx = -INFINITY;
    for (int32_t j = 0; j < nvis; j++) {
        const int64_t kbase = (int64_t)(k0 + j) * pb->k_stride + (int64_t)kvh * d;
        double s = 0.0;
        for (int32_t c = 0; c < d; c++)
            s += q[c] * load_elem(pb->dtype, pb->k, kbase + c);
        s *= (double)pb->sm_scale;
        scratch[j] = s;
        if (s > mx)
            mx = s;
    }
    double sum = 0.0;
    for (int32_t j = 0; j < nvis; j++) {
        const double p = exp(scratch[j] - mx);
        const int64_t vbase = (int64_t)(k0 + j) * pb->v_stride + (int64_t)kvh * d;
        sum += p;
        for (int32_t c = 0; c < d; c++)
            out[c] += p * load_elem(pb->dtype, pb->v, vbase + c);
    }
    for (int32_t c = 0; c < d; c++)
        out[c] /= sum;
    *lse = mx + log(sum);
}

sw_status sw_cpu_prefill_ref(const sw_attn_problem *pb)
{
    int32_t max_kv = 0;
    for (int32_t b = 0; b < pb->batch; b++) {
        int32_t kl = pb->kv_indptr[b + 1] - pb->kv_indptr[b];
        if (kl > max_kv)
            max_kv = kl;
    }
    double *scratch = malloc(sizeof(double) * ((size_t)max_kv + 1));
    double *out = malloc(sizeof(double) * (size_t)pb->head_dim);
    if (!scratch || !out) {
        free(scratch);
        free(out);
        return sw_fail(SW_STATUS_NO_MEMORY, "reference: cannot allocate %d scores", max_kv);
    }
    const int32_t d = pb->head_dim;
    for (int32_t b = 0; b < pb->batch; b++) {
        const int32_t q0 = pb->qo_indptr[b], ql = pb->qo_indptr[b + 1] - q0;
        for (int32_t t = 0; t < ql; t++) {
            for (int32_t h = 0; h < pb->num_qo_heads; h++) {
                double lse;
                sw_ref_row(pb, b, t, h, out, &lse, scratch);
                const int64_t obase = (int64_t)(q0 + t) * pb->o_stride + (int64_t)h * d;
                for (int32_t c = 0; c < d; c++)
                    store_elem(pb->dtype, pb->o, obase + c, out[c]);
                if (pb->lse)
                    pb->lse[(int64_t)(q0 + t) * pb->num_qo_heads + h] = (float)lse;
            }
        }
    }
    free(scratch);
    free(out);
    return SW_OK;
}
