/* The ragged work-list planner: every (token, head) of every request is
 * covered exactly once; the list is cut into L2 sections of (request, kv
 * head) groups whose K/V fit the budget (a larger group alone), longest
 * group first, items longest first within a section (plain longest first
 * with no budget); packing happens only where allowed. Pure host code, no
 * GPU needed. */
#include "sw_test.h"

#include <string.h>

static int64_t item_cost(sw_work_item it, const int32_t *qo, const int32_t *kv, int32_t causal,
                         int32_t tile_m)
{
    const int32_t ql = qo[it.req + 1] - qo[it.req];
    const int32_t kl = kv[it.req + 1] - kv[it.req];
    const int32_t toks = tile_m / it.pack;
    int32_t last = it.q_tok0 + toks - 1 < ql - 1 ? it.q_tok0 + toks - 1 : ql - 1;
    return sw_visible_keys(last, ql, kl, causal);
}

/* Section structure of the list: runs of items whose groups' K/V fit the
 * budget. Checked from the output alone: walking the list, a group that was
 * seen before must belong to the current run (a group never comes back after
 * another section started); a run never holds groups of more than `budget`
 * bytes unless it is one group; costs do not increase inside a run; and each
 * section boundary is forced (the next group would overflow the run) and
 * runs start with groups no longer than the previous run's first. */
static void check_sections(sw_work_item *items, int64_t n, const int32_t *qo, const int32_t *kv,
                           int32_t batch, int32_t hq, int32_t hkv, int32_t causal, int32_t tile_m,
                           int64_t kvtb, int64_t budget)
{
    const int32_t group = hq / hkv;
    int64_t ng = (int64_t)batch * hkv;
    int *state = calloc((size_t)ng + 1, sizeof *state); /* 0 unseen, 1 current run, 2 closed */
    int64_t *gmax = calloc((size_t)ng + 1, sizeof *gmax);
    for (int64_t i = 0; i < n; i++) {
        int64_t g = (int64_t)items[i].req * hkv + items[i].head0 / group;
        int64_t c = item_cost(items[i], qo, kv, causal, tile_m);
        if (c > gmax[g])
            gmax[g] = c;
    }
    int64_t fill = 0, ngroups = 0, prev_cost = INT64_MAX, run_first = INT64_MAX;
    int64_t prev_run_first = INT64_MAX;
    for (int64_t i = 0; i < n; i++) {
        int64_t g = (int64_t)items[i].req * hkv + items[i].head0 / group;
        int64_t c = item_cost(items[i], qo, kv, causal, tile_m);
        int64_t bytes = (int64_t)(kv[items[i].req + 1] - kv[items[i].req]) * kvtb;
        CHECK(state[g] != 2); /* a group lies in one section */
        if (state[g] == 0) {
            int new_run = budget > 0 && ngroups > 0 && fill + bytes > budget;
            if (new_run || c > prev_cost) {
                /* only a full run may end, and only where a new group starts */
                CHECK(budget > 0 && ngroups > 0 && fill + bytes > budget);
                for (int64_t h = 0; h < ng; h++)
                    if (state[h] == 1)
                        state[h] = 2;
                prev_run_first = run_first;
                fill = 0;
                ngroups = 0;
                prev_cost = INT64_MAX;
            }
            if (ngroups == 0) {
                run_first = gmax[g];
                CHECK(run_first <= prev_run_first); /* longest group first */
            }
            state[g] = 1;
            fill += bytes;
            ngroups++;
            CHECK(budget <= 0 || ngroups == 1 || fill <= budget);
        }
        CHECK(c <= prev_cost); /* longest first within the run */
        prev_cost = c;
    }
    free(state);
    free(gmax);
}

