/* Whole-store walks for tools: sw_store_iterate (index only),
 * sw_store_verify (every live extent read back and checked, and what open
 * found comparing the journal with the header pages) and sw_store_repair. */
#include "store/store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sw_status scan_enter(sw_store *s, const char *what)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "%s: store is NULL", what);
    pthread_mutex_lock(&s->lock);
    if (s->failed) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_FAILED, "the store handle hit an unrecoverable error before");
    }
    /* verify reads through the bounce buffer: read tickets first */
    sw_store_reads_drain(s);
    return SW_OK;
}

static sw_store_entry entry_of(const sw_store *s, uint32_t v, sw_status st)
{
    const sw_slot *e = &s->slots[v];
    sw_store_entry out;
    memset(&out, 0, sizeof out);
    out.key = e->key;
    out.generation = e->generation;
    out.length = e->length;
    out.in_host = e->host != SW_NIL;
    out.extent = v;
    out.status = st;
    return out;
}

sw_status sw_store_iterate(sw_store *s, sw_store_visit_fn fn, void *ctx)
{
    if (!fn)
        return sw_fail(SW_STATUS_INVALID, "sw_store_iterate: fn is NULL");
    SW_TRY(scan_enter(s, "sw_store_iterate"));
    for (uint32_t v = 0; v < s->nslots; v++) {
        if (!s->slots[v].used)
            continue;
        sw_store_entry e = entry_of(s, v, SW_OK);
        if (fn(ctx, &e))
            break;
    }
    pthread_mutex_unlock(&s->lock);
    return SW_OK;
}

/* Checks extent v whose header is at hdr and payload at pay. */
static sw_status check_extent(const sw_store *s, uint32_t v, const char *hdr, const char *pay)
{
    const sw_slot *e = &s->slots[v];
    sw_store_extent_hdr h;
    if (sw_store_decode_extent_hdr((const uint8_t *)hdr, SW_STORE_HDR_BYTES, &h) != SW_OK ||
        h.state != SW_STORE_EXTENT_LIVE || h.seq != e->seq ||
        !sw_store_key_eq(&h.key, &e->key) || h.generation != e->generation ||
        h.length != e->length || h.payload_crc != e->crc || h.slot != v ||
        sw_crc32c(pay, h.length) != h.payload_crc)
        return SW_STATUS_CORRUPT;
    return SW_OK;
}

typedef struct verify_state {
    sw_store_verify_result r;
    sw_store_visit_fn fn;
    void *ctx;
    int stop;
} verify_state;

static void report(sw_store *s, verify_state *vs, uint32_t v, sw_status st)
{
    vs->r.extents_checked++;
    if (st == SW_OK) {
        vs->r.extents_ok++;
    } else if (st == SW_STATUS_CORRUPT) {
        vs->r.extents_corrupt++;
        s->st.corruptions++;
    } else {
        vs->r.extents_io_error++;
    }
    if (vs->fn && !vs->stop) {
        sw_store_entry e = entry_of(s, v, st);
        vs->stop = vs->fn(vs->ctx, &e) != 0;
    }
}

