/* The store's own decisions (sw_store_tuning_decide, store_internal.h)
 * against the rules its header states, on the CPU: the defaults by I/O
 * backend, the in-flight cap from the config (and an older config without
 * the field), the window from the cap and the bounce buffer, overrides
 * kept, and the limits applied to defaults and overrides alike (a cut of at
 * least one extent, a merge of at most 1 GiB and more than a run, a window
 * smaller than the buffer). Then the NAME=VALUE parser (unknown names and
 * bad values refused, the tuning unchanged), and sw_store_open_tuned: a
 * compaction threshold of 0 compacts the journal at the next open where
 * the default does not, and a read cut into 16 KiB pieces issues a device
 * request per piece. */
#include "test_store_util.h"

#include <stddef.h>

#define KIB ((int64_t)1 << 10)
#define MIB ((int64_t)1 << 20)

static sw_store_facts facts(sw_store_io_backend b, uint64_t bounce)
{
    /* 8 KiB stripes, 64 per run: extents of 8 KiB, runs of 4 KiB + 512 KiB */
    sw_store_facts f = {b, 8192, 4096 + 64 * 8192, bounce};
    return f;
}

static void test_defaults(void)
{
    sw_store_config c;
    sw_store_config_init(&c);
    sw_store_tuning t;
    sw_store_facts f = facts(SW_STORE_IO_URING, 8 * MIB);
    sw_store_tuning_decide(&c, &f, NULL, &t);
    CHECK(t.read_chunk_bytes == 128 * KIB);
    CHECK(t.ticket_chunk_bytes == 0);
    CHECK(t.read_merge_bytes == 4 * MIB);
    CHECK(t.read_gap_bytes == 64 * KIB);
    CHECK(t.read_inflight_bytes == 4 * MIB);
    CHECK(t.read_window_bytes == 8 * MIB); /* 2 x cap: cap is half the buffer */
    CHECK(t.compact_min_records == 4096);
    CHECK(t.io_mem_register == 1);
    /* write groups: what the buffer holds, a header page and an extent each */
    CHECK(t.write_group_puts == 8 * MIB / (4096 + 8192));
    {
        sw_store_facts big = facts(SW_STORE_IO_URING, 256 * MIB), tiny = f;
        tiny.bounce_bytes = 4096; /* less than one put: still one */
        sw_store_tuning w;
        sw_store_tuning_decide(&c, &big, NULL, &t);
        CHECK(t.write_group_puts == 4096); /* at most 4096 */
        sw_store_tuning_decide(&c, &tiny, NULL, &t);
        CHECK(t.write_group_puts == 1);
        sw_store_tuning_auto(&w);
        w.write_group_puts = 1 << 20; /* more than the room: the room */
        sw_store_tuning_decide(&c, &f, &w, &t);
        CHECK(t.write_group_puts == 8 * MIB / (4096 + 8192));
        w.write_group_puts = 0; /* a group of none: one */
        sw_store_tuning_decide(&c, &f, &w, &t);
        CHECK(t.write_group_puts == 1);
        w.write_group_puts = 16;
        sw_store_tuning_decide(&c, &f, &w, &t);
        CHECK(t.write_group_puts == 16);
        CHECK_STATUS(sw_store_tuning_parse(&w, "write_group_puts=7"), SW_OK);
        CHECK(w.write_group_puts == 7);
    }

    /* the pread fallback runs pieces one after another: uncut */
    f = facts(SW_STORE_IO_PREAD, 8 * MIB);
    sw_store_tuning_decide(&c, &f, NULL, &t);
    CHECK(t.read_chunk_bytes == 0);
    CHECK(t.ticket_chunk_bytes == 0);

    /* an all-automatic request decides as NULL does */
    sw_store_tuning want, t2;
    sw_store_tuning_auto(&want);
    sw_store_tuning_decide(&c, &f, &want, &t2);
    CHECK(memcmp(&t, &t2, sizeof t) == 0);

    /* a cap over half the buffer: the whole buffer is the window */
    f = facts(SW_STORE_IO_URING, 6 * MIB);
    sw_store_tuning_decide(&c, &f, NULL, &t);
    CHECK(t.read_window_bytes == 0);
}

