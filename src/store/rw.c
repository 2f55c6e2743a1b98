/* Block store data path: write (extent, then journal, then publish), batched
 * coalesced reads with per-extent verification, delete. */
#include "store/store_internal.h"

#include "attn/attn_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sw_status check_key(const sw_store_key *k)
{
    if (!k)
        return sw_fail(SW_STATUS_INVALID, "store key is NULL");
    if (k->kind > SW_STORE_KIND_V || k->reserved != 0)
        return sw_fail(SW_STATUS_INVALID, "store key has kind %u / reserved %u (want 0|1, 0)",
                       k->kind, k->reserved);
    return SW_OK;
}

static sw_status enter(sw_store *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->failed) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_FAILED, "the store handle hit an unrecoverable error before");
    }
    return SW_OK;
}

static sw_status io_error(sw_store *s, const sw_io_op *op, const char *what)
{
    s->st.io_errors++;
    if (op->res < 0)
        return sw_store_errno(s, (int)-op->res, what);
    return sw_fail(SW_STATUS_IO, "%s: short transfer (%lld of %zu bytes at offset %llu)", what,
                   (long long)op->res, op->len, (unsigned long long)op->off);
}

/* Evicts the LRU stripe (journal tombstone first, so that replay never maps
 * the key to a slot that is about to be overwritten). */
static sw_status evict_one(sw_store *s, uint32_t avoid)
{
    uint32_t v = sw_store_lru_victim(s, avoid);
    if (v == SW_NIL)
        v = avoid; /* the only stripe is the one being overwritten */
    if (v == SW_NIL)
        return sw_fail(SW_STATUS_INTERNAL, "store full but nothing to evict");
    sw_store_record r = {SW_STORE_REC_DEL, s->slots[v].key, s->slots[v].generation, 0, 0, 0, 0};
    SW_TRY(sw_store_journal_append(s, &r));
    sw_store_index_remove(s, v);
    s->st.evictions++;
    return SW_OK;
}

static sw_status write_extent(sw_store *s, const sw_store_key *key, const void *src,
                              size_t bytes, uint32_t slot, uint32_t old, uint64_t *gen_out);

static sw_status store_write(sw_store *s, const sw_store_key *key, const void *src,
                             size_t bytes, uint64_t *gen_out)
{
    uint32_t old = sw_store_index_find(s, key);
    uint32_t slot = sw_store_place(s, key, old);
    if (slot == SW_NIL) {
        if (s->full_policy == SW_STORE_FULL_REFUSE)
            return sw_fail(SW_STATUS_FULL, "store is full: %u of %u extents used (policy: refuse%s)",
                           s->used_slots, s->nslots,
                           old != SW_NIL ? "; an overwrite needs one free extent" : "");
        SW_TRY(evict_one(s, old));
        if (old != SW_NIL && !s->slots[old].used)
            old = SW_NIL; /* the key itself was the victim */
        slot = sw_store_place(s, key, old);
        SW_ASSERT_RET(slot != SW_NIL);
    }
    sw_status st = write_extent(s, key, src, bytes, slot, old, gen_out);
    if (st != SW_OK)
        sw_store_place_abort(s, slot);
    return st;
}

