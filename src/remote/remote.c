/* Remote tier: the public calls and the pipelined batch engine (routing,
 * MOVED/ASK, per-key results). */
#include "remote/remote_internal.h"
#include "spillway_remote.h"

#include <stdlib.h>
#include <string.h>

void sw_remote_config_init(sw_remote_config *c)
{
    if (!c)
        return;
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    c->prefix = "sw:";
    c->connect_timeout_ms = 500;
    c->command_timeout_ms = 1000;
    c->max_pipeline = 64;
    c->backoff_min_ms = 10;
    c->backoff_max_ms = 1000;
    c->max_value_bytes = 64u << 20;
}

#if !defined(SW_HAVE_HIREDIS)
int32_t sw_remote_available(void) { return 0; }
sw_status sw_remote_open(const sw_remote_config *c, sw_remote **out)
{
    if (out)
        *out = NULL;
    return sw_fail(SW_STATUS_UNSUPPORTED,
                   "this build has no remote tier (configure with hiredis, SPILLWAY_REDIS)");
}
void sw_remote_close(sw_remote *r) { (void)r; }
sw_status sw_remote_put_batch(sw_remote *r, size_t n, const sw_store_key *keys,
                              const void *const *srcs, const size_t *lengths,
                              const uint64_t *generations, sw_status *statuses)
{
    for (size_t i = 0; statuses && i < n; i++)
        statuses[i] = SW_STATUS_UNSUPPORTED;
    return sw_fail(SW_STATUS_UNSUPPORTED, "this build has no remote tier");
}
sw_status sw_remote_get_batch(sw_remote *r, size_t n, const sw_store_key *keys,
                              void *const *dst, size_t dst_bytes, size_t *lengths,
                              uint64_t *generations, sw_status *statuses)
{
    for (size_t i = 0; statuses && i < n; i++)
        statuses[i] = SW_STATUS_UNSUPPORTED;
    return sw_fail(SW_STATUS_UNSUPPORTED, "this build has no remote tier");
}
sw_status sw_remote_delete(sw_remote *r, const sw_store_key *key)
{
    return sw_fail(SW_STATUS_UNSUPPORTED, "this build has no remote tier");
}
sw_status sw_remote_get_stats(sw_remote *r, sw_remote_stats *st)
{
    return sw_fail(SW_STATUS_UNSUPPORTED, "this build has no remote tier");
}
#else

#include <stdio.h>

int32_t sw_remote_available(void) { return 1; }

enum { OP_GET = 0, OP_SET = 1, OP_DEL = 2 };
/* A key is sent at most SW_REMOTE_PASSES times for redirections (MOVED,
 * ASK, TRYAGAIN): the first try and up to two more, counted per key
 * (rop.redirects), since a pass that only re-opened a connection after a
 * refused value does not count against the call's passes and would
 * otherwise let a key be redirected once per such pass. */
#define SW_REMOTE_PASSES 3

typedef struct rop {
    size_t i;          /* key index */
    uint32_t slot;
    int32_t node;      /* forced target (ASK); -1 = the slot's owner */
    uint8_t asking;
    uint8_t pending;
    uint8_t redirects; /* MOVED / ASK / TRYAGAIN followed for this key */
    uint16_t klen;
    char key[SW_REMOTE_MAX_KEY];
} rop;

typedef struct batch {
    int type;
    size_t n;
    const sw_store_key *keys;
    void *const *dst;
    size_t dst_bytes;
    size_t *lengths;
    uint64_t *gens;
    const void *const *srcs;
    const size_t *slens;
    const uint64_t *sgens;
    sw_status *st;
    rop *ops;
    size_t nops;
} batch;

static int key_ok(const sw_store_key *k) { return k->kind <= 1 && k->reserved == 0; }

static char *dup_str(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static sw_status parse_endpoints(sw_remote *r, const char *list)
{
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ')) {
            p++;
            len--;
        }
        const char *colon = NULL;
        for (size_t i = 0; i < len; i++)
            if (p[i] == ':')
                colon = p + i; /* the last one: "[::1]:6379" or "::1:6379" */
        if (!colon || colon == p || colon == p + len - 1)
            return sw_fail(SW_STATUS_INVALID, "endpoint '%.*s' is not host:port", (int)len, p);
        char *e = NULL;
        long port = strtol(colon + 1, &e, 10);
        if (e != p + len || port <= 0 || port > 65535)
            return sw_fail(SW_STATUS_INVALID, "endpoint '%.*s': bad port", (int)len, p);
        const char *h = p;
        size_t hl = (size_t)(colon - p);
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
            h++;
            hl -= 2;
        }
        if (sw_remote_node_find_or_add(r, h, hl, (int)port) < 0)
            return sw_fail(SW_STATUS_INVALID, "endpoint '%.*s': host name too long", (int)len, p);
        if (!end)
            break;
        p = end + 1;
    }
    if (r->nnodes == 0)
        return sw_fail(SW_STATUS_INVALID, "no endpoint in '%s'", list);
    return SW_OK;
}

void sw_remote_close(sw_remote *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nnodes; i++) {
        if (r->nodes[i].c)
            redisFree(r->nodes[i].c);
        sw_rnode_probe_close(&r->nodes[i]);
        free(r->nodes[i].ops);
        free(r->nodes[i].rbuf);
    }
    free(r->nodes);
    free(r->slots);
    free(r->buf);
    free(r->user);
    free(r->password);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

