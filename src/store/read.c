/* The read path that the synchronous reads (read_sync.c) and the read
 * tickets (read_async.c) share (read.h): batched lookups, coalesced request
 * plans, per-extent verification and delivery. */
#include "store/read.h"

#include "core/sw_cuda.h"

#include <stdlib.h>
#include <string.h>

static int item_cmp(const void *a, const void *b)
{
    const sw_read_item *x = (const sw_read_item *)a, *y = (const sw_read_item *)b;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void sink_flush(sw_read_sink *k)
{
    if (k->p_len && k->err == SW_OK)
        k->err = sw_cuda_memcpy_h2d_async(k->p_dst, k->p_src, k->p_len, k->stream);
    k->p_len = 0;
}

static void sink_put(sw_read_sink *k, uint32_t idx, const char *src, size_t len)
{
    if (!k->device) {
        memcpy(k->dst[idx], src, len);
        return;
    }
    char *d = (char *)k->dst[idx];
    if (k->p_len && k->p_src + k->p_len == src && k->p_dst + k->p_len == d) {
        k->p_len += len; /* contiguous on both sides: one copy */
        return;
    }
    sink_flush(k);
    k->p_src = src;
    k->p_dst = d;
    k->p_len = len;
}

void sw_read_sink_barrier(sw_read_sink *k)
{
    if (!k->device)
        return;
    sink_flush(k);
    if (k->err == SW_OK)
        k->err = sw_cuda_stream_sync(k->stream);
}

/* src NULL: the bytes are already in dst[idx] (verify_deliver's fused
 * check and copy). */
static void deliver(sw_read_ctx *c, uint32_t idx, uint32_t slot, const char *src, int from_host)
{
    sw_store *s = c->s;
    const sw_slot *e = &s->slots[slot];
    if (src)
        sink_put(c->out, idx, src, e->length);
    c->statuses[idx] = SW_OK;
    if (c->lengths)
        c->lengths[idx] = e->length;
    if (c->generations)
        c->generations[idx] = e->generation;
    if (from_host) {
        s->st.host_hits++;
        s->st.host_bytes_read += e->length;
        c->host_bytes += e->length;
    } else {
        s->st.file_hits++;
        s->st.file_bytes_read += e->length;
        c->file_bytes += e->length;
    }
}

/* Verifies extent `slot` read into the bounce buffer (header at hdr, payload
 * at pay) against the index; delivers it or marks the key corrupt. The slot
 * must still hold the generation of the lookup: the index cannot change
 * while a read is in flight (sw_store_enter drains the tickets first), so a
 * mismatch here is a bug, reported as CORRUPT rather than bytes.
 *
 * Into host memory the payload's CRC32C is computed while it is copied
 * (sw_crc32c_copy: the DMA'd bounce bytes are read from memory once, not
 * once by the CRC and again by a memcpy); when the CRC then does not match,
 * the copy is overwritten with zeros, so dst never holds a byte that failed
 * its check. A header that fails is found before any byte is copied. Device
 * destinations are checked first and copied after (cudaMemcpyAsync). */
static void verify_deliver(sw_read_ctx *c, const sw_read_item *it, const char *hdr,
                           const char *pay)
{
    sw_store *s = c->s;
    const sw_slot *e = &s->slots[it->slot];
    sw_store_extent_hdr h;
    int ok = e->used && e->generation == it->gen &&
             sw_store_decode_extent_hdr((const uint8_t *)hdr, SW_STORE_HDR_BYTES, &h) == SW_OK &&
             h.state == SW_STORE_EXTENT_LIVE && sw_store_key_eq(&h.key, &e->key) &&
             h.generation == e->generation && h.seq == e->seq && h.length == e->length &&
             h.payload_crc == e->crc && h.slot == it->slot;
    const char *src = pay;
    if (ok && !c->out->device) {
        void *d = c->out->dst[it->idx];
        ok = sw_crc32c_copy(d, pay, h.length) == h.payload_crc;
        if (!ok)
            memset(d, 0, h.length);
        src = NULL; /* already in dst */
    } else if (ok) {
        ok = sw_crc32c(pay, h.length) == h.payload_crc;
    }
    if (!ok) {
        s->st.corruptions++;
        c->statuses[it->idx] = SW_STATUS_CORRUPT;
        return;
    }
    deliver(c, it->idx, it->slot, src, 0);
    sw_store_host_put(s, it->slot, pay); /* only verified bytes enter the host tier */
}

static void handle_req(sw_read_batch *b, size_t o)
{
    sw_read_ctx *c = b->c;
    sw_store *s = c->s;
    sw_read_req *q = &b->rq[o];
    const sw_read_group *g = &b->gs[q->group];
    const uint64_t sb = s->g.slot_bytes;
    const uint32_t R = s->g.run_blocks;
    const sw_io_op *op = &b->ops[q->op];
    int ok = g->hdr_ok && op->res == (int64_t)op->len;
    q->handled = 1;
    for (size_t t = q->first; t <= q->last && q->first <= q->last; t++) {
        if (!ok) {
            c->statuses[b->items[t].idx] = SW_STATUS_IO;
            continue;
        }
        uint32_t p = b->items[t].slot % R;
        const char *hdr = b->bounce + g->hdr_off + (size_t)p * SW_STORE_HDR_BYTES;
        const char *pay = b->bounce + g->pay_off + (size_t)(p - g->p0) * sb;
        verify_deliver(c, &b->items[t], hdr, pay);
        if (b->poll && (t - q->first) % 8 == 7)
            b->poll(b->poll_ctx);
    }
}

static void read_io_error(sw_store *s, const sw_io_op *op)
{
    s->st.io_errors++;
    if (op->res < 0)
        (void)sw_store_errno(s, (int)-op->res, "read extents");
    else
        (void)sw_fail(SW_STATUS_IO, "read extents: short transfer (%lld of %zu bytes at offset "
                      "%llu)", (long long)op->res, op->len, (unsigned long long)op->off);
}

/* Piece k of the batch arrived: its stripes are checked and copied out
 * (while the batch's other requests are still in flight). A payload piece
 * waits for its group's header piece. */
static void piece_done(sw_read_batch *b, size_t k)
{
    sw_read_req *q = &b->rq[k];
    sw_read_group *g = &b->gs[q->group];
    const sw_io_op *op = &b->ops[q->op];
    q->done = 1;
    if (q->has_hdr) {
        g->hdr_done = 1;
        g->hdr_ok = op->res == (int64_t)op->len;
        for (size_t j = 0; j < b->nrq; j++)
            if (b->rq[j].group == q->group && b->rq[j].done && !b->rq[j].handled)
                handle_req(b, j);
    } else if (g->hdr_done) {
        handle_req(b, k);
    }
}

/* Completion of request o: the pieces it carries, in order (a merged
 * request holds several groups' pieces; each group's header piece comes
 * before its payload pieces). */
void sw_store_read_done(void *ctx, size_t o)
{
    sw_read_batch *b = (sw_read_batch *)ctx;
    sw_store *s = b->c->s;
    if (b->ops[o].res != (int64_t)b->ops[o].len)
        read_io_error(s, &b->ops[o]);
    /* first piece of op o (rq[].op is non-decreasing) */
    size_t lo = 0, hi = b->nrq;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->rq[mid].op < o)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < b->nrq && b->rq[k].op == o; k++)
        piece_done(b, k);
}

