/* Block store round trips: random keys and lengths written and read back in
 * shuffled batches; overwrite; delete; namespace isolation; reopen after a
 * clean close; host-tier hits; adjacent blocks coalesced into one request;
 * argument errors; device destinations checked per run (GPU only). */
#include "test_store_util.h"
#include "store/store_internal.h"
#include "swap/swap_cuda.h"

#define STRIPE 8192u
#define RUN 16u
#define NKEYS 400

typedef struct model {
    sw_store_key key;
    uint64_t tag;   /* content tag (0 = absent) */
    size_t len;
    uint64_t gen;
} model;

static void check_all(sw_store *s, model *m, size_t n, sw_rng *r)
{
    /* Shuffled batch of every key (present or not). */
    size_t *perm = malloc(n * sizeof *perm);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = sw_rng_next(r) % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    sw_store_key *keys = malloc(n * sizeof *keys);
    void **dst = malloc(n * sizeof *dst);
    size_t *lens = malloc(n * sizeof *lens);
    uint64_t *gens = malloc(n * sizeof *gens);
    sw_status *sts = malloc(n * sizeof *sts);
    for (size_t i = 0; i < n; i++) {
        keys[i] = m[perm[i]].key;
        dst[i] = malloc(STRIPE);
    }
    (void)sw_store_read(s, n, keys, dst, STRIPE, lens, gens, sts);
    for (size_t i = 0; i < n; i++) {
        const model *e = &m[perm[i]];
        if (e->tag == 0) {
            CHECK_STATUS(sts[i], SW_STATUS_NOT_FOUND);
        } else {
            CHECK_STATUS(sts[i], SW_OK);
            CHECK(lens[i] == e->len && gens[i] == e->gen);
            CHECK(sts[i] != SW_OK || ts_check(dst[i], e->len, &e->key, e->tag));
        }
        free(dst[i]);
    }
    free(perm); free(keys); free(dst); free(lens); free(gens); free(sts);
}

static void put(sw_store *s, model *e, uint64_t tag)
{
    uint8_t buf[STRIPE];
    e->len = ts_len(&e->key, tag, STRIPE);
    ts_fill(buf, e->len, &e->key, tag);
    uint64_t g = 0;
    CHECK_STATUS(sw_store_write(s, &e->key, buf, e->len, &g), SW_OK);
    CHECK(g > e->gen);
    e->gen = g;
    e->tag = tag;
}

