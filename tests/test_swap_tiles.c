/* Tile planning against the store's layout (issue 4): a tile's missing
 * blocks stay within one store chunk (run_blocks blocks of a stream) unless
 * whole chunks fit, so each stream run of a chunk is read by one tile in one
 * range. Checked on the pure rule (sw_swap_tile_takes) and on an engine
 * whose sequence starts off a chunk boundary (block_base 40, run_blocks 64,
 * tile 64): the first exact pass reads every run exactly once with aligned
 * tiles, more often with tuning align_tiles 0 (tiles cut by count),
 * and both match the fp64 reference on every call. Also: a tile's victims
 * from sw_swap_victims_first are sw_swap_pool_rank's first entries (random
 * pools: free, pinned, equal and NaN scores, both policies); the sparse
 * attend's block selection against references (test_sparse_select); run-
 * aware eviction gathering the pool's blocks in few store runs, and with
 * a window as large as the pool, exact passes keeping what they visited
 * last (the same hits, far fewer resident blocks in mostly missing runs). */
#include "test_swap_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_rule(void)
{
    /* nothing missing yet, or the same chunk: take while there is room */
    CHECK(sw_swap_tile_takes(-1, 7, 1, 1) == 1);
    CHECK(sw_swap_tile_takes(3, 3, 1, 5) == 1);
    CHECK(sw_swap_tile_takes(3, 3, 100, 1) == 1); /* a chunk larger than a tile: cut by count */
    CHECK(sw_swap_tile_takes(3, 3, 1, 0) == 0);
    /* a new chunk: only when all of its missing blocks fit */
    CHECK(sw_swap_tile_takes(3, 4, 10, 10) == 1);
    CHECK(sw_swap_tile_takes(3, 4, 11, 10) == 0);
    CHECK(sw_swap_tile_takes(3, 9, 1, 1) == 1);
    CHECK(sw_swap_tile_takes(-1, 4, 11, 10) == 1); /* the tile's first missing block */
    /* default tile cap: a host pool without a host tier reads whole store
     * runs per tile; a host tier or a device pool keeps 16 */
    CHECK(sw_swap_auto_tile_cap(1, 0, 64) == 64);
    CHECK(sw_swap_auto_tile_cap(1, 1, 64) == 16);
    CHECK(sw_swap_auto_tile_cap(1, 0, 0) == 16);  /* tiles not aligned */
    CHECK(sw_swap_auto_tile_cap(1, 0, 8) == 16);  /* runs shorter than 16 */
    CHECK(sw_swap_auto_tile_cap(0, 0, 64) == 16);
    CHECK(sw_swap_auto_tile_cap(1, 0, 1024) == SW_SWAP_MAX_AUTO_TILE);
}

typedef struct run_out {
    uint64_t ranges, ios, tickets;
    uint64_t hits, misses; /* over every call */
    int32_t lone;          /* resident blocks at the end lying in store runs
                            * at most half resident */
    double worst;
} run_out;

/* Resident blocks of s lying in store runs (64 blocks, of the sequence's
 * nblk blocks at block_base base) that are at most half resident: runs
 * that a step reads anyway, through those blocks. */
static int32_t lone_resident(const sw_swap *s, uint32_t base, int32_t nblk)
{
    int32_t cnt[64] = {0}, present[64] = {0}, lone = 0;
    const int32_t nr = (int32_t)((base + (uint32_t)nblk + 63) / 64);
    if (nr > 64)
        return -1;
    for (int32_t b = 0; b < nblk; b++)
        present[(base + (uint32_t)b) / 64]++;
    for (int32_t i = 0; i < s->c.resident_blocks; i++)
        if (s->slots[i].seq)
            cnt[(base + (uint32_t)s->slots[i].block) / 64]++;
    for (int32_t r = 0; r < nr; r++) {
        if (2 * cnt[r] <= present[r])
            lone += cnt[r];
    }
    return lone;
}

static uint16_t bf16_rand(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return sw_f32_to_bf16((float)((*x >> 40) % 2001) / 1000.0f - 1.0f);
}

