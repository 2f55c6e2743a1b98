/* Remote tier: one node's connection - connect with a timeout, AUTH,
 * bounded writes and reads (poll against a deadline), backoff. */
#include "remote/remote_internal.h"

#if defined(SW_HAVE_HIREDIS)
#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

uint64_t sw_remote_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static struct timeval tv_us(uint64_t us)
{
    struct timeval tv;
    if (us < 1000)
        us = 1000;
    tv.tv_sec = (time_t)(us / 1000000u);
    tv.tv_usec = (suseconds_t)(us % 1000000u);
    return tv;
}

/* The node failed: it is down until a probe answers. The delay doubles
 * across failures with no reply in between, from backoff_min (after a
 * reply was read) to backoff_max. */
static void mark_down(sw_remote *r, sw_rnode *n, const char *why)
{
    if (n->answered)
        n->backoff_ms = (uint32_t)r->backoff_min_ms;
    n->answered = 0;
    n->down = 1;
    n->lost = 1;
    if (why) { /* kept without the "redis host:port: " that every detail has */
        char pre[300];
        int pl = snprintf(pre, sizeof pre, "redis %s:%d: ", n->host, n->port);
        if (pl > 0 && !strncmp(why, pre, (size_t)pl))
            why += pl;
        snprintf(n->why, sizeof n->why, "%s", why);
    }
    n->next_try_us = sw_remote_now_us() + (uint64_t)n->backoff_ms * 1000u;
    uint32_t next = n->backoff_ms * 2;
    n->backoff_ms = next > (uint32_t)r->backoff_max_ms ? (uint32_t)r->backoff_max_ms : next;
    if (r->cluster)
        r->need_refresh = 1; /* the slot's owner may have failed over */
}

void sw_rnode_close(sw_rnode *n)
{
    if (n->c) {
        redisFree(n->c);
        n->c = NULL;
    }
    n->rpos = n->rlen = 0; /* replies in flight on the old connection */
    sw_resp_scan_init(&n->scan);
}

void sw_rnode_drop(sw_remote *r, sw_rnode *n)
{
    sw_rnode_close(n);
    mark_down(r, n, sw_last_error());
}

int sw_rnode_flush(sw_rnode *n, uint64_t deadline_us)
{
    int done = 0;
    while (!done) {
        uint64_t now = sw_remote_now_us();
        if (now >= deadline_us) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: write timed out", n->host, n->port);
            return -1;
        }
        /* SO_SNDTIMEO bounds a blocking write by what is left of the deadline */
        struct timeval tv = tv_us(deadline_us - now);
        setsockopt(n->c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (redisBufferWrite(n->c, &done) != REDIS_OK) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: write failed: %s", n->host, n->port,
                    n->c->errstr);
            return -1;
        }
    }
    return 0;
}

/* Waits until fd is readable or the deadline passes: 0 (readable or
 * spurious), -1 error, -2 deadline. */
static int wait_readable(sw_rnode *n, uint64_t deadline_us)
{
    for (;;) {
        uint64_t now = sw_remote_now_us();
        if (now >= deadline_us) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: no reply within the timeout", n->host,
                    n->port);
            return -2;
        }
        struct pollfd p = {.fd = n->c->fd, .events = POLLIN};
        int ms = (int)((deadline_us - now + 999) / 1000);
        int pr = poll(&p, 1, ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: poll: %s (errno %d)", n->host, n->port,
                    strerror(errno), errno);
            return -1;
        }
        if (pr > 0)
            return 0;
    }
}

/* One non-blocking recv of up to `cap` bytes into dst; when the socket has
 * nothing, waits until it is readable. Returns the bytes read (> 0), 0 when
 * the caller should simply try again (EINTR, or readable now), -1 the
 * connection is lost, -2 the deadline passed (detail recorded). */
