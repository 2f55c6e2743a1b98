/* Remote tier redirections against scripted fake servers (threads of this
 * test on loopback):
 *  - a standalone handle whose server answers MOVED and ASK: the keys fail
 *    IO ("a standalone server sent a redirection"), the named server is
 *    never connected to, no node is added, the connection carries on;
 *  - a cluster ASK to a node whose ASKING reply is not +OK (an error, or a
 *    reply longer than the 64 KiB every short reply is held to): the key
 *    fails IO and the value that node sends after it is not served; +OK
 *    serves it (the control);
 *  - a key MOVED in every pass while other keys of its node announce 2 GiB
 *    values (each re-opens the connection, in a pass that does not count):
 *    the key is redirected twice at most, then fails IO. */
#include "test_remote_util.h"

#include <poll.h>
#include <pthread.h>
#include <strings.h>

enum { ROLE_STANDALONE = 1, ROLE_CLUSTER = 2, ROLE_TARGET = 3 };
enum { ASKING_OK = 0, ASKING_ERR = 1, ASKING_LONG = 2 };
enum { LEN = 1024, TIMEOUT_MS = 300 };

typedef struct fk {
    int lfd, port, role;
    int peer;               /* the port its redirections name */
    volatile int asking;    /* ROLE_TARGET: ASKING_* */
    volatile int accepts, stop;
    pthread_t th;
} fk;

typedef struct fk_conn {
    fk *f;
    int fd;
} fk_conn;

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The value of key k as the tier writes it (payload tr_fill(k, 1)), as a
 * RESP bulk string in out; its length. */
static size_t value_of(const sw_store_key *k, char *out)
{
    uint8_t payload[LEN];
    tr_fill(k, 1, payload, LEN);
    sw_remote_hdr h;
    memset(&h, 0, sizeof h);
    h.key = *k;
    h.prefix_hash = sw_remote_prefix_hash("sw:", 3);
    h.length = LEN;
    size_t l = (size_t)sprintf(out, "$%u\r\n", SW_REMOTE_HDR_BYTES + LEN);
    sw_remote_encode_hdr(&h, payload, (uint8_t *)out + l);
    memcpy(out + l + SW_REMOTE_HDR_BYTES, payload, LEN);
    l += SW_REMOTE_HDR_BYTES + LEN;
    memcpy(out + l, "\r\n", 2);
    return l + 2;
}

/* One whole command at req[0..len): 1 and its arguments (up to 3) and
 * *used; 0 incomplete. */
static int next_cmd(const char *req, size_t len, size_t *used, const char **args, size_t *al,
                    int *na)
{
    if (!len || req[0] != '*')
        return 0;
    const char *e = memchr(req, '\n', len);
    if (!e)
        return 0;
    *na = atoi(req + 1);
    size_t q = (size_t)(e - req) + 1;
    for (int a = 0; a < *na; a++) {
        e = q < len ? memchr(req + q, '\n', len - q) : NULL;
        if (!e)
            return 0;
        size_t bl = (size_t)atol(req + q + 1);
        q = (size_t)(e - req) + 1;
        if (q + bl + 2 > len)
            return 0;
        if (a < 3) {
            args[a] = req + q;
            al[a] = bl;
        }
        q += bl + 2;
    }
    *used = q;
    return 1;
}

static int is_cmd(const char *a, size_t l, const char *name)
{
    return l == strlen(name) && !strncasecmp(a, name, l);
}

