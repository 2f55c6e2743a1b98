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
 * tile; the last one shorter), none of them empty unless kv_len is 0.
 * 32-bit arithmetic (kv_len and chunk fit): the search below calls this
 * some thousands of times a plan. */
static int32_t decode_split(int32_t kv_len, int32_t chunk, int32_t *per)
{
    int32_t n = kv_len > 0 ? (int32_t)(((uint32_t)kv_len + (uint32_t)chunk - 1) / (uint32_t)chunk)
                           : 1;
    n = n < SW_DECODE_MAX_SPLITS ? n : SW_DECODE_MAX_SPLITS;
    uint32_t p = ((uint32_t)kv_len + (uint32_t)n - 1) / (uint32_t)n;
    p = (p + SW_DECODE_TILE - 1) / SW_DECODE_TILE * SW_DECODE_TILE;
    if (p > (uint32_t)INT32_MAX) /* (a request of ~2^31 keys) */
        p = (uint32_t)INT32_MAX / SW_DECODE_TILE * SW_DECODE_TILE;
    if (p < SW_DECODE_TILE)
        p = SW_DECODE_TILE;
    *per = (int32_t)p;
    return kv_len > 0 ? (int32_t)(((uint32_t)kv_len + p - 1) / p) : 1;
}

/* Items at this chunk (stopping once past `limit`: the search only asks
 * whether they fit), and the longest item's keys. */
static int64_t decode_count(const int32_t *qo, const int32_t *kv, int32_t batch, int32_t heads,
                            int64_t chunk, int64_t limit, int64_t *longest)
{
    int64_t items = 0;
    int32_t mx = 0;
    const int32_t c = chunk < INT32_MAX ? (int32_t)chunk : INT32_MAX;
    for (int32_t b = 0; b < batch; b++) {
        if (qo[b + 1] == qo[b])
            continue;
        int32_t per = 0;
        const int32_t n = decode_split(kv[b + 1] - kv[b], c, &per);
        items += (int64_t)n * heads;
        mx = per > mx ? per : mx;
        if (items > limit && !longest)
            break;
    }
    if (longest)
        *longest = mx;
    return items;
}

/* Request b's split at this chunk: its items (0 when it has no rows),
 * their keys (*per) and the last one's (*last). */
static int32_t decode_pair(const int32_t *qo, const int32_t *kv, int32_t b, int32_t chunk,
                           int32_t *per, int32_t *last)
{
    if (qo[b + 1] == qo[b])
        return 0;
    const int32_t len = kv[b + 1] - kv[b], n = decode_split(len, chunk, per);
    *last = len - (n - 1) * *per;
    if (*last < 0)
        *last = 0;
    return n;
}

static int cmp_desc_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x > y ? -1 : x < y;
}

