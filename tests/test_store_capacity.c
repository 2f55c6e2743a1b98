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
    ts_rm_rf(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_capacity: %d failures\n", sw_test_failures);
    return sw_test_failures ? 1 : 0;
}
