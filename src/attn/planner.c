/* Ragged work-list planner: one list of (request, q-tile, head) items for the
 * whole batch, sorted longest first. A persistent grid that takes items in
 * order then finishes the long causal tiles early and fills the tail with
 * short ones (greedy LPT scheduling), instead of one launch per request. */
#include "attn_internal.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int64_t cost;
    sw_work_item it;
} keyed_item;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed_item *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    if (x->it.req != y->it.req)
        return x->it.req < y->it.req ? -1 : 1;
    if (x->it.head0 != y->it.head0)
        return x->it.head0 < y->it.head0 ? -1 : 1;
    return x->it.q_tok0 < y->it.q_tok0 ? -1 : (x->it.q_tok0 > y->it.q_tok0);
}

static int32_t pack_for(int32_t q_len, int32_t group, int32_t tile_m, int32_t pack_max_q_len)
{
    if (group > 1 && tile_m % group == 0 && q_len <= pack_max_q_len)
        return group;
    return 1;
}

int64_t sw_plan_work(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch,
                     int32_t num_qo_heads, int32_t num_kv_heads, int32_t causal,
                     int32_t tile_m, int32_t pack_max_q_len, sw_work_item *items,
                     int64_t capacity)
{
    const int32_t group = num_qo_heads / num_kv_heads;
    int64_t n = 0;
    for (int32_t b = 0; b < batch; b++) {
        int32_t ql = qo_indptr[b + 1] - qo_indptr[b];
        if (ql <= 0)
            continue;
        int32_t pack = pack_for(ql, group, tile_m, pack_max_q_len);
        int64_t toks = tile_m / pack;
        int64_t tiles = (ql + toks - 1) / toks;
        n += tiles * (num_qo_heads / pack);
    }
    if (n > INT32_MAX)
        return -1;
    if (!items)
        return n;

    keyed_item *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!tmp)
        return -2;
    int64_t k = 0;
    for (int32_t b = 0; b < batch; b++) {
        int32_t ql = qo_indptr[b + 1] - qo_indptr[b];
        int32_t kl = kv_indptr[b + 1] - kv_indptr[b];
        if (ql <= 0)
            continue;
        int32_t pack = pack_for(ql, group, tile_m, pack_max_q_len);
        int32_t toks = tile_m / pack;
        for (int32_t h0 = 0; h0 < num_qo_heads; h0 += pack) {
            for (int32_t t0 = 0; t0 < ql; t0 += toks) {
                int32_t last = t0 + toks - 1 < ql - 1 ? t0 + toks - 1 : ql - 1;
                int64_t rows = (int64_t)(last - t0 + 1) * pack;
                /* +1 so that empty-KV tiles (still a launch's worth of writes) sort last
                 * but are not free. */
                tmp[k].cost = (int64_t)(sw_visible_keys(last, ql, kl, causal) + 1) * 1024 + rows;
                tmp[k].it.req = b;
                tmp[k].it.q_tok0 = t0;
                tmp[k].it.head0 = h0;
                tmp[k].it.pack = pack;
                k++;
            }
        }
    }
    qsort(tmp, (size_t)k, sizeof *tmp, cmp_keyed);
    int64_t out = k < capacity ? k : capacity;
    for (int64_t i = 0; i < out; i++)
        items[i] = tmp[i].it;
    free(tmp);
    return k;
}
