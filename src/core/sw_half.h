/* bf16 / fp16 <-> fp32 conversions for host code (round to nearest even). */
#ifndef SW_HALF_H
#define SW_HALF_H

#include <stdint.h>
#include <string.h>

static inline float sw_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t sw_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) /* NaN stays NaN */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float sw_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t sw_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u : 0));
    if (absu >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (absu < 0x38800000u) { /* below the smallest normal: subnormal or zero */
        if (absu < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = absu >> 23;
        uint32_t man = (absu & 0x7fffffu) | 0x800000u;
        /* value = man * 2^(e-150); the fp16 subnormal unit is 2^-24 */
        uint32_t sh = 150 - 24 - e; /* bits to drop, 14..24 */
        uint32_t q = man >> sh;
        uint32_t rem = man & ((1u << sh) - 1);
        uint32_t halfway = 1u << (sh - 1);
        if (rem > halfway || (rem == halfway && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent, round mantissa to 10 bits (nearest even) */
    uint32_t r = absu + 0xfffu + ((absu >> 13) & 1u);
    r -= (uint32_t)(127 - 15) << 23;
    return (uint16_t)(sign | (r >> 13));
}

#endif
