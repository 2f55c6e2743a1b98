/* FP8 E4M3 (OCP "e4m3fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no
 * infinities, S.1111.111 is NaN, largest finite 448. */
#include "swap_internal.h"

#include <math.h>
#include <string.h>
#include <pthread.h>

/* (here, not in tile_cpu.c: the per-ISA kernels read it, and tile_cpu.c
 * calls them) */
float sw_swap_e4m3_lut[256];

static pthread_once_t lut_once = PTHREAD_ONCE_INIT;
static void lut_init(void)
{
    for (int i = 0; i < 256; i++)
        sw_swap_e4m3_lut[i] = sw_e4m3_to_f32((uint8_t)i);
}

void sw_swap_e4m3_lut_init(void)
{
    pthread_once(&lut_once, lut_init);
}

float sw_e4m3_to_f32(uint8_t x)
{
    const int sign = x >> 7, e = (x >> 3) & 0xf, m = x & 7;
    float v;
    if (e == 0xf && m == 7)
        return NAN;
    if (e == 0)
        v = ldexpf((float)m, -9); /* subnormal: m/8 * 2^-6 */
    else
        v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return sign ? -v : v;
}

uint8_t sw_f32_to_e4m3(float f)
{
    if (isnan(f))
        return 0x7f;
    const uint8_t sign = signbit(f) ? 0x80 : 0;
    const float a = fabsf(f);
    if (a >= 448.0f)
        return (uint8_t)(sign | 0x7e);
    if (a < 0.015625f) /* below 2^-6: subnormal codes, steps of 2^-9; 8 is 2^-6 */
        return (uint8_t)(sign | (uint8_t)nearbyintf(a * 512.0f));
    /* Normal: round the float's 23-bit mantissa to 3 bits, to nearest even
     * (a carry moves into the exponent); then rebias the exponent 127 -> 7.
     * a < 448 rounds to at most 448 (0x7e). */
    uint32_t u;
    memcpy(&u, &a, sizeof u);
    u = (u + 0x7ffffu + ((u >> 20) & 1u)) >> 20;
    return (uint8_t)(sign | (uint8_t)(u - ((127u - 7u) << 3)));
}