/* One engine (aligned or not) on namespace ns: offload nblk blocks at
 * block_base 40, then `calls` exact attends of one query row, each against
 * the fp64 reference. ranges / ios: the store's merged ranges and device
 * requests of the first call (nothing resident yet). */
static run_out run_engine_ex(sw_store *store, uint64_t ns, int aligned, int32_t nblk, int calls,
                             uint64_t seed, int32_t resident, int32_t tile, const char *run_evict)
{
    run_out r = {0, 0, 0, 0, 0, 0, 0.0};
    const int32_t H = 2, Hq = 4, D = 64, B = 16;
    sw_swap_tuning tu;
    sw_swap_tuning_default(&tu);
    tu.align_tiles = aligned;
    if (run_evict)
        tu.run_evict = atoi(run_evict);
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = 1;
    m.num_kv_heads = H;
    m.num_qo_heads = Hq;
    m.head_dim = D;
    m.block_size = B;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = resident;
    c.tile_blocks = tile;
    c.prefetch_depth = 2;
    sw_swap *s = NULL;
    CHECK_STATUS(sw_swap_create_tuned(&m, &c, store, &tu, &s), SW_OK);
    if (!s)
        return r;
    CHECK_STATUS(sw_swap_seq_add(s, 1, ns, 40, (uint32_t)nblk), SW_OK);
    tsw_seq q;
    tsw_seq_init(&q, 1, 1, H, D, B);
    const int64_t len = (int64_t)nblk * B;
    float *rk = malloc(sizeof(float) * (size_t)len * H * D);
    float *rv = malloc(sizeof(float) * (size_t)len * H * D);
    uint64_t x = seed;
    for (int64_t i = 0; i < len * H * D; i++) {
        rk[i] = sw_bf16_to_f32(bf16_rand(&x));
        rv[i] = sw_bf16_to_f32(bf16_rand(&x));
    }
    for (int32_t b = 0; b < nblk; b++)
        CHECK_STATUS(tsw_offload_block(s, &q, 0, b, rk, rv, len, SW_SWAP_KV_BF16), SW_OK);
    uint16_t qr[4 * 64], o[4 * 64];
    double ref[4 * 64], lse[4];
    for (int call = 0; call < calls; call++) {
        for (int i = 0; i < Hq * D; i++)
            qr[i] = bf16_rand(&x);
        tsw_reference(&q, 0, Hq, qr, 1, 1, 1.0 / sqrt((double)D), ref, lse);
        uint64_t id = 1;
        int32_t qi[2] = {0, 1};
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.batch = 1;
        p.seq_ids = &id;
        p.q_indptr = qi;
        p.q = qr;
        p.o = o;
        p.causal = 1;
        const sw_store_stats s0 = ts_stats(store);
        sw_swap_stats w0, w1;
        memset(&w0, 0, sizeof w0);
        memset(&w1, 0, sizeof w1);
        w0.struct_size = w1.struct_size = sizeof w0;
        CHECK_STATUS(sw_swap_get_stats(s, &w0), SW_OK);
        CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_OK);
        const sw_store_stats s1 = ts_stats(store);
        CHECK_STATUS(sw_swap_get_stats(s, &w1), SW_OK);
        if (call == 0) {
            r.ranges = s1.read_requests - s0.read_requests;
            r.ios = s1.read_ios - s0.read_ios;
            r.tickets = w1.read_calls - w0.read_calls;
        }
        r.hits += w1.hits - w0.hits;
        r.misses += w1.misses - w0.misses;
        double num = 0, den = 0;
        for (int i = 0; i < Hq * D; i++) {
            const double d = sw_bf16_to_f32(o[i]) - ref[i];
            num += d * d;
            den += ref[i] * ref[i];
        }
        const double rel = sqrt(num / (den > 0 ? den : 1));
        if (!(rel <= r.worst))
            r.worst = rel;
    }
    r.lone = lone_resident(s, 40, nblk);
    free(rk);
    free(rv);
    tsw_seq_free(&q);
    sw_swap_destroy(s);
    return r;
}

