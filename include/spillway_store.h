/*
 * spillway_store.h - the tiered KV block store (included by spillway.h).
 *
 * A store keeps stripes (one kv head's K or V of one KV block) in a
 * preallocated data file opened O_DIRECT, behind an optional pinned host-RAM
 * tier. Writes are crash safe: a stripe becomes readable only after its
 * extent and its index journal record are written (and synced, per the
 * durability mode); a killed writer never exposes a torn or unacknowledged
 * stripe. Every read checks the extent's key, generation and CRC32C and
 * returns SW_STATUS_CORRUPT instead of bytes on a mismatch. Damage to any
 * store file never makes an older version or a deleted stripe current: open
 * compares the journal with the extent headers, and what cannot be proven
 * current reads as SW_STATUS_CORRUPT (docs/store.md, "Damage").
 *
 * Directory layout (fixed names; no path is built from caller data):
 *   <dir>/superblock  magic, format version 2, geometry (exactly 4 KiB, CRC32C)
 *   <dir>/data        preallocated: runs of [header page | run_blocks slots]
 *   <dir>/journal     append-only index journal, 64-byte CRC32C records
 * The directory is 0700 and the files 0600, owned by the calling user; a
 * directory owned by someone else or open to group/other is refused.
 *
 * Thread safety: calls on one handle are serialised by a lock inside the
 * handle; different handles are independent. One process at a time may
 * hold a store open (an exclusive flock on the data file).
 */
#ifndef SPILLWAY_STORE_H
#define SPILLWAY_STORE_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_store sw_store;

typedef enum sw_store_kind {
    SW_STORE_KIND_K = 0,
    SW_STORE_KIND_V = 1
} sw_store_kind;

/* Key of one stripe. The namespace isolates models and tenants: a read in
 * one namespace never returns bytes written under another. `reserved` must
 * be 0. Stripes of consecutive `block`s of one (namespace, layer, kv_head,
 * kind) stream are placed in adjacent extents so that a tile's reads
 * coalesce into large requests. */
typedef struct sw_store_key {
    uint64_t ns;
    uint32_t layer;
    uint32_t block;
    uint16_t kv_head;
    uint8_t kind;        /* sw_store_kind */
    uint8_t reserved;    /* 0 */
} sw_store_key;

typedef enum sw_store_durability {
    /* An acknowledged write survives the death of the process (SIGKILL,
     * crash), not a power loss or kernel crash: no fdatasync. */
    SW_STORE_DURABILITY_PROCESS = 0,
    /* An acknowledged write survives a power loss: the data file is
     * fdatasync'ed before the journal record, the journal after it. */
    SW_STORE_DURABILITY_SYNC = 1
} sw_store_durability;

typedef enum sw_store_full_policy {
    /* When every extent is used, a write evicts the least recently used
     * stripe (written or read) of the store, other than the key's own: an
     * overwrite whose only candidate is the stripe it replaces fails with
     * SW_STATUS_FULL (that stripe stays; an overwrite needs one free
     * extent). */
    SW_STORE_FULL_EVICT_LRU = 0,
    /* When every extent is used, a write fails with SW_STATUS_FULL. */
    SW_STORE_FULL_REFUSE = 1
} sw_store_full_policy;

typedef enum sw_store_io_backend {
    SW_STORE_IO_AUTO = 0,   /* config only: io_uring when this build has it and
                             * the kernel allows it, else pread/pwrite */
    SW_STORE_IO_URING = 1,  /* io_uring with registered buffers */
    SW_STORE_IO_PREAD = 2   /* pread/pwrite; chosen when io_uring is missing or
                             * sw_store_config.io_backend asks for it */
} sw_store_io_backend;

