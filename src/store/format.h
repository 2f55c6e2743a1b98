/* On-disk format of the block store: superblock, extent headers, journal
 * records, and CRC32C. The decoders are pure functions over a byte buffer
 * (no I/O, no allocation, no sw_fail) so that a fuzz target can call them
 * directly; callers add the detail to sw_last_error.
 *
 * All integers are little-endian.
 *
 * superblock (file "superblock", exactly 4096 bytes, written once at creation):
 *    0  char[8]  "SWSTORE\0"
 *    8  u32      format version (SW_STORE_FORMAT_VERSION; 2 since extents
 *                carry a sequence number, version 1 stores are refused)
 *   12  u32      stripe_bytes (largest payload)
 *   16  u32      run_blocks (slots per run)
 *   20  u32      run_header_bytes (4 KiB multiple >= run_blocks * 64)
 *   24  u64      slot_bytes (extent payload area, 4 KiB multiple)
 *   32  u64      nruns
 *   40  u64      store_id (random, for tools)
 *   48  u8[12]   zero
 *   60  u32      crc32c of bytes 0..59
 *   64  zero up to byte 4095 (checked: a non-zero byte, a shorter or longer
 *       file is a damaged superblock)
 *
 * data file: nruns runs; run r at r * run_bytes, run_bytes =
 *   run_header_bytes + run_blocks * slot_bytes. A run = a header page
 *   (run_blocks extent headers of 64 bytes, position p at p * 64) followed by
 *   run_blocks payload slots. Slot (r, p) holds one extent: header p of the
 *   run + payload, zero padded. Keeping the headers of a run together (rather
 *   than a 64-byte header in front of every payload) keeps 8 KiB stripes at
 *   8 KiB on disk: a 64-stripe tile is one 516 KiB read instead of 768 KiB.
 *
 * extent header (64 bytes; all zero = a slot never written):
 *    0  u32  magic 0x58455753 ("SWEX")
 *    4  u8   kind   5 u8 state (0 live, 1 void)   6 u16 kv_head
 *    8  u64  namespace
 *   16  u32  layer  20 u32 block
 *   24  u64  generation
 *   32  u32  payload length
 *   36  u32  crc32c of the payload
 *   40  u64  slot index (placement self-check)
 *   48  u64  sequence number: the journal record's of the same operation
 *   56  u8[4] zero
 *   60  u32  crc32c of bytes 0..59
 *   A live header is written with its payload before the put's journal
 *   record; a void header (length 0, crc 0) is written over
 *   the deleted extent's header after a delete's or eviction's tombstone,
 *   with the tombstone's sequence number. Open compares every header with
 *   the journal (store/recover.c).
 *
 * journal record (64 bytes, appended; file "journal"):
 *    0  u32  magic 0x524a5753 ("SWJR")
 *    4  u8   type (1 put, 2 delete, 3 snapshot, 4 unprovable)
 *    5  u8   kind   6 u16 kv_head
 *    8  u64  namespace
 *   16  u32  layer  20 u32 block
 *   24  u64  generation (put: of the extent; delete: the one deleted;
 *            snapshot: the store's newest generation)
 *   32  u64  slot index (put); snapshot: the number of records it covers
 *   40  u32  payload length (put)
 *   44  u32  crc32c of the payload (put)
 *   48  u64  sequence number (store-wide, grows by one per operation; the
 *            extent header of the same operation carries it too; the puts
 *            of one group of sw_store_write_batch are one operation and
 *            share it)
 *   56  u32  zero
 *   60  u32  crc32c of bytes 0..59
 * A journal starts with a snapshot record (key zero) followed by the `slot`
 * records it covers (written at creation with none, and by compaction with
 * the live stripes and the unprovable keys); appends follow. An unprovable
 * record says that the key's current version could not be proven at an
 * open (the journal had lost a record of it): reads of it fail until it is
 * written or deleted again.
 */
#ifndef SW_STORE_FORMAT_H
#define SW_STORE_FORMAT_H

#include "core/sw_core.h"
#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#define SW_STORE_FORMAT_VERSION 2u
#define SW_STORE_ALIGN 4096u
#define SW_STORE_SB_BYTES 4096u
#define SW_STORE_HDR_BYTES 64u
#define SW_STORE_REC_BYTES 64u
#define SW_STORE_EXTENT_MAGIC 0x58455753u
#define SW_STORE_RECORD_MAGIC 0x524a5753u
#define SW_STORE_MAX_STRIPE (64u << 20)
#define SW_STORE_MAX_RUN_BLOCKS 4096u

