/* A block's manifest: what an engine needs besides the stripes to adopt the
 * block after a restart (sw_swap_seq_attach), stored beside them under the
 * kv_head SW_SWAP_MANIFEST_HEAD (never a real head: num_kv_heads <= 65535).
 * Written by sw_swap_offload after the block's stripes; read back, checked
 * against the engine's model, and turned into the block's registry entry.
 * Pure encoding, little-endian, fixed layout:
 *     0 u32 magic "SWBM"   4 u16 version (1)   6 u8 dtype   7 u8 0
 *     8 i32 valid tokens  12 i32 block_size   16 i32 num_kv_heads
 *    20 i32 head_dim      24 f32 k_scale      28 f32 v_scale
 *    32 u64 generation[num_kv_heads][2]       (K, V of each kv head)
 * The store checksums the payload; a manifest whose stripes were rewritten
 * since shows as a generation mismatch when they are read. */
#include "swap_internal.h"
#include "../core/sw_core.h"
#include "core/sw_le.h"

#include <string.h>

#define SW_MANIFEST_MAGIC 0x4d425753u /* "SWBM" */
#define SW_MANIFEST_VERSION 1

size_t sw_swap_manifest_size(int32_t num_kv_heads)
{
    return 32 + 16 * (size_t)num_kv_heads;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void sw_swap_manifest_encode(const sw_swap_model *m, const sw_swap_blk *e, void *out)
{
    uint8_t *p = out;
    memset(p, 0, sw_swap_manifest_size(m->num_kv_heads));
    sw_le_put32(p, SW_MANIFEST_MAGIC);
    sw_le_put16(p + 4, SW_MANIFEST_VERSION);
    p[6] = e->dtype;
    sw_le_put32(p + 8, (uint32_t)e->valid);
    sw_le_put32(p + 12, (uint32_t)m->block_size);
    sw_le_put32(p + 16, (uint32_t)m->num_kv_heads);
    sw_le_put32(p + 20, (uint32_t)m->head_dim);
    sw_le_put32(p + 24, fbits(e->k_scale));
    sw_le_put32(p + 28, fbits(e->v_scale));
    for (int32_t i = 0; i < 2 * m->num_kv_heads; i++)
        sw_le_put64(p + 32 + 8 * (size_t)i, e->gen[i]);
}

sw_status sw_swap_manifest_decode(const sw_swap_model *m, const void *buf, size_t len,
                                  sw_swap_blk *e)
{
    const uint8_t *p = buf;
    const size_t want = sw_swap_manifest_size(m->num_kv_heads);
    if (len < 32 || sw_le_get32(p) != SW_MANIFEST_MAGIC)
        return sw_fail(SW_STATUS_CORRUPT, "not a block manifest (%zu bytes, magic %08x)", len,
                       len >= 4 ? sw_le_get32(p) : 0u);
    if (sw_le_get16(p + 4) != SW_MANIFEST_VERSION)
        return sw_fail(SW_STATUS_UNSUPPORTED, "block manifest version %u (this library reads %d)",
                       (unsigned)sw_le_get16(p + 4), SW_MANIFEST_VERSION);
    const int32_t bs = (int32_t)sw_le_get32(p + 12), h = (int32_t)sw_le_get32(p + 16);
    const int32_t d = (int32_t)sw_le_get32(p + 20), valid = (int32_t)sw_le_get32(p + 8);
    if (bs != m->block_size || h != m->num_kv_heads || d != m->head_dim)
        return sw_fail(SW_STATUS_INVALID, "the block was offloaded with block_size %d, %d kv heads, "
                       "head_dim %d; this engine has %d, %d, %d", bs, h, d, m->block_size,
                       m->num_kv_heads, m->head_dim);
    if (len != want)
        return sw_fail(SW_STATUS_CORRUPT, "block manifest of %zu bytes, want %zu", len, want);
    if (valid < 1 || valid > bs || (p[6] != SW_SWAP_KV_BF16 && p[6] != SW_SWAP_KV_FP8_E4M3) ||
        p[7] != 0)
        return sw_fail(SW_STATUS_CORRUPT, "block manifest with %d valid tokens, dtype %u", valid,
                       p[6]);
    const float ks = bitsf(sw_le_get32(p + 24)), vs = bitsf(sw_le_get32(p + 28));
    if (!(ks > 0.0f) || !(vs > 0.0f) || ks > 3.4e38f || vs > 3.4e38f)
        return sw_fail(SW_STATUS_CORRUPT, "block manifest with scales %g, %g", (double)ks,
                       (double)vs);
    e->valid = valid;
    e->dtype = p[6];
    e->k_scale = ks;
    e->v_scale = vs;
    for (int32_t i = 0; i < 2 * h; i++)
        e->gen[i] = sw_le_get64(p + 32 + 8 * (size_t)i);
    return SW_OK;
}
