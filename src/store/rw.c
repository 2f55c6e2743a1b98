/* Block store data path: write (extent, then journal, then publish) and
 * delete. Reads are in read_sync.c (synchronous) and read_async.c (tickets). */
#include "store/store_internal.h"

#include "store/remote_tier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sw_status io_error(sw_store *s, const sw_io_op *op, const char *what)
{
    s->st.io_errors++;
    if (op->res < 0)
        return sw_store_errno(s, (int)-op->res, what);
    return sw_fail(SW_STATUS_IO, "%s: short transfer (%lld of %zu bytes at offset %llu)", what,
                   (long long)op->res, op->len, (unsigned long long)op->off);
}

/* Removes the stripe in slot v: journal tombstone first (so that replay
 * never maps the key to a slot that is about to be overwritten), then a
 * void header over its extent header with the tombstone's sequence number,
 * so that a journal that loses the tombstone cannot serve the stripe again
 * (open finds the void newer than the key's last record and redoes the
 * delete). A failed void write leaves the delete standing (it is in the
 * journal) and marks the handle failed: the protection it gives is gone. */
sw_status sw_store_remove_slot(sw_store *s, uint32_t v)
{
    sw_slot *e = &s->slots[v];
    sw_store_record r = {SW_STORE_REC_DEL, e->key, e->generation, 0, 0, 0, 0};
    r.key.reserved = 0;
    SW_TRY(sw_store_journal_append_next(s, &r));
    sw_status st = sw_store_void_extent(s, v, &r.key, r.generation, r.seq);
    sw_store_index_remove(s, v);
    if (st != SW_OK) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", sw_last_error());
        s->failed = 1;
        return sw_fail(st, "the delete is in the journal, but its void header could not be "
                       "written (the handle is marked failed): %s", keep);
    }
    return SW_OK;
}

sw_status sw_store_evict_lru(sw_store *s, uint32_t avoid)
{
    uint32_t v = sw_store_lru_victim(s, avoid);
    if (v == SW_NIL && avoid != SW_NIL)
        /* The only stripe is the one being overwritten: evicting it first
         * would lose it if the new version then failed (the contract keeps
         * the previous stripe on any failure). */
        return sw_fail(SW_STATUS_FULL, "store is full: %u of %u extents used, and the only "
                       "stripe to evict is the one being overwritten (an overwrite needs one "
                       "free extent)", s->used_slots, s->nslots);
    if (v == SW_NIL)
        return sw_fail(SW_STATUS_INTERNAL, "store full but nothing to evict");
    SW_TRY(sw_store_remove_slot(s, v));
    s->st.evictions++;
    return SW_OK;
}

static sw_status write_extent(sw_store *s, const sw_store_key *key, const void *src,
                              size_t bytes, uint32_t slot, uint32_t old, uint64_t *gen_out);

static sw_status store_write(sw_store *s, const sw_store_key *key, const void *src,
                             size_t bytes, uint64_t *gen_out)
{
    if (s->read_only)
        return sw_fail(SW_STATUS_INVALID, "the store is open read-only");
    uint32_t old = sw_store_index_find(s, key);
    uint32_t slot = sw_store_place(s, key, old);
    if (slot == SW_NIL) {
        if (s->full_policy == SW_STORE_FULL_REFUSE)
            return sw_fail(SW_STATUS_FULL, "store is full: %u of %u extents used (policy: refuse%s)",
                           s->used_slots, s->nslots,
                           old != SW_NIL ? "; an overwrite needs one free extent" : "");
        SW_TRY(sw_store_evict_lru(s, old));
        slot = sw_store_place(s, key, old);
        SW_ASSERT_RET(slot != SW_NIL);
    }
    sw_status st = write_extent(s, key, src, bytes, slot, old, gen_out);
    if (st != SW_OK)
        sw_store_place_abort(s, slot);
    return st;
}

/* Writes the header page in s->hpage again with slot's header as `was`
 * (64 bytes): undoes a header write whose operation is not acknowledged.
 * A failure marks the handle failed (the header may be on disk: then the
 * next open finds it one past the journal and checks its payload). */
