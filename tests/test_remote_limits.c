/* Remote tier against servers that misbehave on purpose: a fake server (a
 * thread of this test on loopback) that answers PING and then
 *  - announces a 2 GiB bulk string and streams bytes as fast as it can:
 *    GET is refused from the length line (INVALID), SET's reply is a
 *    protocol error (IO); each call returns within 1.2x its timeout and the
 *    process grows by less than 2x the destination (RSS from
 *    /proc/self/statm);
 *  - trickles a reply one byte every 20 ms: the call still returns within
 *    1.2x its timeout (the deadline is checked while reading, not only when
 *    the socket runs dry);
 * and a real redis-server holding an 8 MiB value under a tier key: that key
 * is INVALID without being buffered, the batch's other keys still read. */
#include "test_remote_util.h"

#include <poll.h>
#include <pthread.h>

enum { FAKE_HUGE = 1, FAKE_TRICKLE = 2 };
enum { TIMEOUT_MS = 300 };

typedef struct fake {
    int lfd, port, mode;
    volatile int stop;
    pthread_t th;
} fake;

typedef struct fake_conn {
    fake *f;
    int fd;
} fake_conn;

static char stream_chunk[64 << 10];

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

static void *fake_conn_main(void *arg)
{
    fake_conn *fc = arg;
    fake *f = fc->f;
    int fd = fc->fd;
    free(fc);
    char req[4096];
    while (!f->stop) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t got = recv(fd, req, sizeof req - 1, 0);
        if (got <= 0)
            break;
        req[got] = 0;
        if (strstr(req, "PING")) {
            if (send_all(fd, "+PONG\r\n", 7))
                break;
            continue;
        }
        if (f->mode == FAKE_HUGE) {
            if (send_all(fd, "$2147483648\r\n", 13))
                break;
            while (!f->stop && send_all(fd, stream_chunk, sizeof stream_chunk) == 0) {
            }
            break;
        }
        /* trickle: a reply that never completes, one byte at a time */
        static const char head[] = "$100\r\n";
        for (size_t i = 0; !f->stop; i++) {
            char c = i < sizeof head - 1 ? head[i] : 'x';
            if (i >= 106 || send(fd, &c, 1, MSG_NOSIGNAL) != 1)
                break;
            tr_sleep_ms(20);
        }
        break;
    }
    close(fd);
    return NULL;
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    while (!f->stop) {
        struct pollfd p = {.fd = f->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        fake_conn *fc = malloc(sizeof *fc);
        if (!fc) {
            close(fd);
            continue;
        }
        fc->f = f;
        fc->fd = fd;
        pthread_t th;
        if (pthread_create(&th, NULL, fake_conn_main, fc) == 0)
            pthread_detach(th);
        else {
            close(fd);
            free(fc);
        }
    }
    return NULL;
}

static void fake_start(fake *f, int mode)
{
    memset(f, 0, sizeof *f);
    f->mode = mode;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(f->lfd, (struct sockaddr *)&a, sizeof a) || listen(f->lfd, 16) ||
        getsockname(f->lfd, (struct sockaddr *)&a, &len)) {
        perror("fake server");
        exit(1);
    }
    f->port = ntohs(a.sin_port);
    pthread_create(&f->th, NULL, fake_main, f);
}

static void fake_stop(fake *f)
{
    f->stop = 1;
    pthread_join(f->th, NULL);
    close(f->lfd);
    tr_sleep_ms(120); /* connection threads see stop within 50 ms */
}

