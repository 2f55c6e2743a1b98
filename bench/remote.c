/* spillway-bench-remote [--remote HOST:PORT|auto] (`spillway bench remote`):
 * the remote tier's pipelined reads (sw_remote_get_batch, public API only)
 * against `redis-benchmark -t get` on the same server, with the same value
 * size and pipelining depth, measured in the same run (interleaved passes,
 * medians).
 *
 * Without HOST:PORT (or with "auto") the bench starts its own redis-server on
 * a free 127.0.0.1 port in a temp dir (no persistence) and kills it at exit,
 * as the remote tier's tests do. Exit status 77 means a prerequisite is
 * missing (a build without hiredis, no redis-server / redis-benchmark /
 * redis-cli): nothing was measured. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#define PROG "spillway-bench-remote"

#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RB_MAX_PASSES 32
#define RB_SKIP 77

typedef struct rb_opts {
    const char *remote; /* NULL or "auto": own server */
    const char *json;
    const char *server_bin, *benchmark_bin, *cli_bin; /* --redis-*: NULL = searched */
    uint32_t value_bytes, pipeline, keys, passes, ctx_clients;
    double seconds;
} rb_opts;

/* ------------------------------------------------------- own server -- */
static pid_t rb_server_pid;
static char rb_tmp[128];

static int rb_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

static void rb_stop_server(void)
{
    if (rb_server_pid > 0) {
        kill(rb_server_pid, SIGKILL);
        waitpid(rb_server_pid, NULL, 0);
        rb_server_pid = 0;
    }
    if (rb_tmp[0]) {
        nftw(rb_tmp, rb_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        rb_tmp[0] = 0;
    }
}

static void rb_on_signal(int sig)
{
    rb_stop_server();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The program `given` (an option's path: used as it is when executable),
 * else `name` in /usr/bin, /usr/local/bin or /bin; NULL when none is. */
static const char *rb_find(const char *given, const char *name)
{
    if (given)
        return access(given, X_OK) == 0 ? given : NULL;
    static char buf[4][256];
    static int next;
    const char *dirs[] = {"/usr/bin", "/usr/local/bin", "/bin"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char *b = buf[next % 4];
        snprintf(b, sizeof buf[0], "%s/%s", dirs[i], name);
        if (access(b, X_OK) == 0) {
            next++;
            return b;
        }
    }
    return NULL;
}

static int rb_free_port(void)
{
    for (int tries = 0; tries < 50; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                 getsockname(fd, (struct sockaddr *)&a, &len) == 0;
        close(fd);
        if (ok)
            return ntohs(a.sin_port);
    }
    return -1;
}

static int rb_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Starts redis-server on a free loopback port; returns the port or -1. */
static int rb_start_server(const char *server)
{
    snprintf(rb_tmp, sizeof rb_tmp, "/tmp/spillway-remote-bench-XXXXXX");
    if (!mkdtemp(rb_tmp)) {
        perror("mkdtemp");
        rb_tmp[0] = 0;
        return -1;
    }
    atexit(rb_stop_server);
    signal(SIGINT, rb_on_signal);
    signal(SIGTERM, rb_on_signal);
    signal(SIGHUP, rb_on_signal);
    signal(SIGSEGV, rb_on_signal);
    signal(SIGABRT, rb_on_signal);
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = rb_free_port();
        if (port < 0)
            break;
        char portbuf[16];
        snprintf(portbuf, sizeof portbuf, "%d", port);
        const char *argv[] = {server,      "--port",      portbuf,   "--bind",
                              "127.0.0.1", "--save",      "",        "--appendonly",
                              "no",        "--dir",       rb_tmp,    "--daemonize",
                              "no",        "--logfile",   "redis.log", NULL};
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return -1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the bench */
            if (chdir(rb_tmp) != 0)
                _exit(127);
            execv(argv[0], (char *const *)argv);
            _exit(127);
        }
        rb_server_pid = pid;
        for (int i = 0; i < 500; i++) {
            if (rb_port_open(port))
                return port;
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) {
                rb_server_pid = 0;
                break; /* port taken meanwhile? try another */
            }
            struct timespec ts = {0, 10000000L};
            nanosleep(&ts, NULL);
        }
        if (rb_server_pid) {
            kill(rb_server_pid, SIGKILL);
            waitpid(rb_server_pid, NULL, 0);
            rb_server_pid = 0;
        }
    }
    fprintf(stderr, PROG ": redis-server did not come up (log in %s)\n", rb_tmp);
    return -1;
}

