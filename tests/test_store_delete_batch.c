/* Batched deletes (sw_store_delete_batch): the same store as n single
 * deletes -- which keys were deleted, what every key reads, the stats,
 * after a reopen too, verify clean -- over keys that exist, keys that never
 * did and keys given twice, in the default groups and in groups of 4; bad
 * arguments (nothing deleted, the index named) and a read-only handle; a
 * journal write that fails in the second group (RLIMIT_FSIZE: the first
 * group's deletes stand, nothing after it, the handle goes on); fork +
 * SIGKILL of a writer alternating delete batches and write batches: after
 * every kill each key reads its acknowledged version or, when the killed
 * batch held it, the version that batch gave it (absent for a delete),
 * whole; a read-only verify counts the kill as one writer's in-flight
 * operation. Seeded (SW_TEST_SEED). */
#include "test_store_util.h"

#include "store/store_internal.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

enum { STRIPE = 4096, RUN = 16 };

static sw_status open_groups(const sw_store_config *c, int64_t group, sw_store **s)
{
    sw_store_tuning t = *ts_tuning();
    if (group > 0)
        t.write_group_puts = group;
    return sw_store_open_tuned(c, &t, s);
}

static sw_store_key key_of(int i) { return ts_key(9, (uint32_t)(i % 4), (uint32_t)(i / 4), 2, 0); }

static void put(sw_store *s, int i, uint64_t tag)
{
    static uint8_t buf[STRIPE];
    const sw_store_key k = key_of(i);
    const size_t len = ts_len(&k, tag, STRIPE);
    ts_fill(buf, len, &k, tag);
    CHECK_STATUS(sw_store_write(s, &k, buf, len, NULL), SW_OK);
}

/* Key i reads as present with tag's contents (whole), or as absent; *st
 * its read status. */
static int reads_as(sw_store *s, int i, int present, uint64_t tag, sw_status *st)
{
    static uint8_t buf[STRIPE];
    const sw_store_key k = key_of(i);
    size_t len = 0;
    *st = ts_read1(s, &k, buf, sizeof buf, &len, NULL);
    return present ? *st == SW_OK && len == ts_len(&k, tag, STRIPE) && ts_check(buf, len, &k, tag)
                   : *st == SW_STATUS_NOT_FOUND;
}

/* Every key of 0..nk-1: present with its tag's contents, or absent. */
static void expect(sw_store *s, int nk, const int *present, const uint64_t *tags, const char *what)
{
    int bad = 0;
    for (int i = 0; i < nk; i++) {
        sw_status st = SW_OK;
        const int ok = reads_as(s, i, present[i], tags[i], &st);
        if (!ok && bad++ < 3)
            fprintf(stderr, "%s: key %d %s, read %s\n", what, i, present[i] ? "present" : "absent",
                    sw_status_str(st));
        CHECK(ok);
    }
}

static void verify_ok(sw_store *s)
{
    sw_store_verify_result vr;
    memset(&vr, 0, sizeof vr);
    vr.struct_size = sizeof vr;
    const sw_status vs = sw_store_verify(s, NULL, NULL, &vr);
    if (vs != SW_OK)
        fprintf(stderr, "verify: %s (%s)\n", sw_status_str(vs), sw_last_error());
    CHECK(vs == SW_OK);
}

/* --------------------------------------------------- equivalence -- */
enum { NK = 450, NW = 300, ND = 400 };

