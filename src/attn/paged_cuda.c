/* Paged K/V on a CUDA backend: the plan (decode split or gather, the blob
 * of device tables) and the run's upload and launches. The kernels are
 * src/cuda/attn/paged_decode.cu; the choice between the two paths is
 * sw_paged_decode_fits, a pure function. */
#include "attn_internal.h"
#include "../core/sw_core.h"

#include <stdlib.h>
#include <string.h>

#define SW_PC_ALIGN 256

int sw_paged_decode_fits(const int32_t *qo_indptr, int32_t batch, int32_t group)
{
    for (int32_t b = 0; b < batch; b++)
        if ((int64_t)(qo_indptr[b + 1] - qo_indptr[b]) * group > SW_DECODE_ROWS)
            return 0;
    return 1;
}

void sw_paged_cuda_free(sw_paged_cuda *pc)
{
    if (pc && pc->blob)
        sw_cuda_host_free(pc->blob);
    if (pc)
        memset(pc, 0, sizeof *pc);
}

sw_status sw_paged_cuda_plan(sw_paged_cuda *pc, const sw_prefill_params *p, int32_t batch,
                             const int32_t *qo_indptr, const sw_paged_table *pt, int decode,
                             size_t ws_off)
{
    memset(pc, 0, sizeof *pc);
    pc->decode = decode;
    int64_t n_items = 0, n_merges = 0, n_parts = 0, slots = 0;
    if (pc->decode) {
        int32_t sms = 0, per_sm = 0;
        SW_TRY(sw_cuda_paged_decode_config(p->device, p->head_dim, p->dtype, &sms, &per_sm));
        slots = (int64_t)sms * per_sm;
        n_items = sw_plan_decode(qo_indptr, pt->kv_indptr, batch, p->num_kv_heads, slots, NULL,
                                 NULL, &n_merges, &n_parts);
        if (n_items > INT32_MAX / 2)
            return sw_fail(SW_STATUS_UNSUPPORTED, "paged decode: %lld items exceed a launch",
                           (long long)n_items);
    }
    const size_t b1 = sizeof(int32_t) * ((size_t)batch + 1);
    size_t o = 0;
    pc->qo_off = o;
    o = sw_align_up(o + b1, 16);
    pc->kv_off = o;
    o = sw_align_up(o + b1, 16);
    pc->pi_off = o;
    o = sw_align_up(o + b1, 16);
    pc->px_off = o;
    o = sw_align_up(o + sizeof(int32_t) * ((size_t)pt->page_indptr[batch] + 1), 16);
    pc->items_off = o;
    o = sw_align_up(o + sizeof(sw_decode_item) * (size_t)n_items, 16);
    pc->merges_off = o;
    o = sw_align_up(o + sizeof(sw_decode_merge) * (size_t)n_merges, SW_PC_ALIGN);
    pc->blob_bytes = o;
    pc->ws_off = sw_align_up(ws_off, SW_PC_ALIGN);
    size_t w = pc->ws_off + pc->blob_bytes;
    if (pc->decode) {
        pc->part_o_off = w;
        w = sw_align_up(w + sizeof(float) * (size_t)n_parts * SW_DECODE_ROWS * p->head_dim,
                        SW_PC_ALIGN);
        pc->part_lse_off = w;
        w = sw_align_up(w + sizeof(float) * (size_t)n_parts * SW_DECODE_ROWS, SW_PC_ALIGN);
    } else {
        const size_t dense = (size_t)pt->kv_indptr[batch] * p->num_kv_heads * p->head_dim *
                             sw_dtype_size(p->dtype);
        pc->kd_off = w;
        w = sw_align_up(w + dense, SW_PC_ALIGN);
        pc->vd_off = w;
        w = sw_align_up(w + dense, SW_PC_ALIGN);
    }
    pc->ws_end = w;
    SW_TRY(sw_cuda_set_device(p->device));
    sw_status s = sw_cuda_host_alloc(&pc->blob, pc->blob_bytes);
    if (s != SW_OK) {
        pc->blob = NULL;
        return s;
    }
    char *bl = pc->blob;
    memset(bl, 0, pc->blob_bytes);
    memcpy(bl + pc->qo_off, qo_indptr, b1);
    memcpy(bl + pc->kv_off, pt->kv_indptr, b1);
    memcpy(bl + pc->pi_off, pt->page_indptr, b1);
    memcpy(bl + pc->px_off, pt->page_indices, sizeof(int32_t) * (size_t)pt->page_indptr[batch]);
    if (pc->decode) {
        int64_t nm = 0, np = 0;
        const int64_t k = sw_plan_decode(qo_indptr, pt->kv_indptr, batch, p->num_kv_heads, slots,
                                         (sw_decode_item *)(bl + pc->items_off),
                                         (sw_decode_merge *)(bl + pc->merges_off), &nm, &np);
        if (k == -2)
            return sw_fail(SW_STATUS_NO_MEMORY, "paged decode: cannot allocate the plan's sort "
                           "buffer");
        SW_ASSERT_RET(k == n_items && nm == n_merges && np == n_parts);
    }
    pc->num_items = (int32_t)n_items;
    pc->num_merges = (int32_t)n_merges;
    return SW_OK;
}