static void check_plan(uint64_t seed, int32_t batch, const int32_t *qo, const int32_t *kv,
                       int32_t hq, int32_t hkv, int32_t causal, int32_t tile_m, int32_t pack_max,
                       int64_t kvtb, int64_t budget)
{
    int64_t n = sw_plan_work(qo, kv, batch, hq, hkv, causal, tile_m, pack_max, kvtb, budget,
                             NULL, 0);
    CHECK(n >= 0);
    sw_work_item *items = malloc(sizeof *items * (size_t)(n + 1));
    int64_t m = sw_plan_work(qo, kv, batch, hq, hkv, causal, tile_m, pack_max, kvtb, budget,
                             items, n);
    CHECK(m == n);
    const int64_t total_q = qo[batch];
    unsigned char *seen = calloc((size_t)(total_q * hq + 1), 1);
    const int32_t group = hq / hkv;
    check_sections(items, n, qo, kv, batch, hq, hkv, causal, tile_m, kvtb, budget);
    for (int64_t i = 0; i < n; i++) {
        sw_work_item it = items[i];
        CHECK(it.req >= 0 && it.req < batch);
        CHECK(it.pack == 1 || it.pack == group);
        const int32_t ql = qo[it.req + 1] - qo[it.req];
        if (it.pack > 1) {
            CHECK(ql <= pack_max);
            CHECK(tile_m % it.pack == 0);
            CHECK(it.head0 % group == 0);
        }
        for (int32_t r = 0; r < tile_m; r++) {
            int32_t t = it.q_tok0 + r / it.pack, h = it.head0 + r % it.pack;
            if (t >= ql)
                continue;
            CHECK(h < hq);
            int64_t idx = (int64_t)(qo[it.req] + t) * hq + h;
            if (seen[idx])
                fprintf(stderr, "seed %llu: row %lld head %d covered twice\n",
                        (unsigned long long)seed, (long long)(qo[it.req] + t), h);
            CHECK(!seen[idx]);
            seen[idx] = 1;
        }
    }
    for (int64_t i = 0; i < total_q * hq; i++)
        if (!seen[i]) {
            fprintf(stderr, "seed %llu: row %lld head %lld not covered\n", (unsigned long long)seed,
                    (long long)(i / hq), (long long)(i % hq));
            CHECK(seen[i]);
            break;
        }
    free(seen);
    free(items);
}