static void test_equivalence(const char *base, int64_t group, sw_rng *r)
{
    char da[400], db[400];
    snprintf(da, sizeof da, "%s/eq%lld_a", base, (long long)group);
    snprintf(db, sizeof db, "%s/eq%lld_b", base, (long long)group);
    sw_store_config ca = ts_config(da, STRIPE, RUN, 32), cb = ts_config(db, STRIPE, RUN, 32);
    sw_store *a = NULL, *b = NULL;
    CHECK_STATUS(open_groups(&ca, group, &a), SW_OK);
    CHECK_STATUS(open_groups(&cb, group, &b), SW_OK);
    if (!a || !b)
        return;
    static int present[NK];
    static uint64_t tags[NK];
    memset(present, 0, sizeof present);
    /* keys 0..NW-1 written (some twice: overwrites leave voids behind),
     * the rest never */
    for (int i = 0; i < NW; i++) {
        tags[i] = 100 + (uint64_t)i;
        put(a, i, tags[i]);
        put(b, i, tags[i]);
        present[i] = 1;
        if (sw_rng_int(r, 0, 4) == 0) {
            tags[i] += 1000;
            put(a, i, tags[i]);
            put(b, i, tags[i]);
        }
    }
    /* ND deletes: written keys, never-written ones, repeats */
    static sw_store_key dk[ND];
    static int di[ND];
    for (int j = 0; j < ND; j++) {
        di[j] = j > 0 && sw_rng_int(r, 0, 9) == 0 ? di[sw_rng_int(r, 0, j - 1)]
                                                   : sw_rng_int(r, 0, NK - 1);
        dk[j] = key_of(di[j]);
    }
    static uint8_t deleted[ND];
    size_t done = 0;
    CHECK_STATUS(sw_store_delete_batch(a, ND, dk, deleted, &done), SW_OK);
    CHECK(done == ND);
    int agree = 1, ndel = 0;
    for (int j = 0; j < ND; j++) {
        const sw_status st = sw_store_delete(b, &dk[j]);
        CHECK(st == SW_OK || st == SW_STATUS_NOT_FOUND);
        agree &= (st == SW_OK) == (deleted[j] == 1);
        ndel += deleted[j];
        present[di[j]] = 0;
    }
    CHECK(agree);
    expect(a, NK, present, tags, "batch");
    expect(b, NK, present, tags, "single");
    sw_store_stats sa = ts_stats(a), sb = ts_stats(b);
    CHECK(sa.deletes == sb.deletes && sa.deletes == (uint64_t)ndel);
    CHECK(sa.extents_used == sb.extents_used && sa.payload_bytes == sb.payload_bytes);
    CHECK(!sa.failed);
    /* the rest of the keys, then everything is gone */
    static sw_store_key all[NK];
    for (int i = 0; i < NK; i++)
        all[i] = key_of(i);
    CHECK_STATUS(sw_store_close(a), SW_OK);
    CHECK_STATUS(sw_store_close(b), SW_OK);
    CHECK_STATUS(open_groups(&ca, group, &a), SW_OK);
    if (!a)
        return;
    expect(a, NK, present, tags, "batch, reopened");
    verify_ok(a);
    static uint8_t d2[NK];
    CHECK_STATUS(sw_store_delete_batch(a, NK, all, d2, &done), SW_OK);
    int left = 0;
    for (int i = 0; i < NK; i++) {
        CHECK(d2[i] == present[i]);
        left += present[i];
        present[i] = 0;
    }
    CHECK(ts_stats(a).extents_used == 0);
    CHECK_STATUS(sw_store_close(a), SW_OK);
    CHECK_STATUS(open_groups(&ca, group, &a), SW_OK);
    if (a) {
        expect(a, NK, present, tags, "all deleted, reopened");
        CHECK(ts_stats(a).extents_used == 0);
        verify_ok(a);
        CHECK_STATUS(sw_store_close(a), SW_OK);
    }
    printf("equivalence (groups %s): %d deletes of %d keys (%d deleted, repeats and never-written "
           "keys among them) = single deletes; then the %d left in one batch; reopen, verify "
           "clean\n", group > 0 ? "of 4" : "by default", ND, NK, ndel, left);
}

