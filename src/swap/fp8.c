/* FP8 E4M3 (OCP "e4m3fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no
 * infinities, S.1111.111 is NaN, largest finite 448. */
#include "swap_internal.h"

#include <math.h>
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
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a >= 448.0f)
        return (uint8_t)(sign | 0x7e);
    /* Search the 127 non-negative finite codes: exact nearest, ties to even
     * code (an even code has mantissa LSB 0). Called off the hot path (tests,
     * quantising callers). */
    uint8_t best = 0;
    float bd = INFINITY;
    for (int c = 0; c <= 0x7e; c++) {
        float d = fabsf(sw_e4m3_to_f32((uint8_t)c) - a);
        if (d < bd || (d == bd && (c & 1) == 0)) {
            bd = d;
            best = (uint8_t)c;
        }
    }
    return (uint8_t)(sign | best);
}
