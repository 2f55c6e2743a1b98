/* Encoders and pure decoders of the on-disk structures (see format.h), and
 * the check of a caller's key. */
#include "store/format.h"
#include "core/sw_le.h"

#include <string.h>

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
    sw_le_put32(out + 8, g->version);
    sw_le_put32(out + 12, g->stripe_bytes);
    sw_le_put32(out + 16, g->run_blocks);
    sw_le_put32(out + 20, g->run_header_bytes);
    sw_le_put64(out + 24, g->slot_bytes);
    sw_le_put64(out + 32, g->nruns);
    sw_le_put64(out + 40, g->store_id);
    sw_le_put32(out + 60, sw_crc32c(out, 60));
}

sw_status sw_store_decode_superblock(const uint8_t *buf, size_t len, sw_store_geometry *g)
{
    memset(g, 0, sizeof *g);
    if (!buf || len < 64)
        return SW_STATUS_INVALID;
    if (memcmp(buf, sb_magic, 8) != 0 || sw_le_get32(buf + 60) != sw_crc32c(buf, 60))
        return SW_STATUS_CORRUPT;
    g->version = sw_le_get32(buf + 8);
    g->stripe_bytes = sw_le_get32(buf + 12);
    g->run_blocks = sw_le_get32(buf + 16);
    g->run_header_bytes = sw_le_get32(buf + 20);
    g->slot_bytes = sw_le_get64(buf + 24);
    g->nruns = sw_le_get64(buf + 32);
    g->store_id = sw_le_get64(buf + 40);
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
    sw_le_put16(p + 6, k->kv_head);
    sw_le_put64(p + 8, k->ns);
    sw_le_put32(p + 16, k->layer);
    sw_le_put32(p + 20, k->block);
}

static void get_key(const uint8_t *p, sw_store_key *k)
{
    k->kind = p[4];
    k->reserved = 0;
    k->kv_head = sw_le_get16(p + 6);
    k->ns = sw_le_get64(p + 8);
    k->layer = sw_le_get32(p + 16);
    k->block = sw_le_get32(p + 20);
}

void sw_store_encode_extent_hdr(const sw_store_extent_hdr *h, uint8_t out[SW_STORE_HDR_BYTES])
{
    memset(out, 0, SW_STORE_HDR_BYTES);
    sw_le_put32(out, SW_STORE_EXTENT_MAGIC);
    put_key(out, &h->key);
    sw_le_put64(out + 24, h->generation);
    sw_le_put32(out + 32, h->length);
    sw_le_put32(out + 36, h->payload_crc);
    sw_le_put64(out + 40, h->slot);
    out[5] = (uint8_t)h->state;
    sw_le_put64(out + 48, h->seq);
    sw_le_put32(out + 60, sw_crc32c(out, 60));
}

sw_status sw_store_decode_extent_hdr(const uint8_t *buf, size_t len, sw_store_extent_hdr *h)
{
    memset(h, 0, sizeof *h);
    if (!buf || len < SW_STORE_HDR_BYTES)
        return SW_STATUS_INVALID;
    if (sw_le_get32(buf) != SW_STORE_EXTENT_MAGIC || sw_le_get32(buf + 60) != sw_crc32c(buf, 60))
        return SW_STATUS_CORRUPT;
    if (buf[4] > 1 || buf[5] > SW_STORE_EXTENT_VOID || !all_zero(buf + 56, 4))
        return SW_STATUS_CORRUPT;
    get_key(buf, &h->key);
    h->state = buf[5];
    h->generation = sw_le_get64(buf + 24);
    h->length = sw_le_get32(buf + 32);
    h->payload_crc = sw_le_get32(buf + 36);
    h->slot = sw_le_get64(buf + 40);
    h->seq = sw_le_get64(buf + 48);
    if (h->length > SW_STORE_MAX_STRIPE ||
        (h->state == SW_STORE_EXTENT_VOID && (h->length || h->payload_crc)))
        return SW_STATUS_CORRUPT;
    return SW_OK;
}

void sw_store_encode_record(const sw_store_record *r, uint8_t out[SW_STORE_REC_BYTES])
{
    memset(out, 0, SW_STORE_REC_BYTES);
    sw_le_put32(out, SW_STORE_RECORD_MAGIC);
    put_key(out, &r->key);
    out[4] = (uint8_t)r->type; /* the record's byte 4 is the type ... */
    out[5] = r->key.kind;      /* ... and byte 5 the kind */
    sw_le_put64(out + 24, r->generation);
    sw_le_put64(out + 32, r->slot);
    sw_le_put32(out + 40, r->length);
    sw_le_put32(out + 44, r->payload_crc);
    sw_le_put64(out + 48, r->seq);
    sw_le_put32(out + 60, sw_crc32c(out, 60));
}

sw_status sw_store_decode_record(const uint8_t *buf, size_t len, sw_store_record *r)
{
    memset(r, 0, sizeof *r);
    if (!buf || len < SW_STORE_REC_BYTES)
        return SW_STATUS_INVALID;
    if (sw_le_get32(buf) != SW_STORE_RECORD_MAGIC || sw_le_get32(buf + 60) != sw_crc32c(buf, 60))
        return SW_STATUS_CORRUPT;
    if (buf[4] < SW_STORE_REC_PUT || buf[4] > SW_STORE_REC_UNPROV || buf[5] > 1 ||
        !all_zero(buf + 56, 4))
        return SW_STATUS_CORRUPT;
    r->type = buf[4];
    get_key(buf, &r->key);
    r->key.kind = buf[5];
    r->generation = sw_le_get64(buf + 24);
    r->slot = sw_le_get64(buf + 32);
    r->length = sw_le_get32(buf + 40);
    r->payload_crc = sw_le_get32(buf + 44);
    r->seq = sw_le_get64(buf + 48);
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