sw_status sw_remote_open(const sw_remote_config *c, sw_remote **out)
{
    if (out)
        *out = NULL;
    if (!c || !out)
        return sw_fail(SW_STATUS_INVALID, "sw_remote_open: null argument");
    if (c->struct_size != sizeof *c)
        return sw_fail(SW_STATUS_INVALID, "sw_remote_config.struct_size %u, want %zu",
                       c->struct_size, sizeof *c);
    if (!c->endpoints || !c->endpoints[0])
        return sw_fail(SW_STATUS_INVALID, "sw_remote_config.endpoints is empty");
    if (c->connect_timeout_ms <= 0 || c->command_timeout_ms <= 0 || c->max_pipeline <= 0 ||
        c->backoff_min_ms <= 0 || c->backoff_max_ms < c->backoff_min_ms ||
        c->max_value_bytes == 0 || c->max_value_bytes > (1u << 30))
        return sw_fail(SW_STATUS_INVALID,
                       "sw_remote_config: timeouts, max_pipeline, backoff and "
                       "max_value_bytes must be positive (backoff_max >= backoff_min, "
                       "max_value_bytes <= 1 GiB)");
    const char *prefix = c->prefix ? c->prefix : "";
    size_t plen = strlen(prefix);
    if (plen > SW_REMOTE_MAX_PREFIX)
        return sw_fail(SW_STATUS_INVALID, "prefix of %zu bytes (at most %u)", plen,
                       SW_REMOTE_MAX_PREFIX);

    sw_remote *r = calloc(1, sizeof *r);
    if (!r)
        return sw_fail(SW_STATUS_NO_MEMORY, "remote handle");
    pthread_mutex_init(&r->mu, NULL);
    r->cluster = c->cluster ? 1 : 0;
    memcpy(r->prefix, prefix, plen);
    r->prefix_len = plen;
    r->prefix_hash = sw_remote_prefix_hash(prefix, plen);
    r->connect_timeout_ms = c->connect_timeout_ms;
    r->command_timeout_ms = c->command_timeout_ms;
    r->max_pipeline = c->max_pipeline;
    r->backoff_min_ms = c->backoff_min_ms;
    r->backoff_max_ms = c->backoff_max_ms;
    r->max_value_bytes = c->max_value_bytes;
    r->refresh_gap_ms = SW_REFRESH_MIN_MS;
    r->refresh_wait_us = (uint64_t)SW_REFRESH_MIN_MS * 1000u;
    r->rng = (sw_remote_now_us() ^ (uint64_t)(uintptr_t)r) | 1u;
    r->slots = malloc(SW_REMOTE_SLOTS * sizeof *r->slots);
    r->user = c->user && c->user[0] ? dup_str(c->user) : NULL;
    r->password = dup_str(c->password);
    if (!r->slots || (c->user && c->user[0] && !r->user) || (c->password && !r->password)) {
        sw_remote_close(r);
        return sw_fail(SW_STATUS_NO_MEMORY, "remote handle");
    }
    if (r->user && !r->password) {
        sw_remote_close(r);
        return sw_fail(SW_STATUS_INVALID, "sw_remote_config.user without a password");
    }
    sw_status s = parse_endpoints(r, c->endpoints);
    if (s != SW_OK) {
        sw_remote_close(r);
        return s;
    }
    if (!r->cluster && r->nnodes != 1) {
        size_t nn = r->nnodes; /* read before the handle is freed */
        sw_remote_close(r);
        return sw_fail(SW_STATUS_INVALID, "standalone mode takes one endpoint, got %zu "
                       "(set cluster = 1 for a seed list)", nn);
    }
    r->nseeds = r->nnodes;
    uint64_t deadline = sw_remote_now_us() + (uint64_t)(c->connect_timeout_ms +
                                                        c->command_timeout_ms) * 1000u;
    if (r->cluster) {
        for (uint32_t i = 0; i < SW_REMOTE_SLOTS; i++)
            r->slots[i] = -1;
        s = sw_remote_refresh_topology(r, deadline);
    } else {
        for (uint32_t i = 0; i < SW_REMOTE_SLOTS; i++)
            r->slots[i] = 0;
        sw_rnode *n = &r->nodes[0];
        s = sw_rnode_connect(r, n, deadline);
        if (s == SW_OK) {
            static const char *argv[1] = {"PING"};
            static const size_t len[1] = {4};
            redisReply *rep = NULL;
            s = sw_rnode_command(r, n, 1, argv, len, &sw_resp_small, deadline, &rep);
            if (s == SW_OK && rep->type == REDIS_REPLY_ERROR) {
                int auth = !strncmp(rep->str, "NOAUTH", 6) || !strncmp(rep->str, "NOPERM", 6);
                s = sw_fail(auth ? SW_STATUS_INVALID : SW_STATUS_IO, "redis %s:%d: PING: %s",
                            n->host, n->port, rep->str);
            }
            if (rep)
                freeReplyObject(rep);
        }
    }
    if (s != SW_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sw_last_error());
        sw_remote_close(r);
        return sw_fail(s, "%s", msg);
    }
    /* the open's own attempts are not "reconnects" or failures of the tier */
    r->connect_failures = 0;
    r->topology_refreshes = 0;
    *out = r;
    return SW_OK;
}