/* 160 slots = 2.5 tiles of 64: read-ahead on, most blocks missing. */
static run_out run_engine(sw_store *store, uint64_t ns, int aligned, int32_t nblk, int calls,
                          uint64_t seed)
{
    return run_engine_ex(store, ns, aligned, nblk, calls, seed, 160, 64, NULL);
}

static uint64_t vt_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x * 0x2545f4914f6cdd1dull;
}

/* sw_swap_victims_first(k) against the full ranking on random slot states. */
static void test_victims_first(uint64_t seed)
{
    enum { S = 1500 };
    sw_swap s;
    memset(&s, 0, sizeof s);
    sw_swap_slot *slots = calloc(S, sizeof *slots);
    int32_t *full = malloc(sizeof(int32_t) * S), *first = malloc(sizeof(int32_t) * S);
    s.slots = slots;
    sw_swap_seq dummy;
    memset(&dummy, 0, sizeof dummy);
    sw_swap_layer layer0; /* every slot's layer: its touch is their recency floor */
    memset(&layer0, 0, sizeof layer0);
    dummy.layers = &layer0;
    uint64_t x = seed | 1;
    for (int round = 0; round < 400; round++) {
        /* mostly small pools; every fourth up to S (quickselect's long
         * partitions, k of a tile or so) */
        s.c.resident_blocks = 1 + (int32_t)(vt_rand(&x) % (round % 4 == 3 ? S : 300));
        s.c.policy = round & 1 ? SW_SWAP_POLICY_LRU : SW_SWAP_POLICY_SCORE;
        void *scr = malloc(sw_swap_pool_rank_scratch(&s));
        for (int32_t i = 0; i < s.c.resident_blocks; i++) {
            const uint64_t r = vt_rand(&x);
            slots[i].seq = r % 7 == 0 ? NULL : &dummy;
            slots[i].pin = (r >> 8) % 4 == 0 ? 5 : 0;
            /* few distinct values: ties decided by last access, then index */
            const int v = (int)((r >> 16) % 6);
            slots[i].score = v == 0 ? -INFINITY : v == 1 ? NAN : (float)(v % 3);
            slots[i].last_access = (r >> 32) % 5;
        }
        layer0.touch = vt_rand(&x) % 4; /* 0..3: ties with some slots' own ticks */
        const int32_t k = (int32_t)(vt_rand(&x) % (round % 8 == 7 ? 130 : S + 2));
        const int32_t nf = sw_swap_pool_rank(&s, full, scr);
        const int32_t n1 = sw_swap_victims_first(&s, k, first, scr);
        CHECK(n1 == (nf < k ? nf : k));
        for (int32_t i = 0; i < n1; i++)
            if (first[i] != full[i]) {
                fprintf(stderr, "seed %llu round %d: victim %d is slot %d, full ranking %d\n",
                        (unsigned long long)seed, round, i, first[i], full[i]);
                CHECK(0);
            }
        free(scr);
    }
    free(slots);
    free(full);
    free(first);
}

/* The victim heap against sw_swap_victims_first through a pass's worth of
 * changes: each round ranks k victims both ways, then changes slots as a
 * tile would (fills, hits, scores, pins, drops), touching each. */