/* ------------------------------------------------------------ helpers -- */
static uint64_t rb_rng = 0x7e3d5eedull;
static uint64_t rb_rnd(void)
{
    rb_rng ^= rb_rng << 13;
    rb_rng ^= rb_rng >> 7;
    rb_rng ^= rb_rng << 17;
    return rb_rng;
}

static void rb_shuffle(uint32_t *a, uint32_t n)
{
    for (uint32_t i = n ? n - 1 : 0; i > 0; i--) {
        uint32_t j = (uint32_t)(rb_rnd() % (i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int rb_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double rb_median(const double *v, int n)
{
    double t[RB_MAX_PASSES];
    if (n <= 0)
        return 0;
    memcpy(t, v, sizeof *t * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, rb_cmp);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static sw_store_key rb_key(uint32_t i)
{
    sw_store_key k;
    memset(&k, 0, sizeof k);
    k.ns = 0x5b11a7beull;
    k.layer = i >> 10;
    k.block = i & 1023u;
    k.kv_head = 0;
    k.kind = SW_STORE_KIND_K;
    return k;
}

static void rb_fill(char *p, size_t n, uint32_t i)
{
    uint64_t tag = 0xb0b0000000000000ull | i;
    for (size_t o = 0; o + 8 <= n; o += 8) {
        uint64_t v = tag * 0x9e3779b97f4a7c15ull + o;
        memcpy(p + o, &v, 8);
    }
    if (n >= 8)
        memcpy(p, &tag, 8);
}

static int rb_check(const char *p, size_t n, uint32_t i)
{
    if (n < 8)
        return 1;
    uint64_t tag = 0xb0b0000000000000ull | i, got;
    memcpy(&got, p, 8);
    return got == tag;
}

/* ------------------------------------------------------- measurements -- */
typedef struct rb_series {
    const char *name, *impl;
    uint32_t clients;
    double gbps[RB_MAX_PASSES], ops[RB_MAX_PASSES];
    int n;
} rb_series;

/* Times sw_remote_get_batch over batches of `pipeline` keys (shuffled order,
 * reshuffled at each wrap) for `seconds`; checks every value's tag. */
static int rb_ours(sw_remote *r, const rb_opts *o, uint32_t *order, char *dst, void **dp,
                   sw_store_key *keys, size_t *lens, sw_status *sts, double *gbps, double *ops)
{
    uint32_t P = o->pipeline, pos = o->keys;
    uint64_t got = 0, bad = 0;
    double t0 = bench_now(), t = t0;
    do {
        for (int rep = 0; rep < 16; rep++) {
            if (pos + P > o->keys) {
                rb_shuffle(order, o->keys);
                pos = 0;
            }
            for (uint32_t j = 0; j < P; j++)
                keys[j] = rb_key(order[pos + j]);
            sw_status st = sw_remote_get_batch(r, P, keys, dp, o->value_bytes, lens, NULL, sts);
            if (st != SW_OK) {
                fprintf(stderr, PROG ": sw_remote_get_batch: %s: %s\n",
                        sw_status_str(st), sw_last_error());
                return -1;
            }
            for (uint32_t j = 0; j < P; j++)
                if (lens[j] != o->value_bytes ||
                    !rb_check(dst + (size_t)j * o->value_bytes, lens[j], order[pos + j]))
                    bad++;
            pos += P;
            got += P;
        }
        t = bench_now();
    } while (t - t0 < o->seconds);
    if (bad) {
        fprintf(stderr, PROG ": %llu values came back with the wrong bytes\n",
                (unsigned long long)bad);
        return -1;
    }
    *ops = got / (t - t0);
    *gbps = *ops * o->value_bytes / 1e9;
    return 0;
}

/* Runs redis-benchmark GET and parses its requests/s from --csv. */
static int rb_redis_benchmark(const char *bin, const char *host, int port, const rb_opts *o,
                              uint32_t clients, uint64_t requests, double *gbps, double *ops,
                              char *cmd, size_t cmd_size)
{
    snprintf(cmd, cmd_size,
             "%s -h %s -p %d -t get -d %u -P %u -r %u -n %llu -c %u --csv 2>&1", bin, host,
             port, o->value_bytes, o->pipeline, o->keys, (unsigned long long)requests, clients);
    FILE *f = popen(cmd, "r");
    if (!f) {
        perror("popen redis-benchmark");
        return -1;
    }
    char line[1024];
    double rps = -1;
    char last[1024] = "";
    while (fgets(line, sizeof line, f)) {
        /* the progress lines end in \r; the result is "GET","123.45",... */
        char *p = strstr(line, "\"GET\",\"");
        if (p)
            rps = strtod(p + 7, NULL);
        else if (line[0] && line[0] != '"')
            snprintf(last, sizeof last, "%s", line);
    }
    int rc = pclose(f);
    if (rps <= 0 || rc != 0) {
        fprintf(stderr, PROG ": redis-benchmark gave no GET figure (exit %d): %s",
                rc, last[0] ? last : "(no output)\n");
        return -1;
    }
    *ops = rps;
    *gbps = rps * o->value_bytes / 1e9;
    return 0;
}

/* Stores the keys redis-benchmark -r reads ("key:%012u", 0..keys-1) with
 * values of value_bytes, through redis-cli --pipe (so its GETs all hit). */
static int rb_fill_benchmark_keys(const char *cli, const char *host, int port, const rb_opts *o)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' -h %s -p %d --pipe >/dev/null 2>&1", cli, host, port);
    FILE *f = popen(cmd, "w");
    if (!f) {
        perror("popen redis-cli");
        return -1;
    }
    char *val = (char *)malloc(o->value_bytes);
    if (!val) {
        pclose(f);
        return -1;
    }
    memset(val, 'x', o->value_bytes);
    for (uint32_t i = 0; i < o->keys; i++) {
        fprintf(f, "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012u\r\n$%u\r\n", i, o->value_bytes);
        fwrite(val, 1, o->value_bytes, f);
        fputs("\r\n", f);
    }
    free(val);
    int rc = pclose(f);
    if (rc != 0) {
        fprintf(stderr, PROG ": redis-cli --pipe failed (exit %d)\n", rc);
        return -1;
    }
    return 0;
}

static void rb_usage(FILE *f)
{
    fprintf(f,
            "usage: spillway-bench-remote [--remote HOST:PORT|auto] [options]\n"
            "(also run as 'spillway bench remote')\n"
            "  --remote HOST:PORT   an existing Redis/Valkey server (standalone; no AUTH)\n"
            "  --remote [auto]      start a private redis-server on a free 127.0.0.1 port in a\n"
            "                       temp dir (--save '' --appendonly no), killed at exit\n"
            "  --value-bytes N      payload per value (default 8192, the stripe size)\n"
            "  --pipeline P         keys per sw_remote_get_batch = commands in flight = the\n"
            "                       redis-benchmark -P (default 64)\n"
            "  --keys N             values written (default 16384; also redis-benchmark -r)\n"
            "  --seconds S          length of one timed pass of ours (default 3)\n"
            "  --passes N           interleaved passes of each case (default 3; medians)\n"
            "  --context-clients C  redis-benchmark -c of the context figure (default 50;\n"
            "                       0 = skip); the like-for-like figure is always -c 1\n"
            "  --redis-server P, --redis-benchmark P, --redis-cli P\n"
            "                       the programs to run (default: found in /usr/bin,\n"
            "                       /usr/local/bin or /bin)\n"
            "  --json PATH          results (default: a new bench/results/store-remote-<host>-\n"
            "                       <UTC time>.json, never a committed record)\n"
            "exit status 77: a prerequisite is missing (no hiredis in this build, no\n"
            "redis-server / redis-benchmark / redis-cli), nothing measured\n");
}

static int rb_parse(int argc, char **argv, rb_opts *o)
{
    *o = (rb_opts){NULL, NULL, NULL, NULL, NULL, 8192, 64, 16384, 3, 50, 3.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            rb_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--remote")) {
            if (v && strncmp(v, "--", 2) != 0) {
                o->remote = v;
                i++;
            }
            continue;
        }
        static const char *const valued[] = {
            "--json", "--redis-server", "--redis-benchmark", "--redis-cli", "--value-bytes",
            "--pipeline", "--keys", "--seconds", "--passes", "--context-clients"};
        if (!bench_opt_is(a, valued, sizeof valued / sizeof valued[0])) {
            fprintf(stderr, PROG ": unknown option '%s'\n", a);
            rb_usage(stderr);
            return 2;
        }
        if (!v) {
            fprintf(stderr, PROG ": option '%s' needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--json"))
            o->json = v;
        else if (!strcmp(a, "--redis-server"))
            o->server_bin = v;
        else if (!strcmp(a, "--redis-benchmark"))
            o->benchmark_bin = v;
        else if (!strcmp(a, "--redis-cli"))
            o->cli_bin = v;
        else if (!strcmp(a, "--value-bytes"))
            BENCH_NUM(o->value_bytes, 1, 64 << 20);
        else if (!strcmp(a, "--pipeline"))
            BENCH_NUM(o->pipeline, 1, 65536);
        else if (!strcmp(a, "--keys"))
            BENCH_NUM(o->keys, 1, 1 << 30);
        else if (!strcmp(a, "--seconds")) {
            char *end = NULL;
            o->seconds = strtod(v, &end);
            if (end == v || *end) {
                fprintf(stderr, PROG ": --seconds wants a number, not '%s'\n", v);
                return 2;
            }
        }
        else if (!strcmp(a, "--passes"))
            BENCH_NUM(o->passes, 1, RB_MAX_PASSES);
        else if (!strcmp(a, "--context-clients"))
            BENCH_NUM(o->ctx_clients, 0, 4096);
        else {
            fprintf(stderr, PROG ": unknown option '%s'\n", a);
            rb_usage(stderr);
            return 2;
        }
    }
    if (o->remote && !strcmp(o->remote, "auto"))
        o->remote = NULL;
    const char *given[] = {o->server_bin, o->benchmark_bin, o->cli_bin};
    for (int k = 0; k < 3; k++)
        if (given[k] && access(given[k], X_OK) != 0) {
            fprintf(stderr, PROG ": '%s' is not an executable program\n", given[k]);
            return 2;
        }
    if (!o->value_bytes || o->value_bytes > (64u << 20) || !o->pipeline ||
        o->pipeline > 65536 || o->keys < o->pipeline || !o->passes ||
        o->passes > RB_MAX_PASSES || !(o->seconds > 0)) {
        fprintf(stderr, PROG ": need 0 < value-bytes <= 64 MiB, "
                        "0 < pipeline <= 65536 <= ..., keys >= pipeline, 1..32 passes, "
                        "seconds > 0\n");
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rb_opts o;
    int pr = rb_parse(argc, argv, &o);
    if (pr)
        return pr == 1 ? 0 : 2;
    if (!sw_remote_available()) {
        fprintf(stderr, PROG ": SKIP: this build has no remote tier "
                        "(hiredis)\n");
        return RB_SKIP;
    }
    const char *bench_bin = rb_find(o.benchmark_bin, "redis-benchmark");
    const char *cli_bin = rb_find(o.cli_bin, "redis-cli");
    if (!bench_bin || !cli_bin) {
        fprintf(stderr, PROG ": SKIP: redis-benchmark / redis-cli not "
                        "found (apt package redis-tools)\n");
        return RB_SKIP;
    }
    signal(SIGPIPE, SIG_IGN);

    char host[256] = "127.0.0.1";
    int port;
    int own = !o.remote;
    if (own) {
        const char *server = rb_find(o.server_bin, "redis-server");
        if (!server) {
            fprintf(stderr, PROG ": SKIP: redis-server not found "
                            "(apt package redis-server), and no --remote HOST:PORT given\n");
            return RB_SKIP;
        }
        port = rb_start_server(server);
        if (port < 0)
            return 1;
    } else {
        const char *colon = strrchr(o.remote, ':');
        if (!colon || colon == o.remote || (size_t)(colon - o.remote) >= sizeof host ||
            atoi(colon + 1) <= 0) {
            fprintf(stderr, PROG ": '%s' is not HOST:PORT\n", o.remote);
            return 2;
        }
        memcpy(host, o.remote, (size_t)(colon - o.remote));
        host[colon - o.remote] = 0;
        if (host[0] == '[' && host[strlen(host) - 1] == ']') { /* [v6]:port */
            memmove(host, host + 1, strlen(host));
            host[strlen(host) - 1] = 0;
        }
        port = atoi(colon + 1);
    }
    char endpoint[300];
    if (strchr(host, ':'))
        snprintf(endpoint, sizeof endpoint, "[%s]:%d", host, port);
    else
        snprintf(endpoint, sizeof endpoint, "%s:%d", host, port);

    double load0[3] = {0, 0, 0}, load1[3] = {0, 0, 0};
    (void)getloadavg(load0, 3);
    printf(PROG ": server %s (%s)\n", endpoint,
           own ? "own redis-server, no persistence, killed at exit" : "existing server");
    printf("  %u values of %u B (+64 B header each in ours), pipeline %u (keys per "
           "sw_remote_get_batch = redis-benchmark -P), %u interleaved passes, %.1f s per pass "
           "of ours\n",
           o.keys, o.value_bytes, o.pipeline, o.passes, o.seconds);
    printf("  load average at start: %.2f %.2f %.2f\n", load0[0], load0[1], load0[2]);

    int rc = 1;
    sw_remote *r = NULL;
    uint32_t *order = NULL;
    char *dst = NULL, *val = NULL;
    void **dp = NULL;
    sw_store_key *keys = NULL;
    size_t *lens = NULL;
    sw_status *sts = NULL;
    uint32_t P = o.pipeline;

    sw_remote_config c;
    sw_remote_config_init(&c);
    c.endpoints = endpoint;
    c.prefix = "swbench:";
    c.max_pipeline = (int32_t)P;
    c.command_timeout_ms = 10000;
    c.connect_timeout_ms = 2000;
    c.max_value_bytes = o.value_bytes;
    sw_status st = sw_remote_open(&c, &r);
    if (st != SW_OK) {
        fprintf(stderr, PROG ": open %s: %s: %s\n", endpoint,
                sw_status_str(st), sw_last_error());
        goto out;
    }

    order = (uint32_t *)malloc(sizeof *order * o.keys);
    dst = (char *)malloc((size_t)P * o.value_bytes);
    val = (char *)malloc((size_t)P * o.value_bytes);
    dp = (void **)calloc(P, sizeof *dp);
    keys = (sw_store_key *)calloc(P, sizeof *keys);
    lens = (size_t *)calloc(P, sizeof *lens);
    sts = (sw_status *)calloc(P, sizeof *sts);
    if (!order || !dst || !val || !dp || !keys || !lens || !sts) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }
    memset(dst, 0, (size_t)P * o.value_bytes);
    for (uint32_t i = 0; i < o.keys; i++)
        order[i] = i;

    /* 1. our values, through sw_remote_put_batch in batches of P */
    {
        const void **srcs = (const void **)dp;
        double t0 = bench_now();
        for (uint32_t i = 0; i < o.keys; i += P) {
            uint32_t n = o.keys - i < P ? o.keys - i : P;
            for (uint32_t j = 0; j < n; j++) {
                keys[j] = rb_key(i + j);
                rb_fill(val + (size_t)j * o.value_bytes, o.value_bytes, i + j);
                srcs[j] = val + (size_t)j * o.value_bytes;
                lens[j] = o.value_bytes;
            }
            st = sw_remote_put_batch(r, n, keys, (const void *const *)srcs, lens, NULL, sts);
            if (st != SW_OK) {
                fprintf(stderr, PROG ": sw_remote_put_batch: %s: %s\n",
                        sw_status_str(st), sw_last_error());
                goto out;
            }
        }
        double dt = bench_now() - t0;
        printf("  ours written: %u values in %.2f s (%.3f GB/s, sw_remote_put_batch of %u)\n",
               o.keys, dt, (double)o.keys * o.value_bytes / dt / 1e9, P);
        for (uint32_t j = 0; j < P; j++)
            dp[j] = dst + (size_t)j * o.value_bytes;
    }
    /* 2. redis-benchmark's keys key:000000000000 .. (-r keys) */
    {
        double t0 = bench_now();
        if (rb_fill_benchmark_keys(cli_bin, host, port, &o))
            goto out;
        printf("  redis-benchmark keys written: key:%012u..key:%012u, %u B each, in %.2f s "
               "(redis-cli --pipe)\n",
               0u, o.keys - 1, o.value_bytes, bench_now() - t0);
    }

    /* 3. warm-up of both, then interleaved passes: ours, rb -c 1, rb -c C */
    rb_series ours = {"get", "spillway-remote", 1, {0}, {0}, 0};
    rb_series rb1 = {"get", "redis-benchmark", 1, {0}, {0}, 0};
    rb_series rbc = {"get", "redis-benchmark", o.ctx_clients, {0}, {0}, 0};
    double pass_ratio[RB_MAX_PASSES];
    {
        double g, q;
        rb_opts w = o;
        w.seconds = o.seconds < 0.5 ? o.seconds : 0.5;
        if (rb_ours(r, &w, order, dst, dp, keys, lens, sts, &g, &q))
            goto out;
    }
    sw_remote_stats s0;
    memset(&s0, 0, sizeof s0);
    s0.struct_size = sizeof s0;
    sw_remote_get_stats(r, &s0);
    printf("  passes: ours, redis-benchmark -c 1, redis-benchmark -c %u (requests per run = "
           "our GETs/s of the pass x seconds, rounded up to a multiple of P x clients)\n",
           o.ctx_clients);
    for (uint32_t p = 0; p < o.passes; p++) {
        double g, q;
        if (rb_ours(r, &o, order, dst, dp, keys, lens, sts, &g, &q))
            goto out;
        ours.gbps[ours.n] = g;
        ours.ops[ours.n++] = q;
        uint64_t unit = (uint64_t)P * (o.ctx_clients > 1 ? o.ctx_clients : 1);
        uint64_t req = (uint64_t)(q * o.seconds);
        if (req < 10 * unit)
            req = 10 * unit;
        req = (req + unit - 1) / unit * unit;
        double g1, q1;
        char cmd1[1024], cmdc[1024] = "";
        if (rb_redis_benchmark(bench_bin, host, port, &o, 1, req, &g1, &q1, cmd1, sizeof cmd1))
            goto out;
        rb1.gbps[rb1.n] = g1;
        rb1.ops[rb1.n++] = q1;
        pass_ratio[p] = g / g1;
        printf("  pass %u: ours %.3f GB/s (%.0f GETs/s), redis-benchmark -c 1 %.3f GB/s "
               "(%.0f/s): %.1f%%",
               p, g, q, g1, q1, 100.0 * pass_ratio[p]);
        if (o.ctx_clients) {
            double gc, qc;
            if (rb_redis_benchmark(bench_bin, host, port, &o, o.ctx_clients, req, &gc, &qc, cmdc,
                                   sizeof cmdc))
                goto out;
            rbc.gbps[rbc.n] = gc;
            rbc.ops[rbc.n++] = qc;
            printf("; -c %u %.3f GB/s (%.0f/s)", o.ctx_clients, gc, qc);
        }
        printf("\n");
        if (p == 0)
            printf("    %s\n%s%s%s", cmd1, cmdc[0] ? "    " : "", cmdc, cmdc[0] ? "\n" : "");
        fflush(stdout);
    }
    sw_remote_stats s1;
    memset(&s1, 0, sizeof s1);
    s1.struct_size = sizeof s1;
    sw_remote_get_stats(r, &s1);
    (void)getloadavg(load1, 3);

    double ratio = rb_median(pass_ratio, (int)o.passes);
    double ratio_med = rb_median(ours.gbps, ours.n) / rb_median(rb1.gbps, rb1.n);
    printf("\n  %-6s %-16s %7s %5s %9s %12s   (medians of %u interleaved passes)\n", "case",
           "impl", "clients", "P", "GB/s", "GETs/s", o.passes);
    rb_series *all[3] = {&ours, &rb1, &rbc};
    for (int i = 0; i < 3; i++) {
        if (!all[i]->n)
            continue;
        printf("  %-6s %-16s %7u %5u %9.3f %12.0f\n", all[i]->name, all[i]->impl,
               all[i]->clients, P, rb_median(all[i]->gbps, all[i]->n),
               rb_median(all[i]->ops, all[i]->n));
    }
    printf("\n  ours / redis-benchmark -c 1: median of per-pass ratios = %.1f%%, ratio of "
           "medians = %.1f%%  (target >= 70%%): %s\n",
           100.0 * ratio, 100.0 * ratio_med, ratio >= 0.70 ? "MET" : "MISSED");
    if (rbc.n)
        printf("  ours / redis-benchmark -c %u (context: %u connections): %.1f%%\n",
               o.ctx_clients, o.ctx_clients,
               100.0 * rb_median(ours.gbps, ours.n) / rb_median(rbc.gbps, rbc.n));
    uint64_t calls = s1.get_calls - s0.get_calls;
    printf("  ours: %llu get calls, %llu hits, %llu misses, %llu errors; per call (whole run) "
           "p50 %llu us, p99 %llu us, max %llu us\n",
           (unsigned long long)calls, (unsigned long long)(s1.hits - s0.hits),
           (unsigned long long)(s1.misses - s0.misses),
           (unsigned long long)(s1.errors - s0.errors), (unsigned long long)s1.get_p50_us,
           (unsigned long long)s1.get_p99_us, (unsigned long long)s1.get_max_us);
    printf("  load average at end: %.2f %.2f %.2f\n", load1[0], load1[1], load1[2]);

    /* JSON */
    {
        char path[4300];
        FILE *f = bench_result_open(o.json, "store-remote", path, sizeof path);
        if (!f) {
            perror(path);
            goto out;
        }
        bench_json_begin(f, "store-remote", argc, argv);
        int first = 1;
        for (int i = 0; i < 3; i++) {
            rb_series *s = all[i];
            if (!s->n)
                continue;
            fprintf(f,
                    "%s  {\"case\": \"get %uB P%u c%u\", \"impl\": \"%s\", \"gbps\": %.4f, "
                    "\"ops\": %.0f, \"stat\": \"median\", \"passes_gbps\": [",
                    first ? "" : ",\n", o.value_bytes, P, s->clients, s->impl,
                    rb_median(s->gbps, s->n), rb_median(s->ops, s->n));
            first = 0;
            for (int k = 0; k < s->n; k++)
                fprintf(f, "%s%.4f", k ? ", " : "", s->gbps[k]);
            fprintf(f, "], \"passes_ops\": [");
            for (int k = 0; k < s->n; k++)
                fprintf(f, "%s%.0f", k ? ", " : "", s->ops[k]);
            fprintf(f,
                    "], \"value_bytes\": %u, \"pipeline\": %u, \"clients\": %u, \"keys\": %u, "
                    "\"server\": \"%s\", \"own_server\": %s",
                    o.value_bytes, P, s->clients, o.keys, endpoint, own ? "true" : "false");
            if (s == &ours)
                fprintf(f,
                        ", \"seconds_per_pass\": %.2f, \"ratio_vs_c1\": %.4f, "
                        "\"ratio_of_medians\": %.4f, \"target\": 0.70, \"get_p50_us\": %llu, "
                        "\"get_p99_us\": %llu",
                        o.seconds, ratio, ratio_med, (unsigned long long)s1.get_p50_us,
                        (unsigned long long)s1.get_p99_us);
            fprintf(f, ", \"load_start\": %.2f, \"load_end\": %.2f}", load0[0], load1[0]);
        }
        bench_json_end(f);
        if (fclose(f)) {
            perror(path);
            goto out;
        }
        printf("  results: %s\n", path);
    }
    rc = 0;
out:
    if (r && !own) { /* leave an existing server as we found it (our keys) */
        for (uint32_t i = 0; i < o.keys; i++) {
            sw_store_key k = rb_key(i);
            (void)sw_remote_delete(r, &k);
        }
    }
    sw_remote_close(r);
    free(order);
    free(dst);
    free(val);
    free(dp);
    free(keys);
    free(lens);
    free(sts);
    rb_stop_server();
    return rc;
}