static void header_undo(sw_store *s, uint32_t slot, size_t at, const uint8_t *was)
{
    memcpy(s->hpage + at, was, SW_STORE_HDR_BYTES);
    if (sw_store_header_page_write(s, slot) != SW_OK)
        s->failed = 1;
}

static sw_status write_extent(sw_store *s, const sw_store_key *key, const void *src,
                              size_t bytes, uint32_t slot, uint32_t old, uint64_t *gen_out)
{
    uint64_t gen = s->generation + 1;
    uint32_t crc = sw_crc32c(src, bytes);
    /* The extent header and the journal record carry the same sequence
     * number: open compares them (recover.c). It is consumed only once the
     * record is written; every failure before that takes the header back
     * (or marks the handle failed), so no header of a failed write shares a
     * number with a later operation. */
    uint64_t seq = s->journal_seq + 1;

    /* The header page is patched and written whole: the other headers in it
     * are written back byte-identical, so even a torn page write cannot
     * damage them. It is read only when it is not the page this handle
     * wrote last (at capacity, an eviction's void usually is that page). */
    char *pay = s->bounce;
    size_t at = 0;
    SW_TRY(sw_store_header_page(s, slot, &at));
    uint8_t was[SW_STORE_HDR_BYTES];
    memcpy(was, s->hpage + at, sizeof was);

    memcpy(pay, src, bytes);
    memset(pay + bytes, 0, s->g.slot_bytes - bytes);
    sw_store_extent_hdr h = {*key, gen, (uint32_t)bytes, crc, slot, seq, SW_STORE_EXTENT_LIVE};
    h.key.reserved = 0;
    sw_store_encode_extent_hdr(&h, (uint8_t *)s->hpage + at);
    uint64_t hdr_off = s->hpage_off;
    /* Both in flight together (ordering them cost ~20% per O_DIRECT write
     * on the bench VM): a killed writer may leave the header over a payload
     * that did not land; open drops such a torn extent (recover.c). */
    sw_io_op *op = s->ops;
    op[0] = (sw_io_op){s->data_fd, 1, pay, s->g.slot_bytes, sw_store_slot_off(s, slot), 0};
    op[1] = (sw_io_op){s->data_fd, 1, s->hpage, SW_STORE_ALIGN, hdr_off, 0};
    if (sw_io_run(s->io, op, 2)) {
        sw_status st = io_error(s, op[0].res != (int64_t)op[0].len ? &op[0] : &op[1],
                                "write extent");
        char keep[512];
        snprintf(keep, sizeof keep, "%s", sw_last_error());
        header_undo(s, slot, at, was);
        sw_fail(st, "%s", keep);
        return st;
    }
    if (s->durability == SW_STORE_DURABILITY_SYNC && fdatasync(s->data_fd) != 0) {
        s->failed = 1; /* after a failed fsync the page state is unknown */
        return sw_store_errno(s, errno, "fdatasync(data)");
    }

    sw_store_record r = {SW_STORE_REC_PUT, h.key, gen, slot, (uint32_t)bytes, crc, seq};
    sw_status jst = sw_store_journal_append(s, &r);
    if (jst != SW_OK) {
        /* Not acknowledged: its header must not outlive the failure (a later
         * open would find it newer than the journal). */
        char keep[512];
        snprintf(keep, sizeof keep, "%s", sw_last_error());
        header_undo(s, slot, at, was);
        sw_fail(jst, "%s", keep);
        return jst;
    }
    s->journal_seq = seq;

    /* Published only now: the extent and its record are complete. */
    s->generation = gen;
    sw_slot *e = &s->slots[slot];
    e->key = h.key;
    e->generation = gen;
    e->seq = seq;
    e->length = (uint32_t)bytes;
    e->crc = crc;
    sw_store_index_publish(s, slot);
    sw_status vst = SW_OK;
    if (old != SW_NIL) {
        /* The version the overwrite replaced keeps a live header in the
         * slot it leaves: a void over it with this put's number, after the
         * record (written with the new header, a torn put that open drops
         * would take the acknowledged old version with it). Without it a
         * journal that later lost this record and the key's delete would
         * find that header and no newer one of the key, and serve the old
         * version (docs/store.md, "why this is enough"). */
        uint64_t ogen = s->slots[old].generation;
        sw_store_slot_release(s, old);
        vst = sw_store_void_extent(s, old, &h.key, ogen, seq);
    }
    if (s->unprov.n)
        sw_keymap_erase(&s->unprov, &h.key);
    sw_store_host_put(s, slot, src);
    s->st.writes++;
    s->st.bytes_written += bytes;
    if (gen_out)
        *gen_out = gen;
    if (vst != SW_OK) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", sw_last_error());
        s->failed = 1;
        return sw_fail(vst, "the write is in the journal, but the void header over its previous "
                       "extent could not be written (the handle is marked failed; the next "
                       "open writes it): %s", keep);
    }
    return SW_OK;
}