/* ---------------------------------------------------- bad arguments -- */
static void test_bad_args(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, 8);
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    static int present[8];
    static uint64_t tags[8];
    for (int i = 0; i < 8; i++) {
        tags[i] = 7 + (uint64_t)i;
        put(s, i, tags[i]);
        present[i] = 1;
    }
    sw_store_key k[8];
    for (int i = 0; i < 8; i++)
        k[i] = key_of(i);
    k[5].kind = 9; /* not a kind */
    size_t done = 7;
    CHECK_STATUS(sw_store_delete_batch(s, 8, k, NULL, &done), SW_STATUS_INVALID);
    CHECK(done == 0 && strstr(sw_last_error(), "key 5") != NULL);
    CHECK_STATUS(sw_store_delete_batch(s, 8, NULL, NULL, &done), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_delete_batch(NULL, 8, k, NULL, &done), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_delete_batch(s, 0, NULL, NULL, &done), SW_OK);
    expect(s, 8, present, tags, "after bad arguments");
    CHECK_STATUS(sw_store_close(s), SW_OK);
    c.read_only = 1;
    c.create = 0;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (s) {
        k[5] = key_of(5);
        CHECK_STATUS(sw_store_delete_batch(s, 8, k, NULL, &done), SW_STATUS_INVALID);
        CHECK(strstr(sw_last_error(), "read-only") != NULL);
        expect(s, 8, present, tags, "read-only");
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("bad arguments: a bad key (index named), NULL keys or store, a read-only handle: "
           "INVALID, nothing deleted\n");
}

/* ----------------------------------------- a journal write that fails -- */
/* Groups of 4 deletes over keys of the first run; RLIMIT_FSIZE just past
 * the first group's tombstones (and past the header page the voids write):
 * the second group's journal write fails with EFBIG. */
static void test_journal_error(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, 8);
    sw_store *s = NULL;
    CHECK_STATUS(open_groups(&c, 4, &s), SW_OK);
    if (!s)
        return;
    enum { N = 12 };
    static int present[N + 1];
    static uint64_t tags[N + 1];
    for (int i = 0; i < N; i++) {
        tags[i] = 50 + (uint64_t)i;
        put(s, i, tags[i]);
        present[i] = 1;
    }
    /* the journal grows past the targets' header page: a filler key
     * rewritten (its extents elsewhere) */
    uint64_t page_end = 0;
    for (int i = 0; i < N; i++) {
        const sw_store_key k = key_of(i);
        const uint32_t v = sw_store_index_find(s, &k);
        CHECK(v != SW_NIL);
        const uint64_t e = sw_store_header_page_off(s, v, NULL) + SW_STORE_ALIGN;
        page_end = e > page_end ? e : page_end;
    }
    int fills = 0;
    while (s->journal_end < page_end && fills < 100000) {
        put(s, N, 1000 + (uint64_t)fills);
        fills++;
    }
    tags[N] = 1000 + (uint64_t)fills - 1;
    present[N] = 1;
    sw_store_key k[N];
    for (int i = 0; i < N; i++)
        k[i] = key_of(i);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = s->journal_end + 6 * SW_STORE_REC_BYTES; /* 4 fit, 8 do not */
    CHECK(lim.rlim_cur >= page_end);
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    uint8_t deleted[N];
    size_t done = 0;
    const sw_status st = sw_store_delete_batch(s, N, k, deleted, &done);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", sw_last_error());
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(st == SW_STATUS_IO || st == SW_STATUS_FULL);
    CHECK(done == 4 && strstr(msg, "from key 4") != NULL);
    const size_t done1 = done;
    for (int i = 0; i < N; i++) {
        CHECK(deleted[i] == (i < 4));
        present[i] = i >= 4;
    }
    expect(s, N + 1, present, tags, "after the failed group");
    CHECK(!ts_stats(s).failed);
    /* the handle goes on: the rest deleted now */
    CHECK_STATUS(sw_store_delete_batch(s, N - 4, k + 4, deleted, &done), SW_OK);
    for (int i = 0; i < N; i++)
        present[i] = 0;
    CHECK_STATUS(sw_store_close(s), SW_OK);
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (s) {
        expect(s, N + 1, present, tags, "reopened");
        const sw_store_stats s2 = ts_stats(s);
        CHECK(s2.keys_unprovable == 0 && s2.journal_recovered == 0);
        verify_ok(s);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("journal write error in the second group: %s; n_done %zu, the first group deleted, "
           "nothing after it; the handle goes on; reopen, verify clean\n", sw_status_str(st),
           done1);
}