static void test_victim_heap(uint64_t seed)
{
    enum { S = 2000 };
    sw_swap s;
    memset(&s, 0, sizeof s);
    sw_swap_slot *slots = calloc(S, sizeof *slots);
    int32_t *a = malloc(sizeof(int32_t) * S), *b = malloc(sizeof(int32_t) * S);
    s.slots = slots;
    sw_swap_seq dummy;
    memset(&dummy, 0, sizeof dummy);
    sw_swap_layer layer0; /* (its touch, the layers' recency floor, stays 0) */
    memset(&layer0, 0, sizeof layer0);
    dummy.layers = &layer0;
    uint64_t x = seed | 3;
    sw_swap_vheap *vh = sw_swap_vheap_new();
    int64_t compared = 0, declined = 0;
    for (int pass = 0; pass < 24; pass++) {
        /* pools from a few slots (k * 8 above the pool: the heap declines,
         * the engine scans) to S */
        s.c.resident_blocks = 1 + (int32_t)(vt_rand(&x) % (pass % 3 == 2 ? 90 : S));
        s.c.policy = pass & 1 ? SW_SWAP_POLICY_LRU : SW_SWAP_POLICY_SCORE;
        void *scr = malloc(sw_swap_pool_rank_scratch(&s));
        uint64_t tick = 10;
        for (int32_t i = 0; i < s.c.resident_blocks; i++) {
            const uint64_t r = vt_rand(&x);
            slots[i].seq = r % 5 == 0 ? NULL : &dummy;
            slots[i].pin = 0;
            const int v = (int)((r >> 16) % 6);
            slots[i].score = v == 0 ? -INFINITY : v == 1 ? NAN : (float)(v % 3);
            slots[i].last_access = (r >> 32) % 7;
        }
        sw_swap_vheap_reset(vh);
        for (int tile = 0; tile < 60; tile++) {
            const int32_t k = 1 + (int32_t)(vt_rand(&x) % 40);
            const int32_t n1 = sw_swap_victims_first(&s, k, a, scr);
            int32_t n2 = sw_swap_vheap_first(&s, vh, k, b);
            if (n2 < 0) { /* declined (k large against the pool): the scan's */
                CHECK((int64_t)k * 8 > s.c.resident_blocks);
                declined++;
                n2 = sw_swap_victims_first(&s, k, b, scr);
            }
            CHECK(n1 == n2);
            for (int32_t i = 0; i < n1 && i < n2; i++)
                if (a[i] != b[i]) {
                    fprintf(stderr, "seed %llu pass %d tile %d: victim %d is slot %d by the "
                            "heap, %d by the scan\n", (unsigned long long)seed, pass, tile, i,
                            b[i], a[i]);
                    CHECK(0);
                    break;
                }
            compared += n1;
            /* a tile: fill some of the victims, hit a few slots, rescore,
             * pin and unpin, drop one */
            const int32_t nt = (int32_t)(vt_rand(&x) % 12);
            for (int32_t j = 0; j < nt; j++) {
                const uint64_t r = vt_rand(&x);
                const int32_t i = j < n1 && r % 2 ? a[j] : (int32_t)(r % (uint64_t)s.c.resident_blocks);
                sw_swap_slot *sl = &slots[i];
                switch ((r >> 8) % 5) {
                case 0: sl->seq = NULL; sl->score = -INFINITY; sl->pin = 0; break;
                case 1: /* a pin needs no touch; an unpin does */
                    if (sl->pin) {
                        sl->pin = 0;
                        sw_swap_vheap_touch(&s, vh, i);
                    } else {
                        sl->pin = 7;
                    }
                    break;
                default:
                    sl->seq = &dummy;
                    sl->score = (float)((r >> 20) % 4) - 1.0f;
                    sl->last_access = ++tick;
                    break;
                }
                if ((r >> 8) % 5 != 1)
                    sw_swap_vheap_touch(&s, vh, i);
            }
        }
        free(scr);
    }
    CHECK(declined > 0 && declined < 24 * 60);
    printf("victim heap: %lld victims ranked as victims_first ranks them (%lld rankings left "
           "to the scan)\n", (long long)compared, (long long)declined);
    sw_swap_vheap_free(vh);
    free(slots);
    free(a);
    free(b);
}

/* The reference order of sw_swap_sparse_select: score ascending, NaN lowest,
 * then index. */
static const float *g_sc;
static int sparse_cmp(const void *pa, const void *pb)
{
    const int32_t x = *(const int32_t *)pa, y = *(const int32_t *)pb;
    const float a = g_sc[x], b = g_sc[y];
    if (isnan(a) != isnan(b))
        return isnan(a) ? -1 : 1;
    if (!isnan(a) && a != b)
        return a < b ? -1 : 1;
    return (x > y) - (x < y);
}

