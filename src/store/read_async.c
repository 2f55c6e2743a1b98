/* Read tickets: sw_store_read_submit / sw_store_read_wait.
 *
 * A ticket is one batched read (typically one tile) whose file I/O stays in
 * flight after submit returns, so that a caller can keep several tiles'
 * reads queued while earlier ones are checked and copied. Submit looks the
 * keys up and plans the requests; the ticket then waits in a queue until
 * the device has room: at most the tuning's read_inflight_bytes of ticket
 * requests are on the device at once (store_internal.h), the rest are
 * submitted, in order, as completions come in -- when any call of the
 * handle takes completions, and every few extents while a ticket's extents
 * are checked and copied. A submitted ticket holds a region of the bounce
 * buffer until it has been processed; the regions go round a window at the
 * start of the buffer (region_alloc).
 * A completion only records its result; a ticket's extents are checked and
 * copied into the caller's buffers by its own wait (or earlier: by a drain,
 * or when a queued ticket needs its bounce region).
 *
 * Ordering with everything else: anything that uses the ring or the bounce
 * buffer synchronously, or changes the index (write, delete, eviction,
 * sw_store_read, verify), first completes every ticket's I/O, the queued
 * ones included (sw_store_reads_drain through sw_store_enter). So a ticket
 * always reads the extents its lookup found, with the generation it found:
 * an overwrite or delete between submit and wait returns the version of the
 * submit (its generation tells which), never a torn or foreign extent, and a
 * freed extent is never reused while a read of it is in flight.
 *
 * Without io_uring (the pread fallback), or for a read too large for the
 * bounce buffer or the queue, submit does the read synchronously; wait then
 * only hands over the result. When the ring breaks, the queued tickets are
 * read synchronously too (queue_sync). */
#include "store/host_lease.h"
#include "store/read.h"
#include "store/remote_tier.h"

#include "spillway_store_profile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SW_READ_TICKETS 64u /* outstanding tickets per handle (a power of 2) */

/* QUEUED: planned, waiting for room on the device (no bounce region yet);
 * INFLIGHT: requests in flight; ARRIVED: every request completed, the
 * extents not yet checked nor copied; DONE: results final, region freed. */
enum { T_FREE = 0, T_QUEUED, T_INFLIGHT, T_ARRIVED, T_DONE, T_REMOTE };

typedef struct ticket {
    uint64_t id;        /* (sequence << 6) | index; 0 when free */
    uint8_t state;
    uint8_t abandoned;  /* store closing: completions deliver nothing */
    uint8_t has_region; /* holds a bounce region (in live[]) */
    size_t n, cap;      /* keys; capacity of the per-key arrays */
    size_t m;           /* stripes read from the file */
    size_t dst_bytes;
    size_t pending;     /* requests in flight */
    size_t region_off, region_len;
    sw_status err;      /* a failure of the whole ticket (memory) */
    /* per key (one allocation of cap entries each) */
    void *mem;
    sw_store_key *keys;
    void **dst;
    size_t *lengths;
    uint64_t *gens;
    sw_status *statuses;
    sw_read_item *items;
    uint64_t *hs;
    /* plan: queue_depth entries each, allocated on first use */
    sw_read_group *gs;
    sw_read_req *rq;
    sw_io_op *ops;
    uint8_t *arrived;   /* per request: its completion came */
    sw_read_sink out;
    sw_read_ctx c;
    sw_read_batch b;
} ticket;

