/* Block store handle: open/create (directory, superblock, preallocation),
 * journal replay and the cross-check that follows it, close, stats. */
#include "store/store_internal.h"

#include "store/remote_tier.h"

#include "core/sw_cuda.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SB_NAME "superblock"
#define SB_TMP_NAME "superblock.tmp"
#define DATA_NAME "data"

void sw_store_config_init(sw_store_config *c)
{
    if (!c)
        return;
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    c->stripe_bytes = 8192;
    c->run_blocks = 64;
    c->queue_depth = 64;
    c->durability = SW_STORE_DURABILITY_PROCESS;
    c->full_policy = SW_STORE_FULL_EVICT_LRU;
    c->create = 1;
}

const char *sw_store_io_backend_name(sw_store_io_backend b)
{
    switch (b) {
    case SW_STORE_IO_AUTO: return "auto";
    case SW_STORE_IO_URING: return "io_uring";
    case SW_STORE_IO_PREAD: return "pread";
    }
    return "unknown";
}

/* -------------------------------------------------------------- journal -- */
/* Replays one record into the index. deleted: keys whose newest record so
 * far removed them (a delete, or a later put that took their slot), with
 * that record's sequence number -- what the cross-check with the extent
 * headers compares against for keys that are not in the index. */
static sw_status apply_record(sw_store *s, const sw_store_record *r, sw_keymap *deleted)
{
    if (r->generation > s->generation)
        s->generation = r->generation;
    if (r->type == SW_STORE_REC_SNAP)
        return SW_OK;
    uint32_t cur = sw_store_index_find(s, &r->key);
    if (r->type == SW_STORE_REC_DEL || r->type == SW_STORE_REC_UNPROV) {
        if (cur != SW_NIL)
            sw_store_index_remove(s, cur);
        sw_keymap_erase(&s->unprov, &r->key);
        if (r->type == SW_STORE_REC_UNPROV)
            return sw_keymap_put(&s->unprov, &r->key, r->seq);
        return sw_keymap_put(deleted, &r->key, r->seq);
    }
    if (r->slot >= s->nslots || r->length > s->g.stripe_bytes)
        return SW_OK; /* checksummed but impossible for this geometry: ignore */
    uint32_t slot = (uint32_t)r->slot;
    /* A later record owns the slot: whoever held it before lost it (only
     * after a lost record: a slot is reused after its key's delete or
     * move, and that record is what was lost). The key's newest known
     * record stays its put there, so that a header of the lost operation
     * (newer than that put) is found by the cross-check. */
    if (s->slots[slot].used && cur != slot) {
        SW_TRY(sw_keymap_put(deleted, &s->slots[slot].key, s->slots[slot].seq));
        sw_store_index_remove(s, slot);
    }
    sw_keymap_erase(deleted, &r->key);
    sw_keymap_erase(&s->unprov, &r->key);
    sw_slot *e = &s->slots[slot];
    e->key = r->key;
    e->key.reserved = 0;
    e->generation = r->generation;
    e->seq = r->seq;
    e->length = r->length;
    e->crc = r->payload_crc;
    sw_store_index_publish(s, slot);
    if (cur != SW_NIL && cur != slot)
        sw_store_slot_release(s, cur);
    return SW_OK;
}

