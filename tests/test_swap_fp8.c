/* FP8 E4M3 conversions (swap/fp8.c) against the format's definition: every
 * code decodes to (-1)^s 2^(e-7) (1 + m/8), or m 2^-9 when e = 0, and
 * S.1111.111 is NaN; encoding rounds to the nearest code, ties to the even
 * code, saturating at 448 — compared with an exhaustive search over the 127
 * non-negative codes for every code, the midpoints between neighbours and
 * one float either side of them, and a sweep of random floats. No GPU. */
#include "sw_test.h"

#include "swap/swap_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double code_value(int c) /* from the definition, not the library */
{
    const int e = (c >> 3) & 0xf, m = c & 7;
    const double v = e == 0 ? m * pow(2.0, -9) : pow(2.0, e - 7) * (1.0 + m / 8.0);
    return (c & 0x80) ? -v : v;
}

static uint8_t ref_encode(float f) /* nearest of 127 codes, ties to even */
{
    if (isnan(f))
        return 0x7f;
    const uint8_t sign = signbit(f) ? 0x80 : 0;
    const double a = fabs((double)f);
    if (a >= 448.0)
        return (uint8_t)(sign | 0x7e);
    int best = 0;
    double bd = INFINITY;
    for (int c = 0; c <= 0x7e; c++) {
        const double d = fabs(code_value(c) - a);
        if (d < bd || (d == bd && (c & 1) == 0)) {
            bd = d;
            best = c;
        }
    }
    return (uint8_t)(sign | best);
}

static int g_bad;
static void check_one(float f)
{
    const uint8_t got = sw_f32_to_e4m3(f), want = ref_encode(f);
    if (got != want && g_bad++ < 10)
        printf("encode %.9g: 0x%02x, want 0x%02x\n", (double)f, got, want);
    CHECK(got == want);
}

int main(void)
{
    /* decode: every code */
    for (int c = 0; c < 256; c++) {
        const float v = sw_e4m3_to_f32((uint8_t)c);
        if ((c & 0x7f) == 0x7f)
            CHECK(isnan(v));
        else
            CHECK((double)v == code_value(c));
    }
    /* encode: each code round-trips; midpoints tie to even; one float
     * either side of a midpoint goes to its side */
    int64_t n = 0;
    for (int c = 0; c <= 0x7e; c++)
        for (int s = 0; s < 2; s++) {
            const float v = (float)code_value(c | (s << 7));
            CHECK(sw_f32_to_e4m3(v) == (uint8_t)(c | (s << 7)));
            n++;
            if (c == 0x7e)
                continue;
            const float mid = (float)((code_value(c) + code_value(c + 1)) / 2);
            const float sg = s ? -1.0f : 1.0f;
            check_one(sg * mid);
            check_one(sg * nextafterf(mid, 0.0f));
            check_one(sg * nextafterf(mid, 1000.0f));
            n += 3;
        }
    /* saturation, NaN, signed zero, tiny values */
    CHECK(sw_f32_to_e4m3(448.0f) == 0x7e);
    CHECK(sw_f32_to_e4m3(447.99f) == 0x7e);
    CHECK(sw_f32_to_e4m3(1e30f) == 0x7e);
    CHECK(sw_f32_to_e4m3(-INFINITY) == 0xfe);
    CHECK((sw_f32_to_e4m3(NAN) & 0x7f) == 0x7f);
    CHECK(sw_f32_to_e4m3(-0.0f) == 0x80);
    CHECK(sw_f32_to_e4m3(1e-30f) == 0x00);
    /* a sweep: random bit patterns over the whole range of magnitudes up
     * to 512, and normally distributed values at several scales */
    const char *seed_env = getenv("SW_TEST_SEED");
    sw_rng r = {seed_env ? strtoull(seed_env, NULL, 0) : 20261202u};
    for (int i = 0; i < 400000; i++) {
        uint32_t u = (uint32_t)sw_rng_next(&r) % 0x44000000u; /* |f| < 512 */
        u |= (uint32_t)(sw_rng_next(&r) & 1) << 31;
        float f;
        memcpy(&f, &u, sizeof f);
        check_one(f);
        check_one((float)(sw_rng_normal(&r) * (1 << (i % 10))) / 8.0f);
        n += 2;
    }
    printf("fp8 e4m3: 256 codes decoded, %lld encodes checked, %d mismatches\n", (long long)n,
           g_bad);
    return sw_test_failures ? 1 : 0;
}