static sw_status write_extent(sw_store *s, const sw_store_key *key, const void *src,
                              size_t bytes, uint32_t slot, uint32_t old, uint64_t *gen_out)
{
    uint64_t gen = s->generation + 1;
    uint32_t crc = sw_crc32c(src, bytes);

    /* Bounce layout: [payload slot][run header page(s)]. The header page is
     * read, patched and written whole: the other headers in it are written
     * back byte-identical, so even a torn page write cannot damage them. */
    char *pay = s->bounce;
    char *hdr = s->bounce + s->g.slot_bytes;
    uint32_t run = slot / s->g.run_blocks, pos = slot % s->g.run_blocks;
    uint64_t hdr_page = (uint64_t)pos * SW_STORE_HDR_BYTES / SW_STORE_ALIGN * SW_STORE_ALIGN;
    sw_io_op *op = s->ops;
    op[0] = (sw_io_op){s->data_fd, 0, hdr, SW_STORE_ALIGN, sw_store_run_off(s, run) + hdr_page, 0};
    if (sw_io_run(s->io, op, 1))
        return io_error(s, &op[0], "read extent header page");

    memcpy(pay, src, bytes);
    memset(pay + bytes, 0, s->g.slot_bytes - bytes);
    sw_store_extent_hdr h = {*key, gen, (uint32_t)bytes, crc, slot};
    h.key.reserved = 0;
    sw_store_encode_extent_hdr(&h, (uint8_t *)hdr + (pos * SW_STORE_HDR_BYTES - hdr_page));
    op[0] = (sw_io_op){s->data_fd, 1, pay, s->g.slot_bytes, sw_store_slot_off(s, slot), 0};
    op[1] = (sw_io_op){s->data_fd, 1, hdr, SW_STORE_ALIGN, sw_store_run_off(s, run) + hdr_page, 0};
    if (sw_io_run(s->io, op, 2))
        return io_error(s, op[0].res != (int64_t)op[0].len ? &op[0] : &op[1], "write extent");
    if (s->durability == SW_STORE_DURABILITY_SYNC && fdatasync(s->data_fd) != 0) {
        s->failed = 1; /* after a failed fsync the page state is unknown */
        return sw_store_errno(s, errno, "fdatasync(data)");
    }

    sw_store_record r = {SW_STORE_REC_PUT, h.key, gen, slot, (uint32_t)bytes, crc, 0};
    SW_TRY(sw_store_journal_append(s, &r));

    /* Published only now: the extent and its record are complete. */
    s->generation = gen;
    sw_slot *e = &s->slots[slot];
    e->key = h.key;
    e->generation = gen;
    e->length = (uint32_t)bytes;
    e->crc = crc;
    sw_store_index_publish(s, slot);
    if (old != SW_NIL)
        sw_store_slot_release(s, old);
    sw_store_host_put(s, slot, src);
    s->st.writes++;
    s->st.bytes_written += bytes;
    if (gen_out)
        *gen_out = gen;
    return SW_OK;
}

sw_status sw_store_write_locked(sw_store *s, const sw_store_key *key, const void *src,
                                size_t bytes, uint64_t *gen_out)
{
    return store_write(s, key, src ? src : "", bytes, gen_out);
}

sw_status sw_store_write(sw_store *s, const sw_store_key *key, const void *src, size_t bytes,
                         uint64_t *generation)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_store_write: store is NULL");
    SW_TRY(check_key(key));
    if (!src && bytes)
        return sw_fail(SW_STATUS_INVALID, "sw_store_write: src is NULL");
    if (bytes > s->g.stripe_bytes)
        return sw_fail(SW_STATUS_INVALID, "stripe of %zu bytes > stripe_bytes %u", bytes,
                       s->g.stripe_bytes);
    SW_TRY(enter(s));
    uint64_t gen = 0;
    sw_status st = store_write(s, key, src ? src : "", bytes, &gen);
    pthread_mutex_unlock(&s->lock);
    if (st == SW_OK) {
        if (generation)
            *generation = gen;
        /* Write-through: a copy is queued for the remote (outside the lock:
         * a full queue may make this writer wait, bounded). */
        if (s->rt)
            sw_store_remote_enqueue(s, key, src ? src : "", bytes, gen);
    }
    return st;
}

