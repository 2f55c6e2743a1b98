/* Swap engine failure paths: bad shapes and configs (rank outside 1..128),
 * device pool in a CPU build, wrong block buffer sizes, unknown sequences,
 * layers out of range, partial blocks in the middle, overlapping block
 * ranges, bad attend parameters, and a stripe deleted behind the engine's
 * back (NOT_FOUND, the pool stays usable), also while it is several tiles
 * ahead in the read-ahead; read-ahead depth changes neither hits nor
 * results. */
#include "test_swap_util.h"

/* The device pool's host heuristics are pure functions: checked here,
 * without a GPU. */
static void test_dev_heuristics(void)
{
    /* block ranges: ~264 CTAs (2 per SM on 132 SMs), >= 2 blocks per CTA,
     * within 1..nblk */
    CHECK(sw_swap_dev_chunks(2048, 2, 1, 264) == 132);
    CHECK(sw_swap_dev_chunks(16, 2, 1, 264) == 8);
    CHECK(sw_swap_dev_chunks(1, 2, 1, 264) == 1);
    CHECK(sw_swap_dev_chunks(0, 2, 1, 264) == 1);
    CHECK(sw_swap_dev_chunks(400, 8, 48, 264) == 1);
    for (int32_t n = 1; n < 300; n += 7)
        for (int32_t nrg = 1; nrg < 70; nrg += 5) {
            const int32_t c = sw_swap_dev_chunks(n, 4, nrg, 264);
            CHECK(c >= 1 && c <= n);
            CHECK(c <= sw_swap_dev_chunks(n + 1, 4, nrg, 264)); /* monotone: sized once */
        }
    /* partial states are sized per sequence: with 4 kv heads x 8 group
     * heads, 27 query rows (27 row groups, 3 ranges) need more than 72 rows
     * (72 row groups, 1 range) -- sizing from the longest failed that way */
    CHECK(sw_swap_dev_part_floats(72, 96, 4, 8, 64, 264) == 152064);
    CHECK(sw_swap_dev_part_floats(27, 96, 4, 8, 64, 264) == 171072);
    CHECK(sw_swap_dev_part_floats(0, 96, 4, 8, 64, 264) == 0);
    for (int32_t ql = 1; ql < 80; ql += 3)
        for (int32_t n = 1; n <= 96; n += 19)
            CHECK(sw_swap_dev_part_floats(ql, n, 4, 8, 64, 264) <=
                  sw_swap_dev_part_floats(ql, 96, 4, 8, 64, 264));
    /* staging layout from the last read's tier mix */
    CHECK(sw_swap_dev_layout(0, 0, 1) == 1);
    CHECK(sw_swap_dev_layout(0, 0, 0) == 0);
    CHECK(sw_swap_dev_layout(100, 0, 1) == 0);
    CHECK(sw_swap_dev_layout(10, 90, 0) == 1);
    CHECK(sw_swap_dev_layout(50, 50, 1) == 0);
}

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

/* One engine per depth on namespaces 20 + i of one store, the same 12
 * blocks, pool 4, tile 1: depth 1 (the reference), 3 and 8 must give the
 * same outputs bit for bit and the same hits, misses and evictions. Then a
 * stripe of block 9 deleted: with depth 8 its read is in flight from the
 * start of the pass; the attend returns NOT_FOUND and, once the stripe is
 * rewritten, the next attend equals the reference again (no slot kept
 * bytes of a failed read). */
