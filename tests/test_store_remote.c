/* The store's remote tier: two stores in different directories share one
 * loopback redis-server. Store A writes (write-through), store B (empty)
 * reads the stripes through the remote (identical bytes, per-key OK,
 * remote hits counted, nothing written back unless asked); a key absent
 * everywhere is NOT_FOUND; a value corrupted in Redis is CORRUPT for that
 * key only (dst untouched); a value copied from another tenant's key prefix
 * over this tenant's key is CORRUPT, never served; write-back on request; an older struct_size
 * means no remote; back-pressure with the server SIGSTOPped (local writes
 * succeed within the bounded wait, drops counted, reads of remote-only keys
 * are misses within the timeout, close bounded); server killed: remote-only keys are misses within the timeout, local keys fine. */
#include "test_remote_util.h"
#include "test_store_util.h"

#include <stddef.h>
#include <sys/stat.h>

enum { N = 64, STRIPE = 4096, TIMEOUT_MS = 300, WAIT_MS = 50, CLOSE_MS = 200 };
#define SLACK_S 0.3

static sw_store_key keys[N];
static uint8_t bufs[N + 2][STRIPE];
static void *dsts[N + 2];
static size_t lens[N + 2];
static uint64_t gens[N + 2];
static sw_status sts[N + 2];

static size_t len_of(int i) { return 1000 + (size_t)(i * 37) % 3000; }

static sw_store *open_store(const char *dir, const sw_remote_config *rc, uint32_t queue,
                            int write_back)
{
    sw_store_config c = ts_config(dir, STRIPE, 16, 16);
    c.remote = rc;
    c.remote_queue_entries = queue;
    c.remote_queue_wait_ms = WAIT_MS;
    c.remote_close_wait_ms = CLOSE_MS;
    c.remote_write_back = write_back;
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        exit(1);
    return s;
}

/* Waits (<= 5 s) until the write-through queue is empty. */
static void drain(sw_store *s)
{
    for (int i = 0; i < 500 && ts_stats(s).remote_queue_len; i++)
        tr_sleep_ms(10);
}