typedef struct sw_store_config {
    uint32_t struct_size;       /* sizeof(sw_store_config) */
    const char *dir;            /* store directory; created (0700) when missing
                                 * and `create` is set; its parent must exist.
                                 * Copied by open. */
    uint64_t capacity_bytes;    /* budget of the data file, headers included;
                                 * rounded down to whole runs (>= 1 run). On
                                 * reopen 0 means "as created". */
    uint32_t stripe_bytes;      /* largest stripe (payload) in bytes; default
                                 * 8192. Extents are this rounded up to 4 KiB.
                                 * With create == 0, stripe_bytes = run_blocks
                                 * = 0 means "as created" (tools). */
    uint32_t run_blocks;        /* extents reserved per stream run (adjacent
                                 * blocks of one stream); default 64 */
    uint32_t queue_depth;       /* io_uring entries / I/Os in flight; default 64 */
    uint64_t host_tier_bytes;   /* pinned host-RAM tier in front of the file;
                                 * 0 = none; rounded down to whole extents */
    uint64_t io_buffer_bytes;   /* pinned bounce buffer for I/O; 0 = default
                                 * (32 MiB, at least two runs); at most 16 TiB
                                 * (SW_STATUS_INVALID above) */
    sw_store_durability durability;   /* default SW_STORE_DURABILITY_PROCESS */
    sw_store_full_policy full_policy; /* default SW_STORE_FULL_EVICT_LRU */
    int32_t create;             /* 1 = create the store when it does not exist
                                 * (default); 0 = open an existing one only */
    /* ---- appended: the remote tier (docs/remote.md, "The store's remote
     * tier"). A caller compiled against the older struct (struct_size ends
     * before `remote`) gets no remote tier. ---- */
    /* NULL = no remote tier (default). Otherwise the store opens its own
     * sw_remote handle from this config at sw_store_open (the config and its
     * strings are only read during the call) and owns it until
     * sw_store_close. sw_store_open fails with sw_remote_open's status when
     * the handle cannot be opened (SW_STATUS_IO: server unreachable,
     * SW_STATUS_INVALID, SW_STATUS_UNSUPPORTED: a build without hiredis).
     * With a remote tier: sw_store_write also queues the stripe for an
     * asynchronous put (write-through), and sw_store_read fetches the keys
     * that are missing locally from the remote in one pipelined batch. */
    const struct sw_remote_config *remote;
    uint32_t remote_queue_entries; /* write-through queue: stripes waiting
                                 * (a copy each, stripe_bytes of memory);
                                 * 0 = 256 */
    int32_t remote_queue_wait_ms;  /* a write that finds the queue full waits
                                 * at most this long for room, then the put
                                 * to the remote is dropped (counted in
                                 * stats.remote_put_drops); the local write
                                 * is not affected. 0 = 50; < 0 = never wait */
    int32_t remote_close_wait_ms;  /* sw_store_close waits at most this long
                                 * for the queue to drain (plus one put batch
                                 * in flight, bounded by the remote's
                                 * command_timeout_ms); what is left is
                                 * dropped and counted. 0 = 2000; < 0 = drop
                                 * at once */
    int32_t remote_write_back;  /* 1 = a stripe fetched from the remote is
                                 * also written into the local store (a new
                                 * local generation; not queued back to the
                                 * remote); 0 = not written back (default) */
    /* ---- appended: a caller compiled against the older struct gets 0. */
    int32_t zero_fill;          /* 1 = creating the store also writes the
                                 * whole data file once, sequentially (zeros,
                                 * 4 MiB O_DIRECT writes, then fsync), after
                                 * posix_fallocate, which only reserves the
                                 * blocks. On a thin-provisioned or virtual
                                 * disk the first write of a block decides
                                 * where the backing store puts it; filled
                                 * stripe by stripe, a stream's runs end up
                                 * scattered there and reading them in file
                                 * order was 10-20% slower on the bench VM
                                 * (docs/perf/store.md, v8). Costs one
                                 * sequential write of the capacity at
                                 * creation; 0 = fallocate only (default) */
    /* ---- appended: a caller compiled against the older struct gets 0. */
    int32_t read_only;          /* 1 = open an existing store without writing
                                 * any of its files: no creation (a missing
                                 * store is SW_STATUS_NOT_FOUND), no journal
                                 * compaction, no torn-tail cut, nothing the
                                 * open recovers is written back (it is
                                 * applied in memory only); the files are
                                 * opened O_RDONLY under a shared lock (other
                                 * read-only opens may share it, a writer is
                                 * refused). sw_store_write and
                                 * sw_store_delete return SW_STATUS_INVALID,
                                 * as does sw_store_repair; with a remote
                                 * tier, remote_write_back is ignored. For
                                 * `spillway store verify`. 0 = read-write
                                 * (default) */
    /* ---- appended: a caller compiled against the older struct gets the
     * defaults. */
    sw_store_io_backend io_backend; /* SW_STORE_IO_AUTO (default),
                                 * SW_STORE_IO_PREAD (pread/pwrite even where
                                 * io_uring works), SW_STORE_IO_URING
                                 * (io_uring or SW_STATUS_UNSUPPORTED);
                                 * stats.io_backend says which runs */
    int32_t buffered_io;        /* 1 = buffered I/O on the data file instead
                                 * of O_DIRECT; 0 (default) = O_DIRECT, or
                                 * buffered where the filesystem refuses it
                                 * (stats.direct_io says which) */
    int32_t lock_wait_ms;       /* how long open waits for another process's
                                 * lock on the store (a killed writer's ring
                                 * keeps it until its last request ends):
                                 * 0 = default 2000 ms; < 0 = not at all */
    /* ---- appended: a caller compiled against the older struct gets the
     * default. */
    uint64_t read_inflight_bytes; /* read tickets (sw_store_read_submit):
                                 * bytes of requests on the device at once,
                                 * oldest ticket first; 0 = default 4 MiB
                                 * (on a virtio disk more outstanding bytes
                                 * read slower, docs/perf/store.md). A device
                                 * with more parallelism may want more, with
                                 * a bounce buffer (io_buffer_bytes) of at
                                 * least twice this */
} sw_store_config;