/* ---------------------------------------------------- SIGKILL rounds -- */
enum { M_OPENED = 1, M_BEGIN, M_ITEM, M_END, M_FAIL };
enum { KK = 64 };

/* The writer: batches alternating deletes and writes, each reported (its
 * kind, then key and tag of each item, then its end). */
typedef struct kill_ctx {
    const char *dir;
    int round;
    uint64_t seed;
} kill_ctx;

static void child(int fd, void *ctx)
{
    const kill_ctx *x = ctx;
    const char *dir = x->dir;
    const int round = x->round;
    const uint64_t seed = x->seed;
    sw_store_config c = ts_config(dir, STRIPE, RUN, 12);
    c.durability = round % 3 == 2 ? SW_STORE_DURABILITY_SYNC : SW_STORE_DURABILITY_PROCESS;
    sw_store_tuning t = *ts_tuning();
    if (round % 2)
        t.write_group_puts = 4; /* several groups a batch */
    sw_store *s = NULL;
    if (sw_store_open_tuned(&c, &t, &s) != SW_OK) {
        ts_send(fd, M_FAIL, 0, 0, 0);
        _exit(3);
    }
    ts_send(fd, M_OPENED, 0, 0, 0);
    sw_rng r = {seed};
    static sw_store_key keys[40];
    static const void *src[40];
    static size_t lens[40];
    static uint8_t bufs[40][STRIPE];
    for (uint64_t op = 1;; op++) {
        const int kind = (int)(op & 1); /* 1: write, 0: delete */
        const size_t n = 1 + (size_t)(sw_rng_next(&r) % 40);
        ts_send(fd, M_BEGIN, (uint32_t)kind, 0, 0);
        for (size_t i = 0; i < n; i++) {
            const int ki = (int)(sw_rng_next(&r) % KK);
            keys[i] = key_of(ki);
            const uint64_t tag = ((uint64_t)round << 40) | (op << 8) | i;
            if (kind) {
                lens[i] = ts_len(&keys[i], tag, STRIPE);
                ts_fill(bufs[i], lens[i], &keys[i], tag);
                src[i] = bufs[i];
            }
            ts_send(fd, M_ITEM, (uint32_t)ki, tag, 0);
        }
        const sw_status st = kind ? sw_store_write_batch(s, n, keys, src, lens, NULL, NULL)
                                  : sw_store_delete_batch(s, n, keys, NULL, NULL);
        if (st != SW_OK) {
            fprintf(stderr, "child: batch: %s\n", sw_last_error());
            ts_send(fd, M_FAIL, 0, 0, 0);
            _exit(5);
        }
        ts_send(fd, M_END, 0, 0, 0);
    }
}