enum {
    SW_STORE_REC_PUT = 1,
    SW_STORE_REC_DEL = 2,
    SW_STORE_REC_SNAP = 3,
    SW_STORE_REC_UNPROV = 4
};
enum { SW_STORE_EXTENT_LIVE = 0, SW_STORE_EXTENT_VOID = 1 };

typedef struct sw_store_geometry {
    uint32_t version;
    uint32_t stripe_bytes;
    uint32_t run_blocks;
    uint32_t run_header_bytes;
    uint64_t slot_bytes;
    uint64_t nruns;
    uint64_t store_id;
} sw_store_geometry;

typedef struct sw_store_extent_hdr {
    sw_store_key key;
    uint64_t generation;
    uint32_t length;
    uint32_t payload_crc;
    uint64_t slot;
    uint64_t seq;
    uint32_t state;      /* SW_STORE_EXTENT_LIVE or _VOID */
} sw_store_extent_hdr;

typedef struct sw_store_record {
    uint32_t type;
    sw_store_key key;
    uint64_t generation;
    uint64_t slot;
    uint32_t length;
    uint32_t payload_crc;
    uint64_t seq;
} sw_store_record;

uint32_t sw_crc32c(const void *data, size_t len);
uint32_t sw_crc32c_update(uint32_t crc, const void *data, size_t len);
uint32_t sw_crc32c_update_table(uint32_t crc, const void *data, size_t len); /* portable path */
const char *sw_crc32c_impl(void); /* "sse4.2" or "table" */
/* Copies len bytes from src to dst (not overlapping) and returns
 * sw_crc32c(src, len), reading src from memory once: per chunk, the copy
 * brings it into the cache and the CRC runs over the cached bytes (the
 * store's read path over DMA'd, cache-cold data). On x86-64 dst is written
 * with non-temporal stores (not left in the cache), fenced before return. */
uint32_t sw_crc32c_copy(void *dst, const void *src, size_t len);

static inline uint64_t sw_store_run_bytes(const sw_store_geometry *g)
{
    return g->run_header_bytes + (uint64_t)g->run_blocks * g->slot_bytes;
}

/* Derives slot_bytes, run_header_bytes, nruns from stripe_bytes, run_blocks
 * and a capacity; SW_STATUS_INVALID when out of range or capacity < 1 run. */
sw_status sw_store_geometry_make(uint32_t stripe_bytes, uint32_t run_blocks,
                                 uint64_t capacity_bytes, sw_store_geometry *g);

void sw_store_encode_superblock(const sw_store_geometry *g, uint8_t out[SW_STORE_SB_BYTES]);
/* SW_OK; SW_STATUS_INVALID (len < 64); SW_STATUS_CORRUPT (magic, crc,
 * fields inconsistent with each other, len > 4096, a non-zero byte in
 * 48..59 or in 64..len); SW_STATUS_UNSUPPORTED (another format version;
 * g->version is still filled). Open passes the whole file and requires
 * len == 4096. */
sw_status sw_store_decode_superblock(const uint8_t *buf, size_t len, sw_store_geometry *g);

void sw_store_encode_extent_hdr(const sw_store_extent_hdr *h, uint8_t out[SW_STORE_HDR_BYTES]);
/* SW_OK; SW_STATUS_INVALID (len < 64); SW_STATUS_CORRUPT (magic, crc, kind,
 * state, nonzero reserved bytes, a void header with a length). */
sw_status sw_store_decode_extent_hdr(const uint8_t *buf, size_t len, sw_store_extent_hdr *h);

void sw_store_encode_record(const sw_store_record *r, uint8_t out[SW_STORE_REC_BYTES]);
/* SW_OK; SW_STATUS_INVALID (len < 64); SW_STATUS_CORRUPT (magic, crc, type,
 * kind, nonzero reserved bytes). */
sw_status sw_store_decode_record(const uint8_t *buf, size_t len, sw_store_record *r);

/* SW_STATUS_INVALID (with the detail) for a NULL key, a kind other than K
 * or V or a non-zero reserved field. */
sw_status sw_store_check_key(const sw_store_key *k);

static inline int sw_store_key_eq(const sw_store_key *a, const sw_store_key *b)
{
    return a->ns == b->ns && a->layer == b->layer && a->block == b->block &&
           a->kv_head == b->kv_head && a->kind == b->kind;
}

#endif
