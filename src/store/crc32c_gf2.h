/* CRC32C arithmetic in GF(2)[x] / P(x), for host and device code alike, so
 * that a CRC can be computed in independent pieces and the pieces combined
 * (the swap engine's gather kernel checks host-tier stripes on the GPU with
 * it: src/cuda/swap/swap_gather.cu). Plain C11 and CUDA C++; no tables of
 * its own (a caller that wants one fills it with sw_crc32c_tab_entry).
 *
 * Representation: the reflected one of sw_crc32c (src/store/crc32c.c): bit
 * 31 of a word is the coefficient of x^0, bit 0 that of x^31, and P is
 * 0x82F63B78. "raw" below is the CRC register run from 0 with no final
 * inversion; it is linear in the message:
 *   raw(A || B) = raw(A) * x^(8|B|) ^ raw(B)     (products mod P)
 *   raw(zeros || M) = raw(M)                     (leading zero bytes vanish)
 * and the standard CRC32C (register ~0 at the start, inverted at the end):
 *   crc(M) = raw(M) ^ (~0 * x^(8|M|)) ^ ~0.
 * tests/test_crc32c_gf2.c checks all of it against sw_crc32c. */
#ifndef SW_CRC32C_GF2_H
#define SW_CRC32C_GF2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SW_CRC_HD static inline __host__ __device__
#else
#define SW_CRC_HD static inline
#endif

#define SW_CRC32C_POLY 0x82F63B78u
#define SW_CRC32C_ONE 0x80000000u /* the polynomial 1 */

/* a * b mod P. Walks a's coefficients from x^0 up while b runs through
 * b, b*x, b*x^2, ...; branch-free (the device runs it in every lane). */
SW_CRC_HD uint32_t sw_crc32c_gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll 4 /* fully unrolled, the gather kernel's products took it to 190 registers */
#endif
    for (int i = 0; i < 32; i++) {
        p ^= b & (0u - ((a >> (31 - i)) & 1u));
        b = (b >> 1) ^ (SW_CRC32C_POLY & (0u - (b & 1u)));
    }
    return p;
}

/* x^(8 n) mod P: shifting a register over n bytes (square and multiply). */
SW_CRC_HD uint32_t sw_crc32c_gf2_xpow8(uint64_t n)
{
    uint32_t r = SW_CRC32C_ONE, sq = SW_CRC32C_ONE >> 8; /* x^8 */
    while (n) {
        if (n & 1u)
            r = sw_crc32c_gf2_mul(r, sq);
        sq = sw_crc32c_gf2_mul(sq, sq);
        n >>= 1;
    }
    return r;
}

/* The register c after n more zero bytes. */
SW_CRC_HD uint32_t sw_crc32c_gf2_shift(uint32_t c, uint64_t n)
{
    return sw_crc32c_gf2_mul(c, sw_crc32c_gf2_xpow8(n));
}

/* Entry i of the byte-at-a-time table: raw(byte i). */
SW_CRC_HD uint32_t sw_crc32c_tab_entry(uint32_t i)
{
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
        c = (c >> 1) ^ (SW_CRC32C_POLY & (0u - (c & 1u)));
    return c;
}

/* One byte into a raw register, with a table of sw_crc32c_tab_entry. */
SW_CRC_HD uint32_t sw_crc32c_raw_byte(uint32_t c, uint32_t byte, const uint32_t *tab)
{
    return tab[(c ^ byte) & 0xffu] ^ (c >> 8);
}

/* crc(M) of |M| = len bytes from raw(M), and back (the same map). */
SW_CRC_HD uint32_t sw_crc32c_from_raw(uint32_t raw, uint64_t len)
{
    return raw ^ sw_crc32c_gf2_shift(0xffffffffu, len) ^ 0xffffffffu;
}
SW_CRC_HD uint32_t sw_crc32c_to_raw(uint32_t crc, uint64_t len)
{
    return sw_crc32c_from_raw(crc, len);
}

