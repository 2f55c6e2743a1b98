/* Ragged work-list planner: one list of (request, q-tile, head) items for the
 * whole batch. A persistent grid takes items in list order, so the order
 * decides two things:
 *  - balance: the longest items first, so that the long causal tiles finish
 *    early and the tail is filled with short ones (greedy LPT scheduling);
 *  - L2 reuse: every item of one (request, kv head) reads the same K/V, once
 *    per item. In plain longest-first order those items lie far apart (one
 *    per cost bucket, every request's in between), so on a batch of many
 *    requests the K/V streams through L2 again for every bucket (16x1k d128
 *    on the H200: 43% L2 hits, DRAM 65% busy, docs/perf/prefill.md).
 * So the list is cut into sections: (request, kv head) groups, longest
 * group first, are packed into a section while their K/V fit in
 * `section_bytes`; within a section the items are longest first. The ~grid
 * items in flight then come from one or two sections, whose K/V stay in L2
 * while every item that reads them runs. section_bytes <= 0: one section
 * (plain longest-first order). */
#include "attn_internal.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int64_t section; /* filled once the groups are cut into sections */
    int64_t cost;
    int64_t group;   /* request * num_kv_heads + kv head */
    sw_work_item it;
} keyed_item;

typedef struct {
    int64_t cost;    /* its longest item */
    int64_t bytes;   /* K/V it reads: kv_len * kv_token_bytes */
    int64_t id;      /* request * num_kv_heads + kv head */
    int64_t section;
} group_info;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed_item *x = a, *y = b;
    if (x->section != y->section)
        return x->section < y->section ? -1 : 1;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    if (x->it.req != y->it.req)
        return x->it.req < y->it.req ? -1 : 1;
    if (x->it.head0 != y->it.head0)
        return x->it.head0 < y->it.head0 ? -1 : 1;
    return x->it.q_tok0 < y->it.q_tok0 ? -1 : (x->it.q_tok0 > y->it.q_tok0);
}

/* Longest group first; ties by id (request, then kv head). */
static int cmp_group(const void *a, const void *b)
{
    const group_info *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

static int cmp_group_id(const void *a, const void *b)
{
    const group_info *x = a, *y = b;
    return x->id < y->id ? -1 : (x->id > y->id);
}

int32_t sw_plan_wide_kv(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch)
{
    double all = 0, longw = 0;
    for (int32_t b = 0; b < batch; b++) {
        const double q = (double)(qo_indptr[b + 1] - qo_indptr[b]);
        const int32_t kl = kv_indptr[b + 1] - kv_indptr[b];
        const double w = q * (double)kl;
        all += w;
        if (kl >= 8192)
            longw += w;
    }
    return all > 0 && longw >= 0.75 * all;
}

static int32_t pack_for(int32_t q_len, int32_t group, int32_t tile_m, int32_t pack_max_q_len)
{
    if (group > 1 && tile_m % group == 0 && q_len <= pack_max_q_len)
        return group;
    return 1;
}

int64_t sw_plan_work(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch,
                     int32_t num_qo_heads, int32_t num_kv_heads, int32_t causal,
                     int32_t tile_m, int32_t pack_max_q_len, int64_t kv_token_bytes,
                     int64_t section_bytes, sw_work_item *items, int64_t capacity)
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
                tmp[k].group = (int64_t)b * num_kv_heads + h0 / group;
                tmp[k].section = 0;
                k++;
            }
        }
    }
    if (section_bytes > 0 && k > 0) {
        /* Groups exist for every (request, kv head) with items; indexed by id. */
        int64_t ng = (int64_t)batch * num_kv_heads;
        group_info *gi = malloc((size_t)ng * sizeof *gi);
        if (!gi) {
            free(tmp);
            return -2;
        }
        for (int64_t g = 0; g < ng; g++) {
            int32_t b = (int32_t)(g / num_kv_heads);
            gi[g] = (group_info){-1, (int64_t)(kv_indptr[b + 1] - kv_indptr[b]) * kv_token_bytes,
                                 g, 0};
        }
        for (int64_t i = 0; i < k; i++)
            if (tmp[i].cost > gi[tmp[i].group].cost)
                gi[tmp[i].group].cost = tmp[i].cost;
        qsort(gi, (size_t)ng, sizeof *gi, cmp_group);
        int64_t sec = 0, fill = 0;
        for (int64_t g = 0; g < ng && gi[g].cost >= 0; g++) {
            if (fill > 0 && fill + gi[g].bytes > section_bytes) {
                sec++;
                fill = 0;
            }
            gi[g].section = sec;
            fill += gi[g].bytes;
        }
        qsort(gi, (size_t)ng, sizeof *gi, cmp_group_id); /* back to id order */
        for (int64_t i = 0; i < k; i++)
            tmp[i].section = gi[tmp[i].group].section;
        free(gi);
    }
    qsort(tmp, (size_t)k, sizeof *tmp, cmp_keyed);
    int64_t out = k < capacity ? k : capacity;
    for (int64_t i = 0; i < out; i++)
        items[i] = tmp[i].it;
    free(tmp);
    return k;
}
