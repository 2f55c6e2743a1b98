/* What open does after the journal replay: every extent header of the data
 * file is compared with the journal, so that damage to the journal can lose
 * a stripe but never make an older version or a deleted stripe current.
 * Also the key sets (store_internal.h) and the void header writes.
 *
 * Why this is enough (docs/store.md, "Damage"). Every operation takes the
 * next store-wide sequence number and writes it into both files: a put
 * writes its extent (payload and header), then its journal record, then --
 * an overwrite, which always goes to another slot -- a void header with its
 * number over the version it replaced; a delete or eviction writes its
 * tombstone and then a void header over the deleted extent's header. So
 * every live header of a key other than its current version has a newer
 * header of the key in the data file (a killed writer can leave a void
 * undone: the newer header then is the current version, which only an
 * operation on the key can move, and the next read-write open writes the
 * missing voids first: void_leftovers). A read serves a key only from the
 * slot the journal maps it to, when that header is live with the record's
 * number and open found no newer header of the key: by the invariant, its
 * current version. When the journal loses records (a flipped byte, a zeroed
 * page, a cut at any point), every key whose newest operation was lost has
 * a header newer than its last record in the journal -- or has no live
 * header left at all (every one overwritten by reuse), and then its reads
 * fail their header check or it is resolved as deleted.
 * Damage to the header pages instead makes a header invalid: the journal is
 * intact, reads of that stripe fail their header check.
 *
 * The one legitimate gap: a writer killed between a put's extent and its
 * record (or between a tombstone and its void) leaves the newest header one
 * past the journal's last record. A batch group (write_batch.c) is one
 * operation: its puts share one number, their extents are written together
 * and their records appended with one pwrite, so a kill can leave any of
 * its headers without a record -- all of them (one past the journal), or
 * those whose records the cut-short append did not reach (the newest
 * number, at the journal's end). That operation is taken from the data file
 * (a void: the delete is redone; a live extent with a good payload: the put
 * is taken, as if its record had landed -- which is also exactly right when
 * the journal's last record was cut off), or, when its payload does not
 * match (a torn write: header landed, payload not), dropped. Anything else
 * the journal lost makes its key unprovable: not served (SW_STATUS_CORRUPT) until written, deleted or
 * dropped by sw_store_repair. */
#include "store/store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------- header I/O -- */
sw_status sw_store_io_fail(sw_store *s, const sw_io_op *op, const char *what)
{
    s->st.io_errors++;
    if (op->res < 0)
        return sw_store_errno(s, (int)-op->res, what);
    return sw_fail(SW_STATUS_IO, "%s: short transfer (%lld of %zu bytes at offset %llu)", what,
                   (long long)op->res, op->len, (unsigned long long)op->off);
}

uint64_t sw_store_header_page_off(const sw_store *s, uint32_t slot, size_t *at)
{
    uint32_t run = slot / s->g.run_blocks, pos = slot % s->g.run_blocks;
    uint64_t page = (uint64_t)pos * SW_STORE_HDR_BYTES / SW_STORE_ALIGN * SW_STORE_ALIGN;
    if (at)
        *at = (size_t)(pos * SW_STORE_HDR_BYTES - page);
    return sw_store_run_off(s, run) + page;
}

sw_status sw_store_header_page(sw_store *s, uint32_t slot, size_t *at)
{
    uint64_t off = sw_store_header_page_off(s, slot, at);
    if (s->hpage_off == off)
        return SW_OK;
    s->hpage_off = UINT64_MAX;
    sw_io_op op = {s->data_fd, 0, s->hpage, SW_STORE_ALIGN, off, 0};
    if (sw_io_run(s->io, &op, 1))
        return sw_store_io_fail(s, &op, "read extent header page");
    s->hpage_off = off;
    return SW_OK;
}

