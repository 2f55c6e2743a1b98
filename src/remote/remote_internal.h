/* Remote tier internals: the handle, nodes and their connections. */
#ifndef SW_REMOTE_INTERNAL_H
#define SW_REMOTE_INTERNAL_H

#include "core/sw_core.h"
#include "remote/format.h"
#include "spillway.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#if defined(SW_HAVE_HIREDIS)
#include <hiredis/hiredis.h>

/* One server. A node is never removed while the handle lives (slot tables
 * hold indices); its connection comes and goes.
 *
 * Health: a node whose connection failed (refused, lost, timed out, a
 * protocol error) is `down`: calls fail its keys at once, without waiting,
 * while a probe (a non-blocking connect + PING on a separate socket, at
 * most one per backoff period) checks whether it answers again. Only an
 * answer to the probe brings the node back; a TCP connect that a hung
 * server's kernel completes does not. The backoff doubles across failures
 * and falls back to backoff_min only after a reply was read from the node
 * (`answered`). */
typedef struct sw_rnode {
    char host[256];
    int port;
    redisContext *c;        /* NULL while disconnected */
    int lost;               /* failed since its last connect: the next is a
                             * "reconnect" (not after sw_rnode_close) */
    int down;               /* failed; keys fail at once until a probe answers */
    int answered;           /* a reply was read since the last failure */
    int fast_failed;        /* the last sw_rnode_connect failed without trying */
    uint64_t next_try_us;   /* down: no probe started before (monotonic us) */
    uint32_t backoff_ms;    /* next delay after a failure */
    char why[128];          /* down: the failure that put it there */
    redisContext *probe;    /* down: the probe in flight (non-blocking), or NULL */
    int probe_sent;         /* its PING is written */
    uint64_t probe_until_us;/* the probe is given up at */
    /* per pass */
    size_t *ops;            /* indices into the batch's op array */
    size_t nops, ops_cap;
    size_t chunk_begin, chunk_end; /* ops of the pipeline chunk in flight */
    /* Every reply is received here, straight from recv(): bytes
     * rbuf[rpos..rlen) are received and not yet parsed. A reply is framed
     * (sw_resp_scan: lengths checked against the caller's limit before a
     * byte of a bulk string is buffered) before hiredis (SET, DEL, AUTH,
     * PING, CLUSTER SLOTS) or remote.c's GET parser sees it. */
    char *rbuf;
    size_t rpos, rlen, rcap;
    sw_resp_scan_state scan; /* the reply at rpos, scanned so far */
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
    uint32_t refresh_gap_ms;  /* rate limit of refreshes; doubles while they
                               * find no change, SW_REFRESH_MIN..MAX_MS
                               * (SLOW_MS once a dead owner stays listed) */
    uint64_t refresh_wait_us; /* the gap plus jitter: the next refresh is
                               * not made before last_refresh_us + this */
    uint64_t stale_since_us;  /* first refresh whose map, unchanged, still
                               * gave slots to a down node; 0 = none */
    uint64_t rng;             /* xorshift state for the jitter */

    char *buf;                /* command scratch */
    size_t buf_cap;

    /* counters (sw_remote_stats) */
    uint64_t gets, hits, not_found, corruptions, errors, puts, deletes;
    uint64_t bytes_read, bytes_written, reconnects, connect_failures, timeouts;
    uint64_t moved, ask, topology_refreshes;
    uint64_t misplaced, oversized, probes, fast_fails;
    sw_remote_hist get_hist, put_hist;
};

uint64_t sw_remote_now_us(void);

/* conn.c */
/* Connects (and authenticates) node n unless connected, never waiting past
 * `deadline_us`. A node that is down is not connected to: its probe is
 * started or advanced (a short, bounded wait only when it is started) and
 * the call fails at once (n->fast_failed = 1) unless the probe has
 * answered. SW_OK; SW_STATUS_IO (down, probing, timeout); SW_STATUS_INVALID
 * (the server refused AUTH or requires it; its message in the detail).
 * Failures mark the node down. */
sw_status sw_rnode_connect(sw_remote *r, sw_rnode *n, uint64_t deadline_us);
/* Drops the connection (replies in flight are lost) after a failure: the
 * node is down (backoff armed; cluster: the slot map is refreshed). */
void sw_rnode_drop(sw_remote *r, sw_rnode *n);
/* Closes the connection of a healthy node that is out of sync (a reply
 * refused unread, replies not waited for): no backoff, reconnected by the
 * next use. */