/* Fills the defaults documented above; dir = NULL, capacity_bytes = 0. */
SW_API void sw_store_config_init(sw_store_config *c);

/*
 * Opens (or creates) the store in c->dir. Creating preallocates the data
 * file (posix_fallocate) and writes the superblock last, so an interrupted
 * creation is redone by the next open. Opening checks the superblock (its
 * size, checksum, geometry and that every reserved byte is zero), replays
 * the journal -- records that fail their checksum are dropped (counted in
 * stats.journal_dropped) -- and then reads every run's extent header page
 * and compares the headers with the journal (docs/store.md, "Damage"): an
 * extent or void header newer than the journal's last record of its key
 * means the journal lost that record. The one operation that a killed
 * writer may have left without its record (the newest in the store, one
 * past the journal's last) is taken from the data file (a complete extent,
 * stats.journal_recovered) or dropped (a torn one, stats.extents_discarded);
 * a lost delete is redone; any other key the journal lost a record of
 * cannot be proven current and is not served: its reads return
 * SW_STATUS_CORRUPT (stats.keys_unprovable) until it is written or deleted
 * again or sw_store_repair drops it. Never an older version, never a
 * deleted stripe. Unless c->read_only, what open recovered is written to
 * the journal (records appended; a partial record at its end cut off), and
 * a journal that is undamaged but long is compacted; a damaged journal is
 * kept as it is until sw_store_repair. Open reads one header page per run
 * (4 KiB per run_blocks extents, ~0.8% of the data file with the defaults).
 * The I/O backend is chosen here: io_uring when it works, else pread/pwrite
 * (c->io_backend may ask for one). O_DIRECT is used when the filesystem
 * accepts it and c->buffered_io is 0, buffered I/O otherwise
 * (stats.direct_io).
 * Returns SW_OK; SW_STATUS_INVALID (null argument, bad struct_size, zero or
 * too small capacity on create, stripe_bytes/run_blocks out of range, a
 * directory that is a symlink, owned by another user or open to group/other,
 * store files with wrong owner or mode, a store created with another
 * geometry, capacity or format version -- format version 1, before extents
 * carried sequence numbers, is refused: recreate the store);
 * SW_STATUS_NOT_FOUND (no store and create == 0 or read_only); SW_STATUS_FULL
 * (the filesystem has no room for the data file or the journal);
 * SW_STATUS_CORRUPT (a damaged superblock: checksum, magic, fields, a
 * non-zero reserved byte, a file that is not exactly 4096 bytes; a data
 * file of the wrong size); SW_STATUS_IO (an OS error, errno in the detail; the store is open in
 * another process and its lock was not released within lock_wait_ms);
 * SW_STATUS_UNSUPPORTED (io_backend = SW_STORE_IO_URING where io_uring is not
 * available); SW_STATUS_NO_MEMORY. On failure *out is NULL.
 * The handle is owned by the caller until sw_store_close().
 */
SW_API sw_status sw_store_open(const sw_store_config *c, sw_store **out);

/*
 * Flushes (fdatasync of data and journal, whatever the durability mode),
 * releases the files and frees the handle. NULL is a no-op returning SW_OK.
 * Returns SW_OK or SW_STATUS_IO (a sync failed; the handle is freed anyway).
 */
SW_API sw_status sw_store_close(sw_store *s);

/*
 * Writes one stripe of `bytes` bytes (0..stripe_bytes) from host memory
 * `src` (any alignment; not retained) under `key`, replacing any earlier
 * stripe of that key. When it returns SW_OK the stripe is durable per the
 * durability mode and visible to readers; `*generation` (optional) receives
 * its generation, larger than any earlier generation of the store.
 * An overwrite needs one free extent until the new version is published;
 * when every extent is used the full policy evicts (LRU) or refuses.
 * On any failure the previous stripe of the key, if any, is unchanged.
 * Returns SW_OK; SW_STATUS_INVALID (null store/key, src NULL with bytes > 0,
 * bytes > stripe_bytes, bad kind or reserved, a read-only handle);
 * SW_STATUS_FULL (no free extent under SW_STORE_FULL_REFUSE, or the filesystem is out of space
 * (ENOSPC) for the journal; the detail says which); SW_STATUS_IO (errno in
 * the detail); SW_STATUS_FAILED (the handle hit an unrecoverable error
 * before, e.g. a failed fsync or a journal it could not repair).
 */
SW_API sw_status sw_store_write(sw_store *s, const sw_store_key *key, const void *src,
                                size_t bytes, uint64_t *generation);

