/* Batched writes (sw_store_write_batch): a few hundred random stripes read
 * back byte-exact with increasing generations; a key given twice (the later
 * wins, the earlier version's extent voided); the same store as n single
 * writes -- stats, read results, placement, host tier -- with overwrites,
 * duplicates and reads in between, at capacity under LRU eviction and under
 * refusal; bad arguments (nothing written, the index named); a write error
 * in the middle of a batch (RLIMIT_FSIZE: the groups before it stay, its
 * group is undone); reopen; kills simulated at file level (a group without
 * its records, with part of them, with a torn extent, with a record lost in
 * the middle, with its voids unwritten) and real ones (fork + SIGKILL of a
 * batch writer, with and without eviction): every key reads its old or one
 * of its new versions, whole, nothing unprovable. Seeded (SW_TEST_SEED). */
#include "test_store_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#define MAXN 1024

/* A list of writes: key, content tag, length, bytes. */
typedef struct wl {
    size_t n;
    sw_store_key keys[MAXN];
    uint64_t tags[MAXN];
    size_t lens[MAXN];
    const void *src[MAXN];
    uint8_t *bufs[MAXN];
} wl;

static void wl_add(wl *w, const sw_store_key *k, uint64_t tag, size_t stripe)
{
    size_t i = w->n++;
    w->keys[i] = *k;
    w->tags[i] = tag;
    w->lens[i] = ts_len(k, tag, stripe);
    w->bufs[i] = (uint8_t *)malloc(w->lens[i] ? w->lens[i] : 1);
    ts_fill(w->bufs[i], w->lens[i], k, tag);
    w->src[i] = w->bufs[i];
}

static void wl_free(wl *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->bufs[i]);
    w->n = 0;
}

static sw_store_config cfg(const char *dir, uint32_t stripe, uint32_t run, uint64_t nruns,
                           uint32_t qd, uint64_t host_entries)
{
    sw_store_config c = ts_config(dir, stripe, run, nruns);
    c.queue_depth = qd;
    c.host_tier_bytes = host_entries * stripe;
    return c;
}

/* sw_store_write one by one, stopping at the first failure (its index in
 * *n_done, as the batch reports it). */
static sw_status write_seq(sw_store *s, size_t n, const sw_store_key *keys, const void *const *src,
                           const size_t *bytes, uint64_t *gens, size_t *n_done)
{
    for (size_t i = 0; i < n; i++) {
        sw_status st = sw_store_write(s, &keys[i], src[i], bytes[i], &gens[i]);
        if (st != SW_OK) {
            *n_done = i;
            return st;
        }
    }
    *n_done = n;
    return SW_OK;
}

/* ------------------------------------------------- store comparisons -- */
typedef struct entries {
    size_t n;
    sw_store_entry e[4096];
} entries;

static int collect(void *ctx, const sw_store_entry *e)
{
    entries *x = (entries *)ctx;
    if (x->n < 4096)
        x->e[x->n++] = *e;
    return 0;
}

/* Two stores that saw the same writes: the same counters, the same
 * stripes in the same extents with the same host-tier copies, and the same
 * bytes, lengths and generations for every key of `probe`. */
static void same_stores(sw_store *a, sw_store *b, const wl *probe, size_t stripe, const char *what)
{
    sw_store_stats x = ts_stats(a), y = ts_stats(b);
#define SAME(f)                                                                              \
    do {                                                                                     \
        if (x.f != y.f)                                                                      \
            fprintf(stderr, "%s: " #f " batch %llu, single %llu\n", what,                     \
                    (unsigned long long)x.f, (unsigned long long)y.f);                       \
        CHECK(x.f == y.f);                                                                   \
    } while (0)
    SAME(writes);
    SAME(bytes_written);
    SAME(evictions);
    SAME(extents_used);
    SAME(payload_bytes);
    SAME(runs_used);
    SAME(generation);
    SAME(host_entries);
    SAME(host_used_bytes);
    SAME(host_evictions);
    SAME(journal_records);
    SAME(deletes);
#undef SAME
    static entries ea, eb;
    ea.n = eb.n = 0;
    CHECK_STATUS(sw_store_iterate(a, collect, &ea), SW_OK);
    CHECK_STATUS(sw_store_iterate(b, collect, &eb), SW_OK);
    CHECK(ea.n == eb.n);
    int placed = ea.n == eb.n;
    for (size_t i = 0; placed && i < ea.n; i++)
        placed = sw_store_key_eq(&ea.e[i].key, &eb.e[i].key) &&
                 ea.e[i].generation == eb.e[i].generation && ea.e[i].length == eb.e[i].length &&
                 ea.e[i].extent == eb.e[i].extent && ea.e[i].in_host == eb.e[i].in_host;
    if (!placed)
        fprintf(stderr, "%s: stripes placed differently (%zu vs %zu live)\n", what, ea.n, eb.n);
    CHECK(placed);
    uint8_t *ba = malloc(stripe), *bb = malloc(stripe);
    for (size_t i = 0; i < probe->n; i++) {
        size_t la = 0, lb = 0;
        uint64_t ga = 0, gb = 0;
        memset(ba, 0, stripe);
        memset(bb, 0, stripe);
        sw_status sa = ts_read1(a, &probe->keys[i], ba, stripe, &la, &ga);
        sw_status sb = ts_read1(b, &probe->keys[i], bb, stripe, &lb, &gb);
        CHECK(sa == sb && la == lb && ga == gb && memcmp(ba, bb, stripe) == 0);
    }
    free(ba);
    free(bb);
}