size_t sw_store_read_plan(sw_store *s, sw_read_item *items, size_t i, size_t n, char *bounce,
                          size_t bounce_cap, size_t ops_cap, int ticket, sw_read_batch *b)
{
    const uint64_t sb = s->g.slot_bytes, hb = s->g.run_header_bytes;
    const uint32_t R = s->g.run_blocks;
    /* The tuning (sw_store_tuning, decided at open): gap extents worth
     * reading through rather than splitting a request, the cut, the merge
     * of uncut ranges. */
    const uint64_t gap = (uint64_t)s->tune.read_gap_bytes;
    const uint32_t max_gap = gap ? (uint32_t)(gap / sb) + 1 : 1;
    const size_t chunk =
        (size_t)(ticket ? s->tune.ticket_chunk_bytes : s->tune.read_chunk_bytes);
    const uint32_t chunk_slots = chunk ? (uint32_t)(chunk / sb) : 0;
    const size_t merge = chunk ? 0 : (size_t)s->tune.read_merge_bytes;
    sw_read_group *gs = b->gs;
    sw_read_req *rq = b->rq;
    sw_io_op *ops = b->ops;
    size_t ng = 0, nrq = 0, nops = 0, used = 0;
    b->items = items;
    b->bounce = bounce;
    while (i < n && nrq + 2 <= ops_cap) {
        sw_read_group g;
        memset(&g, 0, sizeof g);
        g.first = i;
        g.run = items[i].slot / R;
        g.p0 = g.p1 = items[i].slot % R;
        size_t j = i + 1;
        while (j < n && items[j].slot / R == g.run) {
            uint32_t p = items[j].slot % R;
            if (p > g.p1 + max_gap)
                break;
            g.p1 = p;
            j++;
        }
        g.last = j - 1;
        g.split = (uint64_t)g.p0 * sb > gap;
        size_t need = (size_t)(hb + (uint64_t)(g.p1 - g.p0 + 1) * sb);
        if (!g.split)
            need = (size_t)(hb + (uint64_t)(g.p1 + 1) * sb);
        /* requests this group takes */
        uint32_t span = g.split ? g.p1 - g.p0 + 1 : g.p1 + 1;
        size_t gops = chunk_slots ? (span + chunk_slots - 1) / chunk_slots : 1;
        gops += (size_t)g.split;
        if (used + need > bounce_cap || nrq + gops > ops_cap)
            break;
        g.hdr_off = used;
        g.pay_off = used + hb + (g.split ? 0 : (size_t)g.p0 * sb);
        uint64_t roff = sw_store_run_off(s, g.run);
        /* Requests: [header?][slot pieces]; slot positions a..b of the run
         * map to bounce offset used + hb + (a - base) * sb. */
        uint32_t base = g.split ? g.p0 : 0;
        size_t t = i;
        if (g.split) {
            rq[nrq++] = (sw_read_req){(uint32_t)ng, 1, 0, 0, (uint32_t)nops, 1, 0};
            ops[nops++] = (sw_io_op){s->data_fd, 0, bounce + used, hb, roff, 0};
        }
        for (uint32_t a = base; a <= g.p1;) {
            uint32_t e = chunk_slots ? a + chunk_slots - 1 : g.p1;
            if (e > g.p1)
                e = g.p1;
            int with_hdr = !g.split && a == 0;
            sw_read_req q = {(uint32_t)ng, (uint8_t)with_hdr, 0, 0, 0, t, t - 1};
            while (t <= g.last && items[t].slot % R <= e)
                t++;
            q.last = t - 1;
            if (q.last + 1 == q.first) { /* no item: mark empty */
                q.first = 1;
                q.last = 0;
            }
            size_t off = used + (with_hdr ? 0 : hb + (size_t)(a - base) * sb);
            size_t len = (size_t)((uint64_t)(e - a + 1) * sb + (with_hdr ? hb : 0));
            uint64_t foff = roff + (with_hdr ? 0 : hb + (uint64_t)a * sb);
            sw_io_op *prev = nops ? &ops[nops - 1] : NULL;
            if (merge && prev && a == base && prev->off + prev->len == foff &&
                (char *)prev->buf + prev->len == bounce + off && prev->len + len <= merge) {
                prev->len += len; /* the previous group's run ends where this one starts */
                q.op = (uint32_t)(nops - 1);
            } else {
                q.op = (uint32_t)nops;
                ops[nops++] = (sw_io_op){s->data_fd, 0, bounce + off, len, foff, 0};
            }
            rq[nrq++] = q;
            a = e + 1;
        }
        used += need;
        gs[ng++] = g;
        i = j;
    }
    b->ng = ng;
    b->nrq = nrq;
    b->nops = nops;
    b->used = used;
    return i;
}

