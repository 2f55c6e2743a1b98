/* Remote tier: cluster topology - the node table and CLUSTER SLOTS. */
#include "remote/remote_internal.h"

#if defined(SW_HAVE_HIREDIS)
#include <stdlib.h>
#include <string.h>

int sw_remote_node_find_or_add(sw_remote *r, const char *host, size_t host_len, int port)
{
    if (host_len >= sizeof r->nodes[0].host)
        return -1;
    for (size_t i = 0; i < r->nnodes; i++)
        if (r->nodes[i].port == port && strlen(r->nodes[i].host) == host_len &&
            !memcmp(r->nodes[i].host, host, host_len))
            return (int)i;
    if (r->nnodes == r->nodes_cap) {
        size_t cap = r->nodes_cap ? r->nodes_cap * 2 : 8;
        sw_rnode *nn = realloc(r->nodes, cap * sizeof *nn);
        if (!nn)
            return -1;
        r->nodes = nn;
        r->nodes_cap = cap;
    }
    sw_rnode *n = &r->nodes[r->nnodes];
    memset(n, 0, sizeof *n);
    memcpy(n->host, host, host_len);
    n->host[host_len] = '\0';
    n->port = port;
    n->backoff_ms = (uint32_t)r->backoff_min_ms;
    return (int)r->nnodes++;
}

/* CLUSTER SLOTS: [[start, end, [host, port, id...], replicas...], ...]. An
 * empty host means "the node you asked". Only masters (the first node of a
 * range) are used: reads from replicas could be stale. */
static sw_status parse_slots(sw_remote *r, const sw_rnode *asked, const redisReply *rep,
                             int32_t *slots)
{
    if (rep->type != REDIS_REPLY_ARRAY)
        return sw_fail(SW_STATUS_IO, "CLUSTER SLOTS: unexpected reply type %d", rep->type);
    for (uint32_t s = 0; s < SW_REMOTE_SLOTS; s++)
        slots[s] = -1;
    char asked_host[256];
    strcpy(asked_host, asked->host);
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            return sw_fail(SW_STATUS_IO, "CLUSTER SLOTS: malformed range %zu", i);
        long long a = e->element[0]->integer, b = e->element[1]->integer;
        const redisReply *m = e->element[2];
        if (a < 0 || b >= (long long)SW_REMOTE_SLOTS || a > b ||
            m->element[0]->type != REDIS_REPLY_STRING ||
            m->element[1]->type != REDIS_REPLY_INTEGER)
            return sw_fail(SW_STATUS_IO, "CLUSTER SLOTS: malformed range %zu", i);
        const char *host = m->element[0]->str;
        size_t hl = m->element[0]->len;
        if (hl == 0 || (hl == 1 && host[0] == '?')) {
            host = asked_host;
            hl = strlen(asked_host);
        }
        int idx = sw_remote_node_find_or_add(r, host, hl, (int)m->element[1]->integer);
        if (idx < 0)
            return sw_fail(SW_STATUS_NO_MEMORY, "CLUSTER SLOTS: node table");
        for (long long s = a; s <= b; s++)
            slots[s] = idx;
    }
    return SW_OK;
}

/* 1 when the map gives a slot to a node that is down. */
static int owner_down(const sw_remote *r)
{
    for (uint32_t s = 0; s < SW_REMOTE_SLOTS; s++)
        if (r->slots[s] >= 0 && r->nodes[r->slots[s]].down)
            return 1;
    return 0;
}

/* 0 .. gap/4 ms, in us: spreads the refreshes of many handles. */
static uint64_t jitter_us(sw_remote *r, uint32_t gap_ms)
{
    uint64_t x = r->rng ? r->rng : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r->rng = x;
    uint64_t span = (uint64_t)gap_ms * 1000u / 4u;
    return span ? x % (span + 1) : 0;
}