/* Sparse selection (top k by score + the last w blocks + unscored ones)
 * against two independent references: for n <= 1500 the rank of each
 * block counted pairwise (O(n^2)), for larger n a qsort of the same order;
 * scores with ties, +-inf and NaN; n up to 40000 (the quadratic insertion
 * sort it replaced took ~10^9 comparisons a call there). */
static void test_sparse_select(uint64_t seed)
{
    uint64_t x = seed ^ 0x5eed;
    for (int round = 0; round < 120; round++) {
        const int32_t n = round < 100 ? 1 + (int32_t)(vt_rand(&x) % 1500)
                                      : 20000 + (int32_t)(vt_rand(&x) % 20001);
        const int32_t k = (int32_t)(vt_rand(&x) % (uint64_t)(n + 3)) - 1; /* -1 .. n+1 */
        const int32_t w = (int32_t)(vt_rand(&x) % (uint64_t)(n / 4 + 2));
        float *sc = malloc(sizeof(float) * (size_t)n);
        uint8_t *sel = malloc((size_t)n), *ref = malloc((size_t)n);
        int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
        for (int32_t b = 0; b < n; b++) {
            const uint64_t r = vt_rand(&x);
            const int v = (int)(r % 23);
            sc[b] = v == 0 ? -INFINITY : v == 1 ? INFINITY : v == 2 ? NAN
                    : round % 2 ? (float)(v % 5) /* ties */
                                : (float)((r >> 8) % 100000) * 1e-3f;
        }
        CHECK(sw_swap_sparse_select(sc, n, k, w, sel) == 0);
        for (int32_t b = 0; b < n; b++)
            ref[b] = b >= n - w || isinf(sc[b]);
        if (k > 0) {
            if (n <= 1500) {
                g_sc = sc;
                for (int32_t b = 0; b < n; b++) {
                    int32_t above = 0; /* blocks ranked above b */
                    for (int32_t c = 0; c < n; c++)
                        above += c != b && sparse_cmp(&b, &c) < 0;
                    if (above < k)
                        ref[b] = 1;
                }
            } else {
                for (int32_t b = 0; b < n; b++)
                    idx[b] = b;
                g_sc = sc;
                qsort(idx, (size_t)n, sizeof *idx, sparse_cmp);
                for (int32_t i = n - 1; i >= 0 && i >= n - k; i--)
                    ref[idx[i]] = 1;
            }
        }
        int32_t diff = 0;
        for (int32_t b = 0; b < n; b++)
            diff += sel[b] != ref[b];
        if (diff)
            fprintf(stderr, "seed %llu round %d (n %d, k %d, w %d): %d blocks differ\n",
                    (unsigned long long)seed, round, n, k, w, diff);
        CHECK(diff == 0);
        free(sc);
        free(sel);
        free(ref);
        free(idx);
    }
}

