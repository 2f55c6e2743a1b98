/* Remote tier across a Redis Cluster failover on loopback: three masters,
 * one of them (M) with a replica (R). Keys spread over all slots; M is
 * SIGKILLed while the client keeps reading (M's keys fail at once, the
 * others still read), then R is promoted (CLUSTER FAILOVER TAKEOVER, as the
 * cluster would after cluster-node-timeout). The client must find R by
 * itself - failed reconnects to M keep asking for a slot map refresh - and
 * serve M's keys from R within 2 s of the promotion. */
#include "test_remote_util.h"

#if defined(SW_HAVE_HIREDIS)
static tr_server nodes[4]; /* 0..2 masters, 3 the replica of 0 */

static int info_has(int port, const char *cmd, const char *what)
{
    redisReply *r = tr_cmd(port, cmd);
    int ok = r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
             strstr(r->str, what);
    if (r)
        freeReplyObject(r);
    return ok;
}

static long long integer_of(int port, const char *cmd)
{
    redisReply *r = tr_cmd(port, cmd);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return v;
}

/* The node at `viewer` knows the node at `port` (handshake done) and, when
 * `flag` is given, that node's flags line carries it. */
static int knows(int viewer, int port, const char *flag)
{
    redisReply *r = tr_cmd(viewer, "CLUSTER NODES");
    int ok = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        char pp[32];
        snprintf(pp, sizeof pp, ":%d@", port);
        const char *q = strstr(r->str, pp);
        const char *e = q ? strchr(q, '\n') : NULL;
        if (q && e) {
            char line[1024];
            size_t n = (size_t)(e - q) < sizeof line - 1 ? (size_t)(e - q) : sizeof line - 1;
            memcpy(line, q, n);
            line[n] = 0;
            ok = !strstr(line, "handshake") && !strstr(line, "noaddr") &&
                 (!flag || strstr(line, flag));
        }
    }
    if (r)
        freeReplyObject(r);
    return ok;
}

static int role_is_master(int port)
{
    redisReply *r = tr_cmd(port, "ROLE");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
             r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
    if (r)
        freeReplyObject(r);
    return ok;
}

enum { N = 300, LEN = 512, TIMEOUT_MS = 300 };
static sw_store_key keys[N];
static uint8_t src[N][LEN], dst[N][LEN];
static const void *srcs[N];
static void *dsts[N];
static size_t lens[N], got[N];
static sw_status st[N];
static int on_m[N]; /* the key lives on the master that is killed */

/* One read of every key: the number of OK keys; wrong bytes are counted
 * into *wrong, the call's duration into *secs; keys off M must read. */
static int read_all(sw_remote *r, int *wrong, int *off_m_bad, double *secs)
{
    double t0 = tr_now();
    (void)sw_remote_get_batch(r, N, keys, dsts, LEN, got, NULL, st);
    *secs = tr_now() - t0;
    int ok = 0;
    for (int i = 0; i < N; i++) {
        if (st[i] == SW_OK) {
            ok++;
            *wrong += got[i] != LEN || memcmp(dst[i], src[i], LEN);
        } else if (!on_m[i]) {
            (*off_m_bad)++;
        }
    }
    return ok;
}
#endif