sw_status sw_store_read_file(sw_read_ctx *c, sw_read_item *items, size_t n)
{
    sw_store *s = c->s;
    if (n == 0)
        return SW_OK;
    if (!s->rd_groups)
        s->rd_groups = malloc(sizeof(sw_read_group) * (s->ops_cap + 1));
    if (!s->rd_reqs)
        s->rd_reqs = malloc(sizeof(sw_read_req) * (s->ops_cap + 1));
    if (!s->rd_groups || !s->rd_reqs)
        return sw_fail(SW_STATUS_NO_MEMORY, "read plan");
    size_t i = 0;
    while (i < n) {
        sw_read_batch b;
        memset(&b, 0, sizeof b);
        b.c = c;
        b.gs = (sw_read_group *)s->rd_groups;
        b.rq = (sw_read_req *)s->rd_reqs;
        b.ops = s->ops;
        i = sw_store_read_plan(s, items, i, n, s->bounce, s->bounce_bytes, s->ops_cap, 0, &b);
        /* the bounce buffer holds at least two runs, the ops two groups */
        SW_ASSERT_RET(b.ng > 0);
        sw_io_run_cb(s->io, b.ops, b.nops, sw_store_read_done, &b);
        s->st.read_requests += b.ng; /* merged ranges; read_ios counts the pieces */
        s->st.read_ios += b.nops;
        for (size_t k = 0; k < b.nrq; k++)
            SW_ASSERT_RET(b.rq[k].handled);
        sw_read_sink_barrier(c->out);
    }
    return SW_OK;
}

