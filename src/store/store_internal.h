/* Internal state of a block store handle, shared by the files of src/store. */
#ifndef SW_STORE_INTERNAL_H
#define SW_STORE_INTERNAL_H

#include "core/sw_core.h"
#include "store/format.h"
#include "store/io.h"

#include <pthread.h>
#include <stdint.h>

#define SW_NIL 0xffffffffu

/* One per extent slot of the data file; `used` slots are the live stripes. */
typedef struct sw_slot {
    sw_store_key key;
    uint64_t generation;
    uint64_t seq;                /* sequence number of its put (header + record) */
    uint32_t length;
    uint32_t crc;
    uint32_t lru_prev, lru_next; /* file-tier LRU, most recent at head */
    uint32_t host;               /* host-tier entry or SW_NIL */
    uint8_t used;
} sw_slot;

/* One per run of run_blocks adjacent slots. A run is owned by one stream
 * chunk (ns, layer, kv_head, kind, block / run_blocks) while it holds any
 * slot; block b of that chunk goes to position b % run_blocks when free. */
typedef struct sw_run {
    sw_store_key owner; /* block = chunk index */
    uint32_t used;      /* used slots in the run (of any stream) */
    uint8_t owned;
    uint8_t in_free;    /* on the free-run stack */
} sw_run;

/* A set of keys with a sequence number each (open addressing, linear
 * probing, backward-shift erase): the unprovable keys of a handle, and at
 * open the keys the journal deleted (recover.c). */
typedef struct sw_keymap_ent {
    sw_store_key key;
    uint64_t seq;
    uint8_t used;
} sw_keymap_ent;
typedef struct sw_keymap {
    sw_keymap_ent *a;
    uint64_t mask;   /* capacity - 1; 0 with a == NULL */
    uint64_t n;
} sw_keymap;

/* Host-tier entries are replaced by CLOCK (second chance): a hit only sets
 * `ref` (no list relinks per 8 KiB stripe); eviction sweeps a hand over the
 * entries, clearing ref bits, and takes the first entry without one. With
 * no hits in between this is FIFO in insertion order. */
typedef struct sw_host_entry {
    uint32_t slot;               /* file slot whose stripe this copies; SW_NIL = free */
    uint32_t next_free;          /* free list */
    uint32_t lease;              /* outstanding leases (host_lease.c): never reused
                                  * while > 0 */
    uint8_t ref;                 /* hit since the hand last passed */
    uint8_t zombie;              /* dropped while leased: freed by the last release */
} sw_host_entry;

struct sw_store {
    pthread_mutex_t lock;
    sw_store_geometry g;
    uint64_t run_bytes;
    uint32_t nslots;
    sw_store_durability durability;
    sw_store_full_policy full_policy;
    unsigned queue_depth;
    int dir_fd, data_fd, journal_fd;
    int direct_io;
    int failed;
    int read_only;               /* sw_store_config.read_only: no file is written */
    sw_store_io_backend io_want; /* sw_store_config.io_backend */
    int buffered_io;             /* sw_store_config.buffered_io */
    int64_t lock_wait_ms;        /* sw_store_config.lock_wait_ms, resolved */

    /* index: key -> slot (open addressing, linear probing) */
    uint32_t *table;
    uint64_t table_mask;
    sw_slot *slots;
    uint32_t lru_head, lru_tail;
    uint32_t used_slots;
    uint64_t payload_bytes;
    uint32_t scan_cursor;

    /* runs: chunk -> run */
    sw_run *runs;
    uint32_t *run_table;
    uint64_t run_table_mask;
    uint32_t *free_runs;
    uint32_t nfree_runs;

    /* host tier */
    uint32_t host_n;             /* entries (capacity / slot_bytes) */
    uint32_t host_used;
    char *host_mem;
    int host_pinned;
    sw_host_entry *host;
    uint32_t host_free_head;     /* free list through next_free */
    uint32_t host_hand;          /* CLOCK hand */
    uint32_t host_leased;        /* entries with lease > 0 (zombies included) */

    /* I/O */
    sw_io *io;
    char *bounce;                /* io_buffer_bytes, 4 KiB aligned, pinned if CUDA */
    size_t bounce_bytes;
    int bounce_pinned;
    sw_io_op *ops;               /* queue scratch */
    /* The header page last read or written by this handle (4 KiB, aligned)
     * and its file offset (UINT64_MAX: none). One writer holds the file, so
     * the copy is the page on disk: a delete's or an overwrite's void, and
     * the put that reuses the slot, patch it without reading it again
     * (sw_store_header_page). Forgotten after any failed header write. */
    char *hpage;
    uint64_t hpage_off;
    size_t ops_cap;
    void *rd_scratch;            /* read plan scratch (items, hashes), grown */
    size_t rd_scratch_bytes;
    void *rd_groups, *rd_reqs;   /* ops_cap + 1 each, allocated on first read */
    struct sw_read_async *ra;    /* read tickets (read_async.c); NULL until the
                                  * first sw_store_read_submit */

