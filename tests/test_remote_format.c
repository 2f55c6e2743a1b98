/* Remote tier, pure parts: value encode/decode (every bit flip and every
 * truncation rejected), key names, CRC16 / cluster slots against Redis's
 * published values, the latency histogram. No server needed. */
#include "test_remote_util.h"

static void test_value(void)
{
    sw_rng rng = {0x5eed01};
    uint8_t buf[SW_REMOTE_HDR_BYTES + 300];
    for (int t = 0; t < 20; t++) {
        sw_remote_hdr h;
        memset(&h, 0, sizeof h);
        h.key = tr_key(sw_rng_next(&rng), (uint32_t)sw_rng_next(&rng),
                       (uint32_t)sw_rng_next(&rng), (uint16_t)sw_rng_next(&rng), t & 1);
        h.generation = sw_rng_next(&rng);
        h.length = (uint32_t)sw_rng_int(&rng, 0, 300);
        tr_fill(&h.key, (uint64_t)t, buf + SW_REMOTE_HDR_BYTES, h.length);
        sw_remote_encode_hdr(&h, buf + SW_REMOTE_HDR_BYTES, buf);
        size_t len = SW_REMOTE_HDR_BYTES + h.length;
        sw_remote_hdr d;
        CHECK_STATUS(sw_remote_decode_value(buf, len, &d), SW_OK);
        CHECK(sw_store_key_eq(&d.key, &h.key) && d.generation == h.generation &&
              d.length == h.length);
        /* every single-bit flip of header and payload is caught */
        size_t bad_accepted = 0;
        for (size_t i = 0; i < len; i++)
            for (int b = 0; b < 8; b++) {
                buf[i] ^= (uint8_t)(1u << b);
                if (sw_remote_decode_value(buf, len, &d) != SW_STATUS_CORRUPT)
                    bad_accepted++;
                buf[i] ^= (uint8_t)(1u << b);
            }
        CHECK(bad_accepted == 0);
        for (size_t l = 0; l < len; l++)
            CHECK(sw_remote_decode_value(buf, l, &d) == SW_STATUS_CORRUPT);
        CHECK(sw_remote_decode_value(NULL, 0, &d) == SW_STATUS_CORRUPT);
    }
    /* the key prefix is bound: the same key under another prefix, another
     * key, an older format version are each rejected for what they are */
    sw_remote_hdr h;
    memset(&h, 0, sizeof h);
    h.key = tr_key(5, 6, 7, 8, SW_STORE_KIND_V);
    h.generation = 3;
    h.prefix_hash = sw_remote_prefix_hash("tA:", 3);
    h.length = 10;
    memset(buf + SW_REMOTE_HDR_BYTES, 0x42, 10);
    sw_remote_encode_hdr(&h, buf + SW_REMOTE_HDR_BYTES, buf);
    sw_remote_hdr d;
    sw_remote_reject why = SW_REMOTE_REJECT_DAMAGED;
    CHECK(sw_remote_prefix_hash("tA:", 3) != sw_remote_prefix_hash("tB:", 3));
    CHECK(sw_remote_prefix_hash("", 0) != sw_remote_prefix_hash("sw:", 3));
    CHECK_STATUS(sw_remote_check_value(buf, 74, &h.key, sw_remote_prefix_hash("tA:", 3), &d,
                                       &why), SW_OK);
    CHECK(why == SW_REMOTE_REJECT_NONE && d.prefix_hash == h.prefix_hash && buf[5] == 2);
    CHECK_STATUS(sw_remote_check_value(buf, 74, &h.key, sw_remote_prefix_hash("tB:", 3), &d,
                                       &why), SW_STATUS_CORRUPT);
    CHECK(why == SW_REMOTE_REJECT_PREFIX);
    sw_store_key other = h.key;
    other.block++;
    CHECK_STATUS(sw_remote_check_value(buf, 74, &other, h.prefix_hash, &d, &why),
                 SW_STATUS_CORRUPT);
    CHECK(why == SW_REMOTE_REJECT_KEY);
    buf[5] = 1; /* a version 1 value (no prefix hash): its tenant is unproven */
    CHECK_STATUS(sw_remote_check_value(buf, 74, &h.key, h.prefix_hash, &d, &why),
                 SW_STATUS_CORRUPT);
    CHECK(why == SW_REMOTE_REJECT_VERSION);
    buf[5] = 2;
    buf[40] ^= 1; /* the prefix hash is under the CRC */
    CHECK_STATUS(sw_remote_check_value(buf, 74, &h.key, h.prefix_hash, &d, &why),
                 SW_STATUS_CORRUPT);
    CHECK(why == SW_REMOTE_REJECT_DAMAGED);
}