/* ---------------------------------------------------------------------- */

static int buf_reserve(sw_remote *r, size_t need)
{
    if (need <= r->buf_cap)
        return 0;
    size_t cap = r->buf_cap ? r->buf_cap : 4096;
    while (cap < need)
        cap *= 2;
    char *b = realloc(r->buf, cap);
    if (!b)
        return -1;
    r->buf = b;
    r->buf_cap = cap;
    return 0;
}

static size_t put_bulk_len(char *out, size_t len)
{
    return (size_t)sprintf(out, "$%zu\r\n", len);
}

/* Appends the RESP command of op o to r->buf at *pos. -1 on allocation. */
static int build_command(sw_remote *r, const batch *b, const rop *o, size_t *pos)
{
    size_t vlen = b->type == OP_SET ? SW_REMOTE_HDR_BYTES + b->slens[o->i] : 0;
    if (buf_reserve(r, *pos + 64 + o->klen + vlen + 64))
        return -1;
    char *p = r->buf + *pos;
    if (o->asking) {
        memcpy(p, "*1\r\n$6\r\nASKING\r\n", 16);
        p += 16;
    }
    if (b->type == OP_GET) {
        memcpy(p, "*2\r\n$3\r\nGET\r\n", 13);
        p += 13;
    } else if (b->type == OP_DEL) {
        memcpy(p, "*2\r\n$3\r\nDEL\r\n", 13);
        p += 13;
    } else {
        memcpy(p, "*3\r\n$3\r\nSET\r\n", 13);
        p += 13;
    }
    p += put_bulk_len(p, o->klen);
    memcpy(p, o->key, o->klen);
    p += o->klen;
    *p++ = '\r';
    *p++ = '\n';
    if (b->type == OP_SET) {
        sw_remote_hdr h;
        memset(&h, 0, sizeof h);
        h.key = b->keys[o->i];
        h.generation = b->sgens ? b->sgens[o->i] : 0;
        h.prefix_hash = r->prefix_hash;
        h.length = (uint32_t)b->slens[o->i];
        p += put_bulk_len(p, vlen);
        sw_remote_encode_hdr(&h, b->srcs[o->i], (uint8_t *)p);
        p += SW_REMOTE_HDR_BYTES;
        if (h.length)
            memcpy(p, b->srcs[o->i], h.length);
        p += h.length;
        *p++ = '\r';
        *p++ = '\n';
    }
    *pos = (size_t)(p - r->buf);
    return 0;
}