static sw_status verify_locked(sw_store *s, verify_state *vs)
{
    const uint32_t R = s->g.run_blocks;
    const uint64_t sb = s->g.slot_bytes, hb = s->g.run_header_bytes;
    size_t qd = s->queue_depth ? s->queue_depth : 1;
    uint32_t *batch = (uint32_t *)malloc(sizeof(uint32_t) * qd);
    if (!batch)
        return sw_fail(SW_STATUS_NO_MEMORY, "verify plan");
    uint64_t run = 0;
    while (run < s->g.nruns && !vs->stop) {
        /* A batch of runs in use, each read as [header | slots 0..last used]. */
        size_t nb = 0, used = 0;
        for (; run < s->g.nruns && nb < qd; run++) {
            if (!s->runs[run].used)
                continue;
            uint32_t last = 0;
            for (uint32_t p = 0; p < R; p++)
                if (s->slots[run * R + p].used)
                    last = p;
            size_t need = (size_t)(hb + (uint64_t)(last + 1) * sb);
            if (used + need > s->bounce_bytes)
                break; /* next batch; a whole run always fits (bounce >= 2 runs) */
            s->ops[nb] = (sw_io_op){s->data_fd, 0, s->bounce + used, need,
                                    sw_store_run_off(s, (uint32_t)run), 0};
            batch[nb++] = (uint32_t)run;
            used += need;
        }
        if (!nb)
            continue;
        sw_io_run(s->io, s->ops, nb);
        vs->r.read_requests += nb;
        for (size_t k = 0; k < nb; k++) {
            const sw_io_op *op = &s->ops[k];
            int ok = op->res == (int64_t)op->len;
            if (ok)
                vs->r.bytes_read += op->len;
            else
                s->st.io_errors++;
            const char *base = (const char *)op->buf;
            uint64_t r0 = (uint64_t)batch[k] * R;
            for (uint64_t p = 0; p < R; p++) {
                uint32_t v = (uint32_t)(r0 + p);
                if (!s->slots[v].used)
                    continue;
                sw_status st = ok ? check_extent(s, v, base + p * SW_STORE_HDR_BYTES,
                                                 base + hb + p * sb)
                                  : SW_STATUS_IO;
                report(s, vs, v, st);
            }
        }
    }
    free(batch);
    /* Keys that cannot be proven current: what a read of them returns. */
    for (uint64_t i = 0; s->unprov.a && i <= s->unprov.mask && !vs->stop; i++) {
        if (!s->unprov.a[i].used || !vs->fn)
            continue;
        sw_store_entry e;
        memset(&e, 0, sizeof e);
        e.key = s->unprov.a[i].key;
        e.extent = UINT64_MAX;
        e.status = SW_STATUS_CORRUPT;
        vs->stop = vs->fn(vs->ctx, &e) != 0;
    }
    /* Host-tier copies: the bytes a hit would return. */
    for (uint32_t h = 0; h < s->host_n && !vs->stop; h++) {
        uint32_t v = s->host[h].slot;
        if (v == SW_NIL)
            continue;
        vs->r.host_checked++;
        if (sw_crc32c(sw_store_host_ptr(s, h), s->slots[v].length) != s->slots[v].crc) {
            vs->r.host_corrupt++;
            s->st.corruptions++;
        }
    }
    return SW_OK;
}

sw_status sw_store_verify(sw_store *s, sw_store_visit_fn fn, void *ctx,
                          sw_store_verify_result *res)
{
    if (res && res->struct_size < 8)
        return sw_fail(SW_STATUS_INVALID, "sw_store_verify: res->struct_size < 8");
    SW_TRY(scan_enter(s, "sw_store_verify"));
    verify_state vs;
    memset(&vs, 0, sizeof vs);
    vs.fn = fn;
    vs.ctx = ctx;
    sw_status st = verify_locked(s, &vs);
    /* What open found. A read-write open has written what it recovered
     * from the data file to the journal and dropped torn extents; a
     * read-only one did that in memory only, so the files still lack it. */
    vs.r.journal_dropped = s->st.journal_dropped;
    vs.r.journal_damaged = s->st.journal_damaged;
    vs.r.keys_unprovable = s->unprov.n;
    vs.r.journal_missing = s->read_only ? s->st.journal_recovered : 0;
    vs.r.extents_torn = s->read_only ? s->st.extents_discarded : 0;
    vs.r.voids_pending = s->read_only ? s->voids_pending : 0;
    vs.r.headers_bad = s->st.headers_bad;
    /* A killed writer leaves at most one operation unfinished: a put
     * without its record (one past the journal, rolled forward), a torn put
     * (dropped) or a void not written after its record. Each is resolved
     * by the next read-write open exactly as if the writer had finished or
     * never started it, so alone it is not damage. A batch group is one
     * operation (its puts share one number): several such findings, all of
     * the store's newest number, are one killed writer's too -- a number
     * that only a group's puts share, so no damage to single operations'
     * records looks like it. A void without its tombstone (a redone delete)
     * cannot come from a kill (the tombstone is appended first): damage.
     * (A journal whose last record alone was cut looks like the first case,
     * and open's roll-forward is right for it too; so does one whose last
     * group's records were cut.) */
    const uint64_t redone = s->read_only ? s->deletes_redone : 0;
    const sw_store_verify_result *q = &vs.r;
    const uint64_t found = q->journal_missing + q->extents_torn + q->voids_pending;
    if (!q->extents_corrupt && !q->host_corrupt && !q->journal_dropped && !q->journal_damaged &&
        !q->keys_unprovable && !q->headers_bad && !redone &&
        (found == 1 || (found > 1 && s->inflight_found == found)))
        vs.r.in_flight = 1;
    pthread_mutex_unlock(&s->lock);
    if (res) {
        uint32_t want = res->struct_size;
        vs.r.struct_size = want;
        memcpy(res, &vs.r, want < sizeof vs.r ? want : sizeof vs.r);
    }
    if (st != SW_OK)
        return st;
    const sw_store_verify_result *r = &vs.r;
    if (!r->in_flight && (r->voids_pending || r->extents_corrupt || r->host_corrupt || r->journal_dropped || r->journal_damaged ||
        r->keys_unprovable || r->journal_missing || r->extents_torn || r->headers_bad))
        return sw_fail(SW_STATUS_CORRUPT, "verify: %llu corrupt extent(s) and %llu corrupt host "
                       "cop(ies) of %llu stripes; journal: %llu record(s) failed their "
                       "checksum%s, %llu key(s) cannot be proven current, %llu operation(s) "
                       "found only in the data file, %llu torn extent(s), %llu void header(s) "
                       "not written; %llu damaged header slot(s)",
                       (unsigned long long)r->extents_corrupt, (unsigned long long)r->host_corrupt,
                       (unsigned long long)r->extents_checked,
                       (unsigned long long)r->journal_dropped,
                       r->journal_damaged ? " (damaged: records lost before its end or from "
                                            "its snapshot)" : "",
                       (unsigned long long)r->keys_unprovable,
                       (unsigned long long)r->journal_missing,
                       (unsigned long long)r->extents_torn, (unsigned long long)r->voids_pending,
                       (unsigned long long)r->headers_bad);
    if (vs.r.extents_io_error)
        return sw_fail(SW_STATUS_IO, "verify: %llu stripe(s) could not be read",
                       (unsigned long long)vs.r.extents_io_error);
    return SW_OK;
}

