/* Remote tier against one redis-server: random keys and sizes round trip
 * in pipelined batches, overwrite, delete, misses, namespace and prefix
 * isolation, two handles sharing blocks, argument errors, stats. */
#include "test_remote_util.h"

#define MAXV 20000

static void roundtrip(sw_remote *a, sw_remote *b, uint64_t seed)
{
    sw_rng rng = {seed};
    enum { N = 300 };
    sw_store_key keys[N];
    const void *srcs[N];
    void *dst[N];
    size_t lens[N], got_len[N];
    uint64_t gens[N], got_gen[N];
    sw_status st[N];
    uint8_t *pool = malloc((size_t)N * MAXV), *out = malloc((size_t)N * MAXV);
    for (int i = 0; i < N; i++) {
        keys[i] = tr_key(sw_rng_next(&rng) % 5, (uint32_t)sw_rng_int(&rng, 0, 80),
                         (uint32_t)i, (uint16_t)sw_rng_int(&rng, 0, 7), i & 1);
        lens[i] = (size_t)sw_rng_int(&rng, 0, MAXV);
        if (i % 50 == 0)
            lens[i] = 0;
        gens[i] = sw_rng_next(&rng);
        tr_fill(&keys[i], seed, pool + (size_t)i * MAXV, lens[i]);
        srcs[i] = pool + (size_t)i * MAXV;
        dst[i] = out + (size_t)i * MAXV;
    }
    CHECK_STATUS(sw_remote_put_batch(a, N, keys, srcs, lens, gens, st), SW_OK);
    /* read back through the other handle, in uneven batches */
    memset(out, 0xee, (size_t)N * MAXV);
    for (int i = 0; i < N;) {
        int m = sw_rng_int(&rng, 1, 90);
        if (i + m > N)
            m = N - i;
        CHECK_STATUS(sw_remote_get_batch(b, (size_t)m, keys + i, dst + i, MAXV, got_len + i,
                                         got_gen + i, st + i),
                     SW_OK);
        i += m;
    }
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (st[i] != SW_OK || got_len[i] != lens[i] || got_gen[i] != gens[i] ||
            memcmp(dst[i], srcs[i], lens[i]))
            bad++;
    if (bad)
        fprintf(stderr, "roundtrip seed %llu: %d bad keys\n", (unsigned long long)seed, bad);
    CHECK(bad == 0);
    free(pool);
    free(out);
}