/*
 * Writes n stripes: key i from src[i] (bytes[i] bytes, 0..stripe_bytes, any
 * alignment; not retained; NULL only when bytes[i] is 0). The result is
 * that of sw_store_write for i = 0..n-1 in order: a key given twice ends
 * with the later stripe, generations[i] (optional, n entries) grow strictly
 * with i, and capacity, eviction (the full policy), the host tier, the
 * remote tier's write-through (queued in order after the call's I/O, outside
 * the lock) and the stats are what n single writes give. The I/O is
 * batched: the writes go in groups of as many as the bounce buffer
 * (io_buffer_bytes) holds, an extent and a header page each, at most 4096
 * (issued queue_depth requests at a time); a group's extents and header
 * pages are written together (each header page once), its journal records appended with one write (and, in SYNC
 * mode, one fdatasync of each file). A group also ends before a key it
 * already holds and wherever a single write's choice of extent or eviction
 * would depend on the group's earlier writes (then they are written
 * first). A group is one operation of the store: when a writer dies during
 * one, the next open finds each of its stripes whole or not at all.
 * Every argument is checked before anything is written: a null
 * keys/src/bytes (n > 0), a bad key, src[i] NULL with bytes[i] > 0, bytes[i]
 * > stripe_bytes, a read-only handle are SW_STATUS_INVALID with the index
 * in the detail, and nothing is written.
 * *n_done (optional) receives how many writes, from index 0, are done
 * (durable per the durability mode and visible, as a single write that
 * returned SW_OK; their generations are filled); it is n on SW_OK. On a
 * failure the writes before the failing one's group are done, nothing of
 * that group or after it is visible (its header slots are put back as
 * sw_store_write does), and the detail names the failing write's index --
 * except when only the void headers over the previous versions of a
 * group's overwrites could not be written: then the group is done (in
 * n_done) and the handle is marked failed, as sw_store_write does.
 * Returns SW_OK (also for n = 0); SW_STATUS_INVALID (above, null store);
 * SW_STATUS_FULL (write n_done found no free extent under
 * SW_STORE_FULL_REFUSE, or ENOSPC on the journal); SW_STATUS_IO;
 * SW_STATUS_FAILED; SW_STATUS_NO_MEMORY (nothing written).
 */
SW_API sw_status sw_store_write_batch(sw_store *s, size_t n, const sw_store_key *keys,
                                      const void *const *src, const size_t *bytes,
                                      uint64_t *generations, size_t *n_done);

/*
 * Reads n stripes into host buffers: key i into dst[i], which has room for
 * dst_bytes bytes (any alignment). Reads are sorted by placement, adjacent
 * extents are merged into large requests and issued in batches of up to
 * queue_depth; host-tier hits are copied from RAM. Every extent's key,
 * generation and length are checked before a byte reaches dst[i], its
 * payload's CRC32C while it is copied there (the payload is read from
 * memory once); on a CRC mismatch the copy is overwritten with zeros.
 * Per key: statuses[i] (required) is SW_OK, SW_STATUS_NOT_FOUND,
 * SW_STATUS_CORRUPT (the extent failed a check, or the key cannot be proven
 * current after damage to the store's files: see sw_store_open),
 * SW_STATUS_IO or SW_STATUS_INVALID
 * (bad key, NULL dst[i], stripe larger than dst_bytes); lengths[i] and
 * generations[i] (both optional) receive the stripe's length and generation
 * (0 when not OK). dst[i] never holds bytes of a stripe that is not OK: it
 * is untouched unless statuses[i] is SW_OK, except after a payload CRC
 * mismatch (SW_STATUS_CORRUPT), when its first `length` bytes are zeros.
 * dst[i] is written with non-temporal stores on x86-64 when the stripe
 * comes from the file (it is not left in the CPU cache).
 * Returns SW_OK when every key is SW_OK, else the status of the first key
 * that is not; SW_STATUS_INVALID (null store/keys/dst/statuses) and
 * SW_STATUS_FAILED are returned without reading (statuses set to it).
 */
SW_API sw_status sw_store_read(sw_store *s, size_t n, const sw_store_key *keys,
                               void *const *dst, size_t dst_bytes, size_t *lengths,
                               uint64_t *generations, sw_status *statuses);

/*
 * As sw_store_read, but dst[i] are device pointers: stripes go through the
 * pinned bounce buffer (or straight from the pinned host tier) with one
 * cudaMemcpyAsync per run of stripes that are contiguous both in the bounce
 * buffer and in device memory, enqueued on `stream` (a cudaStream_t, NULL =
 * legacy default stream). The call synchronises `stream` before it reuses a
 * bounce buffer and before it returns, so the copies are complete on return.
 * Each extent is checked completely (CRC included) before its copy is
 * enqueued: on SW_STATUS_CORRUPT nothing is written to dst[i]. A dst[i] that
 * is not device memory makes the whole call SW_STATUS_INVALID before any
 * I/O; destinations are looked up per gap-free run in call order (the first
 * and the last of each run), so back-to-back destinations cost two
 * cudaPointerGetAttributes per call.
 * Returns as sw_store_read, plus SW_STATUS_NO_DEVICE in a build without CUDA
 * or on a machine without a GPU, SW_STATUS_CUDA (a copy failed; detail).
 */
SW_API sw_status sw_store_read_device(sw_store *s, size_t n, const sw_store_key *keys,
                                      void *const *dst, size_t dst_bytes, size_t *lengths,
                                      uint64_t *generations, sw_status *statuses,
                                      void *stream);