/* -------------------------------------------------------- (1) random -- */
static void test_random(const char *dir, sw_rng *r)
{
    const uint32_t stripe = 16384;
    sw_store_config c = cfg(dir, stripe, 64, 16, 64, 0);
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    static wl w;
    /* 300 distinct keys of 6 streams, in a shuffled order */
    uint32_t perm[300];
    for (uint32_t i = 0; i < 300; i++)
        perm[i] = i;
    for (uint32_t i = 299; i > 0; i--) {
        uint32_t j = (uint32_t)(sw_rng_next(r) % (i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (uint32_t q = 0; q < 300; q++) {
        uint32_t i = perm[q];
        sw_store_key k = ts_key(7, i % 3, i / 6, (uint16_t)(i % 2), (uint8_t)((i / 3) & 1));
        wl_add(&w, &k, 1 + (sw_rng_next(r) & 0xffff), stripe);
    }
    w.lens[5] = 0; /* an empty stripe, src NULL */
    w.src[5] = NULL;
    free(w.bufs[6]); /* a full one */
    w.lens[6] = stripe;
    w.bufs[6] = malloc(stripe);
    ts_fill(w.bufs[6], stripe, &w.keys[6], w.tags[6]);
    w.src[6] = w.bufs[6];
    static uint64_t gens[MAXN];
    size_t done = 0;
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, gens, &done), SW_OK);
    CHECK(done == w.n);
    for (size_t i = 1; i < w.n; i++)
        CHECK(gens[i] > gens[i - 1]);
    static void *dst[MAXN];
    static size_t lens[MAXN];
    static uint64_t rg[MAXN];
    static sw_status sts[MAXN];
    for (size_t i = 0; i < w.n; i++)
        dst[i] = malloc(stripe);
    CHECK_STATUS(sw_store_read(s, w.n, w.keys, dst, stripe, lens, rg, sts), SW_OK);
    size_t exact = 0;
    for (size_t i = 0; i < w.n; i++)
        exact += sts[i] == SW_OK && lens[i] == w.lens[i] && rg[i] == gens[i] &&
                 ts_check(dst[i], lens[i], &w.keys[i], w.tags[i]);
    CHECK(exact == w.n);
    sw_store_stats st = ts_stats(s);
    CHECK(st.writes == w.n && st.extents_used == w.n);
    /* (6) reopen: everything there, nothing recovered or unprovable */
    CHECK_STATUS(sw_store_close(s), SW_OK);
    s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (s) {
        for (size_t i = 0; i < w.n; i++)
            memset(dst[i], 0, stripe);
        CHECK_STATUS(sw_store_read(s, w.n, w.keys, dst, stripe, lens, rg, sts), SW_OK);
        size_t again = 0;
        for (size_t i = 0; i < w.n; i++)
            again += sts[i] == SW_OK && lens[i] == w.lens[i] && rg[i] == gens[i] &&
                     ts_check(dst[i], lens[i], &w.keys[i], w.tags[i]);
        CHECK(again == w.n);
        st = ts_stats(s);
        CHECK(st.keys_unprovable == 0 && st.journal_recovered == 0 && st.journal_damaged == 0 &&
              st.journal_records == w.n + 1);
        sw_store_verify_result vr;
        memset(&vr, 0, sizeof vr);
        vr.struct_size = sizeof vr;
        CHECK_STATUS(sw_store_verify(s, NULL, NULL, &vr), SW_OK);
        CHECK(vr.extents_ok == w.n);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("random: %zu stripes of 0..%u bytes in one batch, read back exact, after a reopen "
           "too\n", w.n, stripe);
    for (size_t i = 0; i < w.n; i++)
        free(dst[i]);
    wl_free(&w);
}

/* ---------------------------------------------------- (2) duplicates -- */
static void test_duplicates(const char *dir)
{
    const uint32_t stripe = 8192, run = 16;
    sw_store_config c = cfg(dir, stripe, run, 8, 64, 0);
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    static wl w;
    sw_store_key A = ts_key(3, 1, 2, 0, 1);
    for (uint32_t i = 0; i < 12; i++) {
        sw_store_key k = (i == 2 || i == 5 || i == 9) ? A : ts_key(3, 0, i, 0, 0);
        wl_add(&w, &k, 100 + i, stripe);
    }
    uint64_t gens[12];
    size_t done = 0;
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, gens, &done), SW_OK);
    CHECK(done == w.n && gens[2] < gens[5] && gens[5] < gens[9]);
    uint8_t buf[8192];
    size_t len = 0;
    uint64_t gen = 0;
    CHECK_STATUS(ts_read1(s, &A, buf, sizeof buf, &len, &gen), SW_OK);
    CHECK(gen == gens[9] && len == w.lens[9] && ts_check(buf, len, &A, 109));
    sw_store_stats st = ts_stats(s);
    CHECK(st.extents_used == 10 && st.writes == 12);
    static entries e;
    e.n = 0;
    CHECK_STATUS(sw_store_iterate(s, collect, &e), SW_OK);
    int seen = 0;
    for (size_t i = 0; i < e.n; i++)
        if (sw_store_key_eq(&e.e[i].key, &A)) {
            seen++;
            CHECK(e.e[i].generation == gens[9]);
        }
    CHECK(seen == 1);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    /* In the data file the earlier versions' headers are voids (or gone:
     * their slots freed and taken by a later write of the batch). */
    for (int v = 0; v < 2; v++) {
        long long pay = 0;
        long long off = ts_find_extent(dir, &A, gens[v ? 5 : 2], stripe, run, &pay);
        if (off < 0)
            continue;
        char path[400];
        snprintf(path, sizeof path, "%s/data", dir);
        int fd = open(path, O_RDONLY);
        uint8_t h[64];
        CHECK(fd >= 0 && pread(fd, h, 64, off) == 64);
        if (fd >= 0)
            close(fd);
        sw_store_extent_hdr eh;
        CHECK(sw_store_decode_extent_hdr(h, 64, &eh) == SW_OK && eh.state == SW_STORE_EXTENT_VOID);
    }
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (s) {
        CHECK_STATUS(ts_read1(s, &A, buf, sizeof buf, &len, &gen), SW_OK);
        CHECK(gen == gens[9] && ts_check(buf, len, &A, 109));
        CHECK(ts_stats(s).keys_unprovable == 0);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("duplicates: a key at 2, 5, 9 of a batch reads the 9th, the others voided\n");
    wl_free(&w);
}

/* --------------------------------------------- (3), (5) equivalence -- */
typedef struct eqcase {
    const char *name;
    uint32_t stripe, run, nruns, qd, host;
    sw_store_full_policy policy;
    size_t keys;       /* distinct keys of the workload */
    size_t batches, per;
    int reads;         /* reads between batches (LRU and host ref bits) */
} eqcase;

/* The same batches written with sw_store_write_batch into one store and
 * one by one into another (fresh keys, overwrites, duplicates, reads in
 * between): the stores must agree on everything. */
static void test_equivalence(const char *base, const eqcase *q, sw_rng *r)
{
    char da[400], db[400];
    snprintf(da, sizeof da, "%s/eq_batch", base);
    snprintf(db, sizeof db, "%s/eq_single", base);
    sw_store_config ca = cfg(da, q->stripe, q->run, q->nruns, q->qd, q->host);
    sw_store_config cb = cfg(db, q->stripe, q->run, q->nruns, q->qd, q->host);
    ca.full_policy = cb.full_policy = q->policy;
    sw_store *a = NULL, *b = NULL;
    CHECK_STATUS(ts_open(&ca, &a), SW_OK);
    CHECK_STATUS(ts_open(&cb, &b), SW_OK);
    if (!a || !b)
        return;
    static wl all, w;
    for (size_t k = 0; k < q->keys; k++) {
        sw_store_key key = ts_key(11, (uint32_t)(k % 4), (uint32_t)(k / 8), (uint16_t)(k % 2),
                                  (uint8_t)((k / 4) & 1));
        wl_add(&all, &key, 0, q->stripe);
    }
    size_t fulls = 0, refused_at = 0;
    for (size_t bi = 0; bi < q->batches; bi++) {
        /* mostly the next keys of a sweep, some random ones (overwrites,
         * duplicates inside the batch) */
        for (size_t i = 0; i < q->per; i++) {
            size_t k = sw_rng_next(r) % 4 ? (bi * q->per + i) % q->keys
                                          : (size_t)(sw_rng_next(r) % q->keys);
            wl_add(&w, &all.keys[k], (bi << 16) | i, q->stripe);
        }
        static uint64_t ga[MAXN], gb[MAXN];
        size_t na = 0, nb = 0;
        sw_status sa = sw_store_write_batch(a, w.n, w.keys, w.src, w.lens, ga, &na);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sw_last_error());
        sw_status sb = write_seq(b, w.n, w.keys, w.src, w.lens, gb, &nb);
        if (sa != sb || na != nb)
            fprintf(stderr, "%s batch %zu: batch %s n_done %zu, single %s at %zu (%s)\n", q->name,
                    bi, sw_status_str(sa), na, sw_status_str(sb), nb, msg);
        CHECK(sa == sb && na == nb);
        for (size_t i = 0; i < na && i < nb; i++)
            CHECK(ga[i] == gb[i]);
        if (sa == SW_STATUS_FULL) {
            if (!fulls++)
                refused_at = na;
            char want[64];
            snprintf(want, sizeof want, "write %zu:", na);
            CHECK(strstr(msg, want) != NULL);
        }
        wl_free(&w);
        for (int k = 0; k < q->reads; k++) {
            const sw_store_key *key = &all.keys[sw_rng_next(r) % q->keys];
            uint8_t buf[65536];
            sw_status x = ts_read1(a, key, buf, sizeof buf, NULL, NULL);
            sw_status y = ts_read1(b, key, buf, sizeof buf, NULL, NULL);
            CHECK(x == y);
        }
        char what[200];
        snprintf(what, sizeof what, "%s, after batch %zu", q->name, bi);
        same_stores(a, b, &all, q->stripe, what);
        if (sw_test_failures)
            break;
    }
    sw_store_stats st = ts_stats(a);
    printf("%s: %zu batches of %zu (%zu keys, %llu extents, queue depth %u, host tier %u): "
           "%llu writes, %llu evictions, %llu host evictions, %zu refused (the first at write %zu); "
           "= single writes\n", q->name, q->batches, q->per, q->keys,
           (unsigned long long)st.extents_total, q->qd, q->host, (unsigned long long)st.writes,
           (unsigned long long)st.evictions, (unsigned long long)st.host_evictions, fulls,
           refused_at);
    if (q->policy == SW_STORE_FULL_EVICT_LRU && q->keys > st.extents_total)
        CHECK(st.evictions > 0);
    if (q->policy == SW_STORE_FULL_REFUSE)
        CHECK(fulls > 0);
    CHECK_STATUS(sw_store_close(a), SW_OK);
    CHECK_STATUS(sw_store_close(b), SW_OK);
    wl_free(&all);
    ts_rm_rf(da);
    ts_rm_rf(db);
}