sw_status sw_remote_refresh_topology(sw_remote *r, uint64_t deadline_us)
{
    static const char *argv[2] = {"CLUSTER", "SLOTS"};
    static const size_t len[2] = {7, 5};
    int32_t *fresh = malloc(SW_REMOTE_SLOTS * sizeof *fresh);
    if (!fresh)
        return sw_fail(SW_STATUS_NO_MEMORY, "slot table");
    r->topology_refreshes++;
    uint64_t t0 = sw_remote_now_us();
    r->last_refresh_us = t0;
    /* until one that finds something new: the next one waits longer */
    uint32_t cap = r->stale_since_us && t0 - r->stale_since_us >=
                                            (uint64_t)SW_REFRESH_PATIENCE_MS * 1000u
                       ? SW_REFRESH_SLOW_MS
                       : SW_REFRESH_MAX_MS;
    uint32_t gap = r->refresh_gap_ms * 2;
    r->refresh_gap_ms = gap > cap ? cap : gap;
    sw_status last = sw_fail(SW_STATUS_IO, "no cluster node known");
    /* connected nodes first (no connect cost), then the others in order */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < r->nnodes; i++) {
            sw_rnode *n = &r->nodes[i];
            if ((pass == 0) != (n->c != NULL))
                continue;
            /* a node that does not answer leaves half of what is left to
             * the next one */
            uint64_t now = sw_remote_now_us();
            uint64_t nd = now < deadline_us ? now + (deadline_us - now) / 2 : deadline_us;
            sw_status s = sw_rnode_connect(r, n, nd);
            if (s != SW_OK) {
                last = s;
                if (s == SW_STATUS_INVALID)
                    goto out;
                continue;
            }
            redisReply *rep = NULL;
            s = sw_rnode_command(r, n, 2, argv, len, &sw_resp_slots, nd, &rep);
            if (s != SW_OK) {
                last = s;
                continue;
            }
            if (rep->type == REDIS_REPLY_ERROR) {
                int auth = !strncmp(rep->str, "NOAUTH", 6) || !strncmp(rep->str, "NOPERM", 6);
                int disabled = strstr(rep->str, "cluster support disabled") != NULL;
                last = sw_fail(auth || disabled ? SW_STATUS_INVALID : SW_STATUS_IO,
                               "redis %s:%d: CLUSTER SLOTS: %s", n->host, n->port, rep->str);
                freeReplyObject(rep);
                if (last == SW_STATUS_INVALID)
                    goto out;
                continue;
            }
            /* parse_slots may grow r->nodes: n is not used after it */
            s = parse_slots(r, n, rep, fresh);
            freeReplyObject(rep);
            if (s != SW_OK) {
                last = s;
                continue;
            }
            if (memcmp(r->slots, fresh, SW_REMOTE_SLOTS * sizeof *fresh)) {
                memcpy(r->slots, fresh, SW_REMOTE_SLOTS * sizeof *fresh);
                r->refresh_gap_ms = SW_REFRESH_MIN_MS;
                r->stale_since_us = 0;
            } else if (owner_down(r)) {
                if (!r->stale_since_us)
                    r->stale_since_us = t0;
            } else {
                r->stale_since_us = 0;
            }
            r->need_refresh = 0;
            last = SW_OK;
            goto out;
        }
    }
out:
    free(fresh);
    r->refresh_wait_us = (uint64_t)r->refresh_gap_ms * 1000u + jitter_us(r, r->refresh_gap_ms);
    return last;
}

void sw_remote_refresh_soon(sw_remote *r)
{
    r->need_refresh = 1;
    r->refresh_gap_ms = SW_REFRESH_MIN_MS;
    r->stale_since_us = 0;
    if (r->refresh_wait_us > (uint64_t)SW_REFRESH_MIN_MS * 1000u)
        r->refresh_wait_us = (uint64_t)SW_REFRESH_MIN_MS * 1000u;
}
#else
typedef int sw_remote_topology_unused_;
#endif