/* Index of v in the descending distinct values d[0..n). */
static int32_t find_desc(const int32_t *d, int32_t n, int32_t v)
{
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int32_t mid = (lo + hi) / 2;
        if (d[mid] > v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
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
     * whose items fit; keep the least estimated time. A wave count's chunk
     * is at most the one before's (more items fit). */
    int64_t best_chunk = maxlen > 0 ? maxlen : 1, best_t = -1;
    const int64_t unsplit = decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, best_chunk,
                                         INT64_MAX, NULL);
    if (unsplit <= 8 * slots) /* the search below finds the smallest chunks: not this */
        best_t = (unsplit + slots - 1) / slots * (best_chunk + SW_DECODE_ITEM_COST);
    int64_t top = maxlen > SW_DECODE_TILE ? maxlen : SW_DECODE_TILE;
    if (unsplit <= 8 * slots)
        for (int64_t w = 1; w <= 8; w++) {
            const int64_t lim = w * slots;
            int64_t lo = SW_DECODE_TILE, hi = top;
            if (decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, hi, lim, NULL) > lim)
                continue; /* not even at the last wave count's chunk */
            while (lo < hi) {
                const int64_t mid = (lo + hi) / 2 / SW_DECODE_TILE * SW_DECODE_TILE;
                const int64_t m = mid < lo ? lo : mid;
                if (decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, m, lim, NULL) <= lim)
                    hi = m;
                else
                    lo = m + SW_DECODE_TILE;
            }
            top = hi;
            int64_t longest = 0;
            const int64_t n = decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, hi,
                                           INT64_MAX, &longest);
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
    const int32_t chunk = best_chunk < INT32_MAX ? (int32_t)best_chunk : INT32_MAX;
    const int64_t total = decode_count(qo_indptr, kv_indptr, batch, num_kv_heads, best_chunk,
                                       INT64_MAX, NULL);
    /* Callers size their buffers by this bound (the pairs unsplit, or at
     * most 8 waves): past it nothing is written. */
    if (items && total > (unsplit > 8 * slots ? unsplit : 8 * slots))
        return -3;
    /* Items longest first, then by (request, kv head, first key): the
     * order generation gives within one length, so a stable bucket pass
     * over the distinct lengths (a request's full items and its last one:
     * at most two each) orders them. */
    enum { LOCAL = 2 * 64 + 1 }; /* a batch of up to 64: no allocation per plan */
    int32_t lens_local[LOCAL];
    int64_t at_local[LOCAL];
    int32_t *lens = NULL;
    int64_t *at = NULL;
    int32_t nl = 0;
    if (items && total > 0) {
        const size_t need = (size_t)(2 * (int64_t)batch + 1);
        lens = need <= LOCAL ? lens_local : malloc(sizeof *lens * need);
        at = need <= LOCAL ? at_local : malloc(sizeof *at * need);
        if (!lens || !at) {
            if (lens != lens_local)
                free(lens);
            if (at != at_local)
                free(at);
            return -2;
        }
        for (int32_t b = 0; b < batch; b++) {
            int32_t per = 0, last = 0;
            const int32_t n = decode_pair(qo_indptr, kv_indptr, b, chunk, &per, &last);
            if (n > 1)
                lens[nl++] = per;
            if (n > 0)
                lens[nl++] = last;
        }
        qsort(lens, (size_t)nl, sizeof *lens, cmp_desc_i32);
        int32_t u = 0;
        for (int32_t i = 0; i < nl; i++)
            if (u == 0 || lens[u - 1] != lens[i])
                lens[u++] = lens[i];
        nl = u;
        for (int32_t i = 0; i <= nl; i++)
            at[i] = 0;
        for (int32_t b = 0; b < batch; b++) { /* items per length */
            int32_t per = 0, last = 0;
            const int32_t n = decode_pair(qo_indptr, kv_indptr, b, chunk, &per, &last);
            if (n > 1)
                at[find_desc(lens, nl, per) + 1] += (int64_t)(n - 1) * num_kv_heads;
            if (n > 0)
                at[find_desc(lens, nl, last) + 1] += num_kv_heads;
        }
        for (int32_t i = 0; i < nl; i++)
            at[i + 1] += at[i];
    }
    int64_t nm = 0, np = 0;
    for (int32_t b = 0; b < batch; b++) {
        int32_t per = 0, last = 0;
        const int32_t n = decode_pair(qo_indptr, kv_indptr, b, chunk, &per, &last);
        if (n == 0)
            continue;
        const int32_t len = kv_indptr[b + 1] - kv_indptr[b];
        const int32_t bf = items && n > 1 ? find_desc(lens, nl, per) : 0;
        const int32_t bl = items ? find_desc(lens, nl, last) : 0;
        for (int32_t h = 0; h < num_kv_heads; h++) {
            if (n > 1 && merges)
                merges[nm] = (sw_decode_merge){b, h, (int32_t)np, (int32_t)n};
            for (int32_t i = 0; items && i < n; i++) {
                const int32_t k0 = (int64_t)i * per < len ? i * per : len;
                const int32_t k1 = (int64_t)(i + 1) * per < len ? (i + 1) * per : len;
                items[at[i == n - 1 ? bl : bf]++] =
                    (sw_decode_item){b, h, k0, k1, n > 1 ? (int32_t)(np + i) : -1,
                                     n > 1 ? (int32_t)nm : -1};
            }
            if (n > 1) {
                nm++;
                np += n;
            }
        }
    }
    if (lens != lens_local)
        free(lens);
    if (at != at_local)
        free(at);
    if (num_merges)
        *num_merges = nm;
    if (num_parts)
        *num_parts = np;
    return total;
}
