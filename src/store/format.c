/* Encoders and pure decoders of the on-disk structures (see format.h), and
 * the check of a caller's key. */
#include "store/format.h"

#include <string.h>

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

sw_status sw_store_geometry_make(uint32_t stripe_bytes, uint32_t run_blocks,
                                 uint64_t capacity_bytes, sw_store_geometry *g)
{
    memset(g, 0, sizeof *g);
    if (stripe_bytes == 0 || stripe_bytes > SW_STORE_MAX_STRIPE)
        return SW_STATUS_INVALID;
    if (run_blocks == 0 || run_blocks > SW_STORE_MAX_RUN_BLOCKS)
        return SW_STATUS_INVALID;
    g->version = SW_STORE_FORMAT_VERSION;
    g->stripe_bytes = stripe_bytes;
    g->run_blocks = run_blocks;
    g->slot_bytes = sw_align_up(stripe_bytes, SW_STORE_ALIGN);
    g->run_header_bytes = (uint32_t)sw_align_up((size_t)run_blocks * SW_STORE_HDR_BYTES,
                                                SW_STORE_ALIGN);
    g->nruns = capacity_bytes / sw_store_run_bytes(g);
    if (g->nruns == 0)
        return SW_STATUS_INVALID;
    /* Slots are indexed with 32 bits in memory. */
    if (g->nruns * run_blocks >= 0xffffffffull)
        return SW_STATUS_INVALID;
    return SW_OK;
}

static const char sb_magic[8] = {'S', 'W', 'S', 'T', 'O', 'R', 'E', 0};

void sw_store_encode_superblock(const sw_store_geometry *g, uint8_t out[SW_STORE_SB_BYTES])
{
    memset(out, 0, SW_STORE_SB_BYTES);
    memcpy(out, sb_magic, 8);
    put32(out + 8, g->version);
    put32(out + 12, g->stripe_bytes);
    put32(out + 16, g->run_blocks);
    put32(out + 20, g->run_header_bytes);
    put64(out + 24, g->slot_bytes);
    put64(out + 32, g->nruns);
    put64(out + 40, g->store_id);
    put32(out + 60, sw_crc32c(out, 60));
}

sw_status sw_store_decode_superblock(const uint8_t *buf, size_t len, sw_store_geometry *g)
{
    memset(g, 0, sizeof *g);
    if (!buf || len < 64)
        return SW_STATUS_INVALID;
    if (memcmp(buf, sb_magic, 8) != 0 || get32(buf + 60) != sw_crc32c(buf, 60))
        return SW_STATUS_CORRUPT;
    g->version = get32(buf + 8);
    g->stripe_bytes = get32(buf + 12);
    g->run_blocks = get32(buf + 16);
    g->run_header_bytes = get32(buf + 20);
    g->slot_bytes = get64(buf + 24);
    g->nruns = get64(buf + 32);
    g->store_id = get64(buf + 40);
    if (g->version != SW_STORE_FORMAT_VERSION)
        return SW_STATUS_UNSUPPORTED;
    if (!all_zero(buf + 48, 12) || len > SW_STORE_SB_BYTES || !all_zero(buf + 64, len - 64))
        return SW_STATUS_CORRUPT;
    /* The stored derived fields must be what this version derives. */
    if (g->stripe_bytes == 0 || g->stripe_bytes > SW_STORE_MAX_STRIPE || g->run_blocks == 0 ||
        g->run_blocks > SW_STORE_MAX_RUN_BLOCKS ||
        g->slot_bytes != sw_align_up(g->stripe_bytes, SW_STORE_ALIGN) ||
        g->run_header_bytes !=
            sw_align_up((size_t)g->run_blocks * SW_STORE_HDR_BYTES, SW_STORE_ALIGN) ||
        g->nruns == 0 || g->nruns > 0xffffffffull || g->nruns * g->run_blocks >= 0xffffffffull)
        return SW_STATUS_CORRUPT;
    return SW_OK;
}

static void put_key(uint8_t *p, const sw_store_key *k)
{
    p[4] = k->kind;
    p[5] = 0;
    put16(p + 6, k->kv_head);
    put64(p + 8, k->ns);
    put32(p + 16, k->layer);
    put32(p + 20, k->block);
}