static void op_fail(sw_remote *r, batch *b, rop *o, sw_status s)
{
    o->pending = 0;
    b->st[o->i] = s;
    if (s == SW_STATUS_IO)
        r->errors++;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ..." -> slot and node index; -1 on a
 * malformed message. */
static int parse_redirect(sw_remote *r, const char *msg, uint32_t *slot)
{
    const char *sp = strchr(msg, ' ');
    if (!sp)
        return -1;
    char *e = NULL;
    long s = strtol(sp + 1, &e, 10);
    if (!e || *e != ' ' || s < 0 || s >= (long)SW_REMOTE_SLOTS)
        return -1;
    const char *addr = e + 1;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return -1;
    long port = strtol(colon + 1, &e, 10);
    if (port <= 0 || port > 65535)
        return -1;
    *slot = (uint32_t)s;
    return sw_remote_node_find_or_add(r, addr, (size_t)(colon - addr), (int)port);
}

/* An error reply to op o (msg NUL-terminated): in cluster mode MOVED / ASK
 * / TRYAGAIN leave it pending for the next pass (up to two redirections
 * per key), anything else fails it. */
static void handle_error(sw_remote *r, batch *b, rop *o, const char *msg)
{
    uint32_t slot = 0;
    int moved = !strncmp(msg, "MOVED ", 6), ask = !strncmp(msg, "ASK ", 4);
    int again = !strncmp(msg, "TRYAGAIN", 8);
    if ((moved || ask) && !r->cluster) {
        /* one server was configured: following it would connect wherever
         * the server names (ASK) and add nodes to a handle that has one */
        sw_fail(SW_STATUS_IO, "redis: a standalone server sent a redirection for key %.*s "
                "(%s): not followed (a Redis Cluster needs cluster = 1)", (int)o->klen,
                o->key, msg);
        op_fail(r, b, o, SW_STATUS_IO);
        return;
    }
    if ((moved || ask || again) && o->redirects >= SW_REMOTE_PASSES - 1) {
        sw_fail(SW_STATUS_IO, "redis: key %.*s redirected more than %d times (last: %s)",
                (int)o->klen, o->key, SW_REMOTE_PASSES - 1, msg);
        op_fail(r, b, o, SW_STATUS_IO);
        return;
    }
    if (moved) {
        int idx = parse_redirect(r, msg, &slot);
        if (idx >= 0) {
            r->slots[slot] = idx;
            sw_remote_refresh_soon(r);
            r->moved++;
            o->node = -1;
            o->asking = 0;
            o->redirects++;
            return; /* still pending: next pass */
        }
    } else if (ask) {
        int idx = parse_redirect(r, msg, &slot);
        if (idx >= 0) {
            r->ask++;
            o->node = idx;
            o->asking = 1;
            o->redirects++;
            return;
        }
    } else if (again) {
        o->redirects++;
        return;
    }
    sw_fail(SW_STATUS_IO, "redis: %s (key %.*s)", msg, (int)o->klen, o->key);
    op_fail(r, b, o, SW_STATUS_IO);
}

/* A GET's bulk-string value v of len bytes (still in the read buffer): the
 * header and CRC32C are checked over those bytes, and only then is the
 * payload copied, once, into the caller's dst (untouched on CORRUPT). */
static void handle_get_value(sw_remote *r, batch *b, rop *o, const uint8_t *v, size_t len)
{
    size_t i = o->i;
    o->pending = 0;
    sw_remote_hdr h;
    sw_remote_reject why;
    if (sw_remote_check_value(v, len, &b->keys[i], r->prefix_hash, &h, &why) != SW_OK) {
        if (why == SW_REMOTE_REJECT_VERSION && v[5] == 1)
            sw_fail(SW_STATUS_CORRUPT, "redis: value of %.*s was written by an older build "
                    "(value format version 1, no key-prefix hash, so its tenant cannot be "
                    "proven): not served; rewrite it", (int)o->klen, o->key);
        else if (why == SW_REMOTE_REJECT_VERSION)
            sw_fail(SW_STATUS_CORRUPT, "redis: value of %.*s has value format version %u, this "
                    "build reads version %u (a newer build's value, or a damaged byte): not "
                    "served", (int)o->klen, o->key, (unsigned)v[5], SW_REMOTE_VERSION);
        else
            sw_fail(SW_STATUS_CORRUPT, "redis: value of %.*s %s: not served", (int)o->klen,
                    o->key, sw_remote_reject_str(why));
        b->st[i] = SW_STATUS_CORRUPT;
        r->corruptions++;
        if (why == SW_REMOTE_REJECT_KEY || why == SW_REMOTE_REJECT_PREFIX)
            r->misplaced++;
        return;
    }
    if (h.length > b->dst_bytes || h.length > r->max_value_bytes) {
        sw_fail(SW_STATUS_INVALID, "redis: value of %.*s has %u bytes, dst_bytes %zu",
                (int)o->klen, o->key, h.length, b->dst_bytes);
        b->st[i] = SW_STATUS_INVALID;
        return;
    }
    if (h.length)
        memcpy(b->dst[i], v + SW_REMOTE_HDR_BYTES, h.length);
    if (b->lengths)
        b->lengths[i] = h.length;
    if (b->gens)
        b->gens[i] = h.generation;
    b->st[i] = SW_OK;
    r->hits++;
    r->bytes_read += h.length;
}

/* One RESP reply parsed in place from node n's read buffer (GET path): '$'
 * bulk (*len = -1 for nil), '-' error, '+' status or ':' integer (the line
 * in *p, *len bytes); an array is refused from its first line. A bulk
 * string longer than max_bulk is refused from its length line (-3, *len =
 * the announced length, *skip = the bytes of the reply from its start to
 * its end), before any of it is buffered. *p points into n->rbuf and stays
 * valid until the next read. 0, -1 I/O or protocol error, -2 deadline, -3
 * too long. */
static int resp_next(sw_rnode *n, uint64_t deadline, uint64_t max_bulk, char *type,
                     const char **p, int64_t *len, uint64_t *skip)
{
    size_t flen = 0;
    int64_t announced = 0;
    sw_resp_limits lim = {max_bulk, (size_t)max_bulk + SW_RESP_MAX_LINE + 2, 0};
    int rc = sw_rnode_frame(n, &lim, deadline, &flen, &announced);
    if (rc == -3) {
        *len = announced;
        *skip = (uint64_t)flen + (uint64_t)announced + 2;
    }
    if (rc)
        return rc;
    const char *line = n->rbuf + n->rpos;
    const char *nl = memchr(line, '\n', flen); /* framed: present */
    size_t ll = (size_t)(nl - line);
    *type = line[0];
    n->rpos += flen;
    if (line[0] == '-' || line[0] == '+' || line[0] == ':') {
        *p = line + 1;
        *len = (int64_t)(ll - 2);
        return 0;
    }
    if (line[1] == '-') { /* "$-1": nil */
        *len = -1;
        *p = NULL;
        return 0;
    }
    *p = line + ll + 1;
    *len = (int64_t)(flen - ll - 1 - 2);
    return 0;
}

/* The reply to the ASKING sent before op o's command, framed with the
 * limits of every short reply (64 KiB, no array: an ASKING reply is one
 * line). 0 with *ok = 1 for +OK, or *ok = 0 and the detail recorded for
 * anything else (the command after it was not taken as part of an import:
 * its reply is read, to keep the pipeline in step, and not used); -1 a
 * reply over the limits, -2 deadline. */
static int read_asking_reply(sw_rnode *n, const rop *o, uint64_t deadline, int *ok)
{
    size_t flen = 0;
    int64_t announced = 0;
    int rc = sw_rnode_frame(n, &sw_resp_small, deadline, &flen, &announced);
    if (rc)
        return rc == -3 ? -1 : rc;
    const char *line = n->rbuf + n->rpos;
    *ok = flen == 5 && !memcmp(line, "+OK\r\n", 5);
    if (!*ok) {
        const char *cr = memchr(line, '\r', flen); /* framed: its first line ends */
        size_t ll = cr ? (size_t)(cr - line) : 0;
        sw_fail(SW_STATUS_IO, "redis %s:%d: ASKING before key %.*s answered '%.*s', not +OK",
                n->host, n->port, (int)o->klen, o->key, (int)(ll < 120 ? ll : 120), line);
    }
    n->rpos += flen;
    return 0;
}

/* A GET's key absent from the remote: its status, the message naming it
 * (the call's last error), the count. */
static void get_miss(sw_remote *r, batch *b, const rop *o)
{
    b->st[o->i] = SW_STATUS_NOT_FOUND;
    sw_fail(SW_STATUS_NOT_FOUND, "key %zu of the batch (%.*s): not in the remote tier", o->i,
            (int)o->klen, o->key);
    r->not_found++;
}

/* Reads and handles the reply (and the ASKING reply before it) of GET op o
 * from node n; 0, the resp_next error, or -3: the value is longer than the
 * caller can take and longer than SW_RESP_SKIP_MAX (the key is failed
 * INVALID, the rest of the value is still on the connection). A refused
 * value up to SW_RESP_SKIP_MAX is read and dropped, so the node's other
 * keys are answered on the same connection in the same pass (closing it
 * instead cost a pass per refused value: with 4 of 8 keys oversized,
 * healthy keys failed "not answered in 3 passes"). */
static int read_get_reply(sw_remote *r, batch *b, sw_rnode *n, rop *o, uint64_t deadline)
{
    char type;
    const char *p;
    int64_t len;
    uint64_t skip = 0;
    int rc, ask_ok = 1;
    char ask_why[512];
    if (o->asking) {
        if ((rc = read_asking_reply(n, o, deadline, &ask_ok)) != 0)
            return rc;
        if (!ask_ok)
            snprintf(ask_why, sizeof ask_why, "%s", sw_last_error());
    }
    /* a value is read only when it can be delivered: at most the header
     * plus what dst_bytes and max_value_bytes allow */
    uint64_t room = b->dst_bytes < r->max_value_bytes ? b->dst_bytes : r->max_value_bytes;
    rc = resp_next(n, deadline, room + SW_REMOTE_HDR_BYTES, &type, &p, &len, &skip);
    if (!ask_ok && (rc == 0 || rc == -3)) {
        /* the GET's reply is not the key's answer: dropped */
        sw_fail(SW_STATUS_IO, "%s", ask_why);
        op_fail(r, b, o, SW_STATUS_IO);
        if (rc == 0)
            return 0;
        return (uint64_t)len > SW_RESP_SKIP_MAX ? -3 : sw_rnode_skip(n, skip, deadline);
    }
    if (rc == -3) {
        o->pending = 0;
        b->st[o->i] = sw_fail(SW_STATUS_INVALID,
                              "redis: value of %.*s has %lld bytes, more than the %llu a "
                              "64-byte header and dst_bytes %zu / max_value_bytes %u allow: "
                              "refused, not buffered",
                              (int)o->klen, o->key, (long long)len,
                              (unsigned long long)(room + SW_REMOTE_HDR_BYTES), b->dst_bytes,
                              r->max_value_bytes);
        r->oversized++;
        if ((uint64_t)len > SW_RESP_SKIP_MAX)
            return -3;
        return sw_rnode_skip(n, skip, deadline); /* not buffered: dropped as it comes */
    }
    if (rc != 0)
        return rc;
    if (type == '$') {
        if (len < 0) {
            o->pending = 0;
            get_miss(r, b, o);
        } else {
            handle_get_value(r, b, o, (const uint8_t *)p, (size_t)len);
        }
    } else if (type == '-') {
        char msg[512];
        size_t m = (size_t)len < sizeof msg - 1 ? (size_t)len : sizeof msg - 1;
        memcpy(msg, p, m);
        msg[m] = 0;
        handle_error(r, b, o, msg);
    } else {
        sw_fail(SW_STATUS_IO, "redis: GET: unexpected reply type '%c'", type);
        op_fail(r, b, o, SW_STATUS_IO);
    }
    return 0;
}

static void handle_reply(sw_remote *r, batch *b, rop *o, const redisReply *rep)
{
    size_t i = o->i;
    if (rep->type == REDIS_REPLY_ERROR) {
        handle_error(r, b, o, rep->str);
        return;
    }
    o->pending = 0;
    if (b->type == OP_SET) {
        if (rep->type == REDIS_REPLY_STATUS && !strcmp(rep->str, "OK")) {
            b->st[i] = SW_OK;
            r->puts++;
            r->bytes_written += b->slens[i];
        } else {
            sw_fail(SW_STATUS_IO, "redis: SET: unexpected reply type %d", rep->type);
            op_fail(r, b, o, SW_STATUS_IO);
        }
        return;
    }
    if (b->type == OP_DEL) {
        if (rep->type == REDIS_REPLY_INTEGER) {
            b->st[i] = rep->integer > 0 ? SW_OK : SW_STATUS_NOT_FOUND;
            if (rep->integer > 0)
                r->deletes++;
            else
                sw_fail(SW_STATUS_NOT_FOUND, "delete: the key (%.*s) is not in the remote tier",
                        (int)o->klen, o->key);
        } else {
            sw_fail(SW_STATUS_IO, "redis: DEL: unexpected reply type %d", rep->type);
            op_fail(r, b, o, SW_STATUS_IO);
        }
        return;
    }
    /* GET */
    if (rep->type == REDIS_REPLY_NIL) {
        get_miss(r, b, o);
        return;
    }
    if (rep->type != REDIS_REPLY_STRING) {
        sw_fail(SW_STATUS_IO, "redis: GET: unexpected reply type %d", rep->type);
        op_fail(r, b, o, SW_STATUS_IO);
        return;
    }
    handle_get_value(r, b, o, (const uint8_t *)rep->str, rep->len);
}

static int node_add_op(sw_rnode *n, size_t op)
{
    if (n->nops == n->ops_cap) {
        size_t cap = n->ops_cap ? n->ops_cap * 2 : 64;
        size_t *o = realloc(n->ops, cap * sizeof *o);
        if (!o)
            return -1;
        n->ops = o;
        n->ops_cap = cap;
    }
    n->ops[n->nops++] = op;
    return 0;
}

/* Fails the ops of node n from position `from` on (its connection is gone). */
static void node_fail_rest(sw_remote *r, batch *b, sw_rnode *n, size_t from)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", sw_last_error());
    for (size_t k = from; k < n->nops; k++) {
        rop *o = &b->ops[n->ops[k]];
        if (o->pending)
            op_fail(r, b, o, SW_STATUS_IO);
    }
    n->nops = 0;
    n->chunk_begin = n->chunk_end = 0;
    sw_fail(SW_STATUS_IO, "%s", msg);
}

