/* Block store integrity: a flipped byte in an extent's payload or header
 * yields SW_STATUS_CORRUPT for that key only (never bytes), counted in
 * stats; a journal cut mid-record recovers every complete record, takes the
 * cut one from the data file and keeps working; a record with a bad
 * checksum in the middle makes its key unprovable (CORRUPT, never its older
 * state), until sw_store_repair drops it; a flipped byte in a host-tier
 * copy is never served either (CORRUPT, dst zeros, the copy dropped, the
 * next read from the file). (Every byte, page and cut of the journal:
 * test_store_journal_damage.) */
#include "test_store_util.h"
#include "store/host_lease.h"

#define STRIPE 8192u
#define RUN 8u
#define N 24

static sw_store_key key_of(int i) { return ts_key(9, 1, (uint32_t)i, 0, SW_STORE_KIND_V); }

static void write_all(sw_store *s, uint64_t *gens, int from, int to)
{
    uint8_t buf[STRIPE];
    for (int i = from; i < to; i++) {
        sw_store_key k = key_of(i);
        ts_fill(buf, STRIPE, &k, 1);
        CHECK_STATUS(sw_store_write(s, &k, buf, STRIPE, &gens[i]), SW_OK);
    }
}

/* Returns the number of keys OK; bad_key must have status want_bad and its
 * destination must hold none of its bytes: untouched, or, with `wiped` (a
 * payload that failed its CRC after it was copied), all zeros. */
static int read_all_w(sw_store *s, int n, int bad_key, sw_status want_bad, int wiped)
{
    sw_store_key keys[N];
    void *dst[N];
    sw_status sts[N];
    uint8_t *mem = malloc((size_t)N * STRIPE);
    memset(mem, 0xee, (size_t)N * STRIPE);
    for (int i = 0; i < n; i++) {
        keys[i] = key_of(i);
        dst[i] = mem + (size_t)i * STRIPE;
    }
    sw_status r = sw_store_read(s, (size_t)n, keys, dst, STRIPE, NULL, NULL, sts);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        if (i == bad_key) {
            CHECK_STATUS(sts[i], want_bad);
            /* never bytes: the destination is untouched, or wiped to zeros
             * when the payload failed its CRC while it was copied */
            const uint8_t *d = (const uint8_t *)dst[i];
            int clean = 1;
            for (size_t k = 0; k < STRIPE; k++)
                clean &= d[k] == (wiped ? 0x00 : 0xee);
            CHECK(want_bad == SW_OK || clean);
            continue;
        }
        CHECK_STATUS(sts[i], SW_OK);
        CHECK(ts_check(dst[i], STRIPE, &keys[i], 1));
        ok += sts[i] == SW_OK;
    }
    if (bad_key >= 0 && want_bad != SW_OK)
        CHECK(r == want_bad);
    free(mem);
    return ok;
}

static int read_all(sw_store *s, int n, int bad_key, sw_status want_bad)
{
    return read_all_w(s, n, bad_key, want_bad, 0);
}

static void test_flip(const char *dir, int in_header)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, 4);
    sw_store *s = NULL;
    uint64_t gens[N];
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    write_all(s, gens, 0, N);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    const int victim = 13;
    sw_store_key vk = key_of(victim);
    long long pay = -1, hdr = ts_find_extent(dir, &vk, gens[victim], STRIPE, RUN, &pay);
    CHECK(hdr >= 0);
    CHECK(ts_flip_byte(dir, "data", in_header ? hdr + 30 : pay + 5000) == 0);
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    CHECK(read_all_w(s, N, victim, SW_STATUS_CORRUPT, !in_header) == N - 1);
    sw_store_stats st = ts_stats(s);
    CHECK(st.corruptions == 1);
    /* Reading it alone again: still corrupt, counted again. */
    uint8_t buf[STRIPE];
    memset(buf, 0xee, STRIPE);
    CHECK_STATUS(ts_read1(s, &vk, buf, STRIPE, NULL, NULL), SW_STATUS_CORRUPT);
    for (size_t k = 0; k < STRIPE; k++)
        CHECK(buf[k] == (in_header ? 0xee : 0x00));
    CHECK(ts_stats(s).corruptions == 2);
    /* Overwriting the key heals it. */
    ts_fill(buf, STRIPE, &vk, 1);
    CHECK_STATUS(sw_store_write(s, &vk, buf, STRIPE, NULL), SW_OK);
    CHECK(read_all(s, N, -1, SW_OK) == N);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

