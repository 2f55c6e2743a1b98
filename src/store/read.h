/* The store's read path: lookups, the plan of merged requests and the
 * per-extent verification (read.c), shared by the synchronous reads
 * (read_sync.c) and the read tickets (read_async.c). Every call here runs with s->lock held. */
#ifndef SW_STORE_READ_H
#define SW_STORE_READ_H

#include "store/store_internal.h"

/* One stripe to read from the file: its slot and the generation the index
 * held at lookup (the extent must still carry it), the key's index in the
 * caller's arrays. */
typedef struct sw_read_item {
    uint32_t slot;
    uint32_t idx;
    uint64_t gen;
} sw_read_item;

/* Where a stripe goes: memcpy to host memory, or a merged cudaMemcpyAsync. */
typedef struct sw_read_sink {
    int device;
    void *stream;
    void *const *dst;
    /* pending device copy */
    const char *p_src;
    char *p_dst;
    size_t p_len;
    sw_status err;
} sw_read_sink;

/* Ends a batch: the bounce buffer may be reused only after device copies
 * out of it completed. */
void sw_read_sink_barrier(sw_read_sink *k);

typedef struct sw_read_ctx {
    sw_store *s;
    size_t dst_bytes;
    size_t *lengths;        /* optional */
    uint64_t *generations;  /* optional */
    sw_status *statuses;
    sw_read_sink *out;
    /* payload bytes this read delivered per tier (a shared store's own
     * stats count every caller's) */
    uint64_t host_bytes, file_bytes;
} sw_read_ctx;

/* One merged request group: the run's header page(s) and a slot range,
 * read as [header | slots] when the range starts close to the run's start,
 * else as a header read plus the slots; the slots may be cut into several
 * requests (the tuning's read_chunk_bytes / ticket_chunk_bytes). */
typedef struct sw_read_group {
    size_t first, last;      /* item range */
    uint32_t run, p0, p1;    /* slot positions [p0, p1] */
    int split;               /* header read separately */
    size_t hdr_off, pay_off; /* offsets of the header area / slot p0 in bounce */
    int hdr_done, hdr_ok;
} sw_read_group;

/* A piece of a group: the items whose payload it holds (first > last:
 * none), whether it holds the group's header area, and the device request
 * (op) that reads it. Pieces that are adjacent both in the file and in the
 * bounce buffer -- the whole runs of consecutive runs, [header | slots] after
 * [header | slots] -- share one request (up to the tuning's
 * read_merge_bytes, only when ranges are not cut), so the ops of a batch are
 * at most as many as its pieces, and the pieces of one op are consecutive
 * (op is non-decreasing). */
typedef struct sw_read_req {
    uint32_t group;
    uint8_t has_hdr, done, handled;
    uint32_t op;
    size_t first, last;
} sw_read_req;

/* One planned batch; its requests' buffers lie in [bounce, bounce + used).
 * poll (optional): called every few extents while the batch's stripes are
 * checked and copied (the read tickets take completions and submit queued
 * requests there). */
typedef struct sw_read_batch {
    sw_read_ctx *c;
    sw_read_item *items;
    sw_read_group *gs;
    sw_read_req *rq;
    sw_io_op *ops;
    char *bounce;
    size_t ng, nrq, nops, used; /* groups, pieces (rq), device requests (ops) */
    void (*poll)(void *ctx);
    void *poll_ctx;
} sw_read_batch;

/* Sets every key's status (NOT_FOUND until delivered; INVALID for a bad
 * key, a NULL destination or a stripe over dst_bytes), delivers host-tier
 * hits through c->out, touches the LRU, and lists the stripes to read from
 * the file in items (n entries; hs: n hashes of scratch). Returns their
 * number, sorted by placement. */
size_t sw_store_read_lookup(sw_read_ctx *c, size_t n, const sw_store_key *keys,
                            sw_read_item *items, uint64_t *hs);

/* Plans one batch from items[i..n): groups and pieces that fit in
 * bounce_cap bytes from `bounce` and in ops_cap pieces (so also ops_cap
 * requests); `ticket` selects the read tickets' cut (the tuning's
 * ticket_chunk_bytes instead of read_chunk_bytes). Fills b (gs, rq, ops must have room
 * for ops_cap entries) and returns the index after the batch's last item;
 * b->ng == 0 when not even the first group fits. */
size_t sw_store_read_plan(sw_store *s, sw_read_item *items, size_t i, size_t n, char *bounce,
                          size_t bounce_cap, size_t ops_cap, int ticket, sw_read_batch *b);

/* Completion of request (op) o of batch ctx (a sw_read_batch): the
 * stripes of its pieces are verified and delivered (or marked IO/CORRUPT)
 * once their group's header is in. */
void sw_store_read_done(void *ctx, size_t o);

/* Reads items[0..n) synchronously in batches through s->bounce / s->ops
 * (nothing else may be in flight). */
sw_status sw_store_read_file(sw_read_ctx *c, sw_read_item *items, size_t n);

/* The call's status from the per-key ones (the first that is not OK). */
/* s->lock held: the detail names a key that cannot be proven current. */
sw_status sw_store_read_summary(sw_store *s, const sw_store_key *keys, size_t n,
                                size_t dst_bytes, const sw_status *statuses);

#endif
