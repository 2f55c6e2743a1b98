/* Batched writes (sw_store_write_batch): the result of n single writes in
 * order, with the I/O of a group of them issued together. Per group: one
 * sw_io_run with every payload extent (adjacent slots merged) and every
 * header page the group touches (each written once), one fdatasync of the
 * data file in SYNC mode, one pwrite of the group's journal records (one
 * fdatasync), then the publish, then one sw_io_run of the void headers over
 * the previous versions of its overwrites. A single write costs two
 * O_DIRECT writes and a pwrite, one after the other (~140 us per 8 KiB
 * stripe on the bench VM): a KV cache offload of hundreds of thousands of
 * stripes spends nearly all its time waiting for them.
 *
 * Crash safety is the single write's (docs/store.md): a group is ONE
 * operation with one sequence number, which all its extent headers and
 * journal records carry. A writer killed before its append leaves the
 * group's headers one past the journal, and one killed during it leaves
 * the rest of them at the journal's newest number; open takes each such
 * put from the data file or drops it when torn (recover.c). A group never
 * holds a key twice, so a key has at most one header of that number.
 *
 * Same result as n single writes: every decision that depends on the
 * writes before it is made as the single writes would make it. Slots are
 * taken as they are chosen (sw_store_slot_reserve); a group ends where the
 * next write's slot or eviction would depend on the group being published
 * (a key already in the group, a slot that one of its overwrites frees, an
 * eviction whose victim would be one of the group's puts), and before a
 * write that a full store refuses. Evictions are done while the group is
 * planned (a tombstone and a void each, as now); the host-tier entries they
 * free go back to the free list just before the put that caused them is
 * copied into the host tier, where n single writes would have freed them. */
#include "store/store_internal.h"

#include "store/remote_tier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct wb_put {
    size_t idx;              /* index in the caller's arrays */
    sw_store_key key;        /* reserved = 0 */
    uint32_t slot, old;      /* its slot; the previous version's or SW_NIL */
    uint32_t crc;
    uint32_t defer_end;      /* deferred host entries to free before its host put */
    int adopted;             /* its reserve adopted the run (unreserve undoes it) */
    uint32_t page;           /* index of its header page in the group's pages */
    size_t at;               /* offset of its header in that page */
    uint32_t vpage;          /* the previous version's header: its page in
                              * vpage_off (group_voids) ... */
    size_t vat;              /* ... and its offset in that page */
    uint64_t ogen;           /* the previous version's generation */
    uint8_t was[SW_STORE_HDR_BYTES]; /* the header slot before this put */
} wb_put;

/* The scratch of a handle's batch writes, allocated at the first batch and
 * kept until close. The pages and payloads live in the bounce buffer:
 * [cap header pages | cap payload slots]. */
typedef struct sw_write_batch {
    size_t cap;              /* puts per group */
    size_t n;                /* puts in the current group */
    wb_put *put;
    uint64_t *page_off;      /* the group's header pages (file offsets) */
    size_t npages;
    uint64_t *order;         /* (slot << 32 | put): payload layout by slot */
    uint8_t *rec;            /* cap journal records */
    uint32_t *host_defer;    /* cap deferred host entries */
    uint64_t *vpage_off;     /* the header pages of the previous versions */
    char **vpage_buf;        /* ... and where they are (a group page or a
                              * page of the payload area) */
    sw_io_op *ops;           /* 2 x cap + 8: a group's payload and page I/O */
} sw_write_batch;

void sw_store_write_batch_free(sw_store *s)
{
    sw_write_batch *b = s->wb;
    if (!b)
        return;
    free(b->put);
    free(b->page_off);
    free(b->order);
    free(b->rec);
    free(b->host_defer);
    free(b->vpage_off);
    free(b->vpage_buf);
    free(b->ops);
    free(b);
    s->wb = NULL;
}

/* Puts per group (tuning write_group_puts: at most the bounce buffer's
 * room for a header page and a payload slot each). A group's I/O goes
 * queue_depth requests at a time (sw_io_run); its cost is mostly the round
 * trips of its steps (payloads, journal, voids), whatever its size. */