sw_status sw_store_header_page_write(sw_store *s, uint32_t slot)
{
    uint64_t off = sw_store_header_page_off(s, slot, NULL);
    sw_io_op op = {s->data_fd, 1, s->hpage, SW_STORE_ALIGN, off, 0};
    if (sw_io_run(s->io, &op, 1)) {
        s->hpage_off = UINT64_MAX; /* what the page holds now is unknown */
        return sw_store_io_fail(s, &op, "write extent header page");
    }
    s->hpage_off = off;
    return SW_OK;
}

/* Read-modify-write of the 4 KiB header page that holds slot's header:
 * h (64 bytes) replaces it, the other headers are written back as read. */
static sw_status header_patch(sw_store *s, uint32_t slot, const uint8_t h[SW_STORE_HDR_BYTES])
{
    if (s->read_only)
        return sw_fail(SW_STATUS_INVALID, "the store is open read-only");
    size_t at = 0;
    SW_TRY(sw_store_header_page(s, slot, &at));
    memcpy(s->hpage + at, h, SW_STORE_HDR_BYTES);
    return sw_store_header_page_write(s, slot);
}

sw_status sw_store_void_extent(sw_store *s, uint32_t slot, const sw_store_key *key,
                               uint64_t generation, uint64_t seq)
{
    sw_store_extent_hdr h;
    memset(&h, 0, sizeof h);
    h.key = *key;
    h.key.reserved = 0;
    h.generation = generation;
    h.slot = slot;
    h.seq = seq;
    h.state = SW_STORE_EXTENT_VOID;
    uint8_t b[SW_STORE_HDR_BYTES];
    sw_store_encode_extent_hdr(&h, b);
    return header_patch(s, slot, b);
}

/* ------------------------------------------------------------ recovery -- */
/* A header newer than its key's last journal record (the newest one per key). */
typedef struct suspect {
    sw_store_extent_hdr h;
} suspect;

typedef struct suspects {
    suspect *a;
    size_t n, cap;
    sw_keymap at; /* key -> index in a (in seq) */
    /* Live headers that the journal has superseded but that are still live
     * on disk (a writer killed between a record and the void that follows
     * it): voided after the resolution (void_leftovers). */
    sw_store_extent_hdr *left;
    size_t nleft, capleft;
} suspects;

static sw_status leftover_add(suspects *x, const sw_store_extent_hdr *h)
{
    if (x->nleft == x->capleft) {
        size_t cap = x->capleft ? 2 * x->capleft : 16;
        sw_store_extent_hdr *a = (sw_store_extent_hdr *)realloc(x->left, cap * sizeof *a);
        if (!a)
            return sw_fail(SW_STATUS_NO_MEMORY, "open: %zu superseded headers", cap);
        x->left = a;
        x->capleft = cap;
    }
    x->left[x->nleft++] = *h;
    return SW_OK;
}

static sw_status suspect_add(suspects *x, const sw_store_extent_hdr *h)
{
    sw_keymap_ent *e = sw_keymap_find(&x->at, &h->key);
    if (e) {
        /* The newest header of the key; of a live and a void header with
         * the same number (a moving overwrite and its void over the slot
         * it left), the live one: that operation was a put. */
        const sw_store_extent_hdr *o = &x->a[e->seq].h;
        if (o->seq < h->seq || (o->seq == h->seq && h->state == SW_STORE_EXTENT_LIVE))
            x->a[e->seq].h = *h;
        return SW_OK;
    }
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 16;
        suspect *a = (suspect *)realloc(x->a, cap * sizeof *a);
        if (!a)
            return sw_fail(SW_STATUS_NO_MEMORY, "open: %zu suspect keys", cap);
        x->a = a;
        x->cap = cap;
    }
    x->a[x->n].h = *h;
    SW_TRY(sw_keymap_put(&x->at, &h->key, x->n));
    x->n++;
    return SW_OK;
}

/* The sequence number of the key's newest record in the (replayed)
 * journal; 0 when it has none. */