static void test_round_trips(const char *dir, uint64_t seed)
{
    sw_rng r = {seed};
    sw_store_config c = ts_config(dir, STRIPE, RUN, 64);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    sw_store_stats st = ts_stats(s);
    printf("io backend: %s, direct_io %d\n", sw_store_io_backend_name(st.io_backend),
           st.direct_io);
    /* the config's backend is the one that runs (the *_pread run asks for
     * pread through ts_config) */
    CHECK(c.io_backend != SW_STORE_IO_PREAD || st.io_backend == SW_STORE_IO_PREAD);
    CHECK(st.extents_total == 64 * RUN && st.extents_used == 0);

    static model m[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        m[i].key = ts_key(sw_rng_int(&r, 1, 3), sw_rng_int(&r, 0, 3),
                          (uint32_t)sw_rng_int(&r, 0, 100000), (uint16_t)sw_rng_int(&r, 0, 7),
                          (uint8_t)sw_rng_int(&r, 0, 1));
        for (int j = 0; j < i; j++) /* unique keys */
            if (sw_store_key_eq(&m[j].key, &m[i].key)) {
                m[i].key.block++;
                j = -1;
            }
        m[i].tag = 0;
        m[i].gen = 0;
    }
    for (int i = 0; i < NKEYS; i++)
        if (i % 5 != 0) /* every fifth key stays absent */
            put(s, &m[i], 1);
    check_all(s, m, NKEYS, &r);

    /* Overwrite a third with new contents and lengths. */
    for (int i = 0; i < NKEYS; i += 3)
        if (m[i].tag)
            put(s, &m[i], m[i].tag + 1);
    check_all(s, m, NKEYS, &r);

    /* Delete some; a second delete and a delete of an absent key fail. */
    for (int i = 1; i < NKEYS; i += 7)
        if (m[i].tag) {
            CHECK_STATUS(sw_store_delete(s, &m[i].key), SW_OK);
            CHECK_STATUS(sw_store_delete(s, &m[i].key), SW_STATUS_NOT_FOUND);
            m[i].tag = 0;
        }
    check_all(s, m, NKEYS, &r);

    uint64_t live = 0, payload = 0;
    for (int i = 0; i < NKEYS; i++)
        if (m[i].tag) {
            live++;
            payload += m[i].len;
        }
    st = ts_stats(s);
    CHECK(st.extents_used == live && st.payload_bytes == payload);
    CHECK(st.used_bytes == live * st.extent_bytes);
    CHECK(st.corruptions == 0 && st.io_errors == 0);

    /* Reopen after a clean close: same contents, same accounting. */
    CHECK_STATUS(sw_store_close(s), SW_OK);
    s = NULL;
    sw_store_config c2 = c;
    c2.capacity_bytes = 0; /* "as created" */
    CHECK_STATUS(sw_store_open(&c2, &s), SW_OK);
    if (!s)
        return;
    st = ts_stats(s);
    CHECK(st.extents_used == live && st.payload_bytes == payload && st.journal_dropped == 0);
    check_all(s, m, NKEYS, &r);
    /* Generations keep growing after a reopen. */
    uint64_t gmax = 0;
    for (int i = 0; i < NKEYS; i++)
        gmax = m[i].gen > gmax ? m[i].gen : gmax;
    put(s, &m[0], 99);
    CHECK(m[0].gen > gmax);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

static void test_namespaces(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, 8);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    uint8_t a[STRIPE], b[STRIPE];
    sw_store_key ka = ts_key(100, 2, 5, 1, SW_STORE_KIND_K), kb = ka, kc = ka;
    kb.ns = 200;
    kc.ns = 300;
    ts_fill(a, STRIPE, &ka, 1);
    ts_fill(b, STRIPE, &kb, 1);
    CHECK_STATUS(sw_store_write(s, &ka, a, STRIPE, NULL), SW_OK);
    CHECK_STATUS(sw_store_write(s, &kb, b, 100, NULL), SW_OK);
    uint8_t out[STRIPE];
    size_t len;
    CHECK_STATUS(ts_read1(s, &ka, out, STRIPE, &len, NULL), SW_OK);
    CHECK(len == STRIPE && memcmp(out, a, STRIPE) == 0);
    CHECK_STATUS(ts_read1(s, &kb, out, STRIPE, &len, NULL), SW_OK);
    CHECK(len == 100 && memcmp(out, b, 100) == 0);
    memset(out, 0xcc, sizeof out);
    CHECK_STATUS(ts_read1(s, &kc, out, STRIPE, &len, NULL), SW_STATUS_NOT_FOUND);
    CHECK(len == 0 && out[0] == 0xcc); /* untouched */
    /* Same coordinates, other kind / head / layer are other keys too. */
    sw_store_key kv = ka;
    kv.kind = SW_STORE_KIND_V;
    CHECK_STATUS(ts_read1(s, &kv, out, STRIPE, NULL, NULL), SW_STATUS_NOT_FOUND);
    CHECK_STATUS(sw_store_delete(s, &kc), SW_STATUS_NOT_FOUND);
    CHECK_STATUS(sw_store_delete(s, &ka), SW_OK);
    CHECK_STATUS(ts_read1(s, &ka, out, STRIPE, NULL, NULL), SW_STATUS_NOT_FOUND);
    CHECK_STATUS(ts_read1(s, &kb, out, STRIPE, &len, NULL), SW_OK);
    CHECK(len == 100 && memcmp(out, b, 100) == 0);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

static void test_coalesce_and_host(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, 64, 4);
    c.host_tier_bytes = 32 * STRIPE;
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    enum { N = 64 };
    sw_store_key keys[N];
    void *dst[N];
    sw_status sts[N];
    size_t lens[N];
    uint8_t *mem = malloc((size_t)N * STRIPE);
    /* Two interleaved streams written block by block, as a model would. */
    for (int i = 0; i < N; i++)
        for (int kind = 0; kind < 2; kind++) {
            sw_store_key k = ts_key(7, 3, (uint32_t)(128 + i), 2, (uint8_t)kind);
            ts_fill(mem, STRIPE, &k, 5);
            CHECK_STATUS(sw_store_write(s, &k, mem, STRIPE, NULL), SW_OK);
        }
    sw_store_stats st0 = ts_stats(s);
    CHECK(st0.host_entries == 32 && st0.host_used_bytes == 32 * STRIPE);
    CHECK(st0.host_evictions == 2 * N - 32);
    for (int i = 0; i < N; i++) {
        keys[i] = ts_key(7, 3, (uint32_t)(128 + i), 2, SW_STORE_KIND_K);
        dst[i] = mem + (size_t)i * STRIPE;
    }
    memset(mem, 0, (size_t)N * STRIPE);
    CHECK_STATUS(sw_store_read(s, N, keys, dst, STRIPE, lens, NULL, sts), SW_OK);
    sw_store_stats st1 = ts_stats(s);
    for (int i = 0; i < N; i++)
        CHECK(sts[i] == SW_OK && lens[i] == STRIPE && ts_check(dst[i], STRIPE, &keys[i], 5));
    /* The K stream's blocks were in the host tier only where recent (the
     * last 32 writes were the V/K pairs of blocks 112..127+: 16 K stripes),
     * the rest came from the file as ONE request (one run, adjacent). */
    CHECK(st1.host_hits - st0.host_hits == 16);
    CHECK(st1.file_hits - st0.file_hits == N - 16);
    CHECK(st1.read_requests - st0.read_requests == 1);
    /* File reads fill the host tier in placement order (verified bytes
     * only): the last 32 read from the file, blocks 16..47, are now there. */
    CHECK_STATUS(sw_store_read(s, 16, keys + 16, dst, STRIPE, lens, NULL, sts), SW_OK);
    sw_store_stats st2 = ts_stats(s);
    CHECK(st2.host_hits - st1.host_hits == 16 && st2.read_requests == st1.read_requests);
    CHECK(st2.host_bytes_read - st1.host_bytes_read == 16ull * STRIPE);
    free(mem);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

static void test_errors(const char *dir)
{
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(NULL, &s), SW_STATUS_INVALID);
    sw_store_config c = ts_config(dir, STRIPE, RUN, 2);
    CHECK_STATUS(sw_store_open(&c, NULL), SW_STATUS_INVALID);
    c.struct_size = 8;
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
    CHECK(s == NULL);
    c = ts_config(dir, STRIPE, RUN, 2);
    c.queue_depth = 0;
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
    c = ts_config(dir, STRIPE, RUN, 2);
    c.create = 5; /* a flag */
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "create=5") != NULL);
    /* a bounce buffer whose aligned size would wrap (it wrote past a 4 KiB
     * buffer) */
    static const uint64_t huge[] = {UINT64_MAX, UINT64_MAX - 4095, ((uint64_t)1 << 44) + 1};
    for (int i = 0; i < 3; i++) {
        c = ts_config(dir, STRIPE, RUN, 2);
        c.io_buffer_bytes = huge[i];
        CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
        CHECK(s == NULL && strstr(sw_last_error(), "io_buffer_bytes") != NULL);
    }
    c = ts_config(dir, STRIPE, RUN, 2);
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    /* A second open of the same store (this process or another) is refused. */
    sw_store *s2 = NULL;
    c.lock_wait_ms = 20;
    double t0 = sw_now_seconds();
    CHECK_STATUS(sw_store_open(&c, &s2), SW_STATUS_IO);
    CHECK(strstr(sw_last_error(), "another process") != NULL);
    CHECK(sw_now_seconds() - t0 < 1.0); /* waited ~20 ms, not the default 2 s */
    c.lock_wait_ms = -1; /* not at all */
    CHECK_STATUS(sw_store_open(&c, &s2), SW_STATUS_IO);
    c.lock_wait_ms = 0;
    /* an unknown backend is refused before anything is opened */
    c.io_backend = (sw_store_io_backend)7;
    CHECK_STATUS(sw_store_open(&c, &s2), SW_STATUS_INVALID);
    c.io_backend = SW_STORE_IO_AUTO;
    sw_store_key k = ts_key(1, 1, 1, 1, SW_STORE_KIND_V);
    uint8_t buf[STRIPE + 1] = {1};
    CHECK_STATUS(sw_store_write(s, &k, buf, STRIPE + 1, NULL), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_write(s, &k, NULL, 10, NULL), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_write(NULL, &k, buf, 10, NULL), SW_STATUS_INVALID);
    sw_store_key bad = k;
    bad.kind = 2;
    CHECK_STATUS(sw_store_write(s, &bad, buf, 10, NULL), SW_STATUS_INVALID);
    bad = k;
    bad.reserved = 1;
    CHECK_STATUS(sw_store_write(s, &bad, buf, 10, NULL), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_write(s, &k, NULL, 0, NULL), SW_OK); /* empty stripe */
    size_t len = 99;
    CHECK_STATUS(ts_read1(s, &k, buf, STRIPE, &len, NULL), SW_OK);
    CHECK(len == 0);
    CHECK_STATUS(sw_store_write(s, &k, buf, 100, NULL), SW_OK);
    CHECK_STATUS(ts_read1(s, &k, buf, 99, NULL, NULL), SW_STATUS_INVALID); /* dst too small */
    void *dst[2] = {buf, NULL};
    sw_store_key ks[2] = {k, k};
    sw_status sts[2];
    CHECK_STATUS(sw_store_read(s, 2, ks, dst, STRIPE, NULL, NULL, sts), SW_STATUS_INVALID);
    CHECK(sts[0] == SW_OK && sts[1] == SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read(s, 2, ks, dst, STRIPE, NULL, NULL, NULL), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read(s, 0, NULL, NULL, 0, NULL, NULL, sts), SW_OK);
    CHECK_STATUS(sw_store_read_device(s, 1, ks, dst, STRIPE, NULL, NULL, sts, NULL),
                 sw_cuda_devices() > 0 ? SW_STATUS_INVALID : SW_STATUS_NO_DEVICE);
    sw_store_stats st;
    st.struct_size = 4;
    CHECK_STATUS(sw_store_get_stats(s, &st), SW_STATUS_INVALID);
    CHECK(strcmp(sw_store_io_backend_name(SW_STORE_IO_PREAD), "pread") == 0);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    CHECK_STATUS(sw_store_close(NULL), SW_OK);
    c.create = 0;
    c.dir = "/tmp/sw_store_definitely_missing_dir";
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_NOT_FOUND);
}

