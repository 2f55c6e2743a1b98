/* The swap engine's tile planner and the sparse mode's block selection:
 * pure functions of plain data (no pool, no store, no GPU), tested by
 * tests/test_swap_plan.c and tests/test_swap_tiles.c. The tile loop
 * (attend_loop.c) visits a sequence's blocks in its order -- the resident ones
 * first, then the missing ones, each part in block order -- in tiles that
 * sw_swap_plan_tile cuts. */
#include "swap_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The sparse ranking's order of two blocks (sw_swap_stable_sort, ctx: the
 * scores): score ascending, a NaN score below every number, then block
 * index (a total order: the top k are the same whatever the sort; a merge
 * sort replaced an insertion sort, quadratic: ~10^9 comparisons a call at
 * 32768 blocks, 512k tokens of 16). */
static int blk_before(const void *ctx, int32_t x, int32_t y)
{
    const float *sc = (const float *)ctx;
    const float a = sc[x], b = sc[y];
    const int an = isnan(a), bn = isnan(b);
    if (an != bn)
        return an;
    if (!an && a != b)
        return a < b;
    return x < y;
}

int sw_swap_sparse_select(const float *sc, int32_t n, int32_t k, int32_t w, uint8_t *sel)
{
    for (int32_t b = 0; b < n; b++)
        sel[b] = b >= n - w || isinf(sc[b]);
    if (k <= 0 || n <= 0)
        return 0;
    int32_t *all = malloc(sizeof(int32_t) * 2 * (size_t)n);
    if (!all)
        return -1;
    for (int32_t b = 0; b < n; b++)
        all[b] = b;
    sw_swap_stable_sort(all, n, all + n, blk_before, sc);
    for (int32_t i = n - 1, taken = 0; i >= 0 && taken < k; i--, taken++)
        sel[all[i]] = 1;
    free(all);
    return 0;
}

int sw_swap_tile_takes(int64_t cur, int64_t next, int32_t ahead, int32_t room)
{
    if (room < 1)
        return 0;
    /* A chunk change: only when all of the next chunk's missing blocks fit
     * (small chunks pack together); a chunk larger than a tile is cut by
     * count, in a tile of its own. */
    return cur < 0 || next == cur || ahead <= room;
}

/* Missing blocks of store chunk `chunk` that come next in the order from
 * position i (missing blocks are in block order); counted up to limit + 1. */
static int32_t chunk_ahead(const sw_swap_tile_plan *in, int64_t chunk, int32_t i, int32_t limit)
{
    const uint64_t a = in->align_blocks;
    int32_t c = 0;
    for (; i < in->norder && c <= limit; i++) {
        const int32_t b = in->order[i];
        if (i < in->nres || (int64_t)((in->block_base + (uint64_t)b) / a) != chunk)
            break;
        c++;
    }
    return c;
}

int32_t sw_swap_plan_tile(const sw_swap_tile_plan *in)
{
    int32_t n = 0;
    int64_t chunk = -1; /* store chunk of the tile's missing blocks */
    for (int32_t i = in->pos; n < in->tile_blocks && i < in->norder; i++, n++) {
        if (i < in->nres || !in->align_blocks)
            continue; /* resident, or tiles cut by count */
        const int64_t c = (int64_t)((in->block_base + (uint64_t)in->order[i]) / in->align_blocks);
        const int32_t room = in->tile_blocks - n;
        const int32_t ahead = chunk >= 0 && c != chunk ? chunk_ahead(in, c, i, room) : 1;
        if (!sw_swap_tile_takes(chunk, c, ahead, room))
            break;
        chunk = c;
    }
    return n;
}