static void test_depth(sw_store *store)
{
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = 1;
    m.num_kv_heads = 2;
    m.num_qo_heads = 4;
    m.head_dim = 64;
    m.block_size = 16;
    const int32_t nblk = 12, depths[3] = {1, 3, 8};
    const size_t elems = 2 * 16 * 64;
    uint16_t *k = malloc(elems * 2), *v = malloc(elems * 2);
    uint16_t q[4 * 64], o[3][3][4 * 64];
    uint64_t x = 12345;
    for (int i = 0; i < 4 * 64; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        q[i] = bf16_of((float)((x >> 40) % 2001) / 1000.0f - 1.0f);
    }
    sw_swap *e[3] = {NULL, NULL, NULL};
    sw_swap_stats st[3];
    for (int d = 0; d < 3; d++) {
        sw_swap_config c;
        sw_swap_config_init(&c);
        c.resident_blocks = 4;
        c.tile_blocks = 1;
        c.prefetch_depth = depths[d];
        CHECK_STATUS(sw_swap_create(&m, &c, store, &e[d]), SW_OK);
        if (!e[d])
            goto out;
        CHECK_STATUS(sw_swap_seq_add(e[d], 7, 20 + (uint64_t)d, 0, 64), SW_OK);
        for (int32_t blk = 0; blk < nblk; blk++) {
            uint64_t y = 777 + (uint64_t)blk;
            for (size_t i = 0; i < elems; i++) {
                y = y * 6364136223846793005ull + 1442695040888963407ull;
                k[i] = bf16_of((float)((y >> 40) % 2001) / 1000.0f - 1.0f);
                v[i] = bf16_of((float)((y >> 20) % 2001) / 1000.0f - 1.0f);
            }
            sw_swap_block b;
            sw_swap_block_init(&b);
            b.dtype = SW_SWAP_KV_BF16;
            b.valid_tokens = 16;
            b.k = k;
            b.v = v;
            b.k_bytes = b.v_bytes = elems * 2;
            CHECK_STATUS(sw_swap_offload(e[d], 7, 0, blk, &b), SW_OK);
        }
        uint64_t id = 7;
        int32_t qi[2] = {0, 1};
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.batch = 1;
        p.seq_ids = &id;
        p.q_indptr = qi;
        p.q = q;
        for (int r = 0; r < 3; r++) {
            p.o = o[d][r];
            CHECK_STATUS(sw_swap_attend(e[d], &p, NULL, NULL), SW_OK);
            if (d > 0)
                CHECK(memcmp(o[d][r], o[0][r], sizeof o[0][r]) == 0);
        }
        memset(&st[d], 0, sizeof st[d]);
        st[d].struct_size = sizeof st[d];
        CHECK_STATUS(sw_swap_get_stats(e[d], &st[d]), SW_OK);
        CHECK(st[d].prefetch == depths[d]);
        CHECK(st[d].hits == st[0].hits && st[d].misses == st[0].misses &&
              st[d].evictions == st[0].evictions);
        CHECK(st[d].misses > 0 && st[d].prefetched_tiles > 0);
    }
    printf("read-ahead depth 1/3/8: hits %llu misses %llu evictions %llu, outputs equal\n",
           (unsigned long long)st[0].hits, (unsigned long long)st[0].misses,
           (unsigned long long)st[0].evictions);
    {
        /* a failing key deep in the read-ahead: the last block not in the
         * pool (which the call must read) */
        int32_t slots[16], nb = 0, miss = -1;
        CHECK_STATUS(sw_swap_resident_slots(e[2], 7, 0, slots, 16, &nb), SW_OK);
        for (int32_t b = 0; b < nb; b++)
            if (slots[b] < 0)
                miss = b;
        CHECK(nb == nblk && miss >= nblk / 2);
        if (miss < 0)
            miss = 9;
        sw_store_key key = ts_key(22, 0, (uint32_t)miss, 1, SW_STORE_KIND_K);
        CHECK_STATUS(sw_store_delete(store, &key), SW_OK);
        uint64_t id = 7;
        int32_t qi[2] = {0, 1};
        uint16_t ob[4 * 64];
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.batch = 1;
        p.seq_ids = &id;
        p.q_indptr = qi;
        p.q = q;
        p.o = ob;
        CHECK_STATUS(sw_swap_attend(e[2], &p, NULL, NULL), SW_STATUS_NOT_FOUND);
        printf("deleted stripe in the read-ahead: %s\n", sw_last_error());
        uint64_t y = 777 + (uint64_t)miss;
        for (size_t i = 0; i < elems; i++) {
            y = y * 6364136223846793005ull + 1442695040888963407ull;
            k[i] = bf16_of((float)((y >> 40) % 2001) / 1000.0f - 1.0f);
            v[i] = bf16_of((float)((y >> 20) % 2001) / 1000.0f - 1.0f);
        }
        sw_swap_block b;
        sw_swap_block_init(&b);
        b.dtype = SW_SWAP_KV_BF16;
        b.valid_tokens = 16;
        b.k = k;
        b.v = v;
        b.k_bytes = b.v_bytes = elems * 2;
        CHECK_STATUS(sw_swap_offload(e[2], 7, 0, miss, &b), SW_OK); /* heals */
        for (int r = 0; r < 2; r++) {
            CHECK_STATUS(sw_swap_attend(e[2], &p, NULL, NULL), SW_OK);
            CHECK(memcmp(ob, o[0][2], sizeof ob) == 0);
        }
    }
out:
    for (int d = 0; d < 3; d++)
        sw_swap_destroy(e[d]);
    free(k);
    free(v);
}