/* One whole-buffer scan with fresh state. */
static int scan1(const char *buf, size_t len, uint64_t max_bulk, uint64_t max_elems,
                 size_t max_frame, size_t *frame, size_t *need, int64_t *bulk)
{
    sw_resp_scan_state st;
    sw_resp_limits lim = {max_bulk, max_frame, max_elems};
    sw_resp_scan_init(&st);
    return sw_resp_scan(&st, buf, len, &lim, frame, need, bulk);
}

/* RESP framing: complete replies, what is still needed, lengths judged
 * from the length line alone, malformed input, the limits. */
static void test_resp_scan(void)
{
    size_t frame = 0, need = 0;
    int64_t bulk = 0;
#define SCANL(str, max, elems, fmax)                                                          \
    scan1(str, sizeof(str) - 1, max, elems, fmax, &frame, &need, &bulk)
#define SCAN(str, max) SCANL(str, max, 1000, (size_t)1 << 30)
    CHECK(SCAN("+OK\r\n", 0) == 1 && frame == 5);
    CHECK(SCAN("+OK\r\n+OK\r\n", 0) == 1 && frame == 5);
    CHECK(SCAN("$-1\r\n", 0) == 1 && frame == 5);
    CHECK(SCAN("$3\r\nabc\r\n", 3) == 1 && frame == 9);
    CHECK(SCAN("$3\r\nab", 3) == 0 && need == 9);
    CHECK(SCAN("$3\r\nabc\r\n", 2) == -2 && bulk == 3);
    CHECK(SCAN("$2147483648\r\n", 1u << 30) == -2 && bulk == 2147483648ll);
    CHECK(SCAN("$21474", 1u << 30) == 0 && need == 7);
    CHECK(SCAN("*2\r\n*1\r\n:1\r\n$1\r\nx\r\n", 10) == 1 && frame == 19);
    CHECK(SCAN("*2\r\n*1\r\n:1\r\n", 10) == 0);
    CHECK(SCAN("*0\r\n", 0) == 1 && frame == 4);
    CHECK(SCAN("*-1\r\n", 0) == 1 && frame == 5);
    CHECK(SCAN(":-42\r\n", 0) == 1 && frame == 6);
    CHECK(SCAN(":0\r\n", 0) == 1 && frame == 4);
    CHECK(SCAN("$0\r\n\r\n", 0) == 1 && frame == 6);
    CHECK(SCAN("$3\r\nabcd\r\n", 10) == -1);  /* no CRLF after the data */
    CHECK(SCAN("$-2\r\n", 10) == -1);
    CHECK(SCAN("$-0\r\n", 10) == -1);         /* only "-1" is negative */
    CHECK(SCAN("$-01\r\n", 10) == -1);
    CHECK(SCAN("$03\r\nabc\r\n", 10) == -1);  /* no leading zero */
    CHECK(SCAN("*01\r\n:1\r\n", 10) == -1);
    CHECK(SCAN("$x\r\n", 10) == -1);
    CHECK(SCAN(":12a\r\n", 10) == -1);        /* integers are digits */
    CHECK(SCAN(":\r\n", 10) == -1);
    CHECK(SCAN(":-\r\n", 10) == -1);
    /* integers as hiredis reads them: no leading zero, no "-0", int64 */
    CHECK(SCAN(":007\r\n", 10) == -1);
    CHECK(SCAN(":-07\r\n", 10) == -1);
    CHECK(SCAN(":-0\r\n", 10) == -1);
    CHECK(SCAN(":00\r\n", 10) == -1);
    CHECK(SCAN(":9223372036854775807\r\n", 10) == 1 && frame == 22);
    CHECK(SCAN(":9223372036854775808\r\n", 10) == -1);
    CHECK(SCAN(":9999999999999999999\r\n", 10) == -1);
    CHECK(SCAN(":-9223372036854775808\r\n", 10) == 1 && frame == 23);
    CHECK(SCAN(":-9223372036854775809\r\n", 10) == -1);
    CHECK(SCAN(":10000000000000000000\r\n", 10) == -1); /* 20 digits */
    CHECK(SCAN(":1000000000000000000\r\n", 10) == 1);   /* 19 digits, 1e18 */
    CHECK(SCAN(":-1\r\n", 10) == 1 && frame == 5);
    CHECK(SCAN(":10\r\n", 10) == 1 && frame == 5);
    CHECK(SCAN("?\r\n", 10) == -1);
    CHECK(SCAN("+OK\n", 10) == -1);
    CHECK(SCAN("*99999999\r\n", 10) == -1);     /* over max_elems */
    CHECK(SCAN("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", 10) == -1);
    /* elements count over all levels */
    CHECK(SCANL("*2\r\n*2\r\n:1\r\n:1\r\n:1\r\n", 10, 4, 1000) == 1);
    CHECK(SCANL("*2\r\n*2\r\n:1\r\n:1\r\n:1\r\n", 10, 3, 1000) == -1);
    /* no array at all where none may be: judged from the first line */
    CHECK(SCANL("*1\r\n", 10, 0, 1000) == -1);
    CHECK(SCANL("*0\r\n", 10, 0, 1000) == -1);
    CHECK(SCANL("$-1\r\n", 10, 0, 1000) == 1);
    /* the byte limit: judged before the bytes are in */
    CHECK(SCANL("+OK\r\n", 10, 0, 5) == 1);
    CHECK(SCANL("+OKOK", 10, 0, 5) == -1);
    CHECK(SCANL("$100\r\n", 200, 0, 50) == -1);
#undef SCAN
#undef SCANL

    /* Resumed scans agree with whole scans, whatever the read sizes. */
    static const char *replies[] = {
        "*3\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$4\r\nabcd\r\n"
        "$5\r\nhello\r\n*-1\r\n",
        "$10\r\n0123\n56789\r\n", "-MOVED 3999 127.0.0.1:6381\r\n", "*2\r\n*0\r\n$0\r\n\r\n",
        "*2\r\n$3\r\nabXd\r\n"};
    uint64_t seed = 0x5eed;
    for (size_t t = 0; t < sizeof replies / sizeof replies[0]; t++) {
        size_t len = strlen(replies[t]);
        size_t wf = 0, wn = 0, f = 0, nd = 0;
        int64_t wb = 0, b = 0;
        int want = scan1(replies[t], len, 100, 100, 1u << 20, &wf, &wn, &wb);
        for (int rep = 0; rep < 50; rep++) {
            sw_resp_scan_state st;
            sw_resp_limits lim = {100, 1u << 20, 100};
            sw_resp_scan_init(&st);
            size_t have = 0;
            int rc = 0;
            while (have < len) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                have += 1 + (size_t)((seed >> 33) % 7);
                if (have > len)
                    have = len;
                rc = sw_resp_scan(&st, replies[t], have, &lim, &f, &nd, &b);
                if (rc != 0)
                    break;
                CHECK(nd > have);
            }
            if (rc != want || (rc == 1 && f != wf)) {
                fprintf(stderr, "reply %zu, seed %llx: resumed %d, whole %d\n", t,
                        (unsigned long long)seed, rc, want);
                CHECK(0);
            }
        }
    }

    /* A 16 MiB array of 4-byte elements received in 64 KB reads is scanned
     * once in all: rescanning from byte 0 after every read took 5.9 s. */
    {
        size_t n = (size_t)4 << 20, len = 12 + 4 * n;
        char *buf = malloc(len);
        CHECK(buf != NULL);
        if (buf) {
            size_t hl = (size_t)sprintf(buf, "*%zu\r\n", n);
            for (size_t i = 0; i < n; i++)
                memcpy(buf + hl + 4 * i, ":1\r\n", 4);
            len = hl + 4 * n;
            sw_resp_scan_state st;
            sw_resp_limits lim = {10, (size_t)32 << 20, (uint64_t)8 << 20};
            sw_resp_scan_init(&st);
            double t0 = sw_now_seconds();
            int rc = 0;
            size_t f = 0, nd = 0;
            int64_t b = 0;
            for (size_t have = 65536; rc == 0; have += 65536)
                rc = sw_resp_scan(&st, buf, have < len ? have : len, &lim, &f, &nd, &b);
            double secs = sw_now_seconds() - t0;
            printf("16 MiB array in 64 KB reads: scanned in %.1f ms\n", secs * 1e3);
            CHECK(rc == 1 && f == len);
            CHECK(secs < 0.5);
            free(buf);
        }
    }
}

