/* Remote tier internals: the handle, nodes and their connections. */
#ifndef SW_REMOTE_INTERNAL_H
#define SW_REMOTE_INTERNAL_H

#include "core/sw_core.h"
#include "remote/format.h"
#include "spillway.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#if defined(SPILLWAY_HAVE_HIREDIS)
#include <hiredis/hiredis.h>

/* One server. A node is never removed while the handle lives (slot tables
 * hold indices); its connection comes and goes. */
typedef struct sw_rnode {
    char host[256];
    int port;
    redisContext *c;        /* NULL while disconnected */
    int ever_connected;     /* a later successful connect is a "reconnect" */
    uint64_t next_try_us;   /* no connect attempt before (monotonic us) */
    uint32_t backoff_ms;    /* next delay after a failure */
    /* per pass */
    size_t *ops;            /* indices into the batch's op array */
    size_t nops, ops_cap;
    size_t chunk_begin, chunk_end; /* ops of the pipeline chunk in flight */
    /* GET replies are parsed here, straight from recv(), not by hiredis:
     * bytes rbuf[rpos..rlen) are received and not yet parsed. Empty
     * whenever hiredis reads (sw_rnode_read hands leftovers to it). */
    char *rbuf;
    size_t rpos, rlen, rcap;
} sw_rnode;

struct sw_remote {
    pthread_mutex_t mu;
    int32_t cluster;
    char prefix[SW_REMOTE_MAX_PREFIX];
    size_t prefix_len;
    uint64_t prefix_hash;     /* sw_remote_prefix_hash(prefix): in every value */
    char *user, *password;
    int32_t connect_timeout_ms, command_timeout_ms, max_pipeline;
    int32_t backoff_min_ms, backoff_max_ms;
    uint32_t max_value_bytes;

    sw_rnode *nodes;
    size_t nnodes, nodes_cap;
    size_t nseeds;            /* the first nseeds nodes are the configured ones */
    int32_t *slots;           /* [16384] node index, -1 = uncovered */
    int need_refresh;
    uint64_t last_refresh_us;

    char *buf;                /* command scratch */
    size_t buf_cap;

    /* counters (sw_remote_stats) */
    uint64_t gets, hits, not_found, corruptions, errors, puts, deletes;
    uint64_t bytes_read, bytes_written, reconnects, connect_failures, timeouts;
    uint64_t moved, ask, topology_refreshes;
    uint64_t misplaced;
    sw_remote_hist get_hist, put_hist;
};

uint64_t sw_remote_now_us(void);

/* conn.c */
/* Connects (and authenticates) node n unless connected; honours the
 * backoff and never waits past `deadline_us`. SW_OK; SW_STATUS_IO (down,
 * backing off, timeout); SW_STATUS_INVALID (the server refused AUTH or
 * requires it; its message in the detail). Failures arm the backoff. */
sw_status sw_rnode_connect(sw_remote *r, sw_rnode *n, uint64_t deadline_us);
/* Drops the connection (replies in flight are lost) and arms the backoff. */
void sw_rnode_drop(sw_remote *r, sw_rnode *n);
/* Sends whatever is buffered; 0 or -1 (detail recorded; caller drops). */
int sw_rnode_flush(sw_rnode *n, uint64_t deadline_us);
/* Next reply: 0 and *out (free with freeReplyObject), -1 I/O or protocol
 * error, -2 deadline passed. */
int sw_rnode_read(sw_rnode *n, uint64_t deadline_us, redisReply **out);
/* Makes at least `need` unparsed bytes available at n->rbuf + n->rpos
 * (compacting or growing the buffer, so pointers into it go stale): a
 * non-blocking recv first, poll only when it finds nothing. 0, -1 I/O or
 * allocation error, -2 deadline passed (detail recorded; caller drops). */
int sw_rnode_fill(sw_rnode *n, size_t need, uint64_t deadline_us);
/* One command, synchronously: SW_OK and *out, or SW_STATUS_IO (dropped). */
sw_status sw_rnode_command(sw_remote *r, sw_rnode *n, int argc, const char **argv,
                           const size_t *argvlen, uint64_t deadline_us, redisReply **out);

/* topology.c */
/* Index of the node host:port, added when missing; -1 on allocation failure. */
int sw_remote_node_find_or_add(sw_remote *r, const char *host, size_t host_len, int port);
/* CLUSTER SLOTS from the first node that answers; rebuilds r->slots.
 * SW_OK; SW_STATUS_IO (no node answered); SW_STATUS_INVALID (a server
 * refused AUTH or has cluster support disabled). */
sw_status sw_remote_refresh_topology(sw_remote *r, uint64_t deadline_us);
#endif

#endif
