/* Block store crash safety: a child process writes and deletes stripes
 * continuously and reports every operation it starts and every one that was
 * acknowledged through a pipe; the parent kills it with SIGKILL at a random
 * moment (sometimes while it is still opening the store: journal replay and
 * compaction), then reopens the store and checks that every acknowledged
 * write reads back intact, every acknowledged delete stays deleted, and the
 * one operation in flight is either fully there or not at all: nothing torn,
 * nothing unacknowledged, no corruption. 40 rounds by default
 * (`test_store_crash ROUNDS` for more), both durability modes. */
#include "test_store_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

/* Default: 96 keys in 192 extents of 8 KiB. `evict`: 288 keys of up to
 * 64 KiB in the same 192 extents, so that the store runs at capacity and
 * most puts evict (LRU), and the writes are long enough for some kills to
 * land inside one. */
static uint32_t STRIPE = 8192u;
static int NK = 96;
static int g_evict;
#define NK_MAX 288
#define RUN 16u
#define NRUNS 12u
#define DEFAULT_ROUNDS 40

enum { MSG_OPENED = 1, MSG_BEGIN_PUT, MSG_ACK_PUT, MSG_BEGIN_DEL, MSG_ACK_DEL, MSG_FAIL };

typedef struct kstate {
    int present;
    uint64_t tag, gen;
} kstate;

static sw_store_config config(const char *dir, int round)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, NRUNS);
    c.durability = (round % 3 == 2) ? SW_STORE_DURABILITY_SYNC : SW_STORE_DURABILITY_PROCESS;
    c.host_tier_bytes = 16 * (uint64_t)STRIPE;
    c.queue_depth = 8;
    return c;
}

static void child(int fd, const char *dir, int round, uint64_t seed)
{
    sw_store_config c = config(dir, round);
    sw_store *s = ts_child_open(fd, &c, MSG_OPENED, MSG_FAIL);
    sw_rng r = {seed};
    uint8_t *buf = malloc(STRIPE);
    for (uint64_t op = 1;; op++) {
        int k = (int)(sw_rng_next(&r) % NK);
        sw_store_key key = ts_crash_key(k);
        if (sw_rng_next(&r) % 8 == 0 && !g_evict) {
            ts_send(fd, MSG_BEGIN_DEL, (uint32_t)k, 0, 0);
            sw_status st = sw_store_delete(s, &key);
            if (st != SW_OK && st != SW_STATUS_NOT_FOUND) {
                ts_send(fd, MSG_FAIL, (uint32_t)k, 0, 0);
                _exit(4);
            }
            ts_send(fd, MSG_ACK_DEL, (uint32_t)k, 0, 0);
        } else {
            uint64_t tag = ((uint64_t)round << 32) | op;
            size_t len = ts_len(&key, tag, STRIPE);
            ts_fill(buf, len, &key, tag);
            ts_send(fd, MSG_BEGIN_PUT, (uint32_t)k, tag, 0);
            uint64_t gen = 0;
            if (sw_store_write(s, &key, buf, len, &gen) != SW_OK) {
                fprintf(stderr, "child: write: %s\n", sw_last_error());
                ts_send(fd, MSG_FAIL, (uint32_t)k, 0, 0);
                _exit(5);
            }
            ts_send(fd, MSG_ACK_PUT, (uint32_t)k, tag, gen);
        }
    }
}

/* ------------------------------------------------- kills at file level -- */
/* Two kills in a row, simulated on the files exactly as they land (the
 * store closed, then the journal's last record cut and, for a torn put, the
 * payload zeroed): kill 1 leaves a torn put of L (header, no payload, no
 * record), which the next open drops; kill 2, in that same writer, leaves
 * a complete put of M v2 without its record. The dropped put's sequence
 * number must be handed out again, so that M v2 is one past the journal:
 * M then reads v2 (taken from the data file) or v1 -- never CORRUPT. */
static void zero_newest_payload(const char *dir, const sw_store_key *k, uint32_t stripe,
                                uint32_t run)
{
    char path[700];
    snprintf(path, sizeof path, "%s/data", dir);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    sw_store_geometry g;
    sw_store_geometry_make(stripe, run, UINT64_MAX, &g);
    uint64_t rb = sw_store_run_bytes(&g), best = 0;
    off_t where = -1;
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    uint8_t *hp = malloc(g.run_header_bytes);
    for (uint64_t r = 0; (r + 1) * rb <= (uint64_t)st.st_size; r++) {
        CHECK(pread(fd, hp, g.run_header_bytes, (off_t)(r * rb)) == (ssize_t)g.run_header_bytes);
        for (uint32_t i = 0; i < run; i++) {
            sw_store_extent_hdr h;
            if (sw_store_decode_extent_hdr(hp + 64 * i, 64, &h) == SW_OK &&
                sw_store_key_eq(&h.key, k) && h.seq >= best) {
                best = h.seq;
                where = (off_t)(r * rb + g.run_header_bytes + (uint64_t)i * g.slot_bytes);
            }
        }
    }
    free(hp);
    CHECK(where >= 0);
    uint8_t *z = calloc(1, g.slot_bytes);
    CHECK(pwrite(fd, z, g.slot_bytes, where) == (ssize_t)g.slot_bytes);
    free(z);
    close(fd);
}