static ssize_t rnode_recv(sw_rnode *n, char *dst, size_t cap, uint64_t deadline_us)
{
    const ssize_t got = recv(n->c->fd, dst, cap, MSG_DONTWAIT);
    if (got > 0)
        return got;
    if (got == 0) {
        sw_fail(SW_STATUS_IO, "redis %s:%d: connection lost: closed", n->host, n->port);
        return -1;
    }
    if (errno == EINTR)
        return 0;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        sw_fail(SW_STATUS_IO, "redis %s:%d: connection lost: %s", n->host, n->port,
                strerror(errno));
        return -1;
    }
    return wait_readable(n, deadline_us);
}

#define SW_RBUF_MIN (256u << 10)
#define SW_RBUF_MIN_ROOM (16u << 10)

/* Makes at least `need` unparsed bytes available at n->rbuf + n->rpos
 * (compacting or growing the buffer, so pointers into it go stale): a
 * non-blocking recv first, poll only when it finds nothing. The deadline is
 * checked after every recv that did not bring all of `need` as well (and
 * sw_rnode_frame checks it before every call), so a server that streams
 * without end (or trickles) cannot hold a call past it. 0, -1 I/O or allocation error,
 * -2 deadline passed (detail recorded; caller drops). */
static int rnode_fill(sw_rnode *n, size_t need, uint64_t deadline_us)
{
    while (n->rlen - n->rpos < need) {
        size_t have = n->rlen - n->rpos;
        size_t missing = need - have;
        if (n->rpos && (n->rcap - n->rlen < missing || n->rcap - n->rlen < SW_RBUF_MIN_ROOM ||
                        !have)) {
            if (have)
                memmove(n->rbuf, n->rbuf + n->rpos, have);
            n->rpos = 0;
            n->rlen = have;
        }
        if (n->rcap - n->rlen < missing) {
            size_t cap = n->rcap ? n->rcap : SW_RBUF_MIN;
            while (cap - n->rlen < missing)
                cap *= 2;
            char *nb = realloc(n->rbuf, cap);
            if (!nb) {
                sw_fail(SW_STATUS_NO_MEMORY, "redis: read buffer of %zu bytes", cap);
                return -1;
            }
            n->rbuf = nb;
            n->rcap = cap;
        }
        const ssize_t got = rnode_recv(n, n->rbuf + n->rlen, n->rcap - n->rlen, deadline_us);
        if (got < 0)
            return (int)got;
        n->rlen += (size_t)got;
        if (got > 0 && n->rlen - n->rpos < need && sw_remote_now_us() >= deadline_us) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: reply not complete within the timeout",
                    n->host, n->port);
            return -2;
        }
    }
    return 0;
}

const sw_resp_limits sw_resp_small = {SW_RESP_SMALL_FRAME, SW_RESP_SMALL_FRAME, 0};
const sw_resp_limits sw_resp_slots = {SW_RESP_SMALL_FRAME, SW_RESP_SLOTS_FRAME,
                                      SW_RESP_SLOTS_ELEMS};

int sw_rnode_frame(sw_rnode *n, const sw_resp_limits *lim, uint64_t deadline_us,
                   size_t *frame_len, int64_t *announced)
{
    for (;;) {
        size_t need = 1;
        int64_t bulk = 0;
        int rc = n->rlen > n->rpos ? sw_resp_scan(&n->scan, n->rbuf + n->rpos, n->rlen - n->rpos,
                                                  lim, frame_len, &need, &bulk)
                                   : 0;
        if (rc == 1) {
            sw_resp_scan_init(&n->scan);
            n->answered = 1;
            return 0;
        }
        if (rc == -1) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: protocol error: %s (at most %zu bytes, %llu "
                    "array elements expected)", n->host, n->port, n->scan.why, lim->max_frame,
                    (unsigned long long)lim->max_elems);
            sw_resp_scan_init(&n->scan);
            return -1;
        }
        if (rc == -2) {
            *announced = bulk;
            *frame_len = n->scan.line_end;
            sw_resp_scan_init(&n->scan);
            sw_fail(SW_STATUS_IO, "redis %s:%d: reply announces a %lld-byte string, at most "
                    "%llu expected", n->host, n->port, (long long)bulk,
                    (unsigned long long)lim->max_bulk);
            return -3;
        }
        /* Checked before every read, not only when a read finds nothing:
         * while a line is incomplete any byte satisfies the read, so a
         * server that streams fast enough would never let the clock be
         * looked at (a 32 MiB array paced at 16 KB per 700 us held a 300
         * ms call for 1781 ms). */
        if (sw_remote_now_us() >= deadline_us) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: reply not complete within the timeout",
                    n->host, n->port);
            return -2;
        }
        rc = rnode_fill(n, need, deadline_us);
        if (rc)
            return rc;
    }
}

