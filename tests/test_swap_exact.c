/* Swap engine exactness: attention through the pool equals the fp64
 * reference over every offloaded token (relative L2 <= 1e-2, LSE within
 * 1e-2) for pool sizes from one tile to all blocks, with and without
 * read-ahead, ragged last blocks, several sequences per call, decode rows
 * and prefill chunks (causal, bottom-right), BF16, FP8 E4M3 and mixed
 * blocks, cold and warm pools, both eviction policies, and a sequence that
 * grows between calls (overwritten last block: its resident copy must not be
 * used). Two engines sharing a store count only their own reads in their
 * stats. Seeded; SW_TEST_SEED overrides. */
#include "test_swap_util.h"

#include <pthread.h>

typedef struct shape {
    int32_t H, Hq, D, B;
} shape;

/* Cases whose round 2 rewrote a last block that was resident as BF16 (its
 * pool copy must not be used after): counted, required of the run. */
static int g_overwrote_resident;
/* Cases whose read-ahead was required to have read a tile ahead. */
static int g_read_ahead;

static int run_case(sw_store *store, uint64_t seed, int idx, uint64_t ns)
{
    static const shape shapes[] = {{1, 1, 64, 16}, {2, 8, 64, 16}, {2, 4, 128, 8},
                                   {1, 4, 32, 32}, {4, 8, 64, 4}};
    sw_rng r = {seed * 7919u + (uint64_t)idx};
    const shape sh = shapes[idx % 5];
    const int32_t L = 2;
    const int32_t nseq = sw_rng_int(&r, 1, 3);
    const int dtmode = idx % 3; /* 0 bf16, 1 fp8, 2 mixed per block */
    tsw_seq seqs[3];
    float *raw_k[3][2], *raw_v[3][2];
    int64_t lens[3];
    int32_t total_blocks = 0;
    for (int32_t i = 0; i < nseq; i++) {
        lens[i] = sw_rng_int(&r, 1, sh.B * 12 + 5);
        total_blocks += (int32_t)((lens[i] + sh.B - 1) / sh.B);
    }
    /* pool sizes: one tile, a few tiles, all blocks (+ slack) */
    const int32_t tile = sw_rng_int(&r, 1, 4);
    int32_t pools[3] = {tile, 3 * tile + sw_rng_int(&r, 0, 2), total_blocks + 2};
    const int32_t pool = pools[(idx / 5) % 3];
    char name[256];
    snprintf(name, sizeof name, "seed=%llu#%d H%d/%d D%d B%d nseq=%d %s pool=%d tile=%d",
             (unsigned long long)seed, idx, sh.H, sh.Hq, sh.D, sh.B, nseq,
             dtmode == 0 ? "bf16" : dtmode == 1 ? "fp8" : "mixed", pool, tile);

    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = L;
    m.num_kv_heads = sh.H;
    m.num_qo_heads = sh.Hq;
    m.head_dim = sh.D;
    m.block_size = sh.B;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = pool;
    c.tile_blocks = tile;
    c.predictor_rank = 16;
    c.prefetch_depth = (int32_t[]){0, 1, 4}[idx % 3];
    c.policy = (idx / 3) % 2 ? SW_SWAP_POLICY_LRU : SW_SWAP_POLICY_SCORE;
    sw_swap *s = NULL;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_OK);
    if (!s)
        return 1;
    const int before = sw_test_failures;
    const size_t row = (size_t)sh.H * sh.D;
    int64_t maxlen = 0;
    for (int32_t i = 0; i < nseq; i++) {
        tsw_seq_init(&seqs[i], 100 + (uint64_t)i, L, sh.H, sh.D, sh.B);
        /* all sequences share one namespace, disjoint block ranges */
        CHECK_STATUS(sw_swap_seq_add(s, seqs[i].id, ns, (uint32_t)i * 1000u, 1000), SW_OK);
        /* round 2 grows sequence 0 by up to B + 3 tokens (B = 1: more than 3 B) */
        const int64_t cap = lens[i] + 2 * sh.B + 3;
        for (int32_t l = 0; l < L; l++) {
            raw_k[i][l] = malloc(sizeof(float) * row * (size_t)cap);
            raw_v[i][l] = malloc(sizeof(float) * row * (size_t)cap);
            for (size_t e = 0; e < row * (size_t)cap; e++) {
                raw_k[i][l][e] = (float)sw_rng_normal(&r);
                raw_v[i][l][e] = (float)sw_rng_normal(&r);
            }
            const int32_t nb = (int32_t)((lens[i] + sh.B - 1) / sh.B);
            for (int32_t b = 0; b < nb; b++) {
                sw_swap_kv_dtype dt = dtmode == 0   ? SW_SWAP_KV_BF16
                                      : dtmode == 1 ? SW_SWAP_KV_FP8_E4M3
                                      : (b % 2 ? SW_SWAP_KV_FP8_E4M3 : SW_SWAP_KV_BF16);
                CHECK_STATUS(tsw_offload_block(s, &seqs[i], l, b, raw_k[i][l], raw_v[i][l],
                                               lens[i], dt), SW_OK);
            }
        }
        if (lens[i] > maxlen)
            maxlen = lens[i];
    }
    /* rounds: cold decode, warm prefill chunk, grow seq 0 then decode */
    int32_t layer = 0;
    int ahead = 0; /* a call whose misses span two tiles or more: one read ahead */
    for (int round = 0; round < 3; round++) {
        /* round 2 grows the layer round 1 attended (its blocks warm) */
        if (round < 2)
            layer = sw_rng_int(&r, 0, L - 1);
        if (round == 2 && lens[0] % sh.B) {
            int32_t slots[1024], nb = 0;
            if (sw_swap_resident_slots(s, seqs[0].id, layer, slots, 1024, &nb) == SW_OK &&
                nb > 0 && slots[nb - 1] >= 0)
                g_overwrote_resident++;
        }
        if (round == 2) {
            /* grow sequence 0 by a few tokens in this layer (overwrite of the
             * partial last block, maybe appends) */
            const int64_t grow = sw_rng_int(&r, 1, sh.B + 3);
            const int64_t nl = lens[0] + grow;
            const int32_t b0 = (int32_t)(lens[0] / sh.B);
            const int32_t b1 = (int32_t)((nl - 1) / sh.B);
            for (int32_t b = b0; b <= b1; b++)
                CHECK_STATUS(tsw_offload_block(s, &seqs[0], layer, b, raw_k[0][layer],
                                               raw_v[0][layer], nl,
                                               dtmode == 1 ? SW_SWAP_KV_FP8_E4M3
                                                           : SW_SWAP_KV_BF16), SW_OK);
            lens[0] = nl;
        }
        int32_t qind[4] = {0};
        for (int32_t i = 0; i < nseq; i++) {
            int32_t ql = 1;
            if (round == 1)
                ql = sw_rng_int(&r, 1, (int32_t)(seqs[i].layers[layer].len < 40
                                                     ? seqs[i].layers[layer].len : 40));
            qind[i + 1] = qind[i] + ql;
        }
        const int32_t rows = qind[nseq];
        uint16_t *q = malloc(sizeof(uint16_t) * (size_t)rows * sh.Hq * sh.D);
        uint16_t *o = malloc(sizeof(uint16_t) * (size_t)rows * sh.Hq * sh.D);
        float *lse = malloc(sizeof(float) * (size_t)rows * sh.Hq);
        for (size_t e = 0; e < (size_t)rows * sh.Hq * sh.D; e++)
            q[e] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(&r)));
        memset(o, 0xff, sizeof(uint16_t) * (size_t)rows * sh.Hq * sh.D);
        memset(lse, 0xff, sizeof(float) * (size_t)rows * sh.Hq);
        uint64_t ids[3];
        for (int32_t i = 0; i < nseq; i++)
            ids[i] = seqs[i].id;
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.layer = layer;
        p.batch = nseq;
        p.seq_ids = ids;
        p.q_indptr = qind;
        p.q = q;
        p.o = o;
        p.lse = lse;
        sw_swap_attend_result res;
        memset(&res, 0, sizeof res);
        res.struct_size = sizeof res;
        CHECK_STATUS(sw_swap_attend(s, &p, &res, NULL), SW_OK);
        ahead |= res.tiles >= 2 && res.misses > tile;
        CHECK(res.blocks_attended == res.blocks_total);
        CHECK(res.hits + res.misses == res.blocks_total);
        double num = 0, den = 0, lse_err = 0;
        int64_t bad = 0;
        for (int32_t i = 0; i < nseq; i++) {
            const int32_t ql = qind[i + 1] - qind[i];
            double *ref = malloc(sizeof(double) * (size_t)ql * sh.Hq * sh.D);
            double *rl = malloc(sizeof(double) * (size_t)ql * sh.Hq);
            tsw_reference(&seqs[i], layer, sh.Hq, q + (size_t)qind[i] * sh.Hq * sh.D, ql, 1,
                          1.0 / sqrt((double)sh.D), ref, rl);
            for (size_t e = 0; e < (size_t)ql * sh.Hq * sh.D; e++) {
                double g = sw_bf16_to_f32(o[(size_t)qind[i] * sh.Hq * sh.D + e]);
                if (!isfinite(g))
                    bad++;
                num += (g - ref[e]) * (g - ref[e]);
                den += ref[e] * ref[e];
            }
            for (size_t e = 0; e < (size_t)ql * sh.Hq; e++) {
                double g = lse[(size_t)qind[i] * sh.Hq + e];
                if (isinf(rl[e]))
                    bad += !(isinf(g) && g < 0);
                else if (!isfinite(g))
                    bad++; /* (unwritten: the poison is NaN) */
                else if (fabs(g - rl[e]) > lse_err)
                    lse_err = fabs(g - rl[e]);
            }
            free(ref);
            free(rl);
        }
        const double rel = sqrt(num / (den > 0 ? den : 1));
        const int ok = rel <= 1e-2 && lse_err <= 1e-2 && bad == 0;
        printf("%-72s round %d rows %3d: rel_l2 %.2e lse %.1e hits %lld misses %lld tiles %lld %s\n",
               name, round, rows, rel, lse_err, (long long)res.hits, (long long)res.misses,
               (long long)res.tiles, ok ? "ok" : "FAIL");
        CHECK(ok);
        free(q);
        free(o);
        free(lse);
    }
    sw_swap_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_STATUS(sw_swap_get_stats(s, &st), SW_OK);
    CHECK(st.resident_used <= (uint64_t)pool);
    CHECK(st.bytes_read == st.host_bytes_read + st.file_bytes_read);
    CHECK(st.prefetch == (pool >= 2 * tile ? c.prefetch_depth : 0));
    /* (read calls of one-tile passes, however many, have nothing to read
     * ahead of) */
    if (c.prefetch_depth && pool >= 2 * tile && ahead) {
        CHECK(st.prefetched_tiles > 0);
        g_read_ahead++;
    }
    for (int32_t i = 0; i < nseq; i++) {
        CHECK_STATUS(sw_swap_seq_remove(s, seqs[i].id, 1), SW_OK);
        for (int32_t l = 0; l < L; l++) {
            free(raw_k[i][l]);
            free(raw_v[i][l]);
        }
        tsw_seq_free(&seqs[i]);
    }
    sw_swap_destroy(s);
    return sw_test_failures != before;
}

