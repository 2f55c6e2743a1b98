/* Resident pool: slot bookkeeping and the eviction policy. The policy is a
 * pure comparison over slot metadata (score, last access, pin), so the same
 * code will drive a device pool whose slot bytes live in GPU memory. */
#include "swap_internal.h"

#include <math.h>
#include <stdlib.h>

/* 1 when slot a should be evicted before slot b. */
static int evict_before(sw_swap_policy pol, const sw_swap_slot *a, const sw_swap_slot *b)
{
    if (pol == SW_SWAP_POLICY_SCORE && a->score != b->score)
        return a->score < b->score; /* -inf (unscored, FP8) goes first */
    return sw_swap_slot_recency(a) < sw_swap_slot_recency(b);
}

int32_t sw_swap_pool_victim(sw_swap *s)
{
    int32_t best = -1;
    for (int32_t i = 0; i < s->c.resident_blocks; i++) {
        const sw_swap_slot *sl = &s->slots[i];
        if (sl->pin)
            continue;
        if (!sl->seq)
            return i; /* a free slot costs nothing */
        if (best < 0 || evict_before(s->c.policy, sl, &s->slots[best]))
            best = i;
    }
    return best;
}

typedef struct vkey {
    float score;
    uint64_t last;
    int32_t idx;
} vkey;

/* Slot i's eviction key: score (SCORE policy only; NaN as 0), last access,
 * index. */
static inline vkey vkey_of(const sw_swap *s, int32_t i)
{
    const sw_swap_slot *sl = &s->slots[i];
    vkey k;
    k.score = s->c.policy == SW_SWAP_POLICY_SCORE && !isnan(sl->score) ? sl->score : 0.0f;
    k.last = sw_swap_slot_recency(sl);
    k.idx = i;
    return k;
}

/* evict_before as a total order: score, then last access, then slot index
 * (the sequential scan keeps the first of equals). */
static inline int vkey_less(const vkey *a, const vkey *b)
{
    if (a->score != b->score)
        return a->score < b->score;
    if (a->last != b->last)
        return a->last < b->last;
    return a->idx < b->idx;
}

static int vkey_cmp(const void *pa, const void *pb)
{
    const vkey *a = pa, *b = pb;
    return vkey_less(b, a) - vkey_less(a, b);
}

int32_t sw_swap_pool_rank(sw_swap *s, int32_t *out, void *scratch)
{
    vkey *k = scratch;
    int32_t n = 0, nk = 0;
    for (int32_t i = 0; i < s->c.resident_blocks; i++) {
        const sw_swap_slot *sl = &s->slots[i];
        if (sl->pin)
            continue;
        if (!sl->seq) {
            out[n++] = i; /* free slots first, in index order */
            continue;
        }
        k[nk++] = vkey_of(s, i);
    }
    qsort(k, (size_t)nk, sizeof *k, vkey_cmp);
    for (int32_t i = 0; i < nk; i++)
        out[n++] = k[i].idx;
    return n;
}