int sw_rnode_skip(sw_rnode *n, uint64_t bytes, uint64_t deadline_us)
{
    unsigned char tail[2] = {0, 0}; /* the last two bytes dropped: CRLF */
    while (bytes) {
        size_t have = n->rlen - n->rpos;
        if (have) {
            size_t take = (uint64_t)have < bytes ? have : (size_t)bytes;
            const unsigned char *p = (const unsigned char *)n->rbuf + n->rpos;
            if (take >= 2) {
                tail[0] = p[take - 2];
                tail[1] = p[take - 1];
            } else {
                tail[0] = tail[1];
                tail[1] = p[0];
            }
            n->rpos += take;
            bytes -= take;
            continue;
        }
        n->rpos = n->rlen = 0;
        if (sw_remote_now_us() >= deadline_us) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: refused value not drained within the timeout",
                    n->host, n->port);
            return -2;
        }
        /* never past the value: what follows it is the next reply */
        size_t want = (uint64_t)n->rcap < bytes ? n->rcap : (size_t)bytes;
        const ssize_t got = rnode_recv(n, n->rbuf, want, deadline_us);
        if (got == -2) /* wait_readable's "no reply" would hide what was cut short */
            sw_fail(SW_STATUS_IO, "redis %s:%d: refused value not drained within the "
                    "timeout", n->host, n->port);
        if (got < 0)
            return (int)got;
        n->rlen = (size_t)got;
    }
    if (tail[0] != '\r' || tail[1] != '\n') {
        sw_fail(SW_STATUS_IO, "redis %s:%d: protocol error: a bulk string without CRLF after "
                "its data", n->host, n->port);
        return -1;
    }
    return 0;
}

int sw_rnode_read(sw_rnode *n, const sw_resp_limits *lim, uint64_t deadline_us,
                  redisReply **out)
{
    size_t len = 0;
    int64_t announced = 0;
    int rc = sw_rnode_frame(n, lim, deadline_us, &len, &announced);
    if (rc == -3)
        rc = -1; /* no reply here carries a large string: a protocol error */
    if (rc)
        return rc;
    /* hiredis sees one complete, checked reply at a time */
    if (redisReaderFeed(n->c->reader, n->rbuf + n->rpos, len) != REDIS_OK) {
        sw_fail(SW_STATUS_IO, "redis %s:%d: reader: out of memory", n->host, n->port);
        return -1;
    }
    n->rpos += len;
    void *rep = NULL;
    if (redisReaderGetReply(n->c->reader, &rep) != REDIS_OK || !rep) {
        sw_fail(SW_STATUS_IO, "redis %s:%d: protocol error: %s", n->host, n->port,
                n->c->reader->errstr[0] ? n->c->reader->errstr : "reply not parsed");
        if (rep)
            freeReplyObject(rep);
        return -1;
    }
    *out = rep;
    return 0;
}

sw_status sw_rnode_command(sw_remote *r, sw_rnode *n, int argc, const char **argv,
                           const size_t *argvlen, const sw_resp_limits *lim,
                           uint64_t deadline_us, redisReply **out)
{
    *out = NULL;
    if (redisAppendCommandArgv(n->c, argc, argv, argvlen) != REDIS_OK) {
        sw_fail(SW_STATUS_IO, "redis %s:%d: %s", n->host, n->port, n->c->errstr);
        sw_rnode_drop(r, n);
        return SW_STATUS_IO;
    }
    int rc = sw_rnode_flush(n, deadline_us);
    if (rc == 0)
        rc = sw_rnode_read(n, lim, deadline_us, out);
    if (rc != 0) {
        if (rc == -2)
            r->timeouts++;
        sw_rnode_drop(r, n);
        return SW_STATUS_IO;
    }
    return SW_OK;
}

