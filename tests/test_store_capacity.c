/* Block store capacity: exact accounting on write, overwrite, delete and
 * eviction; LRU eviction order; refusal with SW_STATUS_FULL; accounting
 * survives a reopen; a store created with another geometry, capacity or
 * format version is refused; a damaged superblock is reported. */
#include "test_store_util.h"

#define STRIPE 4096u
#define RUN 4u
#define NRUNS 2u
#define NSLOTS (RUN * NRUNS)

static void put(sw_store *s, uint32_t block, size_t len, sw_status want)
{
    uint8_t buf[STRIPE];
    sw_store_key k = ts_key(1, 0, block, 0, 0);
    ts_fill(buf, len, &k, len);
    CHECK_STATUS(sw_store_write(s, &k, buf, len, NULL), want);
}

static int present(sw_store *s, uint32_t block)
{
    uint8_t buf[STRIPE];
    sw_store_key k = ts_key(1, 0, block, 0, 0);
    size_t len = 0;
    sw_status st = ts_read1(s, &k, buf, STRIPE, &len, NULL);
    if (st == SW_OK && !ts_check(buf, len, &k, len))
        return -1;
    return st == SW_OK;
}

static void expect(sw_store *s, uint64_t used, uint64_t payload)
{
    sw_store_stats st = ts_stats(s);
    CHECK(st.extents_total == NSLOTS && st.capacity_bytes == NSLOTS * STRIPE);
    if (st.extents_used != used || st.payload_bytes != payload)
        fprintf(stderr, "  accounting: used %llu (want %llu), payload %llu (want %llu)\n",
                (unsigned long long)st.extents_used, (unsigned long long)used,
                (unsigned long long)st.payload_bytes, (unsigned long long)payload);
    CHECK(st.extents_used == used && st.payload_bytes == payload);
    CHECK(st.used_bytes == used * STRIPE && st.used_bytes <= st.capacity_bytes);
}

static void test_evict(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, NRUNS);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    uint64_t payload = 0;
    for (uint32_t b = 0; b < NSLOTS; b++) {
        put(s, b, 100 + b, SW_OK);
        payload += 100 + b;
        expect(s, b + 1, payload);
    }
    /* Touch block 0: block 1 becomes the LRU. */
    CHECK(present(s, 0) == 1);
    put(s, 100, 1000, SW_OK);
    payload += 1000 - 101;
    expect(s, NSLOTS, payload);
    CHECK(present(s, 1) == 0 && present(s, 0) == 1 && present(s, 100) == 1);
    CHECK(ts_stats(s).evictions == 1);
    /* Overwrite while full: evicts the LRU (block 2) for the new extent,
     * then frees the old one: one extent fewer in use. */
    put(s, 0, 50, SW_OK);
    payload += 50 - 100 - 102;
    expect(s, NSLOTS - 1, payload);
    CHECK(present(s, 2) == 0 && present(s, 0) == 1);
    /* Delete frees exactly one extent. */
    CHECK_STATUS(sw_store_delete(s, &(sw_store_key){1, 0, 3, 0, 0, 0}), SW_OK);
    payload -= 103;
    expect(s, NSLOTS - 2, payload);
    put(s, 200, STRIPE, SW_OK);
    payload += STRIPE;
    expect(s, NSLOTS - 1, payload);
    CHECK(ts_stats(s).evictions == 2);
    /* Many more writes: never above capacity, accounting exact. */
    for (uint32_t i = 0; i < 50; i++) {
        put(s, 1000 + i % 13, 1 + (i * 37) % STRIPE, SW_OK);
        CHECK(ts_stats(s).extents_used <= NSLOTS);
    }
    sw_store_stats st = ts_stats(s);
    uint64_t sum = 0, n = 0;
    for (uint32_t b = 0; b < 2000; b++) {
        uint8_t buf[STRIPE];
        sw_store_key k = ts_key(1, 0, b, 0, 0);
        size_t len;
        if (ts_read1(s, &k, buf, STRIPE, &len, NULL) == SW_OK) {
            CHECK(ts_check(buf, len, &k, len));
            sum += len;
            n++;
        }
    }
    CHECK(n == st.extents_used && sum == st.payload_bytes);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    /* Reopen: the journal replays to the same accounting. */
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    sw_store_stats st2 = ts_stats(s);
    CHECK(st2.extents_used == st.extents_used && st2.payload_bytes == st.payload_bytes);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