    /* journal */
    uint64_t journal_end;        /* bytes of the journal (appends go here) */
    uint64_t journal_seq;        /* newest sequence number handed out or seen
                                  * in either file */
    uint64_t generation;

    /* Keys whose current version could not be proven at open (recover.c):
     * not in the index; a read of one is SW_STATUS_CORRUPT until it is
     * written or deleted again. seq = of its unprovable record. */
    sw_keymap unprov;

    /* What open found, for sw_store_verify: deletes redone from a void
     * header (their tombstone was lost: damage, never a crash), and live
     * headers of a key that a later operation of it had left to be voided
     * (a writer killed between a record and its void: a crash). */
    uint64_t deletes_redone;
    uint64_t voids_pending;

    sw_store_stats st;           /* counters (occupancy fields filled on demand) */

    struct sw_store_remote *rt;  /* remote tier (remote_tier.c); NULL = none */
};

/* Memory for large per-handle arrays (index, host tier without CUDA):
 * 4 KiB aligned; 2 MiB aligned and advised for transparent huge pages when
 * at least 2 MiB,
 * so that lookups and host-tier copies do not take a TLB miss per 4 KiB
 * page; zeroed when `zero`. Freed with free(). NULL when out of memory. */
void *sw_store_big_alloc(size_t bytes, int zero);

/* index.c: the in-memory index, placement, LRU and host tier. */
sw_status sw_store_index_init(sw_store *s);
void sw_store_index_free(sw_store *s);
uint32_t sw_store_index_find(const sw_store *s, const sw_store_key *k);
/* The same split in two, for batched lookups: the key's hash (prefetch
 * sw_store_index_bucket of it), then the probe from that hash. */
uint64_t sw_store_key_hash(const sw_store_key *k);
uint32_t sw_store_index_find_h(const sw_store *s, const sw_store_key *k, uint64_t h);
static inline const uint32_t *sw_store_index_bucket(const sw_store *s, uint64_t h)
{
    return &s->table[h & s->table_mask];
}
/* Publishes `slot` (fields filled, not yet used) as the key's live stripe,
 * replacing the mapping of an earlier slot of the key (which stays used:
 * the caller frees it). */
void sw_store_index_publish(sw_store *s, uint32_t slot);
/* Removes the key of `slot` from the index and frees the slot. */
void sw_store_index_remove(sw_store *s, uint32_t slot);
/* Marks a slot used/free and keeps the run bookkeeping. */
void sw_store_slot_take(sw_store *s, uint32_t slot);
void sw_store_slot_release(sw_store *s, uint32_t slot);
/* A free slot for block `key` (adjacent to its stream's run when possible),
 * never `avoid`; SW_NIL when every slot is used. */
uint32_t sw_store_place(sw_store *s, const sw_store_key *key, uint32_t avoid);
/* Undoes the run bookkeeping of a place() whose write failed. */
void sw_store_place_abort(sw_store *s, uint32_t slot);
void sw_store_lru_touch(sw_store *s, uint32_t slot);
/* Least recently used live slot other than `avoid` (SW_NIL when none). */
uint32_t sw_store_lru_victim(const sw_store *s, uint32_t avoid);

/* host tier */
static inline char *sw_store_host_ptr(const sw_store *s, uint32_t h)
{
    return s->host_mem + (uint64_t)h * s->g.slot_bytes;
}
/* Copies the stripe of `slot` into the host tier (evicting by CLOCK; a
 * leased entry is never the victim, and when every entry is leased the
 * stripe is not cached). */
void sw_store_host_put(sw_store *s, uint32_t slot, const void *payload);
/* Unmaps the slot's host entry; a leased entry keeps its bytes until its
 * last lease is released (zombie), any other goes back to the free list. */
void sw_store_host_drop(sw_store *s, uint32_t slot);
/* Returns entry h to the free list. */
void sw_store_host_free(sw_store *s, uint32_t h);
void sw_store_host_touch(sw_store *s, uint32_t h);

static inline uint64_t sw_store_slot_off(const sw_store *s, uint32_t slot)
{
    uint64_t r = slot / s->g.run_blocks, p = slot % s->g.run_blocks;
    return r * s->run_bytes + s->g.run_header_bytes + p * s->g.slot_bytes;
}
static inline uint64_t sw_store_run_off(const sw_store *s, uint32_t run)
{
    return (uint64_t)run * s->run_bytes;
}

/* store.c: journal append (record encoded as given -- r->seq set by the
 * caller, see sw_store_next_seq -- written at journal_end, synced per
 * durability). On failure the journal is cut back; SW_STATUS_FAILED when
 * that is impossible (handle marked failed). */
sw_status sw_store_journal_append(sw_store *s, const sw_store_record *r);
/* Appends r with the next sequence number (set in r->seq) and consumes that
 * number only once the record is written: a number that neither file
 * carries is never left behind at the journal's end, where it would make
 * the next operation a killed writer leaves without its record look two
 * past the journal (recover.c). */
sw_status sw_store_journal_append_next(sw_store *s, sw_store_record *r);
/* store.c: rewrites the journal as a snapshot of the index and the
 * unprovable keys (temp file + fsync + rename). */
