/* Internal state of a block store handle, shared by the files of src/store. */
#ifndef SW_STORE_INTERNAL_H
#define SW_STORE_INTERNAL_H

#include "core/sw_core.h"
#include "store/format.h"
#include "store/io.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define SW_NIL 0xffffffffu

/* What the store decides beyond its config: the read path's request sizes,
 * the read tickets' in-flight cap and bounce window, when a journal is
 * compacted, the kind of pinned I/O memory. sw_store_tuning_decide fills it
 * at open from the config and the facts of the handle; tests and
 * benchmarks override single fields through sw_store_open_tuned. Not a user
 * option and not read from the environment. In a request, a field of
 * SW_STORE_TUNE_AUTO (any value < 0) is left to the library. The defaults
 * and their measurements: docs/store.md and docs/perf/store.md. */
#define SW_STORE_TUNE_AUTO (-1)
typedef struct sw_store_tuning {
    /* Synchronous reads: a range of adjacent extents is cut into requests
     * of this many bytes (at least one extent), issued together; 0 = uncut.
     * Default 128 KiB on io_uring (one 516 KiB tile read cut into 128 KiB
     * requests: 0.71 -> 0.96 GB/s on the 2-core VM's virtio disk), uncut on
     * the pread fallback, which runs the pieces one after the other (a cut
     * only adds system calls there). */
    int64_t read_chunk_bytes;
    /* Read tickets: the same; default uncut: several tiles in flight keep
     * the device busy (2.42 vs 2.32 GB/s with 8 tiles in flight); 512 KiB
     * pieces with 8 MiB in flight won one A/B on the H200's host, lost the
     * next and halved the swap engine's disk reads. */
    int64_t ticket_chunk_bytes;
    /* Uncut ranges of whole consecutive runs (contiguous in the file and
     * laid out back to back in the bounce buffer) are merged into one
     * request of up to this many bytes; 0 = never. A range cut into pieces
     * is never merged. Default 4 MiB (the device's largest request here,
     * max_sectors_kb); at most 1 GiB (a request's length is 32-bit); a limit
     * not above one run merges nothing (decided as 0). */
    int64_t read_merge_bytes;
    /* Bytes of unwanted extents a request reads through rather than being
     * split in two (and of leading extents read with a run's header rather
     * than a separate header request); 0 = never read through. Default 64
     * KiB: the swap engine's disk case reads 1.15 x its payload, mostly such
     * gaps around pool hits; a deep queue may prefer more, smaller requests. */
    int64_t read_gap_bytes;
    /* Read tickets: requests are submitted while fewer than this many bytes
     * are on the device (one ticket more may pass it; a larger one goes
     * alone); 0 = no limit. Default sw_store_config.read_inflight_bytes,
     * else 4 MiB: on the VM's virtio disk the engine-order tickets read
     * faster with 4 MiB on the device than with 2, 8 or all of them. */
    int64_t read_inflight_bytes;
    /* Read tickets: the window at the start of the bounce buffer that small
     * tickets' regions go round (a ticket larger than it takes the whole
     * buffer); 0, or at least the buffer, = the whole buffer (decided as 0).
     * Default 2 x the in-flight cap when that is at most half the buffer,
     * else the whole buffer. The window also bounds how far a caller's
     * read-ahead gets onto the device. */
    int64_t read_window_bytes;
    /* A read-write open compacts an undamaged journal that holds more than
     * 2 x (live + unprovable keys) + this many records. Default 4096. */
    int64_t compact_min_records;
    /* With a GPU, the host tier and the bounce buffer are 1 = huge-page
     * memory pinned with cudaHostRegister (default: an O_DIRECT request
     * into it is a few 2 MiB DMA segments), 0 = cudaMallocHost memory of 4
     * KiB pages, which the H200 host's disk split (436 instead of 648 KiB
     * per device read; swap disk case 45.9 instead of 28.9 ms a step) and
     * which is also the fallback when registering fails. */
    int64_t io_mem_register;
    /* sw_store_write_batch: puts per group (one operation: one round trip
     * of payloads and header pages, one journal write, one of voids), at
     * most what the bounce buffer holds (a header page and an extent each).
     * Default that room, at most 4096: groups of 1,024 4 KiB stripes fill
     * at twice the rate of groups of 64 (the queue depth, the cap before;
     * 21.1 -> 10.0 us per 8 KiB stripe on the VM in batches of 256). */
    int64_t write_group_puts;
} sw_store_tuning;

