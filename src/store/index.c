/* In-memory index of the store: key -> slot hash map, run placement, the
 * file-tier LRU, and the pinned host tier. Everything here runs under the
 * handle's lock and does no I/O. */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *sw_store_big_alloc(size_t bytes, int zero)
{
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    if (bytes == 0)
        bytes = 1;
    size_t align = bytes < huge ? 4096 : huge;
    size_t rounded = (bytes + align - 1) & ~(align - 1);
    if (posix_memalign(&p, align, rounded) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (align == huge) /* advice only: 4 KiB pages work too */
        (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    if (zero)
        memset(p, 0, rounded);
    return p;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t key_hash(const sw_store_key *k)
{
    uint64_t h = mix64(k->ns ^ 0x9e3779b97f4a7c15ull);
    h = mix64(h ^ ((uint64_t)k->layer << 32 | k->block));
    return mix64(h ^ ((uint64_t)k->kv_head << 8 | k->kind));
}

static uint64_t pow2_at_least(uint64_t x)
{
    uint64_t p = 16;
    while (p < x)
        p <<= 1;
    return p;
}

sw_status sw_store_index_init(sw_store *s)
{
    uint32_t n = s->nslots, nr = (uint32_t)s->g.nruns;
    uint64_t tsize = pow2_at_least((uint64_t)n * 2);
    uint64_t rsize = pow2_at_least((uint64_t)nr * 2);
    s->slots = (sw_slot *)sw_store_big_alloc((size_t)n * sizeof *s->slots, 1);
    s->table = (uint32_t *)sw_store_big_alloc(tsize * sizeof *s->table, 0);
    s->runs = (sw_run *)calloc(nr, sizeof *s->runs);
    s->run_table = (uint32_t *)malloc(rsize * sizeof *s->run_table);
    s->free_runs = (uint32_t *)malloc((size_t)nr * sizeof *s->free_runs);
    if (!s->slots || !s->table || !s->runs || !s->run_table || !s->free_runs)
        return sw_fail(SW_STATUS_NO_MEMORY, "store index for %u extents", n);
    memset(s->table, 0xff, tsize * sizeof *s->table);
    memset(s->run_table, 0xff, rsize * sizeof *s->run_table);
    s->table_mask = tsize - 1;
    s->run_table_mask = rsize - 1;
    for (uint32_t i = 0; i < n; i++) {
        s->slots[i].lru_prev = s->slots[i].lru_next = SW_NIL;
        s->slots[i].host = SW_NIL;
    }
    s->lru_head = s->lru_tail = SW_NIL;
    /* Lowest runs first, so a fresh store fills the file front to back. */
    for (uint32_t r = 0; r < nr; r++) {
        s->free_runs[r] = nr - 1 - r;
        s->runs[nr - 1 - r].in_free = 1;
    }
    s->nfree_runs = nr;

    if (s->host_n) {
        s->host = (sw_host_entry *)calloc(s->host_n, sizeof *s->host);
        if (!s->host)
            return sw_fail(SW_STATUS_NO_MEMORY, "host tier of %u entries", s->host_n);
        for (uint32_t i = 0; i < s->host_n; i++) {
            s->host[i].slot = SW_NIL;
            s->host[i].ref = 0;
            s->host[i].next_free = i + 1 < s->host_n ? i + 1 : SW_NIL;
        }
        s->host_free_head = 0;
        s->host_hand = 0;
    }
    return SW_OK;
}

void sw_store_index_free(sw_store *s)
{
    free(s->slots);
    free(s->table);
    free(s->runs);
    free(s->run_table);
    free(s->free_runs);
    free(s->host);
    s->slots = NULL;
    s->table = s->run_table = s->free_runs = NULL;
    s->runs = NULL;
    s->host = NULL;
}

/* ------------------------------------------------------------ key table -- */
uint64_t sw_store_key_hash(const sw_store_key *k) { return key_hash(k); }

uint32_t sw_store_index_find(const sw_store *s, const sw_store_key *k)
{
    return sw_store_index_find_h(s, k, key_hash(k));
}

uint32_t sw_store_index_find_h(const sw_store *s, const sw_store_key *k, uint64_t h)
{
    for (uint64_t i = h & s->table_mask;; i = (i + 1) & s->table_mask) {
        uint32_t v = s->table[i];
        if (v == SW_NIL)
            return SW_NIL;
        if (sw_store_key_eq(&s->slots[v].key, k))
            return v;
    }
}

/* Backward-shift deletion keeps linear probing free of tombstones. */
static void table_erase(uint32_t *table, uint64_t mask, uint64_t i,
                        uint64_t (*home)(const sw_store *, uint32_t), const sw_store *s)
{
    table[i] = SW_NIL;
    for (uint64_t j = (i + 1) & mask; table[j] != SW_NIL; j = (j + 1) & mask) {
        uint64_t h = home(s, table[j]) & mask;
        /* Move j back to i when its home is not in (i, j] cyclically. */
        int between = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!between) {
            table[i] = table[j];
            table[j] = SW_NIL;
            i = j;
        }
    }
}

static uint64_t slot_home(const sw_store *s, uint32_t v) { return key_hash(&s->slots[v].key); }

static uint64_t chunk_hash(const sw_store_key *c) { return key_hash(c) ^ 0x5bd1e995u; }
static uint64_t run_home(const sw_store *s, uint32_t r) { return chunk_hash(&s->runs[r].owner); }

static sw_store_key chunk_of(const sw_store *s, const sw_store_key *k)
{
    sw_store_key c = *k;
    c.reserved = 0;
    c.block = k->block / s->g.run_blocks;
    return c;
}

/* ------------------------------------------------------------------ LRU -- */
static void lru_unlink(sw_store *s, uint32_t v)
{
    sw_slot *e = &s->slots[v];
    if (e->lru_prev != SW_NIL)
        s->slots[e->lru_prev].lru_next = e->lru_next;
    else if (s->lru_head == v)
        s->lru_head = e->lru_next;
    if (e->lru_next != SW_NIL)
        s->slots[e->lru_next].lru_prev = e->lru_prev;
    else if (s->lru_tail == v)
        s->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = SW_NIL;
}

static void lru_push_head(sw_store *s, uint32_t v)
{
    sw_slot *e = &s->slots[v];
    e->lru_prev = SW_NIL;
    e->lru_next = s->lru_head;
    if (s->lru_head != SW_NIL)
        s->slots[s->lru_head].lru_prev = v;
    s->lru_head = v;
    if (s->lru_tail == SW_NIL)
        s->lru_tail = v;
}

void sw_store_lru_touch(sw_store *s, uint32_t v)
{
    if (s->lru_head == v)
        return;
    lru_unlink(s, v);
    lru_push_head(s, v);
}

uint32_t sw_store_lru_victim(const sw_store *s, uint32_t avoid)
{
    uint32_t v = s->lru_tail;
    if (v == avoid && v != SW_NIL)
        v = s->slots[v].lru_prev;
    return v;
}

/* ---------------------------------------------------------- slots, runs -- */
void sw_store_slot_take(sw_store *s, uint32_t slot)
{
    sw_slot *e = &s->slots[slot];
    if (e->used)
        return;
    e->used = 1;
    s->used_slots++;
    sw_run *r = &s->runs[slot / s->g.run_blocks];
    r->used++;
}

static void run_unmap(sw_store *s, uint32_t run)
{
    sw_run *r = &s->runs[run];
    if (!r->owned)
        return;
    for (uint64_t i = chunk_hash(&r->owner) & s->run_table_mask;;
         i = (i + 1) & s->run_table_mask) {
        if (s->run_table[i] == SW_NIL)
            break;
        if (s->run_table[i] == run) {
            table_erase(s->run_table, s->run_table_mask, i, run_home, s);
            break;
        }
    }
    r->owned = 0;
}

static void run_map(sw_store *s, uint32_t run, const sw_store_key *chunk)
{
    sw_run *r = &s->runs[run];
    r->owner = *chunk;
    r->owned = 1;
    uint64_t i = chunk_hash(chunk) & s->run_table_mask;
    while (s->run_table[i] != SW_NIL)
        i = (i + 1) & s->run_table_mask;
    s->run_table[i] = run;
}

static uint32_t run_find(const sw_store *s, const sw_store_key *chunk)
{
    for (uint64_t i = chunk_hash(chunk) & s->run_table_mask;;
         i = (i + 1) & s->run_table_mask) {
        uint32_t v = s->run_table[i];
        if (v == SW_NIL)
            return SW_NIL;
        if (sw_store_key_eq(&s->runs[v].owner, chunk))
            return v;
    }
}

void sw_store_slot_release(sw_store *s, uint32_t slot)
{
    sw_slot *e = &s->slots[slot];
    if (!e->used)
        return;
    sw_store_host_drop(s, slot);
    lru_unlink(s, slot);
    e->used = 0;
    s->used_slots--;
    uint32_t run = slot / s->g.run_blocks;
    sw_run *r = &s->runs[run];
    if (--r->used == 0) {
        run_unmap(s, run);
        if (!r->in_free) {
            r->in_free = 1;
            s->free_runs[s->nfree_runs++] = run;
        }
    }
}

/* A run that holds the key's home position but no owner adopts the key's
 * chunk, so later blocks of the chunk land next to it (replay). Returns 1
 * when it did. */
static int run_adopt(sw_store *s, uint32_t slot, const sw_store_key *key)
{
    uint32_t run = slot / s->g.run_blocks;
    if (s->runs[run].owned || key->block % s->g.run_blocks != slot % s->g.run_blocks)
        return 0;
    sw_store_key c = chunk_of(s, key);
    if (run_find(s, &c) != SW_NIL)
        return 0;
    run_map(s, run, &c);
    return 1;
}

/* The key -> slot mapping, payload accounting and LRU head of a publish. */
static void index_link(sw_store *s, uint32_t slot)
{
    sw_slot *e = &s->slots[slot];
    uint64_t i = key_hash(&e->key) & s->table_mask;
    for (;; i = (i + 1) & s->table_mask) {
        uint32_t v = s->table[i];
        if (v == SW_NIL || sw_store_key_eq(&s->slots[v].key, &e->key))
            break;
    }
    if (s->table[i] != SW_NIL && s->table[i] != slot)
        s->payload_bytes -= s->slots[s->table[i]].length;
    if (s->table[i] != slot)
        s->payload_bytes += e->length;
    s->table[i] = slot;
    lru_unlink(s, slot);
    lru_push_head(s, slot);
}

void sw_store_index_publish(sw_store *s, uint32_t slot)
{
    sw_store_slot_take(s, slot);
    index_link(s, slot);
    (void)run_adopt(s, slot, &s->slots[slot].key);
}

/* The run bookkeeping of a put happens when its slot is chosen, as a
 * single write's publish does it before the next write chooses a slot: the
 * group's later placements see the same runs. */
int sw_store_slot_reserve(sw_store *s, uint32_t slot, const sw_store_key *key)
{
    sw_store_slot_take(s, slot);
    return run_adopt(s, slot, key);
}

void sw_store_slot_unreserve(sw_store *s, uint32_t slot, int adopted)
{
    uint32_t run = slot / s->g.run_blocks;
    if (adopted && s->runs[run].used > 1)
        run_unmap(s, run); /* else the release below unmaps the emptied run */
    sw_store_slot_release(s, slot);
}

void sw_store_index_publish_reserved(sw_store *s, uint32_t slot) { index_link(s, slot); }

void sw_store_index_remove(sw_store *s, uint32_t slot)
{
    sw_slot *e = &s->slots[slot];
    for (uint64_t i = key_hash(&e->key) & s->table_mask;; i = (i + 1) & s->table_mask) {
        uint32_t v = s->table[i];
        if (v == SW_NIL)
            break;
        if (v == slot) {
            s->payload_bytes -= e->length;
            table_erase(s->table, s->table_mask, i, slot_home, s);
            break;
        }
    }
    sw_store_slot_release(s, slot);
}

static uint32_t pop_free_run(sw_store *s)
{
    while (s->nfree_runs) {
        uint32_t r = s->free_runs[--s->nfree_runs];
        s->runs[r].in_free = 0;
        if (s->runs[r].used == 0 && !s->runs[r].owned)
            return r;
    }
    return SW_NIL;
}

uint32_t sw_store_place(sw_store *s, const sw_store_key *key, uint32_t avoid)
{
    if (s->used_slots >= s->nslots)
        return SW_NIL;
    uint32_t R = s->g.run_blocks, pos = key->block % R;
    sw_store_key c = chunk_of(s, key);
    uint32_t run = run_find(s, &c);
    if (run != SW_NIL) {
        uint32_t base = run * R;
        if (!s->slots[base + pos].used && base + pos != avoid)
            return base + pos;
        /* Home taken (an overwrite in flight): the nearest free slot of the
         * same run keeps the stripe close to its neighbours. */
        for (uint32_t d = 1; d < R; d++) {
            if (pos + d < R && !s->slots[base + pos + d].used && base + pos + d != avoid)
                return base + pos + d;
            if (pos >= d && !s->slots[base + pos - d].used && base + pos - d != avoid)
                return base + pos - d;
        }
    } else {
        run = pop_free_run(s);
        if (run != SW_NIL) {
            run_map(s, run, &c);
            return run * R + pos;
        }
    }
    /* No run of its own: any free slot (a run owned by another stream). */
    for (uint32_t n = 0; n < s->nslots; n++) {
        uint32_t v = s->scan_cursor;
        s->scan_cursor = s->scan_cursor + 1 < s->nslots ? s->scan_cursor + 1 : 0;
        if (!s->slots[v].used && v != avoid)
            return v;
    }
    return SW_NIL;
}

/* ------------------------------------------------------------ host tier -- */
void sw_store_host_touch(sw_store *s, uint32_t h) { s->host[h].ref = 1; }

void sw_store_host_free(sw_store *s, uint32_t h)
{
    s->host[h].slot = SW_NIL;
    s->host[h].ref = 0;
    s->host[h].zombie = 0;
    s->host[h].next_free = s->host_free_head;
    s->host_free_head = h;
}

void sw_store_host_drop(sw_store *s, uint32_t slot)
{
    uint32_t h = s->slots[slot].host;
    if (h == SW_NIL)
        return;
    s->host_used--;
    s->slots[slot].host = SW_NIL;
    if (s->host[h].lease) {
        /* A GPU may be reading these bytes (a leased entry): unmapped now,
         * reused only after the last release (sw_store_host_release). */
        s->host[h].slot = SW_NIL;
        s->host[h].ref = 0;
        s->host[h].zombie = 1;
        s->host_lease_unmaps++;
        return;
    }
    if (s->host_defer) {
        /* A batch group's eviction: unmapped now, back on the free list
         * just before the put that caused it copies its stripe in
         * (write_batch.c), where n single writes would have freed it. */
        s->host[h].slot = SW_NIL;
        s->host[h].ref = 0;
        s->host_defer[s->host_ndefer++] = h;
        return;
    }
    sw_store_host_free(s, h);
}

/* CLOCK: the first used, unleased entry from the hand on without a ref bit
 * (bits are cleared on the way). Two sweeps find one when any exists;
 * SW_NIL when every used entry is leased. */
static uint32_t host_victim(sw_store *s)
{
    for (uint64_t n = 0; n < 2 * (uint64_t)s->host_n + 1; n++) {
        uint32_t h = s->host_hand;
        s->host_hand = h + 1 < s->host_n ? h + 1 : 0;
        sw_host_entry *e = &s->host[h];
        if (e->slot == SW_NIL || e->lease)
            continue;
        if (e->ref) {
            e->ref = 0;
            continue;
        }
        return h;
    }
    return SW_NIL;
}

void sw_store_host_put(sw_store *s, uint32_t slot, const void *payload)
{
    if (!s->host_n)
        return;
    sw_store_host_drop(s, slot);
    uint32_t h = s->host_free_head;
    if (h == SW_NIL) {
        uint32_t v = host_victim(s);
        if (v == SW_NIL)
            return; /* every entry leased or a zombie: not cached */
        sw_store_host_drop(s, s->host[v].slot);
        s->st.host_evictions++;
        h = s->host_free_head;
    }
    s->host_free_head = s->host[h].next_free;
    s->host[h].slot = slot;
    s->host[h].ref = 0;
    s->host_used++;
    s->slots[slot].host = h;
    memcpy(sw_store_host_ptr(s, h), payload, s->slots[slot].length);
}

void sw_store_place_abort(sw_store *s, uint32_t slot)
{
    uint32_t run = slot / s->g.run_blocks;
    sw_run *r = &s->runs[run];
    if (s->slots[slot].used || r->used)
        return;
    run_unmap(s, run);
    if (!r->in_free) {
        r->in_free = 1;
        s->free_runs[s->nfree_runs++] = run;
    }
}