/* One pass over the pending ops. Returns 1 when a node's connection was
 * closed because of a value too long to drain (its other keys were not
 * sent back: the pass does not count against SW_REMOTE_PASSES). */
static int run_pass(sw_remote *r, batch *b, uint64_t deadline)
{
    int reopened = 0;
    for (size_t k = 0; k < r->nnodes; k++)
        r->nodes[k].nops = r->nodes[k].chunk_begin = r->nodes[k].chunk_end = 0;
    for (size_t k = 0; k < b->nops; k++) {
        rop *o = &b->ops[k];
        if (!o->pending)
            continue;
        int32_t node = o->node >= 0 ? o->node : r->slots[o->slot];
        if (node < 0) {
            sw_fail(SW_STATUS_IO, "redis: slot %u is served by no node", o->slot);
            op_fail(r, b, o, SW_STATUS_IO);
            continue;
        }
        if (node_add_op(&r->nodes[node], k)) {
            sw_fail(SW_STATUS_NO_MEMORY, "redis: op list");
            op_fail(r, b, o, SW_STATUS_NO_MEMORY);
        }
    }
    for (size_t k = 0; k < r->nnodes; k++) {
        sw_rnode *n = &r->nodes[k];
        if (n->nops && sw_rnode_connect(r, n, deadline) != SW_OK) {
            if (n->fast_failed)
                r->fast_fails += n->nops;
            node_fail_rest(r, b, n, 0);
        }
    }
    size_t depth = (size_t)r->max_pipeline;
    for (;;) {
        int any = 0;
        /* send one chunk to every node, so that the nodes work in parallel */
        for (size_t k = 0; k < r->nnodes; k++) {
            sw_rnode *n = &r->nodes[k];
            if (n->chunk_end >= n->nops)
                continue;
            n->chunk_begin = n->chunk_end;
            n->chunk_end = n->chunk_begin + depth < n->nops ? n->chunk_begin + depth : n->nops;
            size_t pos = 0;
            int bad = 0;
            for (size_t q = n->chunk_begin; q < n->chunk_end && !bad; q++)
                bad = build_command(r, b, &b->ops[n->ops[q]], &pos);
            if (bad) {
                sw_fail(SW_STATUS_NO_MEMORY, "redis: command buffer");
                node_fail_rest(r, b, n, n->chunk_begin);
                continue;
            }
            if (redisAppendFormattedCommand(n->c, r->buf, pos) != REDIS_OK ||
                sw_rnode_flush(n, deadline) != 0) {
                sw_rnode_drop(r, n);
                node_fail_rest(r, b, n, n->chunk_begin);
                continue;
            }
            any = 1;
        }
        if (!any)
            break;
        for (size_t k = 0; k < r->nnodes; k++) {
            if (!r->nodes[k].nops || r->nodes[k].chunk_begin >= r->nodes[k].chunk_end)
                continue;
            /* the deadline went by while other nodes were read: this node's
             * replies were not waited for, so it is not to blame */
            int late = sw_remote_now_us() >= deadline;
            /* n is taken anew for every reply: a MOVED to an unknown node
             * adds it to r->nodes, which may move the table */
            for (size_t q = r->nodes[k].chunk_begin; q < r->nodes[k].chunk_end; q++) {
                sw_rnode *n = &r->nodes[k];
                rop *o = &b->ops[n->ops[q]];
                redisReply *rep = NULL;
                int rc = 0;
                if (b->type == OP_GET) {
                    rc = read_get_reply(r, b, n, o, deadline);
                    if (rc == -3) {
                        /* the refused value is still on the connection: it
                         * is re-opened; the node's other keys stay pending
                         * for the next pass, which does not count as one */
                        sw_rnode_close(n);
                        n->nops = n->chunk_begin = n->chunk_end = 0;
                        reopened = 1;
                        break;
                    }
                    if (rc == -2 && late) {
                        sw_rnode_close(n);
                        sw_fail(SW_STATUS_IO, "redis %s:%d: no time left for its replies "
                                "(the deadline passed reading other nodes)", n->host, n->port);
                        node_fail_rest(r, b, n, q);
                        break;
                    }
                    if (rc != 0) {
                        if (rc == -2)
                            r->timeouts++;
                        sw_rnode_drop(r, n);
                        node_fail_rest(r, b, n, q);
                        break;
                    }
                    continue;
                }
                int ask_ok = 1;
                char ask_why[512];
                if (o->asking) {
                    rc = read_asking_reply(n, o, deadline, &ask_ok);
                    if (rc == 0 && !ask_ok)
                        snprintf(ask_why, sizeof ask_why, "%s", sw_last_error());
                }
                if (rc == 0)
                    rc = sw_rnode_read(n, &sw_resp_small, deadline, &rep);
                if (rc == -2 && late) {
                    sw_rnode_close(n);
                    sw_fail(SW_STATUS_IO, "redis %s:%d: no time left for its replies "
                            "(the deadline passed reading other nodes)", n->host, n->port);
                    node_fail_rest(r, b, n, q);
                    break;
                }
                if (rc != 0) {
                    if (rc == -2)
                        r->timeouts++;
                    sw_rnode_drop(r, n);
                    node_fail_rest(r, b, n, q);
                    break;
                }
                if (ask_ok) {
                    handle_reply(r, b, o, rep);
                } else { /* the command's reply is not the key's answer */
                    sw_fail(SW_STATUS_IO, "%s", ask_why);
                    op_fail(r, b, o, SW_STATUS_IO);
                }
                freeReplyObject(rep);
            }
            r->nodes[k].chunk_begin = r->nodes[k].chunk_end;
        }
    }
    return reopened;
}

