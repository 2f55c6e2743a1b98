/* The attend call: sw_swap_attend (arguments, the batch's sequences) and
 * sw_swap_score_blocks; the work is the pool's (attend_internal.h: the
 * tile loop in attend_loop.c, the pools' operations in attend_host.c and
 * attend_dev.c). */
#include "attend_internal.h"
#include "core/sw_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sw_status validate(sw_swap *s, const sw_swap_attend_params *p, sw_swap_seq **seqs)
{
    if (p->layer < 0 || p->layer >= s->m.num_layers)
        return sw_fail(SW_STATUS_INVALID, "layer %d not in [0, %d)", p->layer,
                       s->m.num_layers);
    if (p->batch < 1 || !p->seq_ids || !p->q_indptr)
        return sw_fail(SW_STATUS_INVALID, "batch %d < 1 or null seq_ids / q_indptr", p->batch);
    if (p->q_indptr[0] != 0)
        return sw_fail(SW_STATUS_INVALID, "q_indptr[0]=%d, want 0", p->q_indptr[0]);
    for (int32_t b = 0; b < p->batch; b++)
        if (p->q_indptr[b + 1] < p->q_indptr[b])
            return sw_fail(SW_STATUS_INVALID, "q_indptr[%d]=%d < q_indptr[%d]=%d", b + 1,
                           p->q_indptr[b + 1], b, p->q_indptr[b]);
    if (p->q_indptr[p->batch] > 0 && (!p->q || !p->o))
        return sw_fail(SW_STATUS_INVALID, "null q or o");
    if (p->sparse_top_k < 0 || p->sparse_recent_blocks < 0)
        return sw_fail(SW_STATUS_INVALID, "sparse_top_k %d / sparse_recent_blocks %d < 0",
                       p->sparse_top_k, p->sparse_recent_blocks);
    /* (as sw_prefill_params' are) */
    if ((p->causal != 0 && p->causal != 1) || (p->sparse_check != 0 && p->sparse_check != 1))
        return sw_fail(SW_STATUS_INVALID, "causal=%d and sparse_check=%d must be 0 or 1",
                       p->causal, p->sparse_check);
    if (!isfinite(p->sm_scale))
        return sw_fail(SW_STATUS_INVALID, "sm_scale=%g is not finite", (double)p->sm_scale);
    /* each sequence marked with this call's number: a second listing finds
     * it marked (constant work per entry) */
    const uint64_t mark = ++s->marks;
    for (int32_t b = 0; b < p->batch; b++) {
        seqs[b] = sw_swap_find_seq(s, p->seq_ids[b]);
        if (!seqs[b])
            return sw_fail(SW_STATUS_NOT_FOUND, "sequence %llu (batch entry %d) is not "
                           "registered", (unsigned long long)p->seq_ids[b], b);
        if (seqs[b]->mark == mark) {
            int32_t c = 0;
            while (seqs[c] != seqs[b])
                c++;
            return sw_fail(SW_STATUS_INVALID, "sequence %llu listed twice (entries %d, %d)",
                           (unsigned long long)p->seq_ids[b], c, b);
        }
        seqs[b]->mark = mark;
    }
    return SW_OK;
}

sw_status sw_swap_attend(sw_swap *s, const sw_swap_attend_params *p, sw_swap_attend_result *res,
                         void *stream)
{
    if (!s || !p)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_attend: null argument");
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    if (res && res->struct_size < sizeof *res)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_attend_result.struct_size %u, want %zu",
                       res->struct_size, sizeof *res);
    /* before any other field: a shorter struct is read no further */
    if (p->struct_size != sizeof *p)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_attend_params.struct_size %u, want %zu",
                       p->struct_size, sizeof *p);
    sw_swap_dev_tl_phase(s, 'A'); /* (nothing without a device pool) */
    run R;
    memset(&R, 0, sizeof R);
    R.s = s;
    R.p = p;
    R.seqs = calloc((size_t)(p->batch > 0 ? p->batch : 1), sizeof *R.seqs);
    if (!R.seqs)
        return sw_fail(SW_STATUS_NO_MEMORY, "batch table");
    sw_status st = validate(s, p, R.seqs);
    if (st != SW_OK) {
        free(R.seqs);
        return st;
    }
    return s->ops->attend(&R, res, stream);
}

sw_status sw_swap_score_blocks(sw_swap *s, uint64_t seq_id, int32_t layer, const void *q,
                               int32_t q_len, float *scores, int32_t capacity, int32_t *nblocks)
{
    if (!s || !q || !nblocks || q_len < 1)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_score_blocks: null argument or q_len < 1");
    if (!scores && capacity > 0)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_score_blocks: scores is NULL with capacity "
                       "%d (NULL asks for the count only, with capacity 0)", capacity);
    const sw_swap_layer *L = NULL;
    SW_TRY(sw_swap_seq_layer(s, seq_id, layer, &L));
    *nblocks = L->nblocks;
    if (capacity < L->nblocks || (!scores && L->nblocks > 0))
        return sw_fail(SW_STATUS_WORKSPACE_TOO_SMALL, "scores has room for %d, the sequence "
                       "has %d blocks", capacity, L->nblocks);
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    return s->ops->score(s, L, q, q_len, scores);
}
