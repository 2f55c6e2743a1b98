/* Helpers shared by the block store tests: temporary directories, keys,
 * deterministic stripe contents, store configs. Header-only so that each
 * test stays one program built by sw_add_test. */
#ifndef TEST_STORE_UTIL_H
#define TEST_STORE_UTIL_H

#include "sw_test.h"
#include "store/format.h"
#include "store/store_internal.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int ts_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

static inline void ts_rm_rf(const char *path) { nftw(path, ts_rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh private directory under /tmp (on a real disk here); the store
 * goes into <base>/store. */
typedef struct ts_dir {
    char base[256];
    char store[300];
} ts_dir;

static inline void ts_dir_make(ts_dir *d, const char *tag)
{
    snprintf(d->base, sizeof d->base, "/tmp/sw_%s_XXXXXX", tag);
    if (!mkdtemp(d->base)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(d->store, sizeof d->store, "%s/store", d->base);
}

static inline sw_store_key ts_key(uint64_t ns, uint32_t layer, uint32_t block, uint16_t head,
                                  uint8_t kind)
{
    sw_store_key k;
    memset(&k, 0, sizeof k);
    k.ns = ns;
    k.layer = layer;
    k.block = block;
    k.kv_head = head;
    k.kind = kind;
    return k;
}

static inline uint64_t ts_key_hash(const sw_store_key *k)
{
    uint64_t h = k->ns * 0x9e3779b97f4a7c15ull ^ ((uint64_t)k->layer << 40) ^
                 ((uint64_t)k->block << 8) ^ ((uint64_t)k->kv_head << 56) ^ k->kind;
    h ^= h >> 29;
    return h * 0xbf58476d1ce4e5b9ull;
}

/* Deterministic contents of (key, tag): any torn or foreign bytes differ. */
static inline void ts_fill(void *buf, size_t len, const sw_store_key *k, uint64_t tag)
{
    sw_rng r = {ts_key_hash(k) ^ (tag * 0x94d049bb133111ebull)};
    uint8_t *p = (uint8_t *)buf;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = sw_rng_next(&r);
        memcpy(p + i, &v, len - i < 8 ? len - i : 8);
    }
}

static inline int ts_check(const void *buf, size_t len, const sw_store_key *k, uint64_t tag)
{
    uint8_t *want = (uint8_t *)malloc(len ? len : 1);
    ts_fill(want, len, k, tag);
    int ok = memcmp(buf, want, len) == 0;
    free(want);
    return ok;
}

/* Length of the stripe (key, tag) in [1, max]. */
static inline size_t ts_len(const sw_store_key *k, uint64_t tag, size_t max)
{
    return 1 + (size_t)((ts_key_hash(k) ^ (tag * 0x2545F4914F6CDD1Dull)) % max);
}

static inline sw_store_config ts_config(const char *dir, uint32_t stripe, uint32_t run_blocks,
                                        uint64_t nruns)
{
    sw_store_config c;
    sw_store_config_init(&c);
    c.dir = dir;
    /* the *_pread runs (ctest): the same test on the pread/pwrite backend */
    const char *io = getenv("SW_TEST_STORE_IO");
    if (io && strcmp(io, "pread") == 0)
        c.io_backend = SW_STORE_IO_PREAD;
    c.stripe_bytes = stripe;
    c.run_blocks = run_blocks;
    sw_store_geometry g;
    sw_store_geometry_make(stripe, run_blocks, UINT64_MAX, &g);
    c.capacity_bytes = nruns * sw_store_run_bytes(&g);
    return c;
}

/* The store tuning every ts_open of this program uses: the library's own
 * unless the program was started with --tune NAME=VALUE[,...] (the ctest
 * variants of a test; field names in store/store_internal.h). */
static inline sw_store_tuning *ts_tuning(void)
{
    static sw_store_tuning t;
    static int init;
    if (!init) {
        sw_store_tuning_auto(&t);
        init = 1;
    }
    return &t;
}

/* Applies `--tune SPEC` from the command line; exits 2 on anything else. */
static inline void ts_tuning_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tune") == 0 && i + 1 < argc) {
            if (sw_store_tuning_parse(ts_tuning(), argv[++i]) != SW_OK) {
                fprintf(stderr, "%s: --tune %s: %s\n", argv[0], argv[i], sw_last_error());
                exit(2);
            }
            continue;
        }
        fprintf(stderr, "usage: %s [--tune NAME=VALUE[,NAME=VALUE...]]\n", argv[0]);
        exit(2);
    }
}

/* sw_store_open with the program's tuning (ts_tuning). */
static inline sw_status ts_open(const sw_store_config *c, sw_store **out)
{
    return sw_store_open_tuned(c, ts_tuning(), out);
}

/* sw_store_open that compacts the journal whenever it holds more records
 * than 2 x the live and unprovable keys (compact_min_records = 0). */
static inline sw_status open_compacting(const sw_store_config *c, sw_store **out)
{
    sw_store_tuning t = *ts_tuning();
    t.compact_min_records = 0;
    return sw_store_open_tuned(c, &t, out);
}

