/* Remote tier on a three-node Redis Cluster on loopback: round trips of
 * keys spread over the slots of all nodes (slot routing), a seed list whose
 * first seed is dead, and a live slot migration (SETSLOT IMPORTING /
 * MIGRATING, MIGRATE of the keys in two halves, SETSLOT NODE) while a
 * reader thread keeps reading: every read stays correct (ASK and MOVED
 * followed). */
#include "test_remote_util.h"

#include <pthread.h>

#if defined(SW_HAVE_HIREDIS)
static tr_server nodes[3];

static int cluster_ok(int port)
{
    redisReply *r = tr_cmd(port, "CLUSTER INFO");
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok");
    if (r)
        freeReplyObject(r);
    return ok;
}

static void node_id(int port, char *out)
{
    redisReply *r = tr_cmd(port, "CLUSTER MYID");
    if (!r || r->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "CLUSTER MYID failed on %d\n", port);
        exit(1);
    }
    snprintf(out, 64, "%s", r->str);
    freeReplyObject(r);
}

static int expect_status(redisReply *r, const char *what)
{
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok)
        fprintf(stderr, "%s: %s\n", what, r && r->str ? r->str : "no reply");
    if (r)
        freeReplyObject(r);
    return ok;
}

enum { NM = 48, MLEN = 2048 };
static sw_remote *mig_handle;
static sw_store_key mkeys[NM];
static uint8_t msrc[NM][MLEN];
static volatile int stop_reader;
static int reader_calls, reader_bad, reader_wrong;

static void *reader(void *arg)
{
    (void)arg;
    static uint8_t dst[NM][MLEN];
    void *d[NM];
    size_t got[NM];
    sw_status st[NM];
    for (int i = 0; i < NM; i++)
        d[i] = dst[i];
    while (!stop_reader) {
        sw_remote_get_batch(mig_handle, NM, mkeys, d, MLEN, got, NULL, st);
        for (int i = 0; i < NM; i++) {
            if (st[i] != SW_OK) {
                if (reader_bad++ < 5)
                    fprintf(stderr, "reader: key %d: %s: %s\n", i, sw_status_str(st[i]),
                            sw_last_error());
            } else if (got[i] != MLEN || memcmp(dst[i], msrc[i], MLEN)) {
                reader_wrong++;
            }
        }
        reader_calls++;
    }
    return NULL;
}

static void migrate_keys(int from, int to, const char names[][SW_REMOTE_MAX_KEY + 1], int a,
                         int b)
{
    const char *argv[8 + NM];
    size_t len[8 + NM];
    char port[16];
    snprintf(port, sizeof port, "%d", to);
    int n = 0;
    argv[n++] = "MIGRATE";
    argv[n++] = "127.0.0.1";
    argv[n++] = port;
    argv[n++] = "";
    argv[n++] = "0";
    argv[n++] = "5000";
    argv[n++] = "KEYS";
    for (int i = a; i < b; i++)
        argv[n++] = names[i];
    for (int i = 0; i < n; i++)
        len[i] = strlen(argv[i]);
    redisContext *c = tr_connect(from, NULL, NULL);
    redisReply *r = c ? redisCommandArgv(c, n, argv, len) : NULL;
    CHECK(r && r->type == REDIS_REPLY_STATUS);
    if (r && r->type == REDIS_REPLY_ERROR)
        fprintf(stderr, "MIGRATE: %s\n", r->str);
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
}
#endif