static long long file_size(const char *dir, const char *name)
{
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void test_journal_cut(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, 4);
    sw_store *s = NULL;
    uint64_t gens[N];
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    write_all(s, gens, 0, 10);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    long long jsz = file_size(dir, "journal");
    CHECK(jsz == 11 * SW_STORE_REC_BYTES); /* the snapshot record + 10 puts */
    /* Cut the last record in the middle: its put is the newest extent of
     * the data file, one past the journal's last record, and complete, so
     * it is taken from there (as after a writer killed before its record). */
    char path[700];
    snprintf(path, sizeof path, "%s/journal", dir);
    CHECK(truncate(path, jsz - 30) == 0);
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    sw_store_stats st = ts_stats(s);
    CHECK(st.journal_dropped == 1 && st.extents_used == 10 && st.journal_recovered == 1);
    CHECK(st.keys_unprovable == 0 && st.journal_damaged == 0);
    CHECK(read_all(s, 10, -1, SW_OK) == 10);
    /* The store keeps working: the rest is written and survives a reopen. */
    write_all(s, gens, 10, N);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    CHECK(ts_stats(s).journal_dropped == 0);
    CHECK(read_all(s, N, -1, SW_OK) == N);
    CHECK_STATUS(sw_store_close(s), SW_OK);

    /* A bad checksum in the middle drops that record only: key 4's put is
     * lost, later records still apply. Compaction then rewrites the journal
     * without it. */
    jsz = file_size(dir, "journal");
    long long nrec = jsz / SW_STORE_REC_BYTES;
    int victim_rec = -1;
    FILE *f = fopen(path, "rb");
    for (long long r = 0; f && r < nrec; r++) {
        uint8_t rec[SW_STORE_REC_BYTES];
        sw_store_record rr;
        fseek(f, r * SW_STORE_REC_BYTES, SEEK_SET);
        if (fread(rec, 1, sizeof rec, f) == sizeof rec &&
            sw_store_decode_record(rec, sizeof rec, &rr) == SW_OK && rr.key.block == 4)
            victim_rec = (int)r;
    }
    if (f)
        fclose(f);
    CHECK(victim_rec >= 0 && victim_rec < nrec - 1);
    CHECK(ts_flip_byte(dir, "journal", (long long)victim_rec * SW_STORE_REC_BYTES + 20) == 0);
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    st = ts_stats(s);
    CHECK(st.journal_dropped == 1 && st.extents_used == N - 1 && st.keys_unprovable == 1 &&
          st.journal_damaged == 1);
    CHECK(read_all(s, N, 4, SW_STATUS_CORRUPT) == N - 1);
    CHECK(strstr(sw_last_error(), "cannot be proven current") != NULL);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    /* Still so after a reopen (nothing was compacted away), and verify
     * says so. */
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    CHECK(ts_stats(s).keys_unprovable == 1);
    CHECK(read_all(s, N, 4, SW_STATUS_CORRUPT) == N - 1);
    sw_store_verify_result vr;
    memset(&vr, 0, sizeof vr);
    vr.struct_size = sizeof vr;
    CHECK_STATUS(sw_store_verify(s, NULL, NULL, &vr), SW_STATUS_CORRUPT);
    CHECK(vr.keys_unprovable == 1 && vr.journal_dropped == 1 && vr.extents_corrupt == 0);
    /* Repair drops it: NOT_FOUND from now on, verify clean, after a reopen too. */
    sw_store_repair_result rr;
    memset(&rr, 0, sizeof rr);
    rr.struct_size = sizeof rr;
    CHECK_STATUS(sw_store_repair(s, &rr), SW_OK);
    CHECK(rr.keys_dropped_unprovable == 1 && rr.keys_dropped_corrupt == 0);
    CHECK(read_all(s, N, 4, SW_STATUS_NOT_FOUND) == N - 1);
    CHECK_STATUS(sw_store_verify(s, NULL, NULL, &vr), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    st = ts_stats(s);
    CHECK(st.keys_unprovable == 0 && st.journal_dropped == 0 && st.journal_damaged == 0);
    CHECK(read_all(s, N, 4, SW_STATUS_NOT_FOUND) == N - 1);
    CHECK_STATUS(sw_store_verify(s, NULL, NULL, &vr), SW_OK);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

/* A byte flipped in a host-tier copy (RAM): the read that hits it says
 * CORRUPT for that key only and wipes its destination, the copy leaves the
 * tier, and the next read serves the file's bytes. */
static void test_host_flip(const char *dir)
{
    sw_store_config c = ts_config(dir, STRIPE, RUN, 4);
    c.host_tier_bytes = (uint64_t)N * STRIPE;
    sw_store *s = NULL;
    uint64_t gens[N];
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return;
    write_all(s, gens, 0, N);
    CHECK(read_all(s, N, -1, SW_OK) == N);
    const sw_store_stats a = ts_stats(s);
    CHECK(a.host_hits >= N); /* the tier holds every key */
    const int victim = 5;
    const sw_store_key vk = key_of(victim);
    CHECK_STATUS(sw_store_test_host_poke(s, &vk, 1000, 0x04), SW_OK);
    CHECK(read_all_w(s, N, victim, SW_STATUS_CORRUPT, 1) == N - 1);
    const sw_store_stats b = ts_stats(s);
    CHECK(b.corruptions == a.corruptions + 1);
    CHECK_STATUS(sw_store_test_host_poke(s, &vk, 1000, 0x04), SW_STATUS_NOT_FOUND);
    CHECK(read_all(s, N, -1, SW_OK) == N);
    const sw_store_stats e = ts_stats(s);
    CHECK(e.file_hits > b.file_hits);
    CHECK_STATUS(sw_store_close(s), SW_OK);
}

int main(void)
{
    ts_dir d;
    ts_dir_make(&d, "corrupt");
    char sub[300];
    snprintf(sub, sizeof sub, "%s/payload", d.base);
    test_flip(sub, 0);
    snprintf(sub, sizeof sub, "%s/header", d.base);
    test_flip(sub, 1);
    snprintf(sub, sizeof sub, "%s/journal", d.base);
    test_journal_cut(sub);
    snprintf(sub, sizeof sub, "%s/host", d.base);
    test_host_flip(sub);
    ts_rm_rf(d.base);
    if (sw_test_failures)
        fprintf(stderr, "test_store_corrupt: %d failures\n", sw_test_failures);
    return sw_test_failures ? 1 : 0;
}