static void get_key(const uint8_t *p, sw_store_key *k)
{
    k->kind = p[4];
    k->reserved = 0;
    k->kv_head = get16(p + 6);
    k->ns = get64(p + 8);
    k->layer = get32(p + 16);
    k->block = get32(p + 20);
}

void sw_store_encode_extent_hdr(const sw_store_extent_hdr *h, uint8_t out[SW_STORE_HDR_BYTES])
{
    memset(out, 0, SW_STORE_HDR_BYTES);
    put32(out, SW_STORE_EXTENT_MAGIC);
    put_key(out, &h->key);
    put64(out + 24, h->generation);
    put32(out + 32, h->length);
    put32(out + 36, h->payload_crc);
    put64(out + 40, h->slot);
    out[5] = (uint8_t)h->state;
    put64(out + 48, h->seq);
    put32(out + 60, sw_crc32c(out, 60));
}

sw_status sw_store_decode_extent_hdr(const uint8_t *buf, size_t len, sw_store_extent_hdr *h)
{
    memset(h, 0, sizeof *h);
    if (!buf || len < SW_STORE_HDR_BYTES)
        return SW_STATUS_INVALID;
    if (get32(buf) != SW_STORE_EXTENT_MAGIC || get32(buf + 60) != sw_crc32c(buf, 60))
        return SW_STATUS_CORRUPT;
    if (buf[4] > 1 || buf[5] > SW_STORE_EXTENT_VOID || !all_zero(buf + 56, 4))
        return SW_STATUS_CORRUPT;
    get_key(buf, &h->key);
    h->state = buf[5];
    h->generation = get64(buf + 24);
    h->length = get32(buf + 32);
    h->payload_crc = get32(buf + 36);
    h->slot = get64(buf + 40);
    h->seq = get64(buf + 48);
    if (h->length > SW_STORE_MAX_STRIPE ||
        (h->state == SW_STORE_EXTENT_VOID && (h->length || h->payload_crc)))
        return SW_STATUS_CORRUPT;
    return SW_OK;
}

void sw_store_encode_record(const sw_store_record *r, uint8_t out[SW_STORE_REC_BYTES])
{
    memset(out, 0, SW_STORE_REC_BYTES);
    put32(out, SW_STORE_RECORD_MAGIC);
    put_key(out, &r->key);
    out[4] = (uint8_t)r->type; /* the record's byte 4 is the type ... */
    out[5] = r->key.kind;      /* ... and byte 5 the kind */
    put64(out + 24, r->generation);
    put64(out + 32, r->slot);
    put32(out + 40, r->length);
    put32(out + 44, r->payload_crc);
    put64(out + 48, r->seq);
    put32(out + 60, sw_crc32c(out, 60));
}

sw_status sw_store_decode_record(const uint8_t *buf, size_t len, sw_store_record *r)
{
    memset(r, 0, sizeof *r);
    if (!buf || len < SW_STORE_REC_BYTES)
        return SW_STATUS_INVALID;
    if (get32(buf) != SW_STORE_RECORD_MAGIC || get32(buf + 60) != sw_crc32c(buf, 60))
        return SW_STATUS_CORRUPT;
    if (buf[4] < SW_STORE_REC_PUT || buf[4] > SW_STORE_REC_UNPROV || buf[5] > 1 ||
        !all_zero(buf + 56, 4))
        return SW_STATUS_CORRUPT;
    r->type = buf[4];
    get_key(buf, &r->key);
    r->key.kind = buf[5];
    r->generation = get64(buf + 24);
    r->slot = get64(buf + 32);
    r->length = get32(buf + 40);
    r->payload_crc = get32(buf + 44);
    r->seq = get64(buf + 48);
    if (r->length > SW_STORE_MAX_STRIPE)
        return SW_STATUS_CORRUPT;
    return SW_OK;
}

sw_status sw_store_check_key(const sw_store_key *k)
{
    if (!k)
        return sw_fail(SW_STATUS_INVALID, "store key is NULL");
    if (k->kind > SW_STORE_KIND_V || k->reserved != 0)
        return sw_fail(SW_STATUS_INVALID, "store key has kind %u / reserved %u (want 0|1, 0)",
                       k->kind, k->reserved);
    return SW_OK;
}