int main(void)
{
    /* Visible keys: bottom-right causal alignment. */
    CHECK(sw_visible_keys(0, 4, 4, 1) == 1);
    CHECK(sw_visible_keys(3, 4, 4, 1) == 4);
    CHECK(sw_visible_keys(0, 2, 10, 1) == 9);
    CHECK(sw_visible_keys(0, 10, 2, 1) == 0);  /* q_len > kv_len: early rows see nothing */
    CHECK(sw_visible_keys(9, 10, 2, 1) == 2);
    CHECK(sw_visible_keys(5, 10, 2, 0) == 2);

    /* A fixed case: one long request and one short GQA-8 request packs. */
    {
        int32_t qo[3] = {0, 1000, 1010}, kv[3] = {0, 1000, 1510};
        int64_t n = sw_plan_work(qo, kv, 2, 32, 4, 1, 128, 128, 512, 0, NULL, 0);
        /* 8 tiles x 32 heads for the long one; 10 tokens x 8 heads = 80 rows: 1 tile x 4 groups. */
        CHECK(n == 8 * 32 + 4);
        sw_work_item items[8 * 32 + 4];
        CHECK(sw_plan_work(qo, kv, 2, 32, 4, 1, 128, 128, 512, 0, items, n) == n);
        /* Longest first: the long request's last tile (tokens 896..999) sees
         * 1000 keys, more than any other tile. */
        CHECK(items[0].req == 0 && items[0].q_tok0 == 896);
        int packed = 0;
        for (int i = 0; i < n; i++)
            packed += items[i].pack == 8;
        CHECK(packed == 4);
    }
    /* 16 requests of 1024 tokens, 32/8 heads, d128 (512 bytes of K+V per
     * token and kv head), 16 MiB sections: a group is 512 KiB, so a section
     * is 32 groups = 4 requests x 8 kv heads, and the whole first section
     * (4 requests, 32 packed items each per kv head) comes before any item
     * of request 4; within it the longest items first. */
    {
        int32_t qo[17], kv[17];
        for (int i = 0; i <= 16; i++)
            qo[i] = kv[i] = 1024 * i;
        int64_t n = sw_plan_work(qo, kv, 16, 32, 8, 1, 128, INT32_MAX, 512, 16 << 20, NULL, 0);
        CHECK(n == 16 * 8 * 32);
        sw_work_item *items = malloc(sizeof *items * (size_t)n);
        CHECK(sw_plan_work(qo, kv, 16, 32, 8, 1, 128, INT32_MAX, 512, 16 << 20, items, n) == n);
        for (int i = 0; i < 4 * 8 * 32; i++)
            CHECK(items[i].req < 4 && items[i].pack == 4);
        CHECK(items[4 * 8 * 32].req == 4);
        CHECK(items[0].q_tok0 == 1024 - 32 && items[4 * 8 * 32 - 1].q_tok0 == 0);
        free(items);
        check_plan(1, 16, qo, kv, 32, 8, 1, 128, INT32_MAX, 512, 16 << 20);
        check_plan(2, 16, qo, kv, 32, 8, 1, 128, INT32_MAX, 512, 0);
        check_plan(3, 16, qo, kv, 32, 8, 0, 128, 0, 512, 1 << 20);
    }
    /* The wide K/V tile choice (sw_plan_wide_kv): the bench's shapes as
     * measured (docs/perf/prefill.md, v10): 1x16k and mix-a wide, 16x1k, 4x4k
     * and mix-b narrow; the 75% line exactly; no work at all narrow. */
    {
        static const int32_t mixa[] = {8192, 3000, 1500, 1200, 800, 600, 400, 300, 200, 100};
        static const int32_t mixb[] = {4096, 4096, 2048, 2048, 2048, 1777, 1500, 1024, 1024, 1000,
                                       900,  800,  700,  600,  513,  500,  400,  300,  257,  200,
                                       150,  100,  100,  100,  3000, 2500, 1200, 999,  640,  333,
                                       129,  100};
        int32_t ind[33];
        ind[0] = 0;
        for (int i = 0; i < 10; i++)
            ind[i + 1] = ind[i] + mixa[i];
        CHECK(sw_plan_wide_kv(ind, ind, 10) == 1);
        for (int i = 0; i < 32; i++)
            ind[i + 1] = ind[i] + mixb[i];
        CHECK(sw_plan_wide_kv(ind, ind, 32) == 0);
        for (int i = 0; i <= 16; i++)
            ind[i] = 1024 * i;
        CHECK(sw_plan_wide_kv(ind, ind, 16) == 0);
        for (int i = 0; i <= 4; i++)
            ind[i] = 4096 * i;
        CHECK(sw_plan_wide_kv(ind, ind, 4) == 0);
        int32_t one[2] = {0, 16384};
        CHECK(sw_plan_wide_kv(one, one, 1) == 1);
        /* q 3 x 8192 keys + q 4 x 8191 keys: 24576 of 57340 long -> narrow;
         * q 3 x 8192 + q 1 x 8191: 24576 of 32767 = 75.0023% -> wide. */
        int32_t qa[3] = {0, 3, 7}, ka[3] = {0, 8192, 16383};
        CHECK(sw_plan_wide_kv(qa, ka, 2) == 0);
        qa[2] = 4;
        CHECK(sw_plan_wide_kv(qa, ka, 2) == 1);
        int32_t none[3] = {0, 0, 0};
        CHECK(sw_plan_wide_kv(none, none, 2) == 0);
        CHECK(sw_plan_wide_kv(none, none, 0) == 0);
    }
    /* Empty requests produce no items; empty KV still produces items. */
    {
        int32_t qo[4] = {0, 0, 5, 5}, kv[4] = {0, 3, 3, 9};
        CHECK(sw_plan_work(qo, kv, 3, 2, 2, 0, 64, 0, 512, 0, NULL, 0) == 2);
        CHECK(sw_plan_work(qo, kv, 3, 2, 2, 0, 64, 0, 512, 1 << 20, NULL, 0) == 2);
    }

    /* The decode split: the shapes of the paged decode bench on a device
     * of 132 SMs x 2 CTAs. 16 x 32k with 8 kv heads: 128 pairs, 2 items each
     * (one wave); 1 x 512k: 8 pairs cut to ~264 items; 64 x 4k: 512 pairs,
     * unsplit (two waves). */
    {
        int32_t qo[65], kv[65];
        for (int i = 0; i <= 16; i++)
            qo[i] = i, kv[i] = 32768 * i;
        int64_t nm = -1, np = -1;
        CHECK(sw_plan_decode(qo, kv, 16, 8, 264, NULL, NULL, &nm, &np) == 256);
        CHECK(nm == 128 && np == 256);
        int32_t qo1[2] = {0, 1}, kv1[2] = {0, 524288};
        const int64_t n1 = sw_plan_decode(qo1, kv1, 1, 8, 264, NULL, NULL, &nm, &np);
        CHECK(n1 > 200 && n1 <= 264 && nm == 8 && np == n1);
        for (int i = 0; i <= 64; i++)
            qo[i] = i, kv[i] = 4096 * i;
        CHECK(sw_plan_decode(qo, kv, 64, 8, 264, NULL, NULL, &nm, &np) == 512);
        CHECK(nm == 0 && np == 0);
        /* a short context is not split (the merge would cost more than the
         * keys it spreads); a few thousand keys are */
        int32_t kv2[2] = {0, 128};
        CHECK(sw_plan_decode(qo1, kv2, 1, 8, 264, NULL, NULL, &nm, &np) == 8);
        CHECK(nm == 0 && np == 0);
        kv2[1] = 4096;
        CHECK(sw_plan_decode(qo1, kv2, 1, 8, 264, NULL, NULL, &nm, &np) > 8);
        CHECK(nm == 8);
    }
    /* Random batches: every (request with queries, kv head) pair is covered
     * by its items' key ranges exactly once, in order, ranges start on the
     * tile; split pairs have one merge over consecutive slots; longest
     * first, equal lengths in (request, kv head, first key) order; requests
     * without queries have no item. */
    {
        sw_rng rd = {777};
        for (int iter = 0; iter < 300; iter++) {
            const int32_t batch = sw_rng_int(&rd, 0, 9), heads = sw_rng_int(&rd, 1, 4);
            int32_t qo[10], kv[10];
            qo[0] = kv[0] = 0;
            for (int32_t b = 0; b < batch; b++) {
                qo[b + 1] = qo[b] + sw_rng_int(&rd, 0, 2);
                const int big = sw_rng_int(&rd, 0, 3) == 0;
                kv[b + 1] = kv[b] + sw_rng_int(&rd, 0, big ? 300000 : 3000);
            }
            const int64_t slots = sw_rng_int(&rd, 1, 600);
            int64_t nm = 0, np = 0, nm2 = 0, np2 = 0;
            const int64_t n = sw_plan_decode(qo, kv, batch, heads, slots, NULL, NULL, &nm, &np);
            sw_decode_item *it = malloc(sizeof *it * (size_t)(n + 1));
            sw_decode_merge *mg = malloc(sizeof *mg * (size_t)(nm + 1));
            CHECK(sw_plan_decode(qo, kv, batch, heads, slots, it, mg, &nm2, &np2) == n);
            CHECK(nm2 == nm && np2 == np);
            /* the bound a fixed grid is sized by (sw_swap_graph): the pairs
             * unsplit, or at most 8 waves */
            CHECK(n <= (batch * heads > 8 * slots ? (int64_t)batch * heads : 8 * slots));
            CHECK(nm <= (int64_t)batch * heads);
            int64_t covered = 0, want = 0;
            for (int32_t b = 0; b < batch; b++)
                if (qo[b + 1] > qo[b])
                    want += (int64_t)(kv[b + 1] - kv[b]) * heads;
            for (int64_t i = 0; i < n; i++) {
                CHECK(it[i].k0 % 16 == 0 && it[i].k0 <= it[i].k1);
                CHECK(qo[it[i].req + 1] > qo[it[i].req]);
                CHECK(it[i].k1 <= kv[it[i].req + 1] - kv[it[i].req]);
                if (i > 0) { /* longest first, ties by (request, kv head, first key) */
                    const int32_t l0 = it[i - 1].k1 - it[i - 1].k0, l1 = it[i].k1 - it[i].k0;
                    CHECK(l1 <= l0);
                    if (l1 == l0)
                        CHECK(it[i - 1].req < it[i].req ||
                              (it[i - 1].req == it[i].req &&
                               (it[i - 1].kvh < it[i].kvh ||
                                (it[i - 1].kvh == it[i].kvh && it[i - 1].k0 < it[i].k0))));
                }
                covered += it[i].k1 - it[i].k0;
                /* the item of a pair that starts where this one ends */
                const int32_t len = kv[it[i].req + 1] - kv[it[i].req];
                int nexts = 0, unsplit = it[i].part < 0;
                for (int64_t j = 0; j < n; j++)
                    nexts += it[j].req == it[i].req && it[j].kvh == it[i].kvh &&
                             it[j].k0 == it[i].k1 && j != i;
                CHECK(unsplit ? it[i].k0 == 0 && it[i].k1 == len : (nexts == 1) == (it[i].k1 < len));
                /* its merge: the one over its slot (none when unsplit) */
                CHECK(unsplit ? it[i].merge < 0
                              : it[i].merge >= 0 && it[i].merge < nm &&
                                    it[i].part >= mg[it[i].merge].part0 &&
                                    it[i].part < mg[it[i].merge].part0 + mg[it[i].merge].parts);
            }
            CHECK(covered == want);
            int64_t slot_sum = 0;
            for (int64_t m = 0; m < nm; m++) {
                CHECK(mg[m].parts > 1 && mg[m].parts <= SW_DECODE_MAX_SPLITS);
                CHECK(mg[m].part0 == slot_sum);
                slot_sum += mg[m].parts;
                int found = 0;
                for (int64_t i = 0; i < n; i++)
                    found += it[i].req == mg[m].req && it[i].kvh == mg[m].kvh &&
                             it[i].part >= mg[m].part0 && it[i].part < mg[m].part0 + mg[m].parts;
                CHECK(found == mg[m].parts);
            }
            CHECK(slot_sum == np);
            free(it);
            free(mg);
        }
    }

    sw_rng r = {12345};
    for (int iter = 0; iter < 300; iter++) {
        int32_t batch = sw_rng_int(&r, 0, 6);
        int32_t qo[8], kv[8];
        qo[0] = kv[0] = 0;
        int32_t causal = sw_rng_int(&r, 0, 1);
        for (int32_t b = 0; b < batch; b++) {
            int32_t ql = sw_rng_int(&r, 0, 700), kl = sw_rng_int(&r, 0, 900);
            qo[b + 1] = qo[b] + ql;
            kv[b + 1] = kv[b] + kl;
        }
        static const int32_t groups[] = {1, 2, 3, 4, 8};
        int32_t hkv = sw_rng_int(&r, 1, 3), g = groups[sw_rng_int(&r, 0, 4)];
        int32_t tile_m = sw_rng_int(&r, 0, 1) ? 64 : 128;
        int64_t kvtb = 256 << sw_rng_int(&r, 0, 2);
        int64_t budget = sw_rng_int(&r, 0, 2) ? (int64_t)sw_rng_int(&r, 0, 2048) << 10 : 0;
        check_plan(r.s, batch, qo, kv, hkv * g, hkv, causal, tile_m, sw_rng_int(&r, 0, 300),
                   kvtb, budget);
    }

    if (sw_test_failures) {
        fprintf(stderr, "test_planner: %d failure(s)\n", sw_test_failures);
        return 1;
    }
    printf("test_planner: ok\n");
    return 0;
}
