/* Batched deletes (sw_store_delete_batch): the result of n single deletes
 * in order -- a key without a stripe is reported, not an error -- with the
 * I/O of a group of them issued together. Per group: one write of its
 * tombstones to the journal (one fdatasync in SYNC mode), then one
 * sw_io_run reading the header pages of its extents and one writing them
 * back with the void headers, then the extents freed. A single delete
 * costs a journal write and a header page write, one after the other: a
 * sequence of a KV cache, hundreds of thousands of stripes, spent minutes
 * deleting one stripe at a time.
 *
 * Crash safety is the single delete's (docs/store.md): tombstones first,
 * voids after, so a lost void is redone by the next open from its
 * tombstone. A group is ONE operation with one sequence number, which its
 * tombstones and voids carry (as a write batch's group): a writer killed
 * between the two steps leaves the group's voids unwritten, all of the
 * journal's newest number -- one killed writer's operation for verify --
 * and a torn journal write loses a tail of the group's tombstones, whose
 * extents were not voided yet: those deletes did not happen. A group never
 * holds a key twice (the second is a key without a stripe, as for single
 * deletes), so a key has one tombstone of that number. */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct db_del {
    size_t idx;        /* index in the caller's keys */
    sw_store_key key;  /* reserved = 0 */
    uint32_t slot;     /* its extent, or SW_NIL: an unprovable key's tombstone only */
    uint64_t gen;      /* the extent's generation */
    uint32_t page;     /* its header page in the group's pages */
    size_t at;         /* its header's offset in that page */
} db_del;

/* The group's pages: distinct header page offsets, in the bounce buffer
 * (the handle's drained: it is the caller's, under the lock). */
typedef struct db_group {
    db_del *del;
    size_t n, cap;
    uint64_t *page_off;
    size_t npages;
    uint8_t *rec;
    sw_io_op *ops;
    sw_keymap keys;    /* the group's keys */
} db_group;

static void group_free(db_group *g)
{
    free(g->del);
    free(g->page_off);
    free(g->rec);
    free(g->ops);
    sw_keymap_free(&g->keys);
}

static sw_status group_alloc(const sw_store *s, db_group *g)
{
    memset(g, 0, sizeof *g);
    /* a header page each at most: the bounce buffer's pages */
    size_t cap = (size_t)s->tune.write_group_puts;
    const size_t room = s->bounce_bytes / SW_STORE_ALIGN;
    if (cap > room)
        cap = room;
    g->cap = cap ? cap : 1;
    g->del = (db_del *)calloc(g->cap, sizeof *g->del);
    g->page_off = (uint64_t *)calloc(g->cap, sizeof *g->page_off);
    g->rec = (uint8_t *)calloc(g->cap, SW_STORE_REC_BYTES);
    g->ops = (sw_io_op *)calloc(g->cap, sizeof *g->ops);
    if (!g->del || !g->page_off || !g->rec || !g->ops) {
        group_free(g);
        return sw_fail(SW_STATUS_NO_MEMORY, "sw_store_delete_batch: scratch for %zu deletes",
                       g->cap);
    }
    return SW_OK;
}

static char *page_buf(const sw_store *s, size_t k) { return s->bounce + k * SW_STORE_ALIGN; }

/* The failure of the group that starts at `first` (nothing of it done). */
static sw_status group_fail(sw_status st, size_t first)
{
    char keep[512];
    snprintf(keep, sizeof keep, "%s", sw_last_error());
    return sw_fail(st, "sw_store_delete_batch: the group from key %zu: %s (n_done %zu)", first,
                   keep, first);
}

/* Writes the group: tombstones, voids, then the index. On SW_OK every
 * delete of it stands. A journal failure leaves nothing of it (*stands 0:
 * its `deleted` entries cleared); a failure of the voids leaves the deletes
 * standing (*stands 1) and the handle failed, as sw_store_delete does. */
