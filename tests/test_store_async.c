/* Read tickets (sw_store_read_submit / sw_store_read_wait): several tiles in
 * flight return exactly what sw_store_read returns; a corrupt extent in a
 * pipelined batch fails its key only (destination wiped to zeros, never its
 * bytes); missing and bad keys, bad arguments and unknown tickets; more than 64 outstanding;
 * an overwrite, delete or eviction between submit and wait returns the
 * version of the submit, never a mix; close with tickets outstanding; reads
 * too large for the bounce buffer; adjacent runs merged into one request
 * (corrupt extents inside it fail their keys only; zero-filled creation);
 * more tickets than the device may have in flight (queued, bounce regions
 * freed early); random interleavings of submits, waits
 * and writes checked against a model. Runs on io_uring and (ctest's
 * *_pread variant) on the pread fallback. */
#include "test_store_util.h"

#include "spillway_store_profile.h"

#include <pthread.h>
#include <stdlib.h>

#define STRIPE 8192u
#define RUN 16u
#define TILE 16u   /* blocks per ticket */
#define POISON 0xeeu

static sw_store_key key_of(uint32_t stream, uint32_t block)
{
    return ts_key(21, stream / 2, block, (uint16_t)(stream % 2), SW_STORE_KIND_K);
}

/* Writes blocks [0, nblocks) of streams [0, nstreams), contents (key, tag),
 * full stripes except every 7th block (shorter). */
static void fill(sw_store *s, uint32_t nstreams, uint32_t nblocks, uint64_t tag)
{
    uint8_t buf[STRIPE];
    for (uint32_t b = 0; b < nblocks; b++)
        for (uint32_t q = 0; q < nstreams; q++) {
            sw_store_key k = key_of(q, b);
            size_t len = b % 7 == 3 ? ts_len(&k, tag, STRIPE) : STRIPE;
            ts_fill(buf, len, &k, tag);
            CHECK_STATUS(sw_store_write(s, &k, buf, len, NULL), SW_OK);
        }
}

static size_t len_of(uint32_t q, uint32_t b, uint64_t tag)
{
    sw_store_key k = key_of(q, b);
    return b % 7 == 3 ? ts_len(&k, tag, STRIPE) : STRIPE;
}

/* One tile request: its keys, its buffers (poisoned), its ticket. */
typedef struct tile {
    sw_store_key keys[TILE];
    void *dst[TILE];
    uint8_t *mem;
    uint64_t ticket;
    size_t lengths[TILE];
    uint64_t gens[TILE];
    sw_status sts[TILE];
} tile;

static void tile_init(tile *t, uint32_t stream, uint32_t b0)
{
    memset(t, 0, sizeof *t);
    t->mem = (uint8_t *)malloc((size_t)TILE * STRIPE);
    memset(t->mem, POISON, (size_t)TILE * STRIPE);
    for (uint32_t i = 0; i < TILE; i++) {
        t->keys[i] = key_of(stream, b0 + i);
        t->dst[i] = t->mem + (size_t)i * STRIPE;
    }
}

static void tile_free(tile *t) { free(t->mem); }

static int untouched(const void *p)
{
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < STRIPE; i++)
        if (b[i] != POISON)
            return 0;
    return 1;
}

/* The first len bytes zero (a payload that failed its CRC while it was
 * copied is wiped), the rest untouched. */
static int wiped(const void *p, size_t len)
{
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < STRIPE; i++)
        if (b[i] != (i < len ? 0 : POISON))
            return 0;
    return 1;
}

static sw_status submit(sw_store *s, tile *t)
{
    return sw_store_read_submit(s, TILE, t->keys, t->dst, STRIPE, &t->ticket);
}

static sw_status wait_tile(sw_store *s, tile *t)
{
    return sw_store_read_wait(s, t->ticket, TILE, t->lengths, t->gens, t->sts);
}

/* Every key of tile t OK with contents (key, tag). */
static void check_tile(const tile *t, uint32_t stream, uint64_t tag)
{
    for (uint32_t i = 0; i < TILE; i++) {
        size_t want = len_of(stream, t->keys[i].block, tag);
        CHECK_STATUS(t->sts[i], SW_OK);
        CHECK(t->lengths[i] == want);
        CHECK(t->gens[i] != 0);
        CHECK(ts_check(t->dst[i], want, &t->keys[i], tag));
    }
}

static sw_store *open_store(const char *dir, uint64_t nruns, uint64_t host_bytes,
                            uint64_t io_buffer)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, nruns);
    c.host_tier_bytes = host_bytes;
    c.io_buffer_bytes = io_buffer;
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    return s;
}

/* Several tiles in flight, waited in order and out of order, with and
 * without a host tier; the results equal sw_store_read's. */