int main(void)
{
    test_rule();
    const uint64_t seed = ts_seed(20261130);
    test_victims_first(seed);
    test_victim_heap(seed);
    test_sparse_select(seed);
    ts_dir d;
    ts_dir_make(&d, "swap_tiles");
    /* run_blocks 64 (tsw_store_open); stripes of 16 x 64 BF16 */
    sw_store *store = tsw_store_open(d.store, 2048, 4 * 2 * 400 + 4 * 700, 0);
    if (!store) {
        ts_rm_rf(d.base);
        return 1; /* (a fresh directory: a failure is the store's, not the machine's) */
    }
    const sw_store_stats g = ts_stats(store);
    CHECK(g.run_blocks == 64);
    /* blocks 40 .. 339: chunks 0 (40..63), 1..4, 5 (320..339) of 4 streams */
    const int32_t nblk = 300;
    const uint64_t runs = 6 * 4;
    const run_out a = run_engine(store, 11, 1, nblk, 3, seed);
    const run_out u = run_engine(store, 12, 0, nblk, 3, seed);
    printf("first pass, %d blocks at block_base 40, tile 64, run_blocks 64: aligned tiles %llu "
           "ranges (%llu requests), tiles by count %llu ranges (%llu requests); worst rel L2 "
           "%.1e / %.1e (seed %llu)\n",
           nblk, (unsigned long long)a.ranges, (unsigned long long)a.ios,
           (unsigned long long)u.ranges, (unsigned long long)u.ios, a.worst, u.worst,
           (unsigned long long)seed);
    CHECK(a.ranges == runs);          /* every run read once, in one range */
    CHECK(u.ranges > a.ranges);       /* cut by count: runs read by two tiles */
    CHECK(a.ios <= u.ios);
    CHECK(a.worst < 1e-2 && u.worst < 1e-2);
    /* Chunks that fit together share a tile: 30 blocks at block_base 40 are
     * chunk 0's last 24 and chunk 1's first 6, all of chunk 1's missing
     * blocks fit beside chunk 0's in one 64-block tile: one read ticket,
     * at most one range per run (2 chunks x 4 streams; the store merges
     * runs that lie back to back in the file). */
    const run_out f = run_engine(store, 13, 1, 30, 2, seed + 1);
    printf("30 blocks at block_base 40 (2 chunks), aligned tiles: %llu ticket(s), %llu ranges; "
           "worst rel L2 %.1e\n", (unsigned long long)f.tickets, (unsigned long long)f.ranges,
           f.worst);
    CHECK(f.tickets == 1);
    CHECK(f.ranges >= 1 && f.ranges <= 2 * 4);
    CHECK(f.worst < 1e-2);
    /* Run-aware eviction (tuning run_evict): 640 blocks (10 runs of
     * 4 streams), pool 160 (25%), tile 16, 8 exact attends with random
     * queries. A resident block in a run that is mostly missing saves no
     * I/O (the run is read through it); with the window of 4 tiles the
     * pool's blocks gather in few runs, so fewer lie in runs at most half
     * resident than with plain score order, and the hit rate stays. */
    const run_out e0 = run_engine_ex(store, 14, 1, 640, 8, seed + 2, 160, 16, "0");
    const run_out e4 = run_engine_ex(store, 15, 1, 640, 8, seed + 2, 160, 16, "4");
    const double h0 = (double)e0.hits / (double)(e0.hits + e0.misses + !e0.misses);
    const double h4 = (double)e4.hits / (double)(e4.hits + e4.misses + !e4.misses);
    printf("run-aware eviction, 640 blocks, pool 160, tile 16, 8 calls: resident blocks in runs "
           "<= 1/2 resident %d (off) vs %d (window 4 tiles); hit rate %.3f vs %.3f; worst rel "
           "L2 %.1e / %.1e\n", e0.lone, e4.lone, h0, h4, e0.worst, e4.worst);
    CHECK(e0.lone >= 0 && e4.lone >= 0);
    CHECK(e4.lone < e0.lone);
    CHECK(h4 >= 0.9 * h0);
    CHECK(e0.worst < 1e-2 && e4.worst < 1e-2);
    /* With the window as large as the pool (10 tiles of 16), an exact pass
     * takes its own blocks least recent first: the pool keeps what the
     * pass visited last, whole stretches of runs, where score order left
     * the survivors scattered (104 such blocks before). An exact pass hits
     * exactly the pool's blocks whatever the order. */
    const run_out e10 = run_engine_ex(store, 16, 1, 640, 8, seed + 2, 160, 16, "10");
    printf("the window the whole pool (10 tiles): resident blocks in runs <= 1/2 resident %d; "
           "hits %llu vs %llu with run_evict 0; worst rel L2 %.1e\n", e10.lone,
           (unsigned long long)e10.hits, (unsigned long long)e0.hits, e10.worst);
    CHECK(e10.lone >= 0 && 2 * e10.lone <= e0.lone);
    CHECK(e10.hits == e0.hits && e10.misses == e0.misses);
    CHECK(e10.worst < 1e-2);
    sw_store_close(store);
    ts_rm_rf(d.base);
    printf("%d failures\n", sw_test_failures);
    return sw_test_failures ? 1 : 0;
}
