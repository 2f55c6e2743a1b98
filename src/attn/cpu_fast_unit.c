/* What the CPU fast path's per-ISA kernels share (cpu_fast_kernels.h): a
 * unit's visible keys, Q loaded transposed and scaled, O and LSE stored, the
 * AMX kernel's packed K/V. The driver (cpu_fast.c) calls the kernels, the
 * kernels call these; nothing here calls either, so the three stay a
 * layering, not a loop. */
#include "cpu_fast_kernels.h"
#include "../core/sw_core.h"
#include "../core/sw_half.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>

int sw_cpu_amx_nkeys = SW_CPU_AMX_NKEYS_DEFAULT;

void sw_cpu_unit_vis(const sw_attn_problem *pb, const sw_cpu_unit *u, int mv, int32_t *vis,
                     int32_t *vis_min, int32_t *vis_max)
{
    int32_t q_len = pb->qo_indptr[u->req + 1] - pb->qo_indptr[u->req];
    int32_t kv_len = pb->kv_indptr[u->req + 1] - pb->kv_indptr[u->req];
    int rows = u->ntok * u->nh;
    for (int r = 0; r < mv; r++) {
        int t = (r < rows ? r : rows - 1) / u->nh;
        vis[r] = sw_visible_keys(u->tok0 + t, q_len, kv_len, pb->causal);
    }
    /* visibility grows with the token, rows are token-major */
    *vis_min = vis[0];
    *vis_max = vis[rows - 1];
}

static inline float sw_load_elem(sw_dtype t, const void *row, int k)
{
    switch (t) {
    case SW_DTYPE_F32: return ((const float *)row)[k];
    case SW_DTYPE_F16: return sw_f16_to_f32(((const uint16_t *)row)[k]);
    default: return sw_bf16_to_f32(((const uint16_t *)row)[k]);
    }
}

static inline const void *sw_q_row(const sw_attn_problem *pb, int64_t tok, int32_t head)
{
    size_t es = pb->dtype == SW_DTYPE_F32 ? 4 : 2;
    return (const char *)pb->q + ((size_t)(tok * pb->q_stride) + (size_t)head * pb->head_dim) * es;
}

void sw_cpu_load_qt(const sw_attn_problem *pb, const sw_cpu_unit *u, int mv, float scale,
                    float *qt)
{
    const int d = pb->head_dim;
    const int G = pb->num_qo_heads / pb->num_kv_heads;
    const int rows = u->ntok * u->nh;
    const int64_t q0 = pb->qo_indptr[u->req] + u->tok0;
    for (int r = 0; r < rows; r++) {
        const void *src = sw_q_row(pb, q0 + r / u->nh, u->kvh * G + u->h0 + r % u->nh);
        for (int k = 0; k < d; k++)
            qt[(size_t)k * mv + r] = sw_load_elem(pb->dtype, src, k) * scale;
    }
    for (int r = rows; r < mv; r++)
        for (int k = 0; k < d; k++)
            qt[(size_t)k * mv + r] = 0.0f;
}

void sw_cpu_store_o(const sw_attn_problem *pb, const sw_cpu_unit *u, const float *o,
                    const float *m, const float *l)
{
    const int d = pb->head_dim;
    const int G = pb->num_qo_heads / pb->num_kv_heads;
    const int rows = u->ntok * u->nh;
    const int64_t q0 = pb->qo_indptr[u->req] + u->tok0;
    const size_t es = pb->dtype == SW_DTYPE_F32 ? 4 : 2;
    for (int r = 0; r < rows; r++) {
        int64_t tok = q0 + r / u->nh;
        int32_t head = u->kvh * G + u->h0 + r % u->nh;
        void *dst = (char *)pb->o + ((size_t)(tok * pb->o_stride) + (size_t)head * d) * es;
        const float *src = o + (size_t)r * d;
        float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        switch (pb->dtype) {
        case SW_DTYPE_F32:
            for (int k = 0; k < d; k++)
                ((float *)dst)[k] = src[k] * inv;
            break;
        case SW_DTYPE_F16:
            for (int k = 0; k < d; k++)
                ((uint16_t *)dst)[k] = sw_f32_to_f16(src[k] * inv);
            break;
        default:
            for (int k = 0; k < d; k++)
                ((uint16_t *)dst)[k] = sw_f32_to_bf16(src[k] * inv);
            break;
        }
        if (pb->lse) /* (a NaN row: NaN, not a row that sees no key) */
            pb->lse[tok * pb->num_qo_heads + head] =
                l[r] > 0.0f ? (float)(0.69314718055994531 * ((double)m[r] + log2((double)l[r])))
                : isnan(l[r]) ? NAN
                              : -INFINITY;
    }
}

/* Elements before (req, kvh) in a pack buffer: each request owns
 * (kv_len + 32) * num_kv_heads * head_dim, enough for its rounded-up keys. */
static size_t sw_cpu_pack_offset(const sw_attn_problem *pb, int32_t req, int32_t kvh)
{
    int64_t kv_len = pb->kv_indptr[req + 1] - pb->kv_indptr[req];
    int64_t before = (int64_t)(pb->kv_indptr[req] - pb->kv_indptr[0]) + 32 * (int64_t)req;
    return (size_t)((before * pb->num_kv_heads + kvh * sw_cpu_pack_keys((int32_t)kv_len)) *
                    pb->head_dim);
}

void sw_cpu_pack_get(const sw_cpu_scratch *s, const sw_attn_problem *pb, int32_t req,
                     int32_t kvh, const uint16_t **kt, const uint16_t **vp)
{
    sw_cpu_pack *pk = s->pack;
    size_t off = sw_cpu_pack_offset(pb, req, kvh);
    atomic_int *st = &pk->state[(int64_t)req * pb->num_kv_heads + kvh];
    if (atomic_load_explicit(st, memory_order_acquire) != 2) {
        int expect = 0;
        if (atomic_compare_exchange_strong_explicit(st, &expect, 1, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            pk->fn(pb, req, kvh, pk->k + off, pk->v + off);
            atomic_store_explicit(st, 2, memory_order_release);
        } else {
            /* another thread packs this head: one head's K/V, microseconds */
            while (atomic_load_explicit(st, memory_order_acquire) != 2)
                sched_yield();
        }
    }
    *kt = pk->k + off;
    *vp = pk->v + off;
}