static sw_status replay_journal(sw_store *s)
{
    uint8_t *buf;
    size_t len;
    SW_TRY(sw_store_read_all(s->journal_fd, &buf, &len, "read journal"));
    size_t nrec = len / SW_STORE_REC_BYTES;
    sw_keymap deleted = {0};
    sw_status st = SW_OK;
    /* The first record is the snapshot: its sequence number bounds every
     * extent header of the keys it no longer mentions, and the `slot`
     * records after it must all be there. A journal without one (or with a
     * snapshot record that lost records) cannot tell a deleted key from a
     * lost one: `damaged`, as is a dropped record before the last good one. */
    uint64_t snap_seq = 0, snap_n = 0, max_seq = 0, last_good = 0;
    int damaged = 0, have_snap = 0;
    size_t first_bad = SIZE_MAX, first_max = 0;
    for (size_t i = 0; i < nrec && st == SW_OK; i++) {
        sw_store_record r;
        if (sw_store_decode_record(buf + i * SW_STORE_REC_BYTES, SW_STORE_REC_BYTES, &r) !=
            SW_OK) {
            s->st.journal_dropped++;
            if (first_bad == SIZE_MAX)
                first_bad = i;
            if (i <= snap_n)
                damaged = 1; /* the snapshot, or one of its records */
            continue;
        }
        if (i == 0 && r.type == SW_STORE_REC_SNAP) {
            have_snap = 1;
            snap_seq = r.seq;
            snap_n = r.slot;
        } else if (r.type == SW_STORE_REC_SNAP) {
            damaged = 1; /* a snapshot record anywhere else: not ours */
            continue;
        }
        st = apply_record(s, &r, &deleted);
        if (r.seq > max_seq) {
            max_seq = r.seq;
            first_max = i;
        }
        s->st.journal_records++;
        last_good = (uint64_t)(i + 1);
    }
    free(buf);
    if (!have_snap || nrec < snap_n + 1)
        damaged = 1;
    /* Records lost only after the first record of the newest number, a
     * number appended after the snapshot: a batch group's records (they
     * share it) torn by a power loss; the group's puts are found in the
     * data file as one killed writer's (recover.c). */
    const int group_tail_ok = !damaged && (first_bad == SIZE_MAX || first_bad >= last_good ||
                                           (first_bad > first_max && max_seq > snap_seq));
    if (first_bad != SIZE_MAX && first_bad < last_good)
        damaged = 1;
    s->journal_seq = max_seq;
    if (st == SW_OK)
        st = sw_store_recover(s, &deleted, max_seq, snap_seq, damaged, group_tail_ok);
    sw_keymap_free(&deleted);
    SW_TRY(st);
    s->st.journal_damaged = (uint64_t)damaged;
    return SW_OK;
}

/* After the cross-check (read-write opens): a partial record at the end (a
 * torn append) is cut so that appends stay aligned; whole records that fail
 * their checksum stay where they are (the journal stays damaged, and says
 * so, until sw_store_repair). */
static sw_status journal_tail(sw_store *s, uint64_t len)
{
    uint64_t whole = len / SW_STORE_REC_BYTES * SW_STORE_REC_BYTES;
    if (whole != len) {
        s->st.journal_dropped++;
        if (!s->read_only && ftruncate(s->journal_fd, (off_t)whole) != 0)
            return sw_store_errno(s, errno, "truncate torn journal tail");
    }
    s->journal_end = whole;
    return SW_OK;
}

static sw_status open_journal(sw_store *s)
{
    struct stat stt;
    if (fstat(s->journal_fd, &stt) != 0)
        return sw_store_errno(s, errno, "fstat(journal)");
    SW_TRY(journal_tail(s, (uint64_t)stt.st_size));
    /* the records open recovered are appended after the tail */
    SW_TRY(replay_journal(s));
    if (s->read_only)
        return SW_OK;
    if (!s->st.journal_damaged && !s->st.journal_dropped &&
        s->st.journal_records >
            2 * ((uint64_t)s->used_slots + s->unprov.n) + (uint64_t)s->tune.compact_min_records) {
        sw_status st = sw_store_compact_journal(s);
        /* Compaction is an optimisation: without room for the new journal
         * the old one keeps working. */
        if (st != SW_OK && st != SW_STATUS_FULL)
            return st;
    }
    return SW_OK;
}

/* ----------------------------------------------------------------- open -- */
static void free_io_mem(void *p, int pinned);