/* Answers one command; 1 = close the connection after it, -1 error. */
static int answer(fk *f, int fd, const char **args, const size_t *al, int na)
{
    static __thread char out[LEN + (96 << 10)];
    size_t l = 0;
    if (is_cmd(args[0], al[0], "PING"))
        return send_all(fd, "+PONG\r\n", 7);
    if (f->role == ROLE_CLUSTER && na >= 2 && is_cmd(args[1], al[1], "SLOTS")) {
        l = (size_t)sprintf(out, "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
                            f->port);
        return send_all(fd, out, l);
    }
    if (f->role == ROLE_TARGET && is_cmd(args[0], al[0], "ASKING")) {
        if (f->asking == ASKING_OK)
            return send_all(fd, "+OK\r\n", 5);
        if (f->asking == ASKING_ERR)
            return send_all(fd, "-ERR asking refused\r\n", 21);
        /* 65530 bytes of string: under 64 KiB, but not the reply with its
         * length line and CRLF (65540 bytes) */
        l = (size_t)sprintf(out, "$65530\r\n");
        memset(out + l, 'a', 65530);
        l += 65530;
        memcpy(out + l, "\r\n", 2);
        return send_all(fd, out, l + 2);
    }
    int get = is_cmd(args[0], al[0], "GET"), set = is_cmd(args[0], al[0], "SET");
    if ((!get && !set) || na < 2)
        return send_all(fd, "-ERR unexpected\r\n", 17);
    char name[SW_REMOTE_MAX_KEY + 1];
    size_t nl = al[1] < SW_REMOTE_MAX_KEY ? al[1] : SW_REMOTE_MAX_KEY;
    memcpy(name, args[1], nl);
    name[nl] = 0;
    unsigned long long ns = 0;
    unsigned layer = 0, block = 0, head = 0;
    if (sscanf(name, "sw:%16llx:%u:%u:%u:", &ns, &layer, &block, &head) != 4)
        return -1;
    unsigned slot = sw_remote_key_slot(name, nl);
    if (f->role == ROLE_TARGET) {
        if (set)
            return send_all(fd, "+OK\r\n", 5);
        sw_store_key k = tr_key(ns, layer, block, (uint16_t)head, SW_STORE_KIND_K);
        return send_all(fd, out, value_of(&k, out));
    }
    if (f->role == ROLE_STANDALONE) {
        if (block == 2 && get)
            return send_all(fd, "$-1\r\n", 5);
        l = (size_t)sprintf(out, "-%s %u 127.0.0.1:%d\r\n", block == 1 ? "ASK" : "MOVED", slot,
                            f->peer);
        return send_all(fd, out, l);
    }
    /* ROLE_CLUSTER */
    if (block == 10) {
        l = (size_t)sprintf(out, "-ASK %u 127.0.0.1:%d\r\n", slot, f->peer);
        return send_all(fd, out, l);
    }
    if (block == 20) { /* to itself: the key stays on this node */
        l = (size_t)sprintf(out, "-MOVED %u 127.0.0.1:%d\r\n", slot, f->port);
        return send_all(fd, out, l);
    }
    if (block >= 21 && block <= 24) /* a value too long to drain: re-opened */
        return send_all(fd, "$2147483648\r\n", 13) ? -1 : 1;
    return send_all(fd, "$-1\r\n", 5);
}

static void *fk_conn_main(void *arg)
{
    fk_conn *fc = arg;
    fk *f = fc->f;
    int fd = fc->fd;
    free(fc);
    static __thread char req[64 << 10];
    size_t held = 0;
    while (!f->stop) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t got = recv(fd, req + held, sizeof req - held, 0);
        if (got <= 0)
            break;
        held += (size_t)got;
        const char *args[3] = {"", "", ""};
        size_t al[3] = {0, 0, 0}, used = 0;
        int na = 0, rc = 0;
        while (rc == 0 && next_cmd(req, held, &used, args, al, &na)) {
            rc = answer(f, fd, args, al, na);
            memmove(req, req + used, held - used);
            held -= used;
        }
        if (rc != 0 || held == sizeof req)
            break;
    }
    close(fd);
    return NULL;
}