static void cut_last_record(const char *dir)
{
    char path[700];
    snprintf(path, sizeof path, "%s/journal", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size >= 128);
    CHECK(truncate(path, st.st_size - 64) == 0);
}

static void simulated_kills(const char *dir)
{
    const uint32_t stripe = 4096, run = 8;
    sw_store_config c = ts_config(dir, stripe, run, 4);
    c.queue_depth = 8;
    sw_store_key K = ts_key(5, 0, 0, 0, 0), L = ts_key(5, 0, 1, 0, 0), M = ts_key(5, 0, 2, 0, 0);
    uint8_t buf[4096];
    uint64_t gm1 = 0, gen = 0;
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    ts_fill(buf, sizeof buf, &K, 1);
    CHECK_STATUS(sw_store_write(s, &K, buf, sizeof buf, NULL), SW_OK);
    ts_fill(buf, sizeof buf, &M, 1);
    CHECK_STATUS(sw_store_write(s, &M, buf, sizeof buf, &gm1), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    /* kill 1: the put of L torn (header only) */
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    ts_fill(buf, sizeof buf, &L, 1);
    CHECK_STATUS(sw_store_write(s, &L, buf, sizeof buf, NULL), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    cut_last_record(dir);
    zero_newest_payload(dir, &L, stripe, run);
    /* the restarted writer drops it, then kill 2: M v2 without its record */
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    sw_store_stats st = ts_stats(s);
    CHECK(st.extents_discarded == 1);
    ts_fill(buf, sizeof buf, &M, 2);
    CHECK_STATUS(sw_store_write(s, &M, buf, sizeof buf, NULL), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    cut_last_record(dir);
    for (int ro = 1; ro >= 0; ro--) {
        c.read_only = ro;
        c.create = !ro;
        CHECK_STATUS(ts_open(&c, &s), SW_OK);
        if (!s)
            return;
        size_t len = 0;
        memset(buf, 0, sizeof buf);
        sw_status rs = ts_read1(s, &M, buf, sizeof buf, &len, &gen);
        int v2 = rs == SW_OK && gen > gm1 && ts_check(buf, len, &M, 2);
        int v1 = rs == SW_OK && gen == gm1 && ts_check(buf, len, &M, 1);
        if (!v1 && !v2)
            fprintf(stderr, "simulated kills (%s): M reads %s gen %llu\n",
                    ro ? "read-only" : "read-write", sw_status_str(rs),
                    (unsigned long long)gen);
        CHECK(v2);
        CHECK(ts_read1(s, &L, buf, sizeof buf, &len, &gen) == SW_STATUS_NOT_FOUND);
        if (ro) {
            /* a killed writer is not damage: verify passes, with a note */
            sw_store_verify_result vr;
            memset(&vr, 0, sizeof vr);
            vr.struct_size = sizeof vr;
            CHECK_STATUS(sw_store_verify(s, NULL, NULL, &vr), SW_OK);
            CHECK(vr.in_flight == 1 && vr.journal_missing == 1);
        }
        st = ts_stats(s);
        CHECK(st.keys_unprovable == 0);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("simulated kills: a torn put dropped, then a put left without its record: "
           "taken from the data file, nothing unprovable\n");
    ts_rm_rf(dir);
}

int main(int argc, char **argv)
{
    const int ROUNDS = argc > 1 ? atoi(argv[1]) : DEFAULT_ROUNDS;
    if (argc > 2 && !strcmp(argv[2], "evict")) {
        g_evict = 1;
        STRIPE = 65536u;
        NK = NK_MAX;
    }
    uint64_t evicted = 0, full_checks = 0;
    uint64_t seed = ts_seed(0xc4a54);
    sw_rng r = {seed};
    ts_dir d;
    ts_dir_make(&d, "crash");
    printf("seed 0x%llx, dir %s\n", (unsigned long long)seed, d.base);
    simulated_kills(d.store);
    /* Compact often so that kills also land inside compaction (every
     * ts_open from here on, in this process and its forked writers). */
    ts_tuning()->compact_min_records = 64;
    static kstate model[NK_MAX];
    uint64_t total_acked = 0, inflight_applied = 0, last_gen = 0, recovered = 0, discarded = 0;
    uint8_t *buf = malloc(STRIPE);
    if (g_evict) {
        /* Start at capacity: every key written once (the last 192 stay),
         * the model learnt by reading them back. */
        sw_store_config c = config(d.store, 0);
        sw_store *s = NULL;
        CHECK_STATUS(ts_open(&c, &s), SW_OK);
        for (int k = 0; k < NK && s; k++) {
            sw_store_key key = ts_crash_key(k);
            size_t len = ts_len(&key, (uint64_t)k, STRIPE);
            ts_fill(buf, len, &key, (uint64_t)k);
            CHECK_STATUS(sw_store_write(s, &key, buf, len, NULL), SW_OK);
        }
        for (int k = 0; k < NK && s; k++) {
            sw_store_key key = ts_crash_key(k);
            size_t len = 0;
            uint64_t gen = 0;
            sw_status st = ts_read1(s, &key, buf, STRIPE, &len, &gen);
            CHECK(st == SW_OK || st == SW_STATUS_NOT_FOUND);
            if (st == SW_OK)
                model[k] = (kstate){1, (uint64_t)k, gen};
            if (gen > last_gen)
                last_gen = gen;
        }
        if (s)
            CHECK(ts_stats(s).extents_used == ts_stats(s).extents_total);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    int rounds_run = 0;
    for (int round = 0; round < ROUNDS && !sw_test_failures; round++, rounds_run++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 1;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) { /* (never kill(-1)) */
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            close(p[0]);
            child(p[1], d.store, round, seed ^ (uint64_t)(round + 1) * 0x9e3779b97f4a7c15ull);
            _exit(0);
        }
        close(p[1]);
        /* Kill at a random moment: 1 round in 4 during open. */
        int early = round > 0 && sw_rng_next(&r) % 4 == 0;
        ts_msg m;
        ssize_t got;
        int opened = 0;
        if (early) {
            ts_sleep_us((long)(sw_rng_next(&r) % 3000));
        } else {
            while ((got = read(p[0], &m, sizeof m)) == (ssize_t)sizeof m) {
                if (m.type == MSG_OPENED) {
                    opened = 1;
                    break;
                }
                if (m.type == MSG_FAIL)
                    break;
            }
            ts_sleep_us(g_evict ? 5000 + (long)(sw_rng_next(&r) % 60000)
                             : 1000 + (long)(sw_rng_next(&r) % 20000));
        }
        kill(pid, SIGKILL);
        int in_key = -1, in_put = 0;
        uint64_t in_tag = 0;
        int acks = 0;
        while ((got = read(p[0], &m, sizeof m)) == (ssize_t)sizeof m) {
            switch (m.type) {
            case MSG_OPENED: opened = 1; break;
            case MSG_BEGIN_PUT: in_key = (int)m.key; in_put = 1; in_tag = m.tag; break;
            case MSG_BEGIN_DEL: in_key = (int)m.key; in_put = 0; break;
            case MSG_ACK_PUT:
                CHECK(m.gen > last_gen);
                last_gen = m.gen;
                model[m.key] = (kstate){1, m.tag, m.gen};
                in_key = -1;
                acks++;
                break;
            case MSG_ACK_DEL:
                model[m.key].present = 0;
                in_key = -1;
                acks++;
                break;
            case MSG_FAIL: CHECK(!"child reported a failure"); break;
            }
        }
        close(p[0]);
        int wst = 0;
        waitpid(pid, &wst, 0);
        CHECK(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL);
        total_acked += (uint64_t)acks;

        /* Reopen and verify every key. */
        sw_store_config c = config(d.store, round);
        sw_store *s = NULL;
        sw_status ost = ts_open(&c, &s);
        if (ost == SW_STATUS_NOT_FOUND && !opened && round == 0) {
            /* Killed before the store existed; nothing acknowledged. */
            continue;
        }
        CHECK_STATUS(ost, SW_OK);
        if (!s)
            break;
        for (int k = 0; k < NK; k++) {
            sw_store_key key = ts_crash_key(k);
            size_t len = 0;
            uint64_t gen = 0;
            memset(buf, 0, STRIPE);
            sw_status st = ts_read1(s, &key, buf, STRIPE, &len, &gen);
            kstate *e = &model[k];
            if (k == in_key) {
                /* The operation in flight: old state or new, whole. */
                int old_ok = e->present ? ((g_evict && st == SW_STATUS_NOT_FOUND) ||
                             (st == SW_OK && gen == e->gen && len ==
                             ts_len(&key, e->tag, STRIPE) && ts_check(buf, len, &key, e->tag)))
                                        : st == SW_STATUS_NOT_FOUND;
                int new_ok = in_put ? (st == SW_OK && gen > last_gen &&
                             len == ts_len(&key, in_tag, STRIPE) && ts_check(buf, len, &key, in_tag))
                                    : st == SW_STATUS_NOT_FOUND;
                if (!old_ok && !new_ok)
                    fprintf(stderr, "round %d key %d (in flight %s): %s len %zu gen %llu\n",
                            round, k, in_put ? "put" : "delete", sw_status_str(st), len,
                            (unsigned long long)gen);
                CHECK(old_ok || new_ok);
                if (g_evict && in_put && st == SW_STATUS_NOT_FOUND && e->present) {
                    e->present = 0; /* evicted by the put in flight or before */
                    evicted++;
                } else if (new_ok && !old_ok) {
                    inflight_applied++;
                    if (in_put) {
                        *e = (kstate){1, in_tag, gen};
                        last_gen = gen;
                    } else {
                        e->present = 0;
                    }
                }
                continue;
            }
            if (e->present && g_evict && st == SW_STATUS_NOT_FOUND) {
                /* evicted (LRU): the model does not follow the victims;
                 * a lost write is caught by the occupancy check below */
                e->present = 0;
                evicted++;
                continue;
            }
            if (e->present) {
                int ok = st == SW_OK && gen == e->gen && len == ts_len(&key, e->tag, STRIPE) &&
                         ts_check(buf, len, &key, e->tag);
                if (!ok)
                    fprintf(stderr, "round %d key %d: %s (%s) len %zu gen %llu, want gen %llu\n",
                            round, k, sw_status_str(st), sw_last_error(), len,
                            (unsigned long long)gen, (unsigned long long)e->gen);
                CHECK(ok);
            } else {
                if (st != SW_STATUS_NOT_FOUND)
                    fprintf(stderr, "round %d key %d: deleted/never written but %s gen %llu\n",
                            round, k, sw_status_str(st), (unsigned long long)gen);
                CHECK(st == SW_STATUS_NOT_FOUND);
            }
        }
        sw_store_stats st = ts_stats(s);
        CHECK(st.corruptions == 0 && st.io_errors == 0);
        if (g_evict && (st.evictions > 0 || evicted > 0)) {
            /* Once full, a store that loses no acknowledged write stays
             * full: a kill can free at most the in-flight put's victim
             * (evicted, its put not applied) -- every other extent holds a
             * key the model has current. */
            uint64_t current = 0;
            for (int k = 0; k < NK; k++)
                current += model[k].present;
            CHECK(st.extents_used == current);
            /* No deletes in this mode: once full, at most one extent is
             * free (an overwrite at capacity evicts one stripe and then
             * frees its old slot; a put in flight that was not applied
             * leaves its victim's slot free) -- a lost put of a new key
             * would leave two. */
            int gap_ok = st.extents_used + 1 >= st.extents_total;
            if (!gap_ok)
                fprintf(stderr, "round %d: %llu of %llu extents used after the store was full "
                        "(a lost write?)\n", round, (unsigned long long)st.extents_used,
                        (unsigned long long)st.extents_total);
            CHECK(gap_ok);
            full_checks++;
        }
        /* a crash is not damage: nothing unprovable, nothing dropped */
        CHECK(st.keys_unprovable == 0 && st.journal_damaged == 0 && st.headers_bad == 0);
        recovered += st.journal_recovered;
        discarded += st.extents_discarded;
        if (round % 6 == 0)
            printf("round %2d: %4d acks, %s, journal %llu records, dropped %llu\n", round, acks,
                   c.durability == SW_STORE_DURABILITY_SYNC ? "sync" : "process",
                   (unsigned long long)st.journal_records, (unsigned long long)st.journal_dropped);
        CHECK_STATUS(sw_store_close(s), SW_OK);
    }
    printf("%d rounds%s (%s), %llu acknowledged operations, 0 lost, %llu in-flight operations "
           "found applied (%llu taken from the data file at open), %llu torn in-flight extents "
           "dropped; %llu keys evicted, %llu full-store occupancy checks\n",
           rounds_run, g_evict ? " at capacity, LRU eviction, 64 KiB stripes" : "",
           getenv("SW_TEST_STORE_IO") && *getenv("SW_TEST_STORE_IO") ? getenv("SW_TEST_STORE_IO")
                                                                 : "default I/O",
           (unsigned long long)total_acked, (unsigned long long)inflight_applied,
           (unsigned long long)recovered, (unsigned long long)discarded,
           (unsigned long long)evicted, (unsigned long long)full_checks);
    CHECK(total_acked > 100);
    free(buf);
    ts_rm_rf(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_crash: %d failures (seed 0x%llx)\n", sw_test_failures,
                (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