static sw_status group_flush(sw_store *s, db_group *g, size_t first, size_t last,
                             uint8_t *deleted, int *stands)
{
    *stands = 1;
    if (!g->n)
        return SW_OK;
    const uint64_t seq = s->journal_seq + 1;
    for (size_t j = 0; j < g->n; j++) {
        const db_del *d = &g->del[j];
        sw_store_record r = {SW_STORE_REC_DEL, d->key, d->slot == SW_NIL ? 0 : d->gen, 0, 0, 0,
                             seq};
        sw_store_encode_record(&r, g->rec + j * SW_STORE_REC_BYTES);
    }
    sw_status st = sw_store_journal_write(s, g->rec, g->n);
    if (st != SW_OK) {
        *stands = 0;
        for (size_t j = 0; deleted && j < g->n; j++)
            deleted[g->del[j].idx] = 0;
        g->n = 0;
        sw_keymap_free(&g->keys);
        return group_fail(st, first);
    }
    s->journal_seq = seq;
    /* the voids: each header page read, patched, written back */
    g->npages = 0;
    for (size_t j = 0; j < g->n; j++) {
        db_del *d = &g->del[j];
        if (d->slot == SW_NIL)
            continue;
        const uint64_t off = sw_store_header_page_off(s, d->slot, &d->at);
        /* a sequence's slots are mostly adjacent: the last page first */
        size_t k = g->npages;
        if (k && g->page_off[k - 1] == off) {
            k--;
        } else {
            k = 0;
            while (k < g->npages && g->page_off[k] != off)
                k++;
            if (k == g->npages) {
                g->page_off[k] = off;
                g->ops[k] = (sw_io_op){s->data_fd, 0, page_buf(s, k), SW_STORE_ALIGN, off, 0};
                g->npages++;
            }
        }
        d->page = (uint32_t)k;
    }
    s->hpage_off = UINT64_MAX; /* the handle's cached page may be one of them */
    if (g->npages && sw_io_run(s->io, g->ops, g->npages)) {
        size_t k = 0;
        while (g->ops[k].res == (int64_t)g->ops[k].len)
            k++;
        st = sw_store_io_fail(s, &g->ops[k], "read extent header page");
    }
    for (size_t j = 0; j < g->n && st == SW_OK; j++) {
        const db_del *d = &g->del[j];
        if (d->slot == SW_NIL)
            continue;
        sw_store_extent_hdr h;
        memset(&h, 0, sizeof h);
        h.key = d->key;
        h.generation = d->gen;
        h.slot = d->slot;
        h.seq = seq;
        h.state = SW_STORE_EXTENT_VOID;
        sw_store_encode_extent_hdr(&h, (uint8_t *)page_buf(s, d->page) + d->at);
    }
    for (size_t k = 0; k < g->npages && st == SW_OK; k++)
        g->ops[k] = (sw_io_op){s->data_fd, 1, page_buf(s, k), SW_STORE_ALIGN, g->page_off[k], 0};
    if (st == SW_OK && g->npages && sw_io_run(s->io, g->ops, g->npages)) {
        size_t k = 0;
        while (g->ops[k].res == (int64_t)g->ops[k].len)
            k++;
        st = sw_store_io_fail(s, &g->ops[k], "write extent header page");
    }
    /* the tombstones are in the journal: the deletes stand either way */
    for (size_t j = 0; j < g->n; j++) {
        const db_del *d = &g->del[j];
        if (d->slot != SW_NIL)
            sw_store_index_remove(s, d->slot);
        else
            sw_keymap_erase(&s->unprov, &d->key);
        s->st.deletes++;
    }
    g->n = 0;
    sw_keymap_free(&g->keys);
    if (st != SW_OK) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", sw_last_error());
        s->failed = 1;
        return sw_fail(st, "sw_store_delete_batch: keys %zu..%zu are deleted in the journal, but "
                       "their void headers could not be written (the handle is marked failed): "
                       "%s", first, last, keep);
    }
    return SW_OK;
}

/* *done: keys [0, *done) handled (deleted, or without a stripe). */
static sw_status batch_locked(sw_store *s, size_t n, const sw_store_key *keys, uint8_t *deleted,
                              size_t *done)
{
    db_group g;
    SW_TRY(group_alloc(s, &g));
    sw_status st = SW_OK;
    int stands = 1;
    size_t first = 0; /* the current group's first key */
    for (size_t i = 0; i < n && st == SW_OK; i++) {
        sw_store_key k = keys[i];
        k.reserved = 0;
        /* a key the group already deletes: none for this one, as for the
         * second of two single deletes */
        if (g.n && sw_keymap_find(&g.keys, &k)) {
            if (deleted)
                deleted[i] = 0;
            continue;
        }
        const uint32_t v = sw_store_index_find(s, &k);
        if (v == SW_NIL && !sw_store_unprovable(s, &k)) {
            if (deleted)
                deleted[i] = 0;
            continue;
        }
        if (g.n == g.cap) {
            st = group_flush(s, &g, first, i - 1, deleted, &stands);
            *done = stands ? i : first;
            if (st != SW_OK)
                break;
        }
        if (g.n == 0)
            first = i;
        st = sw_keymap_put(&g.keys, &k, 0);
        if (st != SW_OK) {
            for (size_t j = 0; deleted && j < g.n; j++)
                deleted[g.del[j].idx] = 0;
            *done = first;
            g.n = 0;
            break;
        }
        db_del *d = &g.del[g.n++];
        d->idx = i;
        d->key = k;
        d->slot = v;
        d->gen = v == SW_NIL ? 0 : s->slots[v].generation;
        if (deleted)
            deleted[i] = 1;
    }
    if (st == SW_OK) {
        st = group_flush(s, &g, first, n - 1, deleted, &stands);
        *done = stands ? n : first;
    }
    group_free(&g);
    return st;
}

sw_status sw_store_delete_batch(sw_store *s, size_t n, const sw_store_key *keys, uint8_t *deleted,
                                size_t *n_done)
{
    size_t done = 0;
    if (n_done)
        *n_done = 0;
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_store_delete_batch: store is NULL");
    if (n == 0)
        return SW_OK;
    if (!keys)
        return sw_fail(SW_STATUS_INVALID, "sw_store_delete_batch: keys is NULL with n = %zu", n);
    for (size_t i = 0; i < n; i++)
        if (sw_store_check_key(&keys[i]) != SW_OK) {
            char keep[512];
            snprintf(keep, sizeof keep, "%s", sw_last_error());
            return sw_fail(SW_STATUS_INVALID, "sw_store_delete_batch: key %zu: %s (nothing "
                           "deleted)", i, keep);
        }
    if (deleted)
        memset(deleted, 0, n);
    SW_TRY(sw_store_enter(s));
    sw_status st = s->read_only
                       ? sw_fail(SW_STATUS_INVALID, "sw_store_delete_batch: the store is open "
                                 "read-only")
                       : batch_locked(s, n, keys, deleted, &done);
    pthread_mutex_unlock(&s->lock);
    if (n_done)
        *n_done = done;
    return st;
}