/* Generations only grow, across deletes and journal compaction: the
 * high-water mark of a deleted key must survive a compacting reopen. */
static void test_generation_after_compaction(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, 8);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    uint8_t a[STRIPE];
    sw_store_key ka = ts_key(7, 0, 1, 0, SW_STORE_KIND_K), kb = ka, kc = ka;
    kb.block = 2;
    kc.block = 3;
    ts_fill(a, STRIPE, &ka, 1);
    uint64_t g1 = 0, g2 = 0, g3 = 0;
    CHECK_STATUS(sw_store_write(s, &ka, a, STRIPE, &g1), SW_OK);
    CHECK_STATUS(sw_store_write(s, &kb, a, STRIPE, &g2), SW_OK);
    CHECK(g2 > g1);
    CHECK_STATUS(sw_store_delete(s, &kb), SW_OK);
    const uint64_t records = ts_stats(s).journal_records; /* (two writes, a delete) */
    CHECK_STATUS(sw_store_close(s), SW_OK);
    /* Compact at the next open and close with no write in between (as a
     * writer killed right after opening does): the next open sees only the
     * compacted journal. */
    s = NULL;
    CHECK_STATUS(open_compacting(&c, &s), SW_OK);
    if (!s)
        return;
    CHECK(ts_stats(s).journal_records < records); /* it did compact: ka's record alone */
    CHECK_STATUS(sw_store_close(s), SW_OK);
    s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    CHECK_STATUS(sw_store_write(s, &kc, a, STRIPE, &g3), SW_OK);
    CHECK(g3 > g2);
    uint8_t out[STRIPE];
    size_t len = 0;
    CHECK_STATUS(ts_read1(s, &ka, out, STRIPE, &len, NULL), SW_OK); /* survived compaction */
    CHECK(len == STRIPE && memcmp(out, a, STRIPE) == 0);
    CHECK_STATUS(ts_read1(s, &kb, out, STRIPE, &len, NULL), SW_STATUS_NOT_FOUND);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* sw_store_read_device checks its destinations per gap-free run (first and
 * last one looked up): contiguous device destinations read; a host pointer
 * anywhere -- alone, inside or at the end of the list -- is refused before
 * any I/O; the trusted variant (the swap engine's) reads the same bytes.
 * Without a GPU: only the NO_DEVICE answers. */
static void test_device_runs(const char *dir)
{
    enum { K = 6 };
    sw_store_config c = ts_config(dir, STRIPE, RUN, 4);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    sw_store_key ks[K];
    uint8_t *buf = (uint8_t *)malloc((size_t)K * STRIPE);
    for (int i = 0; i < K; i++) {
        ks[i] = ts_key(3, 0, (uint32_t)i, 0, SW_STORE_KIND_V);
        ts_fill(buf, STRIPE, &ks[i], 1);
        CHECK_STATUS(sw_store_write(s, &ks[i], buf, STRIPE, NULL), SW_OK);
    }
    sw_status sts[K];
    void *dst[K];
    void *dev = NULL;
    if (sw_cuda_devices() <= 0 || sw_cuda_swap_alloc(&dev, (size_t)K * STRIPE) != SW_OK || !dev) {
        for (int i = 0; i < K; i++)
            dst[i] = buf + (size_t)i * STRIPE;
        sw_status want = SW_STATUS_NO_DEVICE;
        CHECK_STATUS(sw_store_read_device(s, K, ks, dst, STRIPE, NULL, NULL, sts, NULL), want);
        CHECK_STATUS(sw_store_read_device_owned(s, K, ks, dst, STRIPE, NULL, NULL, sts, NULL),
                     want);
        CHECK(sts[0] == want && sts[K - 1] == want);
        free(buf);
        CHECK_STATUS(sw_store_close(s), SW_OK);
        return;
    }
    for (int variant = 0; variant < 2; variant++) {
        /* in call order: 0..K-1 back to back, or two runs (odd then even) */
        for (int i = 0; i < K; i++) {
            int slot = variant == 0 ? i : (i < K / 2 ? 2 * i + 1 : 2 * (i - K / 2));
            dst[i] = (uint8_t *)dev + (size_t)slot * STRIPE;
        }
        CHECK(sw_store_first_host_dst(K, dst, STRIPE) == K);
        for (int owned = 0; owned < 2; owned++) {
            CHECK_STATUS(sw_cuda_memset_async(dev, 0, (size_t)K * STRIPE, NULL), SW_OK);
            CHECK_STATUS(owned ? sw_store_read_device_owned(s, K, ks, dst, STRIPE, NULL, NULL,
                                                            sts, NULL)
                               : sw_store_read_device(s, K, ks, dst, STRIPE, NULL, NULL, sts,
                                                      NULL),
                         SW_OK);
            for (int i = 0; i < K; i++) {
                CHECK_STATUS(sw_cuda_swap_copy(buf, dst[i], STRIPE, NULL), SW_OK);
                CHECK_STATUS(sw_cuda_stream_sync(NULL), SW_OK);
                CHECK(ts_check(buf, STRIPE, &ks[i], 1));
            }
        }
    }
    uint8_t host[STRIPE];
    for (int at = 0; at < K; at++) {
        for (int i = 0; i < K; i++)
            dst[i] = (uint8_t *)dev + (size_t)i * STRIPE;
        dst[at] = host;
        CHECK(sw_store_first_host_dst(K, dst, STRIPE) == (size_t)at);
        sw_store_stats a = ts_stats(s);
        CHECK_STATUS(sw_store_read_device(s, K, ks, dst, STRIPE, NULL, NULL, sts, NULL),
                     SW_STATUS_INVALID);
        sw_store_stats b = ts_stats(s);
        CHECK(sts[0] == SW_STATUS_INVALID && sts[K - 1] == SW_STATUS_INVALID);
        CHECK(b.file_hits == a.file_hits && b.host_hits == a.host_hits); /* nothing read */
    }
    sw_cuda_swap_free(dev);
    free(buf);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* The I/O options of sw_store_config: the backend asked for is the one that
 * runs, buffered_io turns O_DIRECT off, and a store written one way reads
 * the same the other way. */
static void test_io_options(const char *dir)
{
    sw_store_key k = ts_key(3, 1, 2, 0, SW_STORE_KIND_K);
    uint8_t w[STRIPE], r[STRIPE];
    for (size_t i = 0; i < sizeof w; i++)
        w[i] = (uint8_t)(i * 7 + 1);
    for (int pass = 0; pass < 2; pass++) {
        sw_store_config c = ts_config(dir, STRIPE, RUN, 2);
        c.io_backend = pass ? SW_STORE_IO_AUTO : SW_STORE_IO_PREAD;
        c.buffered_io = !pass;
        sw_store *s = NULL;
        CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
        if (!s)
            return;
        sw_store_stats st = ts_stats(s);
        CHECK(!c.buffered_io || st.direct_io == 0);
        CHECK(c.io_backend != SW_STORE_IO_PREAD || st.io_backend == SW_STORE_IO_PREAD);
        if (pass == 0) {
            CHECK_STATUS(sw_store_write(s, &k, w, STRIPE, NULL), SW_OK);
        } else {
            void *dst[1] = {r};
            size_t len[1];
            uint64_t gen[1];
            sw_status sts[1];
            memset(r, 0, sizeof r);
            CHECK_STATUS(sw_store_read(s, 1, &k, dst, STRIPE, len, gen, sts), SW_OK);
            CHECK(sts[0] == SW_OK && len[0] == STRIPE && memcmp(r, w, STRIPE) == 0);
        }
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
}

int main(void)
{
    uint64_t seed = ts_seed(0x5107e);
    ts_dir d;
    ts_dir_make(&d, "basic");
    char sub[300];
    printf("seed 0x%llx, dir %s\n", (unsigned long long)seed, d.base);
    test_round_trips(d.store, seed);
    snprintf(sub, sizeof sub, "%s/ns", d.base);
    test_namespaces(sub);
    snprintf(sub, sizeof sub, "%s/co", d.base);
    test_coalesce_and_host(sub);
    snprintf(sub, sizeof sub, "%s/err", d.base);
    test_errors(sub);
    snprintf(sub, sizeof sub, "%s/gen", d.base);
    test_generation_after_compaction(sub);
    snprintf(sub, sizeof sub, "%s/dev", d.base);
    test_device_runs(sub);
    snprintf(sub, sizeof sub, "%s/io", d.base);
    test_io_options(sub);
    ts_rm_rf(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_basic: %d failures (seed 0x%llx)\n", sw_test_failures,
                (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
