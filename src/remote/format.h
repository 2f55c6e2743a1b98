/* Remote tier: key naming, the value format, cluster slots, latency
 * histogram. Everything here is pure (no I/O, no allocation, no sw_fail) so
 * that tests and a fuzz target can call it directly.
 *
 * value (little-endian):
 *    0  u32  magic 0x56525753 ("SWRV")
 *    4  u8   kind   5 u8 format version (2)   6 u16 kv_head
 *    8  u64  namespace
 *   16  u32  layer  20 u32 block
 *   24  u64  generation
 *   32  u32  payload length
 *   36  u64  prefix hash: FNV-1a 64 of the writer's whole key prefix
 *   44  u8[16] zero
 *   60  u32  crc32c of bytes 0..59 followed by the payload
 *   64  payload
 * One CRC covers header and payload, so a flipped byte anywhere in the value
 * (key field, prefix hash, length or data) fails the same check. The key
 * fields and the prefix hash together name the one key the value was
 * written under: a value copied under another key, or from another
 * tenant's prefix (COPY, RENAME, a raw SET of its bytes), still passes the
 * CRC but not the comparison with the key asked for. Version 1 (no prefix
 * hash) is not read: its tenant cannot be proven.
 */
#ifndef SW_REMOTE_FORMAT_H
#define SW_REMOTE_FORMAT_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#define SW_REMOTE_MAGIC 0x56525753u
#define SW_REMOTE_VERSION 2u
#define SW_REMOTE_HDR_BYTES 64u
#define SW_REMOTE_MAX_PREFIX 128u
/* prefix + 16 hex + 3 x u32/u16 decimals + kind + separators */
#define SW_REMOTE_MAX_KEY (SW_REMOTE_MAX_PREFIX + 64u)
#define SW_REMOTE_SLOTS 16384u

typedef struct sw_remote_hdr {
    sw_store_key key;
    uint64_t generation;
    uint64_t prefix_hash;   /* sw_remote_prefix_hash of the writer's prefix */
    uint32_t length;
} sw_remote_hdr;

/* FNV-1a 64 of the key prefix: the tenant a value belongs to. */
uint64_t sw_remote_prefix_hash(const char *prefix, size_t prefix_len);

/* Writes the key name into out (room for SW_REMOTE_MAX_KEY bytes, not NUL
 * terminated); returns its length. prefix_len <= SW_REMOTE_MAX_PREFIX. */
size_t sw_remote_key_name(const char *prefix, size_t prefix_len, const sw_store_key *k,
                          char *out);

/* Encodes the header for h and `payload` (h->length bytes). */
void sw_remote_encode_hdr(const sw_remote_hdr *h, const void *payload,
                          uint8_t out[SW_REMOTE_HDR_BYTES]);

/* Checks a whole value (header + payload) of `len` bytes: magic, version,
 * kind, reserved bytes, length == len - 64, CRC32C. SW_OK and *h filled, or
 * SW_STATUS_CORRUPT (anything wrong, including len < 64). The caller still
 * compares h->key and h->prefix_hash with the key it asked for (or calls
 * sw_remote_check_value, which does both). */
sw_status sw_remote_decode_value(const uint8_t *buf, size_t len, sw_remote_hdr *h);

/* Why a value was rejected (for the error detail and the counters). */
typedef enum sw_remote_reject {
    SW_REMOTE_REJECT_NONE = 0,
    SW_REMOTE_REJECT_DAMAGED,   /* short, bad magic/kind/reserved/length, CRC32C */
    SW_REMOTE_REJECT_VERSION,   /* a format version this build does not read */
    SW_REMOTE_REJECT_KEY,       /* intact, but written for another key */
    SW_REMOTE_REJECT_PREFIX     /* intact, but written under another key prefix */
} sw_remote_reject;

/* sw_remote_decode_value, then the header's key and prefix hash against the
 * key asked for (`want`, `prefix_hash`). SW_OK and *h, or SW_STATUS_CORRUPT
 * with *why saying which check failed (why may be NULL). */
