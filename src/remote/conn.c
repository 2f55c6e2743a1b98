/* Remote tier: one node's connection - connect with a timeout, AUTH,
 * bounded writes and reads (poll against a deadline), backoff. */
#include "remote/remote_internal.h"

#if defined(SPILLWAY_HAVE_HIREDIS)
#include <errno.h>
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

static void arm_backoff(sw_remote *r, sw_rnode *n)
{
    n->next_try_us = sw_remote_now_us() + (uint64_t)n->backoff_ms * 1000u;
    uint32_t next = n->backoff_ms * 2;
    n->backoff_ms = next > (uint32_t)r->backoff_max_ms ? (uint32_t)r->backoff_max_ms : next;
}

void sw_rnode_drop(sw_remote *r, sw_rnode *n)
{
    if (n->c) {
        redisFree(n->c);
        n->c = NULL;
    }
    n->rpos = n->rlen = 0; /* replies in flight on the old connection */
    arm_backoff(r, n);
    if (r->cluster)
        r->need_refresh = 1; /* the slot's owner may have failed over */
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

#define SW_RBUF_MIN (256u << 10)
#define SW_RBUF_MIN_ROOM (16u << 10)

int sw_rnode_fill(sw_rnode *n, size_t need, uint64_t deadline_us)
{
    /* bytes hiredis buffered but did not parse (none in practice) come first */
    redisReader *rd = n->c->reader;
    if (rd->len > rd->pos) {
        if (rd->ridx != -1) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: reply half parsed by hiredis", n->host,
                    n->port);
            return -1;
        }
        size_t extra = rd->len - rd->pos;
        if (n->rlen + extra > n->rcap) {
            size_t cap = n->rlen + extra < SW_RBUF_MIN ? SW_RBUF_MIN : n->rlen + extra;
            char *nb = realloc(n->rbuf, cap);
            if (!nb) {
                sw_fail(SW_STATUS_NO_MEMORY, "redis: read buffer of %zu bytes", cap);
                return -1;
            }
            n->rbuf = nb;
            n->rcap = cap;
        }
        memcpy(n->rbuf + n->rlen, rd->buf + rd->pos, extra);
        n->rlen += extra;
        rd->pos = rd->len;
    }
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
        ssize_t got = recv(n->c->fd, n->rbuf + n->rlen, n->rcap - n->rlen, MSG_DONTWAIT);
        if (got > 0) {
            n->rlen += (size_t)got;
            continue;
        }
        if (got == 0) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: connection lost: closed", n->host, n->port);
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: connection lost: %s", n->host, n->port,
                    strerror(errno));
            return -1;
        }
        int w = wait_readable(n, deadline_us);
        if (w != 0)
            return w;
    }
    return 0;
}

int sw_rnode_read(sw_rnode *n, uint64_t deadline_us, redisReply **out)
{
    if (n->rlen > n->rpos) { /* none in practice: GET replies are consumed whole */
        if (redisReaderFeed(n->c->reader, n->rbuf + n->rpos, n->rlen - n->rpos) != REDIS_OK) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: reader: out of memory", n->host, n->port);
            return -1;
        }
    }
    n->rpos = n->rlen = 0;
    for (;;) {
        void *rep = NULL;
        if (redisReaderGetReply(n->c->reader, &rep) != REDIS_OK) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: protocol error: %s", n->host, n->port,
                    n->c->reader->errstr);
            return -1;
        }
        if (rep) {
            *out = rep;
            return 0;
        }
        int w = wait_readable(n, deadline_us);
        if (w < 0)
            return w;
        if (redisBufferRead(n->c) != REDIS_OK) {
            sw_fail(SW_STATUS_IO, "redis %s:%d: connection lost: %s", n->host, n->port,
                    n->c->errstr[0] ? n->c->errstr : "closed");
            return -1;
        }
    }
}

sw_status sw_rnode_command(sw_remote *r, sw_rnode *n, int argc, const char **argv,
                           const size_t *argvlen, uint64_t deadline_us, redisReply **out)
{
    *out = NULL;
    if (redisAppendCommandArgv(n->c, argc, argv, argvlen) != REDIS_OK) {
        sw_fail(SW_STATUS_IO, "redis %s:%d: %s", n->host, n->port, n->c->errstr);
        sw_rnode_drop(r, n);
        return SW_STATUS_IO;
    }
    int rc = sw_rnode_flush(n, deadline_us);
    if (rc == 0)
        rc = sw_rnode_read(n, deadline_us, out);
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

sw_status sw_rnode_connect(sw_remote *r, sw_rnode *n, uint64_t deadline_us)
{
    if (n->c)
        return SW_OK;
    uint64_t now = sw_remote_now_us();
    if (now < n->next_try_us)
        return sw_fail(SW_STATUS_IO, "redis %s:%d: down, next attempt in %llu ms", n->host,
                       n->port, (unsigned long long)((n->next_try_us - now) / 1000));
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
        arm_backoff(r, n);
        return SW_STATUS_IO;
    }
    /* a safety net under the poll-based deadlines */
    redisSetTimeout(c, tv_us((uint64_t)r->command_timeout_ms * 1000u));
    n->c = c;
    n->rpos = n->rlen = 0;
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
        if (sw_rnode_command(r, n, argc, argv, len, conn_deadline, &rep) != SW_OK) {
            r->connect_failures++;
            return SW_STATUS_IO; /* dropped, backoff armed, detail set */
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
    if (n->ever_connected)
        r->reconnects++;
    n->ever_connected = 1;
    n->backoff_ms = (uint32_t)r->backoff_min_ms;
    n->next_try_us = 0;
    return SW_OK;
}
#else
typedef int sw_remote_conn_unused_;
#endif