static void *fk_main(void *arg)
{
    fk *f = arg;
    while (!f->stop) {
        struct pollfd p = {.fd = f->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        f->accepts++;
        fk_conn *fc = malloc(sizeof *fc);
        pthread_t th;
        if (!fc) {
            close(fd);
            continue;
        }
        fc->f = f;
        fc->fd = fd;
        if (pthread_create(&th, NULL, fk_conn_main, fc) == 0) {
            pthread_detach(th);
        } else {
            close(fd);
            free(fc);
        }
    }
    return NULL;
}

static void fk_start(fk *f, int role, int peer)
{
    memset(f, 0, sizeof *f);
    f->role = role;
    f->peer = peer;
    f->lfd = tr_bind_any(1, &f->port);
    pthread_create(&f->th, NULL, fk_main, f);
}

static void fk_stop(fk *f)
{
    f->stop = 1;
    pthread_join(f->th, NULL);
    close(f->lfd);
    tr_sleep_ms(120); /* connection threads see stop within 50 ms */
}

static sw_remote *open_at(int port, int cluster)
{
    sw_remote_config c = tr_config(port);
    c.cluster = cluster;
    c.command_timeout_ms = TIMEOUT_MS;
    c.connect_timeout_ms = 200;
    sw_remote *r = NULL;
    CHECK_STATUS(sw_remote_open(&c, &r), SW_OK);
    if (!r)
        exit(1);
    return r;
}

static sw_remote_stats stats_of(sw_remote *r)
{
    sw_remote_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    return s;
}

static uint8_t dst[8][LEN], want[8][LEN], src[LEN];

/* GETs keys of ns `ns`, blocks blocks[0..n), into dst; statuses in st,
 * the detail of the call in why. */
static void get_blocks(sw_remote *r, uint64_t ns, const uint32_t *blocks, int n, sw_status *st,
                       char *why, size_t why_len)
{
    sw_store_key k[8];
    void *d[8];
    for (int i = 0; i < n; i++) {
        k[i] = tr_key(ns, 0, blocks[i], 0, SW_STORE_KIND_K);
        tr_fill(&k[i], 1, want[i], LEN);
        d[i] = dst[i];
    }
    memset(dst, 0x5a, sizeof dst);
    (void)sw_remote_get_batch(r, (size_t)n, k, d, LEN, NULL, NULL, st);
    snprintf(why, why_len, "%s", sw_last_error());
}

static sw_status put_block(sw_remote *r, uint64_t ns, uint32_t block, char *why,
                           size_t why_len)
{
    sw_store_key k = tr_key(ns, 0, block, 0, SW_STORE_KIND_K);
    const void *s[1] = {src};
    size_t l = LEN;
    sw_status st = SW_OK;
    (void)sw_remote_put_batch(r, 1, &k, s, &l, NULL, &st);
    snprintf(why, why_len, "%s", sw_last_error());
    return st;
}

int main(void)
{
    tr_init("remote_redirect");
    char why[1024];
    sw_status st[8];

    /* ---- 1. a standalone server that redirects ---- */
    fk target, srv;
    fk_start(&target, ROLE_TARGET, 0);
    fk_start(&srv, ROLE_STANDALONE, target.port);
    sw_remote *r = open_at(srv.port, 0);
    {
        const uint32_t blocks[3] = {0, 1, 2}; /* MOVED, ASK, nil */
        get_blocks(r, 5, blocks, 3, st, why, sizeof why);
        sw_remote_stats s = stats_of(r);
        printf("standalone, MOVED / ASK / nil: %s %s %s; nodes %llu, moved %llu, ask %llu, "
               "connections to the named server %d, to the server %d: %s\n",
               sw_status_str(st[0]), sw_status_str(st[1]), sw_status_str(st[2]),
               (unsigned long long)s.nodes, (unsigned long long)s.moved,
               (unsigned long long)s.ask, target.accepts, srv.accepts, why);
        CHECK(st[0] == SW_STATUS_IO && st[1] == SW_STATUS_IO && st[2] == SW_STATUS_NOT_FOUND);
        CHECK(dst[0][0] == 0x5a && dst[1][0] == 0x5a);
        CHECK(s.nodes == 1 && s.moved == 0 && s.ask == 0 && s.errors == 2);
        CHECK(s.reconnects == 0 && s.timeouts == 0 && s.nodes_connected == 1);
        CHECK(target.accepts == 0 && srv.accepts == 1); /* one connection, kept */
        const uint32_t ask_only[1] = {1};
        get_blocks(r, 5, ask_only, 1, st, why, sizeof why);
        CHECK(st[0] == SW_STATUS_IO && strstr(why, "standalone server sent a redirection") &&
              strstr(why, "ASK"));
        CHECK(put_block(r, 5, 3, why, sizeof why) == SW_STATUS_IO);
        printf("standalone, SET answered MOVED: %s\n", why);
        CHECK(strstr(why, "standalone server sent a redirection") && strstr(why, "MOVED"));
        s = stats_of(r);
        CHECK(s.nodes == 1 && s.moved == 0 && target.accepts == 0 && srv.accepts == 1);
    }
    sw_remote_close(r);
    fk_stop(&srv);

    /* ---- 2. ASK to a node whose ASKING reply is not +OK ---- */
    fk node;
    fk_start(&node, ROLE_CLUSTER, target.port);
    r = open_at(node.port, 1);
    {
        const uint32_t blocks[2] = {10, 11}; /* ASK to target, nil */
        target.asking = ASKING_OK; /* the control: the value is served */
        get_blocks(r, 6, blocks, 2, st, why, sizeof why);
        printf("ASK, ASKING +OK: %s %s\n", sw_status_str(st[0]), sw_status_str(st[1]));
        CHECK(st[0] == SW_OK && !memcmp(dst[0], want[0], LEN) && st[1] == SW_STATUS_NOT_FOUND);
        CHECK(put_block(r, 6, 10, why, sizeof why) == SW_OK);
        sw_remote_stats s0 = stats_of(r);
        CHECK(s0.ask == 2);

        target.asking = ASKING_ERR;
        get_blocks(r, 6, blocks, 2, st, why, sizeof why);
        printf("ASK, ASKING -ERR: %s %s: %s\n", sw_status_str(st[0]), sw_status_str(st[1]),
               why);
        CHECK(st[0] == SW_STATUS_IO && dst[0][0] == 0x5a && st[1] == SW_STATUS_NOT_FOUND);
        CHECK(strstr(why, "ASKING before key") && strstr(why, "ERR asking refused"));
        CHECK(put_block(r, 6, 10, why, sizeof why) == SW_STATUS_IO);
        printf("ASK, ASKING -ERR, SET: %s\n", why);
        CHECK(strstr(why, "ASKING before key") != NULL);
        sw_remote_stats s1 = stats_of(r);
        CHECK(s1.hits == s0.hits && s1.puts == s0.puts && s1.errors == s0.errors + 2);
        CHECK(s1.timeouts == s0.timeouts && s1.reconnects == s0.reconnects);

        target.asking = ASKING_LONG;
        get_blocks(r, 6, blocks, 2, st, why, sizeof why);
        printf("ASK, ASKING answered with 65540 bytes: %s %s: %s\n", sw_status_str(st[0]),
               sw_status_str(st[1]), why);
        CHECK(st[0] == SW_STATUS_IO && dst[0][0] == 0x5a && st[1] == SW_STATUS_NOT_FOUND);
        CHECK(strstr(why, "a reply longer than allowed") != NULL);
    }
    sw_remote_close(r);

    /* ---- 3. a key MOVED in every pass, next to values that re-open the
     * connection (passes that do not count): two redirections at most ---- */
    r = open_at(node.port, 1);
    {
        const uint32_t blocks[5] = {20, 21, 22, 23, 24};
        double t0 = tr_now();
        get_blocks(r, 7, blocks, 5, st, why, sizeof why);
        double secs = tr_now() - t0;
        sw_remote_stats s = stats_of(r);
        printf("MOVED every pass, 4 re-opening values: %s %s %s %s %s in %.1f ms, moved %llu, "
               "oversized %llu: %s\n", sw_status_str(st[0]), sw_status_str(st[1]),
               sw_status_str(st[2]), sw_status_str(st[3]), sw_status_str(st[4]), secs * 1e3,
               (unsigned long long)s.moved, (unsigned long long)s.oversized, why);
        CHECK(st[0] == SW_STATUS_IO);
        for (int i = 1; i < 5; i++)
            CHECK(st[i] == SW_STATUS_INVALID);
        /* (the call's last detail is the last refused value's) */
        CHECK(s.moved == 2 && s.oversized == 4 && s.nodes == 1);
        CHECK(secs < 1.2 * TIMEOUT_MS / 1000.0);
    }
    sw_remote_close(r);
    fk_stop(&node);
    fk_stop(&target);

    if (sw_test_failures) {
        fprintf(stderr, "test_remote_redirect: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_remote_redirect: ok\n");
    return 0;
}
