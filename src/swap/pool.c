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

/* evict_before as a total order: score (SCORE policy only), then last
 * access, then slot index (the sequential scan keeps the first of equals). */
static int vkey_cmp(const void *pa, const void *pb)
{
    const vkey *a = pa, *b = pb;
    if (a->score < b->score)
        return -1;
    if (b->score < a->score)
        return 1;
    if (a->last != b->last)
        return a->last < b->last ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
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
        k[nk].score = s->c.policy == SW_SWAP_POLICY_SCORE && !isnan(sl->score) ? sl->score : 0.0f;
        k[nk].last = sl->last_access;
        k[nk].idx = i;
        nk++;
    }
    qsort(k, (size_t)nk, sizeof *k, vkey_cmp);
    for (int32_t i = 0; i < nk; i++)
        out[n++] = k[i].idx;
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

void sw_swap_pool_unpin(sw_swap *s, uint64_t pin)
{
    for (int32_t i = 0; i < s->c.resident_blocks; i++)
        if (s->slots[i].pin == pin)
            s->slots[i].pin = 0;
}

uint64_t sw_swap_pool_used(const sw_swap *s)
{
    uint64_t n = 0;
    for (int32_t i = 0; i < s->c.resident_blocks; i++)
        n += s->slots[i].seq != NULL;
    return n;
}