void sw_rnode_close(sw_rnode *n);
/* Closes a probe in flight, if any. */
void sw_rnode_probe_close(sw_rnode *n);
/* Sends whatever is buffered; 0 or -1 (detail recorded; caller drops). */
int sw_rnode_flush(sw_rnode *n, uint64_t deadline_us);
/* Limits of replies other than GET's value. SET, DEL, AUTH, PING and
 * ASKING answer with one short line: at most 64 KiB, no array. CLUSTER
 * SLOTS is the one array: at most 16 MiB and 512 Ki elements in all
 * (16384 single-slot ranges of a master and two replicas with metadata
 * stay under 400 Ki), because hiredis allocates a reply object per
 * element: ~76 bytes each, so 4 M tiny elements in 16 MiB cost +304 MiB. */
#define SW_RESP_SMALL_FRAME (64u << 10)
#define SW_RESP_SLOTS_FRAME (16u << 20)
#define SW_RESP_SLOTS_ELEMS (1u << 19)
extern const sw_resp_limits sw_resp_small, sw_resp_slots;
/* A refused GET value up to this long is read and dropped (the pipeline
 * goes on); a longer one closes the connection instead. */
#define SW_RESP_SKIP_MAX (64u << 20)
/* Frames the next reply at n->rbuf + n->rpos (not consumed): receives until
 * it is complete, resuming the scan where the last read left it (n->scan),
 * refusing a bulk string longer than lim->max_bulk as soon as its length
 * line is in, a reply over lim's other limits as soon as it passes them,
 * and giving up when the deadline passes (checked before every read).
 * 0 and *frame_len; -1 I/O or protocol error; -2 deadline passed; -3 a
 * bulk string of *announced bytes > max_bulk, whose data starts
 * *frame_len bytes into the reply (nothing of it buffered beyond what one
 * recv brought). Detail recorded on failure. */
int sw_rnode_frame(sw_rnode *n, const sw_resp_limits *lim, uint64_t deadline_us,
                   size_t *frame_len, int64_t *announced);
/* Receives and drops the next `bytes` bytes (those buffered first), never
 * receiving past them; the last two must be CRLF (a refused bulk string's
 * data and its end). 0; -1 I/O or protocol error; -2 deadline. */
int sw_rnode_skip(sw_rnode *n, uint64_t bytes, uint64_t deadline_us);
/* Next reply through hiredis (within lim): 0 and *out (free with
 * freeReplyObject), -1 I/O or protocol error, -2 deadline. */
int sw_rnode_read(sw_rnode *n, const sw_resp_limits *lim, uint64_t deadline_us,
                  redisReply **out);
/* One command, synchronously: SW_OK and *out, or SW_STATUS_IO (dropped). */
sw_status sw_rnode_command(sw_remote *r, sw_rnode *n, int argc, const char **argv,
                           const size_t *argvlen, const sw_resp_limits *lim,
                           uint64_t deadline_us, redisReply **out);

/* topology.c */
/* Index of the node host:port, added when missing; -1 on allocation failure. */
int sw_remote_node_find_or_add(sw_remote *r, const char *host, size_t host_len, int port);
/* Refreshes are rate-limited: at least refresh_gap_ms (plus up to a
 * quarter more, random, so that the handles of a fleet do not ask in step)
 * apart; the gap doubles from SW_REFRESH_MIN_MS to SW_REFRESH_MAX_MS while
 * refreshes find the same map, so a failover is seen within 1.25 x
 * SW_REFRESH_MAX_MS (the 400 ms cap it replaces asked 2.5 times a second
 * per handle for as long as a node stayed dead). When the map has kept a
 * down node as the owner of slots for SW_REFRESH_PATIENCE_MS (no failover
 * is coming soon: no replica, or a manual one), the gap grows on to
 * SW_REFRESH_SLOW_MS. A changed map or a MOVED brings it back to MIN. */
#define SW_REFRESH_MIN_MS 100u
#define SW_REFRESH_MAX_MS 1000u
#define SW_REFRESH_SLOW_MS 5000u
#define SW_REFRESH_PATIENCE_MS 10000u
/* Asks for a refresh soon (a MOVED: the map is known to be stale). */
void sw_remote_refresh_soon(sw_remote *r);
/* CLUSTER SLOTS from the first node that answers; rebuilds r->slots.
 * SW_OK; SW_STATUS_IO (no node answered); SW_STATUS_INVALID (a server
 * refused AUTH or has cluster support disabled). */
sw_status sw_remote_refresh_topology(sw_remote *r, uint64_t deadline_us);
#endif

#endif