struct sw_read_async {
    ticket t[SW_READ_TICKETS];
    uint64_t seq;
    size_t inflight_ops, inflight_bytes;
    size_t cap_bytes;   /* device bytes in flight at most (tune.read_inflight_bytes); 0 = any */
    uint32_t live[SW_READ_TICKETS]; /* tickets holding bounce regions, by offset */
    size_t live_n;
    size_t window;      /* regions of small tickets lie in [0, window) (region_alloc) */
    size_t rover;       /* the next region is placed from here (next fit) */
    uint32_t queue[SW_READ_TICKETS]; /* QUEUED tickets, in submit order */
    size_t queue_head, queue_n;
    int processing;     /* inside ticket_process: pump does not process other tickets */
    /* profile (sw_store_read_profile_get): every change of the bytes on the
     * device, the queue or the thread's state first accounts the time since
     * the previous change (prof_tick); a clock read per request and per
     * ticket, next to microseconds of I/O each */
    struct {
        uint64_t t_last, t_reset, t_look;
        int waiting;
        sw_store_read_profile p;
        double byte_ns;
    } pf;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Accounts [t_last, now) to the state before a change; returns now. */
static uint64_t prof_tick(struct sw_read_async *ra)
{
    uint64_t t = now_ns();
    uint64_t dt = t > ra->pf.t_last ? t - ra->pf.t_last : 0;
    sw_store_read_profile *p = &ra->pf.p;
    ra->pf.t_last = t;
    ra->pf.byte_ns += (double)ra->inflight_bytes * (double)dt;
    if (ra->inflight_bytes)
        p->busy_ns += dt;
    if (!ra->cap_bytes || ra->inflight_bytes < ra->cap_bytes) {
        p->below_cap_ns += dt;
        if (ra->queue_n)
            p->below_cap_queued_ns += dt;
        if (ra->processing)
            p->below_cap_processing_ns += dt;
        if (ra->pf.waiting)
            p->below_cap_waiting_ns += dt;
    }
    if (ra->processing)
        p->process_ns += dt;
    if (ra->pf.waiting)
        p->wait_ns += dt;
    return t;
}

static void prof_reset(struct sw_read_async *ra)
{
    uint64_t t = now_ns();
    memset(&ra->pf.p, 0, sizeof ra->pf.p);
    ra->pf.byte_ns = 0;
    ra->pf.t_last = ra->pf.t_reset = ra->pf.t_look = t;
}

static void prof_request(struct sw_read_async *ra, size_t len)
{
    sw_store_read_profile *p = &ra->pf.p;
    unsigned b = 0;
    while (b + 1 < SW_STORE_PROFILE_SIZES && len > ((size_t)4096 << b))
        b++;
    p->sizes[b]++;
    p->requests++;
    p->request_bytes += len;
    if (ra->inflight_bytes > p->peak_bytes)
        p->peak_bytes = ra->inflight_bytes;
}

static uint64_t tag_of(uint32_t t, size_t o) { return ((uint64_t)t << 16) | o; }

/* ------------------------------------------------------ bounce regions -- */
/* Next fit (after the newest region, wrapping to the start) inside a window
 * of the bounce buffer's first `window` bytes (tune.read_window_bytes: by default
 * 2 x the in-flight cap; a ticket larger than half the window may use the
 * whole buffer). On the
 * 2-core VM's virtio disk the footprint of the DMA buffers matters: the same
 * 1 MiB reads went at 3.2 GB/s into 4 buffers taken in turn, 2.7 into 16 and
 * 30; the store's tickets over all 32 MiB of the bounce buffer (a ring, as
 * before) read at ~80% of raw-seq, in a ring of 8 MiB at 93.7% and 95.5%
 * (two 1 GiB bench runs). Always
 * reusing the lowest free offset (first fit) was as fast at first but
 * fell to ~1.6 GB/s for several passes at a time (docs/perf/store.md, v10).
 * At most SW_READ_TICKETS regions: linear scans. */
static int region_alloc(sw_store *s, size_t need, size_t *off)
{
    struct sw_read_async *ra = s->ra;
    size_t lim = s->bounce_bytes;
    if (ra->window && ra->window < lim && need <= ra->window / 2)
        lim = ra->window;
    for (int pass = 0; pass < 2; pass++) {
        size_t at = pass ? 0 : ra->rover;
        for (size_t i = 0; i < ra->live_n; i++) {
            const ticket *t = &ra->t[ra->live[i]];
            size_t end = t->region_off + t->region_len;
            if (end <= at)
                continue;
            if (t->region_off >= at && t->region_off - at >= need)
                break;
            at = end;
        }
        if (at <= lim && lim - at >= need) {
            *off = at;
            ra->rover = at + need;
            return 1;
        }
    }
    return 0;
}

static void region_push(sw_store *s, uint32_t ti)
{
    struct sw_read_async *ra = s->ra;
    size_t i = ra->live_n;
    while (i > 0 && ra->t[ra->live[i - 1]].region_off > ra->t[ti].region_off) {
        ra->live[i] = ra->live[i - 1];
        i--;
    }
    ra->live[i] = ti;
    ra->live_n++;
    ra->t[ti].has_region = 1;
}

static void region_release(sw_store *s, ticket *t)
{
    struct sw_read_async *ra = s->ra;
    if (!t->has_region)
        return;
    size_t i = 0;
    while (i < ra->live_n && &ra->t[ra->live[i]] != t)
        i++;
    for (; i + 1 < ra->live_n; i++)
        ra->live[i] = ra->live[i + 1];
    ra->live_n--;
    t->has_region = 0;
}

/* The ticket that arrived first among those holding a region, or NULL. */
static ticket *oldest_arrived(sw_store *s)
{
    struct sw_read_async *ra = s->ra;
    ticket *best = NULL;
    for (size_t i = 0; i < ra->live_n; i++) {
        ticket *t = &ra->t[ra->live[i]];
        if (t->state == T_ARRIVED && (!best || t->id < best->id))
            best = t;
    }
    return best;
}

/* ---------------------------------------------------------- completion -- */
/* A request's completion only records its result: the check and copy of
 * a ticket's extents wait for ticket_process (its wait, a drain, or a submit
 * that needs its bounce region). Completions come in bursts on a virtio
 * disk (every request of several tiles in one interrupt); checking them all
 * before returning to the caller left the queue empty for that long (the
 * first version: 2.1 GB/s where the bare ring does 2.7, docs/perf/store.md). */
static void op_arrived(sw_store *s, ticket *t, size_t o)
{
    prof_tick(s->ra);
    s->ra->inflight_ops--;
    s->ra->inflight_bytes -= t->b.ops[o].len;
    t->arrived[o] = 1;
    if (--t->pending == 0)
        t->state = T_ARRIVED;
}

/* Checks and copies out an ARRIVED ticket's extents, frees its region.
 * Meanwhile (b.poll, every few extents) completions are taken and queued
 * tickets submitted, so that the device is not left short of requests for
 * the length of a tile's check and copy. */
static void ticket_process(sw_store *s, ticket *t)
{
    struct sw_read_async *ra = s->ra;
    int was = ra->processing;
    prof_tick(ra);
    ra->processing = 1;
    if (!t->abandoned)
        for (size_t o = 0; o < t->b.nops; o++)
            sw_store_read_done(&t->b, o);
    prof_tick(ra);
    ra->processing = was;
    region_release(s, t);
    t->state = T_DONE;
}

static void on_cqe(void *ctx, uint64_t tag, int32_t res)
{
    sw_store *s = (sw_store *)ctx;
    uint64_t ti = tag >> 16;
    size_t o = (size_t)(tag & 0xffff);
    if (ti >= SW_READ_TICKETS)
        return;
    ticket *t = &s->ra->t[ti];
    /* Tags are unique among the requests in flight: a ticket is not reused
     * before its last completion arrived. */
    if (t->state != T_INFLIGHT || o >= t->b.nops || t->arrived[o])
        return;
    t->b.ops[o].res = res;
    sw_io_op_finish(&t->b.ops[o]);
    op_arrived(s, t, o);
}

/* The ring failed (a submit accepted fewer requests, a wait errored): give
 * it up and finish every request still in flight with pread. */
static void ring_broke(sw_store *s)
{
    struct sw_read_async *ra = s->ra;
    sw_io_retire(s->io);
    for (uint32_t i = 0; i < SW_READ_TICKETS; i++) {
        ticket *t = &ra->t[i];
        if (t->state != T_INFLIGHT)
            continue;
        for (size_t o = 0; o < t->b.nops && t->state == T_INFLIGHT; o++) {
            if (t->arrived[o])
                continue;
            sw_io_op_sync(&t->b.ops[o]);
            op_arrived(s, t, o);
        }
    }
    ra->inflight_ops = 0;
}

static void pump(sw_store *s);

/* Handles completions; with `wait`, blocks until at least one arrived.
 * Then submits the queued tickets that now fit. */
static void reap(sw_store *s, int wait)
{
    if (!s->ra)
        return;
    struct sw_read_async *ra = s->ra;
    if (ra->inflight_ops) {
        int block = wait != 0;
        if (block) {
            prof_tick(ra);
            ra->pf.waiting = 1;
        }
        uint64_t look = now_ns();
        int r = sw_io_reap(s->io, wait, on_cqe, s);
        if (block) {
            prof_tick(ra);
            ra->pf.waiting = 0;
        } else if (r > 0) {
            ra->pf.p.reaps_found++;
            ra->pf.p.reap_gap_ns += look - ra->pf.t_look;
        }
        ra->pf.t_look = look;
        if (r < 0 || (block && r == 0))
            ring_broke(s);
    }
    pump(s);
}

/* The poll hook of a ticket's processing (sw_read_batch.poll). */
static void poll_hook(void *ctx) { reap((sw_store *)ctx, 0); }

sw_status sw_store_enter(sw_store *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->failed) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_FAILED, "the store handle hit an unrecoverable error before");
    }
    /* Asynchronous reads in flight use the ring and parts of the bounce
     * buffer, and they were planned against the index as it was at their
     * submit: they are completed before anything else runs. */
    sw_store_reads_drain(s);
    return SW_OK;
}