static void test_kills(const char *dir, int rounds, uint64_t seed)
{
    static int present[KK];
    static uint64_t tags[KK];
    memset(present, 0, sizeof present);
    sw_rng r = {seed};
    static ts_msg fl[40];
    uint64_t acked = 0, inflight_seen = 0, del_inflight = 0;
    for (int round = 0; round < rounds && !sw_test_failures; round++) {
        kill_ctx cx = {dir, round, seed ^ (uint64_t)(round + 1) * 0x9e3779b97f4a7c15ull};
        pid_t pid = 0;
        const int rfd = ts_fork_and_kill(child, &cx, M_OPENED, M_FAIL, &r, &pid);
        if (rfd < 0) {
            CHECK(!"a pipe and a writer process for the kill");
            return;
        }
        ts_msg m;
        ssize_t got;
        size_t nfl = 0;
        int inflight = 0, kind = 0;
        while ((got = read(rfd, &m, sizeof m)) == (ssize_t)sizeof m) {
            switch (m.type) {
            case M_BEGIN: nfl = 0; inflight = 1; kind = (int)m.key; break;
            case M_ITEM: fl[nfl++] = m; break;
            case M_END:
                for (size_t i = 0; i < nfl; i++) {
                    present[fl[i].key] = kind;
                    tags[fl[i].key] = fl[i].tag;
                }
                acked += nfl;
                nfl = 0;
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
        del_inflight += inflight && !kind;
        sw_store_config c = ts_config(dir, STRIPE, RUN, 12);
        c.read_only = 1;
        c.create = 0;
        sw_store *s = NULL;
        CHECK_STATUS(ts_open(&c, &s), SW_OK);
        if (!s)
            break;
        verify_ok(s); /* a killed writer is not damage */
        CHECK_STATUS(sw_store_close(s), SW_OK);
        c = ts_config(dir, STRIPE, RUN, 12);
        CHECK_STATUS(ts_open(&c, &s), SW_OK);
        if (!s)
            break;
        for (int k = 0; k < KK; k++) {
            sw_status st = SW_OK, st2 = SW_OK;
            int ok = reads_as(s, k, present[k], tags[k], &st), newv = -1;
            /* else one of the killed batch's versions of the key: absent
             * (a delete) or its new contents (a write), whole */
            for (size_t i = 0; inflight && !ok && i < nfl; i++) {
                if ((int)fl[i].key != k)
                    continue;
                if (!kind && st == SW_STATUS_NOT_FOUND)
                    ok = 1, newv = 0;
                else if (kind && reads_as(s, k, 1, fl[i].tag, &st2))
                    ok = 1, newv = (int)i;
            }
            if (!ok)
                fprintf(stderr, "round %d key %d: %s (acked %s)\n", round, k, sw_status_str(st),
                        present[k] ? "present" : "absent");
            CHECK(ok);
            /* the model follows what the store holds now */
            if (newv == 0 && !kind)
                present[k] = 0;
            else if (newv >= 0 && kind) {
                present[k] = 1;
                tags[k] = fl[newv].tag;
            }
        }
        const sw_store_stats st = ts_stats(s);
        CHECK(st.corruptions == 0 && st.keys_unprovable == 0 && st.journal_damaged == 0 &&
              st.headers_bad == 0);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("SIGKILL of a writer of delete and write batches: %d rounds, %llu acknowledged items, "
           "%llu kills inside a batch (%llu of them deletes); every key its acknowledged version "
           "or the killed batch's, whole; read-only verify clean\n", rounds,
           (unsigned long long)acked, (unsigned long long)inflight_seen,
           (unsigned long long)del_inflight);
    CHECK(acked > 50);
}

int main(int argc, char **argv)
{
    int rounds = 16;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tune") == 0 && i + 1 < argc) {
            if (sw_store_tuning_parse(ts_tuning(), argv[++i]) != SW_OK)
                return 2;
        } else {
            rounds = atoi(argv[i]);
        }
    }
    const uint64_t seed = ts_seed(0xde1e7e);
    sw_rng r = {seed};
    ts_dir d;
    ts_dir_make(&d, "delbatch");
    printf("seed 0x%llx, dir %s\n", (unsigned long long)seed, d.base);
    char dir[400];
    test_equivalence(d.base, 0, &r);
    test_equivalence(d.base, 4, &r);
    snprintf(dir, sizeof dir, "%s/bad", d.base);
    test_bad_args(dir);
    snprintf(dir, sizeof dir, "%s/jerr", d.base);
    test_journal_error(dir);
    snprintf(dir, sizeof dir, "%s/kill", d.base);
    test_kills(dir, rounds, seed);
    if (!sw_test_failures)
        ts_rm_rf(d.base);
    printf("test_store_delete_batch: %d failures (seed 0x%llx)\n", sw_test_failures,
           (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