static inline sw_store_stats ts_stats(sw_store *s)
{
    sw_store_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    sw_store_get_stats(s, &st);
    return st;
}

/* Reads one key into a fresh buffer; returns the status. */
static inline sw_status ts_read1(sw_store *s, const sw_store_key *k, void *buf, size_t cap,
                                 size_t *len, uint64_t *gen)
{
    void *dst[1] = {buf};
    sw_status st1;
    size_t l = 0;
    uint64_t g = 0;
    sw_status r = sw_store_read(s, 1, k, dst, cap, &l, &g, &st1);
    if (len)
        *len = l;
    if (gen)
        *gen = g;
    return r;
}

/* Finds the byte offset in the data file of the extent header of `k` at
 * generation `gen` by scanning the run header pages; -1 when absent.
 * *payload_off receives the offset of its payload. */
static inline long long ts_find_extent(const char *store_dir, const sw_store_key *k, uint64_t gen,
                                       uint32_t stripe, uint32_t run_blocks, long long *payload_off)
{
    char path[400];
    snprintf(path, sizeof path, "%s/data", store_dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    sw_store_geometry g;
    sw_store_geometry_make(stripe, run_blocks, UINT64_MAX, &g);
    uint64_t rb = sw_store_run_bytes(&g);
    fseek(f, 0, SEEK_END);
    long long size = ftell(f);
    long long found = -1;
    uint8_t h[SW_STORE_HDR_BYTES];
    for (long long r = 0; (r + 1) * (long long)rb <= size && found < 0; r++)
        for (uint32_t p = 0; p < run_blocks; p++) {
            long long off = r * (long long)rb + (long long)p * SW_STORE_HDR_BYTES;
            fseek(f, off, SEEK_SET);
            if (fread(h, 1, sizeof h, f) != sizeof h)
                break;
            sw_store_extent_hdr eh;
            if (sw_store_decode_extent_hdr(h, sizeof h, &eh) == SW_OK &&
                sw_store_key_eq(&eh.key, k) && eh.generation == gen) {
                found = off;
                *payload_off = r * (long long)rb + g.run_header_bytes +
                               (long long)p * (long long)g.slot_bytes;
                break;
            }
        }
    fclose(f);
    return found;
}

static inline int ts_flip_byte(const char *store_dir, const char *name, long long off)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", store_dir, name);
    FILE *f = fopen(path, "r+b");
    if (!f)
        return -1;
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    return 0;
}

static inline uint64_t ts_seed(uint64_t def)
{
    const char *s = getenv("SW_TEST_SEED");
    return s ? strtoull(s, NULL, 0) : def;
}

/* Kill tests: a forked writer reports each step to its parent through a
 * pipe (one ts_msg per step, types the test's own), and the parent kills
 * it with SIGKILL at a random moment. */
typedef struct ts_msg {
    uint32_t type, key;
    uint64_t tag, gen;
} ts_msg;

static inline void ts_send(int fd, uint32_t type, uint32_t key, uint64_t tag, uint64_t gen)
{
    ts_msg m = {type, key, tag, gen};
    ssize_t w;
    do
        w = write(fd, &m, sizeof m);
    while (w < 0 && errno == EINTR);
}

static inline void ts_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A forked writer's open: reports `opened`, or `fail` and exits 3. */
static inline sw_store *ts_child_open(int fd, const sw_store_config *c, uint32_t opened,
                                      uint32_t fail)
{
    sw_store *s = NULL;
    if (ts_open(c, &s) != SW_OK) {
        fprintf(stderr, "child: open: %s\n", sw_last_error());
        ts_send(fd, fail, 0, 0, 0);
        _exit(3);
    }
    ts_send(fd, opened, 0, 0, 0);
    return s;
}

/* One kill: forks a writer that runs child(fd, ctx) on the write end of a
 * pipe, waits for its `opened` (or `fail`) message, lets it run 2-27 ms
 * (drawn from r) and kills it with SIGKILL. Returns the read end, which
 * holds what the writer sent after opening (the caller reads it, closes
 * it and waits for *pid), or -1 when no pipe or no process could be made. */
static inline int ts_fork_and_kill(void (*child)(int fd, void *ctx), void *ctx, uint32_t opened,
                                   uint32_t fail, sw_rng *r, pid_t *pid)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    fflush(NULL);
    *pid = fork();
    if (*pid < 0) { /* (no kill(-1) below) */
        perror("fork");
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (*pid == 0) {
        close(p[0]);
        child(p[1], ctx);
        _exit(0);
    }
    close(p[1]);
    ts_msg m;
    while (read(p[0], &m, sizeof m) == (ssize_t)sizeof m)
        if (m.type == opened || m.type == fail)
            break;
    ts_sleep_us(2000 + (long)(sw_rng_next(r) % 25000));
    kill(*pid, SIGKILL);
    return p[0];
}

/* The kill tests' keys: three streams of consecutive blocks (exercises run
 * placement). */
static inline sw_store_key ts_crash_key(int i)
{
    return ts_key(42, (uint32_t)(i % 3), (uint32_t)(i / 3), 1, (uint8_t)(i & 1));
}

#endif