static void test_names_and_slots(void)
{
    /* Redis Cluster spec: CRC16("123456789") = 0x31C3 */
    CHECK(sw_remote_crc16("123456789", 9) == 0x31c3);
    /* values from CLUSTER KEYSLOT */
    CHECK(sw_remote_key_slot("foo", 3) == 12182);
    CHECK(sw_remote_key_slot("bar", 3) == 5061);
    CHECK(sw_remote_key_slot("{user1000}.following", 20) ==
          sw_remote_key_slot("{user1000}.followers", 20));
    CHECK(sw_remote_key_slot("{user1000}.following", 20) == sw_remote_key_slot("user1000", 8));
    CHECK(sw_remote_key_slot("foo{}{bar}", 10) == sw_remote_crc16("foo{}{bar}", 10) % 16384);
    CHECK(sw_remote_key_slot("foo{{bar}}zap", 13) == sw_remote_key_slot("{bar", 4));

    char name[SW_REMOTE_MAX_KEY];
    sw_store_key k = tr_key(0xab, 3, 17, 2, SW_STORE_KIND_K);
    size_t n = sw_remote_key_name("sw:", 3, &k, name);
    CHECK(n == strlen("sw:00000000000000ab:3:17:2:k") &&
          !memcmp(name, "sw:00000000000000ab:3:17:2:k", n));
    k = tr_key(UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT16_MAX, SW_STORE_KIND_V);
    char prefix[SW_REMOTE_MAX_PREFIX];
    memset(prefix, 'p', sizeof prefix);
    n = sw_remote_key_name(prefix, sizeof prefix, &k, name);
    CHECK(n <= SW_REMOTE_MAX_KEY && name[n - 1] == 'v');
}

static void test_hist(void)
{
    sw_remote_hist h;
    memset(&h, 0, sizeof h);
    CHECK(sw_remote_hist_quantile(&h, 0.5) == 0);
    for (uint64_t i = 1; i <= 1000; i++)
        sw_remote_hist_add(&h, i * 10); /* 10 us .. 10 ms */
    uint64_t p50 = sw_remote_hist_quantile(&h, 0.5), p99 = sw_remote_hist_quantile(&h, 0.99);
    CHECK(p50 >= 5000 && p50 <= 5000 * 1.13);
    CHECK(p99 >= 9900 && p99 <= 10000);
    CHECK(sw_remote_hist_quantile(&h, 1.0) == 10000);
    sw_remote_hist_add(&h, UINT64_MAX / 2); /* clamps into the last bucket */
    CHECK(h.max_us == UINT64_MAX / 2);
}

int main(void)
{
    test_value();
    test_resp_scan();
    test_names_and_slots();
    test_hist();
    if (sw_test_failures) {
        fprintf(stderr, "test_remote_format: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_remote_format: ok\n");
    return 0;
}