sw_status sw_store_delete(sw_store *s, const sw_store_key *key)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_store_delete: store is NULL");
    SW_TRY(check_key(key));
    SW_TRY(enter(s));
    sw_status st = SW_OK;
    uint32_t v = sw_store_index_find(s, key);
    if (v == SW_NIL) {
        st = sw_fail(SW_STATUS_NOT_FOUND, "no stripe for this key");
    } else {
        sw_store_record r = {SW_STORE_REC_DEL, *key, s->slots[v].generation, 0, 0, 0, 0};
        r.key.reserved = 0;
        st = sw_store_journal_append(s, &r);
        if (st == SW_OK) {
            sw_store_index_remove(s, v);
            s->st.deletes++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* ----------------------------------------------------------------- read -- */
typedef struct read_item {
    uint32_t slot;
    uint32_t idx;   /* key index in the caller's arrays */
} read_item;

static int item_cmp(const void *a, const void *b)
{
    const read_item *x = (const read_item *)a, *y = (const read_item *)b;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Where a stripe goes: memcpy to host memory, or a merged cudaMemcpyAsync. */
typedef struct sink {
    int device;
    void *stream;
    void *const *dst;
    /* pending device copy */
    const char *p_src;
    char *p_dst;
    size_t p_len;
    sw_status err;
} sink;

static void sink_flush(sink *k)
{
    if (k->p_len && k->err == SW_OK)
        k->err = sw_cuda_memcpy_h2d_async(k->p_dst, k->p_src, k->p_len, k->stream);
    k->p_len = 0;
}

static void sink_put(sink *k, uint32_t idx, const char *src, size_t len)
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

/* Ends a batch: the bounce buffer may be reused only after device copies
 * out of it completed. */
static void sink_barrier(sink *k)
{
    if (!k->device)
        return;
    sink_flush(k);
    if (k->err == SW_OK)
        k->err = sw_cuda_stream_sync(k->stream);
}

typedef struct read_ctx {
    sw_store *s;
    const sw_store_key *keys;
    size_t dst_bytes;
    size_t *lengths;
    uint64_t *generations;
    sw_status *statuses;
    sink *out;
} read_ctx;

static void deliver(read_ctx *c, uint32_t idx, uint32_t slot, const char *src, int from_host)
{
    sw_store *s = c->s;
    const sw_slot *e = &s->slots[slot];
    sink_put(c->out, idx, src, e->length);
    c->statuses[idx] = SW_OK;
    if (c->lengths)
        c->lengths[idx] = e->length;
    if (c->generations)
        c->generations[idx] = e->generation;
    if (from_host) {
        s->st.host_hits++;
        s->st.host_bytes_read += e->length;
    } else {
        s->st.file_hits++;
        s->st.file_bytes_read += e->length;
    }
}

/* Verifies extent `slot` read into the bounce buffer (header at hdr, payload
 * at pay) against the index; delivers it or marks the key corrupt. */
static void verify_deliver(read_ctx *c, const read_item *it, const char *hdr, const char *pay)
{
    sw_store *s = c->s;
    const sw_slot *e = &s->slots[it->slot];
    sw_store_extent_hdr h;
    if (sw_store_decode_extent_hdr((const uint8_t *)hdr, SW_STORE_HDR_BYTES, &h) != SW_OK ||
        !sw_store_key_eq(&h.key, &e->key) || h.generation != e->generation ||
        h.length != e->length || h.payload_crc != e->crc || h.slot != it->slot ||
        sw_crc32c(pay, h.length) != h.payload_crc) {
        s->st.corruptions++;
        c->statuses[it->idx] = SW_STATUS_CORRUPT;
        return;
    }
    deliver(c, it->idx, it->slot, pay, 0);
    sw_store_host_put(s, it->slot, pay); /* only verified bytes enter the host tier */
}

/* One merged request group: the run's header page(s) and a slot range,
 * read as [header | slots] when the range starts close to the run's start,
 * else as a header read plus the slots; the slots may be cut into several
 * requests (SPILLWAY_STORE_READ_CHUNK bytes) so that a single tile still
 * has several requests in flight. */
typedef struct group {
    size_t first, last;  /* item range */
    uint32_t run, p0, p1; /* slot positions [p0, p1] */
    int split;           /* header read separately */
    size_t hdr_off, pay_off; /* offsets of the header area / slot p0 in bounce */
    int hdr_done, hdr_ok;
} group;

/* What each request carries: its group, the items whose payload it holds
 * (first > last: none), whether it holds the group's header area. */
typedef struct req {
    uint32_t group;
    uint8_t has_hdr, done, handled;
    size_t first, last;
} req;

typedef struct read_batch {
    read_ctx *c;
    read_item *items;
    group *gs;
    req *rq;
    size_t nops;
} read_batch;

static void handle_req(read_batch *b, size_t o)
{
    read_ctx *c = b->c;
    sw_store *s = c->s;
    req *q = &b->rq[o];
    const group *g = &b->gs[q->group];
    const uint64_t sb = s->g.slot_bytes;
    const uint32_t R = s->g.run_blocks;
    int ok = g->hdr_ok && s->ops[o].res == (int64_t)s->ops[o].len;
    q->handled = 1;
    for (size_t t = q->first; t <= q->last && q->first <= q->last; t++) {
        if (!ok) {
            c->statuses[b->items[t].idx] = SW_STATUS_IO;
            continue;
        }
        uint32_t p = b->items[t].slot % R;
        const char *hdr = s->bounce + g->hdr_off + (size_t)p * SW_STORE_HDR_BYTES;
        const char *pay = s->bounce + g->pay_off + (size_t)(p - g->p0) * sb;
        verify_deliver(c, &b->items[t], hdr, pay);
    }
}

/* Completion of request o: its stripes are checked and copied out while
 * the batch's other requests are still in flight. A payload request waits
 * for its group's header request. */
static void on_read_done(void *ctx, size_t o)
{
    read_batch *b = (read_batch *)ctx;
    sw_store *s = b->c->s;
    req *q = &b->rq[o];
    group *g = &b->gs[q->group];
    q->done = 1;
    if (s->ops[o].res != (int64_t)s->ops[o].len)
        (void)io_error(s, &s->ops[o], "read extents");
    if (q->has_hdr) {
        g->hdr_done = 1;
        g->hdr_ok = s->ops[o].res == (int64_t)s->ops[o].len;
        for (size_t k = 0; k < b->nops; k++)
            if (b->rq[k].group == q->group && b->rq[k].done && !b->rq[k].handled)
                handle_req(b, k);
    } else if (g->hdr_done) {
        handle_req(b, o);
    }
}

static size_t read_chunk_bytes(const sw_store *s)
{
    /* Default 128 KiB: on the 2-core VM's virtio disk one 516 KiB tile read
     * cut into 128 KiB requests in flight together went from 0.71 to
     * 0.96 GB/s (docs/perf/store.md); 0 = never cut. */
    /* The pread fallback runs the pieces one after the other, so a cut only
     * adds system calls there (256 MiB bench: 21% of raw-seq cut, see
     * docs/perf/store.md): uncut by default. */
    int64_t def = sw_io_backend(s->io) == SW_STORE_IO_PREAD ? 0 : 131072;
    int64_t env = sw_env_int("SPILLWAY_STORE_READ_CHUNK", def);
    size_t c = env > 0 ? (size_t)env : 0;
    if (c && c < s->g.slot_bytes)
        c = s->g.slot_bytes;
    return c;
}

static sw_status read_from_file(read_ctx *c, read_item *items, size_t n)
{
    sw_store *s = c->s;
    const uint64_t sb = s->g.slot_bytes, hb = s->g.run_header_bytes;
    const uint32_t R = s->g.run_blocks;
    /* Gap slots worth reading through rather than splitting a request. */
    const uint32_t max_gap = (uint32_t)(65536 / sb) + 1;
    const size_t chunk = read_chunk_bytes(s);
    const uint32_t chunk_slots = chunk ? (uint32_t)(chunk / sb) : 0;
    if (n == 0)
        return SW_OK;
    if (!s->rd_groups)
        s->rd_groups = malloc(sizeof(group) * (s->ops_cap + 1));
    if (!s->rd_reqs)
        s->rd_reqs = malloc(sizeof(req) * (s->ops_cap + 1));
    if (!s->rd_groups || !s->rd_reqs)
        return sw_fail(SW_STATUS_NO_MEMORY, "read plan");
    group *gs = (group *)s->rd_groups;
    req *rq = (req *)s->rd_reqs;
    size_t i = 0;
    while (i < n) {
        /* Build one batch of groups that fits in the bounce buffer and the
         * queue depth. */
        size_t ng = 0, nops = 0, used = 0;
        while (i < n && nops + 2 <= s->ops_cap) {
            group g = {0};
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
            g.split = (uint64_t)g.p0 * sb > 65536;
            size_t need = (size_t)(hb + (uint64_t)(g.p1 - g.p0 + 1) * sb);
            if (!g.split)
                need = (size_t)(hb + (uint64_t)(g.p1 + 1) * sb);
            /* requests this group takes */
            uint32_t span = g.split ? g.p1 - g.p0 + 1 : g.p1 + 1;
            size_t gops = chunk_slots ? (span + chunk_slots - 1) / chunk_slots : 1;
            gops += g.split;
            if (used + need > s->bounce_bytes || nops + gops > s->ops_cap) {
                if (ng == 0)
                    SW_ASSERT_RET(0);
                break;
            }
            g.hdr_off = used;
            g.pay_off = used + hb + (g.split ? 0 : (size_t)g.p0 * sb);
            uint64_t roff = sw_store_run_off(s, g.run);
            /* Requests: [header?][slot pieces]; slot positions a..b of the
             * run map to bounce offset used + hb + (a - base) * sb. */
            uint32_t base = g.split ? g.p0 : 0;
            size_t t = i;
            if (g.split) {
                rq[nops] = (req){(uint32_t)ng, 1, 0, 0, 1, 0};
                s->ops[nops++] = (sw_io_op){s->data_fd, 0, s->bounce + used, hb, roff, 0};
            }
            for (uint32_t a = base; a <= g.p1;) {
                uint32_t b = chunk_slots ? a + chunk_slots - 1 : g.p1;
                if (b > g.p1)
                    b = g.p1;
                int with_hdr = !g.split && a == 0;
                req q = {(uint32_t)ng, (uint8_t)with_hdr, 0, 0, t, t - 1};
                while (t <= g.last && items[t].slot % R <= b)
                    t++;
                q.last = t - 1;
                if (q.last + 1 == q.first) { /* no item: mark empty */
                    q.first = 1;
                    q.last = 0;
                }
                size_t off = used + (with_hdr ? 0 : hb + (size_t)(a - base) * sb);
                size_t len = (size_t)((uint64_t)(b - a + 1) * sb + (with_hdr ? hb : 0));
                rq[nops] = q;
                s->ops[nops++] = (sw_io_op){s->data_fd, 0, s->bounce + off, len,
                                            roff + (with_hdr ? 0 : hb + (uint64_t)a * sb), 0};
                a = b + 1;
            }
            used += need;
            gs[ng++] = g;
            i = j;
        }
        read_batch b = {c, items, gs, rq, nops};
        sw_io_run_cb(s->io, s->ops, nops, on_read_done, &b);
        s->st.read_requests += ng; /* merged ranges; read_ios counts the pieces */
        s->st.read_ios += nops;
        for (size_t k = 0; k < nops; k++)
            SW_ASSERT_RET(rq[k].handled);
        sink_barrier(c->out);
    }
    return SW_OK;
}

static sw_status summarize(size_t n, size_t dst_bytes, const sw_status *statuses);

static sw_status store_read(sw_store *s, size_t n, const sw_store_key *keys, sink *out,
                            size_t dst_bytes, size_t *lengths, uint64_t *generations,
                            sw_status *statuses)
{
    read_ctx c = {s, keys, dst_bytes, lengths, generations, statuses, out};
    /* Scratch kept by the handle (under its lock): items, then per key its
     * hash. */
    size_t need = (n ? n : 1) * (sizeof(read_item) + sizeof(uint64_t));
    if (s->rd_scratch_bytes < need) {
        void *p = realloc(s->rd_scratch, need);
        if (!p)
            return sw_fail(SW_STATUS_NO_MEMORY, "read of %zu keys", n);
        s->rd_scratch = p;
        s->rd_scratch_bytes = need;
    }
    read_item *items = (read_item *)s->rd_scratch;
    uint64_t *hs = (uint64_t *)(items + (n ? n : 1));
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
            if (lengths)
                lengths[i] = 0;
            if (generations)
                generations[i] = 0;
            if (check_key(&keys[i]) != SW_OK || !out->dst[i]) {
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
                s->st.not_found++;
                continue;
            }
            if (s->slots[v].length > dst_bytes) {
                statuses[i] = SW_STATUS_INVALID;
                continue;
            }
            sw_store_lru_touch(s, v);
            uint32_t h = s->slots[v].host;
            if (h != SW_NIL) {
                sw_store_host_touch(s, h);
                deliver(&c, (uint32_t)i, v, sw_store_host_ptr(s, h), 1);
                continue;
            }
            if (s->host_n)
                s->st.host_misses++;
            items[m++] = (read_item){v, (uint32_t)i};
        }
    }
    /* Host-tier copies must be complete before file reads may evict the
     * host entries they come from. */
    sink_barrier(out);
    qsort(items, m, sizeof *items, item_cmp);
    sw_status st = read_from_file(&c, items, m);
    sink_barrier(out);
    if (st != SW_OK)
        return st;
    if (out->err != SW_OK) {
        for (size_t i = 0; i < n; i++)
            if (statuses[i] == SW_OK)
                statuses[i] = out->err;
        return out->err;
    }
    return summarize(n, dst_bytes, statuses);
}

/* The call's status from the per-key ones (the first that is not OK). */
static sw_status summarize(size_t n, size_t dst_bytes, const sw_status *statuses)
{
    for (size_t i = 0; i < n; i++)
        if (statuses[i] != SW_OK) {
            if (statuses[i] == SW_STATUS_CORRUPT)
                return sw_fail(SW_STATUS_CORRUPT, "key %zu: extent failed its key/generation/CRC "
                               "check", i);
            if (statuses[i] == SW_STATUS_NOT_FOUND)
                return sw_fail(SW_STATUS_NOT_FOUND, "key %zu: no stripe", i);
            if (statuses[i] == SW_STATUS_INVALID)
                return sw_fail(SW_STATUS_INVALID, "key %zu: bad key, NULL destination or "
                               "stripe larger than dst_bytes %zu", i, dst_bytes);
            return statuses[i];
        }
    return SW_OK;
}

static sw_status read_common(sw_store *s, size_t n, const sw_store_key *keys, sink *out,
                             size_t dst_bytes, size_t *lengths, uint64_t *generations,
                             sw_status *statuses)
{
    if (!statuses)
        return sw_fail(SW_STATUS_INVALID, "sw_store_read: statuses is NULL");
    sw_status bad = SW_OK;
    if (!s || (n && (!keys || !out->dst)))
        bad = sw_fail(SW_STATUS_INVALID, "sw_store_read: null store, keys or dst");
    else if (n > 0xfffffffful)
        bad = sw_fail(SW_STATUS_INVALID, "sw_store_read: %zu keys in one call", n);
    else
        bad = enter(s);
    if (bad != SW_OK) {
        for (size_t i = 0; i < n; i++)
            statuses[i] = bad;
        return bad;
    }
    sw_status st = store_read(s, n, keys, out, dst_bytes, lengths, generations, statuses);
    pthread_mutex_unlock(&s->lock);
    /* Local misses go to the remote tier in one pipelined batch, without the
     * store's lock (a slow server must not stall other callers). Only after
     * a complete local pass: per-key statuses are set. */
    if (s->rt && (st == SW_STATUS_NOT_FOUND || st == SW_STATUS_CORRUPT ||
                  st == SW_STATUS_IO || st == SW_STATUS_INVALID)) {
        sw_status rst = sw_store_remote_fetch(s, n, keys, out->dst, out->device, out->stream,
                                              dst_bytes, lengths, generations, statuses);
        if (rst != SW_OK && rst != SW_STATUS_NO_MEMORY)
            return rst; /* a device copy failed */
        st = summarize(n, dst_bytes, statuses);
    }
    return st;
}

sw_status sw_store_read(sw_store *s, size_t n, const sw_store_key *keys, void *const *dst,
                        size_t dst_bytes, size_t *lengths, uint64_t *generations,
                        sw_status *statuses)
{
    sink out = {0, NULL, dst, NULL, NULL, 0, SW_OK};
    return read_common(s, n, keys, &out, dst_bytes, lengths, generations, statuses);
}

sw_status sw_store_read_device(sw_store *s, size_t n, const sw_store_key *keys,
                               void *const *dst, size_t dst_bytes, size_t *lengths,
                               uint64_t *generations, sw_status *statuses, void *stream)
{
    if (!sw_cuda_built() || sw_cuda_devices() <= 0) {
        sw_status st = sw_fail(SW_STATUS_NO_DEVICE, "sw_store_read_device: %s",
                               sw_cuda_built() ? "no usable GPU" : "built without CUDA");
        for (size_t i = 0; statuses && i < n; i++)
            statuses[i] = st;
        return st;
    }
    /* Host memory passed as a device destination would fail inside the copy
     * after the read; refuse it up front, per key. */
    for (size_t i = 0; dst && i < n; i++) {
        if (sw_cuda_is_device_ptr(dst[i]))
            continue;
        sw_status bad = sw_fail(SW_STATUS_INVALID, "sw_store_read_device: dst[%zu]=%p is not "
                                "device memory; nothing was read", i, dst[i]);
        for (size_t j = 0; statuses && j < n; j++)
            statuses[j] = bad;
        return bad;
    }
    sink out = {1, stream, dst, NULL, NULL, 0, SW_OK};
    return read_common(s, n, keys, &out, dst_bytes, lengths, generations, statuses);
}