/*
 * Read tickets: a batched read whose file I/O stays in flight after the
 * call returns, so that a caller can keep several tiles queued while the
 * earlier ones are checked and copied (read-ahead). Typical use, one tile
 * per ticket, D tiles ahead:
 *
 *     for (i = 0; i < D && i < tiles; i++) submit(tile i) -> ticket[i % D]
 *     for (i = 0; i < tiles; i++) {
 *         wait(ticket[i % D]);         -- tile i is in its buffers, checked
 *         if (i + D < tiles) submit(tile i + D) -> ticket[i % D]
 *         ... use tile i (its buffers must not be reused by tile i + D) ...
 *     }
 *
 * sw_store_read_submit looks the n keys up (host-tier hits are copied into
 * dst[i] at once), plans the file reads as sw_store_read does (adjacent
 * extents merged, in a region of the bounce buffer) and queues them (at
 * most sw_store_config.read_inflight_bytes of reads on the device at once,
 * default 4 MiB, oldest ticket first); with the pread fallback, or when the
 * read does not fit the bounce
 * buffer (io_buffer_bytes) or the queue (queue_depth requests) as one
 * batch, it reads synchronously instead and the wait only hands over the
 * result. `keys` and the `dst` pointer array are copied (they may be reused
 * at once); the buffers dst[i] belong to the store until the ticket has
 * been waited for (or the store closed): the extents are verified and
 * copied into them by the ticket's wait, or earlier by another call on the
 * handle (a write, delete, sw_store_read or verify first finishes every
 * outstanding ticket; a queued ticket that needs bounce space has the oldest
 * arrived ticket checked and copied early).
 * *ticket receives a non-zero id (0 on failure).
 * Returns SW_OK (also when keys are missing or bad: their statuses come
 * with the wait); SW_STATUS_INVALID (null store/keys/dst/ticket, n >
 * 2^32 - 1); SW_STATUS_FULL (64 tickets are outstanding on this handle:
 * wait for one first); SW_STATUS_FAILED; SW_STATUS_NO_MEMORY. Nothing is
 * read on failure.
 */
SW_API sw_status sw_store_read_submit(sw_store *s, size_t n, const sw_store_key *keys,
                                      void *const *dst, size_t dst_bytes, uint64_t *ticket);

/*
 * Waits until the reads of `ticket` (n keys, as submitted) have completed
 * and returns their results exactly as sw_store_read would: statuses[i]
 * (required), lengths[i] and generations[i] (optional), dst[i] untouched
 * unless statuses[i] is SW_OK or it is zeros after a payload CRC mismatch
 * (as sw_store_read: no byte of a stripe that failed a check is left in
 * dst[i]); the return value is
 * SW_OK when every key is SW_OK, else the status of the first key that is
 * not. With a remote tier, local misses are fetched from it here.
 * Tickets may be waited for in any order and from any thread; waiting
 * blocks the handle's other callers while it sleeps on the ring.
 * Consistency: a write, delete or eviction, an sw_store_read or a verify on
 * the handle first completes the I/O of every outstanding ticket, so a
 * ticket returns the version of each key that was live at its submit (see
 * generations[i]), even when the key is overwritten or deleted before the
 * wait; it never returns a mix of versions or another key's bytes.
 * Returns as sw_store_read; SW_STATUS_INVALID (null store or statuses, a
 * ticket that is not outstanding on this handle -- already waited for, or
 * never handed out -- or n different from the submit's; then nothing is
 * written and a real ticket stays outstanding). The ticket is released on
 * every other return. A ticket never waited for is released by
 * sw_store_close, which completes its I/O and writes nothing more into its
 * buffers; closing while another thread is inside submit or wait on the
 * handle is a caller bug, as for every call.
 */
SW_API sw_status sw_store_read_wait(sw_store *s, uint64_t ticket, size_t n, size_t *lengths,
                                    uint64_t *generations, sw_status *statuses);

/*
 * Deletes the stripe of `key` (a journal tombstone, synced per the
 * durability mode, then a void header written over the extent's header, so
 * that a lost tombstone cannot bring the stripe back) and frees its extent
 * and host-tier copy. Deleting a key that cannot be proven current (reads
 * of it are SW_STATUS_CORRUPT) writes a tombstone and returns SW_OK.
 * Returns SW_OK, SW_STATUS_NOT_FOUND, SW_STATUS_INVALID (also a read-only
 * handle), SW_STATUS_FULL (ENOSPC on the journal), SW_STATUS_IO (the
 * tombstone could not be written; or the void header could not, then the
 * delete stands and the handle is marked failed), SW_STATUS_FAILED.
 */
SW_API sw_status sw_store_delete(sw_store *s, const sw_store_key *key);