/* Two engines on one store (with a host tier smaller than their stripes),
 * attending at once from two threads: each engine's stats count its own
 * reads only -- bytes_read = host_bytes_read + file_bytes_read after every
 * call, and the two engines' tier bytes add up to the store's. */
typedef struct shared_run {
    sw_swap *s;
    uint64_t id;
    const uint16_t *q;
    int calls, bad;
} shared_run;

static void *shared_attend(void *p)
{
    shared_run *a = p;
    uint16_t o[4 * 128];
    float lse[4];
    for (int c = 0; c < a->calls; c++) {
        int32_t qi[2] = {0, 1};
        sw_swap_attend_params ap;
        sw_swap_attend_params_init(&ap);
        ap.batch = 1;
        ap.seq_ids = &a->id;
        ap.q_indptr = qi;
        ap.q = a->q;
        ap.o = o;
        ap.lse = lse;
        if (sw_swap_attend(a->s, &ap, NULL, NULL) != SW_OK)
            a->bad++;
        sw_swap_stats st;
        memset(&st, 0, sizeof st);
        st.struct_size = sizeof st;
        if (sw_swap_get_stats(a->s, &st) != SW_OK ||
            st.bytes_read != st.host_bytes_read + st.file_bytes_read)
            a->bad++;
    }
    return NULL;
}