static size_t group_cap(const sw_store *s)
{
    const int64_t g = s->tune.write_group_puts;
    return g > 0 ? (size_t)g : 1;
}

static sw_status batch_scratch(sw_store *s)
{
    if (s->wb)
        return SW_OK;
    sw_write_batch *b = (sw_write_batch *)calloc(1, sizeof *b);
    if (!b)
        return sw_fail(SW_STATUS_NO_MEMORY, "sw_store_write_batch: scratch");
    b->cap = group_cap(s);
    b->put = (wb_put *)calloc(b->cap, sizeof *b->put);
    b->page_off = (uint64_t *)calloc(b->cap, sizeof *b->page_off);
    b->order = (uint64_t *)calloc(b->cap, sizeof *b->order);
    b->rec = (uint8_t *)calloc(b->cap, SW_STORE_REC_BYTES);
    b->host_defer = (uint32_t *)calloc(b->cap, sizeof *b->host_defer);
    b->vpage_off = (uint64_t *)calloc(b->cap, sizeof *b->vpage_off);
    b->vpage_buf = (char **)calloc(b->cap, sizeof *b->vpage_buf);
    b->ops = (sw_io_op *)calloc(2 * b->cap + 8, sizeof *b->ops);
    s->wb = b;
    if (!b->put || !b->page_off || !b->order || !b->rec || !b->host_defer || !b->vpage_off ||
        !b->vpage_buf || !b->ops) {
        sw_store_write_batch_free(s);
        return sw_fail(SW_STATUS_NO_MEMORY, "sw_store_write_batch: scratch for %zu puts",
                       group_cap(s));
    }
    return SW_OK;
}

static char *page_buf(const sw_store *s, size_t j) { return s->bounce + j * SW_STORE_ALIGN; }
static char *payload_buf(const sw_store *s, const sw_write_batch *b, size_t rank)
{
    return s->bounce + b->cap * SW_STORE_ALIGN + rank * s->g.slot_bytes;
}

/* ------------------------------------------------------------- planning -- */
/* Frees the batch's deferred host entries up to `end` (in the order they
 * were dropped: b->host_defer; the store's pointer to it is set only
 * around an eviction call). */
static void host_undefer(sw_store *s, const sw_write_batch *b, uint32_t *next, uint32_t end)
{
    for (; *next < end; (*next)++)
        sw_store_host_free(s, b->host_defer[*next]);
}

/* Gives back the slots of a group that will not be published (newest
 * first, so that a run adopted by an earlier put is unmapped when it
 * empties) and frees the host entries its evictions dropped. */
static void group_abort(sw_store *s, sw_write_batch *b)
{
    for (size_t j = b->n; j-- > 0;)
        sw_store_slot_unreserve(s, b->put[j].slot, b->put[j].adopted);
    uint32_t next = 0;
    host_undefer(s, b, &next, s->host_ndefer);
    s->host_ndefer = 0;
    b->n = 0;
}

/* The slot n single writes would give `key`: they would have published the
 * group, freeing the previous versions of its overwrites (pending olds),
 * which are still taken here. Placement is retried with those counted
 * free; *cut when its result depends on them (it is one of them, or one
 * of them would empty its run, which frees the run). SW_NIL: full. */
static uint32_t place_as_single(sw_store *s, const sw_write_batch *b, const sw_store_key *key,
                                uint32_t old, int *cut)
{
    const uint32_t R = s->g.run_blocks;
    size_t np = 0;
    int empties = 0;
    for (size_t j = 0; j < b->n; j++) {
        uint32_t o = b->put[j].old;
        if (o == SW_NIL)
            continue;
        np++;
        s->slots[o].used = 0;
        empties |= --s->runs[o / R].used == 0;
    }
    if (!np)
        return sw_store_place(s, key, old);
    s->used_slots -= (uint32_t)np;
    uint32_t cursor = s->scan_cursor;
    uint32_t slot = empties ? SW_NIL : sw_store_place(s, key, old);
    for (size_t j = 0; j < b->n; j++) {
        uint32_t o = b->put[j].old;
        if (o == SW_NIL)
            continue;
        s->slots[o].used = 1;
        s->runs[o / R].used++;
    }
    s->used_slots += (uint32_t)np;
    if (empties || slot == SW_NIL || s->slots[slot].used) {
        s->scan_cursor = cursor;
        *cut = 1;
        return SW_NIL;
    }
    return slot;
}