void sw_store_reads_drain(sw_store *s)
{
    struct sw_read_async *ra = s->ra;
    if (!ra)
        return;
    /* Not while a ticket is being processed: pump always makes progress
     * here (nothing in flight: it frees regions and submits the head). */
    while (ra->inflight_ops || ra->queue_n)
        reap(s, ra->inflight_ops != 0);
    for (uint32_t i = 0; i < SW_READ_TICKETS; i++)
        if (ra->t[i].state == T_ARRIVED)
            ticket_process(s, &ra->t[i]);
}

static void ticket_free_mem(ticket *t)
{
    free(t->mem);
    free(t->gs);
    free(t->rq);
    free(t->ops);
    free(t->arrived);
}

void sw_store_reads_close(sw_store *s)
{
    pthread_mutex_lock(&s->lock);
    struct sw_read_async *ra = s->ra;
    if (ra) {
        /* The callers' buffers of tickets never waited for may be gone:
         * their completions are only awaited (the kernel must be done with
         * the bounce buffer before it is freed), nothing is delivered. */
        for (uint32_t i = 0; i < SW_READ_TICKETS; i++)
            ra->t[i].abandoned = 1;
        /* queued tickets were never submitted: nothing to read */
        for (; ra->queue_n; ra->queue_n--, ra->queue_head = (ra->queue_head + 1) % SW_READ_TICKETS)
            ra->t[ra->queue[ra->queue_head]].state = T_DONE;
        sw_store_reads_drain(s);
        for (uint32_t i = 0; i < SW_READ_TICKETS; i++)
            ticket_free_mem(&ra->t[i]);
        free(ra);
        s->ra = NULL;
    }
    pthread_mutex_unlock(&s->lock);
}