static int log2_exact(int32_t x)
{
    for (int i = 0; i < 31; i++)
        if (x == (1 << i))
            return i;
    return -1;
}

sw_status sw_paged_cuda_run(const sw_paged_cuda *pc, const sw_attn_problem *pb,
                            const sw_paged_table *pt, const sw_paged_strides *ks,
                            const sw_paged_strides *vs, void *workspace, void *stream,
                            const void **k_dense, const void **v_dense)
{
    char *ws = workspace, *dev_blob = ws + pc->ws_off;
    SW_TRY(sw_cuda_memcpy_h2d_async(dev_blob, pc->blob, pc->blob_bytes, stream));
    sw_cuda_paged_args a;
    memset(&a, 0, sizeof a);
    a.dtype = pb->dtype;
    a.num_qo_heads = pb->num_qo_heads;
    a.num_kv_heads = pb->num_kv_heads;
    a.head_dim = pb->head_dim;
    a.causal = pb->causal;
    a.sm_scale = pb->sm_scale;
    a.q = pb->q;
    a.k_pool = pb->k;
    a.v_pool = pb->v;
    a.o = pb->o;
    a.lse = pb->lse;
    a.q_stride = pb->q_stride;
    a.o_stride = pb->o_stride;
    a.k_tok = ks->token;
    a.k_head = ks->head;
    a.k_page = ks->page;
    a.v_tok = vs->token;
    a.v_head = vs->head;
    a.v_page = vs->page;
    a.page_size = pt->page_size;
    a.ps_log2 = log2_exact(pt->page_size);
    a.batch = pb->batch;
    a.total_kv = pt->kv_indptr[pb->batch];
    a.qo_indptr = (const int32_t *)(dev_blob + pc->qo_off);
    a.kv_indptr = (const int32_t *)(dev_blob + pc->kv_off);
    a.page_indptr = (const int32_t *)(dev_blob + pc->pi_off);
    a.page_indices = (const int32_t *)(dev_blob + pc->px_off);
    a.items = (const sw_decode_item *)(dev_blob + pc->items_off);
    a.num_items = pc->num_items;
    a.merges = (const sw_decode_merge *)(dev_blob + pc->merges_off);
    a.num_merges = pc->num_merges;
    if (pc->decode) {
        a.part_o = (float *)(ws + pc->part_o_off);
        a.part_lse = (float *)(ws + pc->part_lse_off);
        return sw_cuda_paged_decode_launch(&a, stream);
    }
    a.k_dense = ws + pc->kd_off;
    a.v_dense = ws + pc->vd_off;
    *k_dense = a.k_dense;
    *v_dense = a.v_dense;
    return sw_cuda_paged_gather_launch(&a, stream);
}