/* --------------------------------------------------------------- repair -- */
typedef struct bad_slots {
    uint32_t *a;
    size_t n, cap;
    int oom;
} bad_slots;

static int collect_bad(void *ctx, const sw_store_entry *e)
{
    bad_slots *b = (bad_slots *)ctx;
    if (e->status == SW_OK || e->extent == UINT64_MAX)
        return 0;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        uint32_t *a = (uint32_t *)realloc(b->a, cap * sizeof *a);
        if (!a) {
            b->oom = 1;
            return 1;
        }
        b->a = a;
        b->cap = cap;
    }
    b->a[b->n++] = (uint32_t)e->extent;
    return 0;
}

/* Zeroes every header slot that is neither zero nor a valid header of its
 * slot, and non-zero padding after the last header of a page; voids every
 * live header that is not the current version of its key. */
static sw_status clear_bad_headers(sw_store *s, uint64_t *cleared)
{
    const uint32_t R = s->g.run_blocks;
    const size_t hb = s->g.run_header_bytes;
    char *buf = s->bounce;
    for (uint64_t run = 0; run < s->g.nruns; run++) {
        sw_io_op op = {s->data_fd, 0, buf, hb, sw_store_run_off(s, (uint32_t)run), 0};
        if (sw_io_run(s->io, &op, 1))
            return op.res < 0 ? sw_store_errno(s, (int)-op.res, "repair: read header page")
                              : sw_fail(SW_STATUS_IO, "repair: short read of a header page");
        uint64_t fixed = 0;
        for (uint32_t p = 0; p < R; p++) {
            uint8_t *b = (uint8_t *)buf + (size_t)p * SW_STORE_HDR_BYTES;
            int zero = 1;
            for (size_t i = 0; i < SW_STORE_HDR_BYTES && zero; i++)
                zero = b[i] == 0;
            sw_store_extent_hdr h;
            if (zero)
                continue;
            if (sw_store_decode_extent_hdr(b, SW_STORE_HDR_BYTES, &h) == SW_OK &&
                h.slot == run * R + p &&
                (h.state != SW_STORE_EXTENT_LIVE || h.length <= s->g.stripe_bytes)) {
                const sw_slot *e = &s->slots[run * R + p];
                if (h.state != SW_STORE_EXTENT_LIVE ||
                    (e->used && e->seq == h.seq && sw_store_key_eq(&e->key, &h.key)))
                    continue;
                /* A live header that is not its key's current version: a
                 * dropped key's newer extent, or a void a killed writer
                 * left unwritten. Voided, so that it can never be taken
                 * for the key again. */
                h.state = SW_STORE_EXTENT_VOID;
                h.length = 0;
                h.payload_crc = 0;
                sw_store_encode_extent_hdr(&h, b);
                fixed++;
                continue;
            }
            memset(b, 0, SW_STORE_HDR_BYTES);
            fixed++;
        }
        for (size_t i = (size_t)R * SW_STORE_HDR_BYTES; i < hb; i++)
            if (buf[i]) {
                memset(buf + i, 0, hb - i);
                fixed++;
                break;
            }
        if (!fixed)
            continue;
        op.write = 1;
        op.res = 0;
        if (sw_io_run(s->io, &op, 1))
            return op.res < 0 ? sw_store_errno(s, (int)-op.res, "repair: write header page")
                              : sw_fail(SW_STATUS_IO, "repair: short write of a header page");
        *cleared += fixed;
    }
    return SW_OK;
}