size_t sw_store_read_lookup(sw_read_ctx *c, size_t n, const sw_store_key *keys,
                            sw_read_item *items, uint64_t *hs)
{
    sw_store *s = c->s;
    sw_status *statuses = c->statuses;
    void *const *dst = c->out->dst;
    /* Batched lookups: the index buckets of a call's keys are random in a
     * table of several MiB, so a lookup per key, done one after the other,
     * waits for one cache miss (and often a TLB miss) at a time. Per window
     * of keys: hash each key and prefetch its bucket, then prefetch the slot
     * records the buckets point to, then probe: the misses overlap. */
    enum { WINDOW = 64 };
    size_t m = 0;
    for (size_t w0 = 0; w0 < n; w0 += WINDOW) {
        size_t w1 = n - w0 < WINDOW ? n : w0 + WINDOW;
        for (size_t i = w0; i < w1; i++) {
            statuses[i] = SW_STATUS_NOT_FOUND;
            if (c->lengths)
                c->lengths[i] = 0;
            if (c->generations)
                c->generations[i] = 0;
            if (sw_store_check_key(&keys[i]) != SW_OK || !dst[i]) {
                statuses[i] = SW_STATUS_INVALID;
                continue;
            }
            hs[i] = sw_store_key_hash(&keys[i]);
            __builtin_prefetch(sw_store_index_bucket(s, hs[i]));
        }
        for (size_t i = w0; i < w1; i++) {
            if (statuses[i] == SW_STATUS_INVALID)
                continue;
            uint32_t v = *sw_store_index_bucket(s, hs[i]);
            if (v != SW_NIL) {
                __builtin_prefetch(&s->slots[v]);
                __builtin_prefetch((const char *)(&s->slots[v] + 1) - 1);
            }
        }
        for (size_t i = w0; i < w1; i++) {
            if (statuses[i] == SW_STATUS_INVALID)
                continue;
            uint32_t v = sw_store_index_find_h(s, &keys[i], hs[i]);
            if (v == SW_NIL) {
                if (sw_store_unprovable(s, &keys[i])) {
                    /* never an older version: see sw_store_recover */
                    statuses[i] = SW_STATUS_CORRUPT;
                    s->st.corruptions++;
                    continue;
                }
                s->st.not_found++;
                continue;
            }
            if (s->slots[v].length > c->dst_bytes) {
                statuses[i] = SW_STATUS_INVALID;
                continue;
            }
            sw_store_lru_touch(s, v);
            uint32_t h = s->slots[v].host;
            if (h != SW_NIL) {
                /* A host-tier copy is checked like a file read (as the
                 * engine's GPU gather checks its leased copies): into host
                 * memory fused with the copy, for a device destination
                 * before it. A copy that fails is never served: CORRUPT
                 * (dst zeros), and the copy leaves the tier, so the next
                 * read comes from the file. */
                const char *hp = sw_store_host_ptr(s, h);
                const uint32_t len = s->slots[v].length;
                int ok;
                if (!c->out->device) {
                    ok = sw_crc32c_copy(dst[i], hp, len) == s->slots[v].crc;
                    if (!ok)
                        memset(dst[i], 0, len);
                } else {
                    ok = sw_crc32c(hp, len) == s->slots[v].crc;
                }
                if (!ok) {
                    sw_store_host_drop(s, v);
                    s->st.corruptions++;
                    statuses[i] = SW_STATUS_CORRUPT;
                    continue;
                }
                sw_store_host_touch(s, h);
                deliver(c, (uint32_t)i, v, c->out->device ? hp : NULL, 1);
                continue;
            }
            if (s->host_n)
                s->st.host_misses++;
            items[m++] = (sw_read_item){v, (uint32_t)i, s->slots[v].generation};
        }
    }
    qsort(items, m, sizeof *items, item_cmp);
    return m;
}

sw_status sw_store_read_summary(sw_store *s, const sw_store_key *keys, size_t n,
                                size_t dst_bytes, const sw_status *statuses)
{
    for (size_t i = 0; i < n; i++)
        if (statuses[i] != SW_OK) {
            if (statuses[i] == SW_STATUS_CORRUPT && sw_store_unprovable(s, &keys[i]))
                return sw_fail(SW_STATUS_CORRUPT, "key %zu cannot be proven current: the "
                               "store's journal lost a record of it (found at open; "
                               "sw_store_repair drops it, a write or delete replaces it)", i);
            if (statuses[i] == SW_STATUS_CORRUPT)
                return sw_fail(SW_STATUS_CORRUPT, "key %zu: extent failed its key/generation/CRC "
                               "check", i);
            if (statuses[i] == SW_STATUS_NOT_FOUND)
                return sw_fail(SW_STATUS_NOT_FOUND, "key %zu: no stripe", i);
            if (statuses[i] == SW_STATUS_INVALID)
                return sw_fail(SW_STATUS_INVALID, "key %zu: bad key, NULL destination or "
                               "stripe larger than dst_bytes %zu", i, dst_bytes);
            if (statuses[i] == SW_STATUS_IO)
                return sw_fail(SW_STATUS_IO, "key %zu: the read of its extent failed", i);
            return statuses[i];
        }
    return SW_OK;
}