sw_status sw_store_compact_journal(sw_store *s);

/* recover.c: the key sets, the cross-check of the journal with the data
 * file's extent headers at open, void headers, repair. */
sw_keymap_ent *sw_keymap_find(const sw_keymap *m, const sw_store_key *k);
sw_status sw_keymap_put(sw_keymap *m, const sw_store_key *k, uint64_t seq);
void sw_keymap_erase(sw_keymap *m, const sw_store_key *k);
void sw_keymap_free(sw_keymap *m);
static inline int sw_store_unprovable(const sw_store *s, const sw_store_key *k)
{
    return s->unprov.n && sw_keymap_find(&s->unprov, k) != NULL;
}
/* Reads every run's header page(s), compares each extent header with what
 * the replayed journal says (journal_deleted: keys whose last record was a
 * delete, with its sequence number) and resolves what the journal lost:
 * rolls forward the one operation that may have been in flight, marks
 * keys that cannot be proven current, and (unless read-only) records that
 * in the journal. damaged: the journal lost records it cannot place (a
 * snapshot record, a record before its end). */
sw_status sw_store_recover(sw_store *s, sw_keymap *journal_deleted, uint64_t max_journal_seq,
                           uint64_t snapshot_seq, int damaged);
/* The header page that holds slot's header, in s->hpage (read unless it is
 * the cached page); *at: the offset of slot's header in it. */
sw_status sw_store_header_page(sw_store *s, uint32_t slot, size_t *at);
/* Writes s->hpage (holding slot's page) back; forgets it on failure. */
sw_status sw_store_header_page_write(sw_store *s, uint32_t slot);
/* Writes a void header (the deleted extent's key and generation, sequence
 * number seq) over the header of `slot` (read-modify-write of its header
 * page, the read saved when it is the cached page). */
sw_status sw_store_void_extent(sw_store *s, uint32_t slot, const sw_store_key *key,
                               uint64_t generation, uint64_t seq);
sw_status sw_store_errno(sw_store *s, int err, const char *what);

/* rw.c: key check; lock + failed check + sw_store_reads_drain (unlocks
 * and returns SW_STATUS_FAILED on a failed handle). */
sw_status sw_store_check_key(const sw_store_key *k);
sw_status sw_store_enter(sw_store *s);

/* read_async.c, s->lock held: completes every read ticket's I/O in flight
 * (their results wait for sw_store_read_wait), so that the caller may use
 * the ring, the bounce buffer and change the index. A no-op when none is in
 * flight. reads_close: at close, completes the I/O in flight without
 * delivering anything into the callers' buffers, then frees the tickets. */
void sw_store_reads_drain(sw_store *s);
void sw_store_reads_close(sw_store *s);

/* rw.c: removes the stripe in slot v (tombstone, then a void header over
 * its extent header), s->lock held. */
sw_status sw_store_remove_slot(sw_store *s, uint32_t v);

/* rw.c: sw_store_write's body, s->lock held (remote write-back). */
sw_status sw_store_write_locked(sw_store *s, const sw_store_key *key, const void *src,
                                size_t bytes, uint64_t *gen_out);

/* remote_tier.c: the remote tier behind the store. open: starts nothing
 * when the config has no remote (or an older struct_size); close: drains the
 * write-through queue (bounded), joins the worker, closes the handle.
 * enqueue: called after a successful local write, s->lock NOT held (it may
 * wait up to remote_queue_wait_ms). fetch: s->lock NOT held; resolves the
 * keys whose status is SW_STATUS_NOT_FOUND through the remote. stats: fills
 * the remote_* fields. */
sw_status sw_store_remote_open(sw_store *s, const sw_store_config *c);
void sw_store_remote_close(sw_store *s);
void sw_store_remote_enqueue(sw_store *s, const sw_store_key *key, const void *src,
                             size_t bytes, uint64_t generation);
sw_status sw_store_remote_fetch(sw_store *s, size_t n, const sw_store_key *keys,
                                void *const *dst, int device, void *stream, size_t dst_bytes,
                                size_t *lengths, uint64_t *generations, sw_status *statuses);
void sw_store_remote_stats(sw_store *s, sw_store_stats *st);

/* read.c: sw_store_read_device without the destination check, for callers
 * whose destinations are device memory by construction (the swap engine's
 * staging buffers, which it cudaMalloc'ed itself): same results otherwise,
 * including SW_STATUS_NO_DEVICE without CUDA or a GPU. A host pointer here
 * fails in the copy (SW_STATUS_CUDA) after the read instead of up front.
 * first_host_dst: the check sw_store_read_device makes (a gap-free run of
 * destinations is looked up at its first and last one); the index of a
 * destination that is not device memory, or n. */
sw_status sw_store_read_device_owned(sw_store *s, size_t n, const sw_store_key *keys,
                                     void *const *dst, size_t dst_bytes, size_t *lengths,
                                     uint64_t *generations, sw_status *statuses, void *stream);
size_t sw_store_first_host_dst(size_t n, void *const *dst, size_t dst_bytes);

#endif
