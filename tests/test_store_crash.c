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
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#define STRIPE 8192u
#define RUN 16u
#define NRUNS 12u
#define NK 96
#define DEFAULT_ROUNDS 40

enum { MSG_OPENED = 1, MSG_BEGIN_PUT, MSG_ACK_PUT, MSG_BEGIN_DEL, MSG_ACK_DEL, MSG_FAIL };

typedef struct msg {
    uint32_t type;
    uint32_t key;
    uint64_t tag;
    uint64_t gen;
    uint64_t pad;
} msg;

typedef struct kstate {
    int present;
    uint64_t tag, gen;
} kstate;

static sw_store_key key_of(int i)
{
    /* Three streams, consecutive blocks: exercises run placement. */
    return ts_key(42, (uint32_t)(i % 3), (uint32_t)(i / 3), 1, (uint8_t)(i & 1));
}

static sw_store_config config(const char *dir, int round)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, NRUNS);
    c.durability = (round % 3 == 2) ? SW_STORE_DURABILITY_SYNC : SW_STORE_DURABILITY_PROCESS;
    c.host_tier_bytes = 16 * STRIPE;
    c.queue_depth = 8;
    return c;
}

static void send_msg(int fd, uint32_t type, uint32_t key, uint64_t tag, uint64_t gen)
{
    msg m = {type, key, tag, gen, 0};
    ssize_t w;
    do
        w = write(fd, &m, sizeof m);
    while (w < 0 && errno == EINTR);
}

static void child(int fd, const char *dir, int round, uint64_t seed)
{
    sw_store_config c = config(dir, round);
    sw_store *s = NULL;
    if (sw_store_open(&c, &s) != SW_OK) {
        fprintf(stderr, "child: open: %s\n", sw_last_error());
        send_msg(fd, MSG_FAIL, 0, 0, 0);
        _exit(3);
    }
    send_msg(fd, MSG_OPENED, 0, 0, 0);
    sw_rng r = {seed};
    uint8_t buf[STRIPE];
    for (uint64_t op = 1;; op++) {
        int k = (int)(sw_rng_next(&r) % NK);
        sw_store_key key = key_of(k);
        if (sw_rng_next(&r) % 8 == 0) {
            send_msg(fd, MSG_BEGIN_DEL, (uint32_t)k, 0, 0);
            sw_status st = sw_store_delete(s, &key);
            if (st != SW_OK && st != SW_STATUS_NOT_FOUND) {
                send_msg(fd, MSG_FAIL, (uint32_t)k, 0, 0);
                _exit(4);
            }
            send_msg(fd, MSG_ACK_DEL, (uint32_t)k, 0, 0);
        } else {
            uint64_t tag = ((uint64_t)round << 32) | op;
            size_t len = ts_len(&key, tag, STRIPE);
            ts_fill(buf, len, &key, tag);
            send_msg(fd, MSG_BEGIN_PUT, (uint32_t)k, tag, 0);
            uint64_t gen = 0;
            if (sw_store_write(s, &key, buf, len, &gen) != SW_OK) {
                fprintf(stderr, "child: write: %s\n", sw_last_error());
                send_msg(fd, MSG_FAIL, (uint32_t)k, 0, 0);
                _exit(5);
            }
            send_msg(fd, MSG_ACK_PUT, (uint32_t)k, tag, gen);
        }
    }
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int main(int argc, char **argv)
{
    const int ROUNDS = argc > 1 ? atoi(argv[1]) : DEFAULT_ROUNDS;
    uint64_t seed = ts_seed(0xc4a54);
    sw_rng r = {seed};
    ts_dir d;
    ts_dir_make(&d, "crash");
    printf("seed 0x%llx, dir %s\n", (unsigned long long)seed, d.base);
    /* Compact often so that kills also land inside compaction. */
    setenv("SPILLWAY_STORE_COMPACT_MIN", "64", 1);
    static kstate model[NK];
    uint64_t total_acked = 0, inflight_applied = 0, last_gen = 0, recovered = 0, discarded = 0;
    uint8_t *buf = malloc(STRIPE);
    for (int round = 0; round < ROUNDS && !sw_test_failures; round++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 1;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            child(p[1], d.store, round, seed ^ (uint64_t)(round + 1) * 0x9e3779b97f4a7c15ull);
            _exit(0);
        }
        close(p[1]);
        /* Kill at a random moment: 1 round in 4 during open. */
        int early = round > 0 && sw_rng_next(&r) % 4 == 0;
        msg m;
        ssize_t got;
        int opened = 0;
        if (early) {
            sleep_us((long)(sw_rng_next(&r) % 3000));
        } else {
            while ((got = read(p[0], &m, sizeof m)) == (ssize_t)sizeof m) {
                if (m.type == MSG_OPENED) {
                    opened = 1;
                    break;
                }
                if (m.type == MSG_FAIL)
                    break;
            }
            sleep_us(1000 + (long)(sw_rng_next(&r) % 20000));
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
        sw_status ost = sw_store_open(&c, &s);
        if (ost == SW_STATUS_NOT_FOUND && !opened && round == 0) {
            /* Killed before the store existed; nothing acknowledged. */
            continue;
        }
        CHECK_STATUS(ost, SW_OK);
        if (!s)
            break;
        for (int k = 0; k < NK; k++) {
            sw_store_key key = key_of(k);
            size_t len = 0;
            uint64_t gen = 0;
            memset(buf, 0, STRIPE);
            sw_status st = ts_read1(s, &key, buf, STRIPE, &len, &gen);
            kstate *e = &model[k];
            if (k == in_key) {
                /* The operation in flight: old state or new, whole. */
                int old_ok = e->present ? (st == SW_OK && gen == e->gen && len ==
                             ts_len(&key, e->tag, STRIPE) && ts_check(buf, len, &key, e->tag))
                                        : st == SW_STATUS_NOT_FOUND;
                int new_ok = in_put ? (st == SW_OK && gen > last_gen &&
                             len == ts_len(&key, in_tag, STRIPE) && ts_check(buf, len, &key, in_tag))
                                    : st == SW_STATUS_NOT_FOUND;
                if (!old_ok && !new_ok)
                    fprintf(stderr, "round %d key %d (in flight %s): %s len %zu gen %llu\n",
                            round, k, in_put ? "put" : "delete", sw_status_str(st), len,
                            (unsigned long long)gen);
                CHECK(old_ok || new_ok);
                if (new_ok && !old_ok) {
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
    printf("%d rounds, %llu acknowledged operations, %llu in-flight operations found applied "
           "(%llu taken from the data file at open), %llu torn in-flight extents dropped\n",
           ROUNDS, (unsigned long long)total_acked, (unsigned long long)inflight_applied,
           (unsigned long long)recovered, (unsigned long long)discarded);
    CHECK(total_acked > 100);
    free(buf);
    ts_rm_rf(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_crash: %d failures (seed 0x%llx)\n", sw_test_failures,
                (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