sw_status sw_remote_check_value(const uint8_t *buf, size_t len, const sw_store_key *want,
                                uint64_t prefix_hash, sw_remote_hdr *h,
                                sw_remote_reject *why);
/* A short phrase for a reject reason ("written under another key prefix"). */
const char *sw_remote_reject_str(sw_remote_reject why);

/* RESP2 framing without allocation, so that a reply's announced lengths
 * are judged before its bytes are received. The scan is resumable: its
 * state keeps how far the reply was judged and, per array level, how many
 * elements are still to come, so a reply that arrives in many reads is
 * scanned once in all (rescanning from byte 0 after every 64 KB read cost
 * 5.9 s of CPU for a 16 MiB array). */
#define SW_RESP_MAX_LINE (64u << 10)   /* a type+length or status line */
#define SW_RESP_MAX_DEPTH 8u           /* nested arrays */

/* What a reply may hold. */
typedef struct sw_resp_limits {
    uint64_t max_bulk;    /* longest bulk string */
    size_t max_frame;     /* longest reply in bytes */
    uint64_t max_elems;   /* array elements in the whole reply, all levels;
                           * 0 = no array at all (a '*' reply is refused as
                           * soon as its first line is in) */
} sw_resp_limits;

typedef struct sw_resp_scan_state {
    size_t pos;           /* bytes of the reply judged (whole items) */
    size_t seen;          /* bytes from pos already searched for '\n' */
    uint64_t elems;       /* array elements announced so far */
    int depth;            /* open arrays */
    int64_t left[SW_RESP_MAX_DEPTH + 1]; /* items still to come per level */
    size_t line_end;      /* -2: the bytes up to the bulk's data */
    const char *why;      /* -1: what was wrong (a static string) */
} sw_resp_scan_state;

/* Starts the scan of a new reply. */
void sw_resp_scan_init(sw_resp_scan_state *s);

/* Scans on the reply that starts at buf[0], of which len bytes are received
 * (the same bytes as at the last call with this state, and maybe more; buf
 * itself may have moved):
 *  1  complete: *frame = its length in bytes;
 *  0  incomplete: *need = the length that must be received before it can
 *     complete or be judged further (> len);
 * -1  refused: not RESP2 (unknown type, bad number, missing CRLF, a line
 *     over SW_RESP_MAX_LINE), nested deeper than SW_RESP_MAX_DEPTH, more
 *     array elements than lim->max_elems (an array where none may be),
 *     longer than lim->max_frame: s->why says which;
 * -2  a top-level or nested bulk string announces *bulk > lim->max_bulk
 *     bytes (or more than a size_t can address); s->line_end = the offset
 *     of its data (nothing past its length line needs to be received to
 *     know it).
 * After 1, -1 or -2 the state must be re-initialised before another reply. */
int sw_resp_scan(sw_resp_scan_state *s, const char *buf, size_t len, const sw_resp_limits *lim,
                 size_t *frame, size_t *need, int64_t *bulk);

/* CRC16-CCITT (XMODEM) as Redis Cluster uses it, and the slot of a key:
 * the CRC16 of the {hash tag} when the key has a non-empty one, else of the
 * whole key, modulo 16384. */
uint16_t sw_remote_crc16(const void *data, size_t len);
uint32_t sw_remote_key_slot(const char *key, size_t len);

/* Log-scale latency histogram in microseconds: 8 buckets per doubling. */
#define SW_REMOTE_HIST_BUCKETS 256
typedef struct sw_remote_hist {
    uint64_t count;
    uint64_t max_us;
    uint64_t b[SW_REMOTE_HIST_BUCKETS];
} sw_remote_hist;
void sw_remote_hist_add(sw_remote_hist *h, uint64_t us);
/* Upper bound of the bucket holding quantile q (0..1); 0 when empty. */
uint64_t sw_remote_hist_quantile(const sw_remote_hist *h, double q);

#endif