static void store_free(sw_store *s)
{
    if (!s)
        return;
    sw_io_destroy(s->io);
    free_io_mem(s->bounce, s->bounce_pinned);
    free_io_mem(s->host_mem, s->host_pinned);
    free(s->ops);
    free(s->hpage);
    free(s->rd_scratch);
    free(s->rd_groups);
    free(s->rd_reqs);
    sw_store_write_batch_free(s);
    sw_store_index_free(s);
    sw_keymap_free(&s->unprov);
    if (s->data_fd >= 0)
        close(s->data_fd);
    if (s->journal_fd >= 0)
        close(s->journal_fd);
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static uint64_t random_id(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ ((uint64_t)getpid() << 16);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    return z ^ (z >> 31);
}

/* I/O memory. With a GPU: pinned. By default (tuning io_mem_register)
 * huge-page memory of sw_store_big_alloc, touched, then cudaHostRegister'd
 * (*pinned = 2): an O_DIRECT request into it is a few 2 MiB DMA segments;
 * cudaMallocHost's 4 KiB pages (*pinned = 1, io_mem_register = 0, or when
 * registering fails) split requests of more than max_segments pages on the
 * H200 host's virtio disk: 436 -> 648 KiB per device read, the swap disk
 * case's step 45.9 -> 28.9 ms (docs/perf/swap.md). Without a GPU: the
 * huge-page memory unpinned (*pinned = 0). */
static void *alloc_io_mem(size_t bytes, int do_register, int *pinned)
{
    void *p = NULL;
    *pinned = 0;
    if (sw_cuda_built() && sw_cuda_devices() > 0) {
        if (do_register) {
            /* touched before pinning: the measured configuration (its
             * pages faulted as the huge pages madvise asked for) */
            p = sw_store_big_alloc(bytes, 1);
            if (p && sw_cuda_host_register(p, bytes) == SW_OK) {
                *pinned = 2;
                return p;
            }
            sw_aligned_free(p);
            p = NULL;
        }
        if (sw_cuda_host_alloc(&p, bytes) == SW_OK) {
            *pinned = 1;
            return p;
        }
    }
    return sw_store_big_alloc(bytes, 0);
}

static void free_io_mem(void *p, int pinned)
{
    if (pinned == 1) {
        sw_cuda_host_free(p);
        return;
    }
    if (pinned == 2)
        sw_cuda_host_unregister(p);
    sw_aligned_free(p);
}

/* sw_store_config.zero_fill: one sequential pass of zero writes over the
 * new data file (4 MiB requests; O_DIRECT when the file is). */
static sw_status zero_fill_data(sw_store *s, int fd, uint64_t bytes)
{
    const size_t chunk = (size_t)4 << 20;
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, chunk) != 0)
        return sw_fail(SW_STATUS_NO_MEMORY, "zero fill buffer");
    memset(buf, 0, chunk);
    sw_status st = SW_OK;
    for (uint64_t off = 0; off < bytes && st == SW_OK;) {
        size_t n = bytes - off < chunk ? (size_t)(bytes - off) : chunk;
        ssize_t w = pwrite(fd, buf, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            if (ftruncate(fd, 0) != 0) { /* best effort: the error below is reported */ }
            char what[96];
            snprintf(what, sizeof what, "zero fill of the data file at %llu",
                     (unsigned long long)off);
            st = sw_store_errno(s, e, what);
            break;
        }
        off += (uint64_t)w;
    }
    free(buf);
    return st;
}