int main(void)
{
    test_dev_heuristics();
    /* read-ahead depth: as configured up to 32; none below 2 tiles of pool */
    CHECK(sw_swap_prefetch_depth(4, 64, 8) == 4);
    CHECK(sw_swap_prefetch_depth(100, 64, 8) == SW_SWAP_MAX_PREFETCH);
    CHECK(sw_swap_prefetch_depth(4, 15, 8) == 0);
    CHECK(sw_swap_prefetch_depth(0, 64, 8) == 0);
    CHECK(sw_swap_prefetch_depth(1, 16, 8) == 1);
    ts_dir d;
    ts_dir_make(&d, "swap_err");
    sw_store *store = tsw_store_open(d.store, 8192, 512, 0);
    if (!store) {
        ts_rm_rf(d.base);
        return 1; /* (a fresh directory: a failure is the store's, not the machine's) */
    }
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = 2;
    m.num_kv_heads = 2;
    m.num_qo_heads = 4;
    m.head_dim = 64;
    m.block_size = 16;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = 4;
    sw_swap *s = NULL;
    /* create */
    CHECK_STATUS(sw_swap_create(NULL, &c, store, &s), SW_STATUS_INVALID);
    CHECK(s == NULL);
    CHECK_STATUS(sw_swap_create(&m, &c, NULL, &s), SW_STATUS_INVALID);
    c.predictor_rank = 0;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "predictor_rank") != NULL);
    c.predictor_rank = 129;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    c.predictor_rank = 128;
    c.prefetch_depth = SW_SWAP_MAX_PREFETCH + 1; /* (was clamped silently) */
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "prefetch_depth") != NULL);
    c.prefetch_depth = -1;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    c.prefetch_depth = 4;
    c.resident_blocks = 0;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    c.resident_blocks = 4;
    m.num_qo_heads = 3;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    m.num_qo_heads = 4;
    m.struct_size = 4;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    m.struct_size = sizeof m;
    c.pool = SW_SWAP_POOL_DEVICE;
    sw_status dev = sw_swap_create(&m, &c, store, &s);
    /* Without a GPU: NO_DEVICE. With one the device pool exists (its own
     * errors are in test_swap_cuda). */
    if (sw_cuda_device_count() < 1)
        CHECK_STATUS(dev, SW_STATUS_NO_DEVICE);
    else
        CHECK_STATUS(dev, SW_OK);
    printf("device pool: %s (%s)\n", sw_status_str(dev), dev ? sw_last_error() : "");
    sw_swap_destroy(s);
    s = NULL;
    c.pool = SW_SWAP_POOL_HOST;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_OK);
    if (!s)
        return 1;
    /* registry */
    CHECK_STATUS(sw_swap_seq_add(s, 1, 7, 0, 100), SW_OK);
    CHECK_STATUS(sw_swap_seq_add(s, 1, 7, 200, 100), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_seq_add(s, 2, 7, 50, 100), SW_STATUS_INVALID); /* overlaps */
    CHECK_STATUS(sw_swap_seq_add(s, 2, 8, 50, 100), SW_OK);              /* other ns */
    CHECK_STATUS(sw_swap_seq_add(s, 3, 7, 0, 0), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_seq_add(s, 3, 7, UINT32_MAX, 2), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_seq_remove(s, 99, 0), SW_STATUS_NOT_FOUND);
    CHECK_STATUS(sw_swap_seq_length(s, 99, 0, NULL, NULL), SW_STATUS_NOT_FOUND);
    {
        /* the registry's id map (swap.c: open addressing, backward-shift
         * deletion) against a reference set: 40000 random adds and removes
         * of 3000 ids (spread 64-bit values, a few colliding low bits), each
         * checked through the API, then every id looked up */
        enum { NID = 3000 };
        uint64_t *ids = malloc(sizeof(uint64_t) * NID);
        uint8_t *in = calloc(NID, 1);
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (int i = 0; i < NID; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            ids[i] = i % 4 == 0 ? (uint64_t)i << 40 : x | 1000; /* > 2: not 1 or 2 */
        }
        int bad = 0;
        for (int op = 0; op < 40000; op++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const int i = (int)(x % NID);
            if ((x >> 20) % 3 != 0) {
                const sw_status st = sw_swap_seq_add(s, ids[i], 1000 + (uint64_t)i, 0, 1);
                bad += st != (in[i] ? SW_STATUS_INVALID : SW_OK);
                in[i] = 1;
            } else {
                const sw_status st = sw_swap_seq_remove(s, ids[i], 0);
                bad += st != (in[i] ? SW_OK : SW_STATUS_NOT_FOUND);
                in[i] = 0;
            }
            const int j = (int)((x >> 32) % NID);
            bad += sw_swap_seq_length(s, ids[j], 0, NULL, NULL) !=
                   (in[j] ? SW_OK : SW_STATUS_NOT_FOUND);
        }
        for (int i = 0; i < NID; i++) {
            bad += sw_swap_seq_length(s, ids[i], 0, NULL, NULL) !=
                   (in[i] ? SW_OK : SW_STATUS_NOT_FOUND);
            if (in[i])
                bad += sw_swap_seq_remove(s, ids[i], 0) != SW_OK;
        }
        CHECK(bad == 0);
        /* sequences 1 and 2 are still there */
        CHECK_STATUS(sw_swap_seq_length(s, 1, 0, NULL, NULL), SW_OK);
        CHECK_STATUS(sw_swap_seq_length(s, 2, 0, NULL, NULL), SW_OK);
        printf("registry map: 40000 random adds / removes of %d ids, %d mismatches\n", NID, bad);
        free(ids);
        free(in);
    }
    CHECK_STATUS(sw_swap_seq_length(s, 1, 2, NULL, NULL), SW_STATUS_INVALID);
    /* offload */
    const size_t bytes = 2 * 16 * 64 * 2;
    uint16_t *k = calloc(1, bytes), *v = calloc(1, bytes);
    sw_swap_block b;
    sw_swap_block_init(&b);
    b.dtype = SW_SWAP_KV_BF16;
    b.valid_tokens = 16;
    b.k = k;
    b.v = v;
    b.k_bytes = bytes - 2;
    b.v_bytes = bytes;
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 0, &b), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "addresses 4096 each") != NULL);
    printf("wrong size: %s\n", sw_last_error());
    b.dtype = SW_SWAP_KV_FP8_E4M3; /* FP8 blocks are half the size */
    b.k_bytes = bytes / 2 - 1;
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 0, &b), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "addresses 2048 each") != NULL);
    b.k_bytes = b.v_bytes = bytes / 2;
    b.k_scale = 0.0f;
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 0, &b), SW_STATUS_INVALID);
    b.dtype = SW_SWAP_KV_BF16;
    b.k_bytes = b.v_bytes = bytes;
    CHECK_STATUS(sw_swap_offload(s, 99, 0, 0, &b), SW_STATUS_NOT_FOUND);
    CHECK_STATUS(sw_swap_offload(s, 1, 2, 0, &b), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_offload(s, 1, -1, 0, &b), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 1, &b), SW_STATUS_INVALID); /* gap */
    b.valid_tokens = 0;
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 0, &b), SW_STATUS_INVALID);
    b.valid_tokens = 17;
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 0, &b), SW_STATUS_INVALID);
    b.valid_tokens = 16;
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 0, &b), SW_OK);
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 1, &b), SW_OK);
    b.valid_tokens = 5;
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 0, &b), SW_STATUS_INVALID); /* partial, not last */
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 2, &b), SW_OK);
    CHECK_STATUS(sw_swap_offload(s, 1, 0, 3, &b), SW_STATUS_INVALID); /* after a partial */
    int64_t toks = 0;
    int32_t nb = 0;
    CHECK_STATUS(sw_swap_seq_length(s, 1, 0, &toks, &nb), SW_OK);
    CHECK(toks == 37 && nb == 3);
    /* attend */
    uint16_t q[4 * 64], o[4 * 64];
    memset(q, 0, sizeof q);
    uint64_t ids[2] = {1, 1};
    int32_t qi[3] = {0, 1, 2};
    sw_swap_attend_params p;
    sw_swap_attend_params_init(&p);
    p.batch = 1;
    p.seq_ids = ids;
    p.q_indptr = qi;
    p.q = q;
    p.o = o;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_OK);
    p.layer = 2;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_INVALID);
    p.layer = 0;
    p.batch = 2; /* listed twice */
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_INVALID);
    p.batch = 1;
    uint64_t unk = 99;
    p.seq_ids = &unk;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_NOT_FOUND);
    p.seq_ids = ids;
    int32_t badq[2] = {1, 0};
    p.q_indptr = badq;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_INVALID);
    p.q_indptr = qi;
    p.sparse_top_k = -1;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_INVALID);
    p.sparse_top_k = 0;
    /* flags 0 or 1 and a finite scale, as sw_prefill_params' */
    p.causal = 2;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "causal=2") != NULL);
    p.causal = 1;
    p.sparse_check = 5;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_INVALID);
    p.sparse_check = 0;
    p.sm_scale = NAN;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "sm_scale") != NULL);
    p.sm_scale = 0.0f;
    p.struct_size = 8;
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_INVALID);
    p.struct_size = sizeof p;
    {
        /* a caller's shorter struct is read no further than its struct_size
         * (an exact-size allocation: a sanitizer build sees any read past
         * it) */
        void *shortp = calloc(1, 8);
        const uint32_t eight = 8;
        CHECK(shortp != NULL);
        if (shortp) {
            memcpy(shortp, &eight, sizeof eight);
            CHECK_STATUS(sw_swap_attend(s, (const sw_swap_attend_params *)shortp, NULL, NULL),
                         SW_STATUS_INVALID);
            CHECK(strstr(sw_last_error(), "struct_size 8") != NULL);
            free(shortp);
        }
    }
    float sc[2];
    int32_t n = 0;
    CHECK_STATUS(sw_swap_score_blocks(s, 1, 0, q, 1, sc, 2, &n), SW_STATUS_WORKSPACE_TOO_SMALL);
    CHECK(n == 3);
    /* the pool view is a device pool's; the slots of resident blocks (the
     * exact attend above read all three into the 4-slot pool) */
    {
        sw_swap_pool_view pv;
        memset(&pv, 0, sizeof pv);
        pv.struct_size = sizeof pv;
        CHECK_STATUS(sw_swap_get_pool_view(s, NULL, &pv), SW_STATUS_UNSUPPORTED);
        pv.struct_size = 4;
        CHECK_STATUS(sw_swap_get_pool_view(s, NULL, &pv), SW_STATUS_INVALID);
        CHECK_STATUS(sw_swap_get_pool_view(NULL, NULL, &pv), SW_STATUS_INVALID);
        int32_t sl[3] = {-7, -7, -7}, nbk = 0;
        CHECK_STATUS(sw_swap_resident_slots(s, 1, 0, sl, 2, &nbk), SW_STATUS_WORKSPACE_TOO_SMALL);
        CHECK(nbk == 3 && sl[0] == -7);
        CHECK_STATUS(sw_swap_resident_slots(s, 1, 0, sl, 3, &nbk), SW_OK);
        CHECK(nbk == 3 && sl[0] != sl[1] && sl[1] != sl[2] && sl[0] != sl[2]);
        for (int32_t i = 0; i < 3; i++)
            CHECK(sl[i] >= 0 && sl[i] < 4 && s->slots[sl[i]].seq == sw_swap_find_seq(s, 1) &&
                  s->slots[sl[i]].layer == 0 && s->slots[sl[i]].block == i);
        CHECK_STATUS(sw_swap_resident_slots(s, 99, 0, sl, 3, &nbk), SW_STATUS_NOT_FOUND);
        CHECK_STATUS(sw_swap_resident_slots(s, 1, 5, sl, 3, &nbk), SW_STATUS_INVALID);
        CHECK_STATUS(sw_swap_resident_slots(s, 1, 0, sl, 3, NULL), SW_STATUS_INVALID);
        /* NULL with room claimed: refused as such; NULL with none: the count */
        CHECK_STATUS(sw_swap_resident_slots(s, 1, 0, NULL, 4, &nbk), SW_STATUS_INVALID);
        CHECK(strstr(sw_last_error(), "slots is NULL") != NULL);
        nbk = 0;
        CHECK_STATUS(sw_swap_resident_slots(s, 1, 0, NULL, 0, &nbk),
                     SW_STATUS_WORKSPACE_TOO_SMALL);
        CHECK(nbk == 3);
        {
            static uint16_t qz[4 * 64];
            CHECK_STATUS(sw_swap_score_blocks(s, 1, 0, qz, 1, NULL, 4, &nbk), SW_STATUS_INVALID);
            CHECK(strstr(sw_last_error(), "scores is NULL") != NULL);
        }
        /* graphs are a device pool's */
        sw_swap_graph *g = (sw_swap_graph *)&nbk;
        const uint64_t one = 1;
        CHECK_STATUS(sw_swap_graph_create(s, 0, 1, &one, 1, 8, &g), SW_STATUS_UNSUPPORTED);
        CHECK(g == NULL);
        CHECK_STATUS(sw_swap_graph_create(s, 0, 1, NULL, 1, 8, &g), SW_STATUS_INVALID);
        CHECK_STATUS(sw_swap_graph_create(s, 0, 1, &one, 1, 8, NULL), SW_STATUS_INVALID);
        CHECK_STATUS(sw_swap_graph_prepare(NULL, NULL), SW_STATUS_INVALID);
        CHECK_STATUS(sw_swap_graph_attend(NULL, NULL, NULL, NULL, 1, 0.0f, NULL),
                     SW_STATUS_INVALID);
        sw_swap_graph_destroy(NULL);
    }
    /* a stripe deleted behind the engine's back: NOT_FOUND, pool usable */
    sw_swap_config c2 = c;
    c2.resident_blocks = 1;
    sw_swap *s2 = NULL;
    CHECK_STATUS(sw_swap_create(&m, &c2, store, &s2), SW_OK);
    CHECK_STATUS(sw_swap_seq_add(s2, 5, 9, 0, 10), SW_OK);
    b.valid_tokens = 16;
    CHECK_STATUS(sw_swap_offload(s2, 5, 1, 0, &b), SW_OK);
    CHECK_STATUS(sw_swap_offload(s2, 5, 1, 1, &b), SW_OK);
    sw_store_key key = ts_key(9, 1, 1, 1, SW_STORE_KIND_V);
    CHECK_STATUS(sw_store_delete(store, &key), SW_OK);
    uint64_t id5 = 5;
    p.seq_ids = &id5;
    p.layer = 1;
    CHECK_STATUS(sw_swap_attend(s2, &p, NULL, NULL), SW_STATUS_NOT_FOUND);
    printf("deleted stripe: %s\n", sw_last_error());
    CHECK_STATUS(sw_swap_offload(s2, 5, 1, 1, &b), SW_OK); /* rewrite heals it */
    CHECK_STATUS(sw_swap_attend(s2, &p, NULL, NULL), SW_OK);
    sw_swap_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_STATUS(sw_swap_get_stats(s2, &st), SW_OK);
    CHECK(st.resident_used <= 1 && st.prefetch == 0);
    st.struct_size = 4;
    CHECK_STATUS(sw_swap_get_stats(s2, &st), SW_STATUS_INVALID);
    sw_swap_destroy(s2);
    sw_swap_destroy(s);
    test_depth(store);
    sw_swap_destroy(NULL);
    free(k);
    free(v);
    sw_store_close(store);
    ts_rm_rf(d.base);
    printf("%d failures\n", sw_test_failures);
    return sw_test_failures ? 1 : 0;
}