/* -------------------------------------------------------------- submit -- */
static sw_status ticket_reserve(sw_store *s, ticket *t, size_t n)
{
    if (!t->gs) {
        size_t q = s->queue_depth;
        t->gs = (sw_read_group *)malloc(sizeof *t->gs * q);
        t->rq = (sw_read_req *)malloc(sizeof *t->rq * q);
        t->ops = (sw_io_op *)malloc(sizeof *t->ops * q);
        t->arrived = (uint8_t *)malloc(q);
        if (!t->gs || !t->rq || !t->ops || !t->arrived)
            return sw_fail(SW_STATUS_NO_MEMORY, "read ticket plan");
    }
    if (n <= t->cap && t->mem)
        return SW_OK;
    size_t c = n < 64 ? 64 : n;
    size_t per = sizeof(sw_store_key) + sizeof(void *) + sizeof(size_t) + sizeof(uint64_t) +
                 sizeof(sw_status) + sizeof(sw_read_item) + sizeof(uint64_t);
    char *p = (char *)malloc(per * c);
    if (!p)
        return sw_fail(SW_STATUS_NO_MEMORY, "read ticket of %zu keys", n);
    free(t->mem);
    t->mem = p;
    t->cap = c;
    /* 8-byte members first, then the 16-byte items and keys (all naturally
     * aligned: malloc's alignment, sizes multiples of 8) */
    t->items = (sw_read_item *)p;
    p += sizeof(sw_read_item) * c;
    t->keys = (sw_store_key *)p;
    p += sizeof(sw_store_key) * c;
    t->dst = (void **)p;
    p += sizeof(void *) * c;
    t->lengths = (size_t *)p;
    p += sizeof(size_t) * c;
    t->gens = (uint64_t *)p;
    p += sizeof(uint64_t) * c;
    t->hs = (uint64_t *)p;
    p += sizeof(uint64_t) * c;
    t->statuses = (sw_status *)p;
    return SW_OK;
}