static sw_status run_batch(sw_remote *r, batch *b)
{
    uint64_t start = sw_remote_now_us();
    uint64_t deadline = start + (uint64_t)r->command_timeout_ms * 1000u;
    /* rate-limited: a node that stays down must not turn every call into a
     * refresh (the gap grows while refreshes find nothing new) */
    if (r->cluster && r->need_refresh &&
        start - r->last_refresh_us >= r->refresh_wait_us)
        (void)sw_remote_refresh_topology(r, deadline);
    /* a pass that re-opened a connection after a refused value does not
     * count: each such pass settles that key, so there are at most as many
     * as keys, and the deadline bounds them all; redirections are bounded
     * per key (handle_error), whatever kind of pass they came in */
    for (int pass = 0; pass < SW_REMOTE_PASSES;) {
        int pending = 0;
        for (size_t k = 0; k < b->nops && !pending; k++)
            pending = b->ops[k].pending;
        if (!pending)
            break;
        if (!run_pass(r, b, deadline))
            pass++;
    }
    for (size_t k = 0; k < b->nops; k++)
        if (b->ops[k].pending) {
            sw_fail(SW_STATUS_IO, "redis: key %.*s not answered in %d passes (redirected, "
                    "or its connection re-opened each time)",
                    (int)b->ops[k].klen, b->ops[k].key, SW_REMOTE_PASSES);
            op_fail(r, b, &b->ops[k], SW_STATUS_IO);
        }
    sw_status first = SW_OK;
    for (size_t i = 0; i < b->n && first == SW_OK; i++)
        first = b->st[i];
    return first;
}

