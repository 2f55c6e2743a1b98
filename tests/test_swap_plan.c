/* The tile planner (sw_swap_plan_tile, pure): over random visiting orders
 * -- resident blocks first, then missing ones, each part in block order --
 * with random block bases, store runs (align_blocks, 0 = none) and tile
 * caps, the tiles it cuts cover every block of the order exactly once and
 * in order, hold 1..tile_blocks blocks, keep a tile's missing blocks within
 * one store run unless every missing block of each later run fits in the
 * tile too, and end early only where the next run's missing blocks do not
 * fit; without runs every tile is full but the last. Plus fixed cases.
 * Seeded; SW_TEST_SEED overrides. */
#include "test_swap_util.h"

#include <stdlib.h>
#include <string.h>

static int64_t run_of(const sw_swap_tile_plan *in, int32_t i)
{
    return (int64_t)((in->block_base + (uint64_t)in->order[i]) / in->align_blocks);
}

/* Missing blocks of run c at positions >= i (the missing part is sorted,
 * so they are consecutive). */
static int32_t run_left(const sw_swap_tile_plan *in, int64_t c, int32_t i)
{
    int32_t n = 0;
    for (int32_t k = i > in->nres ? i : in->nres; k < in->norder; k++)
        n += run_of(in, k) == c;
    return n;
}

/* Checks the tile [a, a + n) of the order against the rules; 1 when it
 * breaks one. */
static int check_tile(const sw_swap_tile_plan *in, int32_t a, int32_t n)
{
    int bad = 0;
    if (n < 1 || n > in->tile_blocks || a + n > in->norder)
        return 1;
    if (!in->align_blocks) /* cut by count: full tiles but the last */
        return n != in->tile_blocks && a + n != in->norder;
    int64_t first = -1, cur = -1;
    for (int32_t i = a; i < a + n; i++) {
        if (i < in->nres)
            continue;
        const int64_t c = run_of(in, i);
        if (first < 0)
            first = cur = c;
        if (c != cur) {
            /* a later run: all of its missing blocks are in this tile */
            if (run_left(in, c, i) > a + n - i)
                bad = 1;
            cur = c;
        }
    }
    /* an early end: the next block is a missing one of another run whose
     * missing blocks do not all fit in the room left */
    if (a + n < in->norder && n < in->tile_blocks) {
        const int32_t i = a + n;
        if (i < in->nres || cur < 0 || run_of(in, i) == cur ||
            run_left(in, run_of(in, i), i) <= in->tile_blocks - n)
            bad = 1;
    }
    return bad;
}

/* Plans every tile of `in` from position 0; 1 on a failure. */
static int plan_all(sw_swap_tile_plan in, int32_t *ntiles)
{
    int32_t *seen = calloc((size_t)in.norder + 1, sizeof(int32_t));
    int bad = 0;
    *ntiles = 0;
    for (in.pos = 0; in.pos < in.norder && !bad;) {
        const int32_t n = sw_swap_plan_tile(&in);
        if (check_tile(&in, in.pos, n)) {
            bad = 1;
            break;
        }
        for (int32_t i = in.pos; i < in.pos + n; i++)
            seen[i]++;
        in.pos += n;
        (*ntiles)++;
    }
    for (int32_t i = 0; i < in.norder && !bad; i++)
        bad = seen[i] != 1;
    if (!bad) { /* past the end: nothing */
        in.pos = in.norder;
        bad = sw_swap_plan_tile(&in) != 0;
    }
    free(seen);
    return bad;
}

static void test_fixed(void)
{
    /* runs of 4, tile 4: missing blocks 2 3 | 4 5 6 7 | 8 -> the first run's
     * two, then the whole second run, then the last */
    static const int32_t o1[] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    sw_swap_tile_plan in = {o1, 9, 2, 0, 0, 4, 4};
    CHECK(sw_swap_plan_tile(&in) == 4); /* 0 1 resident, 2 3 of run 0 */
    in.pos = 4;
    CHECK(sw_swap_plan_tile(&in) == 4); /* run 1 whole */
    in.pos = 8;
    CHECK(sw_swap_plan_tile(&in) == 1);
    /* tile 6: run 0's 2 3 then all of run 1 would be 6: taken together */
    in.tile_blocks = 6;
    in.pos = 2;
    CHECK(sw_swap_plan_tile(&in) == 6);
    /* tile 5 from 2: run 1 (4 blocks) does not fit beside 2 3: cut */
    in.tile_blocks = 5;
    CHECK(sw_swap_plan_tile(&in) == 2);
    /* a run larger than a tile is cut by count, in tiles of its own */
    static const int32_t o2[] = {0, 1, 2, 3, 4, 5, 6, 7};
    sw_swap_tile_plan big = {o2, 8, 0, 0, 0, 64, 3};
    CHECK(sw_swap_plan_tile(&big) == 3);
    /* block_base shifts the runs: base 3, runs of 4: blocks 0 | 1 2 3 4 | 5 */
    static const int32_t o3[] = {0, 1, 2, 3, 4, 5};
    sw_swap_tile_plan sh = {o3, 6, 0, 0, 3, 4, 3};
    CHECK(sw_swap_plan_tile(&sh) == 1); /* run 0's one block; run 1 (4) won't fit in 2 */
    /* without runs: by count */
    sh.align_blocks = 0;
    CHECK(sw_swap_plan_tile(&sh) == 3);
}

