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

/* ------------------------------------------------------------ decode -- */

#define SW_DECODE_TILE 16      /* keys of one warp tile: item ranges are multiples */
#define SW_DECODE_ITEM_COST 256 /* a per-item cost (Q, combine, merge) in keys */
#define SW_DECODE_SPLIT_COST 256 /* a split's fixed cost (the merge's tail) in keys */

/* The items of one pair at this chunk: n of `per` keys (a multiple of the
 * tile; the last one shorter), none of them empty unless kv_len is 0. */
static int64_t decode_split(int64_t kv_len, int64_t chunk, int64_t *per)
{
    int64_t n = kv_len > 0 ? (kv_len + chunk - 1) / chunk : 1;
    n = n < SW_DECODE_MAX_SPLITS ? n : SW_DECODE_MAX_SPLITS;
    int64_t p = (kv_len + n - 1) / n;
    p = (p + SW_DECODE_TILE - 1) / SW_DECODE_TILE * SW_DECODE_TILE;
    if (p < SW_DECODE_TILE)
        p = SW_DECODE_TILE;
    *per = p;
    return kv_len > 0 ? (kv_len + p - 1) / p : 1;
}

/* Items at this chunk, and the longest item's keys. */
static int64_t decode_count(const int32_t *qo, const int32_t *kv, int32_t batch, int32_t heads,
                            int64_t chunk, int64_t *longest)
{
    int64_t items = 0, mx = 0;
    for (int32_t b = 0; b < batch; b++) {
        if (qo[b + 1] == qo[b])
            continue;
        int64_t per = 0;
        const int64_t len = kv[b + 1] - kv[b], n = decode_split(len, chunk, &per);
        items += n * heads;
        mx = per > mx ? per : mx;
    }
    if (longest)
        *longest = mx;
    return items;
}

typedef struct {
    int64_t len;
    sw_decode_item it;
} decode_keyed;

static int cmp_decode(const void *a, const void *b)
{
    const decode_keyed *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    if (x->it.req != y->it.req)
        return x->it.req < y->it.req ? -1 : 1;
    if (x->it.kvh != y->it.kvh)
        return x->it.kvh < y->it.kvh ? -1 : 1;
    return x->it.k0 < y->it.k0 ? -1 : x->it.k0 > y->it.k0;
}

int64_t sw_plan_decode(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch,
                       int32_t num_kv_heads, int64_t slots, sw_decode_item *items,
                       sw_decode_merge *merges, int64_t *num_merges, int64_t *num_parts)
{
    if (slots < 1)
        slots = 1;
    int64_t maxlen = 0;
    for (int32_t b = 0; b < batch; b++)
        if (qo_indptr[b + 1] > qo_indptr[b] && kv_indptr[b + 1] - kv_indptr[b] > maxlen)
            maxlen = kv_indptr[b + 1] - kv_indptr[b];
    /* For each wave count, the smallest chunk (a multiple of the tile)
     * whose items fit; keep the least estimated time. */
    int64_t best_chunk = maxlen > 0 ? maxlen : 1, best_t = -1;
    const int64_t unsplit = decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, best_chunk,
                                         NULL);
    if (unsplit <= 8 * slots) /* the search below finds the smallest chunks: not this */
        best_t = (unsplit + slots - 1) / slots * (best_chunk + SW_DECODE_ITEM_COST);
    for (int64_t w = 1; w <= 8; w++) {
        int64_t lo = SW_DECODE_TILE, hi = maxlen > lo ? maxlen : lo;
        if (decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, hi, NULL) > w * slots)
            continue; /* not even unsplit */
        while (lo < hi) {
            const int64_t mid = (lo + hi) / 2 / SW_DECODE_TILE * SW_DECODE_TILE;
            const int64_t m = mid < lo ? lo : mid;
            if (decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, m, NULL) <= w * slots)
                hi = m;
            else
                lo = m + SW_DECODE_TILE;
        }
        int64_t longest = 0;
        const int64_t n = decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, hi, &longest);
        const int64_t waves = (n + slots - 1) / slots;
        const int64_t t = waves * (longest + SW_DECODE_ITEM_COST) +
                          (n > unsplit ? SW_DECODE_SPLIT_COST : 0);
        if (best_t < 0 || t < best_t) {
            best_t = t;
            best_chunk = hi;
        }
    }
    if (best_t < 0) /* more pairs than 8 waves hold: no split */
        best_chunk = maxlen > 0 ? maxlen : 1;
    const int64_t total = decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, best_chunk, NULL);
    int64_t nm = 0, np = 0;
    decode_keyed *keyed = items && total > 0 ? malloc(sizeof *keyed * (size_t)total) : NULL;
    if (items && total > 0 && !keyed)
        return -2;
    int64_t k = 0;
    for (int32_t b = 0; b < batch; b++) {
        if (qo_indptr[b + 1] == qo_indptr[b])
            continue;
        int64_t per = 0;
        const int64_t len = kv_indptr[b + 1] - kv_indptr[b];
        const int64_t n = decode_split(len, best_chunk, &per);
        for (int32_t h = 0; h < num_kv_heads; h++) {
            if (n > 1 && merges)
                merges[nm] = (sw_decode_merge){b, h, (int32_t)np, (int32_t)n};
            for (int64_t i = 0; keyed && i < n; i++) {
                const int64_t k0 = i * per < len ? i * per : len;
                const int64_t k1 = (i + 1) * per < len ? (i + 1) * per : len;
                keyed[k].len = k1 - k0;
                keyed[k].it = (sw_decode_item){b, h, (int32_t)k0, (int32_t)k1,
                                               n > 1 ? (int32_t)(np + i) : -1,
                                               n > 1 ? (int32_t)nm : -1};
                k++;
            }
            if (n > 1) {
                nm++;
                np += n;
            }
        }
    }
    if (keyed) {
        qsort(keyed, (size_t)total, sizeof *keyed, cmp_decode);
        for (int64_t i = 0; i < total; i++)
            items[i] = keyed[i].it;
        free(keyed);
    }
    if (num_merges)
        *num_merges = nm;
    if (num_parts)
        *num_parts = np;
    return total;
}
