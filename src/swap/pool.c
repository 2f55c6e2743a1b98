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
    return a->last_access < b->last_access;
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
    k.last = sl->last_access;
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
    sl->seq = NULL;
    sl->score = -INFINITY;
    sl->pin = 0;
    b->slot = -1;
}

void sw_swap_pool_drop_seq(sw_swap *s, sw_swap_seq *q)
{
    for (int32_t i = 0; i < s->c.resident_blocks; i++) {
        sw_swap_slot *sl = &s->slots[i];
        if (sl->seq == q) {
            q->layers[sl->layer].blk[sl->block].slot = -1;
            sl->seq = NULL;
            sl->score = -INFINITY;
            sl->pin = 0;
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
