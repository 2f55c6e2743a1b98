/* Resident pool: slot bookkeeping and the eviction policy. The policy is a
 * pure comparison over slot metadata (score, last access, pin), so the same
 * code will drive a device pool whose slot bytes live in GPU memory. */
#include "swap_internal.h"

#include <math.h>

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