int main(void)
{
    tr_init("store_remote");
    tr_server srv;
    tr_start(&srv, 0, NULL);
    sw_remote_config rc = tr_config(srv.port);
    rc.command_timeout_ms = TIMEOUT_MS;
    rc.connect_timeout_ms = 200;

    ts_dir da, db, dc, dd, de, df, dg;
    ts_dir_make(&df, "srF");
    ts_dir_make(&dg, "srG");
    ts_dir_make(&da, "srA");
    ts_dir_make(&db, "srB");
    ts_dir_make(&dc, "srC");
    ts_dir_make(&dd, "srD");
    ts_dir_make(&de, "srE");
    for (int i = 0; i < N + 2; i++)
        dsts[i] = bufs[i];

    /* ---- A writes; everything reaches the remote ---- */
    sw_store *a = open_store(da.store, &rc, 0, 0);
    for (int i = 0; i < N; i++) {
        keys[i] = ts_key(7, 2, (uint32_t)i, 1, (uint8_t)(i & 1));
        uint8_t tmp[STRIPE];
        ts_fill(tmp, len_of(i), &keys[i], 1);
        CHECK_STATUS(sw_store_write(a, &keys[i], tmp, len_of(i), NULL), SW_OK);
    }
    drain(a);
    sw_store_stats sa = ts_stats(a);
    CHECK(sa.remote_enabled == 1);
    CHECK(sa.remote_puts_queued == N);
    CHECK(sa.remote_puts == N);
    CHECK(sa.remote_put_drops == 0 && sa.remote_put_errors == 0);
    CHECK(sa.remote_queue_entries == 256);
    CHECK_STATUS(sw_store_close(a), SW_OK);

    /* ---- B (empty) reads them through the remote, plus a local key and a
     * key absent everywhere, in one call ---- */
    sw_store *b = open_store(db.store, &rc, 0, 0);
    sw_store_key local = ts_key(99, 0, 0, 0, 0);
    sw_store_key absent = ts_key(12345, 0, 0, 0, 0);
    {
        uint8_t tmp[STRIPE];
        ts_fill(tmp, 777, &local, 5);
        CHECK_STATUS(sw_store_write(b, &local, tmp, 777, NULL), SW_OK);
    }
    sw_store_key rk[N + 2];
    memcpy(rk, keys, sizeof keys);
    rk[N] = local;
    rk[N + 1] = absent;
    for (int pass = 0; pass < 2; pass++) {
        memset(bufs, 0xAA, sizeof bufs);
        CHECK_STATUS(sw_store_read(b, N + 2, rk, dsts, STRIPE, lens, gens, sts),
                     SW_STATUS_NOT_FOUND);
        for (int i = 0; i < N; i++) {
            CHECK(sts[i] == SW_OK);
            CHECK(lens[i] == len_of(i) && gens[i] > 0);
            CHECK(ts_check(bufs[i], len_of(i), &keys[i], 1));
        }
        CHECK(sts[N] == SW_OK && lens[N] == 777 && ts_check(bufs[N], 777, &local, 5));
        CHECK(sts[N + 1] == SW_STATUS_NOT_FOUND && lens[N + 1] == 0);
        CHECK(bufs[N + 1][0] == 0xAA);
    }
    sw_store_stats sb = ts_stats(b);
    CHECK(sb.remote_gets == 2 * (N + 1));
    CHECK(sb.remote_hits == 2 * N);
    CHECK(sb.remote_not_found == 2);
    CHECK(sb.remote_corruptions == 0 && sb.remote_errors == 0);
    CHECK(sb.extents_used == 1);         /* not written back */
    CHECK(sb.remote_write_backs == 0);
    CHECK(sb.remote_bytes_read > 0);

    /* ---- a value corrupted in Redis: CORRUPT for that key only ---- */
    {
        char name[256];
        size_t nl = sw_remote_key_name("sw:", 3, &keys[5], name);
        name[nl] = 0;
#if defined(SW_HAVE_HIREDIS) /* without it tr_init() skipped the test already */
        redisReply *rep = tr_cmd(srv.port, "SETRANGE %s 100 %b", name, "\x5a\xa5", (size_t)2);
        CHECK(rep && rep->type == REDIS_REPLY_INTEGER);
        if (rep)
            freeReplyObject(rep);
#endif
        sw_store_key k3[3] = {keys[4], keys[5], keys[6]};
        memset(bufs, 0xAA, sizeof bufs);
        CHECK_STATUS(sw_store_read(b, 3, k3, dsts, STRIPE, lens, gens, sts), SW_STATUS_CORRUPT);
        CHECK(sts[0] == SW_OK && ts_check(bufs[0], len_of(4), &keys[4], 1));
        CHECK(sts[1] == SW_STATUS_CORRUPT && lens[1] == 0);
        for (int j = 0; j < STRIPE; j++)
            if (bufs[1][j] != 0xAA) {
                CHECK(!"corrupt value copied into dst");
                break;
            }
        CHECK(sts[2] == SW_OK && ts_check(bufs[2], len_of(6), &keys[6], 1));
        CHECK(ts_stats(b).remote_corruptions == 1);
    }

    /* ---- tenants: stores F and G use the key prefix "tB:". A value of
     * the "sw:" tenant copied over tB's name of the same key (same
     * namespace, layer, block, head, kind: only the prefix differs) is
     * CORRUPT for G, never served; F's own write-through reads fine ---- */
    {
        sw_remote_config rt = rc;
        rt.prefix = "tB:";
        sw_store *f = open_store(df.store, &rt, 0, 0);
        uint8_t tmp[STRIPE];
        ts_fill(tmp, len_of(8), &keys[8], 2);
        CHECK_STATUS(sw_store_write(f, &keys[8], tmp, len_of(8), NULL), SW_OK);
        drain(f);
        CHECK_STATUS(sw_store_close(f), SW_OK);
        char from[256], to[256];
        size_t nl = sw_remote_key_name("sw:", 3, &keys[7], from);
        from[nl] = 0;
        nl = sw_remote_key_name("tB:", 3, &keys[7], to);
        to[nl] = 0;
#if defined(SW_HAVE_HIREDIS)
        redisReply *rep = tr_cmd(srv.port, "COPY %s %s REPLACE", from, to);
        CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1);
        if (rep)
            freeReplyObject(rep);
#endif
        sw_store *g = open_store(dg.store, &rt, 0, 0);
        sw_store_key k2[2] = {keys[7], keys[8]};
        memset(bufs, 0xAA, sizeof bufs);
        CHECK_STATUS(sw_store_read(g, 2, k2, dsts, STRIPE, lens, gens, sts), SW_STATUS_CORRUPT);
        CHECK(sts[0] == SW_STATUS_CORRUPT && lens[0] == 0 && bufs[0][0] == 0xAA &&
              bufs[0][STRIPE - 1] == 0xAA);
        CHECK(sts[1] == SW_OK && lens[1] == len_of(8) && ts_check(bufs[1], len_of(8), &keys[8], 2));
        sw_store_stats sg = ts_stats(g);
        CHECK(sg.remote_corruptions == 1 && sg.remote_hits == 1);
        printf("cross-prefix copy through a store: %s / %s\n", sw_status_str(sts[0]),
               sw_status_str(sts[1]));
        CHECK_STATUS(sw_store_close(g), SW_OK);
    }

    /* ---- write-back on request ---- */
    {
        sw_store *c = open_store(dc.store, &rc, 0, 1);
        sw_store_key k4[4] = {keys[10], keys[11], keys[12], keys[13]};
        for (int pass = 0; pass < 2; pass++) {
            CHECK_STATUS(sw_store_read(c, 4, k4, dsts, STRIPE, lens, gens, sts), SW_OK);
            for (int j = 0; j < 4; j++)
                CHECK(sts[j] == SW_OK && ts_check(bufs[j], len_of(10 + j), &keys[10 + j], 1));
        }
        sw_store_stats sc = ts_stats(c);
        CHECK(sc.remote_gets == 4 && sc.remote_hits == 4 && sc.remote_write_backs == 4);
        CHECK(sc.extents_used == 4 && sc.file_hits + sc.host_hits >= 4);
        CHECK(sc.remote_puts_queued == 0); /* fetched stripes are not put back */
        CHECK_STATUS(sw_store_close(c), SW_OK);
    }

    /* ---- an older struct_size: no remote tier ---- */
    {
        sw_store_config c = ts_config(de.store, STRIPE, 16, 16);
        c.struct_size = (uint32_t)offsetof(sw_store_config, remote);
        c.remote = (const sw_remote_config *)(uintptr_t)1; /* never read */
        sw_store *e = NULL;
        CHECK_STATUS(sw_store_open(&c, &e), SW_OK);
        if (e) {
            CHECK(ts_stats(e).remote_enabled == 0);
            CHECK_STATUS(ts_read1(e, &keys[0], bufs[0], STRIPE, NULL, NULL),
                         SW_STATUS_NOT_FOUND);
            CHECK(ts_stats(e).remote_gets == 0);
            CHECK_STATUS(sw_store_close(e), SW_OK);
        }
    }

    /* ---- a key that cannot be proven current stays CORRUPT: the remote's
     * copy (written through earlier, older than the lost local version) is
     * neither served nor installed; a read-only handle never writes back
     * (and its read's error is the local one) ---- */
    {
        ts_dir du;
        ts_dir_make(&du, "srU");
        sw_store_config c = ts_config(du.store, STRIPE, 16, 16);
        sw_store *f = NULL;
        CHECK_STATUS(sw_store_open(&c, &f), SW_OK);
        if (!f)
            exit(1);
        uint8_t tmp[STRIPE];
        for (int i = 0; i < 2; i++) {
            ts_fill(tmp, len_of(i), &keys[i], 9);
            CHECK_STATUS(sw_store_write(f, &keys[i], tmp, len_of(i), NULL), SW_OK);
        }
        CHECK_STATUS(sw_store_close(f), SW_OK);
        /* the journal loses both records (the newest is two past its end):
         * both keys are unprovable */
        char jp[700];
        snprintf(jp, sizeof jp, "%s/journal", du.store);
        struct stat jst;
        CHECK(stat(jp, &jst) == 0 && truncate(jp, jst.st_size - 128) == 0);
        c.remote = &rc;
        c.remote_write_back = 1;
        c.create = 0;
        sw_store_key fk[2] = {keys[0], keys[2]}; /* unprovable; remote only */
        for (int ro = 1; ro >= 0; ro--) {
            c.read_only = ro;
            CHECK_STATUS(sw_store_open(&c, &f), SW_OK);
            if (!f)
                exit(1);
            memset(bufs, 0xAA, sizeof bufs);
            sw_status r = sw_store_read(f, 2, fk, dsts, STRIPE, lens, gens, sts);
            CHECK(r == SW_STATUS_CORRUPT && !strstr(sw_last_error(), "read-only"));
            CHECK(strstr(sw_last_error(), "key 0 cannot be proven current") != NULL);
            CHECK(sts[0] == SW_STATUS_CORRUPT && bufs[0][0] == 0xAA);
            CHECK(sts[1] == SW_OK && ts_check(bufs[1], len_of(2), &keys[2], 1));
            sw_store_stats sf = ts_stats(f);
            CHECK(sf.keys_unprovable == 2);
            CHECK(sf.remote_gets == 1); /* keys[2] only */
            CHECK(sf.remote_write_backs == (uint64_t)(ro ? 0 : 1));
            CHECK(sf.extents_used == (uint64_t)(ro ? 0 : 1));
            /* a ticket's wait says the same after its remote fetch */
            uint64_t tk = 0;
            CHECK_STATUS(sw_store_read_submit(f, 2, fk, dsts, STRIPE, &tk), SW_OK);
            r = sw_store_read_wait(f, tk, 2, lens, gens, sts);
            CHECK(r == SW_STATUS_CORRUPT && sts[0] == SW_STATUS_CORRUPT && sts[1] == SW_OK);
            CHECK(strstr(sw_last_error(), "key 0 cannot be proven current") != NULL);
            CHECK_STATUS(sw_store_close(f), SW_OK);
        }
        ts_rm_rf(du.base);
    }

    /* ---- back-pressure: tiny queue, server stopped ---- */
    {
        sw_store *d = open_store(dd.store, &rc, 4, 0);
        kill(srv.pid, SIGSTOP);
        double worst = 0;
        enum { W = 24 };
        for (int i = 0; i < W; i++) {
            sw_store_key k = ts_key(55, 0, (uint32_t)i, 0, 0);
            uint8_t tmp[STRIPE];
            ts_fill(tmp, 2000, &k, 3);
            double t0 = tr_now();
            CHECK_STATUS(sw_store_write(d, &k, tmp, 2000, NULL), SW_OK);
            double dt = tr_now() - t0;
            if (dt > worst)
                worst = dt;
        }
        printf("back-pressure: worst write %.1f ms (bound %d ms + slack)\n", worst * 1e3,
               WAIT_MS);
        CHECK(worst < WAIT_MS / 1e3 + SLACK_S);
        sw_store_stats sd = ts_stats(d);
        printf("back-pressure: queued %llu drops %llu errors %llu\n",
               (unsigned long long)sd.remote_puts_queued, (unsigned long long)sd.remote_put_drops,
               (unsigned long long)sd.remote_put_errors);
        CHECK(sd.remote_put_drops > 0);
        CHECK(sd.remote_puts_queued + sd.remote_put_drops == W);
        CHECK(sd.remote_queue_len <= 4);
        CHECK(sd.remote_queue_wait_us > 0);
        /* B's reads of remote-only keys while the server does not answer:
         * misses within the command timeout, B's local key fine */
        sw_store_key k5[5] = {keys[30], keys[31], keys[32], keys[33], local};
        memset(bufs, 0xAA, sizeof bufs);
        uint64_t e0 = ts_stats(b).remote_errors;
        double r0 = tr_now();
        CHECK_STATUS(sw_store_read(b, 5, k5, dsts, STRIPE, lens, gens, sts), SW_STATUS_NOT_FOUND);
        double rdt = tr_now() - r0;
        printf("server stopped, read: %.1f ms (bound %d ms + slack)\n", rdt * 1e3, TIMEOUT_MS);
        CHECK(rdt < TIMEOUT_MS / 1e3 + SLACK_S);
        for (int j = 0; j < 4; j++)
            CHECK(sts[j] == SW_STATUS_NOT_FOUND && bufs[j][0] == 0xAA);
        CHECK(sts[4] == SW_OK && lens[4] == 777 && ts_check(bufs[4], 777, &local, 5));
        CHECK(ts_stats(b).remote_errors == e0 + 4);
        for (int i = 0; i < W; i++) { /* nothing local lost */
            sw_store_key k = ts_key(55, 0, (uint32_t)i, 0, 0);
            size_t l = 0;
            CHECK_STATUS(ts_read1(d, &k, bufs[0], STRIPE, &l, NULL), SW_OK);
            CHECK(l == 2000 && ts_check(bufs[0], 2000, &k, 3));
        }
        double t0 = tr_now();
        CHECK_STATUS(sw_store_close(d), SW_OK);
        double dt = tr_now() - t0;
        printf("close with the server stopped: %.1f ms (bound %d + %d ms + slack)\n", dt * 1e3,
               CLOSE_MS, TIMEOUT_MS);
        CHECK(dt < (CLOSE_MS + TIMEOUT_MS) / 1e3 + SLACK_S);
        kill(srv.pid, SIGCONT);
    }

    /* ---- server killed: remote-only keys are misses within the timeout,
     * local keys still read ---- */
    tr_kill(&srv);
    uint64_t errs0 = ts_stats(b).remote_errors;
    for (int pass = 0; pass < 3; pass++) {
        sw_store_key k9[9];
        for (int j = 0; j < 8; j++)
            k9[j] = keys[20 + j];
        k9[8] = local;
        memset(bufs, 0xAA, sizeof bufs);
        double t0 = tr_now();
        sw_status r = sw_store_read(b, 9, k9, dsts, STRIPE, lens, gens, sts);
        double dt = tr_now() - t0;
        printf("server down, read %d: %.1f ms (bound %d ms + slack)\n", pass, dt * 1e3,
               TIMEOUT_MS);
        CHECK(dt < TIMEOUT_MS / 1e3 + SLACK_S);
        CHECK(r == SW_STATUS_NOT_FOUND);
        for (int j = 0; j < 8; j++)
            CHECK(sts[j] == SW_STATUS_NOT_FOUND && bufs[j][0] == 0xAA);
        CHECK(sts[8] == SW_OK && lens[8] == 777 && ts_check(bufs[8], 777, &local, 5));
        /* local writes while the server is down: fine, and fast */
        uint8_t tmp[STRIPE];
        ts_fill(tmp, 777, &local, 5);
        t0 = tr_now();
        CHECK_STATUS(sw_store_write(b, &local, tmp, 777, NULL), SW_OK);
        CHECK(tr_now() - t0 < WAIT_MS / 1e3 + SLACK_S);
    }
    sb = ts_stats(b);
    CHECK(sb.remote_errors == errs0 + 3 * 8);
    double t0 = tr_now();
    CHECK_STATUS(sw_store_close(b), SW_OK);
    CHECK(tr_now() - t0 < (CLOSE_MS + TIMEOUT_MS) / 1e3 + SLACK_S);

    ts_rm_rf(da.base);
    ts_rm_rf(db.base);
    ts_rm_rf(dc.base);
    ts_rm_rf(dd.base);
    ts_rm_rf(de.base);
    ts_rm_rf(df.base);
    ts_rm_rf(dg.base);
    if (sw_test_failures) {
        fprintf(stderr, "test_store_remote: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_store_remote: ok\n");
    return 0;
}