/* The landing places (sw_swap_land_offsets): room for gaps of 1..gap_max
 * blocks, none for larger ones, adjacent blocks or an order that goes
 * back; over random orders, any two blocks joined by gaps that got room
 * lie as far apart in the landing as in the layer (one copy runs from one
 * to the other), places strictly increase, and the room is the blocks
 * plus their gaps' room. */
static void test_land_offsets(uint64_t seed)
{
    static const int32_t b1[] = {0, 1, 3, 7, 8, 5, 6};
    int32_t lo[7];
    sw_swap_land_offsets(b1, 7, 2, lo);
    static const int32_t want[] = {0, 1, 3, 4, 5, 6, 7};
    for (int i = 0; i < 7; i++)
        CHECK(lo[i] == want[i]);
    sw_swap_land_offsets(b1, 7, 0, lo);
    for (int i = 0; i < 7; i++)
        CHECK(lo[i] == i);
    sw_swap_land_offsets(b1, 7, 3, lo); /* 3 -> 7 now gets its room */
    CHECK(lo[3] == 7 && lo[4] == 8 && lo[5] == 9);
    int bad = 0;
    for (int it = 0; it < 2000 && !bad; it++) {
        sw_rng r = {seed * 131 + (uint64_t)it};
        const int32_t n = sw_rng_int(&r, 1, 300), gmax = sw_rng_int(&r, 0, 6);
        int32_t *b = malloc(sizeof(int32_t) * (size_t)n), *l = malloc(sizeof(int32_t) * (size_t)n);
        int32_t x = sw_rng_int(&r, 0, 50);
        for (int32_t i = 0; i < n; i++) {
            b[i] = x;
            x += sw_rng_int(&r, 0, 9) == 0 ? -sw_rng_int(&r, 1, 5) : sw_rng_int(&r, 1, 9);
        }
        sw_swap_land_offsets(b, n, gmax, l);
        int64_t room = 1;
        int32_t start = 0; /* the first block of the current run of room-joined blocks */
        bad |= l[0] != 0;
        for (int32_t i = 1; i < n; i++) {
            const int32_t g = b[i] - b[i - 1] - 1;
            const int joined = g >= 0 && g <= gmax;
            room += joined ? g + 1 : 1;
            bad |= l[i] <= l[i - 1];
            if (!joined)
                start = i;
            bad |= l[i] - l[start] != (joined || i == start ? b[i] - b[start] : 0) &&
                   i != start;
        }
        bad |= l[n - 1] + 1 != room;
        if (bad)
            fprintf(stderr, "land offsets: case %d (%d blocks, gaps <= %d) wrong (seed %llu)\n",
                    it, n, gmax, (unsigned long long)seed);
        free(b);
        free(l);
    }
    CHECK(!bad);
}

int main(void)
{
    const uint64_t seed = ts_seed(20261202);
    test_fixed();
    test_land_offsets(seed);
    int failed = 0;
    for (int it = 0; it < 3000; it++) {
        sw_rng r = {seed * 977 + (uint64_t)it};
        const int32_t nblocks = sw_rng_int(&r, 1, 400);
        int32_t *order = malloc(sizeof(int32_t) * (size_t)nblocks);
        uint8_t *res = malloc((size_t)nblocks);
        const int dens = sw_rng_int(&r, 0, 4); /* resident share in quarters */
        int32_t nres = 0, k = 0;
        for (int32_t b = 0; b < nblocks; b++) {
            res[b] = sw_rng_int(&r, 0, 3) < dens;
            nres += res[b];
        }
        for (int32_t b = 0; b < nblocks; b++)
            if (res[b])
                order[k++] = b;
        for (int32_t b = 0; b < nblocks; b++)
            if (!res[b] && sw_rng_int(&r, 0, 9) > 0) /* sparse mode drops some */
                order[k++] = b;
        static const uint32_t aligns[] = {0, 1, 2, 7, 16, 64};
        sw_swap_tile_plan in;
        in.order = order;
        in.norder = k;
        in.nres = nres;
        in.pos = 0;
        in.block_base = (uint64_t)sw_rng_int(&r, 0, 200);
        in.align_blocks = aligns[sw_rng_int(&r, 0, 5)];
        in.tile_blocks = sw_rng_int(&r, 1, 100);
        int32_t ntiles = 0;
        if (plan_all(in, &ntiles)) {
            fprintf(stderr, "case %d: %d blocks (%d resident), base %llu, runs %u, tile %d: "
                    "bad plan (seed %llu)\n", it, k, nres, (unsigned long long)in.block_base,
                    in.align_blocks, in.tile_blocks, (unsigned long long)seed);
            failed++;
        }
        free(order);
        free(res);
    }
    CHECK(failed == 0);
    printf("test_swap_plan: 3000 random orders, %d bad (seed %llu)\n", failed,
           (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
