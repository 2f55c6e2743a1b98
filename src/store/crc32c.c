/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the
 * store's extents, journal records and superblock. The SSE4.2 crc32
 * instruction is used when the CPU has it (checked once at run time); a
 * slicing-by-8 table otherwise. Test vector (RFC 3720 B.4):
 * crc32c("123456789") = 0xE3069283. */
#include "store/format.h"

#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

static uint32_t crc_tab[8][256];
static int crc_tab_ready;

static void crc_tab_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
    __atomic_store_n(&crc_tab_ready, 1, __ATOMIC_RELEASE);
}

uint32_t sw_crc32c_update_table(uint32_t crc, const void *data, size_t len)
{
    if (!__atomic_load_n(&crc_tab_ready, __ATOMIC_ACQUIRE))
        crc_tab_init(); /* idempotent: racing initialisers write equal values */
    const uint8_t *p = (const uint8_t *)data;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c; /* little-endian hosts only; big-endian takes the byte loop */
        if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
            c = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^
                crc_tab[5][(w >> 16) & 0xff] ^ crc_tab[4][(w >> 24) & 0xff] ^
                crc_tab[3][(w >> 32) & 0xff] ^ crc_tab[2][(w >> 40) & 0xff] ^
                crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
            p += 8;
            len -= 8;
        } else {
            break;
        }
    }
    while (len--)
        c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__)
/* Three independent crc32q chains hide the instruction's 3-cycle latency
 * (one chain runs at ~1/3 of the unit's throughput). Lanes of L bytes are
 * combined with "shift" tables: feeding L zero bytes to the CRC state is a
 * linear map, tabulated per state byte (shift_x[k][b] = state (b << 8k)
 * after L zero bytes), so state(A || B) = shift_|B|(state(A)) ^ state_0(B). */
#define CRC_LONG 2048u  /* lane bytes of a long round (3 lanes: 6 KiB) */
#define CRC_SHORT 128u  /* lane bytes of a short round (384 B) */
static uint32_t crc_shift_long[4][256], crc_shift_short[4][256];
static int crc_shift_ready;

__attribute__((target("sse4.2"))) static uint32_t crc_zeros(uint32_t c, size_t len)
{
    uint64_t s = c;
    for (size_t i = 0; i < len; i += 8)
        s = __builtin_ia32_crc32di(s, 0);
    return (uint32_t)s;
}

__attribute__((target("sse4.2"))) static void crc_shift_init(void)
{
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            crc_shift_long[k][b] = crc_zeros(b << (8 * k), CRC_LONG);
            crc_shift_short[k][b] = crc_zeros(b << (8 * k), CRC_SHORT);
        }
    __atomic_store_n(&crc_shift_ready, 1, __ATOMIC_RELEASE);
}

static inline uint32_t crc_shift(uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const void *data,
                                                            size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    uint64_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        len--;
    }
    if (len >= 3 * CRC_SHORT) {
        if (!__atomic_load_n(&crc_shift_ready, __ATOMIC_ACQUIRE))
            crc_shift_init(); /* idempotent: racing initialisers write equal values */
        while (len >= 3 * CRC_LONG) {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < CRC_LONG; i += 8) {
                uint64_t w0, w1, w2;
                memcpy(&w0, p + i, 8);
                memcpy(&w1, p + CRC_LONG + i, 8);
                memcpy(&w2, p + 2 * CRC_LONG + i, 8);
                c = __builtin_ia32_crc32di(c, w0);
                c1 = __builtin_ia32_crc32di(c1, w1);
                c2 = __builtin_ia32_crc32di(c2, w2);
            }
            c = crc_shift(crc_shift_long, (uint32_t)c) ^ (uint32_t)c1;
            c = crc_shift(crc_shift_long, (uint32_t)c) ^ (uint32_t)c2;
            p += 3 * CRC_LONG;
            len -= 3 * CRC_LONG;
        }
        while (len >= 3 * CRC_SHORT) {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < CRC_SHORT; i += 8) {
                uint64_t w0, w1, w2;
                memcpy(&w0, p + i, 8);
                memcpy(&w1, p + CRC_SHORT + i, 8);
                memcpy(&w2, p + 2 * CRC_SHORT + i, 8);
                c = __builtin_ia32_crc32di(c, w0);
                c1 = __builtin_ia32_crc32di(c1, w1);
                c2 = __builtin_ia32_crc32di(c2, w2);
            }
            c = crc_shift(crc_shift_short, (uint32_t)c) ^ (uint32_t)c1;
            c = crc_shift(crc_shift_short, (uint32_t)c) ^ (uint32_t)c2;
            p += 3 * CRC_SHORT;
            len -= 3 * CRC_SHORT;
        }
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