static void test_refuse(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, NRUNS);
    c.full_policy = SW_STORE_FULL_REFUSE;
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    uint64_t payload = 0;
    for (uint32_t b = 0; b < NSLOTS; b++) {
        put(s, b * 3, 10 * (b + 1), SW_OK); /* blocks spread over several runs */
        payload += 10 * (b + 1);
    }
    expect(s, NSLOTS, payload);
    put(s, 999, 10, SW_STATUS_FULL);
    put(s, 0, 20, SW_STATUS_FULL); /* an overwrite needs a free extent too */
    expect(s, NSLOTS, payload);
    CHECK(present(s, 0) == 1 && present(s, 999) == 0);
    CHECK(ts_stats(s).evictions == 0);
    CHECK_STATUS(sw_store_delete(s, &(sw_store_key){1, 0, 3, 0, 0, 0}), SW_OK);
    payload -= 20;
    expect(s, NSLOTS - 1, payload);
    put(s, 0, 30, SW_OK); /* overwrite now fits; the old extent is freed */
    payload += 30 - 10;
    expect(s, NSLOTS - 1, payload);
    put(s, 999, 10, SW_OK);
    payload += 10;
    expect(s, NSLOTS, payload);
    put(s, 1000, 10, SW_STATUS_FULL);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

static void test_geometry(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, NRUNS);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    put(s, 1, 10, SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    s = NULL;
    sw_store_config b = c;
    b.stripe_bytes = 2 * STRIPE;
    CHECK_STATUS(sw_store_open(&b, &s), SW_STATUS_INVALID);
    b = c;
    b.run_blocks = RUN * 2;
    CHECK_STATUS(sw_store_open(&b, &s), SW_STATUS_INVALID);
    b = ts_config(dir, STRIPE, RUN, NRUNS + 1);
    CHECK_STATUS(sw_store_open(&b, &s), SW_STATUS_INVALID);
    CHECK(s == NULL);
    /* A capacity that rounds to the same number of runs is the same store. */
    b = c;
    b.capacity_bytes += 100;
    CHECK_STATUS(sw_store_open(&b, &s), SW_OK);
    CHECK(present(s, 1) == 1);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    s = NULL;

    /* Another format version: rewrite the superblock with the next one. */
    char path[700];
    snprintf(path, sizeof path, "%s/superblock", dir);
    FILE *f = fopen(path, "r+b");
    uint8_t sb[SW_STORE_SB_BYTES];
    CHECK(f && fread(sb, 1, sizeof sb, f) == sizeof sb);
    sw_store_geometry g;
    CHECK_STATUS(sw_store_decode_superblock(sb, sizeof sb, &g), SW_OK);
    g.version = SW_STORE_FORMAT_VERSION + 1;
    uint8_t sb2[SW_STORE_SB_BYTES];
    sw_store_encode_superblock(&g, sb2);
    fseek(f, 0, SEEK_SET);
    fwrite(sb2, 1, sizeof sb2, f);
    fflush(f);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "version") != NULL);
    /* A version 1 store (extents without sequence numbers): refused, saying why. */
    g.version = 1;
    sw_store_encode_superblock(&g, sb2);
    fseek(f, 0, SEEK_SET);
    fwrite(sb2, 1, sizeof sb2, f);
    fflush(f);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "recreate") != NULL);
    /* A superblock truncated to a few hundred bytes, or padded. */
    CHECK(ftruncate(fileno(f), 300) == 0);
    fseek(f, 0, SEEK_SET);
    fwrite(sb, 1, 300, f);
    fflush(f);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_CORRUPT);
    CHECK(strstr(sw_last_error(), "300 bytes") != NULL);
    fseek(f, 0, SEEK_SET);
    fwrite(sb, 1, sizeof sb, f);
    fwrite("", 1, 1, f);
    fflush(f);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_CORRUPT);
    CHECK(ftruncate(fileno(f), SW_STORE_SB_BYTES) == 0);
    /* A non-zero reserved byte (after the CRC: not covered by it). */
    sb[1000] = 1;
    fseek(f, 0, SEEK_SET);
    fwrite(sb, 1, sizeof sb, f);
    fflush(f);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_CORRUPT);
    sb[1000] = 0;
    /* A damaged superblock. */
    sb[33] ^= 1;
    fseek(f, 0, SEEK_SET);
    fwrite(sb, 1, sizeof sb, f);
    fflush(f);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_CORRUPT);
    sb[33] ^= 1;
    fseek(f, 0, SEEK_SET);
    fwrite(sb, 1, sizeof sb, f);
    fclose(f);
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    CHECK(present(s, 1) == 1);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    /* A data file of the wrong size. */
    snprintf(path, sizeof path, "%s/data", dir);
    CHECK(truncate(path, 4096) == 0);
    CHECK_STATUS(sw_store_open(&c, &s), SW_STATUS_CORRUPT);
    /* Too small to hold one run. */
    char sub[700];
    snprintf(sub, sizeof sub, "%s_small", dir);
    b = c;
    b.dir = sub;
    b.capacity_bytes = STRIPE;
    CHECK_STATUS(sw_store_open(&b, &s), SW_STATUS_INVALID);
}

