/* Little-endian fields of the on-disk and on-wire formats (the block
 * store's files, the remote tier's records, the swap engine's block
 * manifests), whatever the host's byte order. */
#ifndef SW_LE_H
#define SW_LE_H

#include <stdint.h>

static inline void sw_le_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void sw_le_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void sw_le_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t sw_le_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t sw_le_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t sw_le_get64(const uint8_t *p)
{
    return sw_le_get32(p) | (uint64_t)sw_le_get32(p + 4) << 32;
}

#endif