static void vkey_sift(vkey *h, int32_t n, int32_t i)
{
    const vkey x = h[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && vkey_less(&h[c], &h[c + 1]))
            c++;
        if (!vkey_less(&x, &h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static inline void vkey_swap(vkey *a, vkey *b)
{
    const vkey t = *a;
    *a = *b;
    *b = t;
}

/* Puts the `want` smallest of k[0..n) (vkey_less, a total order) first, in
 * no particular order: quickselect with a median-of-three pivot, iterative. */
static void vkey_select(vkey *k, int32_t n, int32_t want)
{
    int32_t lo = 0, hi = n - 1;
    while (hi - lo > 8) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (vkey_less(&k[mid], &k[lo]))
            vkey_swap(&k[mid], &k[lo]);
        if (vkey_less(&k[hi], &k[lo]))
            vkey_swap(&k[hi], &k[lo]);
        if (vkey_less(&k[hi], &k[mid]))
            vkey_swap(&k[hi], &k[mid]);
        const vkey pv = k[mid]; /* k[lo] <= pv <= k[hi] */
        int32_t i = lo, j = hi;
        for (;;) { /* Hoare: k[lo..j] <= pv <= k[j+1..hi] (keys are distinct) */
            while (vkey_less(&k[i], &pv))
                i++;
            while (vkey_less(&pv, &k[j]))
                j--;
            if (i >= j)
                break;
            vkey_swap(&k[i], &k[j]);
            i++;
            j--;
        }
        if (want <= j + 1 - lo) {
            hi = j;
        } else {
            want -= j + 1 - lo;
            lo = j + 1;
        }
        if (want <= 0)
            return;
    }
    /* a short range: insertion sort settles it */
    for (int32_t a = lo + 1; a <= hi; a++) {
        const vkey x = k[a];
        int32_t b = a;
        while (b > lo && vkey_less(&x, &k[b - 1])) {
            k[b] = k[b - 1];
            b--;
        }
        k[b] = x;
    }
}

int32_t sw_swap_victims_first(sw_swap *s, int32_t k, int32_t *out, void *scratch)
{
    /* A tile takes at most tile_blocks places of its ranking (each of its
     * blocks is a victim or a hit pinning at most one ranked slot), so the
     * k smallest keys suffice: selected in linear time (quickselect), then
     * only they are sorted. The bounded max-heap this replaced (itself 3x
     * faster than qsort over every unpinned slot, bench/dev/swap_host_plan.c)
     * sifted on many of the scan's slots: the device pool's host-tier step
     * planned in 0.29-0.30 ms with it, 0.25-0.28 with this (this VM, GPU
     * faked, five interleaved rounds; docs/perf/swap.md). Free
     * slots first by index, as in sw_swap_pool_rank. */
    vkey *h = scratch;
    int32_t n = 0, nh = 0;
    if (k <= 0)
        return 0;
    for (int32_t i = 0; i < s->c.resident_blocks && n < k; i++)
        if (!s->slots[i].pin && !s->slots[i].seq)
            out[n++] = i;
    const int32_t want = k - n;
    for (int32_t i = 0; i < s->c.resident_blocks && want > 0; i++) {
        const sw_swap_slot *sl = &s->slots[i];
        if (sl->pin || !sl->seq)
            continue;
        h[nh++] = vkey_of(s, i);
    }
    const int32_t m = nh < want ? nh : want;
    if (nh > m)
        vkey_select(h, nh, m);
    /* heap sort of the m smallest: ascending */
    for (int32_t i = m / 2 - 1; i >= 0; i--)
        vkey_sift(h, m, i);
    for (int32_t j = m - 1; j > 0; j--) {
        vkey_swap(&h[0], &h[j]);
        vkey_sift(h, j, 0);
    }
    for (int32_t i = 0; i < m; i++)
        out[n++] = h[i].idx;
    return n;
}

size_t sw_swap_pool_rank_scratch(const sw_swap *s)
{
    return sizeof(vkey) * (size_t)(s->c.resident_blocks > 0 ? s->c.resident_blocks : 1);
}

void sw_swap_pool_drop(sw_swap *s, sw_swap_blk *b)
{
    if (!b || b->slot < 0)
        return;
    sw_swap_slot *sl = &s->slots[b->slot];
    if (sl->seq) {
        sw_swap_layer_unsettle(&sl->seq->layers[sl->layer]);
        sw_swap_run_count(s, sl->seq, &sl->seq->layers[sl->layer], sl->block, -1);
    }
    sl->seq = NULL;
    sl->score = -INFINITY;
    sl->pin = 0;
    sw_swap_vheap_touch(s, s->vheap_live, b->slot); /* (a pass's heap, when one runs) */
    b->slot = -1;
}

void sw_swap_pool_drop_seq(sw_swap *s, sw_swap_seq *q)
{
    for (int32_t l = 0; l < s->m.num_layers; l++)
        sw_swap_layer_unsettle(&q->layers[l]);
    for (int32_t i = 0; i < s->c.resident_blocks; i++) {
        sw_swap_slot *sl = &s->slots[i];
        if (sl->seq == q) {
            q->layers[sl->layer].blk[sl->block].slot = -1;
            sw_swap_run_count(s, q, &q->layers[sl->layer], sl->block, -1);
            sl->seq = NULL;
            sl->score = -INFINITY;
            sl->pin = 0;
            sw_swap_vheap_touch(s, s->vheap_live, i); /* (none outside a pass) */
        }
    }
}

uint64_t sw_swap_pool_used(const sw_swap *s)
{
    uint64_t n = 0;
    for (int32_t i = 0; i < s->c.resident_blocks; i++)
        n += s->slots[i].seq != NULL;
    return n;
}

/* ---- the victim heap: sw_swap_victims_first across the tiles of a pass ----
 *
 * victims_first scans the pool per tile: O(pool) a tile, O(blocks x pool /
 * tile_blocks) a call (the host pool's planning went 0.04 -> 0.20 -> 3.2 ->
 * 12.3 ms from 4k to 128k tokens at a 25% pool). Between two tiles only
 * the slots the tiles touched change key (a hit or a fill sets score and
 * last access; building a sequence's order sets its resident slots'
 * scores), so the heap keeps every slot's key and takes each change as a
 * new entry; an entry whose slot changed since is stale (its version is
 * not the slot's) and dropped when it surfaces. A tile's ranking pops its
 * k first unpinned entries and puts them back; a pinned entry it meets is
 * left out until its tile unpins the slot (the unpin touches it: a new
 * entry), so each pin costs one pop. The same answer as victims_first,
 * in O((k + newly pinned) log pool) a tile. Only where k is small against
 * the pool (k * 8 <= pool): a tile as large as the pool (the device pool's
 * all-resident and host-tier tiles) pins most of it and ranks most of it,
 * which the scan does in O(pool). */
typedef struct ventry {
    vkey k;
    uint32_t ver;
    uint8_t free; /* a free slot: before every occupied one, by index */
} ventry;

struct sw_swap_vheap {
    ventry *h, *aside;
    int32_t n, cap, ncap;
    uint32_t *ver; /* [resident_blocks] */
    int32_t nslots;
    int built, broken;
};

static inline int ventry_less(const ventry *a, const ventry *b)
{
    if (a->free != b->free)
        return a->free > b->free;
    if (a->free)
        return a->k.idx < b->k.idx;
    return vkey_less(&a->k, &b->k);
}

static void vh_up(ventry *h, int32_t i)
{
    const ventry x = h[i];
    while (i > 0) {
        const int32_t p = (i - 1) / 2;
        if (!ventry_less(&x, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static void vh_down(ventry *h, int32_t n, int32_t i)
{
    const ventry x = h[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ventry_less(&h[c + 1], &h[c]))
            c++;
        if (!ventry_less(&h[c], &x))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static ventry ventry_of(const sw_swap *s, const sw_swap_vheap *vh, int32_t i)
{
    ventry e;
    e.k = vkey_of(s, i);
    e.ver = vh->ver[i];
    e.free = s->slots[i].seq == NULL;
    return e;
}

static int vh_push(sw_swap_vheap *vh, ventry e)
{
    if (vh->n == vh->cap) {
        const int32_t nc = vh->cap ? 2 * vh->cap : 1024;
        ventry *h = realloc(vh->h, sizeof *h * (size_t)nc);
        if (!h)
            return -1;
        vh->h = h;
        vh->cap = nc;
    }
    vh->h[vh->n] = e;
    vh_up(vh->h, vh->n++);
    return 0;
}

sw_swap_vheap *sw_swap_vheap_new(void)
{
    return calloc(1, sizeof(sw_swap_vheap));
}

void sw_swap_vheap_free(sw_swap_vheap *vh)
{
    if (!vh)
        return;
    free(vh->h);
    free(vh->aside);
    free(vh->ver);
    free(vh);
}

void sw_swap_vheap_reset(sw_swap_vheap *vh)
{
    if (vh) {
        vh->built = 0;
        vh->broken = 0;
        vh->n = 0;
    }
}

/* Every slot's key, heapified. */
static int vh_build(sw_swap *s, sw_swap_vheap *vh)
{
    const int32_t n = s->c.resident_blocks;
    if (vh->nslots != n) {
        free(vh->ver);
        free(vh->aside);
        vh->ver = calloc((size_t)n, sizeof *vh->ver);
        vh->aside = malloc(sizeof *vh->aside * (size_t)n);
        vh->nslots = vh->ver && vh->aside ? n : 0;
        if (!vh->nslots)
            return -1;
    }
    if (vh->cap < n) {
        ventry *h = realloc(vh->h, sizeof *h * (size_t)n);
        if (!h)
            return -1;
        vh->h = h;
        vh->cap = n;
    }
    for (int32_t i = 0; i < n; i++) {
        vh->ver[i] = 0;
        vh->h[i] = ventry_of(s, vh, i);
    }
    vh->n = n;
    for (int32_t i = n / 2 - 1; i >= 0; i--)
        vh_down(vh->h, n, i);
    vh->built = 1;
    return 0;
}

void sw_swap_vheap_touch(sw_swap *s, sw_swap_vheap *vh, int32_t slot)
{
    if (!vh || !vh->built || vh->broken)
        return;
    vh->ver[slot]++;
    if (vh_push(vh, ventry_of(s, vh, slot)) != 0)
        vh->broken = 1; /* the caller falls back to victims_first */
}

int32_t sw_swap_vheap_first(sw_swap *s, sw_swap_vheap *vh, int32_t k, int32_t *out)
{
    if (!vh || (int64_t)k * 8 > s->c.resident_blocks)
        return -1; /* the scan: see above */
    if (vh->broken || (!vh->built && vh_build(s, vh) != 0)) {
        if (vh)
            vh->broken = 1;
        return -1;
    }
    int32_t n = 0, na = 0;
    while (n < k && vh->n > 0) {
        const ventry e = vh->h[0];
        vh->h[0] = vh->h[--vh->n];
        if (vh->n > 0)
            vh_down(vh->h, vh->n, 0);
        if (e.ver != vh->ver[e.k.idx])
            continue; /* the slot changed since: a newer entry stands for it */
        if (s->slots[e.k.idx].pin) {
            vh->ver[e.k.idx]++; /* out until unpinned (touched then) */
            continue;
        }
        vh->aside[na++] = e; /* still the slot's key: back into the heap below */
        out[n++] = e.k.idx;
    }
    for (int32_t i = 0; i < na; i++)
        if (vh_push(vh, vh->aside[i]) != 0) {
            vh->broken = 1;
            return -1;
        }
    return n;
}