#endif

static int crc_hw = -1; /* -1 unknown, 0 table, 1 sse4.2 */

static int crc_use_hw(void)
{
    int hw = __atomic_load_n(&crc_hw, __ATOMIC_RELAXED);
    if (hw < 0) {
#if defined(__x86_64__)
        __builtin_cpu_init();
        hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
        hw = 0;
#endif
        __atomic_store_n(&crc_hw, hw, __ATOMIC_RELAXED);
    }
    return hw;
}

uint32_t sw_crc32c_update(uint32_t crc, const void *data, size_t len)
{
#if defined(__x86_64__)
    if (crc_use_hw())
        return crc_sse42(crc, data, len);
#endif
    return sw_crc32c_update_table(crc, data, len);
}

uint32_t sw_crc32c(const void *data, size_t len) { return sw_crc32c_update(0, data, len); }

#if defined(__x86_64__)
/* Copies len bytes with 16-byte non-temporal stores (SSE2, part of x86-64):
 * the destination's lines are written without being read first (no
 * read-for-ownership) and do not evict the cache; the source is read with
 * ordinary loads, so it is in L1/L2 afterwards. */
static void copy_stream(uint8_t *d, const uint8_t *p, size_t len)
{
    size_t head = (size_t)(-(uintptr_t)d & 15);
    if (head > len)
        head = len;
    memcpy(d, p, head);
    d += head;
    p += head;
    len -= head;
    for (; len >= 64; d += 64, p += 64, len -= 64) {
        __m128i x0 = _mm_loadu_si128((const __m128i *)p);
        __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
        _mm_stream_si128((__m128i *)d, x0);
        _mm_stream_si128((__m128i *)(d + 16), x1);
        _mm_stream_si128((__m128i *)(d + 32), x2);
        _mm_stream_si128((__m128i *)(d + 48), x3);
    }
    memcpy(d, p, len);
}
#endif

/* Per chunk (12 KiB: two long rounds of crc_sse42, and small enough to stay
 * in L1): the copy first, then the CRC of the source, which the copy's loads
 * have just brought into the cache. Over cache-cold 8 KiB stripes this ran
 * at 10.9-11.0 GB/s where CRC then memcpy ran at 7.2-8.0 and memcpy then
 * the CRC of dst at 8.0-9.7; one loop that stores each word the CRC loaded
 * (three interleaved crc32q lanes, plain or non-temporal 8-byte stores) ran
 * at 7.8-8.1 / 9.4 (docs/perf/store.md, v9). */
uint32_t sw_crc32c_copy(void *dst, const void *src, size_t len)
{
    enum { CHUNK = 12288 };
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *p = (const uint8_t *)src;
    uint32_t crc = 0;
#if defined(__x86_64__)
    if (crc_use_hw()) {
        while (len) {
            size_t k = len < CHUNK ? len : CHUNK;
            copy_stream(d, p, k);
            crc = crc_sse42(crc, p, k);
            d += k;
            p += k;
            len -= k;
        }
        _mm_sfence(); /* order the streaming stores before the caller's flag or unlock */
        return crc;
    }
#endif
    if (len)
        memcpy(d, p, len);
    return sw_crc32c_update_table(crc, d, len); /* dst is the cache-hot copy */
}

const char *sw_crc32c_impl(void)
{
    (void)sw_crc32c("", 0);
    return __atomic_load_n(&crc_hw, __ATOMIC_RELAXED) == 1 ? "sse4.2" : "table";
}