/* Plans write i into the group: its slot, after the eviction a single write
 * would make. *cut: the group must be written first (then plan i again). */
static sw_status plan_put(sw_store *s, sw_write_batch *b, size_t i, const sw_store_key *key,
                          int *cut)
{
    *cut = 0;
    if (b->n == b->cap) {
        *cut = 1;
        return SW_OK;
    }
    for (size_t j = 0; j < b->n; j++)
        if (sw_store_key_eq(&b->put[j].key, key)) {
            *cut = 1; /* a key twice: the later one overwrites the published one */
            return SW_OK;
        }
    uint32_t old = sw_store_index_find(s, key);
    uint32_t slot = place_as_single(s, b, key, old, cut);
    if (*cut)
        return SW_OK;
    if (slot == SW_NIL) {
        if (s->full_policy == SW_STORE_FULL_REFUSE) {
            if (b->n) {
                *cut = 1; /* the writes before it are done first */
                return SW_OK;
            }
            return sw_fail(SW_STATUS_FULL, "store is full: %u of %u extents used (policy: refuse%s)",
                           s->used_slots, s->nslots,
                           old != SW_NIL ? "; an overwrite needs one free extent" : "");
        }
        /* The single write's victim is the LRU tail other than `old`; with
         * the group published at the LRU head that is the same stripe,
         * unless only the group is left to evict. */
        if (b->n && sw_store_lru_victim(s, old) == SW_NIL) {
            *cut = 1;
            return SW_OK;
        }
        s->host_defer = b->host_defer;
        sw_status st = sw_store_evict_lru(s, old);
        s->host_defer = NULL;
        SW_TRY(st);
        slot = sw_store_place(s, key, old); /* no pending olds: the store was full */
        SW_ASSERT_RET(slot != SW_NIL);
    }
    wb_put *p = &b->put[b->n++];
    memset(p, 0, sizeof *p);
    p->idx = i;
    p->key = *key;
    p->key.reserved = 0;
    p->slot = slot;
    p->old = old;
    p->defer_end = s->host_ndefer;
    p->adopted = sw_store_slot_reserve(s, slot, key);
    return SW_OK;
}

/* ------------------------------------------------------------ group I/O -- */
/* The group's header pages into the bounce buffer: the handle's cached
 * page copied, the others read (together). */