static uint64_t journal_seq_of(const sw_store *s, const sw_keymap *deleted, const sw_store_key *k)
{
    uint32_t v = sw_store_index_find(s, k);
    if (v != SW_NIL)
        return s->slots[v].seq;
    const sw_keymap_ent *e = sw_keymap_find(&s->unprov, k);
    if (e)
        return e->seq;
    e = sw_keymap_find(deleted, k);
    return e ? e->seq : 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* Reads every run's header page(s) in batches through the bounce buffer;
 * per valid header, compares with the journal and collects the suspects. */
static sw_status scan_headers(sw_store *s, const sw_keymap *deleted, uint64_t snap_seq,
                              int damaged, suspects *x, uint64_t *dmax)
{
    const uint32_t R = s->g.run_blocks;
    const size_t hb = s->g.run_header_bytes;
    size_t per = s->bounce_bytes / hb;
    if (per > s->ops_cap)
        per = s->ops_cap;
    for (uint64_t r0 = 0; r0 < s->g.nruns; r0 += per) {
        size_t nb = s->g.nruns - r0 < per ? (size_t)(s->g.nruns - r0) : per;
        for (size_t k = 0; k < nb; k++)
            s->ops[k] = (sw_io_op){s->data_fd, 0, s->bounce + k * hb, hb,
                                   sw_store_run_off(s, (uint32_t)(r0 + k)), 0};
        if (sw_io_run(s->io, s->ops, nb)) {
            for (size_t k = 0; k < nb; k++)
                if (s->ops[k].res != (int64_t)s->ops[k].len)
                    return sw_store_io_fail(s, &s->ops[k], "open: read run header page");
        }
        s->st.header_pages_read += nb * (hb / SW_STORE_ALIGN);
        for (size_t k = 0; k < nb; k++) {
            const uint8_t *page = (const uint8_t *)s->bounce + k * hb;
            const size_t used = (size_t)R * SW_STORE_HDR_BYTES;
            if (!all_zero(page + used, hb - used))
                s->st.headers_bad++; /* the padding after the last header */
            for (uint32_t p = 0; p < R; p++) {
                const uint8_t *b = page + (size_t)p * SW_STORE_HDR_BYTES;
                if (all_zero(b, SW_STORE_HDR_BYTES))
                    continue; /* never written, or a dropped torn write */
                uint32_t slot = (uint32_t)((r0 + k) * R + p);
                sw_store_extent_hdr h;
                if (sw_store_decode_extent_hdr(b, SW_STORE_HDR_BYTES, &h) != SW_OK ||
                    h.slot != slot || (h.state == SW_STORE_EXTENT_LIVE &&
                                       h.length > s->g.stripe_bytes)) {
                    s->st.headers_bad++;
                    continue;
                }
                if (h.generation > s->generation)
                    s->generation = h.generation;
                if (h.seq > *dmax)
                    *dmax = h.seq;
                uint64_t j = journal_seq_of(s, deleted, &h.key);
                /* A live header that is not the key's current version by
                 * the journal: its void (a delete's, or a moving
                 * overwrite's over the slot it left) did not land. */
                int left = h.state == SW_STORE_EXTENT_LIVE &&
                           sw_store_index_find(s, &h.key) != slot;
                if (j >= h.seq) {
                    /* the journal knows this operation or a later one */
                    if (left)
                        SW_TRY(leftover_add(x, &h));
                    continue;
                }
                /* A key the journal does not mention, below the snapshot's
                 * mark: deleted before the journal was last compacted --
                 * unless the journal lost records it cannot place. */
                if (j == 0 && h.seq <= snap_seq && !damaged) {
                    if (left)
                        SW_TRY(leftover_add(x, &h));
                    continue;
                }
                SW_TRY(suspect_add(x, &h));
            }
        }
    }
    return SW_OK;
}

static sw_status append(sw_store *s, uint32_t type, const sw_store_extent_hdr *h, uint64_t seq)
{
    if (s->read_only)
        return SW_OK; /* applied in memory only: the files stay as they are */
    sw_store_record r = {type, h->key, h->generation, 0, 0, 0, seq};
    if (type == SW_STORE_REC_PUT) {
        r.slot = h->slot;
        r.length = h->length;
        r.payload_crc = h->payload_crc;
    }
    return sw_store_journal_append(s, &r);
}

/* Does the payload of the live header h match its CRC? */
static sw_status payload_ok(sw_store *s, const sw_store_extent_hdr *h, int *ok)
{
    uint32_t slot = (uint32_t)h->slot;
    sw_io_op op = {s->data_fd, 0, s->bounce, s->g.slot_bytes, sw_store_slot_off(s, slot), 0};
    if (sw_io_run(s->io, &op, 1))
        return sw_store_io_fail(s, &op, "open: read extent");
    *ok = sw_crc32c(s->bounce, h->length) == h->payload_crc;
    return SW_OK;
}

/* The in-flight operation at open: its sequence number (the newest header
 * of the store), whether its records may be partly in the journal, and
 * what became of its puts so far. */
typedef struct flight {
    uint64_t dmax, jmax;
    int tail_ok;
    size_t left;      /* its live suspects not resolved yet */
    size_t rolled;    /* ... taken from the data file */
} flight;

/* Is the live header h (newer than its key's last record) a put of the
 * operation a killed writer left unfinished? The newest number of the
 * store, and either one past the journal (no record of it landed) or --
 * only a batch group's puts share a number -- the journal's newest, with
 * this put's record among those its append did not reach. */
static int in_flight(const flight *f, const sw_store_extent_hdr *h)
{
    return h->state == SW_STORE_EXTENT_LIVE && h->seq == f->dmax &&
           (h->seq == f->jmax + 1 || (h->seq == f->jmax && f->tail_ok));
}

static sw_status resolve(sw_store *s, const sw_store_extent_hdr *h, flight *f)
{
    const uint64_t max_journal_seq = f->jmax;
    uint32_t cur = sw_store_index_find(s, &h->key);
    if (h->state == SW_STORE_EXTENT_VOID) {
        /* A delete whose tombstone the journal lost (or a delete in flight
         * whose tombstone was the journal's last record... then it is not a
         * suspect): redone. */
        if (cur != SW_NIL)
            sw_store_index_remove(s, cur);
        sw_keymap_erase(&s->unprov, &h->key);
        s->st.journal_recovered++;
        s->deletes_redone++;
        return append(s, SW_STORE_REC_DEL, h, h->seq);
    }
    if (in_flight(f, h)) {
        /* The newest operation of the store, one past the journal: the put
         * a killed writer left without its record, or the journal's last
         * record was lost (or a put of a batch group whose append was cut
         * short). */
        int ok = 0;
        SW_TRY(payload_ok(s, h, &ok));
        f->left--;
        s->inflight_found++;
        if (!ok) {
            /* torn: the payload and header writes of a put are in flight
             * together and a killed writer can leave the header alone; such
             * a put was never acknowledged (its record comes after both),
             * so the key keeps what the journal says. (The other reading,
             * the journal's last record cut off AND the payload damaged,
             * takes two independent damages.) */
            s->st.extents_discarded++;
            if (s->read_only)
                return SW_OK;
            static const uint8_t zero[SW_STORE_HDR_BYTES];
            SW_TRY(header_patch(s, (uint32_t)h->slot, zero));
            /* No file carries its number any more: handed out again, so
             * that the next operation a killed writer leaves without its
             * record is again one past the journal (else it would be two
             * past, and its key unprovable with its acknowledged version).
             * Not while another put of its group carries it (taken from
             * the data file, or still to be resolved). */
            if (s->journal_seq == h->seq && !f->rolled && !f->left)
                s->journal_seq = max_journal_seq;
            return SW_OK;
        }
        uint32_t slot = (uint32_t)h->slot;
        if (s->slots[slot].used && cur != slot)
            sw_store_index_remove(s, slot); /* a key whose freeing record was lost */
        sw_slot *e = &s->slots[slot];
        e->key = h->key;
        e->generation = h->generation;
        e->seq = h->seq;
        e->length = h->length;
        e->crc = h->payload_crc;
        sw_store_index_publish(s, slot);
        if (cur != SW_NIL && cur != slot)
            sw_store_slot_release(s, cur);
        sw_keymap_erase(&s->unprov, &h->key);
        s->st.journal_recovered++;
        f->rolled++;
        return append(s, SW_STORE_REC_PUT, h, h->seq);
    }
    /* The journal lost a newer record of this key: what it says about the
     * key (an older version, a delete, nothing) cannot be trusted, and the
     * newer extent cannot be proven current either (a later operation on
     * the key may have been lost with it). Not served. */
    uint64_t u = h->seq;
    if (!s->read_only) {
        sw_store_record r = {SW_STORE_REC_UNPROV, h->key, 0, 0, 0, 0, 0};
        SW_TRY(sw_store_journal_append_next(s, &r));
        u = r.seq;
        /* The older version the journal points at is voided: should the
         * unprovable record itself be lost later, that void (newer than the
         * put's record) turns the key into a delete, never into that
         * version. */
        if (cur != SW_NIL)
            SW_TRY(sw_store_void_extent(s, cur, &h->key, s->slots[cur].generation, u));
    }
    if (cur != SW_NIL)
        sw_store_index_remove(s, cur);
    return sw_keymap_put(&s->unprov, &h->key, u);
}

/* The voids a killed writer did not write: over every live header that the
 * journal superseded (the key lives elsewhere, or was deleted), with the
 * key's newest sequence number -- so that at most one live header of a key
 * is not outnumbered by a newer header of it, its current version
 * (docs/store.md, "why this is enough"). Read-only: counted only. Those
 * whose key's newest number is the store's newest operation's (`newest`:
 * the newest of the headers and the journal -- a delete group's number is
 * in the journal only until its voids land) were left by that operation. */
static sw_status void_leftovers(sw_store *s, const sw_keymap *deleted, const suspects *x,
                                uint64_t newest)
{
    for (size_t i = 0; i < x->nleft; i++) {
        const sw_store_extent_hdr *h = &x->left[i];
        uint32_t slot = (uint32_t)h->slot;
        if (s->slots[slot].used || sw_store_index_find(s, &h->key) == slot)
            continue; /* the journal gives the slot to a key: not a leftover */
        uint64_t j = journal_seq_of(s, deleted, &h->key);
        s->voids_pending++;
        s->inflight_found += j == newest; /* left by the newest operation */
        if (s->read_only)
            continue;
        SW_TRY(sw_store_void_extent(s, slot, &h->key, h->generation, j > h->seq ? j : h->seq));
    }
    return SW_OK;
}

sw_status sw_store_recover(sw_store *s, sw_keymap *deleted, uint64_t max_journal_seq,
                           uint64_t snapshot_seq, int damaged, int group_tail_ok)
{
    suspects x;
    memset(&x, 0, sizeof x);
    uint64_t dmax = 0;
    sw_status st = scan_headers(s, deleted, snapshot_seq, damaged, &x, &dmax);
    if (s->journal_seq < dmax)
        s->journal_seq = dmax; /* never hand out a number a header carries */
    flight f = {dmax, max_journal_seq, group_tail_ok, 0, 0};
    for (size_t i = 0; i < x.n; i++)
        f.left += (size_t)in_flight(&f, &x.a[i].h);
    for (size_t i = 0; i < x.n && st == SW_OK; i++)
        st = resolve(s, &x.a[i].h, &f);
    if (st == SW_OK)
        st = void_leftovers(s, deleted, &x, dmax > max_journal_seq ? dmax : max_journal_seq);
    free(x.a);
    free(x.left);
    sw_keymap_free(&x.at);
    return st;
}