/* Steps 1-3 of repair: every drop is written to the files (tombstones
 * appended to the current journal, void headers, damaged header slots
 * zeroed). The tombstones are appended without a sync each, even in SYNC
 * mode: the journal is synced once after them (a repair of n keys took n
 * fdatasyncs, only for the journal to be rewritten right after). */
static sw_status repair_drop(sw_store *s, sw_store_repair_result *r)
{
    /* 1. Stripes whose extent fails its check (or cannot be read). */
    bad_slots b;
    memset(&b, 0, sizeof b);
    verify_state vs;
    memset(&vs, 0, sizeof vs);
    vs.fn = collect_bad;
    vs.ctx = &b;
    sw_status st = verify_locked(s, &vs);
    if (st == SW_OK && b.oom)
        st = sw_fail(SW_STATUS_NO_MEMORY, "repair: list of bad stripes");
    for (size_t i = 0; i < b.n && st == SW_OK; i++) {
        if (!s->slots[b.a[i]].used)
            continue;
        st = sw_store_remove_slot(s, b.a[i]);
        r->keys_dropped_corrupt += st == SW_OK;
    }
    free(b.a);
    SW_TRY(st);
    /* 2. Keys that cannot be proven current: a tombstone each, the keys
     * collected in one pass over the set (erasing while scanning it would
     * move entries behind the scan). */
    size_t nu = (size_t)s->unprov.n, k = 0;
    sw_store_key *keys = nu ? (sw_store_key *)malloc(nu * sizeof *keys) : NULL;
    if (nu && !keys)
        return sw_fail(SW_STATUS_NO_MEMORY, "repair: %zu unprovable keys", nu);
    for (uint64_t i = 0; s->unprov.a && i <= s->unprov.mask; i++)
        if (s->unprov.a[i].used)
            keys[k++] = s->unprov.a[i].key;
    for (size_t i = 0; i < k && st == SW_OK; i++) {
        sw_store_record rec = {SW_STORE_REC_DEL, keys[i], 0, 0, 0, 0, 0};
        st = sw_store_journal_append_next(s, &rec);
        if (st == SW_OK) {
            sw_keymap_erase(&s->unprov, &keys[i]);
            r->keys_dropped_unprovable++;
        }
    }
    free(keys);
    SW_TRY(st);
    /* 3. Damaged header slots (written directly: the cached page is
     * forgotten). */
    s->hpage_off = UINT64_MAX;
    st = clear_bad_headers(s, &r->headers_cleared);
    s->hpage_off = UINT64_MAX;
    return st;
}

static sw_status repair_locked(sw_store *s, sw_store_repair_result *r)
{
    const sw_store_durability dur = s->durability;
    s->durability = SW_STORE_DURABILITY_PROCESS;
    sw_status st = repair_drop(s, r);
    s->durability = dur;
    /* The drops are durable before the journal is rewritten: should the
     * rewrite fail, the old journal (still damaged: verify keeps failing)
     * records them. */
    if (fdatasync(s->journal_fd) != 0 && st == SW_OK)
        st = sw_store_errno(s, errno, "repair: fdatasync(journal)");
    SW_TRY(st);
    /* 4. A fresh journal: the snapshot of what is left. Its mark covers
     * every header in the data file, which is synced first. */
    if (fdatasync(s->data_fd) != 0)
        return sw_store_errno(s, errno, "repair: fdatasync(data)");
    SW_TRY(sw_store_compact_journal(s));
    r->journal_records = s->st.journal_records;
    s->st.journal_dropped = 0;
    s->st.journal_damaged = 0;
    s->st.headers_bad = 0;
    s->st.extents_discarded = 0;
    s->st.journal_recovered = 0;
    s->deletes_redone = 0;
    s->voids_pending = 0;
    s->inflight_found = 0;
    return SW_OK;
}

sw_status sw_store_repair(sw_store *s, sw_store_repair_result *res)
{
    if (res && res->struct_size < 8)
        return sw_fail(SW_STATUS_INVALID, "sw_store_repair: res->struct_size < 8");
    SW_TRY(scan_enter(s, "sw_store_repair"));
    sw_store_repair_result r;
    memset(&r, 0, sizeof r);
    sw_status st = s->read_only
                       ? sw_fail(SW_STATUS_INVALID, "sw_store_repair: the store is open read-only")
                       : repair_locked(s, &r);
    pthread_mutex_unlock(&s->lock);
    if (res) {
        uint32_t want = res->struct_size;
        r.struct_size = want;
        memcpy(res, &r, want < sizeof r ? want : sizeof r);
    }
    return st;
}