/*
 * Deletes n keys: the result of sw_store_delete for i = 0..n-1 in order,
 * except that a key without a stripe is not an error: deleted[i]
 * (optional, n entries) is 1 where a stripe (or an unprovable key) was
 * deleted, 0 where there was none (a key given twice: 1 for the first, 0
 * for the later ones). The I/O is batched: the deletes go in groups (as
 * many as sw_store_write_batch's groups hold), each group's tombstones in
 * one journal write (one fdatasync in SYNC mode), then its extents' header
 * pages read and written back with the void headers in one request each.
 * A group is one operation of the store (one sequence number): when a
 * writer dies during one, the next open finds each of its keys deleted or
 * not, never a stripe brought back after its delete was acknowledged.
 * Every key is checked before anything is deleted (a bad key is
 * SW_STATUS_INVALID naming the index, nothing deleted).
 * *n_done (optional) receives how many keys, from index 0, are handled
 * (deleted, or without a stripe): n on SW_OK. On a failure to write a
 * group's tombstones (SW_STATUS_IO, SW_STATUS_FULL) nothing of that group
 * or after it is deleted and the detail names its first key; when only
 * its void headers could not be written, its deletes stand (counted in
 * n_done, deleted[] 1) and the handle is marked failed, as sw_store_delete
 * does.
 * Returns SW_OK (also for n = 0); SW_STATUS_INVALID (null store, keys NULL
 * with n > 0, a bad key, a read-only handle); SW_STATUS_FULL;
 * SW_STATUS_IO; SW_STATUS_FAILED; SW_STATUS_NO_MEMORY (nothing deleted).
 */
SW_API sw_status sw_store_delete_batch(sw_store *s, size_t n, const sw_store_key *keys,
                                       uint8_t *deleted, size_t *n_done);

typedef struct sw_store_stats {
    uint32_t struct_size;          /* sizeof(sw_store_stats), set by the caller */
    sw_store_io_backend io_backend;
    int32_t direct_io;             /* 1 when the data file is open O_DIRECT */
    int32_t failed;                /* 1 when the handle refuses further work */
    /* geometry */
    uint64_t stripe_bytes, extent_bytes, run_blocks;
    /* file tier: capacity and occupancy (extent granularity, headers excluded) */
    uint64_t capacity_bytes;       /* extents_total * extent_bytes */
    uint64_t used_bytes;           /* extents_used * extent_bytes; <= capacity */
    uint64_t payload_bytes;        /* sum of the live stripes' lengths */
    uint64_t extents_total, extents_used;
    uint64_t file_bytes;           /* size of the data file */
    /* host tier */
    uint64_t host_capacity_bytes, host_used_bytes, host_entries;
    /* traffic */
    uint64_t writes, deletes, evictions, host_evictions;
    uint64_t host_hits, host_misses;   /* lookups of existing keys in the host tier */
    uint64_t file_hits;                /* stripes served from the data file */
    uint64_t not_found;                /* keys found in no tier */
    uint64_t bytes_written;            /* payload bytes accepted by write */
    uint64_t host_bytes_read, file_bytes_read; /* payload bytes served per tier */
    uint64_t read_requests;        /* merged read ranges (adjacent extents of a
                                    * run read as one range) */
    uint64_t io_errors, corruptions;
    /* journal */
    uint64_t journal_records;      /* valid records in the journal file */
    uint64_t journal_dropped;      /* records dropped at open (bad checksum) */
    uint64_t generation;           /* newest generation handed out */
    /* appended (older callers receive the prefix above) */
    uint64_t runs_total;           /* runs in the data file */
    uint64_t runs_used;            /* runs holding at least one stripe */
    uint64_t run_header_bytes;     /* header page(s) at the start of each run */
    uint64_t store_id;             /* random id written at creation */
    uint64_t queue_depth;          /* I/Os in flight per batch */
    uint64_t io_buffer_bytes;      /* bounce buffer */
    uint64_t read_ios;             /* device requests for reads: a range may be
                                    * cut into pieces in flight together (128
                                    * KiB with io_uring, uncut with pread and
                                    * for read tickets), and whole consecutive
                                    * runs merged (docs/store.md) */
    /* appended: the remote tier (all 0 without one). Reads: keys missing
     * locally asked from the remote (they also count in not_found). */
    uint64_t remote_enabled;        /* 1 when the store has a remote tier */
    uint64_t remote_gets;           /* keys asked from the remote on local miss */
    uint64_t remote_hits;           /* ... returned (verified) to the caller */
    uint64_t remote_not_found;      /* ... the remote has no value either */
    uint64_t remote_corruptions;    /* ... a value failed the header/CRC check
                                     * or the length/generation sanity check
                                     * (the key's status is SW_STATUS_CORRUPT) */
    uint64_t remote_errors;         /* ... the server was down, timed out or
                                     * answered an error (a miss: NOT_FOUND) */
    uint64_t remote_bytes_read;     /* payload bytes of remote hits */
    uint64_t remote_write_backs;    /* remote hits written into the local store */
    /* write-through */
    uint64_t remote_puts_queued;    /* stripes queued for the remote */
    uint64_t remote_puts;           /* stripes the remote accepted */
    uint64_t remote_put_errors;     /* put attempts that failed (not retried) */
    uint64_t remote_put_drops;      /* queue full after the wait, or left at
                                     * close: never sent */
    uint64_t remote_put_replaced;   /* queued stripes replaced by a newer write
                                     * of the same key before they were sent */
    uint64_t remote_queue_len;      /* stripes waiting now (incl. in flight) */
    uint64_t remote_queue_entries;  /* queue capacity */
    uint64_t remote_queue_wait_us;  /* total time writers waited for room */
    /* from sw_remote_get_stats of the store's handle */
    uint64_t remote_reconnects, remote_timeouts, remote_connect_failures;
    uint64_t remote_get_p99_us, remote_put_p99_us;
    /* appended: what open found comparing the journal with the data file's
     * extent headers (docs/store.md, "Damage"). */
    uint64_t read_only;             /* 1 when opened with config.read_only */
    uint64_t journal_damaged;       /* 1 when the journal lost records it
                                     * cannot place: a record before its last
                                     * valid one failed its checksum, or its
                                     * snapshot is incomplete or missing */
    uint64_t keys_unprovable;       /* keys whose current version cannot be
                                     * proven: reads return SW_STATUS_CORRUPT */
    uint64_t journal_recovered;     /* operations found only in the data file
                                     * and taken from it at open (the write or
                                     * delete in flight when a writer died,
                                     * or the journal's lost last record) */
    uint64_t extents_discarded;     /* torn extents of a write in flight when
                                     * a writer died, dropped at open */
    uint64_t headers_bad;           /* extent header slots (and header page
                                     * padding) that are neither zero nor a
                                     * valid header */
    uint64_t header_pages_read;     /* run header pages read at open */
    /* appended: host-tier leases (a GPU reading the tier in place: the
     * swap engine's device pool, which keeps whole blocks' leases from one
     * call to the next) */
    uint64_t host_leased;           /* entries leased now (CLOCK passes them
                                     * by), unmapped ones included */
    uint64_t host_lease_unmaps;     /* leased entries unmapped so far (an
                                     * overwrite, delete, eviction or
                                     * invalidation of the key while leased) */
} sw_store_stats;