static sw_status open_data(sw_store *s, int create, int zero_fill)
{
    int base = (s->read_only ? O_RDONLY : O_RDWR) | (create ? O_CREAT | O_TRUNC : 0);
    int fd = -1;
    s->direct_io = !s->buffered_io;
    sw_status st = s->direct_io ? sw_store_open_file(s, DATA_NAME, base | O_DIRECT, &fd) : SW_STATUS_IO;
    if (st != SW_OK && (!s->direct_io || errno == EINVAL)) {
        /* The filesystem refuses O_DIRECT (EINVAL): buffered I/O, reported
         * in stats.direct_io. */
        s->direct_io = 0;
        st = sw_store_open_file(s, DATA_NAME, base, &fd);
    }
    if (st != SW_OK)
        return st;
    s->data_fd = fd;
    /* One process at a time: a second writer would break the journal. */
    /* A holder that was just killed may still hold the lock for a moment:
     * io_uring tears its ring down asynchronously, and its in-flight
     * requests keep the file open. Waiting for the lock therefore also
     * waits until no write of a dead writer can still land. */
    const int64_t wait_ms = s->lock_wait_ms;
    /* read-only opens share the lock with each other, never with a writer */
    const int lock = s->read_only ? LOCK_SH : LOCK_EX;
    for (int64_t waited = 0; flock(fd, lock | LOCK_NB) != 0; waited += 5) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            return sw_store_errno(s, errno, "flock(data)");
        if (waited >= wait_ms)
            return sw_fail(SW_STATUS_IO, "store is open in another process (flock: %s, "
                           "waited %lld ms)", strerror(EWOULDBLOCK), (long long)waited);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    uint64_t bytes = s->g.nruns * s->run_bytes;
    if (create) {
        int e = posix_fallocate(fd, 0, (off_t)bytes);
        if (e != 0) {
            if (ftruncate(fd, 0) != 0) { /* best effort: the error above is what the caller sees */ }
            sw_status fs = sw_store_errno(s, e, "preallocate data file");
            char msg[400];
            snprintf(msg, sizeof msg, "%s", sw_last_error());
            return sw_fail(fs, "%s (%llu bytes)", msg, (unsigned long long)bytes);
        }
        if (zero_fill)
            SW_TRY(zero_fill_data(s, fd, bytes));
        if (fsync(fd) != 0)
            return sw_store_errno(s, errno, "fsync(data)");
    } else {
        struct stat stt;
        if (fstat(fd, &stt) != 0)
            return sw_store_errno(s, errno, "fstat(data)");
        if ((uint64_t)stt.st_size != bytes)
            return sw_fail(SW_STATUS_CORRUPT, "data file has %lld bytes, the superblock says %llu",
                           (long long)stt.st_size, (unsigned long long)bytes);
    }
    return SW_OK;
}

static sw_status open_dir(sw_store *s, const char *dir, int create)
{
    int made = 0;
    if (create) {
        if (mkdir(dir, 0700) == 0)
            made = 1;
        else if (errno != EEXIST)
            return sw_store_errno(s, errno, "mkdir(store directory)");
    }
    s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s->dir_fd < 0) {
        if (errno == ENOENT)
            return sw_fail(SW_STATUS_NOT_FOUND, "no store directory '%s'", dir);
        if (errno == ELOOP || errno == ENOTDIR)
            return sw_fail(SW_STATUS_INVALID, "'%s' is not a directory (or is a symlink)", dir);
        return sw_store_errno(s, errno, "open(store directory)");
    }
    if (made)
        (void)fchmod(s->dir_fd, 0700);
    return sw_store_check_owned(s->dir_fd, "directory", S_IFDIR);
}