static sw_status pages_load(sw_store *s, sw_write_batch *b, size_t *bad_put)
{
    b->npages = 0;
    for (size_t j = 0; j < b->n; j++) {
        wb_put *p = &b->put[j];
        uint64_t off = sw_store_header_page_off(s, p->slot, &p->at);
        size_t k = 0;
        while (k < b->npages && b->page_off[k] != off)
            k++;
        if (k == b->npages)
            b->page_off[b->npages++] = off;
        p->page = (uint32_t)k;
    }
    size_t nops = 0;
    for (size_t k = 0; k < b->npages; k++) {
        if (b->page_off[k] == s->hpage_off) {
            memcpy(page_buf(s, k), s->hpage, SW_STORE_ALIGN);
            continue;
        }
        b->ops[nops++] = (sw_io_op){s->data_fd, 0, page_buf(s, k), SW_STORE_ALIGN,
                                    b->page_off[k], 0};
    }
    if (!nops || !sw_io_run(s->io, b->ops, nops))
        return SW_OK;
    for (size_t k = 0; k < nops; k++)
        if (b->ops[k].res != (int64_t)b->ops[k].len) {
            for (size_t j = 0; j < b->n; j++)
                if (b->page_off[b->put[j].page] == b->ops[k].off) {
                    *bad_put = j;
                    break;
                }
            return sw_store_io_fail(s, &b->ops[k], "read extent header page");
        }
    return SW_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Payloads into the bounce buffer in slot order (CRC32C computed while
 * copying), headers patched into their pages (the slot's old header kept
 * for an undo). */
static void group_fill(sw_store *s, sw_write_batch *b, const void *const *src,
                       const size_t *bytes, uint64_t seq, uint64_t gen0)
{
    for (size_t j = 0; j < b->n; j++)
        b->order[j] = (uint64_t)b->put[j].slot << 32 | j;
    qsort(b->order, b->n, sizeof *b->order, cmp_u64);
    for (size_t r = 0; r < b->n; r++) {
        wb_put *p = &b->put[(uint32_t)b->order[r]];
        size_t len = bytes[p->idx];
        char *pay = payload_buf(s, b, r);
        p->crc = sw_crc32c_copy(pay, src[p->idx] ? src[p->idx] : "", len);
        memset(pay + len, 0, s->g.slot_bytes - len);
    }
    for (size_t j = 0; j < b->n; j++) {
        wb_put *p = &b->put[j];
        uint8_t *h = (uint8_t *)page_buf(s, p->page) + p->at;
        memcpy(p->was, h, SW_STORE_HDR_BYTES);
        sw_store_extent_hdr eh = {p->key, gen0 + j, (uint32_t)bytes[p->idx], p->crc, p->slot,
                                  seq, SW_STORE_EXTENT_LIVE};
        sw_store_encode_extent_hdr(&eh, h);
    }
}

/* The write ops: payloads of adjacent slots as one request, then each
 * header page once. */
static size_t group_ops(sw_store *s, const sw_write_batch *b)
{
    size_t nops = 0;
    for (size_t r = 0; r < b->n; r++) {
        uint64_t off = sw_store_slot_off(s, (uint32_t)(b->order[r] >> 32));
        sw_io_op *last = nops ? &b->ops[nops - 1] : NULL;
        if (last && r > 0 && last->off + last->len == off &&
            last->len + s->g.slot_bytes <= ((size_t)1 << 30)) { /* a request is < 4 GiB */
            last->len += s->g.slot_bytes;
            continue;
        }
        b->ops[nops++] = (sw_io_op){s->data_fd, 1, payload_buf(s, b, r), s->g.slot_bytes, off, 0};
    }
    for (size_t k = 0; k < b->npages; k++)
        b->ops[nops++] = (sw_io_op){s->data_fd, 1, page_buf(s, k), SW_STORE_ALIGN,
                                    b->page_off[k], 0};
    return nops;
}

/* The put (lowest index) whose extent or header page op k wrote. */
static size_t put_of_op(const sw_store *s, const sw_write_batch *b, const sw_io_op *op)
{
    size_t best = SIZE_MAX;
    for (size_t j = 0; j < b->n; j++) {
        const wb_put *p = &b->put[j];
        uint64_t e = sw_store_slot_off(s, p->slot);
        int hit = (char *)op->buf < payload_buf(s, b, 0) ? b->page_off[p->page] == op->off
                                                          : e >= op->off && e < op->off + op->len;
        if (hit && (best == SIZE_MAX || p->idx < b->put[best].idx))
            best = j;
    }
    return best == SIZE_MAX ? 0 : best;
}

/* Writes the group's header pages back with every put's slot as it was:
 * its headers must not outlive a failed group (a later open would find
 * them newer than the journal). A failure marks the handle failed. */
static void group_undo(sw_store *s, sw_write_batch *b)
{
    for (size_t j = 0; j < b->n; j++)
        memcpy(page_buf(s, b->put[j].page) + b->put[j].at, b->put[j].was, SW_STORE_HDR_BYTES);
    for (size_t k = 0; k < b->npages; k++)
        b->ops[k] = (sw_io_op){s->data_fd, 1, page_buf(s, k), SW_STORE_ALIGN, b->page_off[k], 0};
    if (sw_io_run(s->io, b->ops, b->npages))
        s->failed = 1;
    s->hpage_off = UINT64_MAX;
}

/* The last written page becomes the handle's cached header page (the next
 * write of the same run saves its read). */
static void hpage_keep(sw_store *s, const char *page, uint64_t off)
{
    memcpy(s->hpage, page, SW_STORE_ALIGN);
    s->hpage_off = off;
}

/* The failure of write `idx` whose group starts at `first`, as the
 * batch's status: the detail names both. */
static sw_status batch_fail(sw_status st, size_t idx, size_t first)
{
    char keep[512];
    snprintf(keep, sizeof keep, "%s", sw_last_error());
    return sw_fail(st, "sw_store_write_batch: write %zu: %s (n_done %zu: nothing from write %zu "
                   "on was written)", idx, keep, first, first);
}

static sw_status group_fail(sw_status st, const sw_write_batch *b, size_t j)
{
    return batch_fail(st, b->put[j].idx, b->put[0].idx);
}

/* Extents and headers, the data sync, the journal records; on failure the
 * headers are undone and nothing of the group is published. */
static sw_status group_write(sw_store *s, sw_write_batch *b, const void *const *src,
                             const size_t *bytes, uint64_t seq, uint64_t gen0)
{
    size_t bad = 0;
    sw_status st = pages_load(s, b, &bad);
    if (st != SW_OK)
        return group_fail(st, b, bad);
    group_fill(s, b, src, bytes, seq, gen0);
    size_t nops = group_ops(s, b);
    if (sw_io_run(s->io, b->ops, nops)) {
        size_t k = 0;
        while (b->ops[k].res == (int64_t)b->ops[k].len)
            k++;
        bad = put_of_op(s, b, &b->ops[k]);
        st = sw_store_io_fail(s, &b->ops[k], "write extent");
        st = group_fail(st, b, bad);
        group_undo(s, b);
        return st;
    }
    const wb_put *last = &b->put[b->n - 1];
    hpage_keep(s, page_buf(s, last->page), b->page_off[last->page]);
    if (s->durability == SW_STORE_DURABILITY_SYNC && fdatasync(s->data_fd) != 0) {
        s->failed = 1; /* after a failed fsync the page state is unknown */
        return group_fail(sw_store_errno(s, errno, "fdatasync(data)"), b, 0);
    }
    for (size_t j = 0; j < b->n; j++) {
        const wb_put *p = &b->put[j];
        sw_store_record r = {SW_STORE_REC_PUT, p->key, gen0 + j, p->slot,
                             (uint32_t)bytes[p->idx], p->crc, seq};
        sw_store_encode_record(&r, b->rec + j * SW_STORE_REC_BYTES);
    }
    st = sw_store_journal_write(s, b->rec, b->n);
    if (st != SW_OK) {
        st = group_fail(st, b, 0);
        group_undo(s, b);
        return st;
    }
    return SW_OK;
}

/* Publishes the group in write order, as the single writes would: the
 * evictions' host entries freed, the put published, its previous version's
 * slot freed, the host-tier copy made. */
static void group_publish(sw_store *s, sw_write_batch *b, const void *const *src,
                          const size_t *bytes, uint64_t seq, uint64_t gen0, uint64_t *gens)
{
    uint32_t next = 0;
    for (size_t j = 0; j < b->n; j++) {
        wb_put *p = &b->put[j];
        host_undefer(s, b, &next, p->defer_end);
        sw_slot *e = &s->slots[p->slot];
        e->key = p->key;
        e->generation = gen0 + j;
        e->seq = seq;
        e->length = (uint32_t)bytes[p->idx];
        e->crc = p->crc;
        sw_store_index_publish_reserved(s, p->slot);
        if (p->old != SW_NIL) {
            p->ogen = s->slots[p->old].generation;
            sw_store_slot_release(s, p->old);
        }
        if (s->unprov.n)
            sw_keymap_erase(&s->unprov, &p->key);
        sw_store_host_put(s, p->slot, src[p->idx] ? src[p->idx] : "");
        s->st.writes++;
        s->st.bytes_written += bytes[p->idx];
        if (gens)
            gens[p->idx] = gen0 + j;
    }
    host_undefer(s, b, &next, s->host_ndefer);
    s->host_ndefer = 0;
}

/* The void headers over the previous versions of the group's overwrites
 * (the put's number), after the records -- never in the page write of a
 * new header: a torn put that open drops would take the acknowledged old
 * version with it (docs/store.md). Each page once, together; a page the
 * group wrote is patched in the bounce buffer (it is what is on disk), any
 * other read first. *bad: a put whose void was not written. */
static sw_status group_voids(sw_store *s, sw_write_batch *b, uint64_t seq, size_t *bad)
{
    size_t nv = 0, nread = 0, extra = 0;
    for (size_t j = 0; j < b->n; j++) {
        wb_put *p = &b->put[j];
        if (p->old == SW_NIL)
            continue;
        uint64_t off = sw_store_header_page_off(s, p->old, &p->vat);
        size_t v = 0;
        while (v < nv && b->vpage_off[v] != off)
            v++;
        p->vpage = (uint32_t)v;
        if (v < nv)
            continue;
        b->vpage_off[nv] = off;
        size_t k = 0;
        while (k < b->npages && b->page_off[k] != off)
            k++;
        if (k < b->npages) {
            b->vpage_buf[nv++] = page_buf(s, k);
            continue;
        }
        /* the payload area is free again: its first pages hold the others */
        b->vpage_buf[nv] = s->bounce + b->cap * SW_STORE_ALIGN + extra++ * SW_STORE_ALIGN;
        b->ops[nread++] = (sw_io_op){s->data_fd, 0, b->vpage_buf[nv], SW_STORE_ALIGN, off, 0};
        nv++;
    }
    if (!nv)
        return SW_OK;
    sw_status st = SW_OK;
    if (nread && sw_io_run(s->io, b->ops, nread)) {
        size_t k = 0;
        while (b->ops[k].res == (int64_t)b->ops[k].len)
            k++;
        st = sw_store_io_fail(s, &b->ops[k], "read extent header page");
    }
    for (size_t j = 0; j < b->n && st == SW_OK; j++) {
        const wb_put *p = &b->put[j];
        if (p->old == SW_NIL)
            continue;
        sw_store_extent_hdr h;
        memset(&h, 0, sizeof h);
        h.key = p->key;
        h.generation = p->ogen;
        h.slot = p->old;
        h.seq = seq;
        h.state = SW_STORE_EXTENT_VOID;
        sw_store_encode_extent_hdr(&h, (uint8_t *)b->vpage_buf[p->vpage] + p->vat);
    }
    for (size_t v = 0; v < nv && st == SW_OK; v++)
        b->ops[v] = (sw_io_op){s->data_fd, 1, b->vpage_buf[v], SW_STORE_ALIGN, b->vpage_off[v], 0};
    if (st == SW_OK && sw_io_run(s->io, b->ops, nv)) {
        size_t k = 0;
        while (b->ops[k].res == (int64_t)b->ops[k].len)
            k++;
        st = sw_store_io_fail(s, &b->ops[k], "write extent header page");
    }
    if (st != SW_OK) {
        s->hpage_off = UINT64_MAX; /* what the pages hold now is unknown */
        for (size_t j = 0; j < b->n; j++)
            if (b->put[j].old != SW_NIL) {
                *bad = j;
                break;
            }
        return st;
    }
    hpage_keep(s, b->vpage_buf[nv - 1], b->vpage_off[nv - 1]);
    return SW_OK;
}

/* Writes and publishes the planned group; *done becomes the index after it
 * once it is published (also when only its voids failed), *ok_end the
 * index of the first write that did not succeed as a single write would. */
static sw_status group_flush(sw_store *s, sw_write_batch *b, const void *const *src,
                             const size_t *bytes, uint64_t *gens, size_t *done, size_t *ok_end)
{
    if (!b->n)
        return SW_OK;
    /* One operation: one sequence number for all its puts (recover.c). */
    const uint64_t seq = s->journal_seq + 1, gen0 = s->generation + 1;
    sw_status st = group_write(s, b, src, bytes, seq, gen0);
    if (st != SW_OK) {
        group_abort(s, b);
        return st;
    }
    s->journal_seq = seq;
    s->generation = gen0 + b->n - 1;
    group_publish(s, b, src, bytes, seq, gen0, gens);
    *done = *ok_end = b->put[b->n - 1].idx + 1;
    size_t bad = 0;
    st = group_voids(s, b, seq, &bad);
    if (st != SW_OK) {
        *ok_end = b->put[bad].idx;
        char keep[512];
        snprintf(keep, sizeof keep, "%s", sw_last_error());
        s->failed = 1;
        st = sw_fail(st, "sw_store_write_batch: write %zu is in the journal, but the void header "
                     "over its previous extent could not be written (the handle is marked "
                     "failed; the next open writes it): %s", b->put[bad].idx, keep);
    }
    b->n = 0;
    return st;
}

/* The batch under the handle's lock. *done: writes published, from 0;
 * *ok_end: writes that succeeded (< *done only when a void failed). */
static sw_status batch_locked(sw_store *s, size_t n, const sw_store_key *keys,
                              const void *const *src, const size_t *bytes, uint64_t *gens,
                              size_t *done, size_t *ok_end)
{
    SW_TRY(batch_scratch(s));
    sw_write_batch *b = s->wb;
    b->n = 0;
    s->host_ndefer = 0;
    sw_status st = SW_OK;
    for (size_t i = 0; i < n && st == SW_OK;) {
        int cut = 0;
        st = plan_put(s, b, i, &keys[i], &cut);
        if (st != SW_OK) {
            st = batch_fail(st, i, b->n ? b->put[0].idx : i);
            group_abort(s, b);
        } else if (cut) {
            st = group_flush(s, b, src, bytes, gens, done, ok_end);
        } else {
            i++;
        }
    }
    if (st == SW_OK)
        st = group_flush(s, b, src, bytes, gens, done, ok_end);
    return st;
}

/* Everything the caller passed, checked before anything is written. */
static sw_status batch_check(sw_store *s, size_t n, const sw_store_key *keys,
                             const void *const *src, const size_t *bytes)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_store_write_batch: store is NULL");
    if (n && (!keys || !src || !bytes))
        return sw_fail(SW_STATUS_INVALID, "sw_store_write_batch: %s is NULL",
                       !keys ? "keys" : !src ? "src" : "bytes");
    for (size_t i = 0; i < n; i++) {
        if (sw_store_check_key(&keys[i]) != SW_OK) {
            char keep[256];
            snprintf(keep, sizeof keep, "%s", sw_last_error());
            return sw_fail(SW_STATUS_INVALID, "sw_store_write_batch: keys[%zu]: %s", i, keep);
        }
        if (!src[i] && bytes[i])
            return sw_fail(SW_STATUS_INVALID, "sw_store_write_batch: src[%zu] is NULL", i);
        if (bytes[i] > s->g.stripe_bytes)
            return sw_fail(SW_STATUS_INVALID,
                           "sw_store_write_batch: bytes[%zu]: stripe of %zu bytes > stripe_bytes %u",
                           i, bytes[i], s->g.stripe_bytes);
    }
    if (s->read_only)
        return sw_fail(SW_STATUS_INVALID, "sw_store_write_batch: the store is open read-only");
    return SW_OK;
}