/* The split the gather kernel uses: a stripe of len bytes (a multiple of
 * 16) is front-padded with zeros to whole segments of NT * PPT pieces of P =
 * 16 bytes (one 16-byte load each); piece p = j NT + t of a segment (thread
 * t's j-th load, j < PPT) gets its own raw CRC (four independent 16-byte
 * chains per thread), multiplied by x^(8 (SEG - P p - P)) (the bytes after
 * it in the segment) = row[j] * lane(t), with row[j] = x^(8 P NT (PPT-1-j))
 * and lane(t) = x^(8 P (NT-1-t)); the segment's raw CRC is the XOR of
 * those, and segments chain by raw = raw * x^(8 SEG) ^ segment. No piece
 * needs another thread's bytes, so the kernel keeps no copy of the segment
 * in shared memory. Constants for that split: */
#define SW_CRC32C_GATHER_NT 128 /* threads of a gather CTA */
#define SW_CRC32C_GATHER_P 16   /* bytes per piece */
#define SW_CRC32C_GATHER_PPT 4  /* pieces per thread and segment */
#define SW_CRC32C_GATHER_SEG (SW_CRC32C_GATHER_NT * SW_CRC32C_GATHER_P * SW_CRC32C_GATHER_PPT)

typedef struct sw_crc32c_gather_consts {
    uint32_t row[SW_CRC32C_GATHER_PPT]; /* x^(8 P NT (PPT - 1 - j)) */
    uint32_t seg;                       /* x^(8 SEG) */
} sw_crc32c_gather_consts;

SW_CRC_HD void sw_crc32c_gather_consts_fill(sw_crc32c_gather_consts *k)
{
    for (int j = 0; j < SW_CRC32C_GATHER_PPT; j++)
        k->row[j] = sw_crc32c_gf2_xpow8((uint64_t)SW_CRC32C_GATHER_P * SW_CRC32C_GATHER_NT *
                                        (uint64_t)(SW_CRC32C_GATHER_PPT - 1 - j));
    k->seg = sw_crc32c_gf2_xpow8(SW_CRC32C_GATHER_SEG);
}

/* Thread t's multiplier within a row of NT pieces: x^(8 P (NT - 1 - t)). */
SW_CRC_HD uint32_t sw_crc32c_gather_lane(int t)
{
    return sw_crc32c_gf2_xpow8((uint64_t)SW_CRC32C_GATHER_P *
                               (uint64_t)(SW_CRC32C_GATHER_NT - 1 - t));
}

/* Raw CRC of one 16-byte piece given as four little-endian words. */
SW_CRC_HD uint32_t sw_crc32c_piece_raw(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3,
                                       const uint32_t *tab)
{
    const uint32_t w[4] = {w0, w1, w2, w3};
    uint32_t c = 0;
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 4; b++)
            c = sw_crc32c_raw_byte(c, (w[i] >> (8 * b)) & 0xffu, tab);
    return c;
}

/* The split above run sequentially (the CPU test's model of the kernel):
 * raw CRC of p[0..len). tab: 256 entries of sw_crc32c_tab_entry. */
SW_CRC_HD uint32_t sw_crc32c_gather_raw(const uint8_t *p, uint64_t len,
                                        const sw_crc32c_gather_consts *k, const uint32_t *tab)
{
    const uint64_t S = SW_CRC32C_GATHER_SEG;
    const uint64_t nseg = (len + S - 1) / S;
    const uint64_t pad = nseg * S - len;
    uint32_t acc = 0;
    for (uint64_t g = 0; g < nseg; g++) {
        uint32_t seg = 0;
        for (int t = 0; t < SW_CRC32C_GATHER_NT; t++) {
            const uint32_t lane = sw_crc32c_gather_lane(t);
            for (int j = 0; j < SW_CRC32C_GATHER_PPT; j++) {
                uint32_t w[4];
                for (int i = 0; i < 4; i++) {
                    w[i] = 0;
                    for (int b = 0; b < 4; b++) {
                        const uint64_t o = g * S +
                                           ((uint64_t)j * SW_CRC32C_GATHER_NT + (uint64_t)t) *
                                               SW_CRC32C_GATHER_P +
                                           (uint64_t)(4 * i + b);
                        w[i] |= (uint32_t)(o < pad ? 0u : p[o - pad]) << (8 * b);
                    }
                }
                const uint32_t c = sw_crc32c_piece_raw(w[0], w[1], w[2], w[3], tab);
                seg ^= sw_crc32c_gf2_mul(c, sw_crc32c_gf2_mul(k->row[j], lane));
            }
        }
        acc = sw_crc32c_gf2_mul(acc, k->seg) ^ seg;
    }
    return acc;
}

#endif