/* Reads the ticket's stripes with synchronous I/O; a failure of the whole
 * read is the status of every key it left unresolved. */
static void ticket_read_file(ticket *t)
{
    sw_status st = sw_store_read_file(&t->c, t->items, t->m);
    if (st != SW_OK) {
        t->err = st;
        for (size_t k = 0; k < t->m; k++)
            if (t->statuses[t->items[k].idx] == SW_STATUS_NOT_FOUND)
                t->statuses[t->items[k].idx] = st;
    }
    t->state = T_DONE;
}

/* Reads the ticket's stripes synchronously (nothing else in flight). */
static void ticket_read_sync(sw_store *s, ticket *t)
{
    sw_store_reads_drain(s);
    ticket_read_file(t);
}

/* Submits QUEUED ticket ti into the bounce region at off. */
static void ticket_launch(sw_store *s, uint32_t ti, size_t off)
{
    struct sw_read_async *ra = s->ra;
    ticket *t = &ra->t[ti];
    /* The plan was made at the start of the bounce buffer: move it into
     * its region. */
    size_t bytes = 0;
    for (size_t o = 0; o < t->b.nops; o++) {
        t->b.ops[o].buf = (char *)t->b.ops[o].buf + off;
        bytes += t->b.ops[o].len;
    }
    t->b.bounce = s->bounce + off;
    t->region_off = off;
    t->region_len = t->b.used;
    region_push(s, ti);
    t->pending = t->b.nops;
    memset(t->arrived, 0, t->b.nops);
    t->state = T_INFLIGHT;
    prof_tick(ra);
    ra->inflight_ops += t->b.nops;
    ra->inflight_bytes += bytes;
    for (size_t o = 0; o < t->b.nops; o++)
        prof_request(ra, t->b.ops[o].len);
    s->st.read_requests += t->b.ng;
    s->st.read_ios += t->b.nops;
    size_t sub = sw_io_submit(s->io, t->b.ops, t->b.nops, tag_of(ti, 0));
    if (sub < t->b.nops)
        ring_broke(s);
}

/* Without io_uring (the ring broke): every ticket that has arrived is
 * processed (the bounce buffer is then free), the queued ones are read
 * synchronously, in order. */
static void queue_sync(sw_store *s)
{
    struct sw_read_async *ra = s->ra;
    for (uint32_t i = 0; i < SW_READ_TICKETS; i++)
        if (ra->t[i].state == T_ARRIVED)
            ticket_process(s, &ra->t[i]);
    while (ra->queue_n) {
        ticket *t = &ra->t[ra->queue[ra->queue_head]];
        ra->queue_head = (ra->queue_head + 1) % SW_READ_TICKETS;
        ra->queue_n--;
        ticket_read_file(t);
    }
}

/* Submits queued tickets, oldest first, while the device has room (queue
 * depth, tune.read_inflight_bytes) and the bounce buffer a region. A region held
 * by a ticket that has arrived but not been waited for yet is freed by
 * checking and copying that ticket now (work its wait would do anyway),
 * except inside another ticket's processing. With nothing in flight and
 * outside processing this always submits the head. */
static void pump(sw_store *s)
{
    struct sw_read_async *ra = s->ra;
    while (ra->queue_n) {
        if (!sw_io_async(s->io)) {
            if (!ra->processing)
                queue_sync(s);
            return;
        }
        uint32_t ti = ra->queue[ra->queue_head];
        ticket *t = &ra->t[ti];
        if (ra->inflight_ops && (ra->inflight_ops + t->b.nops > s->queue_depth ||
                                 (ra->cap_bytes && ra->inflight_bytes >= ra->cap_bytes)))
            return; /* a completion will pump again */
        size_t off = 0;
        if (!region_alloc(s, t->b.used, &off)) {
            ticket *old = ra->processing ? NULL : oldest_arrived(s);
            if (old) {
                ticket_process(s, old); /* frees its region */
                continue;
            }
            return;
        }
        prof_tick(ra);
        ra->queue_head = (ra->queue_head + 1) % SW_READ_TICKETS;
        ra->queue_n--;
        ticket_launch(s, ti, off);
    }
}

/* Plans the ticket's stripes as one batch and queues it for the device;
 * falls back to a synchronous read when it cannot be one batch. */
