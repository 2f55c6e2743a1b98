/*
 * spillway_remote.h - the remote KV tier on Redis / Valkey (included by
 * spillway.h).
 *
 * A remote tier keeps stripes (the same sw_store_key as the local store) as
 * values of a Redis or Valkey server, standalone or a Redis Cluster, so that
 * machines of a fleet can share KV blocks. It is a client only: nothing is
 * kept locally, and every call is bounded in time: a server that is down,
 * slow, hung or unreachable turns into per-key SW_STATUS_IO results
 * (counted in stats.errors) within command_timeout_ms, never into a call
 * that blocks longer. The deadline is checked before every read of a
 * reply, so a server that trickles or streams without end cannot stretch a
 * call, and a reply is framed before it is buffered: a GET value announced
 * longer than dst_bytes / max_value_bytes is refused from its length line
 * (its bytes are then drained through the read buffer, not stored: up to
 * 64 MiB; a longer one re-opens the connection), a GET reply that is an
 * array is refused from its first line, and other replies are held to 64
 * KiB and no array (CLUSTER SLOTS: 16 MiB and 512 Ki elements).
 *
 * A node whose connection failed or timed out is "down": later calls fail
 * its keys at once (stats.fast_fails) while a probe - a PING on its own
 * connection, at most one per backoff period (backoff_min_ms doubling to
 * backoff_max_ms), never waited for more than a few ms - checks whether it
 * answers again; once it has answered, the node's keys are served again
 * by the next call. A TCP connect that a hung server's kernel completes is
 * not an answer. In cluster mode every failure (lost connection, failed
 * reconnect, timeout) and every MOVED asks for a CLUSTER SLOTS refresh at
 * the next call, from any node that answers, so a replica promoted in place
 * of a dead master is found. Refreshes are rate-limited: 100 ms apart at
 * first, the gap doubling to 1 s (plus up to 25% random) while the map does
 * not change; once a down node has stayed the owner of slots for 10 s, up
 * to 5 s (plus 25%).
 *
 * Key:   <prefix><namespace:16 hex>:<layer>:<block>:<kv_head>:<k|v>
 *        e.g. "sw:00000000000000ab:3:17:2:k". A prefix that contains a
 *        Redis hash tag ("{tenant}:") pins every key of the tier to one
 *        cluster slot.
 * Value: a 64-byte header (magic, format version 2, key fields, generation,
 *        payload length, a 64-bit hash of the key prefix, CRC32C over
 *        header and payload) followed by the payload. A value whose
 *        header, length or CRC does not match, or that was written for
 *        another key or under another prefix (a value copied from another
 *        tenant), is reported as SW_STATUS_CORRUPT (counted, never copied
 *        out).
 *
 * Batches are pipelined: up to max_pipeline commands per node are in
 * flight at once, and the pipelines of the nodes of a cluster overlap.
 * In cluster mode keys go to the node that owns their slot (CRC16 of the
 * key, or of its {hash tag}); MOVED updates the slot map (and a full
 * CLUSTER SLOTS refresh follows) and the key is retried, ASK is retried on
 * the named node behind ASKING (a reply to ASKING other than +OK fails the
 * key); a key is redirected at most twice per call. A standalone handle
 * follows no redirection: MOVED or ASK fails the key (SW_STATUS_IO).
 *
 * Builds without hiredis (SPILLWAY_REDIS=OFF, or AUTO without the library)
 * keep the API: sw_remote_open returns SW_STATUS_UNSUPPORTED.
 *
 * Thread safety: calls on one handle are serialised by a lock inside the
 * handle; different handles are independent. The time bound above is per
 * call, counted from when the call holds the lock: a thread whose call
 * waits behind the calls of other threads on the same handle waits for
 * theirs as well (up to one command_timeout_ms, plus a few ms, per call
 * ahead of it). Threads that each need the bound use a handle each.
 */
#ifndef SPILLWAY_REMOTE_H
#define SPILLWAY_REMOTE_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_remote sw_remote;