/* What sw_store_tuning_decide needs to know of a handle. */
typedef struct sw_store_facts {
    sw_store_io_backend backend; /* the backend that runs (io_uring or pread) */
    uint64_t slot_bytes;         /* one extent */
    uint64_t run_bytes;          /* a run: header page(s) + run_blocks extents */
    uint64_t bounce_bytes;       /* the bounce buffer */
} sw_store_facts;

/* Every field SW_STORE_TUNE_AUTO. */
void sw_store_tuning_auto(sw_store_tuning *t);
/* The tuning of a handle: each field of `want` (NULL = all automatic) that
 * is >= 0, else the library's default for c (its read_inflight_bytes, when
 * its struct_size has it) and f; then the limits above applied to both
 * (a cut of at least one extent, a merge of at most 1 GiB and more than a
 * run, a window smaller than the buffer, write groups of 1 .. the buffer's
 * room). Pure: no I/O, no global state. */
void sw_store_tuning_decide(const sw_store_config *c, const sw_store_facts *f,
                            const sw_store_tuning *want, sw_store_tuning *out);
/* Sets fields from "name=value[,name=value...]" (the field names above,
 * integers >= -1). SW_STATUS_INVALID (t unchanged) for an unknown name or
 * a bad value. For tests and benchmarks (--tune). */
sw_status sw_store_tuning_parse(sw_store_tuning *t, const char *spec);
/* sw_store_open with a tuning other than the library's (NULL = none:
 * exactly sw_store_open). The tuning is decided once, at open. */
sw_status sw_store_open_tuned(const sw_store_config *c, const sw_store_tuning *tuning,
                              sw_store **out);

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
 * open the keys the journal deleted (recover.c); keymap.c. */
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
    sw_store_tuning tune;        /* decided at open (sw_store_tuning_decide) */

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
    uint64_t host_lease_unmaps;  /* leased entries unmapped so far (sw_store_host_unmaps) */
    /* While a batch group evicts (write_batch.c): dropped entries are
     * unmapped and listed here instead of freed; NULL otherwise. */
    uint32_t *host_defer;
    uint32_t host_ndefer;

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
    struct sw_write_batch *wb;   /* batch write scratch (write_batch.c); NULL
                                  * until the first sw_store_write_batch */

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
    /* Of what open took from the data file, dropped or left to void
     * (journal_recovered's puts, extents_discarded, voids_pending): how
     * much belongs to the store's newest operation -- a batch group's puts
     * share its number -- which verify counts as one killed writer's. */
    uint64_t inflight_found;

    sw_store_stats st;           /* counters (occupancy fields filled on demand) */

    struct sw_remote_tier *rt;   /* remote tier (remote_tier.h); NULL = none */
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
/* A batch group's put (write_batch.c): its slot is taken when chosen
 * (used, counted in its run, the run adopting the key's chunk as publish
 * would; 1 returned when it adopted) and published after the group's I/O
 * and journal record; unreserve gives back one that was never published. */
int sw_store_slot_reserve(sw_store *s, uint32_t slot, const sw_store_key *key);
void sw_store_slot_unreserve(sw_store *s, uint32_t slot, int adopted);
void sw_store_index_publish_reserved(sw_store *s, uint32_t slot);
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

/* files.c: the store's files. The fixed names of the journal and of its
 * compaction's temporary file in the store directory. */
#define SW_STORE_JOURNAL_NAME "journal"
#define SW_STORE_JOURNAL_TMP_NAME "journal.tmp"
/* An OS error as a status: SW_STATUS_FULL for ENOSPC/EDQUOT, else
 * SW_STATUS_IO; errno and `what` in the detail. */
sw_status sw_store_errno(sw_store *s, int err, const char *what);
/* SW_STATUS_INVALID unless fd is a file of type want_type (S_IFREG,
 * S_IFDIR) owned by this user without group/other access. */
sw_status sw_store_check_owned(int fd, const char *name, mode_t want_type);
/* Opens the store file `name` in the store directory (O_CLOEXEC |
 * O_NOFOLLOW; created 0600) and checks it; errno is kept for the caller. */
sw_status sw_store_open_file(sw_store *s, const char *name, int flags, int *fd_out);
/* pwrite of all len bytes at off (EINTR retried). */
sw_status sw_store_pwrite_all(int fd, const void *buf, size_t len, uint64_t off,
                              const char *what);
/* The whole file into a malloc'ed buffer (*out, freed by the caller). */
sw_status sw_store_read_all(int fd, uint8_t **out, size_t *len, const char *what);
/* Replaces `name` by a fully written, synced temporary file `tmp` (crash
 * safe: temp file + fsync + rename + directory fsync). */
sw_status sw_store_replace_file(sw_store *s, const char *tmp, const char *name,
                                const void *buf, size_t len);