static void test_shared_store_stats(uint64_t seed)
{
    enum { H = 2, Hq = 4, D = 128, B = 16 }; /* 4 KiB stripes */
    const int32_t nbs[2] = {24, 4};
    ts_dir d;
    ts_dir_make(&d, "swap_shared");
    /* 60 host-tier entries: the second engine's 16 stripes stay there,
     * the first's 96 cycle through (file reads fill the tier) */
    sw_store *store = tsw_store_open(d.store, B * D * 2, 2000, 60ull * B * D * 2);
    if (!store) {
        ts_rm_rf(d.base);
        CHECK(0);
        return;
    }
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = 1;
    m.num_kv_heads = H;
    m.num_qo_heads = Hq;
    m.head_dim = D;
    m.block_size = B;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = 2; /* every call reads */
    c.tile_blocks = 2;
    sw_swap *e[2] = {NULL, NULL};
    tsw_seq q[2];
    float *rk[2], *rv[2];
    uint16_t qb[Hq * D];
    sw_rng r = {seed ^ 0x5ba5edu};
    for (int i = 0; i < Hq * D; i++)
        qb[i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
    for (int k = 0; k < 2; k++) {
        const int32_t nb = nbs[k];
        const int64_t len = (int64_t)nb * B;
        CHECK_STATUS(sw_swap_create(&m, &c, store, &e[k]), SW_OK);
        tsw_seq_init(&q[k], 7, 1, H, D, B);
        CHECK_STATUS(sw_swap_seq_add(e[k], 7, 5000 + (uint64_t)k, 0, nb), SW_OK);
        rk[k] = malloc(sizeof(float) * (size_t)len * H * D);
        rv[k] = malloc(sizeof(float) * (size_t)len * H * D);
        for (int64_t i = 0; i < len * H * D; i++) {
            rk[k][i] = (float)sw_rng_normal(&r);
            rv[k][i] = (float)sw_rng_normal(&r);
        }
        for (int32_t b = 0; b < nb; b++)
            CHECK_STATUS(tsw_offload_block(e[k], &q[k], 0, b, rk[k], rv[k], len,
                                           SW_SWAP_KV_BF16), SW_OK);
    }
    sw_store_stats s0;
    memset(&s0, 0, sizeof s0);
    s0.struct_size = sizeof s0;
    CHECK_STATUS(sw_store_get_stats(store, &s0), SW_OK);
    shared_run a[2] = {{e[0], 7, qb, 40, 0}, {e[1], 7, qb, 40, 0}};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, shared_attend, &a[1]) == 0);
    shared_attend(&a[0]);
    pthread_join(th, NULL);
    sw_store_stats s1 = s0;
    CHECK_STATUS(sw_store_get_stats(store, &s1), SW_OK);
    uint64_t host = 0, file = 0;
    for (int k = 0; k < 2; k++) {
        sw_swap_stats st;
        memset(&st, 0, sizeof st);
        st.struct_size = sizeof st;
        CHECK_STATUS(sw_swap_get_stats(e[k], &st), SW_OK);
        CHECK(a[k].bad == 0);
        CHECK(st.bytes_read == st.host_bytes_read + st.file_bytes_read);
        host += st.host_bytes_read;
        file += st.file_bytes_read;
    }
    printf("two engines on one store: host tier %llu + file %llu bytes, the store counted "
           "%llu + %llu\n", (unsigned long long)host, (unsigned long long)file,
           (unsigned long long)(s1.host_bytes_read - s0.host_bytes_read),
           (unsigned long long)(s1.file_bytes_read - s0.file_bytes_read));
    CHECK(host == s1.host_bytes_read - s0.host_bytes_read);
    CHECK(file == s1.file_bytes_read - s0.file_bytes_read);
    CHECK(host > 0 && file > 0);
    for (int k = 0; k < 2; k++) {
        sw_swap_destroy(e[k]);
        tsw_seq_free(&q[k]);
        free(rk[k]);
        free(rv[k]);
    }
    sw_store_close(store);
    ts_rm_rf(d.base);
}