/* Builds the op list of the keys that passed the argument checks. */
static sw_status batch_prepare(sw_remote *r, batch *b)
{
    b->ops = NULL;
    b->nops = 0;
    if (!b->n)
        return SW_OK;
    b->ops = malloc(b->n * sizeof *b->ops);
    if (!b->ops)
        return sw_fail(SW_STATUS_NO_MEMORY, "redis: %zu ops", b->n);
    for (size_t i = 0; i < b->n; i++) {
        const sw_store_key *k = &b->keys[i];
        if (!key_ok(k)) {
            b->st[i] = sw_fail(SW_STATUS_INVALID, "key %zu: bad kind %u or reserved %u", i,
                               k->kind, k->reserved);
            continue;
        }
        if (b->type == OP_GET && !b->dst[i]) {
            b->st[i] = sw_fail(SW_STATUS_INVALID, "dst[%zu] is NULL", i);
            continue;
        }
        if (b->type == OP_SET &&
            ((!b->srcs[i] && b->slens[i]) || b->slens[i] > r->max_value_bytes)) {
            b->st[i] = sw_fail(SW_STATUS_INVALID, "key %zu: src NULL or %zu bytes > %u", i,
                               b->slens[i], r->max_value_bytes);
            continue;
        }
        rop *o = &b->ops[b->nops++];
        o->i = i;
        o->node = -1;
        o->asking = 0;
        o->pending = 1;
        o->redirects = 0;
        o->klen = (uint16_t)sw_remote_key_name(r->prefix, r->prefix_len, k, o->key);
        o->slot = r->cluster ? sw_remote_key_slot(o->key, o->klen) : 0;
        b->st[i] = SW_STATUS_IO;
    }
    return SW_OK;
}

/* Prepares and runs a batch of puts or gets under the handle's lock, timing
 * it into `hist`; a batch that cannot be prepared fails every key with the
 * same status. */