/* Error replies that mean "your credentials are wrong or missing": a
 * configuration problem, not an outage. */
static int is_auth_error(const char *s)
{
    return !strncmp(s, "NOAUTH", 6) || !strncmp(s, "WRONGPASS", 9) ||
           !strncmp(s, "NOPERM", 6) || strstr(s, "invalid password") ||
           strstr(s, "AUTH <password> called without") || strstr(s, "invalid username");
}

void sw_rnode_probe_close(sw_rnode *n)
{
    if (n->probe) {
        redisFree(n->probe);
        n->probe = NULL;
    }
    n->probe_sent = 0;
}

/* Advances node n's probe, waiting for it at most until `wait_until_us`:
 * 1 the server answered (anything at all: a hung server sends nothing),
 * 0 still in flight, -1 failed (refused, reset, closed; detail recorded). */
static int probe_step(sw_remote *r, sw_rnode *n, uint64_t wait_until_us)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    for (;;) {
        struct pollfd p = {.fd = n->probe->fd, .events = n->probe_sent ? POLLIN : POLLOUT};
        uint64_t now = sw_remote_now_us();
        int ms = wait_until_us > now ? (int)((wait_until_us - now + 999) / 1000) : 0;
        int pr = poll(&p, 1, ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: probe: poll: %s", n->host, n->port,
                    strerror(errno));
            return -1;
        }
        if (pr == 0)
            return 0;
        if (!n->probe_sent) {
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(n->probe->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                err = errno;
            if (err) {
                sw_fail(SW_STATUS_IO, "redis %s:%d: probe: connect failed: %s", n->host,
                        n->port, strerror(err));
                return -1;
            }
            if (send(n->probe->fd, ping, sizeof ping - 1, MSG_DONTWAIT | MSG_NOSIGNAL) !=
                (ssize_t)(sizeof ping - 1)) {
                sw_fail(SW_STATUS_IO, "redis %s:%d: probe: send failed: %s", n->host, n->port,
                        strerror(errno));
                return -1;
            }
            n->probe_sent = 1;
            r->probes++;
            continue;
        }
        char tmp[256];
        ssize_t got = recv(n->probe->fd, tmp, sizeof tmp, MSG_DONTWAIT);
        if (got > 0)
            return 1;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        sw_fail(SW_STATUS_IO, "redis %s:%d: probe: connection %s", n->host, n->port,
                got == 0 ? "closed" : strerror(errno));
        return -1;
    }
}

/* How long the call that starts a probe waits for its answer: enough for a
 * server on the same host or LAN, small against any timeout, so a node
 * that came back is used by that same call and a hung one costs one caller
 * at most this much per probe. */
#define SW_PROBE_WAIT_US 5000u

/* A down node: SW_OK when its probe has answered (the node is up again),
 * else SW_STATUS_IO at once (n->fast_failed). */
