/* Helpers shared by the remote tier tests: a private redis-server on a free
 * loopback port (started from a temp dir, no persistence, killed at exit),
 * a raw hiredis connection for setup and tampering, keys and contents.
 * Header-only so that each test stays one program built by sw_add_test.
 * A machine without redis-server (or a build without hiredis) skips: 77. */
#ifndef TEST_REMOTE_UTIL_H
#define TEST_REMOTE_UTIL_H

#include "sw_test.h"
#include "store/format.h"
#include "remote/format.h"

#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(SW_HAVE_HIREDIS)
#include <hiredis/hiredis.h>
#endif

#define TR_MAX_SERVERS 8

typedef struct tr_server {
    pid_t pid;
    int port;
    char dir[256];
} tr_server;

/* pids of the servers still running (copies, not pointers: the cleanup runs
 * at exit, after main's tr_server variables are gone) */
static pid_t tr_pids[TR_MAX_SERVERS];
static char tr_base[128];

static int tr_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

static inline void tr_kill_pid(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGCONT);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < TR_MAX_SERVERS; i++)
        if (tr_pids[i] == pid)
            tr_pids[i] = 0;
}

static inline void tr_kill(tr_server *s)
{
    tr_kill_pid(s->pid);
    s->pid = 0;
}

static void tr_cleanup(void)
{
    for (int i = 0; i < TR_MAX_SERVERS; i++)
        tr_kill_pid(tr_pids[i]);
    if (tr_base[0])
        nftw(tr_base, tr_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void tr_on_signal(int sig)
{
    tr_cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

static inline double tr_now(void) { return sw_now_seconds(); }

static inline void tr_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline const char *tr_redis_server(void)
{
    const char *e = getenv("SW_TEST_REDIS_SERVER");
    if (e && e[0])
        return e;
    static const char *cands[] = {"/usr/bin/redis-server", "/usr/local/bin/redis-server",
                                  "/usr/bin/valkey-server", "/usr/local/bin/valkey-server"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (access(cands[i], X_OK) == 0)
            return cands[i];
    return NULL;
}

/* Skips (exit 77) without hiredis or redis-server; sets up cleanup. */
static inline void tr_init(const char *tag)
{
#if !defined(SW_HAVE_HIREDIS)
    fprintf(stderr, "SKIP: built without hiredis\n");
    exit(SW_TEST_SKIP);
#endif
    if (!tr_redis_server()) {
        fprintf(stderr, "SKIP: redis-server not installed\n");
        exit(SW_TEST_SKIP);
    }
    snprintf(tr_base, sizeof tr_base, "/tmp/sw_%s_XXXXXX", tag);
    if (!mkdtemp(tr_base)) {
        perror("mkdtemp");
        exit(1);
    }
    atexit(tr_cleanup);
    signal(SIGINT, tr_on_signal);
    signal(SIGTERM, tr_on_signal);
    signal(SIGSEGV, tr_on_signal);
    signal(SIGABRT, tr_on_signal);
    signal(SIGPIPE, SIG_IGN);
}

/* 127.0.0.1:port (0: any free port, when bound). */
static inline struct sockaddr_in tr_loopback(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    return a;
}

/* A TCP socket bound to a free loopback port (*port), listening when
 * `listening`; exits the test when that fails. */
static inline int tr_bind_any(int listening, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = tr_loopback(0);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        (listening && listen(fd, 16) != 0) || getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("loopback socket");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* 1 when a loopback TCP port can be bound now (nobody listens on it). */
static inline int tr_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = tr_loopback(port);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* A loopback port nobody listens on right now, and whose cluster bus port
 * (port + 10000, where a cluster node also listens) is free as well. */
static inline int tr_free_port(void)
{
    for (int tries = 0; tries < 200; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = tr_loopback(0);
        socklen_t len = sizeof a;
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
            int port = ntohs(a.sin_port);
            close(fd);
            if (port + 10000 <= 65535 && tr_port_free(port + 10000))
                return port;
        } else {
            close(fd);
        }
    }
    fprintf(stderr, "no free port\n");
    exit(1);
}

/* A loopback port that refuses connections for the rest of the test: it is
 * bound (without listen) by a socket kept open until exit, so a connect to
 * it is refused and no other process - a redis-server of a test running in
 * parallel included - can take it meanwhile (a port that was merely free
 * when asked, as tr_free_port gives, could be). */
static inline int tr_dead_port(void)
{
    int port = 0;
    (void)tr_bind_any(0, &port); /* the fd stays open: the port stays reserved */
    return port;
}

#if defined(SW_HAVE_HIREDIS)
static inline redisContext *tr_connect(int port, const char *user, const char *pass)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (pass) {
        redisReply *r = user ? redisCommand(c, "AUTH %s %s", user, pass)
                             : redisCommand(c, "AUTH %s", pass);
        int ok = r && r->type != REDIS_REPLY_ERROR;
        if (r)
            freeReplyObject(r);
        if (!ok) {
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* Runs a command on the server at `port` (admin password optional via
 * tr_admin_pass); returns the reply (caller frees) or NULL. */
static const char *tr_admin_pass;
static inline redisReply *tr_cmd(int port, const char *fmt, ...)
{
    redisContext *c = tr_connect(port, NULL, tr_admin_pass);
    if (!c)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}
#endif

/* Starts redis-server on `port` (0 = a free one) in its own directory with
 * no persistence; extra arguments (NULL-terminated pairs/flags) follow.
 * Waits (<= 5 s) until it accepts connections. A port chosen here (and,
 * for a cluster node, its bus port + 10000) was free when chosen, but a
 * test running in parallel can take it before the server binds it: a
 * server that then exits at start is started again on another port (up to
 * 5 times). */
static inline int tr_start_on(tr_server *s, int port, const char *const *extra, int retry);
static inline void tr_start(tr_server *s, int port, const char *const *extra)
{
    if (port) {
        tr_start_on(s, port, extra, 0);
        return;
    }
    for (int attempt = 0; attempt < 5; attempt++)
        if (tr_start_on(s, tr_free_port(), extra, attempt < 4) == 0)
            return;
}

/* 0 started; -1 the server exited at start and `retry` is set (else exit). */
static inline int tr_start_on(tr_server *s, int port, const char *const *extra, int retry)
{
    s->port = port;
    snprintf(s->dir, sizeof s->dir, "%s/%d", tr_base, port);
    mkdir(s->dir, 0700);
    char portbuf[16];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    const char *argv[64];
    int argc = 0;
    argv[argc++] = tr_redis_server();
    argv[argc++] = "--port";
    argv[argc++] = portbuf;
    argv[argc++] = "--bind";
    argv[argc++] = "127.0.0.1";
    argv[argc++] = "--save";
    argv[argc++] = "";
    argv[argc++] = "--appendonly";
    argv[argc++] = "no";
    argv[argc++] = "--dir";
    argv[argc++] = s->dir;
    argv[argc++] = "--daemonize";
    argv[argc++] = "no";
    argv[argc++] = "--logfile";
    argv[argc++] = "redis.log";
    for (int i = 0; extra && extra[i] && argc < 62; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        if (chdir(s->dir) != 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < TR_MAX_SERVERS; i++)
        if (tr_pids[i] == 0) {
            tr_pids[i] = pid;
            break;
        }
    for (int i = 0; i < 500; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = tr_loopback(port);
        int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok)
            return 0;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "redis-server on port %d exited at start (see %s/redis.log)%s\n",
                    port, s->dir, retry ? "; trying another port" : "");
            for (int j = 0; j < TR_MAX_SERVERS; j++)
                if (tr_pids[j] == pid)
                    tr_pids[j] = 0; /* reaped: not to be killed again */
            s->pid = 0;
            if (retry)
                return -1;
            exit(1);
        }
        tr_sleep_ms(10);
    }
    fprintf(stderr, "redis-server on port %d did not come up\n", port);
    exit(1);
}

static inline sw_store_key tr_key(uint64_t ns, uint32_t layer, uint32_t block, uint16_t head,
                                  uint8_t kind)
{
    sw_store_key k;
    memset(&k, 0, sizeof k);
    k.ns = ns;
    k.layer = layer;
    k.block = block;
    k.kv_head = head;
    k.kind = kind;
    return k;
}

/* Deterministic contents of (key, version), so a reader can check bytes
 * without keeping a copy. */
static inline void tr_fill(const sw_store_key *k, uint64_t version, uint8_t *buf, size_t n)
{
    uint64_t x = k->ns * 0x9e3779b97f4a7c15ull ^ ((uint64_t)k->layer << 40) ^
                 ((uint64_t)k->block << 8) ^ ((uint64_t)k->kv_head << 56) ^ k->kind ^
                 version * 0xd1b54a32d192ed03ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        buf[i] = (uint8_t)((x * 0x2545f4914f6cdd1dull) >> 56);
    }
}

static inline size_t tr_len_of(const sw_store_key *k, uint64_t version, size_t max)
{
    uint64_t h = (k->block * 2654435761u) ^ (k->layer * 40503u) ^ version * 977u ^ k->kind;
    return (size_t)(h % (max + 1));
}

static inline sw_remote_config tr_config(int port)
{
    static char ep[64];
    snprintf(ep, sizeof ep, "127.0.0.1:%d", port);
    sw_remote_config c;
    sw_remote_config_init(&c);
    c.endpoints = ep;
    return c;
}

/* redis-cli is needed to create a cluster: 1 when it is there. */
static inline int tr_have_redis_cli(void)
{
    return access("/usr/bin/redis-cli", X_OK) == 0 || access("/usr/local/bin/redis-cli", X_OK) == 0;
}

/* Makes nodes[0..2] (started with --cluster-enabled) one cluster of three
 * masters sharing the slots: 0, or 1 with the reason printed. */
static inline int tr_cluster_create(const tr_server *nodes)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d "
             "--cluster-replicas 0 --cluster-yes >%s/create.log 2>&1",
             nodes[0].port, nodes[1].port, nodes[2].port, tr_base);
    if (system(cmd) != 0) {
        fprintf(stderr, "redis-cli --cluster create failed (see %s/create.log)\n", tr_base);
        return 1;
    }
    return 0;
}

#endif