static void test_config_cap(void)
{
    sw_store_config c;
    sw_store_config_init(&c);
    c.read_inflight_bytes = 16 * MIB;
    sw_store_tuning t;
    sw_store_facts f = facts(SW_STORE_IO_URING, 64 * MIB);
    sw_store_tuning_decide(&c, &f, NULL, &t);
    CHECK(t.read_inflight_bytes == 16 * MIB);
    CHECK(t.read_window_bytes == 32 * MIB);
    f = facts(SW_STORE_IO_URING, 16 * MIB);
    sw_store_tuning_decide(&c, &f, NULL, &t);
    CHECK(t.read_window_bytes == 0);

    /* a caller compiled before the field: the default */
    c.struct_size = (uint32_t)offsetof(sw_store_config, read_inflight_bytes);
    sw_store_tuning_decide(&c, &f, NULL, &t);
    CHECK(t.read_inflight_bytes == 4 * MIB);

    /* an override wins over the config */
    c.struct_size = sizeof c;
    sw_store_tuning want;
    sw_store_tuning_auto(&want);
    want.read_inflight_bytes = 0; /* no limit: the whole buffer is the window */
    sw_store_tuning_decide(&c, &f, &want, &t);
    CHECK(t.read_inflight_bytes == 0);
    CHECK(t.read_window_bytes == 0);
}

static void test_overrides_and_limits(void)
{
    sw_store_config c;
    sw_store_config_init(&c);
    sw_store_facts f = facts(SW_STORE_IO_URING, 8 * MIB);
    sw_store_tuning want, t;
    sw_store_tuning_auto(&want);
    want.read_chunk_bytes = 1000;      /* below one extent: one extent */
    want.ticket_chunk_bytes = 16 * KIB;
    want.read_merge_bytes = 2LL << 30; /* over 1 GiB: 1 GiB */
    want.read_gap_bytes = 0;
    want.read_window_bytes = 512 * KIB;
    want.compact_min_records = 0;
    want.io_mem_register = 5;          /* any non-zero: 1 */
    sw_store_tuning_decide(&c, &f, &want, &t);
    CHECK(t.read_chunk_bytes == 8192);
    CHECK(t.ticket_chunk_bytes == 16 * KIB);
    CHECK(t.read_merge_bytes == (int64_t)1 << 30);
    CHECK(t.read_gap_bytes == 0);
    CHECK(t.read_inflight_bytes == 4 * MIB);
    CHECK(t.read_window_bytes == 512 * KIB);
    CHECK(t.compact_min_records == 0);
    CHECK(t.io_mem_register == 1);

    want.read_chunk_bytes = 0;         /* uncut even on io_uring */
    want.read_merge_bytes = 4096 + 64 * 8192; /* not above one run: no merge */
    want.read_window_bytes = 8 * MIB;  /* the whole buffer */
    want.io_mem_register = 0;
    sw_store_tuning_decide(&c, &f, &want, &t);
    CHECK(t.read_chunk_bytes == 0);
    CHECK(t.read_merge_bytes == 0);
    CHECK(t.read_window_bytes == 0);
    CHECK(t.io_mem_register == 0);
}

static void test_parse(void)
{
    sw_store_tuning t, before;
    sw_store_tuning_auto(&t);
    CHECK_STATUS(sw_store_tuning_parse(&t, "read_chunk_bytes=16384,ticket_chunk_bytes=16384"),
                 SW_OK);
    CHECK(t.read_chunk_bytes == 16384 && t.ticket_chunk_bytes == 16384);
    CHECK(t.read_merge_bytes == SW_STORE_TUNE_AUTO);
    CHECK_STATUS(sw_store_tuning_parse(&t, "read_window_bytes=0,read_inflight_bytes=1048576"),
                 SW_OK);
    CHECK(t.read_window_bytes == 0 && t.read_inflight_bytes == 1048576);
    CHECK_STATUS(sw_store_tuning_parse(&t, "read_chunk_bytes=-1"), SW_OK);
    CHECK(t.read_chunk_bytes == SW_STORE_TUNE_AUTO);
    CHECK_STATUS(sw_store_tuning_parse(&t, ""), SW_OK);
    before = t;
    const char *bad[] = {"read_chunk=5", "read_chunk_bytes", "read_chunk_bytes=",
                         "read_chunk_bytes=12k", "read_chunk_bytes=-2",
                         "compact_min_records=1,bogus=2", "io_mem_register=1,,",
                         "read_gap_bytes=99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sw_status st = sw_store_tuning_parse(&t, bad[i]);
        if (st != SW_STATUS_INVALID)
            fprintf(stderr, "parse '%s' gave %s\n", bad[i], sw_status_str(st));
        CHECK(st == SW_STATUS_INVALID);
        CHECK(memcmp(&t, &before, sizeof t) == 0);
    }
    CHECK_STATUS(sw_store_tuning_parse(NULL, "read_gap_bytes=1"), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_tuning_parse(&t, NULL), SW_STATUS_INVALID);
}