static sw_status validate_config(const sw_store_config *c)
{
    if (!c)
        return sw_fail(SW_STATUS_INVALID, "store config is NULL");
    /* An older caller's struct ends before `remote`: no remote tier. */
    if (c->struct_size < offsetof(sw_store_config, remote))
        return sw_fail(SW_STATUS_INVALID, "store config struct_size %u < %zu (call "
                       "sw_store_config_init)", c->struct_size,
                       offsetof(sw_store_config, remote));
    if (!c->dir || !*c->dir)
        return sw_fail(SW_STATUS_INVALID, "store config has no directory");
    /* 0/0 on an open-only call: take the geometry the store was created
     * with (tools that inspect any store). */
    if (!c->create && c->stripe_bytes == 0 && c->run_blocks == 0)
        goto geometry_ok;
    if (c->stripe_bytes == 0 || c->stripe_bytes > SW_STORE_MAX_STRIPE)
        return sw_fail(SW_STATUS_INVALID, "stripe_bytes %u not in [1, %u]", c->stripe_bytes,
                       SW_STORE_MAX_STRIPE);
    if (c->run_blocks == 0 || c->run_blocks > SW_STORE_MAX_RUN_BLOCKS)
        return sw_fail(SW_STATUS_INVALID, "run_blocks %u not in [1, %u]", c->run_blocks,
                       SW_STORE_MAX_RUN_BLOCKS);
geometry_ok:
    if (c->queue_depth == 0 || c->queue_depth > 4096)
        return sw_fail(SW_STATUS_INVALID, "queue_depth %u not in [1, 4096]", c->queue_depth);
    /* (a size near 2^64 would wrap in the buffer's alignment: refused, as no
     * machine pins that much) */
    if (c->io_buffer_bytes > ((uint64_t)1 << 44))
        return sw_fail(SW_STATUS_INVALID, "io_buffer_bytes=%llu: at most 16 TiB",
                       (unsigned long long)c->io_buffer_bytes);
    if ((unsigned)c->durability > SW_STORE_DURABILITY_SYNC)
        return sw_fail(SW_STATUS_INVALID, "unknown durability mode %d", (int)c->durability);
    if (c->struct_size >= offsetof(sw_store_config, io_backend) + sizeof c->io_backend &&
        (unsigned)c->io_backend > SW_STORE_IO_PREAD)
        return sw_fail(SW_STATUS_INVALID, "unknown io_backend %d", (int)c->io_backend);
    if ((unsigned)c->full_policy > SW_STORE_FULL_REFUSE)
        return sw_fail(SW_STATUS_INVALID, "unknown full policy %d", (int)c->full_policy);
    if (c->create != 0 && c->create != 1)
        return sw_fail(SW_STATUS_INVALID, "create=%d must be 0 or 1", (int)c->create);
    return SW_OK;
}