/* ------------------------------------------------- (4) bad arguments -- */
static void test_bad_args(const char *dir)
{
    const uint32_t stripe = 4096;
    sw_store_config c = cfg(dir, stripe, 16, 4, 8, 0);
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    static wl w;
    for (uint32_t i = 0; i < 12; i++) {
        sw_store_key k = ts_key(9, 0, i, 0, 0);
        wl_add(&w, &k, i + 1, stripe);
    }
    size_t done = 99;
    size_t keep = w.lens[7];
    w.lens[7] = stripe + 1;
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK(done == 0 && strstr(sw_last_error(), "bytes[7]") != NULL);
    w.lens[7] = keep;
    w.keys[3].kind = 2;
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK(done == 0 && strstr(sw_last_error(), "keys[3]") != NULL);
    w.keys[3].kind = 0;
    w.keys[4].reserved = 1;
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, NULL, &done),
                 SW_STATUS_INVALID);
    w.keys[4].reserved = 0;
    const void *ks = w.src[10];
    w.src[10] = NULL;
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "src[10]") != NULL);
    w.src[10] = ks;
    CHECK_STATUS(sw_store_write_batch(s, w.n, NULL, w.src, w.lens, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, NULL, w.lens, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, NULL, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_write_batch(NULL, w.n, w.keys, w.src, w.lens, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_write_batch(s, 0, NULL, NULL, NULL, NULL, &done), SW_OK);
    CHECK(done == 0);
    uint8_t rb[4096];
    for (size_t i = 0; i < w.n; i++)
        CHECK(ts_read1(s, &w.keys[i], rb, sizeof rb, NULL, NULL) == SW_STATUS_NOT_FOUND);
    sw_store_stats st = ts_stats(s);
    CHECK(st.writes == 0 && st.extents_used == 0 && st.journal_records == 1);
    CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, NULL, NULL), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    /* read-only handle */
    c.read_only = 1;
    c.create = 0;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (s) {
        CHECK_STATUS(sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, NULL, &done),
                     SW_STATUS_INVALID);
        CHECK(done == 0);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("bad arguments: bytes[7] > stripe_bytes, bad keys, NULL src/keys/bytes/store, "
           "read-only: INVALID, nothing written\n");
    wl_free(&w);
}