static void ticket_start(sw_store *s, uint32_t ti)
{
    struct sw_read_async *ra = s->ra;
    ticket *t = &ra->t[ti];
    if (!sw_io_async(s->io) || s->queue_depth < 2) {
        ticket_read_sync(s, t);
        return;
    }
    memset(&t->b, 0, sizeof t->b);
    t->b.c = &t->c;
    t->b.gs = t->gs;
    t->b.rq = t->rq;
    t->b.ops = t->ops;
    size_t next = sw_store_read_plan(s, t->items, 0, t->m, s->bounce, s->bounce_bytes,
                                     s->queue_depth, 1, &t->b);
    if (t->b.ng == 0 || next != t->m) {
        ticket_read_sync(s, t); /* larger than the bounce buffer or the queue */
        return;
    }
    t->b.poll = poll_hook;
    t->b.poll_ctx = s;
    t->state = T_QUEUED;
    prof_tick(ra);
    ra->queue[(ra->queue_head + ra->queue_n) % SW_READ_TICKETS] = ti;
    ra->queue_n++;
    pump(s);
}

sw_status sw_store_read_submit(sw_store *s, size_t n, const sw_store_key *keys,
                               void *const *dst, size_t dst_bytes, uint64_t *ticket_out)
{
    if (!ticket_out)
        return sw_fail(SW_STATUS_INVALID, "sw_store_read_submit: ticket is NULL");
    *ticket_out = 0;
    if (!s || (n && (!keys || !dst)))
        return sw_fail(SW_STATUS_INVALID, "sw_store_read_submit: null store, keys or dst");
    if (n > 0xfffffffful)
        return sw_fail(SW_STATUS_INVALID, "sw_store_read_submit: %zu keys in one call", n);
    pthread_mutex_lock(&s->lock);
    if (s->failed) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_FAILED, "the store handle hit an unrecoverable error before");
    }
    if (!s->ra) {
        s->ra = (struct sw_read_async *)calloc(1, sizeof *s->ra);
        if (!s->ra) {
            pthread_mutex_unlock(&s->lock);
            return sw_fail(SW_STATUS_NO_MEMORY, "read tickets");
        }
        s->ra->cap_bytes = (size_t)s->tune.read_inflight_bytes;
        s->ra->window = (size_t)s->tune.read_window_bytes;
        prof_reset(s->ra);
    }
    struct sw_read_async *ra = s->ra;
    uint32_t ti = SW_READ_TICKETS;
    for (uint32_t i = 0; i < SW_READ_TICKETS; i++) {
        uint32_t k = (uint32_t)((ra->seq + i) % SW_READ_TICKETS);
        if (ra->t[k].state == T_FREE) {
            ti = k;
            break;
        }
    }
    if (ti == SW_READ_TICKETS) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_FULL, "sw_store_read_submit: %u reads outstanding (the most "
                       "per handle); wait for one first", SW_READ_TICKETS);
    }
    ticket *t = &ra->t[ti];
    sw_status st = ticket_reserve(s, t, n);
    if (st != SW_OK) {
        pthread_mutex_unlock(&s->lock);
        return st;
    }
    ra->seq++;
    t->id = (ra->seq << 6) | ti;
    t->n = n;
    t->dst_bytes = dst_bytes;
    t->err = SW_OK;
    t->abandoned = 0;
    t->pending = 0;
    if (n) {
        memcpy(t->keys, keys, sizeof *keys * n);
        memcpy(t->dst, dst, sizeof *dst * n);
    }
    t->out = (sw_read_sink){0, NULL, t->dst, NULL, NULL, 0, SW_OK};
    t->c = (sw_read_ctx){s, dst_bytes, t->lengths, t->gens, t->statuses, &t->out, 0, 0};
    t->m = sw_store_read_lookup(&t->c, n, t->keys, t->items, t->hs);
    if (t->m)
        ticket_start(s, ti);
    else
        t->state = T_DONE;
    /* Take the completions that are there (bookkeeping only). */
    reap(s, 0);
    *ticket_out = t->id;
    pthread_mutex_unlock(&s->lock);
    return SW_OK;
}

/* ---------------------------------------------------------------- wait -- */
sw_status sw_store_read_wait(sw_store *s, uint64_t ticket_id, size_t n, size_t *lengths,
                             uint64_t *generations, sw_status *statuses)
{
    return sw_store_read_wait_tiers(s, ticket_id, n, lengths, generations, statuses, NULL);
}