static sw_status probe_node(sw_remote *r, sw_rnode *n, uint64_t deadline_us)
{
    uint64_t now = sw_remote_now_us();
    int pr = 0;
    if (n->probe) {
        pr = probe_step(r, n, now);
        if (pr < 0) { /* refused, reset: the next probe after a backoff */
            sw_rnode_probe_close(n);
            r->connect_failures++;
            mark_down(r, n, sw_last_error());
        } else if (pr == 0 && now >= n->probe_until_us) {
            /* unanswered: the next one starts now, with a doubled backoff
             * (so one is always in flight while the server is hung) */
            sw_rnode_probe_close(n);
            r->connect_failures++;
            mark_down(r, n, NULL);
            n->next_try_us = now;
        }
    }
    if (!n->probe && pr >= 0 && now >= n->next_try_us) {
        /* a probe lives until the next would start (at least a connect
         * timeout), so a server that resumes answers the one in flight */
        uint64_t life = (uint64_t)n->backoff_ms * 1000u;
        if (life < (uint64_t)r->connect_timeout_ms * 1000u)
            life = (uint64_t)r->connect_timeout_ms * 1000u;
        n->probe_until_us = now + life;
        n->probe_sent = 0;
        n->probe = redisConnectNonBlock(n->host, n->port);
        if (!n->probe || n->probe->err) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: probe: connect failed: %s", n->host, n->port,
                    n->probe ? n->probe->errstr : "out of memory");
            sw_rnode_probe_close(n);
            r->connect_failures++;
            mark_down(r, n, sw_last_error());
            pr = -1;
        } else {
            uint64_t wait = now + SW_PROBE_WAIT_US < deadline_us ? now + SW_PROBE_WAIT_US
                                                                   : deadline_us;
            pr = probe_step(r, n, wait);
            if (pr < 0) {
                sw_rnode_probe_close(n);
                r->connect_failures++;
                mark_down(r, n, sw_last_error());
            }
        }
    }
    if (pr == 1) {
        sw_rnode_probe_close(n);
        n->down = 0; /* the backoff stays until a reply of real work is read */
        return SW_OK;
    }
    now = sw_remote_now_us();
    n->fast_failed = 1;
    if (r->cluster)
        r->need_refresh = 1; /* its slots may be served elsewhere by now */
    if (n->probe)
        return sw_fail(SW_STATUS_IO, "redis %s:%d: down (%s); not answering its probe yet",
                       n->host, n->port, n->why);
    return sw_fail(SW_STATUS_IO, "redis %s:%d: down (%s); next probe in %llu ms", n->host,
                   n->port, n->why,
                   (unsigned long long)(n->next_try_us > now ? (n->next_try_us - now) / 1000
                                                             : 0));
}

sw_status sw_rnode_connect(sw_remote *r, sw_rnode *n, uint64_t deadline_us)
{
    n->fast_failed = 0;
    if (n->c)
        return SW_OK;
    if (n->down && probe_node(r, n, deadline_us) != SW_OK)
        return SW_STATUS_IO;
    uint64_t now = sw_remote_now_us();
    uint64_t budget = (uint64_t)r->connect_timeout_ms * 1000u;
    if (deadline_us <= now)
        return sw_fail(SW_STATUS_IO, "redis %s:%d: no time left to connect", n->host, n->port);
    if (deadline_us - now < budget)
        budget = deadline_us - now;
    uint64_t conn_deadline = now + budget;

    redisContext *c = redisConnectWithTimeout(n->host, n->port, tv_us(budget));
    if (!c || c->err) {
        sw_fail(SW_STATUS_IO, "redis %s:%d: connect failed: %s", n->host, n->port,
                c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        r->connect_failures++;
        mark_down(r, n, sw_last_error());
        return SW_STATUS_IO;
    }
    /* a safety net under the poll-based deadlines */
    redisSetTimeout(c, tv_us((uint64_t)r->command_timeout_ms * 1000u));
    n->c = c;
    n->rpos = n->rlen = 0;
    sw_resp_scan_init(&n->scan);
    if (r->password) {
        const char *argv[3] = {"AUTH", NULL, NULL};
        size_t len[3] = {4, 0, 0};
        int argc = 1;
        if (r->user) {
            argv[argc] = r->user;
            len[argc++] = strlen(r->user);
        }
        argv[argc] = r->password;
        len[argc++] = strlen(r->password);
        redisReply *rep = NULL;
        if (sw_rnode_command(r, n, argc, argv, len, &sw_resp_small, conn_deadline, &rep) !=
            SW_OK) {
            r->connect_failures++;
            return SW_STATUS_IO; /* dropped, node down, detail set */
        }
        if (rep->type == REDIS_REPLY_ERROR) {
            sw_status s = is_auth_error(rep->str) ? SW_STATUS_INVALID : SW_STATUS_IO;
            sw_fail(s, "redis %s:%d: AUTH refused: %s", n->host, n->port, rep->str);
            freeReplyObject(rep);
            r->connect_failures++;
            sw_rnode_drop(r, n);
            return s;
        }
        freeReplyObject(rep);
    }
    if (n->lost)
        r->reconnects++;
    n->lost = 0;
    return SW_OK;
}
#else
typedef int sw_remote_conn_unused_;
#endif