/* A store of one extent under LRU eviction: overwriting its only stripe
 * would have to evict that stripe first; it is refused with FULL and the
 * stripe stays (it was evicted before the new version was written, and
 * lost when that failed). A second key still evicts the first. Single
 * writes and a write batch. */
static void test_self_evict(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, 1, 1);
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    uint8_t buf[STRIPE];
    sw_store_key k = ts_key(1, 0, 0, 0, 0), k2 = ts_key(2, 0, 0, 0, 0);
    ts_fill(buf, 100, &k, 100);
    CHECK_STATUS(sw_store_write(s, &k, buf, 100, NULL), SW_OK);
    ts_fill(buf, 200, &k, 200);
    CHECK_STATUS(sw_store_write(s, &k, buf, 200, NULL), SW_STATUS_FULL);
    CHECK(strstr(sw_last_error(), "the one being overwritten") != NULL);
    const void *src[1] = {buf};
    const size_t len[1] = {200};
    size_t done = 9;
    CHECK_STATUS(sw_store_write_batch(s, 1, &k, src, len, NULL, &done), SW_STATUS_FULL);
    CHECK(done == 0);
    size_t got = 0;
    CHECK_STATUS(ts_read1(s, &k, buf, STRIPE, &got, NULL), SW_OK);
    CHECK(got == 100 && ts_check(buf, got, &k, 100));
    CHECK(ts_stats(s).evictions == 0);
    ts_fill(buf, 300, &k2, 300);
    CHECK_STATUS(sw_store_write(s, &k2, buf, 300, NULL), SW_OK); /* evicts k */
    CHECK_STATUS(ts_read1(s, &k, buf, STRIPE, &got, NULL), SW_STATUS_NOT_FOUND);
    CHECK(ts_stats(s).evictions == 1);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* One read of every stripe of a long run at queue depth 1: the run's
 * pieces (io_uring cuts a range into 128 KiB pieces: 16 of a 512-extent
 * run of 4 KiB) are more than 2 x 1 + 8 requests, and the plan of the
 * read was empty (INTERNAL, every key reported NOT_FOUND); also through a
 * read ticket. */
static void test_long_run_read(const char *dir)
{
    enum { N = 400 };
    sw_store_config c = ts_config(dir, STRIPE, 512, 1);
    c.queue_depth = 1;
    sw_store *s = NULL;
    CHECK_STATUS(ts_open(&c, &s), SW_OK);
    if (!s)
        return;
    static sw_store_key keys[N];
    static uint8_t data[N][STRIPE];
    void *dst[N];
    size_t lens[N];
    sw_status sts[N];
    for (uint32_t i = 0; i < N; i++) {
        keys[i] = ts_key(3, 0, i, 0, 0);
        ts_fill(data[i], STRIPE, &keys[i], i);
        CHECK_STATUS(sw_store_write(s, &keys[i], data[i], STRIPE, NULL), SW_OK);
    }
    for (int pass = 0; pass < 2; pass++) {
        memset(data, 0, sizeof data);
        for (uint32_t i = 0; i < N; i++)
            dst[i] = data[i];
        if (pass == 0) {
            CHECK_STATUS(sw_store_read(s, N, keys, dst, STRIPE, lens, NULL, sts), SW_OK);
        } else {
            uint64_t t = 0;
            CHECK_STATUS(sw_store_read_submit(s, N, keys, dst, STRIPE, &t), SW_OK);
            CHECK_STATUS(sw_store_read_wait(s, t, N, lens, NULL, sts), SW_OK);
        }
        int ok = 1;
        for (uint32_t i = 0; i < N; i++)
            ok &= sts[i] == SW_OK && lens[i] == STRIPE && ts_check(data[i], STRIPE, &keys[i], i);
        CHECK(ok);
    }
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

int main(void)
{
    ts_dir d;
    ts_dir_make(&d, "capacity");
    char sub[300];
    snprintf(sub, sizeof sub, "%s/evict", d.base);
    test_evict(sub);
    snprintf(sub, sizeof sub, "%s/refuse", d.base);
    test_refuse(sub);
    snprintf(sub, sizeof sub, "%s/geometry", d.base);
    test_geometry(sub);
    snprintf(sub, sizeof sub, "%s/self", d.base);
    test_self_evict(sub);
    snprintf(sub, sizeof sub, "%s/longrun", d.base);
    test_long_run_read(sub);
    ts_rm_rf(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_capacity: %d failures\n", sw_test_failures);
    return sw_test_failures ? 1 : 0;
}