int main(void)
{
    tr_init("remote_cluster");
#if defined(SW_HAVE_HIREDIS)
    if (!tr_have_redis_cli()) {
        fprintf(stderr, "SKIP: redis-cli not installed\n");
        return SW_TEST_SKIP;
    }
    const char *extra[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", "5000", NULL};
    double t0 = tr_now();
    for (int i = 0; i < 3; i++)
        tr_start(&nodes[i], 0, extra);
    if (tr_cluster_create(nodes))
        return 1;
    int up = 0;
    for (int i = 0; i < 1000 && !up; i++) {
        up = cluster_ok(nodes[0].port) && cluster_ok(nodes[1].port) &&
             cluster_ok(nodes[2].port);
        if (!up)
            tr_sleep_ms(10);
    }
    CHECK(up);
    printf("cluster up in %.2f s\n", tr_now() - t0);

    /* seed list: the first seed is dead */
    char ep[128];
    snprintf(ep, sizeof ep, "127.0.0.1:%d, 127.0.0.1:%d", tr_dead_port(), nodes[1].port);
    sw_remote_config c;
    sw_remote_config_init(&c);
    c.endpoints = ep;
    c.cluster = 1;
    c.connect_timeout_ms = 200;
    c.max_pipeline = 32;
    sw_remote *r = NULL;
    CHECK_STATUS(sw_remote_open(&c, &r), SW_OK);
    if (!r)
        return 1;

    /* round trips across slots */
    enum { N = 600 };
    static sw_store_key keys[N];
    static uint8_t src[N][1024], dst[N][1024];
    const void *srcs[N];
    void *dsts[N];
    size_t lens[N], got[N];
    uint64_t gens[N], ggot[N];
    sw_status st[N];
    sw_rng rng = {77};
    for (int i = 0; i < N; i++) {
        keys[i] = tr_key(9, (uint32_t)sw_rng_int(&rng, 0, 60), (uint32_t)i,
                         (uint16_t)sw_rng_int(&rng, 0, 7), i & 1);
        lens[i] = (size_t)sw_rng_int(&rng, 0, 1024);
        gens[i] = (uint64_t)i * 3;
        tr_fill(&keys[i], 5, src[i], lens[i]);
        srcs[i] = src[i];
        dsts[i] = dst[i];
    }
    CHECK_STATUS(sw_remote_put_batch(r, N, keys, srcs, lens, gens, st), SW_OK);
    CHECK_STATUS(sw_remote_get_batch(r, N, keys, dsts, 1024, got, ggot, st), SW_OK);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += st[i] != SW_OK || got[i] != lens[i] || ggot[i] != gens[i] ||
               memcmp(dst[i], src[i], lens[i]);
    CHECK(bad == 0);
    for (int i = 0; i < 3; i++) { /* every node holds some of them */
        redisReply *rep = tr_cmd(nodes[i].port, "DBSIZE");
        CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 50);
        if (rep)
            freeReplyObject(rep);
    }
    sw_remote_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    CHECK(s.cluster == 1 && s.nodes == 4 && s.nodes_connected == 3 && s.moved == 0);
    CHECK_STATUS(sw_remote_delete(r, &keys[0]), SW_OK);
    CHECK_STATUS(sw_remote_delete(r, &keys[0]), SW_STATUS_NOT_FOUND);

    /* slot migration under a reader: one hash-tagged prefix puts every key
     * of this handle in one slot */
    sw_remote_config mc = c;
    mc.prefix = "{mig}:";
    CHECK_STATUS(sw_remote_open(&mc, &mig_handle), SW_OK);
    if (!mig_handle)
        return 1;
    static char names[NM][SW_REMOTE_MAX_KEY + 1];
    const void *ms[NM];
    size_t ml[NM];
    for (int i = 0; i < NM; i++) {
        mkeys[i] = tr_key(2, 0, (uint32_t)i, 0, SW_STORE_KIND_K);
        tr_fill(&mkeys[i], 9, msrc[i], MLEN);
        ms[i] = msrc[i];
        ml[i] = MLEN;
        size_t n = sw_remote_key_name("{mig}:", 6, &mkeys[i], names[i]);
        names[i][n] = '\0';
    }
    CHECK_STATUS(sw_remote_put_batch(mig_handle, NM, mkeys, ms, ml, NULL, st), SW_OK);
    uint32_t slot = sw_remote_key_slot("mig", 3);
    int from = -1;
    for (int i = 0; i < 3; i++) {
        redisReply *rep = tr_cmd(nodes[i].port, "CLUSTER COUNTKEYSINSLOT %u", slot);
        if (rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == NM)
            from = i;
        if (rep)
            freeReplyObject(rep);
    }
    CHECK(from >= 0);
    if (from < 0)
        return 1;
    int to = (from + 1) % 3;
    char from_id[64], to_id[64];
    node_id(nodes[from].port, from_id);
    node_id(nodes[to].port, to_id);

    pthread_t th;
    pthread_create(&th, NULL, reader, NULL);
    tr_sleep_ms(50);
    int ok = expect_status(tr_cmd(nodes[to].port, "CLUSTER SETSLOT %u IMPORTING %s", slot,
                                  from_id), "IMPORTING");
    ok &= expect_status(tr_cmd(nodes[from].port, "CLUSTER SETSLOT %u MIGRATING %s", slot,
                               to_id), "MIGRATING");
    CHECK(ok);
    tr_sleep_ms(50);
    migrate_keys(nodes[from].port, nodes[to].port, names, 0, NM / 2);
    tr_sleep_ms(100); /* half here, half there: ASK for the moved ones */
    migrate_keys(nodes[from].port, nodes[to].port, names, NM / 2, NM);
    tr_sleep_ms(100);
    for (int i = 0; i < 3; i++) { /* target first, as redis-cli does */
        int n = (to + i) % 3;
        CHECK(expect_status(tr_cmd(nodes[n].port, "CLUSTER SETSLOT %u NODE %s", slot, to_id),
                            "SETSLOT NODE"));
    }
    tr_sleep_ms(150); /* MOVED, then the refreshed map */
    stop_reader = 1;
    pthread_join(th, NULL);
    CHECK_STATUS(sw_remote_get_stats(mig_handle, &s), SW_OK);
    printf("migration: %d reader calls, %d misses, %d wrong; ask %llu moved %llu "
           "refreshes %llu; get p50 %llu us p99 %llu us\n",
           reader_calls, reader_bad, reader_wrong, (unsigned long long)s.ask,
           (unsigned long long)s.moved, (unsigned long long)s.topology_refreshes,
           (unsigned long long)s.get_p50_us, (unsigned long long)s.get_p99_us);
    CHECK(reader_calls > 10 && reader_bad == 0 && reader_wrong == 0);
    CHECK(s.ask >= 1 && s.moved >= 1);
    /* the old owner holds nothing of the slot; reads go straight to the new */
    redisReply *rep = tr_cmd(nodes[from].port, "CLUSTER COUNTKEYSINSLOT %u", slot);
    CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0);
    if (rep)
        freeReplyObject(rep);
    uint64_t moved_before = s.moved;
    static uint8_t mdst[NM][MLEN];
    void *md[NM];
    for (int i = 0; i < NM; i++)
        md[i] = mdst[i];
    CHECK_STATUS(sw_remote_get_batch(mig_handle, NM, mkeys, md, MLEN, NULL, NULL, st), SW_OK);
    CHECK_STATUS(sw_remote_get_stats(mig_handle, &s), SW_OK);
    CHECK(s.moved == moved_before);
    /* the other handle learns the new owner through MOVED as well */
    CHECK_STATUS(sw_remote_get_batch(r, N - 1, keys + 1, dsts + 1, 1024, NULL, NULL, st + 1),
                 SW_OK);

    sw_remote_close(mig_handle);
    sw_remote_close(r);
    for (int i = 0; i < 3; i++)
        tr_kill(&nodes[i]);
    printf("total %.2f s\n", tr_now() - t0);
#endif
    if (sw_test_failures) {
        fprintf(stderr, "test_remote_cluster: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_remote_cluster: ok\n");
    return 0;
}