int main(void)
{
    tr_init("remote_failover");
#if defined(SW_HAVE_HIREDIS)
    if (!tr_have_redis_cli()) {
        fprintf(stderr, "SKIP: redis-cli not installed\n");
        return SW_TEST_SKIP;
    }
    const char *extra[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", "5000", "--repl-diskless-sync-delay", "0",
                           NULL};
    double t0 = tr_now();
    for (int i = 0; i < 4; i++)
        tr_start(&nodes[i], 0, extra);
    if (tr_cluster_create(nodes))
        return 1;
    /* the replica joins and follows node 0 */
    char mid[64];
    {
        redisReply *rep = tr_cmd(nodes[0].port, "CLUSTER MYID");
        if (!rep || rep->type != REDIS_REPLY_STRING) {
            fprintf(stderr, "CLUSTER MYID failed\n");
            return 1;
        }
        snprintf(mid, sizeof mid, "%s", rep->str);
        freeReplyObject(rep);
    }
    redisReply *rep = tr_cmd(nodes[3].port, "CLUSTER MEET 127.0.0.1 %d", nodes[0].port);
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    if (rep)
        freeReplyObject(rep);
    int following = 0;
    for (int i = 0; i < 500 && !following; i++) {
        rep = tr_cmd(nodes[3].port, "CLUSTER REPLICATE %s", mid);
        following = rep && rep->type == REDIS_REPLY_STATUS;
        if (rep)
            freeReplyObject(rep);
        if (!following)
            tr_sleep_ms(10);
    }
    CHECK(following);
    int up = 0;
    for (int i = 0; i < 1000 && !up; i++) {
        up = info_has(nodes[3].port, "INFO replication", "master_link_status:up");
        /* every master knows the replica as one, and the replica knows
         * them: the promotion reaches all of them at once */
        for (int j = 0; j < 3 && up; j++)
            up = info_has(nodes[j].port, "CLUSTER INFO", "cluster_state:ok") &&
                 knows(nodes[j].port, nodes[3].port, "slave") &&
                 knows(nodes[3].port, nodes[j].port, "master");
        if (!up)
            tr_sleep_ms(10);
    }
    CHECK(up);
    printf("cluster with a replica up in %.2f s\n", tr_now() - t0);

    char ep[128];
    snprintf(ep, sizeof ep, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", nodes[0].port,
             nodes[1].port, nodes[2].port);
    sw_remote_config c;
    sw_remote_config_init(&c);
    c.endpoints = ep;
    c.cluster = 1;
    c.connect_timeout_ms = 200;
    c.command_timeout_ms = TIMEOUT_MS;
    c.backoff_min_ms = 10;
    c.backoff_max_ms = 500;
    sw_remote *r = NULL;
    CHECK_STATUS(sw_remote_open(&c, &r), SW_OK);
    if (!r)
        return 1;
    for (int i = 0; i < N; i++) {
        keys[i] = tr_key(21, (uint32_t)(i % 7), (uint32_t)i, (uint16_t)(i % 4), i & 1);
        tr_fill(&keys[i], 3, src[i], LEN);
        srcs[i] = src[i];
        dsts[i] = dst[i];
        lens[i] = LEN;
    }
    CHECK_STATUS(sw_remote_put_batch(r, N, keys, srcs, lens, NULL, st), SW_OK);
    int nm = 0;
    {
        redisContext *m = tr_connect(nodes[0].port, NULL, NULL);
        CHECK(m != NULL);
        for (int i = 0; m && i < N; i++) {
            char name[SW_REMOTE_MAX_KEY + 1];
            size_t nl = sw_remote_key_name("sw:", 3, &keys[i], name);
            name[nl] = 0;
            redisReply *e = redisCommand(m, "EXISTS %s", name);
            on_m[i] = e && e->type == REDIS_REPLY_INTEGER && e->integer == 1;
            nm += on_m[i];
            if (e)
                freeReplyObject(e);
        }
        if (m)
            redisFree(m);
    }
    CHECK(nm > 30 && nm < N);
    int synced = 0;
    for (int i = 0; i < 500 && !synced; i++) {
        synced = integer_of(nodes[3].port, "DBSIZE") == nm;
        if (!synced)
            tr_sleep_ms(10);
    }
    CHECK(synced);

    /* M dies; the client keeps reading */
    int wrong = 0, off_m_bad = 0, calls = 0;
    double secs, worst = 0;
    tr_kill(&nodes[0]);
    double t_kill = tr_now();
    while (tr_now() - t_kill < 0.4) {
        int ok = read_all(r, &wrong, &off_m_bad, &secs);
        CHECK(ok <= N - nm);
        worst = secs > worst ? secs : worst;
        calls++;
        tr_sleep_ms(10);
    }
    sw_remote_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    printf("master killed: %d calls in 0.4 s, slowest %.1f ms; %d of %d keys were on it; "
           "refreshes so far %llu: %s\n",
           calls, worst * 1e3, nm, N, (unsigned long long)s.topology_refreshes,
           sw_last_error());

    /* R takes M's slots */
    rep = tr_cmd(nodes[3].port, "CLUSTER FAILOVER TAKEOVER");
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    if (rep)
        freeReplyObject(rep);
    int promoted = 0;
    for (int i = 0; i < 500 && !promoted; i++) {
        promoted = role_is_master(nodes[3].port);
        if (!promoted)
            tr_sleep_ms(2);
    }
    CHECK(promoted);
    double t_prom = tr_now();
    double t_served = -1;
    calls = 0;
    while (tr_now() - t_prom < 5.0) {
        int ok = read_all(r, &wrong, &off_m_bad, &secs);
        worst = secs > worst ? secs : worst;
        calls++;
        if (ok == N) {
            t_served = tr_now();
            break;
        }
        tr_sleep_ms(10);
    }
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    printf("replica promoted %.2f s after the kill; all %d keys served %.3f s after the "
           "promotion (%d calls); slowest call overall %.1f ms (timeout %d ms); refreshes %llu, "
           "nodes known %llu\n",
           t_prom - t_kill, N, t_served < 0 ? -1.0 : t_served - t_prom, calls, worst * 1e3,
           TIMEOUT_MS, (unsigned long long)s.topology_refreshes, (unsigned long long)s.nodes);
    CHECK(t_served > 0 && t_served - t_prom < 2.0);
    CHECK(wrong == 0 && off_m_bad == 0);
    CHECK(worst < TIMEOUT_MS / 1000.0 + 0.25);
    /* writes go to the new master too */
    CHECK_STATUS(sw_remote_put_batch(r, N, keys, srcs, lens, NULL, st), SW_OK);

    /* A master without a replica dies: nothing will take its slots, and
     * the calls that fail its keys keep asking for a refresh. The gap
     * doubles to 1 s (+ up to 25%), so 3 s of calls every 10 ms make about
     * 5 refreshes (a 400 ms cap made 8). */
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    uint64_t before = s.topology_refreshes;
    tr_kill(&nodes[1]);
    double t_dead = tr_now();
    calls = 0;
    while (tr_now() - t_dead < 3.0) {
        (void)read_all(r, &wrong, &off_m_bad, &secs);
        worst = secs > worst ? secs : worst;
        calls++;
        tr_sleep_ms(10);
    }
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    printf("a master without replica dead for 3 s: %d calls, %llu refreshes, slowest call "
           "%.1f ms\n", calls, (unsigned long long)(s.topology_refreshes - before),
           worst * 1e3);
    CHECK(s.topology_refreshes - before >= 3 && s.topology_refreshes - before <= 6);
    CHECK(wrong == 0 && worst < TIMEOUT_MS / 1000.0 + 0.25);

    sw_remote_close(r);
    for (int i = 0; i < 4; i++)
        tr_kill(&nodes[i]);
    printf("total %.2f s\n", tr_now() - t0);
#endif
    if (sw_test_failures) {
        fprintf(stderr, "test_remote_failover: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_remote_failover: ok\n");
    return 0;
}
