/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the
 * store's extents, journal records and superblock. The SSE4.2 crc32
 * instruction is used when the CPU has it (checked once at run time); a
 * slicing-by-8 table otherwise. Test vector (RFC 3720 B.4):
 * crc32c("123456789") = 0xE3069283. */
#include "store/format.h"

#include <string.h>

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
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const void *data,
                                                            size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    uint64_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        len--;
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

uint32_t sw_crc32c_update(uint32_t crc, const void *data, size_t len)
{
    int hw = __atomic_load_n(&crc_hw, __ATOMIC_RELAXED);
    if (hw < 0) {
#if defined(__x86_64__)
        __builtin_cpu_init();
        hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
        hw = 0;
#endif
        if (sw_env_int("SPILLWAY_CRC_TABLE", 0))
            hw = 0;
        __atomic_store_n(&crc_hw, hw, __ATOMIC_RELAXED);
    }
#if defined(__x86_64__)
    if (hw)
        return crc_sse42(crc, data, len);
#endif
    return sw_crc32c_update_table(crc, data, len);
}

uint32_t sw_crc32c(const void *data, size_t len) { return sw_crc32c_update(0, data, len); }

const char *sw_crc32c_impl(void)
{
    (void)sw_crc32c("", 0);
    return __atomic_load_n(&crc_hw, __ATOMIC_RELAXED) == 1 ? "sse4.2" : "table";
}