typedef struct sw_remote_config {
    uint32_t struct_size;        /* sizeof(sw_remote_config) */
    /* "host:port" of the server (standalone), or a comma-separated list of
     * "host:port" seed nodes (cluster). Hosts are IPv4/IPv6 literals or
     * names. Copied by open. */
    const char *endpoints;
    int32_t cluster;             /* 1 = Redis Cluster (slot routing), 0 = one
                                  * standalone server (default) */
    const char *prefix;          /* prepended to every key; default "sw:";
                                  * at most 128 bytes; copied */
    const char *user;            /* ACL user (AUTH user password); NULL or ""
                                  * = the default user */
    const char *password;        /* AUTH password; NULL = no AUTH */
    int32_t connect_timeout_ms;  /* TCP connect + AUTH; default 500 */
    int32_t command_timeout_ms;  /* bound on a whole batch call: connects,
                                  * AUTH, writes, reads and redirections
                                  * (at most 3 passes, one that only
                                  * re-opened a connection after a refused
                                  * value not counted; at most two
                                  * redirections per key) share one
                                  * deadline; default 1000 */
    int32_t max_pipeline;        /* commands in flight per node; default 64 */
    int32_t backoff_min_ms;      /* first delay before a down node is probed;
                                  * default 10 */
    int32_t backoff_max_ms;      /* cap of the doubling delay (also the gap
                                  * between probes of a node that stays
                                  * down); default 1000 */
    uint32_t max_value_bytes;    /* largest payload put or got (at most
                                  * 1 GiB); a GET reply announcing a longer
                                  * value is refused unread; default 64 MiB */
} sw_remote_config;

/* Fills the defaults documented above; endpoints = NULL. */
SW_API void sw_remote_config_init(sw_remote_config *c);

/*
 * Connects to the server (standalone: the endpoint; cluster: the first seed
 * that answers CLUSTER SLOTS, then every node that owns slots lazily),
 * authenticates and checks that the server answers (PING / CLUSTER SLOTS).
 * Returns SW_OK; SW_STATUS_INVALID (null argument, bad struct_size, a bad
 * endpoint list, prefix too long, non-positive timeouts, the server refused
 * AUTH or requires it: its message, e.g. "WRONGPASS ..." or "NOAUTH ...", is
 * in the detail; cluster mode against a server without cluster support);
 * SW_STATUS_IO (no endpoint reachable within the connect timeout; detail
 * names the last one and the error); SW_STATUS_UNSUPPORTED (a build without
 * hiredis); SW_STATUS_NO_MEMORY. On failure *out is NULL.
 * The handle is owned by the caller until sw_remote_close().
 */
SW_API sw_status sw_remote_open(const sw_remote_config *c, sw_remote **out);

/* Closes the connections and frees the handle. NULL is a no-op. */
SW_API void sw_remote_close(sw_remote *r);

/*
 * Stores n stripes: key i gets lengths[i] bytes (0..max_value_bytes) from
 * srcs[i] (not retained) with generation generations[i] (optional array;
 * NULL = 0), replacing any earlier value. Pipelined SETs.
 * Per key: statuses[i] (required) is SW_OK, SW_STATUS_INVALID (bad key,
 * NULL src with length > 0, too long), or SW_STATUS_IO (the node is down,
 * timed out, refused the write - e.g. OOM; counted in stats.errors).
 * Returns SW_OK when every key is SW_OK, else the status of the first key
 * that is not; SW_STATUS_INVALID (null handle/keys/srcs/lengths/statuses)
 * is returned without sending anything.
 */
SW_API sw_status sw_remote_put_batch(sw_remote *r, size_t n, const sw_store_key *keys,
                                     const void *const *srcs, const size_t *lengths,
                                     const uint64_t *generations, sw_status *statuses);