static void test_pipeline(const char *dir, uint64_t host_bytes)
{
    enum { STREAMS = 6, BLOCKS = 64, D = 5 };
    sw_store *s = open_store(dir, 64, host_bytes, 0);
    if (!s)
        return;
    fill(s, STREAMS, BLOCKS, 1);
    uint32_t ntiles = STREAMS * (BLOCKS / TILE);
    tile ts[D];
    uint32_t which[D];
    for (int pass = 0; pass < 2; pass++) { /* pass 1: host tier warm (when there is one) */
        uint32_t next = 0, done = 0;
        for (; next < D; next++) {
            which[next] = next;
            tile_init(&ts[next], next / (BLOCKS / TILE), next % (BLOCKS / TILE) * TILE);
            CHECK_STATUS(submit(s, &ts[next]), SW_OK);
            CHECK(ts[next].ticket != 0);
        }
        while (done < ntiles) {
            /* out of order: the newest outstanding first every third time */
            uint32_t k = done % 3 == 2 ? (next - 1) % D : done % D;
            if (which[k] == UINT32_MAX)
                k = done % D;
            for (uint32_t j = 0; which[k] == UINT32_MAX && j < D; j++)
                k = (k + 1) % D;
            uint32_t id = which[k];
            CHECK_STATUS(wait_tile(s, &ts[k]), SW_OK);
            check_tile(&ts[k], id / (BLOCKS / TILE), 1);
            /* the same read, synchronous, must agree (length, generation) */
            size_t l2[TILE];
            uint64_t g2[TILE];
            sw_status s2[TILE];
            uint8_t *m2 = (uint8_t *)malloc((size_t)TILE * STRIPE);
            void *d2[TILE];
            for (uint32_t i = 0; i < TILE; i++)
                d2[i] = m2 + (size_t)i * STRIPE;
            CHECK_STATUS(sw_store_read(s, TILE, ts[k].keys, d2, STRIPE, l2, g2, s2), SW_OK);
            for (uint32_t i = 0; i < TILE; i++)
                CHECK(l2[i] == ts[k].lengths[i] && g2[i] == ts[k].gens[i] &&
                      memcmp(d2[i], ts[k].dst[i], l2[i]) == 0);
            free(m2);
            tile_free(&ts[k]);
            which[k] = UINT32_MAX;
            done++;
            if (next < ntiles) {
                which[k] = next;
                tile_init(&ts[k], next / (BLOCKS / TILE), next % (BLOCKS / TILE) * TILE);
                CHECK_STATUS(submit(s, &ts[k]), SW_OK);
                next++;
            }
        }
    }
    sw_store_stats st = ts_stats(s);
    CHECK(st.corruptions == 0 && st.io_errors == 0);
    if (host_bytes)
        CHECK(st.host_hits > 0);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* A flipped payload byte in one extent: in a batch of tiles in flight,
 * only that key is CORRUPT (its buffer wiped to zeros: the CRC is computed
 * while the payload is copied), everything else OK. A
 * missing key in another tile: NOT_FOUND for it alone. */
static void test_corrupt_and_missing(const char *dir)
{
    enum { STREAMS = 4, BLOCKS = 32 };
    sw_store_config c = ts_config(dir, STRIPE, RUN, 16);
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    fill(s, STREAMS, BLOCKS, 1);
    sw_store_key vk = key_of(2, 5);
    uint64_t vgen = 0;
    uint8_t tmp[STRIPE];
    CHECK_STATUS(ts_read1(s, &vk, tmp, STRIPE, NULL, &vgen), SW_OK);
    sw_store_key gone = key_of(1, 20);
    CHECK_STATUS(sw_store_delete(s, &gone), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    long long pay = -1, hdr = ts_find_extent(dir, &vk, vgen, STRIPE, RUN, &pay);
    CHECK(hdr >= 0);
    CHECK(ts_flip_byte(dir, "data", pay + 100) == 0);
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    enum { NT = STREAMS * (BLOCKS / TILE) };
    tile ts[NT];
    for (uint32_t i = 0; i < NT; i++) {
        tile_init(&ts[i], i / (BLOCKS / TILE), i % (BLOCKS / TILE) * TILE);
        CHECK_STATUS(submit(s, &ts[i]), SW_OK);
    }
    for (uint32_t i = 0; i < NT; i++) {
        uint32_t q = i / (BLOCKS / TILE);
        sw_status want = SW_OK;
        for (uint32_t j = 0; j < TILE; j++) {
            if (sw_store_key_eq(&ts[i].keys[j], &vk))
                want = SW_STATUS_CORRUPT;
            if (sw_store_key_eq(&ts[i].keys[j], &gone))
                want = SW_STATUS_NOT_FOUND;
        }
        CHECK_STATUS(wait_tile(s, &ts[i]), want);
        for (uint32_t j = 0; j < TILE; j++) {
            if (sw_store_key_eq(&ts[i].keys[j], &vk) || sw_store_key_eq(&ts[i].keys[j], &gone)) {
                CHECK_STATUS(ts[i].sts[j], want);
                CHECK(ts[i].lengths[j] == 0 && ts[i].gens[j] == 0);
                if (want == SW_STATUS_CORRUPT)
                    CHECK(wiped(ts[i].dst[j], len_of(q, ts[i].keys[j].block, 1)));
                else
                    CHECK(untouched(ts[i].dst[j]));
                continue;
            }
            size_t wl = len_of(q, ts[i].keys[j].block, 1);
            CHECK_STATUS(ts[i].sts[j], SW_OK);
            CHECK(ts[i].lengths[j] == wl && ts_check(ts[i].dst[j], wl, &ts[i].keys[j], 1));
        }
        tile_free(&ts[i]);
    }
    CHECK(ts_stats(s).corruptions == 1);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* Adjacent whole runs (the tiles of consecutive streams, filled in the
 * same order) come back in one merged request per ticket -- on a store
 * created with zero_fill -- and a corrupt payload and a corrupt extent
 * header inside that merged request fail their keys only; sw_store_read
 * returns the same. With the ranges cut (--tune read_chunk_bytes /
 * ticket_chunk_bytes, the *_chunk run) they are not merged. */
static void test_merged(const char *dir)
{
    enum { STREAMS = 4, BLOCKS = 32, N = STREAMS * RUN };
    sw_store_config c = ts_config(dir, STRIPE, RUN, 16);
    c.zero_fill = 1;
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    CHECK_STATUS(sw_store_close(s), SW_OK);
    {
        /* the whole data file was written (zeros) at creation */
        char path[400];
        snprintf(path, sizeof path, "%s/data", dir);
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL);
        size_t nz = 0, total = 0, r;
        uint8_t buf[65536];
        while (f && (r = fread(buf, 1, sizeof buf, f)) > 0)
            for (size_t i = 0; i < r; i++, total++)
                nz += buf[i] != 0;
        if (f)
            fclose(f);
        struct stat st;
        CHECK(stat(path, &st) == 0 && (uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size);
        CHECK(nz == 0 && total == (size_t)st.st_size && total > 0);
    }
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    fill(s, STREAMS, BLOCKS, 3); /* block-major: chunk 0 of streams 0..3 in runs 0..3 */
    sw_store_key bad_pay = key_of(2, 5), bad_hdr = key_of(3, 0);
    uint64_t gp = 0, gh = 0;
    uint8_t tmp[STRIPE];
    CHECK_STATUS(ts_read1(s, &bad_pay, tmp, STRIPE, NULL, &gp), SW_OK);
    CHECK_STATUS(ts_read1(s, &bad_hdr, tmp, STRIPE, NULL, &gh), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    long long pay = -1, pay2 = -1;
    CHECK(ts_find_extent(dir, &bad_pay, gp, STRIPE, RUN, &pay) >= 0);
    long long hdr = ts_find_extent(dir, &bad_hdr, gh, STRIPE, RUN, &pay2);
    CHECK(hdr >= 0);
    CHECK(ts_flip_byte(dir, "data", pay + 77) == 0);
    CHECK(ts_flip_byte(dir, "data", hdr + 9) == 0);
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    /* A chunk > 0 cuts ranges into pieces (no merge); 0 merges adjacent
     * runs into one request; the library's choice (< 0): tickets and the
     * pread fallback merge, sw_store_read on io_uring cuts at 128 KiB. */
    const sw_store_tuning *tu = ts_tuning();
    sw_store_key keys[N];
    void *dst[N];
    size_t lens[N];
    uint64_t gens[N];
    sw_status sts[N];
    uint8_t *mem = (uint8_t *)malloc((size_t)N * STRIPE);
    for (int pass = 0; pass < 2; pass++) { /* 0: ticket, 1: sw_store_read */
        memset(mem, POISON, (size_t)N * STRIPE);
        for (uint32_t i = 0; i < N; i++) {
            keys[i] = key_of(i / RUN, i % RUN); /* block 0..15 of streams 0..3 */
            dst[i] = mem + (size_t)i * STRIPE;
        }
        sw_store_stats a = ts_stats(s);
        sw_status r;
        if (pass == 0) {
            uint64_t t = 0;
            CHECK_STATUS(sw_store_read_submit(s, N, keys, dst, STRIPE, &t), SW_OK);
            r = sw_store_read_wait(s, t, N, lens, gens, sts);
        } else {
            r = sw_store_read(s, N, keys, dst, STRIPE, lens, gens, sts);
        }
        CHECK_STATUS(r, SW_STATUS_CORRUPT);
        sw_store_stats b = ts_stats(s);
        CHECK(b.read_requests - a.read_requests == STREAMS);
        const int64_t chunk = pass == 0 ? tu->ticket_chunk_bytes : tu->read_chunk_bytes;
        if (chunk > 0)
            CHECK(b.read_ios - a.read_ios >= STREAMS);
        else if (chunk == 0 || pass == 0 || b.io_backend == SW_STORE_IO_PREAD)
            CHECK(b.read_ios - a.read_ios == 1); /* four runs, one request */
        CHECK(b.corruptions - a.corruptions == 2);
        for (uint32_t i = 0; i < N; i++) {
            if (sw_store_key_eq(&keys[i], &bad_pay) || sw_store_key_eq(&keys[i], &bad_hdr)) {
                CHECK_STATUS(sts[i], SW_STATUS_CORRUPT);
                /* the payload failed its CRC while it was copied: wiped;
                 * the header failed before any byte was copied: untouched */
                CHECK(lens[i] == 0);
                CHECK(sw_store_key_eq(&keys[i], &bad_pay)
                          ? wiped(dst[i], len_of(i / RUN, i % RUN, 3))
                          : untouched(dst[i]));
                continue;
            }
            size_t wl = len_of(i / RUN, i % RUN, 3);
            CHECK_STATUS(sts[i], SW_OK);
            CHECK(lens[i] == wl && ts_check(dst[i], wl, &keys[i], 3));
        }
    }
    free(mem);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* Bad arguments and tickets; per-key bad keys; 64 outstanding at most. */
static void test_bad_args(const char *dir)
{
    sw_store *s = open_store(dir, 8, 0, 0);
    if (!s)
        return;
    fill(s, 1, 32, 1);
    tile t;
    tile_init(&t, 0, 0);
    uint64_t tk = 77;
    CHECK_STATUS(sw_store_read_submit(NULL, TILE, t.keys, t.dst, STRIPE, &tk), SW_STATUS_INVALID);
    CHECK(tk == 0);
    CHECK_STATUS(sw_store_read_submit(s, TILE, t.keys, t.dst, STRIPE, NULL), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read_submit(s, TILE, NULL, t.dst, STRIPE, &tk), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read_submit(s, TILE, t.keys, NULL, STRIPE, &tk), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read_wait(s, 0, TILE, NULL, NULL, t.sts), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read_wait(s, 12345, TILE, NULL, NULL, t.sts), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read_wait(NULL, 1, TILE, NULL, NULL, t.sts), SW_STATUS_INVALID);

    /* per key: a bad kind, a NULL destination, a stripe larger than
     * dst_bytes (blocks 3 and 10 are shorter, the others full) */
    t.keys[1].kind = 7;
    t.dst[2] = NULL;
    CHECK_STATUS(sw_store_read_submit(s, TILE, t.keys, t.dst, STRIPE - 1, &t.ticket), SW_OK);
    /* a wrong n is refused and leaves the ticket outstanding */
    CHECK_STATUS(sw_store_read_wait(s, t.ticket, TILE - 1, NULL, NULL, t.sts), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read_wait(s, t.ticket, TILE, NULL, NULL, NULL), SW_STATUS_INVALID);
    CHECK_STATUS(wait_tile(s, &t), SW_STATUS_INVALID);
    CHECK_STATUS(t.sts[1], SW_STATUS_INVALID);
    CHECK_STATUS(t.sts[2], SW_STATUS_INVALID);
    CHECK_STATUS(t.sts[4], SW_STATUS_INVALID); /* 8192 > dst_bytes 8191 */
    CHECK(t.lengths[4] == 0 && untouched(t.mem + 4 * STRIPE));
    size_t l3 = len_of(0, 3, 1);
    if (l3 <= STRIPE - 1) {
        CHECK_STATUS(t.sts[3], SW_OK);
        CHECK(ts_check(t.dst[3], l3, &t.keys[3], 1));
    }
    /* waiting twice: the ticket is gone */
    CHECK_STATUS(wait_tile(s, &t), SW_STATUS_INVALID);
    tile_free(&t);

    /* n = 0 */
    uint64_t z = 0;
    sw_status zs;
    CHECK_STATUS(sw_store_read_submit(s, 0, NULL, NULL, STRIPE, &z), SW_OK);
    CHECK(z != 0);
    CHECK_STATUS(sw_store_read_wait(s, z, 0, NULL, NULL, &zs), SW_OK);

    /* 64 outstanding at most: the 65th is refused, one wait makes room */
    enum { MAXT = 64 };
    tile *many = (tile *)calloc(MAXT + 1, sizeof *many);
    for (int i = 0; i < MAXT; i++) {
        tile_init(&many[i], 0, (uint32_t)(i % 2) * TILE);
        CHECK_STATUS(submit(s, &many[i]), SW_OK);
    }
    tile_init(&many[MAXT], 0, 0);
    CHECK_STATUS(submit(s, &many[MAXT]), SW_STATUS_FULL);
    CHECK(many[MAXT].ticket == 0);
    CHECK_STATUS(wait_tile(s, &many[7]), SW_OK);
    check_tile(&many[7], 0, 1);
    CHECK_STATUS(submit(s, &many[MAXT]), SW_OK);
    for (int i = 0; i <= MAXT; i++) {
        if (i != 7) {
            CHECK_STATUS(wait_tile(s, &many[i]), SW_OK);
            check_tile(&many[i], 0, 1);
        }
        tile_free(&many[i]);
    }
    free(many);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* Overwrite, delete and eviction between submit and wait: the ticket
 * returns the version of its submit (old bytes, old generation); reads
 * after the change see the new state. */
static void test_change_in_flight(const char *dir)
{
    /* 5 runs of 16: 80 extents; 2 streams of 32 blocks take 64 */
    sw_store_config c = ts_config(dir, STRIPE, RUN, 5);
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    fill(s, 2, 32, 1);
    tile a, b;
    tile_init(&a, 0, 0);
    tile_init(&b, 1, 16);
    CHECK_STATUS(submit(s, &a), SW_OK);
    CHECK_STATUS(submit(s, &b), SW_OK);
    /* overwrite block 4 of stream 0 with tag 2, delete block 20 of stream 1 */
    uint8_t buf[STRIPE];
    sw_store_key ko = key_of(0, 4), kd = key_of(1, 20);
    ts_fill(buf, STRIPE, &ko, 2);
    uint64_t newgen = 0;
    CHECK_STATUS(sw_store_write(s, &ko, buf, STRIPE, &newgen), SW_OK);
    CHECK_STATUS(sw_store_delete(s, &kd), SW_OK);
    CHECK_STATUS(wait_tile(s, &a), SW_OK);
    check_tile(&a, 0, 1);
    CHECK(a.gens[4] < newgen);
    CHECK_STATUS(wait_tile(s, &b), SW_OK);
    check_tile(&b, 1, 1);
    /* now: the new version and the deletion */
    size_t l = 0;
    uint64_t g = 0;
    CHECK_STATUS(ts_read1(s, &ko, buf, STRIPE, &l, &g), SW_OK);
    CHECK(g == newgen && l == STRIPE && ts_check(buf, STRIPE, &ko, 2));
    CHECK_STATUS(ts_read1(s, &kd, buf, STRIPE, NULL, NULL), SW_STATUS_NOT_FOUND);
    /* and a fresh ticket agrees */
    tile a2;
    tile_init(&a2, 0, 0);
    CHECK_STATUS(submit(s, &a2), SW_OK);
    CHECK_STATUS(wait_tile(s, &a2), SW_OK);
    CHECK(a2.gens[4] == newgen && ts_check(a2.dst[4], STRIPE, &ko, 2));
    tile_free(&a2);
    tile_free(&a);
    tile_free(&b);

    /* eviction: tiles of streams 0/1 in flight, then 32 new stripes and 32
     * overwrites (64 more extents) evict and reuse extents of them */
    tile e[4];
    for (uint32_t i = 0; i < 4; i++) {
        tile_init(&e[i], i / 2, (i % 2) * TILE);
        CHECK_STATUS(submit(s, &e[i]), SW_OK);
    }
    fill(s, 4, 16, 3); /* streams 0..3, blocks 0..15: 64 stripes, tag 3 */
    sw_store_stats st = ts_stats(s);
    CHECK(st.evictions > 0);
    for (uint32_t i = 0; i < 4; i++) {
        sw_status want = (i == 3) ? SW_STATUS_NOT_FOUND : SW_OK; /* block 20 deleted */
        CHECK_STATUS(wait_tile(s, &e[i]), want);
        for (uint32_t j = 0; j < TILE; j++) {
            uint32_t q = i / 2, bl = e[i].keys[j].block;
            if (q == 1 && bl == 20) {
                CHECK_STATUS(e[i].sts[j], SW_STATUS_NOT_FOUND);
                CHECK(untouched(e[i].dst[j]));
                continue;
            }
            uint64_t tag = (q == 0 && bl == 4) ? 2 : 1; /* as of the submit */
            size_t wl = len_of(q, bl, tag);
            if (q == 0 && bl == 4)
                wl = STRIPE;
            CHECK_STATUS(e[i].sts[j], SW_OK);
            CHECK(e[i].lengths[j] == wl && ts_check(e[i].dst[j], wl, &e[i].keys[j], tag));
        }
        tile_free(&e[i]);
    }
    CHECK(ts_stats(s).corruptions == 0);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* Close with tickets outstanding: returns, frees everything (ASan), and
 * what reached the buffers is either nothing or the right bytes. */
static void test_close_outstanding(const char *dir)
{
    sw_store *s = open_store(dir, 8, 0, 0);
    if (!s)
        return;
    fill(s, 2, 64, 1);
    tile t[6];
    for (uint32_t i = 0; i < 6; i++) {
        tile_init(&t[i], i % 2, (i / 2) * TILE);
        CHECK_STATUS(submit(s, &t[i]), SW_OK);
    }
    CHECK_STATUS(wait_tile(s, &t[0]), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    for (uint32_t i = 1; i < 6; i++) {
        for (uint32_t j = 0; j < TILE; j++) {
            size_t wl = len_of(i % 2, t[i].keys[j].block, 1);
            CHECK(untouched(t[i].dst[j]) || ts_check(t[i].dst[j], wl, &t[i].keys[j], 1));
        }
        tile_free(&t[i]);
    }
    tile_free(&t[0]);
    /* the store reopens clean */
    s = open_store(dir, 8, 0, 0);
    if (!s)
        return;
    tile r;
    tile_init(&r, 1, 48);
    CHECK_STATUS(submit(s, &r), SW_OK);
    CHECK_STATUS(wait_tile(s, &r), SW_OK);
    check_tile(&r, 1, 1);
    tile_free(&r);
    /* and closes with one outstanding that was never waited for */
    tile_init(&r, 0, 16);
    CHECK_STATUS(submit(s, &r), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    tile_free(&r);
}

/* A ticket larger than the bounce buffer (two runs here) or the queue is
 * read synchronously at submit; the result is the same. */
static void test_large(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, 16);
    c.queue_depth = 4;
    c.io_buffer_bytes = 1; /* the minimum: two runs */
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    fill(s, 8, 32, 1);
    enum { NK = 8 * 32 };
    sw_store_key *keys = (sw_store_key *)malloc(sizeof *keys * NK);
    void **dst = (void **)malloc(sizeof *dst * NK);
    uint8_t *mem = (uint8_t *)malloc((size_t)NK * STRIPE);
    size_t *lens = (size_t *)malloc(sizeof *lens * NK);
    sw_status *sts = (sw_status *)malloc(sizeof *sts * NK);
    for (uint32_t i = 0; i < NK; i++) {
        keys[i] = key_of(i % 8, i / 8);
        dst[i] = mem + (size_t)i * STRIPE;
    }
    uint64_t tk = 0;
    tile small;
    tile_init(&small, 3, 16);
    CHECK_STATUS(submit(s, &small), SW_OK); /* may be in flight */
    CHECK_STATUS(sw_store_read_submit(s, NK, keys, dst, STRIPE, &tk), SW_OK);
    CHECK_STATUS(sw_store_read_wait(s, tk, NK, lens, NULL, sts), SW_OK);
    for (uint32_t i = 0; i < NK; i++) {
        size_t wl = len_of(i % 8, i / 8, 1);
        CHECK(sts[i] == SW_OK && lens[i] == wl && ts_check(dst[i], wl, &keys[i], 1));
    }
    CHECK_STATUS(wait_tile(s, &small), SW_OK);
    check_tile(&small, 3, 1);
    tile_free(&small);
    free(keys);
    free(dst);
    free(mem);
    free(lens);
    free(sts);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* More tickets than the device may have in flight (a bounce buffer of two
 * runs: one tile each, so at most two on the device, the rest queued until
 * a region comes free): waited for newest first (the store then checks and
 * copies the older arrived tickets early to free their regions), a write
 * while most are still queued (it waits for every queued read: they return
 * the version of their submit), then waited for in a shuffled order. With
 * --tune read_inflight_bytes=1 (ctest's *_inflight1 run) every test here
 * runs with at most one ticket on the device. */
static void test_queued(const char *dir, uint64_t seed)
{
    enum { STREAMS = 8, BLOCKS = 64, NT = 40 };
    sw_store_config c = ts_config(dir, STRIPE, RUN, 48);
    c.io_buffer_bytes = 1; /* the minimum: two runs */
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    fill(s, STREAMS, BLOCKS, 1);
    const uint32_t tiles_per_stream = BLOCKS / TILE;
    tile *t = (tile *)calloc(NT, sizeof *t);
    sw_rng r = {seed};
    for (int round = 0; round < 2; round++) {
        for (uint32_t i = 0; i < NT; i++) {
            uint32_t q = i % STREAMS, b0 = (i / STREAMS) % tiles_per_stream * TILE;
            tile_init(&t[i], q, b0);
            CHECK_STATUS(submit(s, &t[i]), SW_OK);
        }
        if (round == 0) {
            for (uint32_t i = NT; i-- > 0;) {
                CHECK_STATUS(wait_tile(s, &t[i]), SW_OK);
                check_tile(&t[i], i % STREAMS, 1);
            }
        } else {
            /* overwrite every block of stream 0 (tag 2) with tickets queued */
            uint8_t buf[STRIPE];
            for (uint32_t b = 0; b < BLOCKS; b++) {
                sw_store_key k = key_of(0, b);
                ts_fill(buf, STRIPE, &k, 2);
                CHECK_STATUS(sw_store_write(s, &k, buf, STRIPE, NULL), SW_OK);
            }
            uint32_t order[NT];
            for (uint32_t i = 0; i < NT; i++)
                order[i] = i;
            for (uint32_t i = NT - 1; i > 0; i--) {
                uint32_t j = (uint32_t)(sw_rng_next(&r) % (i + 1)), x = order[i];
                order[i] = order[j];
                order[j] = x;
            }
            for (uint32_t k = 0; k < NT; k++) {
                uint32_t i = order[k];
                CHECK_STATUS(wait_tile(s, &t[i]), SW_OK);
                check_tile(&t[i], i % STREAMS, 1); /* the version of the submit */
            }
            /* and the new version afterwards */
            tile n;
            tile_init(&n, 0, 0);
            CHECK_STATUS(submit(s, &n), SW_OK);
            CHECK_STATUS(wait_tile(s, &n), SW_OK);
            for (uint32_t i = 0; i < TILE; i++)
                CHECK(n.sts[i] == SW_OK && n.lengths[i] == STRIPE &&
                      ts_check(n.dst[i], STRIPE, &n.keys[i], 2));
            tile_free(&n);
        }
        for (uint32_t i = 0; i < NT; i++)
            tile_free(&t[i]);
    }
    free(t);
    sw_store_stats st = ts_stats(s);
    CHECK(st.corruptions == 0 && st.io_errors == 0);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* Random interleaving of submits, waits (any order), writes, deletes and
 * synchronous reads against a model: a ticket returns, per key, exactly the
 * version that was live at its submit. */
typedef struct model_tile {
    tile t;
    uint32_t stream;
    uint64_t tag[TILE]; /* 0 = absent at submit */
    int live;
} model_tile;

static void test_random(const char *dir, uint64_t seed)
{
    enum { STREAMS = 4, BLOCKS = 64, SLOTS = 12 };
    sw_store *s = open_store(dir, 32, (uint64_t)64 * STRIPE, 0);
    if (!s)
        return;
    static uint64_t cur[STREAMS][BLOCKS]; /* model: tag of the live version, 0 = none */
    memset(cur, 0, sizeof cur);
    sw_rng r = {seed};
    uint8_t buf[STRIPE];
    model_tile mt[SLOTS];
    memset(mt, 0, sizeof mt);
    uint64_t next_tag = 1;
    int failures0 = sw_test_failures;
    for (int step = 0; step < 1500; step++) {
        int op = (int)(sw_rng_next(&r) % 10);
        uint32_t q = (uint32_t)(sw_rng_next(&r) % STREAMS);
        uint32_t b = (uint32_t)(sw_rng_next(&r) % BLOCKS);
        if (op <= 2) { /* write */
            sw_store_key k = key_of(q, b);
            uint64_t tag = next_tag++;
            ts_fill(buf, STRIPE, &k, tag);
            CHECK_STATUS(sw_store_write(s, &k, buf, STRIPE, NULL), SW_OK);
            cur[q][b] = tag;
        } else if (op == 3) { /* delete */
            sw_store_key k = key_of(q, b);
            CHECK_STATUS(sw_store_delete(s, &k), cur[q][b] ? SW_OK : SW_STATUS_NOT_FOUND);
            cur[q][b] = 0;
        } else if (op <= 6) { /* submit into a free slot */
            uint32_t i = (uint32_t)(sw_rng_next(&r) % SLOTS);
            if (mt[i].live)
                continue;
            uint32_t b0 = b / TILE * TILE;
            tile_init(&mt[i].t, q, b0);
            mt[i].stream = q;
            for (uint32_t j = 0; j < TILE; j++)
                mt[i].tag[j] = cur[q][b0 + j];
            CHECK_STATUS(submit(s, &mt[i].t), SW_OK);
            mt[i].live = 1;
        } else if (op <= 8) { /* wait for a random outstanding one */
            uint32_t i = (uint32_t)(sw_rng_next(&r) % SLOTS);
            if (!mt[i].live)
                continue;
            sw_status st = wait_tile(s, &mt[i].t);
            int all = 1;
            for (uint32_t j = 0; j < TILE; j++) {
                if (!mt[i].tag[j]) {
                    all = 0;
                    CHECK_STATUS(mt[i].t.sts[j], SW_STATUS_NOT_FOUND);
                    CHECK(untouched(mt[i].t.dst[j]));
                    continue;
                }
                CHECK_STATUS(mt[i].t.sts[j], SW_OK);
                CHECK(mt[i].t.lengths[j] == STRIPE &&
                      ts_check(mt[i].t.dst[j], STRIPE, &mt[i].t.keys[j], mt[i].tag[j]));
            }
            CHECK(st == (all ? SW_OK : SW_STATUS_NOT_FOUND));
            tile_free(&mt[i].t);
            mt[i].live = 0;
        } else { /* a synchronous read */
            sw_store_key k = key_of(q, b);
            sw_status st = ts_read1(s, &k, buf, STRIPE, NULL, NULL);
            CHECK_STATUS(st, cur[q][b] ? SW_OK : SW_STATUS_NOT_FOUND);
            if (cur[q][b])
                CHECK(ts_check(buf, STRIPE, &k, cur[q][b]));
        }
        if (sw_test_failures != failures0) {
            fprintf(stderr, "test_random: seed %llu, failure by step %d\n",
                    (unsigned long long)seed, step);
            break;
        }
    }
    CHECK(ts_stats(s).corruptions == 0);
    CHECK_STATUS(sw_store_close(s), SW_OK); /* with tickets outstanding */
    for (uint32_t i = 0; i < SLOTS; i++)
        if (mt[i].live)
            tile_free(&mt[i].t);
}

/* Submit in one thread, wait in another. */
typedef struct xthread {
    sw_store *s;
    tile *t;
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int submitted;
} xthread;

static void *waiter(void *arg)
{
    xthread *x = (xthread *)arg;
    for (int i = 0; i < x->n; i++) {
        pthread_mutex_lock(&x->mu);
        while (x->submitted <= i)
            pthread_cond_wait(&x->cv, &x->mu);
        pthread_mutex_unlock(&x->mu);
        CHECK_STATUS(wait_tile(x->s, &x->t[i]), SW_OK);
        check_tile(&x->t[i], (uint32_t)i % 3, 1);
    }
    return NULL;
}

static void test_threads(const char *dir)
{
    enum { NT = 24 };
    sw_store *s = open_store(dir, 24, 0, 0);
    if (!s)
        return;
    fill(s, 3, 128, 1);
    tile *t = (tile *)calloc(NT, sizeof *t);
    xthread x = {s, t, NT, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, waiter, &x) == 0);
    for (int i = 0; i < NT; i++) {
        tile_init(&t[i], (uint32_t)i % 3, (uint32_t)(i / 3 % 8) * TILE);
        CHECK_STATUS(submit(s, &t[i]), SW_OK);
        pthread_mutex_lock(&x.mu);
        x.submitted++;
        pthread_cond_signal(&x.cv);
        pthread_mutex_unlock(&x.mu);
    }
    pthread_join(th, NULL);
    for (int i = 0; i < NT; i++)
        tile_free(&t[i]);
    free(t);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* The read tickets' profile (sw_store_read_profile_get): bad arguments; zeros
 * before the first ticket; after a pipeline of tiles, one request counted
 * per device read (the stats' read_ios), the size histogram adding up to
 * them, times within the elapsed time; a reset starts from zero. */
static void test_profile(const char *dir)
{
    enum { STREAMS = 4, BLOCKS = 64, D = 6 };
    sw_store *s = open_store(dir, 32, 0, 0);
    if (!s)
        return;
    fill(s, STREAMS, BLOCKS, 1);
    sw_store_read_profile p;
    memset(&p, 0, sizeof p);
    CHECK_STATUS(sw_store_read_profile_get(s, &p, 0), SW_STATUS_INVALID); /* struct_size 0 */
    p.struct_size = sizeof p;
    CHECK_STATUS(sw_store_read_profile_get(NULL, &p, 0), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read_profile_get(s, NULL, 0), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_read_profile_get(s, &p, 1), SW_OK);
    CHECK(p.requests == 0 && p.elapsed_ns == 0 && p.struct_size == sizeof p);
    sw_store_stats st0 = ts_stats(s);
    uint32_t ntiles = STREAMS * (BLOCKS / TILE);
    tile ts[D];
    for (uint32_t q = 0; q < ntiles + D; q++) {
        if (q >= D) {
            tile *t = &ts[(q - D) % D];
            CHECK_STATUS(wait_tile(s, t), SW_OK);
            check_tile(t, (q - D) / (BLOCKS / TILE), 1);
            tile_free(t);
        }
        if (q < ntiles) {
            tile_init(&ts[q % D], q / (BLOCKS / TILE), q % (BLOCKS / TILE) * TILE);
            CHECK_STATUS(submit(s, &ts[q % D]), SW_OK);
        }
    }
    sw_store_stats st1 = ts_stats(s);
    CHECK_STATUS(sw_store_read_profile_get(s, &p, 1), SW_OK);
    uint64_t nsz = 0;
    for (int i = 0; i < SW_STORE_PROFILE_SIZES; i++)
        nsz += p.sizes[i];
    CHECK(nsz == p.requests);
    CHECK(p.elapsed_ns > 0);
    CHECK(p.busy_ns <= p.elapsed_ns && p.below_cap_ns <= p.elapsed_ns);
    CHECK(p.below_cap_queued_ns <= p.below_cap_ns && p.below_cap_processing_ns <= p.below_cap_ns &&
          p.below_cap_waiting_ns <= p.below_cap_ns);
    CHECK(p.process_ns + p.wait_ns <= p.elapsed_ns);
    if (st1.io_backend == SW_STORE_IO_URING) {
        CHECK(p.requests == st1.read_ios - st0.read_ios);
        CHECK(p.requests > 0 && p.process_ns > 0 && p.busy_ns > 0);
        /* every stripe's run was read: at least the tiles' payload */
        CHECK(p.request_bytes >= (uint64_t)ntiles * TILE * STRIPE);
        CHECK(p.peak_bytes >= p.request_bytes / p.requests);
        CHECK(p.mean_bytes >= 0 && p.mean_bytes <= (double)p.peak_bytes);
        /* submitted while under the cap: at most one ticket (TILE + header) over it */
        if (p.cap_bytes)
            CHECK(p.peak_bytes <= p.cap_bytes + (TILE + 1) * (uint64_t)STRIPE + 65536);
    } else {
        CHECK(p.requests == 0); /* pread: tickets are read synchronously */
    }
    CHECK_STATUS(sw_store_read_profile_get(s, &p, 0), SW_OK);
    CHECK(p.requests == 0 && p.busy_ns == 0 && p.peak_bytes == 0);
    sw_store_stats st = ts_stats(s);
    CHECK(st.corruptions == 0 && st.io_errors == 0);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

int main(int argc, char **argv)
{
    ts_tuning_args(argc, argv);
    ts_dir d;
    ts_dir_make(&d, "async");
    char sub[320];
    uint64_t seed = ts_seed(0xa57c0de);
#define RUN_CASE(name, call)                                  \
    do {                                                      \
        snprintf(sub, sizeof sub, "%s/%s", d.base, name);     \
        call;                                                 \
    } while (0)
    RUN_CASE("pipe", test_pipeline(sub, 0));
    RUN_CASE("pipe_host", test_pipeline(sub, (uint64_t)40 * STRIPE));
    RUN_CASE("corrupt", test_corrupt_and_missing(sub));
    RUN_CASE("merged", test_merged(sub));
    RUN_CASE("args", test_bad_args(sub));
    RUN_CASE("change", test_change_in_flight(sub));
    RUN_CASE("close", test_close_outstanding(sub));
    RUN_CASE("large", test_large(sub));
    RUN_CASE("queued", test_queued(sub, seed));
    RUN_CASE("random", test_random(sub, seed));
    RUN_CASE("threads", test_threads(sub));
    RUN_CASE("profile", test_profile(sub));
    ts_rm_rf(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_async: %d failures (seed %llu)\n", sw_test_failures,
                (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