/* journal.c: journal append (record encoded as given -- r->seq set by the
 * caller, see sw_store_journal_append_next -- written at journal_end, synced
 * per durability). On failure the journal is cut back; SW_STATUS_FAILED when
 * that is impossible (handle marked failed). */
sw_status sw_store_journal_append(sw_store *s, const sw_store_record *r);
/* Appends r with the next sequence number (set in r->seq) and consumes that
 * number only once the record is written: a number that neither file
 * carries is never left behind at the journal's end, where it would make
 * the next operation a killed writer leaves without its record look two
 * past the journal (recover.c). */
sw_status sw_store_journal_append_next(sw_store *s, sw_store_record *r);
/* Appends n encoded records (n x 64 bytes) with one pwrite, synced once per
 * durability; on failure the journal is cut back as above. */
sw_status sw_store_journal_write(sw_store *s, const uint8_t *recs, size_t n);
/* journal.c: rewrites the journal as a snapshot of the index and the
 * unprovable keys (sw_store_replace_file). */
sw_status sw_store_compact_journal(sw_store *s);

/* keymap.c: the key sets. */
sw_keymap_ent *sw_keymap_find(const sw_keymap *m, const sw_store_key *k);
sw_status sw_keymap_put(sw_keymap *m, const sw_store_key *k, uint64_t seq);
void sw_keymap_erase(sw_keymap *m, const sw_store_key *k);
void sw_keymap_free(sw_keymap *m);
static inline int sw_store_unprovable(const sw_store *s, const sw_store_key *k)
{
    return s->unprov.n && sw_keymap_find(&s->unprov, k) != NULL;
}

/* recover.c: the cross-check of the journal with the data file's extent
 * headers at open, header pages, void headers. */
/* Reads every run's header page(s), compares each extent header with what
 * the replayed journal says (journal_deleted: keys whose last record was a
 * delete, with its sequence number) and resolves what the journal lost:
 * rolls forward the one operation that may have been in flight, marks
 * keys that cannot be proven current, and (unless read-only) records that
 * in the journal. damaged: the journal lost records it cannot place (a
 * snapshot record, a record before its end). group_tail_ok: the newest
 * operation may be a batch group recorded in part (its puts share one
 * number): the journal is undamaged, or its only lost records lie after
 * the first record of its newest number (a group's append torn by a power
 * loss). */
sw_status sw_store_recover(sw_store *s, sw_keymap *journal_deleted, uint64_t max_journal_seq,
                           uint64_t snapshot_seq, int damaged, int group_tail_ok);
/* The header page that holds slot's header, in s->hpage (read unless it is
 * the cached page); *at: the offset of slot's header in it. */
sw_status sw_store_header_page(sw_store *s, uint32_t slot, size_t *at);
/* The file offset of the header page holding slot's header; *at (optional):
 * the header's offset in that page. */
uint64_t sw_store_header_page_off(const sw_store *s, uint32_t slot, size_t *at);
/* A failed or short sw_io_op as a status (counted in io_errors). */
sw_status sw_store_io_fail(sw_store *s, const sw_io_op *op, const char *what);
/* Writes s->hpage (holding slot's page) back; forgets it on failure. */
sw_status sw_store_header_page_write(sw_store *s, uint32_t slot);
/* Writes a void header (the deleted extent's key and generation, sequence
 * number seq) over the header of `slot` (read-modify-write of its header
 * page, the read saved when it is the cached page). */
sw_status sw_store_void_extent(sw_store *s, uint32_t slot, const sw_store_key *key,
                               uint64_t generation, uint64_t seq);

/* read_async.c: lock + failed check + sw_store_reads_drain (unlocks and
 * returns SW_STATUS_FAILED on a failed handle): the entry of every call
 * that uses the ring or the bounce buffer synchronously or changes the
 * index. */
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

/* rw.c: evicts the least recently used stripe other than `avoid`;
 * SW_STATUS_FULL when `avoid` is the only one (an overwrite keeps its
 * previous stripe until the new one is safe), s->lock held. */
sw_status sw_store_evict_lru(sw_store *s, uint32_t avoid);

/* write_batch.c: frees the batch scratch (store close). */
void sw_store_write_batch_free(sw_store *s);

/* rw.c: the remote tier's write-back (sw_remote_tier_install_fn of
 * store/remote_tier.h; `store` is the sw_store). Takes s->lock. */
size_t sw_store_write_back(void *store, size_t n, const sw_store_key *keys,
                           const void *const *src, const size_t *bytes);

/* read_sync.c: sw_store_read_device without the destination check, for callers
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