/* Fetched stripes are written as sw_store_write writes (a new local
 * generation), not queued back to the remote. A key with a live local
 * stripe is left alone (a local write that raced with the fetch wins), and
 * so is an unprovable one: the remote copy may be older than the version
 * the journal lost (write-through can lag), and writing it would clear the
 * mark. A read-only handle's tier never calls this. */
size_t sw_store_write_back(void *store, size_t n, const sw_store_key *keys,
                           const void *const *src, const size_t *bytes)
{
    sw_store *s = (sw_store *)store;
    size_t done = 0;
    pthread_mutex_lock(&s->lock);
    if (!s->failed && !s->read_only) {
        sw_store_reads_drain(s);
        for (size_t i = 0; i < n; i++) {
            if (sw_store_index_find(s, &keys[i]) != SW_NIL || sw_store_unprovable(s, &keys[i]))
                continue;
            if (store_write(s, &keys[i], src[i] ? src[i] : "", bytes[i], NULL) == SW_OK)
                done++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return done;
}

sw_status sw_store_write(sw_store *s, const sw_store_key *key, const void *src, size_t bytes,
                         uint64_t *generation)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_store_write: store is NULL");
    SW_TRY(sw_store_check_key(key));
    if (!src && bytes)
        return sw_fail(SW_STATUS_INVALID, "sw_store_write: src is NULL");
    if (bytes > s->g.stripe_bytes)
        return sw_fail(SW_STATUS_INVALID, "stripe of %zu bytes > stripe_bytes %u", bytes,
                       s->g.stripe_bytes);
    SW_TRY(sw_store_enter(s));
    uint64_t gen = 0;
    sw_status st = store_write(s, key, src ? src : "", bytes, &gen);
    pthread_mutex_unlock(&s->lock);
    if (st == SW_OK) {
        if (generation)
            *generation = gen;
        /* Write-through: a copy is queued for the remote (outside the lock:
         * a full queue may make this writer wait, bounded). */
        if (s->rt)
            sw_remote_tier_enqueue(s->rt, key, src ? src : "", bytes, gen);
    }
    return st;
}

sw_status sw_store_delete(sw_store *s, const sw_store_key *key)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_store_delete: store is NULL");
    SW_TRY(sw_store_check_key(key));
    SW_TRY(sw_store_enter(s));
    sw_status st = SW_OK;
    uint32_t v = sw_store_index_find(s, key);
    if (s->read_only) {
        st = sw_fail(SW_STATUS_INVALID, "the store is open read-only");
    } else if (v == SW_NIL && sw_store_unprovable(s, key)) {
        /* no extent: the tombstone alone supersedes its unprovable record */
        sw_store_record r = {SW_STORE_REC_DEL, *key, 0, 0, 0, 0, 0};
        r.key.reserved = 0;
        st = sw_store_journal_append_next(s, &r);
        if (st == SW_OK) {
            sw_keymap_erase(&s->unprov, key);
            s->st.deletes++;
        }
    } else if (v == SW_NIL) {
        st = sw_fail(SW_STATUS_NOT_FOUND, "no stripe for this key");
    } else {
        st = sw_store_remove_slot(s, v);
        if (st == SW_OK)
            s->st.deletes++;
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}