static sw_status store_open(const sw_store_config *c, const sw_store_tuning *tuning,
                            sw_store *s)
{
    const int may_create = c->create && !s->read_only;
    SW_TRY(open_dir(s, c->dir, may_create));

    /* The superblock is written last at creation: without it the store
     * does not exist (an interrupted creation is redone). */
    int sb_fd = openat(s->dir_fd, SB_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int create = 0;
    if (sb_fd < 0) {
        if (errno != ENOENT)
            return sw_store_errno(s, errno, SB_NAME);
        if (!may_create)
            return sw_fail(SW_STATUS_NOT_FOUND, "no store in '%s' (and %s)", c->dir,
                           s->read_only ? "read_only = 1" : "create = 0");
        create = 1;
        if (sw_store_geometry_make(c->stripe_bytes, c->run_blocks, c->capacity_bytes, &s->g) !=
            SW_OK)
            return sw_fail(SW_STATUS_INVALID, "capacity %llu bytes is less than one run "
                           "(%u blocks of %u bytes + header) or too many extents",
                           (unsigned long long)c->capacity_bytes, c->run_blocks,
                           c->stripe_bytes);
        s->g.store_id = random_id();
    } else {
        sw_status st = sw_store_check_owned(sb_fd, SB_NAME, S_IFREG);
        /* One byte more than a superblock: a padded file is seen as such. */
        uint8_t sb[SW_STORE_SB_BYTES + 1];
        struct stat sbst;
        ssize_t r = -1;
        if (st == SW_OK && fstat(sb_fd, &sbst) == 0)
            r = pread(sb_fd, sb, sizeof sb, 0);
        int e = errno;
        close(sb_fd);
        if (st != SW_OK)
            return st;
        if (r < 0)
            return sw_store_errno(s, e, "read superblock");
        if (sbst.st_size != SW_STORE_SB_BYTES || r != SW_STORE_SB_BYTES)
            return sw_fail(SW_STATUS_CORRUPT, "superblock of '%s' has %lld bytes, not %u "
                           "(truncated or padded)", c->dir, (long long)sbst.st_size,
                           SW_STORE_SB_BYTES);
        st = sw_store_decode_superblock(sb, (size_t)r, &s->g);
        if (st == SW_STATUS_UNSUPPORTED)
            return sw_fail(SW_STATUS_INVALID, "store format version %u, this library reads "
                           "version %u only%s", s->g.version, SW_STORE_FORMAT_VERSION,
                           s->g.version == 1 ? " (version 1 extents carry no sequence "
                           "number, so a damaged journal could not be detected: recreate "
                           "the store)" : "");
        if (st != SW_OK)
            return sw_fail(SW_STATUS_CORRUPT, "superblock of '%s' is damaged (checksum, "
                           "magic, inconsistent geometry or a non-zero reserved byte)", c->dir);
        int as_created = c->stripe_bytes == 0 && c->run_blocks == 0;
        if (!as_created &&
            (s->g.stripe_bytes != c->stripe_bytes || s->g.run_blocks != c->run_blocks))
            return sw_fail(SW_STATUS_INVALID, "store was created with stripe_bytes %u, "
                           "run_blocks %u; config asks for %u, %u", s->g.stripe_bytes,
                           s->g.run_blocks, c->stripe_bytes, c->run_blocks);
        if (c->capacity_bytes) {
            sw_store_geometry want;
            if (sw_store_geometry_make(s->g.stripe_bytes, s->g.run_blocks, c->capacity_bytes,
                                       &want) != SW_OK || want.nruns != s->g.nruns)
                return sw_fail(SW_STATUS_INVALID, "store was created with %llu runs; "
                               "capacity %llu bytes asks for another size",
                               (unsigned long long)s->g.nruns,
                               (unsigned long long)c->capacity_bytes);
        }
    }
    s->run_bytes = sw_store_run_bytes(&s->g);
    s->nslots = (uint32_t)(s->g.nruns * s->g.run_blocks);

    if (create) {
        (void)unlinkat(s->dir_fd, SW_STORE_JOURNAL_NAME, 0);
        (void)unlinkat(s->dir_fd, SW_STORE_JOURNAL_TMP_NAME, 0);
    }
    int zero_fill = c->struct_size >= offsetof(sw_store_config, zero_fill) + sizeof c->zero_fill
                        ? c->zero_fill != 0
                        : 0;
    SW_TRY(open_data(s, create, zero_fill));
    SW_TRY(sw_store_open_file(s, SW_STORE_JOURNAL_NAME,
                     (s->read_only ? O_RDONLY : O_RDWR) | (create ? O_CREAT | O_TRUNC : 0),
                     &s->journal_fd));
    if (!s->read_only)
        (void)unlinkat(s->dir_fd, SW_STORE_JOURNAL_TMP_NAME, 0);
    if (create) {
        /* A journal starts with its snapshot record (none follow yet). */
        sw_store_record snap;
        memset(&snap, 0, sizeof snap);
        snap.type = SW_STORE_REC_SNAP;
        SW_TRY(sw_store_journal_append(s, &snap));
        if (fsync(s->journal_fd) != 0)
            return sw_store_errno(s, errno, "fsync(journal)");
        uint8_t sb[SW_STORE_SB_BYTES];
        sw_store_encode_superblock(&s->g, sb);
        SW_TRY(sw_store_replace_file(s, SB_TMP_NAME, SB_NAME, sb, sizeof sb));
    }

    /* The I/O backend, then the tuning (which depends on it), then memory:
     * index, host tier, bounce buffer (registered with the backend). */
    s->io = sw_io_create(c->queue_depth, s->io_want == SW_STORE_IO_PREAD);
    if (!s->io)
        return sw_fail(SW_STATUS_NO_MEMORY, "I/O backend");
    if (s->io_want == SW_STORE_IO_URING && sw_io_backend(s->io) != SW_STORE_IO_URING)
        return sw_fail(SW_STATUS_UNSUPPORTED, "io_backend = SW_STORE_IO_URING, but io_uring "
                       "is not available (a build without liburing, or the kernel refused "
                       "io_uring_queue_init)");
    /* 32 MiB: a read ticket larger than half the small tickets' window
     * (read_async.c) takes its region anywhere in the buffer, and at 8 MiB
     * two such tickets (a 64-block tile of 16 streams of 4 KiB stripes) no
     * longer fit together: the device waited for each one's check and copy
     * (docs/perf/swap.md, the disk case at d128). */
    size_t bb = c->io_buffer_bytes ? (size_t)c->io_buffer_bytes : (size_t)32 << 20;
    if (bb < 2 * s->run_bytes)
        bb = (size_t)(2 * s->run_bytes);
    s->bounce_bytes = sw_align_up(bb, SW_STORE_ALIGN);
    const sw_store_facts facts = {sw_io_backend(s->io), s->g.slot_bytes, s->run_bytes,
                                  s->bounce_bytes};
    sw_store_tuning_decide(c, &facts, tuning, &s->tune);

    uint64_t host_n = c->host_tier_bytes / s->g.slot_bytes;
    s->host_n = host_n > s->nslots ? s->nslots : (uint32_t)host_n;
    SW_TRY(sw_store_index_init(s));
    const int reg = s->tune.io_mem_register != 0;
    if (s->host_n) {
        s->host_mem = (char *)alloc_io_mem((size_t)s->host_n * s->g.slot_bytes, reg,
                                           &s->host_pinned);
        if (!s->host_mem)
            return sw_fail(SW_STATUS_NO_MEMORY, "host tier of %llu bytes",
                           (unsigned long long)s->host_n * s->g.slot_bytes);
    }
    s->bounce = (char *)alloc_io_mem(s->bounce_bytes, reg, &s->bounce_pinned);
    {
        /* A read batch plans whole groups (a run's slots cut into the
         * tuning's pieces, and its header): room for two of the largest
         * whatever the queue depth (a run of 4096 extents at the 128 KiB
         * pieces of io_uring took more than 2 x 64 + 8, and the plan of a
         * read over one run was empty: INTERNAL). */
        const uint64_t chunk = s->tune.read_chunk_bytes > 0 ? (uint64_t)s->tune.read_chunk_bytes : 0;
        const uint64_t cs = chunk / s->g.slot_bytes;
        const size_t gmax = cs ? (size_t)((s->g.run_blocks + cs - 1) / cs) + 1 : 2;
        s->ops_cap = (size_t)c->queue_depth * 2 + 8;
        if (s->ops_cap < 2 * gmax + 2)
            s->ops_cap = 2 * gmax + 2;
    }
    s->ops = (sw_io_op *)calloc(s->ops_cap, sizeof *s->ops);
    s->hpage = (char *)aligned_alloc(SW_STORE_ALIGN, SW_STORE_ALIGN);
    s->hpage_off = UINT64_MAX;
    if (!s->bounce || !s->ops || !s->hpage)
        return sw_fail(SW_STATUS_NO_MEMORY, "I/O buffer of %zu bytes", s->bounce_bytes);
    sw_io_register(s->io, s->bounce, s->bounce_bytes);

    return create ? SW_OK : open_journal(s);
}

sw_status sw_store_open(const sw_store_config *c, sw_store **out)
{
    return sw_store_open_tuned(c, NULL, out);
}

sw_status sw_store_open_tuned(const sw_store_config *c, const sw_store_tuning *tuning,
                              sw_store **out)
{
    if (!out)
        return sw_fail(SW_STATUS_INVALID, "sw_store_open: out is NULL");
    *out = NULL;
    SW_TRY(validate_config(c));
    sw_store *s = (sw_store *)calloc(1, sizeof *s);
    if (!s)
        return sw_fail(SW_STATUS_NO_MEMORY, "store handle");
    pthread_mutex_init(&s->lock, NULL);
    s->dir_fd = s->data_fd = s->journal_fd = -1;
    s->read_only = c->struct_size >= offsetof(sw_store_config, read_only) + sizeof c->read_only
                       ? c->read_only != 0
                       : 0;
    /* the fields appended after read_only: an older caller gets defaults */
    const int has_io = c->struct_size >= offsetof(sw_store_config, lock_wait_ms) +
                                             sizeof c->lock_wait_ms;
    s->io_want = has_io ? c->io_backend : SW_STORE_IO_AUTO;
    s->buffered_io = has_io ? c->buffered_io != 0 : 0;
    s->lock_wait_ms = !has_io || c->lock_wait_ms == 0 ? 2000
                      : c->lock_wait_ms < 0           ? 0
                                                      : c->lock_wait_ms;
    s->durability = c->durability;
    s->full_policy = c->full_policy;
    s->queue_depth = c->queue_depth;
    sw_status st = store_open(c, tuning, s);
    if (st == SW_OK)
        st = sw_remote_tier_open(c, s->g.stripe_bytes, s->read_only, sw_store_write_back, s,
                                 &s->rt);
    if (st != SW_OK) {
        store_free(s);
        return st;
    }
    *out = s;
    return SW_OK;
}

sw_status sw_store_close(sw_store *s)
{
    if (!s)
        return SW_OK;
    /* Read tickets still outstanding: their I/O is completed (the bounce
     * buffer is freed below) and dropped; nothing more is written into the
     * callers' buffers. */
    sw_store_reads_close(s);
    /* The write-through worker first: bounded by remote_close_wait_ms plus
     * one put batch in flight (the remote's command_timeout_ms). */
    sw_remote_tier_close(s->rt);
    s->rt = NULL;
    sw_status st = SW_OK;
    if (!s->failed && !s->read_only) {
        if (fdatasync(s->data_fd) != 0)
            st = sw_store_errno(s, errno, "fdatasync(data) at close");
        if (fdatasync(s->journal_fd) != 0 && st == SW_OK)
            st = sw_store_errno(s, errno, "fdatasync(journal) at close");
    }
    store_free(s);
    return st;
}

sw_status sw_store_get_stats(sw_store *s, sw_store_stats *out)
{
    if (!s || !out || out->struct_size < 16)
        return sw_fail(SW_STATUS_INVALID, "sw_store_get_stats: null argument or struct_size < 16");
    uint32_t want = out->struct_size;
    pthread_mutex_lock(&s->lock);
    sw_store_stats st = s->st;
    st.runs_used = 0;
    st.io_backend = sw_io_backend(s->io);
    st.direct_io = s->direct_io;
    st.failed = s->failed;
    st.stripe_bytes = s->g.stripe_bytes;
    st.extent_bytes = s->g.slot_bytes;
    st.run_blocks = s->g.run_blocks;
    st.extents_total = s->nslots;
    st.extents_used = s->used_slots;
    st.capacity_bytes = (uint64_t)s->nslots * s->g.slot_bytes;
    st.used_bytes = (uint64_t)s->used_slots * s->g.slot_bytes;
    st.payload_bytes = s->payload_bytes;
    st.file_bytes = s->g.nruns * s->run_bytes;
    st.host_capacity_bytes = (uint64_t)s->host_n * s->g.slot_bytes;
    st.host_used_bytes = (uint64_t)s->host_used * s->g.slot_bytes;
    st.host_entries = s->host_used;
    st.host_leased = s->host_leased;
    st.host_lease_unmaps = s->host_lease_unmaps;
    st.generation = s->generation;
    st.runs_total = s->g.nruns;
    for (uint64_t r = 0; r < s->g.nruns; r++)
        st.runs_used += s->runs[r].used != 0;
    st.run_header_bytes = s->g.run_header_bytes;
    st.store_id = s->g.store_id;
    st.queue_depth = s->queue_depth;
    st.io_buffer_bytes = s->bounce_bytes;
    st.read_only = (uint64_t)s->read_only;
    st.keys_unprovable = s->unprov.n;
    pthread_mutex_unlock(&s->lock);
    sw_remote_tier_stats(s->rt, &st);
    st.struct_size = want;
    memcpy(out, &st, want < sizeof st ? want : sizeof st);
    return SW_OK;
}