/* Fills a snapshot of the counters. st->struct_size must be set to the
 * size of the caller's struct (sizeof(sw_store_stats)); a smaller, older
 * struct receives the prefix it has room for.
 * Returns SW_OK or SW_STATUS_INVALID (null, struct_size < 16). Works on a
 * failed handle. */
SW_API sw_status sw_store_get_stats(sw_store *s, sw_store_stats *st);

/* One live stripe, as handed to a sw_store_visit_fn. */
typedef struct sw_store_entry {
    sw_store_key key;
    uint64_t generation;
    uint32_t length;       /* payload bytes */
    int32_t in_host;       /* 1 when the host tier holds a copy */
    uint64_t extent;       /* extent index in the data file (placement) */
    sw_status status;      /* sw_store_iterate: SW_OK; sw_store_verify: the
                            * extent's check, SW_OK, SW_STATUS_CORRUPT or
                            * SW_STATUS_IO */
} sw_store_entry;

/* Called once per stripe with the handle's lock held: it must not call
 * into the same store handle. `e` is valid during the call only. Return 0
 * to go on, non-zero to stop the walk. */
typedef int (*sw_store_visit_fn)(void *ctx, const sw_store_entry *e);

/*
 * Calls fn for every live stripe, in placement order (extent index), from
 * the in-memory index: no I/O, no LRU or counter change. Stripes are seen
 * as of the call (the lock is held throughout, so writers wait).
 * Returns SW_OK (also when fn stopped the walk); SW_STATUS_INVALID (null
 * store or fn); SW_STATUS_FAILED (a failed handle).
 */
SW_API sw_status sw_store_iterate(sw_store *s, sw_store_visit_fn fn, void *ctx);