static sw_status exec_batch(sw_remote *r, batch *b, sw_remote_hist *hist)
{
    pthread_mutex_lock(&r->mu);
    uint64_t t0 = sw_remote_now_us();
    sw_status s = batch_prepare(r, b);
    if (s == SW_OK)
        s = run_batch(r, b);
    else
        for (size_t i = 0; i < b->n; i++)
            b->st[i] = s;
    if (b->type == OP_GET)
        r->gets += b->n;
    sw_remote_hist_add(hist, sw_remote_now_us() - t0);
    pthread_mutex_unlock(&r->mu);
    free(b->ops);
    return s;
}

sw_status sw_remote_put_batch(sw_remote *r, size_t n, const sw_store_key *keys,
                              const void *const *srcs, const size_t *lengths,
                              const uint64_t *generations, sw_status *statuses)
{
    if (!r || (n && (!keys || !srcs || !lengths || !statuses))) {
        for (size_t i = 0; statuses && i < n; i++)
            statuses[i] = SW_STATUS_INVALID;
        return sw_fail(SW_STATUS_INVALID, "sw_remote_put_batch: null argument");
    }
    batch b;
    memset(&b, 0, sizeof b);
    b.type = OP_SET;
    b.n = n;
    b.keys = keys;
    b.srcs = srcs;
    b.slens = lengths;
    b.sgens = generations;
    b.st = statuses;
    return exec_batch(r, &b, &r->put_hist);
}

sw_status sw_remote_get_batch(sw_remote *r, size_t n, const sw_store_key *keys,
                              void *const *dst, size_t dst_bytes, size_t *lengths,
                              uint64_t *generations, sw_status *statuses)
{
    if (!r || (n && (!keys || !dst || !statuses))) {
        for (size_t i = 0; statuses && i < n; i++)
            statuses[i] = SW_STATUS_INVALID;
        return sw_fail(SW_STATUS_INVALID, "sw_remote_get_batch: null argument");
    }
    for (size_t i = 0; i < n; i++) {
        if (lengths)
            lengths[i] = 0;
        if (generations)
            generations[i] = 0;
    }
    batch b;
    memset(&b, 0, sizeof b);
    b.type = OP_GET;
    b.n = n;
    b.keys = keys;
    b.dst = dst;
    b.dst_bytes = dst_bytes;
    b.lengths = lengths;
    b.gens = generations;
    b.st = statuses;
    return exec_batch(r, &b, &r->get_hist);
}

sw_status sw_remote_delete(sw_remote *r, const sw_store_key *key)
{
    if (!r || !key)
        return sw_fail(SW_STATUS_INVALID, "sw_remote_delete: null argument");
    sw_status st = SW_STATUS_INVALID;
    batch b;
    memset(&b, 0, sizeof b);
    b.type = OP_DEL;
    b.n = 1;
    b.keys = key;
    b.st = &st;
    pthread_mutex_lock(&r->mu);
    sw_status s = batch_prepare(r, &b);
    if (s == SW_OK)
        s = run_batch(r, &b);
    pthread_mutex_unlock(&r->mu);
    free(b.ops);
    return s;
}

sw_status sw_remote_get_stats(sw_remote *r, sw_remote_stats *st)
{
    if (!r || !st || st->struct_size < 16)
        return sw_fail(SW_STATUS_INVALID, "sw_remote_get_stats: null or struct_size < 16");
    sw_remote_stats v;
    memset(&v, 0, sizeof v);
    pthread_mutex_lock(&r->mu);
    v.cluster = r->cluster;
    v.nodes = r->nnodes;
    for (size_t i = 0; i < r->nnodes; i++)
        v.nodes_connected += r->nodes[i].c != NULL;
    v.gets = r->gets;
    v.hits = r->hits;
    v.not_found = r->not_found;
    v.corruptions = r->corruptions;
    v.errors = r->errors;
    v.misses = r->gets - r->hits;
    v.puts = r->puts;
    v.deletes = r->deletes;
    v.bytes_read = r->bytes_read;
    v.bytes_written = r->bytes_written;
    v.reconnects = r->reconnects;
    v.connect_failures = r->connect_failures;
    v.timeouts = r->timeouts;
    v.moved = r->moved;
    v.ask = r->ask;
    v.topology_refreshes = r->topology_refreshes;
    v.misplaced = r->misplaced;
    v.oversized = r->oversized;
    v.probes = r->probes;
    v.fast_fails = r->fast_fails;
    v.get_calls = r->get_hist.count;
    v.get_p50_us = sw_remote_hist_quantile(&r->get_hist, 0.50);
    v.get_p99_us = sw_remote_hist_quantile(&r->get_hist, 0.99);
    v.get_max_us = r->get_hist.max_us;
    v.put_calls = r->put_hist.count;
    v.put_p50_us = sw_remote_hist_quantile(&r->put_hist, 0.50);
    v.put_p99_us = sw_remote_hist_quantile(&r->put_hist, 0.99);
    v.put_max_us = r->put_hist.max_us;
    pthread_mutex_unlock(&r->mu);
    uint32_t size = st->struct_size < sizeof v ? st->struct_size : (uint32_t)sizeof v;
    memcpy((char *)st + sizeof st->struct_size, (char *)&v + sizeof v.struct_size,
           size - sizeof st->struct_size);
    return SW_OK;
}
#endif