sw_status sw_store_write_batch(sw_store *s, size_t n, const sw_store_key *keys,
                               const void *const *src, const size_t *bytes,
                               uint64_t *generations, size_t *n_done)
{
    if (n_done)
        *n_done = 0;
    SW_TRY(batch_check(s, n, keys, src, bytes));
    if (!n)
        return SW_OK;
    /* The write-through queue needs every generation after the lock. */
    uint64_t *gens = generations;
    if (!gens && s->rt) {
        gens = (uint64_t *)malloc(n * sizeof *gens);
        if (!gens)
            return sw_fail(SW_STATUS_NO_MEMORY, "sw_store_write_batch: %zu generations", n);
    }
    sw_status st = sw_store_enter(s);
    size_t done = 0, ok_end = 0;
    if (st == SW_OK) {
        st = batch_locked(s, n, keys, src, bytes, gens, &done, &ok_end);
        pthread_mutex_unlock(&s->lock);
    }
    if (n_done)
        *n_done = done;
    /* Write-through, outside the lock (a full queue may make this writer
     * wait, bounded), in write order: what the single writes would have
     * queued before the first that failed. */
    for (size_t i = 0; s->rt && i < ok_end; i++)
        sw_remote_tier_enqueue(s->rt, &keys[i], src[i] ? src[i] : "", bytes[i], gens[i]);
    if (gens != generations)
        free(gens);
    return st;
}