sw_status sw_store_read_wait_tiers(sw_store *s, uint64_t ticket_id, size_t n, size_t *lengths,
                                   uint64_t *generations, sw_status *statuses,
                                   uint64_t tier_bytes[2])
{
    if (tier_bytes)
        tier_bytes[0] = tier_bytes[1] = 0;
    if (!s || !statuses)
        return sw_fail(SW_STATUS_INVALID, "sw_store_read_wait: null store or statuses");
    pthread_mutex_lock(&s->lock);
    struct sw_read_async *ra = s->ra;
    uint32_t ti = (uint32_t)(ticket_id % SW_READ_TICKETS);
    ticket *t = ra ? &ra->t[ti] : NULL;
    if (!t || ticket_id == 0 || t->id != ticket_id || t->state == T_FREE ||
        t->state == T_REMOTE) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_INVALID, "sw_store_read_wait: %llu is not an outstanding "
                       "ticket of this store (already waited for, or never handed out)",
                       (unsigned long long)ticket_id);
    }
    if (n != t->n) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_INVALID, "sw_store_read_wait: n = %zu but the ticket has %zu "
                       "keys (the ticket stays outstanding)", n, t->n);
    }
    while (t->state == T_QUEUED || t->state == T_INFLIGHT)
        reap(s, ra->inflight_ops != 0); /* nothing in flight: pump submits the head */
    if (t->state == T_ARRIVED) {
        ticket_process(s, t);
        /* its region is free: a ticket queued for room goes now, not at the
         * caller's next store call */
        if (ra->queue_n)
            pump(s);
    }
    memcpy(statuses, t->statuses, sizeof *statuses * n);
    if (lengths)
        memcpy(lengths, t->lengths, sizeof *lengths * n);
    if (generations)
        memcpy(generations, t->gens, sizeof *generations * n);
    if (tier_bytes) {
        tier_bytes[0] = t->c.host_bytes;
        tier_bytes[1] = t->c.file_bytes;
    }
    sw_status st = t->err != SW_OK ? t->err
                                   : sw_store_read_summary(s, t->keys, n, t->dst_bytes, statuses);
    if (s->rt && (st == SW_STATUS_NOT_FOUND || st == SW_STATUS_CORRUPT || st == SW_STATUS_IO ||
                  st == SW_STATUS_INVALID)) {
        /* Local misses from the remote tier, as sw_store_read does, without
         * the lock; the ticket (its keys and dst) stays reserved meanwhile. */
        t->state = T_REMOTE;
        pthread_mutex_unlock(&s->lock);
        sw_status rst = sw_remote_tier_fetch(s->rt, n, t->keys, t->dst, 0, NULL, t->dst_bytes,
                                             lengths, generations, statuses);
        pthread_mutex_lock(&s->lock);
        /* summary under the lock: it names an unprovable key (sw_store_read) */
        st = rst != SW_OK && rst != SW_STATUS_NO_MEMORY
                 ? rst
                 : sw_store_read_summary(s, t->keys, n, t->dst_bytes, statuses);
    }
    t->state = T_FREE;
    t->id = 0;
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* ------------------------------------------------------------- profile -- */
sw_status sw_store_read_profile_get(sw_store *s, sw_store_read_profile *p, int reset)
{
    if (!s || !p || p->struct_size < sizeof *p)
        return sw_fail(SW_STATUS_INVALID, "sw_store_read_profile_get: null argument or "
                       "struct_size < %zu", sizeof *p);
    pthread_mutex_lock(&s->lock);
    struct sw_read_async *ra = s->ra;
    sw_store_read_profile out;
    memset(&out, 0, sizeof out);
    if (ra) {
        uint64_t t = prof_tick(ra);
        out = ra->pf.p;
        out.elapsed_ns = t - ra->pf.t_reset;
        out.mean_bytes = out.elapsed_ns ? ra->pf.byte_ns / (double)out.elapsed_ns : 0;
        out.cap_bytes = ra->cap_bytes;
        if (reset)
            prof_reset(ra);
    } else {
        out.cap_bytes = (uint64_t)s->tune.read_inflight_bytes;
    }
    out.struct_size = p->struct_size < sizeof out ? p->struct_size : (uint32_t)sizeof out;
    *p = out;
    pthread_mutex_unlock(&s->lock);
    return SW_OK;
}
