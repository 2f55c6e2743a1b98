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
    if (!pc)
        return;
    sw_cuda_staging_free(pc->stage); /* reused once its last upload is done */
    memset(pc, 0, sizeof *pc);
}

/* The kernel's own gather (sw_cuda_gather_args): each request's tiles of
 * tile_keys keys, last first, the requests in the order the work list
 * first reads them; tbase[r] = the index of request r's last tile. With
 * tiles == NULL only counts. Requests without items (no query rows) are
 * not gathered: no item reads them. */
static int64_t plan_gather_tiles(const sw_paged_table *pt, int32_t batch,
                                 const sw_work_item *work, int32_t num_work, int32_t tile_keys,
                                 sw_gather_tile *tiles, int32_t *tbase, unsigned char *seen)
{
    int64_t n = 0;
    memset(seen, 0, (size_t)batch);
    for (int32_t i = 0; i < num_work; i++) {
        const int32_t r = work[i].req;
        if (seen[r])
            continue;
        seen[r] = 1;
        const int32_t kv0 = pt->kv_indptr[r], len = pt->kv_indptr[r + 1] - kv0;
        const int32_t nt = (len + tile_keys - 1) / tile_keys;
        if (tbase)
            tbase[r] = (int32_t)n;
        for (int32_t j = nt - 1; j >= 0; j--, n++) {
            if (!tiles)
                continue;
            const int32_t k0 = j * tile_keys;
            tiles[n].row0 = kv0 + k0;
            tiles[n].tok0 = k0;
            tiles[n].keys = len - k0 < tile_keys ? len - k0 : tile_keys;
            tiles[n].pbase = pt->page_indptr[r];
        }
    }
    return n;
}

sw_status sw_paged_cuda_plan(sw_paged_cuda *pc, const sw_prefill_params *p, int32_t batch,
                             const int32_t *qo_indptr, const sw_paged_table *pt, int decode,
                             const sw_work_item *work, int32_t num_work, int32_t tile_keys,
                             size_t ws_off)
{
    memset(pc, 0, sizeof *pc);
    pc->decode = decode;
    unsigned char *seen = NULL;
    if (!decode && tile_keys > 0 && num_work > 0) {
        seen = malloc((size_t)batch + 1);
        if (!seen)
            return sw_fail(SW_STATUS_NO_MEMORY, "paged prefill: cannot allocate %d flags",
                           (int)batch);
        const int64_t nt = plan_gather_tiles(pt, batch, work, num_work, tile_keys, NULL, NULL,
                                             seen);
        if (nt > INT32_MAX / 64) {
            free(seen);
            return sw_fail(SW_STATUS_UNSUPPORTED, "paged prefill: %lld tiles exceed a launch",
                           (long long)nt);
        }
        pc->num_tiles = (int32_t)nt;
        pc->tile_keys = nt > 0 ? tile_keys : 0;
    }
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
    o = sw_align_up(o + sizeof(sw_decode_merge) * (size_t)n_merges, 16);
    pc->tiles_off = o;
    o = sw_align_up(o + sizeof(sw_gather_tile) * (size_t)pc->num_tiles, 16);
    pc->tbase_off = o;
    o = sw_align_up(o + (pc->num_tiles > 0 ? b1 : 0), 16);
    /* the tiles' counters, the gatherers' count and their claims, zero in
     * the blob */
    pc->tdone_off = o;
    o = sw_align_up(o + (pc->num_tiles > 0 ? sizeof(int32_t) * ((size_t)pc->num_tiles + 2) : 0),
                    SW_PC_ALIGN);
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
    sw_status s = sw_cuda_staging_alloc(&pc->stage, &pc->blob, pc->blob_bytes);
    if (s != SW_OK) { /* (blob and stage left NULL) */
        free(seen);
        return s;
    }
    char *bl = pc->blob;
    memset(bl, 0, pc->blob_bytes);
    memcpy(bl + pc->qo_off, qo_indptr, b1);
    memcpy(bl + pc->kv_off, pt->kv_indptr, b1);
    memcpy(bl + pc->pi_off, pt->page_indptr, b1);
    memcpy(bl + pc->px_off, pt->page_indices, sizeof(int32_t) * (size_t)pt->page_indptr[batch]);
    if (pc->num_tiles > 0) {
        const int64_t nt = plan_gather_tiles(pt, batch, work, num_work, tile_keys,
                                             (sw_gather_tile *)(bl + pc->tiles_off),
                                             (int32_t *)(bl + pc->tbase_off), seen);
        free(seen);
        SW_ASSERT_RET(nt == pc->num_tiles);
    } else {
        free(seen);
    }
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

int32_t sw_paged_gather_bulk_ok(const sw_attn_problem *pb, const sw_paged_table *pt,
                                const sw_paged_strides *ks, const sw_paged_strides *vs,
                                int32_t tile_keys)
{
    const int64_t hd = pb->head_dim, row = (int64_t)pb->num_kv_heads * hd;
    if (tile_keys != sw_hopper_tile_n(pb->head_dim, 0))
        return 0;
    if (ks->head != hd || vs->head != hd || ks->token != row || vs->token != row)
        return 0; /* a token's heads not one contiguous row */
    if (pt->page_size % SW_GATHER_PIECE_KEYS != 0 ||
        row * 2 * SW_GATHER_PIECE_KEYS > SW_GATHER_BULK_BYTES)
        return 0;
    if ((uintptr_t)pb->k % 16 != 0 || (uintptr_t)pb->v % 16 != 0 || (ks->page * 2) % 16 != 0 ||
        (vs->page * 2) % 16 != 0)
        return 0;
    return 1;
}

sw_status sw_paged_cuda_run(const sw_paged_cuda *pc, const sw_attn_problem *pb,
                            const sw_paged_table *pt, const sw_paged_strides *ks,
                            const sw_paged_strides *vs, void *workspace, void *stream,
                            const void **k_dense, const void **v_dense,
                            sw_cuda_gather_args *gather)
{
    char *ws = workspace, *dev_blob = ws + pc->ws_off;
    SW_TRY(sw_cuda_memcpy_h2d_async(dev_blob, pc->blob, pc->blob_bytes, stream));
    sw_cuda_staging_copied(pc->stage, stream);
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
    memset(gather, 0, sizeof *gather);
    if (pc->num_tiles == 0)
        return sw_cuda_paged_gather_launch(&a, stream);
    gather->k_pool = a.k_pool;
    gather->v_pool = a.v_pool;
    gather->k_tok = a.k_tok;
    gather->k_head = a.k_head;
    gather->k_page = a.k_page;
    gather->v_tok = a.v_tok;
    gather->v_head = a.v_head;
    gather->v_page = a.v_page;
    gather->page_size = a.page_size;
    gather->ps_log2 = a.ps_log2;
    gather->page_indices = a.page_indices;
    gather->k_dense = a.k_dense;
    gather->v_dense = a.v_dense;
    gather->tiles = (const sw_gather_tile *)(dev_blob + pc->tiles_off);
    gather->num_tiles = pc->num_tiles;
    gather->tile_keys = pc->tile_keys;
    gather->piece_keys = SW_GATHER_PIECE_KEYS;
    gather->tile_base = (const int32_t *)(dev_blob + pc->tbase_off);
    gather->tile_done = (int32_t *)(dev_blob + pc->tdone_off);
    gather->bulk = sw_paged_gather_bulk_ok(pb, pt, ks, vs, pc->tile_keys) &&
                   (uintptr_t)a.k_dense % 16 == 0 && (uintptr_t)a.v_dense % 16 == 0;
    return SW_OK;
}