/*
 * Fetches n stripes: key i into dst[i], which has room for dst_bytes bytes.
 * Pipelined GETs. Per key: statuses[i] (required) is SW_OK (a hit),
 * SW_STATUS_NOT_FOUND (no value), SW_STATUS_CORRUPT (a value whose header,
 * length or CRC32C does not match, or that was written for another key or
 * under another key prefix: nothing copied; counted in stats.corruptions,
 * the latter also in stats.misplaced), SW_STATUS_IO (node down or not yet
 * answering its probe, timeout, error reply; counted in stats.errors),
 * SW_STATUS_INVALID (bad key, NULL dst[i], a value longer than dst_bytes
 * or max_value_bytes: refused from its length, its bytes never buffered -
 * drained up to 64 MiB, past that the connection is re-opened; counted in
 * stats.oversized; the node's other keys are still served, in the same
 * call).
 * NOT_FOUND, CORRUPT and IO all count as misses.
 * lengths[i] and generations[i] (optional) receive the stripe's length and
 * generation (0 when not OK). dst[i] is untouched unless statuses[i] is OK.
 * Returns SW_OK when every key is SW_OK, else the status of the first key
 * that is not; SW_STATUS_INVALID (null handle/keys/dst/statuses) without
 * sending anything.
 */
SW_API sw_status sw_remote_get_batch(sw_remote *r, size_t n, const sw_store_key *keys,
                                     void *const *dst, size_t dst_bytes, size_t *lengths,
                                     uint64_t *generations, sw_status *statuses);

/*
 * Deletes the value of `key`. Returns SW_OK, SW_STATUS_NOT_FOUND (there was
 * none), SW_STATUS_INVALID (null or bad key), SW_STATUS_IO.
 */
SW_API sw_status sw_remote_delete(sw_remote *r, const sw_store_key *key);

typedef struct sw_remote_stats {
    uint32_t struct_size;        /* sizeof(sw_remote_stats), set by the caller */
    int32_t cluster;             /* 1 in cluster mode */
    uint64_t nodes;              /* nodes known (standalone: 1) */
    uint64_t nodes_connected;
    uint64_t gets;               /* keys asked for */
    uint64_t hits;               /* keys returned (SW_OK) */
    uint64_t misses;             /* not_found + corruptions + errors of gets */
    uint64_t not_found;
    uint64_t corruptions;        /* values that failed the header/CRC check */
    uint64_t errors;             /* keys failed by I/O: down, timeout, error
                                  * reply (gets, puts and deletes) */
    uint64_t puts;               /* keys stored (SW_OK) */
    uint64_t deletes;
    uint64_t bytes_read;         /* payload bytes of hits */
    uint64_t bytes_written;      /* payload bytes of successful puts */
    uint64_t reconnects;         /* connections re-established after a loss */
    uint64_t connect_failures;   /* connection attempts and probes that
                                  * failed (refused, reset, closed, or a
                                  * probe not answered within its life) */
    uint64_t timeouts;           /* batch passes that hit the command timeout */
    uint64_t moved;              /* MOVED redirections followed */
    uint64_t ask;                /* ASK redirections followed */
    uint64_t topology_refreshes; /* CLUSTER SLOTS fetched */
    /* latency of batch calls, from a log-scale histogram (upper bound of
     * the bucket, ~9% resolution), in microseconds; 0 when none */
    uint64_t get_calls, get_p50_us, get_p99_us, get_max_us;
    uint64_t put_calls, put_p50_us, put_p99_us, put_max_us;
    /* appended (older callers pass a smaller struct_size) */
    uint64_t misplaced;          /* of corruptions: intact values written for
                                  * another key or under another key prefix */
    uint64_t oversized;          /* GET replies announcing more bytes than
                                  * dst_bytes / max_value_bytes: refused,
                                  * drained unbuffered (or, past 64 MiB,
                                  * the connection re-opened) */
    uint64_t probes;             /* PING probes sent to nodes that were down */
    uint64_t fast_fails;         /* keys failed at once: their node was down
                                  * or not yet answering its probe */
} sw_remote_stats;

/* Fills a snapshot of the counters; a smaller, older struct receives the
 * prefix it has room for. Returns SW_OK or SW_STATUS_INVALID (null,
 * struct_size < 16). */
SW_API sw_status sw_remote_get_stats(sw_remote *r, sw_remote_stats *st);

/* 1 when this build has the remote tier (hiredis), 0 otherwise. */
SW_API int32_t sw_remote_available(void);

#ifdef __cplusplus
}
#endif
#endif