typedef struct sw_store_verify_result {
    uint32_t struct_size;       /* sizeof(sw_store_verify_result), set by the caller */
    uint32_t reserved;
    uint64_t extents_checked;   /* live stripes read back from the data file */
    uint64_t extents_ok;
    uint64_t extents_corrupt;   /* header/key/generation/length/slot/CRC mismatch */
    uint64_t extents_io_error;  /* the read of its run failed */
    uint64_t host_checked;      /* host-tier copies checked against the CRC */
    uint64_t host_corrupt;
    uint64_t bytes_read;        /* bytes read from the data file */
    uint64_t read_requests;     /* I/O requests issued (one per run in use) */
    /* appended: the journal and the cross-check made at open (as in
     * sw_store_stats). */
    uint64_t journal_dropped;   /* journal records that failed their checksum */
    uint64_t journal_damaged;   /* 1: the journal lost records it cannot place */
    uint64_t keys_unprovable;   /* keys that cannot be proven current */
    uint64_t journal_missing;   /* operations the journal lacks and the data
                                 * file has (recovered in memory only: a
                                 * read-only handle) */
    uint64_t extents_torn;      /* torn extents still in the data file
                                 * (dropped in memory only: a read-only handle) */
    uint64_t headers_bad;       /* header slots neither zero nor valid */
    /* appended: what a writer killed mid-operation leaves (read-only
     * handles; a read-write open completes it). in_flight: 1 when the only
     * findings are the one operation such a writer can leave unfinished --
     * a put without its record (journal_missing 1: rolled forward by the
     * next open), a torn put (extents_torn 1: dropped by it), or a void
     * header a delete, eviction or overwrite left unwritten (voids_pending
     * 1: written by it); or several of these, all of one group of
     * sw_store_write_batch -- then verify returns SW_OK. A delete the
     * journal lost (a void header without its tombstone) is never a crash:
     * it is counted in journal_missing and fails verify. */
    uint64_t voids_pending;
    uint64_t in_flight;
} sw_store_verify_result;

/*
 * Checks every live stripe: reads each run that holds one (header page and
 * slots, one request per run, batched at the queue depth) and checks every
 * extent as sw_store_read does (header CRC, key, generation, sequence
 * number, length, slot, payload CRC32C), and every host-tier copy against
 * the stripe's CRC32C; and reports what open found in the journal and the
 * header pages (the appended fields of res). Nothing is repaired and no
 * LRU, host tier or read counter changes (only stats.corruptions and
 * stats.io_errors count what it finds); on a handle opened read-only
 * nothing has been written to any file either. fn (optional) is called for
 * every checked stripe with its status, as sw_store_iterate, and for every
 * key that cannot be proven current with SW_STATUS_CORRUPT, generation 0
 * and extent UINT64_MAX. res (optional; res->struct_size set by the
 * caller, a smaller, older struct receives its prefix) receives the counts.
 * Returns SW_OK when every extent and host copy checked out and the files
 * agree; SW_STATUS_CORRUPT when any extent or host copy did not, a journal
 * record was dropped, the journal is damaged, a key cannot be proven
 * current, a header slot is damaged, or (read-only handle) the journal lacks
 * an operation the data file has or a torn extent is left (detail: which)
 * -- except the one unfinished operation of a killed writer and nothing
 * else (res->in_flight = 1, SW_OK: a crash is not damage);
 * SW_STATUS_IO when a read failed (and nothing else was found);
 * SW_STATUS_INVALID (null store, res->struct_size < 8); SW_STATUS_FAILED (a
 * failed handle); SW_STATUS_NO_MEMORY.
 */
SW_API sw_status sw_store_verify(sw_store *s, sw_store_visit_fn fn, void *ctx,
                                 sw_store_verify_result *res);

typedef struct sw_store_repair_result {
    uint32_t struct_size;       /* sizeof(sw_store_repair_result), set by the caller */
    uint32_t reserved;
    uint64_t keys_dropped_unprovable; /* unprovable keys dropped (now NOT_FOUND) */
    uint64_t keys_dropped_corrupt;    /* stripes whose extent failed its check,
                                       * or could not be read, dropped */
    uint64_t headers_cleared;   /* damaged header slots / padding zeroed, and
                                 * live headers that are not their key's
                                 * current version voided */
    uint64_t journal_records;   /* records in the rewritten journal */
} sw_store_repair_result;

/*
 * Repairs a store opened read-write: drops every key that cannot be proven
 * current and every stripe whose extent fails its check (sw_store_verify's
 * checks; a void header is written over each dropped extent), zeroes the
 * header slots and header page padding that are neither zero nor a valid
 * header, and rewrites the journal as a snapshot of what is left (temp file
 * + fsync + rename; the data file is fdatasync'ed first). Afterwards
 * sw_store_verify finds nothing, and every stripe that was served before is
 * served the same. What was dropped reads as SW_STATUS_NOT_FOUND. res
 * (optional; struct_size set by the caller) receives the counts.
 * Returns SW_OK; SW_STATUS_INVALID (null store, a read-only handle,
 * res->struct_size < 8); SW_STATUS_IO, SW_STATUS_FULL (a write failed: what
 * was dropped before the failure stays dropped -- its tombstones are in
 * the old journal (synced), its void headers and cleared header slots in
 * the data file, and res counts it --, the rest is as it was; when the
 * journal rewrite failed, the old journal's damage stays and verify keeps
 * reporting it until a repair succeeds; the handle stays usable unless
 * the error is SW_STATUS_FAILED); SW_STATUS_FAILED; SW_STATUS_NO_MEMORY.
 */
SW_API sw_status sw_store_repair(sw_store *s, sw_store_repair_result *res);

/* "io_uring" / "pread"; "unknown" otherwise. Static string. */
SW_API const char *sw_store_io_backend_name(sw_store_io_backend b);

#ifdef __cplusplus
}
#endif
#endif