/* Journal records of a store after some overwrites; `compact0` opens it
 * with compact_min_records = 0. */
static uint64_t records_after_reopen(const char *dir, int compact0)
{
    sw_store_config c = ts_config(dir, 8192, 16, 8);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return 0;
    uint8_t buf[8192];
    for (uint32_t round = 0; round < 5; round++)
        for (uint32_t b = 0; b < 8; b++) {
            sw_store_key k = ts_key(3, 0, b, 0, SW_STORE_KIND_K);
            ts_fill(buf, sizeof buf, &k, round);
            CHECK_STATUS(sw_store_write(s, &k, buf, sizeof buf, NULL), SW_OK);
        }
    CHECK_STATUS(sw_store_close(s), SW_OK);
    sw_store_tuning t;
    sw_store_tuning_auto(&t);
    if (compact0)
        t.compact_min_records = 0;
    s = NULL;
    CHECK_STATUS(sw_store_open_tuned(&c, &t, &s), SW_OK);
    if (!s)
        return 0;
    uint64_t n = ts_stats(s).journal_records;
    /* every key still reads back its last version */
    for (uint32_t b = 0; b < 8; b++) {
        sw_store_key k = ts_key(3, 0, b, 0, SW_STORE_KIND_K);
        uint8_t got[8192];
        CHECK_STATUS(ts_read1(s, &k, got, sizeof got, NULL, NULL), SW_OK);
        CHECK(ts_check(got, sizeof got, &k, 4));
    }
    CHECK_STATUS(sw_store_close(s), SW_OK);
    return n;
}

static void test_open_tuned(const char *base)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/default", base);
    uint64_t plain = records_after_reopen(dir, 0);
    snprintf(dir, sizeof dir, "%s/compact0", base);
    uint64_t compacted = records_after_reopen(dir, 1);
    /* 1 snapshot + 40 puts kept by default; snapshot + 8 live puts after */
    CHECK(plain == 41);
    CHECK(compacted == 9);

    /* one 64-extent range cut into 16 KiB pieces: 32 device requests */
    snprintf(dir, sizeof dir, "%s/chunk", base);
    sw_store_config c = ts_config(dir, 8192, 64, 4);
    sw_store_tuning t;
    sw_store_tuning_auto(&t);
    CHECK_STATUS(sw_store_tuning_parse(&t, "read_chunk_bytes=16384"), SW_OK);
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open_tuned(&c, &t, &s), SW_OK);
    if (!s)
        return;
    enum { N = 64 };
    static uint8_t mem[N][8192];
    sw_store_key keys[N];
    void *dst[N];
    sw_status sts[N];
    for (uint32_t b = 0; b < N; b++) {
        keys[b] = ts_key(5, 1, b, 2, SW_STORE_KIND_V);
        ts_fill(mem[b], 8192, &keys[b], 7);
        CHECK_STATUS(sw_store_write(s, &keys[b], mem[b], 8192, NULL), SW_OK);
        dst[b] = mem[b];
    }
    memset(mem, 0, sizeof mem);
    sw_store_stats a = ts_stats(s);
    CHECK_STATUS(sw_store_read(s, N, keys, dst, 8192, NULL, NULL, sts), SW_OK);
    sw_store_stats b = ts_stats(s);
    CHECK(b.read_requests - a.read_requests == 1);
    CHECK(b.read_ios - a.read_ios >= N * 8192 / 16384);
    for (uint32_t i = 0; i < N; i++)
        CHECK(ts_check(mem[i], 8192, &keys[i], 7));
    CHECK_STATUS(sw_store_close(s), SW_OK);

    CHECK_STATUS(sw_store_open_tuned(NULL, &t, &s), SW_STATUS_INVALID);
}

int main(void)
{
    test_defaults();
    test_config_cap();
    test_overrides_and_limits();
    test_parse();
    ts_dir d;
    ts_dir_make(&d, "tuning");
    test_open_tuned(d.base);
    ts_rm_rf(d.base);
    printf("store tuning: %d failed checks\n", sw_test_failures);
    return sw_test_failures ? 1 : 0;
}