int main(void)
{
    tr_init("remote_basic");
    tr_server srv;
    tr_start(&srv, 0, NULL);
    sw_remote_config c = tr_config(srv.port);
    c.max_pipeline = 16; /* several chunks per batch */
    sw_remote *a = NULL, *b = NULL;
    CHECK_STATUS(sw_remote_open(&c, &a), SW_OK);
    c = tr_config(srv.port);
    CHECK_STATUS(sw_remote_open(&c, &b), SW_OK);
    if (!a || !b)
        return 1;
    CHECK(sw_remote_available() == 1);

    double t0 = tr_now();
    roundtrip(a, a, 11);
    roundtrip(a, b, 12); /* two handles share blocks */
    roundtrip(b, a, 13); /* overwrites of the same keys with new contents */
    printf("round trips: %.2f s\n", tr_now() - t0);

    /* miss, delete, overwrite, isolation */
    sw_store_key k = tr_key(7, 1, 2, 3, SW_STORE_KIND_V);
    uint8_t v1[100], v2[50], got[200];
    tr_fill(&k, 1, v1, sizeof v1);
    tr_fill(&k, 2, v2, sizeof v2);
    void *d[1] = {got};
    const void *s1[1] = {v1}, *s2[1] = {v2};
    size_t l1 = sizeof v1, l2 = sizeof v2, gl = 99;
    uint64_t gg = 99;
    sw_status st;
    memset(got, 0x5a, sizeof got);
    CHECK_STATUS(sw_remote_get_batch(a, 1, &k, d, sizeof got, &gl, &gg, &st),
                 SW_STATUS_NOT_FOUND);
    CHECK(st == SW_STATUS_NOT_FOUND && gl == 0 && gg == 0 && got[0] == 0x5a);
    CHECK(strstr(sw_last_error(), "not in the remote tier") != NULL); /* (was empty) */
    CHECK_STATUS(sw_remote_put_batch(a, 1, &k, s1, &l1, NULL, &st), SW_OK);
    CHECK_STATUS(sw_remote_put_batch(b, 1, &k, s2, &l2, NULL, &st), SW_OK);
    CHECK_STATUS(sw_remote_get_batch(a, 1, &k, d, sizeof got, &gl, &gg, &st), SW_OK);
    CHECK(gl == sizeof v2 && gg == 0 && !memcmp(got, v2, sizeof v2));
    /* dst too small: INVALID, dst untouched */
    memset(got, 0x5a, sizeof got);
    CHECK_STATUS(sw_remote_get_batch(a, 1, &k, d, 10, &gl, NULL, &st), SW_STATUS_INVALID);
    CHECK(got[0] == 0x5a);
    /* other namespace, other prefix: a miss, never these bytes */
    sw_store_key k2 = k;
    k2.ns = 8;
    CHECK_STATUS(sw_remote_get_batch(a, 1, &k2, d, sizeof got, &gl, NULL, &st),
                 SW_STATUS_NOT_FOUND);
    sw_remote_config cp = tr_config(srv.port);
    cp.prefix = "tenant2:";
    sw_remote *p = NULL;
    CHECK_STATUS(sw_remote_open(&cp, &p), SW_OK);
    CHECK_STATUS(sw_remote_get_batch(p, 1, &k, d, sizeof got, &gl, NULL, &st),
                 SW_STATUS_NOT_FOUND);
    sw_remote_close(p);
    CHECK_STATUS(sw_remote_delete(b, &k), SW_OK);
    CHECK_STATUS(sw_remote_delete(b, &k), SW_STATUS_NOT_FOUND);
    CHECK(strstr(sw_last_error(), "not in the remote tier") != NULL);
    CHECK_STATUS(sw_remote_get_batch(a, 1, &k, d, sizeof got, &gl, NULL, &st),
                 SW_STATUS_NOT_FOUND);

    /* argument errors */
    sw_remote *none = (sw_remote *)1;
    CHECK_STATUS(sw_remote_open(NULL, &none), SW_STATUS_INVALID);
    CHECK(none == NULL);
    sw_remote_config bad = tr_config(srv.port);
    bad.struct_size = 8;
    CHECK_STATUS(sw_remote_open(&bad, &none), SW_STATUS_INVALID);
    bad = tr_config(srv.port);
    bad.endpoints = "127.0.0.1";
    CHECK_STATUS(sw_remote_open(&bad, &none), SW_STATUS_INVALID);
    bad.endpoints = "127.0.0.1:99999";
    CHECK_STATUS(sw_remote_open(&bad, &none), SW_STATUS_INVALID);
    bad.endpoints = "127.0.0.1:1,127.0.0.1:2";
    CHECK_STATUS(sw_remote_open(&bad, &none), SW_STATUS_INVALID); /* standalone, 2 */
    bad = tr_config(srv.port);
    bad.command_timeout_ms = 0;
    CHECK_STATUS(sw_remote_open(&bad, &none), SW_STATUS_INVALID);
    bad = tr_config(tr_dead_port()); /* nobody listens: refused */
    bad.connect_timeout_ms = 200;
    double tc = tr_now();
    CHECK_STATUS(sw_remote_open(&bad, &none), SW_STATUS_IO);
    CHECK(tr_now() - tc < 1.0);
    printf("unreachable: %s\n", sw_last_error());
    bad = tr_config(srv.port);
    bad.cluster = 1; /* a server without cluster support */
    CHECK_STATUS(sw_remote_open(&bad, &none), SW_STATUS_INVALID);
    printf("cluster on standalone: %s\n", sw_last_error());
    sw_store_key kb = k;
    kb.reserved = 1;
    CHECK_STATUS(sw_remote_put_batch(a, 1, &kb, s1, &l1, NULL, &st), SW_STATUS_INVALID);
    kb = k;
    kb.kind = 2;
    CHECK_STATUS(sw_remote_get_batch(a, 1, &kb, d, sizeof got, NULL, NULL, &st),
                 SW_STATUS_INVALID);
    CHECK_STATUS(sw_remote_get_batch(a, 1, &k, NULL, sizeof got, NULL, NULL, &st),
                 SW_STATUS_INVALID);
    CHECK_STATUS(sw_remote_put_batch(NULL, 1, &k, s1, &l1, NULL, &st), SW_STATUS_INVALID);
    const void *nulls[1] = {NULL};
    CHECK_STATUS(sw_remote_put_batch(a, 1, &k, nulls, &l1, NULL, &st), SW_STATUS_INVALID);
    size_t huge = c.max_value_bytes + 1u;
    CHECK_STATUS(sw_remote_put_batch(a, 1, &k, s1, &huge, NULL, &st), SW_STATUS_INVALID);
    CHECK_STATUS(sw_remote_get_batch(a, 0, NULL, NULL, 0, NULL, NULL, NULL), SW_OK);
    CHECK_STATUS(sw_remote_delete(a, NULL), SW_STATUS_INVALID);

    sw_remote_stats rs;
    memset(&rs, 0, sizeof rs);
    rs.struct_size = sizeof rs;
    CHECK_STATUS(sw_remote_get_stats(a, &rs), SW_OK);
    printf("a: gets %llu hits %llu misses %llu not_found %llu errors %llu puts %llu "
           "bytes r/w %llu/%llu get p50 %llu us p99 %llu us put p50 %llu us p99 %llu us\n",
           (unsigned long long)rs.gets, (unsigned long long)rs.hits,
           (unsigned long long)rs.misses, (unsigned long long)rs.not_found,
           (unsigned long long)rs.errors, (unsigned long long)rs.puts,
           (unsigned long long)rs.bytes_read, (unsigned long long)rs.bytes_written,
           (unsigned long long)rs.get_p50_us, (unsigned long long)rs.get_p99_us,
           (unsigned long long)rs.put_p50_us, (unsigned long long)rs.put_p99_us);
    CHECK(rs.hits >= 600 && rs.errors == 0 && rs.corruptions == 0 && rs.not_found >= 3);
    CHECK(rs.misses == rs.gets - rs.hits && rs.get_calls > 0 && rs.get_p50_us > 0 &&
          rs.get_p99_us >= rs.get_p50_us && rs.put_p99_us >= rs.put_p50_us);
    CHECK(rs.nodes == 1 && rs.nodes_connected == 1 && rs.reconnects == 0);
    /* an older, smaller struct gets its prefix only */
    struct { uint32_t struct_size; int32_t cluster; uint64_t nodes, connected, gets; } old;
    memset(&old, 0, sizeof old);
    old.struct_size = sizeof old;
    CHECK_STATUS(sw_remote_get_stats(a, (sw_remote_stats *)&old), SW_OK);
    CHECK(old.gets == rs.gets);

    sw_remote_close(a);
    sw_remote_close(b);
    sw_remote_close(NULL);
    if (sw_test_failures) {
        fprintf(stderr, "test_remote_basic: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_remote_basic: ok\n");
    return 0;
}