/* --------------------------------------- a write error mid-batch -- */
/* Groups of 16 puts (tuning write_group_puts); RLIMIT_FSIZE below the
 * second run's slots: the first group (run 0) is written, the second's
 * payload write fails with EFBIG; its headers are undone, nothing of it is
 * visible, the handle stays usable. */
static sw_status open_groups16(const sw_store_config *c, sw_store **s)
{
    sw_store_tuning t = *ts_tuning();
    t.write_group_puts = 16;
    return sw_store_open_tuned(c, &t, s);
}

static void test_io_error(const char *dir)
{
    const uint32_t stripe = 4096, run = 16;
    sw_store_config c = cfg(dir, stripe, run, 4, 16, 0);
    sw_store *s = NULL;
    CHECK_STATUS(open_groups16(&c, &s), SW_OK);
    if (!s)
        return;
    static wl w;
    for (uint32_t i = 0; i < 32; i++) {
        sw_store_key k = ts_key(4, 0, i, 0, 0);
        wl_add(&w, &k, i + 7, stripe);
    }
    sw_store_geometry g;
    sw_store_geometry_make(stripe, run, UINT64_MAX, &g);
    uint64_t rb = sw_store_run_bytes(&g);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = rb + g.run_header_bytes + 8 * g.slot_bytes; /* inside run 1's slots */
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    size_t done = 0;
    uint64_t gens[32];
    sw_status st = sw_store_write_batch(s, w.n, w.keys, w.src, w.lens, gens, &done);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", sw_last_error());
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(st == SW_STATUS_IO && done == 16);
    CHECK(strstr(msg, "write 16:") != NULL);
    uint8_t buf[4096];
    for (size_t i = 0; i < w.n; i++) {
        size_t len = 0;
        sw_status rs = ts_read1(s, &w.keys[i], buf, sizeof buf, &len, NULL);
        if (i < 16)
            CHECK(rs == SW_OK && ts_check(buf, len, &w.keys[i], w.tags[i]));
        else
            CHECK(rs == SW_STATUS_NOT_FOUND);
    }
    sw_store_stats ss = ts_stats(s);
    CHECK(!ss.failed && ss.writes == 16 && ss.extents_used == 16 && ss.io_errors >= 1);
    /* the handle goes on: the rest written now */
    CHECK_STATUS(sw_store_write_batch(s, 16, w.keys + 16, w.src + 16, w.lens + 16, NULL, &done),
                 SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (s) {
        for (size_t i = 0; i < w.n; i++) {
            size_t len = 0;
            CHECK(ts_read1(s, &w.keys[i], buf, sizeof buf, &len, NULL) == SW_OK &&
                  ts_check(buf, len, &w.keys[i], w.tags[i]));
        }
        sw_store_stats s2 = ts_stats(s);
        CHECK(s2.keys_unprovable == 0 && s2.journal_recovered == 0 && s2.extents_discarded == 0);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("write error mid-batch: %s; n_done %zu, the failed group undone, reopen clean\n",
           sw_status_str(st), (size_t)16);
    wl_free(&w);
}

/* ------------------------------------------ (7) kills at file level -- */
static void journal_cut(const char *dir, int records)
{
    char path[400];
    snprintf(path, sizeof path, "%s/journal", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK(truncate(path, st.st_size - 64 * records) == 0);
}

static void journal_zero_record(const char *dir, int from_end)
{
    char path[400];
    snprintf(path, sizeof path, "%s/journal", dir);
    int fd = open(path, O_RDWR);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0);
    uint8_t z[64] = {0};
    CHECK(pwrite(fd, z, 64, st.st_size - 64 * from_end) == 64);
    close(fd);
}

static void file_pwrite(const char *dir, const void *p, size_t len, long long off)
{
    char path[400];
    snprintf(path, sizeof path, "%s/data", dir);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pwrite(fd, p, len, off) == (ssize_t)len);
    if (fd >= 0)
        close(fd);
}

enum { SIM_NO_RECORDS, SIM_SOME_RECORDS, SIM_TORN, SIM_HOLE, SIM_VOIDS };

/* Batch A (10 keys) and B (12 keys, one group) written; then the files
 * made what a writer killed during B leaves. Each key must read A's
 * version or B's, whole; read-only verify passes as one killed writer's
 * (except a lost record in the middle: damage); a read-write open leaves
 * nothing unprovable. */
static void simulated(const char *dir, int how)
{
    static const char *names[] = {"B's records all lost", "7 of B's 12 records lost",
                                  "B's records lost, one extent torn",
                                  "a record in the middle of B's lost",
                                  "B (overwrites) recorded, its voids lost"};
    const uint32_t stripe = 4096, run = 16;
    sw_store_config c = cfg(dir, stripe, run, 16, 16, 0);
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    static wl a, b;
    /* A: one key in each of 10 runs (their overwrites, one group, stay in
     * their runs); B: 12 blocks of one stream, or A's keys again and two
     * more */
    for (uint32_t i = 0; i < 10; i++) {
        sw_store_key k = ts_key(6, i, 0, 0, 0);
        wl_add(&a, &k, 1000 + i, stripe);
    }
    for (uint32_t i = 0; i < 12; i++) {
        sw_store_key k = how == SIM_VOIDS && i < 10 ? a.keys[i] : ts_key(6, 1000, i, 0, 0);
        wl_add(&b, &k, 2000 + i, stripe);
    }
    uint64_t ga[10], gb[12];
    CHECK_STATUS(sw_store_write_batch(s, a.n, a.keys, a.src, a.lens, ga, NULL), SW_OK);
    /* the live headers of A, for SIM_VOIDS */
    uint8_t live[10][64];
    long long hoff[10];
    CHECK_STATUS(sw_store_close(s), SW_OK);
    for (int i = 0; i < 10; i++) {
        long long pay = 0;
        hoff[i] = ts_find_extent(dir, &a.keys[i], ga[i], stripe, run, &pay);
        char path[400];
        snprintf(path, sizeof path, "%s/data", dir);
        int fd = open(path, O_RDONLY);
        CHECK(hoff[i] >= 0 && fd >= 0 && pread(fd, live[i], 64, hoff[i]) == 64);
        if (fd >= 0)
            close(fd);
    }
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    CHECK_STATUS(sw_store_write_batch(s, b.n, b.keys, b.src, b.lens, gb, NULL), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    int torn = -1;
    switch (how) {
    case SIM_NO_RECORDS: journal_cut(dir, 12); break;
    case SIM_SOME_RECORDS: journal_cut(dir, 7); break;
    case SIM_TORN: {
        journal_cut(dir, 12);
        torn = 4;
        long long pay = 0;
        CHECK(ts_find_extent(dir, &b.keys[torn], gb[torn], stripe, run, &pay) >= 0);
        uint8_t z[4096] = {0};
        file_pwrite(dir, z, sizeof z, pay);
        break;
    }
    case SIM_HOLE: journal_zero_record(dir, 9); break;
    case SIM_VOIDS:
        for (int i = 0; i < 10; i++)
            file_pwrite(dir, live[i], 64, hoff[i]);
        break;
    }
    for (int ro = 1; ro >= 0; ro--) {
        c.read_only = ro;
        c.create = !ro;
        CHECK_STATUS(ts_open(&c, &s), SW_OK);
        if (!s)
            return;
        uint8_t buf[4096];
        int newer = 0;
        for (uint32_t i = 0; i < 12; i++) {
            size_t len = 0;
            uint64_t gen = 0;
            sw_status rs = ts_read1(s, &b.keys[i], buf, sizeof buf, &len, &gen);
            int vb = rs == SW_OK && gen == gb[i] && ts_check(buf, len, &b.keys[i], b.tags[i]);
            int old_ok;
            if (how == SIM_VOIDS && i < 10)
                old_ok = rs == SW_OK && gen == ga[i] && ts_check(buf, len, &a.keys[i], a.tags[i]);
            else
                old_ok = rs == SW_STATUS_NOT_FOUND;
            if (!vb && !old_ok)
                fprintf(stderr, "simulated (%s, %s): B key %u reads %s gen %llu\n", names[how],
                        ro ? "read-only" : "read-write", i, sw_status_str(rs),
                        (unsigned long long)gen);
            CHECK(vb || old_ok);
            newer += vb;
            /* only the torn extent is not taken from the data file */
            CHECK(vb == ((int)i != torn));
        }
        for (uint32_t i = 0; i < 10 && how != SIM_VOIDS; i++) {
            size_t len = 0;
            CHECK(ts_read1(s, &a.keys[i], buf, sizeof buf, &len, NULL) == SW_OK &&
                  ts_check(buf, len, &a.keys[i], a.tags[i]));
        }
        sw_store_stats st = ts_stats(s);
        CHECK(st.keys_unprovable == 0);
        if (ro) {
            sw_store_verify_result vr;
            memset(&vr, 0, sizeof vr);
            vr.struct_size = sizeof vr;
            sw_status vs = sw_store_verify(s, NULL, NULL, &vr);
            if (how == SIM_HOLE) {
                CHECK(vs == SW_STATUS_CORRUPT && vr.journal_dropped == 1); /* damage */
            } else {
                if (vs != SW_OK || vr.in_flight != 1)
                    fprintf(stderr, "simulated (%s): verify %s, in_flight %llu, missing %llu, "
                            "torn %llu, voids %llu\n", names[how], sw_status_str(vs),
                            (unsigned long long)vr.in_flight,
                            (unsigned long long)vr.journal_missing,
                            (unsigned long long)vr.extents_torn,
                            (unsigned long long)vr.voids_pending);
                CHECK(vs == SW_OK && vr.in_flight == 1);
                uint64_t want_missing = how == SIM_SOME_RECORDS ? 7 : how == SIM_TORN ? 11
                                      : how == SIM_VOIDS ? 0 : 12;
                CHECK(vr.journal_missing == want_missing);
                CHECK(vr.extents_torn == (how == SIM_TORN));
                CHECK(vr.voids_pending == (how == SIM_VOIDS ? 10u : 0u));
            }
        } else {
            CHECK(st.extents_discarded == (how == SIM_TORN));
        }
        CHECK_STATUS(sw_store_close(s), SW_OK);
        (void)newer;
    }
    /* after the read-write open: a clean store */
    c.read_only = 1;
    c.create = 0;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (s) {
        sw_store_verify_result vr;
        memset(&vr, 0, sizeof vr);
        vr.struct_size = sizeof vr;
        sw_status vs = sw_store_verify(s, NULL, NULL, &vr);
        if (how == SIM_HOLE)
            CHECK(vs == SW_STATUS_CORRUPT); /* the lost record stays until a repair */
        else
            CHECK(vs == SW_OK && vr.in_flight == 0 && vr.journal_missing == 0);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("simulated kill, %s: every key old or new, whole, nothing unprovable\n", names[how]);
    wl_free(&a);
    wl_free(&b);
    ts_rm_rf(dir);
}

/* ------------------------------------------------ (7) SIGKILL rounds -- */
enum { M_OPENED = 1, M_BEGIN, M_ITEM, M_DONE_ITEM, M_END, M_FAIL };
#define NK 96
typedef struct kver {
    int present;
    uint64_t tag, gen;
} kver;

static sw_store_config crash_cfg(const char *dir, int round, int evict)
{
    /* evict: 96 keys of up to 16 KiB in 64 extents, most batches evict */
    sw_store_config c = ts_config(dir, 16384, 16, evict ? 4 : 12);
    c.durability = round % 3 == 2 ? SW_STORE_DURABILITY_SYNC : SW_STORE_DURABILITY_PROCESS;
    c.host_tier_bytes = 16 * 16384;
    c.queue_depth = 16;
    return c;
}

typedef struct crash_ctx {
    const char *dir;
    int round, evict;
    uint64_t seed;
} crash_ctx;

static void crash_child(int fd, void *ctx)
{
    const crash_ctx *x = ctx;
    const char *dir = x->dir;
    const int round = x->round, evict = x->evict;
    const uint64_t seed = x->seed;
    sw_store_config c = crash_cfg(dir, round, evict);
    sw_store *s = ts_child_open(fd, &c, M_OPENED, M_FAIL);
    sw_rng r = {seed};
    static sw_store_key keys[40];
    static const void *src[40];
    static size_t lens[40];
    static uint64_t tags[40], gens[40];
    static int ki[40];
    static uint8_t bufs[40][16384];
    for (uint64_t op = 1;; op++) {
        size_t n = 1 + (size_t)(sw_rng_next(&r) % 40);
        ts_send(fd, M_BEGIN, 0, 0, 0);
        for (size_t i = 0; i < n; i++) {
            ki[i] = (int)(sw_rng_next(&r) % NK);
            keys[i] = ts_crash_key(ki[i]);
            tags[i] = ((uint64_t)round << 40) | (op << 8) | i;
            lens[i] = ts_len(&keys[i], tags[i], 16384);
            ts_fill(bufs[i], lens[i], &keys[i], tags[i]);
            src[i] = bufs[i];
            ts_send(fd, M_ITEM, (uint32_t)ki[i], tags[i], 0);
        }
        size_t done = 0;
        if (sw_store_write_batch(s, n, keys, src, lens, gens, &done) != SW_OK) {
            fprintf(stderr, "child: batch: %s\n", sw_last_error());
            ts_send(fd, M_FAIL, 0, 0, 0);
            _exit(5);
        }
        for (size_t i = 0; i < n; i++)
            ts_send(fd, M_DONE_ITEM, (uint32_t)ki[i], tags[i], gens[i]);
        ts_send(fd, M_END, 0, 0, 0);
    }
}

/* One key after the kill: its acknowledged version, or (in flight) one of
 * the versions the killed batch gave it, whole; with eviction also absent. */
static int crash_key_ok(int k, const kver *e, const ts_msg *fl, size_t nfl, sw_status st,
                        const uint8_t *buf, size_t len, uint64_t gen, uint64_t last_gen, int evict)
{
    sw_store_key key = ts_crash_key(k);
    if (st == SW_STATUS_NOT_FOUND)
        return !e->present || evict;
    if (st != SW_OK)
        return 0;
    if (e->present && gen == e->gen && len == ts_len(&key, e->tag, 16384) &&
        ts_check(buf, len, &key, e->tag))
        return 1;
    for (size_t i = 0; i < nfl; i++)
        if ((int)fl[i].key == k && gen > last_gen && len == ts_len(&key, fl[i].tag, 16384) &&
            ts_check(buf, len, &key, fl[i].tag))
            return 1;
    return 0;
}

static void test_kills(const char *dir, int rounds, int evict, uint64_t seed)
{
    static kver model[NK];
    memset(model, 0, sizeof model);
    static ts_msg fl[40];
    uint64_t last_gen = 0, acked = 0, inflight_seen = 0, recovered = 0, discarded = 0;
    uint8_t *buf = malloc(16384);
    sw_rng r = {seed};
    for (int round = 0; round < rounds && !sw_test_failures; round++) {
        crash_ctx cx = {dir, round, evict, seed ^ (uint64_t)(round + 1) * 0x9e3779b97f4a7c15ull};
        pid_t pid = 0;
        const int rfd = ts_fork_and_kill(crash_child, &cx, M_OPENED, M_FAIL, &r, &pid);
        if (rfd < 0) {
            CHECK(!"a pipe and a writer process for the kill");
            return;
        }
        ts_msg m;
        ssize_t got;
        size_t nfl = 0, ndone = 0;
        static ts_msg done[40];
        int inflight = 0;
        while ((got = read(rfd, &m, sizeof m)) == (ssize_t)sizeof m) {
            switch (m.type) {
            case M_BEGIN: nfl = ndone = 0; inflight = 1; break;
            case M_ITEM: fl[nfl++] = m; break;
            case M_DONE_ITEM: done[ndone++] = m; break;
            case M_END:
                for (size_t i = 0; i < ndone; i++) {
                    CHECK(done[i].gen > last_gen);
                    last_gen = done[i].gen;
                    model[done[i].key] = (kver){1, done[i].tag, done[i].gen};
                }
                acked += ndone;
                nfl = ndone = 0;
                inflight = 0;
                break;
            case M_FAIL: CHECK(!"child reported a failure"); break;
            }
        }
        close(rfd);
        int wst = 0;
        waitpid(pid, &wst, 0);
        CHECK(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL);
        inflight_seen += inflight;
        /* read-only first: a killed writer is not damage */
        sw_store_config c = crash_cfg(dir, round, evict);
        c.read_only = 1;
        c.create = 0;
        sw_store *s = NULL;
        CHECK_STATUS(ts_open(&c, &s), SW_OK);
        if (!s)
            break;
        sw_store_verify_result vr;
        memset(&vr, 0, sizeof vr);
        vr.struct_size = sizeof vr;
        sw_status vs = sw_store_verify(s, NULL, NULL, &vr);
        if (vs != SW_OK)
            fprintf(stderr, "round %d: verify %s (%s)\n", round, sw_status_str(vs), sw_last_error());
        CHECK(vs == SW_OK);
        CHECK_STATUS(sw_store_close(s), SW_OK);
        c = crash_cfg(dir, round, evict);
        CHECK_STATUS(ts_open(&c, &s), SW_OK);
        if (!s)
            break;
        for (int k = 0; k < NK; k++) {
            sw_store_key key = ts_crash_key(k);
            size_t len = 0;
            uint64_t gen = 0;
            memset(buf, 0, 16384);
            sw_status st = ts_read1(s, &key, buf, 16384, &len, &gen);
            int ok = crash_key_ok(k, &model[k], fl, inflight ? nfl : 0, st, buf, len, gen,
                                  last_gen, evict);
            if (!ok)
                fprintf(stderr, "round %d key %d: %s len %zu gen %llu (acked gen %llu%s)\n", round,
                        k, sw_status_str(st), len, (unsigned long long)gen,
                        (unsigned long long)model[k].gen, model[k].present ? "" : ", absent");
            CHECK(ok);
            /* the model follows what the store now holds */
            if (st == SW_OK && gen > last_gen) {
                for (size_t i = 0; i < nfl; i++)
                    if ((int)fl[i].key == k && ts_check(buf, len, &key, fl[i].tag))
                        model[k] = (kver){1, fl[i].tag, gen};
            } else if (st == SW_STATUS_NOT_FOUND) {
                model[k].present = 0;
            }
        }
        for (int k = 0; k < NK; k++)
            if (model[k].present && model[k].gen > last_gen)
                last_gen = model[k].gen;
        sw_store_stats st = ts_stats(s);
        CHECK(st.corruptions == 0 && st.io_errors == 0);
        CHECK(st.keys_unprovable == 0 && st.journal_damaged == 0 && st.headers_bad == 0);
        recovered += st.journal_recovered;
        discarded += st.extents_discarded;
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("SIGKILL of a batch writer%s: %d rounds, %llu acknowledged writes, %llu kills inside "
           "a batch, %llu puts taken from the data file at open, %llu torn dropped; every key "
           "old or new, whole; verify passes\n", evict ? " at capacity (LRU eviction)" : "",
           rounds, (unsigned long long)acked, (unsigned long long)inflight_seen,
           (unsigned long long)recovered, (unsigned long long)discarded);
    CHECK(acked > 50);
    free(buf);
    ts_rm_rf(dir);
}

int main(int argc, char **argv)
{
    /* [ROUNDS] of each kill test (default 12), [--tune NAME=VALUE,...] */
    int rounds = 12;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tune") == 0 && i + 1 < argc) {
            if (sw_store_tuning_parse(ts_tuning(), argv[++i]) != SW_OK) {
                fprintf(stderr, "--tune %s: %s\n", argv[i], sw_last_error());
                return 2;
            }
        } else {
            rounds = atoi(argv[i]);
        }
    }
    uint64_t seed = ts_seed(0xba7c4);
    sw_rng r = {seed};
    ts_dir d;
    ts_dir_make(&d, "batch");
    printf("seed 0x%llx, dir %s\n", (unsigned long long)seed, d.base);
    char dir[400];
    snprintf(dir, sizeof dir, "%s/random", d.base);
    test_random(dir, &r);
    snprintf(dir, sizeof dir, "%s/dup", d.base);
    test_duplicates(dir);
    static const eqcase cases[] = {
        /* fresh keys, overwrites and duplicates; room for all */
        {"equivalence", 8192, 64, 8, 64, 0, SW_STORE_FULL_EVICT_LRU, 300, 6, 120, 20},
        /* small groups, a host tier that evicts */
        {"equivalence, queue depth 4, host tier", 4096, 16, 8, 4, 24, SW_STORE_FULL_EVICT_LRU,
         100, 8, 50, 30},
        /* (5) more keys than extents: LRU eviction inside the groups */
        {"capacity, LRU eviction", 4096, 16, 4, 16, 16, SW_STORE_FULL_EVICT_LRU, 150, 8, 60, 20},
        {"capacity, LRU eviction, one batch > capacity", 4096, 16, 4, 64, 0,
         SW_STORE_FULL_EVICT_LRU, 200, 2, 150, 0},
        /* every extent with its host-tier copy: a group's evictions drop
         * host entries, freed as the group publishes (it read a NULL
         * array there once: SIGSEGV) */
        {"capacity, LRU eviction, host tier of every extent", 4096, 16, 4, 16, 64,
         SW_STORE_FULL_EVICT_LRU, 150, 8, 60, 20},
        /* (5) refusal: the batch stops where the single writes would */
        {"capacity, refuse", 4096, 16, 4, 16, 8, SW_STORE_FULL_REFUSE, 150, 4, 60, 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !sw_test_failures; i++)
        test_equivalence(d.base, &cases[i], &r);
    snprintf(dir, sizeof dir, "%s/bad", d.base);
    test_bad_args(dir);
    snprintf(dir, sizeof dir, "%s/ioerr", d.base);
    test_io_error(dir);
    for (int how = SIM_NO_RECORDS; how <= SIM_VOIDS; how++) {
        snprintf(dir, sizeof dir, "%s/sim%d", d.base, how);
        simulated(dir, how);
    }
    snprintf(dir, sizeof dir, "%s/kill", d.base);
    test_kills(dir, rounds, 0, seed);
    snprintf(dir, sizeof dir, "%s/killevict", d.base);
    test_kills(dir, rounds, 1, seed ^ 0x5555);
    ts_rm_rf(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_batch: %d failures (seed 0x%llx)\n", sw_test_failures,
                (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