static long rss_kib(void)
{
    FILE *fp = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (!fp)
        return -1;
    if (fscanf(fp, "%ld %ld", &size, &res) != 2)
        res = -1;
    fclose(fp);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static sw_remote *open_at(int port, uint32_t max_value_bytes)
{
    sw_remote_config c = tr_config(port);
    c.command_timeout_ms = TIMEOUT_MS;
    c.connect_timeout_ms = 200;
    if (max_value_bytes)
        c.max_value_bytes = max_value_bytes;
    sw_remote *r = NULL;
    CHECK_STATUS(sw_remote_open(&c, &r), SW_OK);
    if (!r)
        exit(1);
    return r;
}

/* One GET of one key into a dst of dst_bytes: status, seconds, RSS growth. */
static sw_status get_one(sw_remote *r, void *dst, size_t dst_bytes, double *secs, long *grew_kib)
{
    sw_store_key k = tr_key(1, 2, 3, 0, SW_STORE_KIND_K);
    void *d[1] = {dst};
    sw_status st = SW_OK;
    long before = rss_kib();
    double t0 = tr_now();
    (void)sw_remote_get_batch(r, 1, &k, d, dst_bytes, NULL, NULL, &st);
    *secs = tr_now() - t0;
    *grew_kib = rss_kib() - before;
    return st;
}

int main(void)
{
    tr_init("remote_limits");
    memset(stream_chunk, 'x', sizeof stream_chunk);
    const double T = TIMEOUT_MS / 1000.0;
    double worst = 0;

    /* ---- 1. a 2 GiB bulk length ---- */
    fake f;
    fake_start(&f, FAKE_HUGE);
    static uint8_t small[100], big[1 << 20];
    memset(small, 0x5a, sizeof small);
    memset(big, 0x5a, sizeof big); /* resident before the measurement */
    sw_remote *r = open_at(f.port, 0);
    double secs;
    long grew;
    sw_status st = get_one(r, small, sizeof small, &secs, &grew);
    printf("2 GiB bulk, dst 100 B: %s in %.1f ms (timeout %d ms), RSS +%ld KiB: %s\n",
           sw_status_str(st), secs * 1e3, TIMEOUT_MS, grew, sw_last_error());
    CHECK(st == SW_STATUS_INVALID && small[0] == 0x5a);
    CHECK(secs < 1.2 * T);
    CHECK(grew < 1024); /* page granularity: far under the 140+ MB it was */
    worst = secs > worst ? secs : worst;
    st = get_one(r, big, sizeof big, &secs, &grew);
    printf("2 GiB bulk, dst 1 MiB: %s in %.1f ms, RSS +%ld KiB (limit 2x dst = 2048 KiB)\n",
           sw_status_str(st), secs * 1e3, grew);
    CHECK(st == SW_STATUS_INVALID && big[0] == 0x5a);
    CHECK(secs < 1.2 * T);
    CHECK(grew < 2 * (long)(sizeof big / 1024));
    worst = secs > worst ? secs : worst;
    {   /* a SET whose reply announces 2 GiB: a protocol error, bounded */
        sw_store_key k = tr_key(1, 2, 3, 0, SW_STORE_KIND_K);
        const void *s[1] = {small};
        size_t l = sizeof small;
        long before = rss_kib();
        double t0 = tr_now();
        CHECK_STATUS(sw_remote_put_batch(r, 1, &k, s, &l, NULL, &st), SW_STATUS_IO);
        secs = tr_now() - t0;
        grew = rss_kib() - before;
        printf("2 GiB bulk to a SET: %s in %.1f ms, RSS +%ld KiB: %s\n", sw_status_str(st),
               secs * 1e3, grew, sw_last_error());
        CHECK(secs < 1.2 * T && grew < 1024);
        worst = secs > worst ? secs : worst;
    }
    sw_remote_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    CHECK(s.oversized == 2);
    sw_remote_close(r);
    fake_stop(&f);

    /* ---- 2. a reply trickled one byte every 20 ms ---- */
    fake_start(&f, FAKE_TRICKLE);
    r = open_at(f.port, 0);
    st = get_one(r, big, sizeof big, &secs, &grew);
    printf("trickle, GET: %s in %.1f ms (timeout %d ms): %s\n", sw_status_str(st), secs * 1e3,
           TIMEOUT_MS, sw_last_error());
    CHECK(st == SW_STATUS_IO && secs < 1.2 * T);
    worst = secs > worst ? secs : worst;
    tr_sleep_ms(TIMEOUT_MS); /* past the backoff: the next call connects anew */
    {
        sw_store_key k = tr_key(1, 2, 3, 0, SW_STORE_KIND_K);
        const void *sp[1] = {small};
        size_t l = sizeof small;
        double t0 = tr_now();
        (void)sw_remote_put_batch(r, 1, &k, sp, &l, NULL, &st);
        secs = tr_now() - t0;
        printf("trickle, SET: %s in %.1f ms: %s\n", sw_status_str(st), secs * 1e3,
               sw_last_error());
        CHECK(st == SW_STATUS_IO && secs < 1.2 * T);
        worst = secs > worst ? secs : worst;
    }
    sw_remote_close(r);
    fake_stop(&f);

    /* ---- 3. a real 8 MiB value under a tier key, among normal ones ---- */
    tr_server srv;
    tr_start(&srv, 0, NULL);
    r = open_at(srv.port, 0);
    enum { N = 8, LEN = 4096 };
    sw_store_key keys[N];
    static uint8_t src[N][LEN], dst[N][LEN];
    const void *srcs[N];
    void *dsts[N];
    size_t lens[N], got[N];
    sw_status sts[N];
    for (int i = 0; i < N; i++) {
        keys[i] = tr_key(4, 0, (uint32_t)i, 0, SW_STORE_KIND_V);
        tr_fill(&keys[i], 1, src[i], LEN);
        srcs[i] = src[i];
        dsts[i] = dst[i];
        lens[i] = LEN;
    }
    CHECK_STATUS(sw_remote_put_batch(r, N, keys, srcs, lens, NULL, sts), SW_OK);
#if defined(SPILLWAY_HAVE_HIREDIS)
    {
        char name[SW_REMOTE_MAX_KEY + 1];
        size_t nl = sw_remote_key_name("sw:", 3, &keys[3], name);
        name[nl] = 0;
        size_t huge = 8u << 20;
        char *junk = malloc(huge);
        CHECK(junk != NULL);
        if (junk) {
            memset(junk, 'j', huge);
            redisReply *rep = tr_cmd(srv.port, "SET %s %b", name, junk, huge);
            CHECK(rep && rep->type == REDIS_REPLY_STATUS);
            if (rep)
                freeReplyObject(rep);
            free(junk);
        }
    }
#endif
    memset(dst, 0x5a, sizeof dst);
    long before = rss_kib();
    double t0 = tr_now();
    CHECK_STATUS(sw_remote_get_batch(r, N, keys, dsts, LEN, got, NULL, sts),
                 SW_STATUS_INVALID);
    secs = tr_now() - t0;
    grew = rss_kib() - before;
    printf("8 MiB value among %d keys, dst %d B: key 3 %s, %.1f ms, RSS +%ld KiB\n", N, LEN,
           sw_status_str(sts[3]), secs * 1e3, grew);
    CHECK(sts[3] == SW_STATUS_INVALID && dst[3][0] == 0x5a);
    for (int i = 0; i < N; i++)
        if (i != 3)
            CHECK(sts[i] == SW_OK && got[i] == LEN && !memcmp(dst[i], src[i], LEN));
    CHECK(grew < 1024 && secs < 1.2 * T);
    CHECK_STATUS(sw_remote_get_stats(r, &s), SW_OK);
    CHECK(s.oversized == 1 && s.reconnects == 0 && s.errors == 0);
    /* the connection was re-opened: the next call is clean */
    CHECK_STATUS(sw_remote_get_batch(r, 2, keys, dsts, LEN, got, NULL, sts), SW_OK);
    sw_remote_close(r);
    tr_kill(&srv);

    printf("slowest misbehaving-server call: %.1f ms (timeout %d ms, bound %.0f ms)\n",
           worst * 1e3, TIMEOUT_MS, 1.2 * TIMEOUT_MS);
    if (sw_test_failures) {
        fprintf(stderr, "test_remote_limits: %d failures\n", sw_test_failures);
        return 1;
    }
    printf("test_remote_limits: ok\n");
    return 0;
}
