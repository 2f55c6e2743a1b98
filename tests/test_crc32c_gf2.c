/* CRC32C arithmetic of store/crc32c_gf2.h (what the swap engine's gather
 * kernel computes on the GPU) against the store's own CRC32C (crc32c.c,
 * SSE4.2 or table): GF(2) product identities, the byte table, the
 * combination of pieces (raw(A || B) = raw(A) x^(8|B|) ^ raw(B)), the
 * raw <-> standard conversion, and the kernel's split (128 threads x 64-byte
 * chunks, front-padded segments) over random buffers and lengths, aligned
 * or not, with the edge lengths of the split (0, one piece, one segment,
 * one byte more or less). CPU only; runs in every build. Seeded
 * (SW_TEST_SEED overrides); failures print the seed. */
#include "test_store_util.h"
#include "store/crc32c_gf2.h"

static uint64_t seed;

static void fill_random(sw_rng *r, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)sw_rng_next(r);
}

static void test_products(sw_rng *r)
{
    for (int i = 0; i < 2000; i++) {
        const uint32_t a = (uint32_t)sw_rng_next(r), b = (uint32_t)sw_rng_next(r);
        const uint32_t c = (uint32_t)sw_rng_next(r);
        CHECK(sw_crc32c_gf2_mul(a, SW_CRC32C_ONE) == a);
        CHECK(sw_crc32c_gf2_mul(SW_CRC32C_ONE, a) == a);
        CHECK(sw_crc32c_gf2_mul(a, 0) == 0);
        CHECK(sw_crc32c_gf2_mul(a, b) == sw_crc32c_gf2_mul(b, a));
        CHECK(sw_crc32c_gf2_mul(a, b ^ c) == (sw_crc32c_gf2_mul(a, b) ^ sw_crc32c_gf2_mul(a, c)));
        CHECK(sw_crc32c_gf2_mul(sw_crc32c_gf2_mul(a, b), c) ==
              sw_crc32c_gf2_mul(a, sw_crc32c_gf2_mul(b, c)));
        const uint64_t m = (uint64_t)sw_rng_int(r, 0, 1 << 20), n = (uint64_t)sw_rng_int(r, 0, 1 << 20);
        CHECK(sw_crc32c_gf2_xpow8(m + n) ==
              sw_crc32c_gf2_mul(sw_crc32c_gf2_xpow8(m), sw_crc32c_gf2_xpow8(n)));
    }
    CHECK(sw_crc32c_gf2_xpow8(0) == SW_CRC32C_ONE);
    /* x^32 mod P is P's low terms: x^32 = P(x) - x^32 over GF(2); in the
     * reflected form that is the polynomial word itself */
    CHECK(sw_crc32c_gf2_xpow8(4) == SW_CRC32C_POLY);
}

static void test_table_and_vector(void)
{
    uint32_t tab[256];
    for (uint32_t i = 0; i < 256; i++)
        tab[i] = sw_crc32c_tab_entry(i);
    for (uint32_t b = 0; b < 256; b++) {
        const uint8_t byte = (uint8_t)b;
        CHECK(sw_crc32c_from_raw(tab[b], 1) == sw_crc32c(&byte, 1));
    }
    const char *v = "123456789"; /* RFC 3720 B.4 */
    uint32_t c = 0;
    for (int i = 0; i < 9; i++)
        c = sw_crc32c_raw_byte(c, (uint8_t)v[i], tab);
    CHECK(sw_crc32c_from_raw(c, 9) == 0xE3069283u);
    CHECK(sw_crc32c_from_raw(0, 0) == sw_crc32c("", 0));
}

static void test_combine(sw_rng *r)
{
    uint8_t *buf = malloc(70000);
    for (int i = 0; i < 300; i++) {
        const size_t a = (size_t)sw_rng_int(r, 0, 30000), b = (size_t)sw_rng_int(r, 0, 30000);
        fill_random(r, buf, a + b);
        const uint32_t ca = sw_crc32c(buf, a), cb = sw_crc32c(buf + a, b);
        const uint32_t raw = sw_crc32c_gf2_shift(sw_crc32c_to_raw(ca, a), b) ^
                             sw_crc32c_to_raw(cb, b);
        const uint32_t want = sw_crc32c(buf, a + b);
        if (sw_crc32c_from_raw(raw, a + b) != want)
            printf("combine: |A| %zu |B| %zu: got %08x want %08x (seed %llu)\n", a, b,
                   sw_crc32c_from_raw(raw, a + b), want, (unsigned long long)seed);
        CHECK(sw_crc32c_from_raw(raw, a + b) == want);
        CHECK(sw_crc32c_to_raw(sw_crc32c_from_raw(raw, a + b), a + b) == raw);
    }
    free(buf);
}

static void test_gather_split(sw_rng *r)
{
    sw_crc32c_gather_consts k;
    sw_crc32c_gather_consts_fill(&k);
    uint32_t tab[256];
    for (uint32_t i = 0; i < 256; i++)
        tab[i] = sw_crc32c_tab_entry(i);
    CHECK(sw_crc32c_gather_lane(SW_CRC32C_GATHER_NT - 1) == SW_CRC32C_ONE);
    CHECK(k.row[SW_CRC32C_GATHER_PPT - 1] == SW_CRC32C_ONE);
    CHECK(k.seg == sw_crc32c_gf2_xpow8(SW_CRC32C_GATHER_SEG));
    const size_t S = SW_CRC32C_GATHER_SEG, maxlen = 4 * S + 4096;
    uint8_t *buf = malloc(maxlen);
    static const size_t edge[] = {0, 1, 15, 16, 17, 64, 4096, 8192 - 16, 8192, 8192 + 16,
                                  16384, 16384 + 48, 3 * 8192 - 1};
    int n = 0, bad = 0;
    for (int i = 0; i < 400; i++) {
        size_t len;
        if (i < (int)(sizeof edge / sizeof edge[0]))
            len = edge[i];
        else if (i % 2)
            len = (size_t)sw_rng_int(r, 0, (int32_t)(maxlen / 16)) * 16; /* the kernel's case */
        else
            len = (size_t)sw_rng_int(r, 0, (int32_t)maxlen);
        fill_random(r, buf, len);
        const uint32_t got = sw_crc32c_from_raw(sw_crc32c_gather_raw(buf, len, &k, tab), len);
        const uint32_t want = sw_crc32c(buf, len);
        n++;
        if (got != want) {
            bad++;
            if (bad < 5)
                printf("gather split: len %zu: got %08x want %08x (seed %llu)\n", len, got, want,
                       (unsigned long long)seed);
        }
        CHECK(got == want);
        /* one flipped bit anywhere is seen */
        if (len) {
            const size_t at = (size_t)sw_rng_int(r, 0, (int32_t)len - 1);
            buf[at] ^= (uint8_t)(1u << sw_rng_int(r, 0, 7));
            CHECK(sw_crc32c_from_raw(sw_crc32c_gather_raw(buf, len, &k, tab), len) != want);
        }
    }
    printf("gather split: %d lengths, %d mismatches\n", n, bad);
    free(buf);
}

int main(void)
{
    seed = ts_seed(20250611);
    sw_rng r = {seed};
    test_products(&r);
    test_table_and_vector();
    test_combine(&r);
    test_gather_split(&r);
    printf("crc32c gf2: %d failed checks (seed %llu, store CRC %s)\n", sw_test_failures,
           (unsigned long long)seed, sw_crc32c_impl());
    return sw_test_failures ? 1 : 0;
}