int main(void)
{
    const uint64_t seed = ts_seed(20240611);
    ts_dir d;
    ts_dir_make(&d, "swap_exact");
    /* no host tier: stripes come from the data file */
    sw_store *store = tsw_store_open(d.store, 32 * 64 * 2, 6000, 0);
    if (!store) {
        ts_rm_rf(d.base);
        return 1; /* (a fresh directory: a failure is the store's, not the machine's) */
    }
    double t0 = sw_now_seconds();
    int ncases = 30;
    for (int i = 0; i < ncases; i++)
        if (run_case(store, seed, i, 1 + (uint64_t)i))
            fprintf(stderr, "case %d failed (seed %llu)\n", i, (unsigned long long)seed);
    /* The same cases again with the engine's compute pool at 1, 3 and 5
     * threads (read at sw_swap_create): more threads than kv heads split
     * each tile's keys into ranges whose softmax states are merged. */
    static const char *const nthreads[3] = {"1", "3", "5"};
    const int nextra = 12;
    for (int i = 0; i < nextra; i++) {
        setenv("SPILLWAY_NUM_THREADS", nthreads[i % 3], 1);
        if (run_case(store, seed, i, 101 + (uint64_t)i))
            fprintf(stderr, "case %d with %s compute threads failed (seed %llu)\n", i,
                    nthreads[i % 3], (unsigned long long)seed);
    }
    unsetenv("SPILLWAY_NUM_THREADS");
    ncases += nextra;
    /* the rewrite of a resident partial block (the header's claim) ran */
    printf("%d cases rewrote a resident last block, %d read tiles ahead\n",
           g_overwrote_resident, g_read_ahead);
    CHECK(g_overwrote_resident > 0 && g_read_ahead > 0);
    test_shared_store_stats(seed);
    sw_store_close(store);
    ts_rm_rf(d.base);
    printf("%d cases in %.2f s, %d failures (seed %llu)\n", ncases, sw_now_seconds() - t0,
           sw_test_failures, (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
