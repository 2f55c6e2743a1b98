/* CPU fast path, AMX kernel (v1): bf16 data, head_dim a multiple of 32, on
 * Xeons with AMX-TILE + AMX-BF16 (Sapphire Rapids on).
 *
 * v0 (now bench/dev/cpu_fast_amx_v0.c, 483 GFLOP/s at 1x2048 d256 causal on
 * the H200's host, 0.70-0.97x torch on six bench cases) computed S^T = K.Q^T
 * so the softmax ran lane-wise over rows, but then had to scatter P into the
 * row-major A layout of P.V (one 16-lane scatter per pair of keys), repacked
 * V for every unit and 64-key tile, and loaded/stored the fp32 O tiles for
 * every 64 keys. v1 follows the layout PyTorch's CPU flash attention uses on
 * AMX (its bf16 "pack" path: K^T and V packed once per call in VNNI order,
 * S row-major, P row-major in bf16 = the A operand of P.V), in our units:
 *  - K and V of each (request, kv head) are packed ONCE per call, lazily by
 *    the first unit that reads them (cpu_fast_unit.c, sw_cpu_pack_get), zero past
 *    the last key up to a multiple of 32:
 *      kt: [key/16][d/2][16] words: word (p, n) = dims 2p, 2p+1 of key n of
 *          the 16-key block, so a B tile of S = Q.K^T (32 dims x 16 keys) is
 *          1 KiB contiguous;
 *      vp: [key/2][d] words: (V[2i][c], V[2i+1][c]), the B tile of P.V.
 *  - S[row][key] = Q.K^T: A = the unit's Q rows, bf16 [mv][d] (copied once
 *    per unit), 2 x 2 tiles of C per step (2 row groups x 2 key blocks), so
 *    every tile load feeds two tdpbf16ps.
 *  - Softmax per row (horizontal max/sum once per row and tile), scale and
 *    max subtraction folded into one FMA, 2^x by sw_exp2_avx512_nonpos_z;
 *    two 16-key vectors of P convert to 32 consecutive bf16 keys, already the
 *    A layout: no scatter, no transpose.
 *  - O[row][d] += P.V: 2 x 2 C tiles (2 row groups x 32 dims) per step,
 *    loaded from / stored to the fp32 accumulator once per key tile; the
 *    first tile starts from zeroed tiles instead of a cleared O; rows whose
 *    running max did not move (alpha == 1) are not rescaled.
 *  - Keys per tile: 128, or 256 for units that see more than 512 keys
 *    (sw_amx_keys; sw_cpu_amx_nkeys = 32..256 fixes it for measurements):
 *    more keys per tile means fewer O tile loads/stores and rescales per FLOP.
 * Short units (2026-11-30; v1 is kept as bench/dev/cpu_fast_amx_v1.c):
 *  - 2^x by sw_exp2_avx512_nonpos_z: excluded keys are zeroed by a mask,
 *    never sent through an underflowing vscalefps (-inf -> 2^-160 in v1: a
 *    microcode assist per instruction on Intel without FTZ, on every
 *    partially masked vector of every causal diagonal tile);
 *  - the softmax reads and exponentiates only the 16-key vectors holding a
 *    visible key of the row, S stops at the tile's keys rounded up to 16;
 *  - Q rows copied with vector moves, not a memcpy call per row;
 *  - calls of short requests (driver: every kv_len < SW_CPU_SHORT_KV): the
 *    next unit's Q rows are prefetched and this unit's output lines
 *    prefetched for writing while the tiles run.
 * Tiles: 8 registers, all 16 rows x 64 bytes (palette 1). S and P.V: 0-3 C,
 * 4-5 A, 6-7 B.
 *
 * Compile with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16
 * -mamx-tile -mamx-bf16 (GCC >= 11, clang >= 12). Without the AMX flags the
 * file compiles to a stub (sw_cpu_amx_built = 0) and the driver never picks
 * AMX. Called only when cpu_fast.c found AMX usable (CPU, XCR0 and Linux's
 * ARCH_REQ_XCOMP_PERM). Each unit loads the tile configuration on the
 * thread that runs it and releases the tiles at its end, so no tile state
 * outlives a unit on any thread (the calling thread included).
 *
 * Scratch (sw_cpu_scratch): qt holds Q [mv][d] bf16 (<= d * MROWS floats),
 * sx S [mv][nk + 16] fp32, px P [mv][nk + 32] bf16 (row strides padded by
 * one cache line so that rows do not share L1 sets), o [mv][d] fp32.
 *
 * Development check without AMX: bench/dev/cpu_fast_amx_emul.c compiles this
 * file with SW_AMX_EMULATE and a scalar model of the tile instructions
 * (bench/dev/cpu_fast_amx_emul.h), as sw_cpu_unit_amx_emul with the pack
 * function sw_cpu_amx_pack_emul. */
#include "cpu_fast_kernels.h"

/* GCC names the AMX macros __AMX_TILE__/__AMX_BF16__, clang 14 __AMXTILE__/__AMXBF16__ */
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_BF16__) || defined(__AMXBF16__))
#define SW_AMX_FLAGS 1
#endif

#if defined(__x86_64__) && (defined(__AVX512BF16__) && defined(__AVX512BW__))
#define SW_AMX_HAVE_AVX512BF16 1
#endif

#if defined(__x86_64__) && defined(SW_AMX_HAVE_AVX512BF16) &&                                  \
    (defined(SW_AMX_EMULATE) || defined(SW_AMX_FLAGS))
#include <float.h>
#include <immintrin.h>

#include "../core/sw_exp2_x86.h"
#include <math.h>
#include <string.h>

#if defined(SW_AMX_EMULATE)
/* bench/dev/cpu_fast_amx_emul.h, included before this file, defines the
 * SW_TILE_* operations on a scalar model and SW_AMX_RANGE/SW_AMX_ASSERT. */
#define SW_AMX_UNIT sw_cpu_unit_amx_emul
#define SW_AMX_PACK sw_cpu_amx_pack_emul
void sw_cpu_unit_amx_emul(const sw_attn_problem *pb, const sw_cpu_unit *u,
                          const sw_cpu_scratch *s);
void sw_cpu_amx_pack_emul(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                          uint16_t *vp);
#else
#define SW_AMX_UNIT sw_cpu_unit_amx
#define SW_AMX_PACK sw_cpu_amx_pack
const int sw_cpu_amx_built = 1;
/* GCC's tileloadd and ldtilecfg asm statements do not tell the compiler
 * that they read memory (GCC 12 amxtileintrin.h: no "memory" clobber, and
 * ldtilecfg names only the first 8 bytes of the config), so plain C stores
 * to a buffer could legally move past the tile load that reads it. A
 * compiler barrier before every load (and after every store) pins them. */
#define SW_AMX_FENCE() __asm__ volatile("" ::: "memory")
#define SW_TILE_CONFIG(cfg)        \
    do {                           \
        SW_AMX_FENCE();            \
        _tile_loadconfig(cfg);     \
    } while (0)
#define SW_TILE_LOADD(t, p, st)    \
    do {                           \
        SW_AMX_FENCE();            \
        _tile_loadd(t, p, st);     \
    } while (0)
#define SW_TILE_STORED(t, p, st)   \
    do {                           \
        _tile_stored(t, p, st);    \
        SW_AMX_FENCE();            \
    } while (0)
#define SW_TILE_ZERO(t) _tile_zero(t)
#define SW_TILE_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define SW_TILE_RELEASE() _tile_release()
#define SW_AMX_RANGE(p, bytes, name) ((void)0)
#define SW_AMX_RANGES_RESET() ((void)0)
#define SW_AMX_ASSERT(x) ((void)0)
#define SW_AMX_POISON(p, bytes) ((void)0)
#endif

/* ldtilecfg's 64-byte operand: palette 1, tiles 0-7 as 16 rows x 64 bytes. */
typedef struct sw_amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} sw_amx_cfg;
_Static_assert(sizeof(sw_amx_cfg) == 64, "tile config is 64 bytes");

static const sw_amx_cfg sw_amx_cfg16 __attribute__((aligned(64))) = {
    1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

/* ------------------------------------------------------------- packing -- */

/* r[0..16) rows of 16 32-bit words -> r[c] = column c (words (0..16, c)). */
static inline void sw_amx_tr16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3 */
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        __m512i x0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        __m512i x1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        __m512i y0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        __m512i y1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        r[j] = _mm512_shuffle_i32x4(x0, y0, 0x88);
        r[4 + j] = _mm512_shuffle_i32x4(x1, y1, 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
        r[12 + j] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
    }
}

void SW_AMX_PACK(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt, uint16_t *vp)
{
    const int d = pb->head_dim;
    const int32_t kv_len = pb->kv_indptr[req + 1] - pb->kv_indptr[req];
    const int64_t kvp = sw_cpu_pack_keys(kv_len);
    const int64_t kv0 = sw_cpu_kv0(pb, req);
    /* K^T: 16 keys x 16 words (32 dims) transposed per step */
    for (int64_t n0 = 0; n0 < kvp; n0 += 16) {
        const uint32_t *rows[16];
        for (int i = 0; i < 16; i++)
            rows[i] = n0 + i < kv_len ? (const uint32_t *)sw_cpu_kv_row(pb, pb->k, pb->k_stride,
                                                                        kv0 + n0 + i, kvh)
                                      : NULL;
        uint32_t *dst = (uint32_t *)kt + (size_t)(n0 / 16) * (size_t)(d / 2) * 16;
        for (int p0 = 0; p0 < d / 2; p0 += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = rows[i] ? _mm512_loadu_si512(rows[i] + p0) : _mm512_setzero_si512();
            sw_amx_tr16(r);
            for (int c = 0; c < 16; c++)
                _mm512_storeu_si512(dst + (size_t)(p0 + c) * 16, r[c]);
        }
    }
    /* V pairs: vp[i][c] = (V[2i][c], V[2i+1][c]) */
    const __m512i ilo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                         40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                         32, 0);
    const __m512i ihi = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25,
                                         56, 24, 55, 23, 54, 22, 53, 21, 52, 20, 51, 19, 50, 18,
                                         49, 17, 48, 16);
    for (int64_t i = 0; i < kvp / 2; i++) {
        uint32_t *dst = (uint32_t *)vp + (size_t)i * d;
        const uint16_t *a = 2 * i < kv_len ? (const uint16_t *)sw_cpu_kv_row(
                                                 pb, pb->v, pb->v_stride, kv0 + 2 * i, kvh)
                                           : NULL;
        const uint16_t *b = 2 * i + 1 < kv_len ? (const uint16_t *)sw_cpu_kv_row(
                                                     pb, pb->v, pb->v_stride, kv0 + 2 * i + 1, kvh)
                                               : NULL;
        for (int c = 0; c < d; c += 32) {
            __m512i va = a ? _mm512_loadu_si512(a + c) : _mm512_setzero_si512();
            __m512i vb = b ? _mm512_loadu_si512(b + c) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + c, _mm512_permutex2var_epi16(va, ilo, vb));
            _mm512_storeu_si512(dst + c + 16, _mm512_permutex2var_epi16(va, ihi, vb));
        }
    }
}

/* ------------------------------------------------------------ the unit -- */

/* S[0..mv)[0..nk16) = Q . K^T for the 16-key blocks kb0.. of kt; ld in
 * floats. nk16: the tile's keys rounded up to 16 (the softmax reads no
 * further), so a last odd 16-key block runs as one B tile. */
static void sw_amx_s(const uint16_t *qb, int d, int mv, const uint32_t *kt, int64_t kb0,
                     int nk16, float *sx, int ld)
{
    const int64_t qst = (int64_t)d * 2, sst = (int64_t)ld * 4;
    const size_t kblk = (size_t)(d / 2) * 16; /* words per 16-key block */
    for (int r0 = 0; r0 < mv; r0 += 32) {
        const int two = r0 + 16 < mv;
        for (int n0 = 0; n0 < nk16; n0 += 32) {
            const uint32_t *b0 = kt + (size_t)(kb0 + n0 / 16) * kblk;
            const uint32_t *b1 = b0 + kblk;
            float *c = sx + (size_t)r0 * ld + n0;
            if (n0 + 16 >= nk16) { /* one 16-key block left */
                SW_TILE_ZERO(0);
                if (two)
                    SW_TILE_ZERO(2);
                for (int k = 0; k < d; k += 32) {
                    SW_TILE_LOADD(4, qb + (size_t)r0 * d + k, qst);
                    SW_TILE_LOADD(6, b0 + (size_t)(k / 2) * 16, 64);
                    SW_TILE_DP(0, 4, 6);
                    if (two) {
                        SW_TILE_LOADD(5, qb + (size_t)(r0 + 16) * d + k, qst);
                        SW_TILE_DP(2, 5, 6);
                    }
                }
                SW_TILE_STORED(0, c, sst);
                if (two)
                    SW_TILE_STORED(2, c + (size_t)16 * ld, sst);
                continue;
            }
            SW_TILE_ZERO(0);
            SW_TILE_ZERO(1);
            if (two) {
                SW_TILE_ZERO(2);
                SW_TILE_ZERO(3);
            }
            for (int k = 0; k < d; k += 32) {
                SW_TILE_LOADD(4, qb + (size_t)r0 * d + k, qst);
                SW_TILE_LOADD(6, b0 + (size_t)(k / 2) * 16, 64);
                SW_TILE_LOADD(7, b1 + (size_t)(k / 2) * 16, 64);
                SW_TILE_DP(0, 4, 6);
                SW_TILE_DP(1, 4, 7);
                if (two) {
                    SW_TILE_LOADD(5, qb + (size_t)(r0 + 16) * d + k, qst);
                    SW_TILE_DP(2, 5, 6);
                    SW_TILE_DP(3, 5, 7);
                }
            }
            SW_TILE_STORED(0, c, sst);
            SW_TILE_STORED(1, c + 16, sst);
            if (two) {
                SW_TILE_STORED(2, c + (size_t)16 * ld, sst);
                SW_TILE_STORED(3, c + (size_t)16 * ld + 16, sst);
            }
        }
    }
}

/* o[0..mv)[0..d) (+)= P . V over nk32 keys; vp points at the tile's first
 * key pair; first: start from zero instead of o. ldp in bf16 elements. */
static void sw_amx_pv(float *o, int d, int mv, const uint16_t *px, int ldp, const uint32_t *vp,
                      int nk32, int first)
{
    const int64_t ost = (int64_t)d * 4, pst = (int64_t)ldp * 2, vst = (int64_t)d * 4;
    for (int r0 = 0; r0 < mv; r0 += 32) {
        const int two = r0 + 16 < mv;
        float *o0 = o + (size_t)r0 * d, *o1 = o0 + (size_t)16 * d;
        for (int c0 = 0; c0 < d; c0 += 32) {
            if (first) {
                SW_TILE_ZERO(0);
                SW_TILE_ZERO(1);
                if (two) {
                    SW_TILE_ZERO(2);
                    SW_TILE_ZERO(3);
                }
            } else {
                SW_TILE_LOADD(0, o0 + c0, ost);
                SW_TILE_LOADD(1, o0 + c0 + 16, ost);
                if (two) {
                    SW_TILE_LOADD(2, o1 + c0, ost);
                    SW_TILE_LOADD(3, o1 + c0 + 16, ost);
                }
            }
            for (int n = 0; n < nk32; n += 32) {
                const uint32_t *b = vp + (size_t)(n / 2) * d + c0; /* 16 pairs x 16 dims */
                SW_TILE_LOADD(4, px + (size_t)r0 * ldp + n, pst);
                SW_TILE_LOADD(6, b, vst);
                SW_TILE_LOADD(7, b + 16, vst);
                SW_TILE_DP(0, 4, 6);
                SW_TILE_DP(1, 4, 7);
                if (two) {
                    SW_TILE_LOADD(5, px + (size_t)(r0 + 16) * ldp + n, pst);
                    SW_TILE_DP(2, 5, 6);
                    SW_TILE_DP(3, 5, 7);
                }
            }
            SW_TILE_STORED(0, o0 + c0, ost);
            SW_TILE_STORED(1, o0 + c0 + 16, ost);
            if (two) {
                SW_TILE_STORED(2, o1 + c0, ost);
                SW_TILE_STORED(3, o1 + c0 + 16, ost);
            }
        }
    }
}

/* keys [n, n + 16) that are < lim, as a lane mask */
static inline __mmask16 sw_amx_keymask(int lim, int n)
{
    int k = lim - n;
    return k >= 16 ? (__mmask16)0xffff : k <= 0 ? (__mmask16)0 : (__mmask16)((1u << k) - 1);
}

/* Online softmax of one tile, row by row: keys of row r past lim(r) (its
 * visible keys in the tile, <= nn) are excluded; P = 2^(c*s - m) in bf16 to
 * px[r][0..nk32), exactly 0 past lim. alpha[r] = 2^(m_old - m_new).
 * Only the 16-key vectors that hold a visible key are read and
 * exponentiated (S is not computed past nn rounded up to 16, see
 * sw_amx_s); the rest of P is stored as zeros. On a causal diagonal tile
 * that skips about half the rounding and mask waste of short units.
 * sw_exp2_avx512_nonpos_z: excluded keys never reach an underflowing
 * vscalefps (a microcode assist per instruction on Intel; v1 fed it -inf). */
static void sw_amx_softmax(const float *sx, int lds, uint16_t *px, int ldp, int mv, int nn,
                           int nk32, int masked, const int32_t *vis, int32_t j0, float c, float *m,
                           float *l, float *alpha, float *rowsum)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512 cv = _mm512_set1_ps(c);
    for (int r = 0; r < mv; r++) {
        const float *s = sx + (size_t)r * lds;
        int lim = nn;
        if (masked) {
            int32_t v = vis[r] - j0;
            lim = v < 0 ? 0 : v > nn ? nn : v;
        }
        __m512 mx = ninf;
        for (int n = 0; n < lim; n += 16) {
            __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + n), cv);
            mx = _mm512_max_ps(mx, _mm512_mask_mov_ps(ninf, sw_amx_keymask(lim, n), x));
        }
        float mold = m[r];
        float mnew = _mm512_reduce_max_ps(mx);
        mnew = mnew > mold ? mnew : mold;
        /* a row that has seen no key keeps m = -inf: subtract -FLT_MAX instead
         * (its keys are all excluded, so P = 0 and alpha = 0, never NaN) */
        float muse = mnew > -FLT_MAX ? mnew : -FLT_MAX;
        const __m512 mv16 = _mm512_set1_ps(muse);
        __m512 sum = _mm512_setzero_ps();
        uint16_t *p = px + (size_t)r * ldp;
        int n = 0;
        for (; n < lim; n += 32) {
            __m512 x0 = _mm512_fmsub_ps(_mm512_loadu_ps(s + n), cv, mv16);
            __m512 p0 = sw_exp2_avx512_nonpos_z(x0, sw_amx_keymask(lim, n));
            __m512 p1 = _mm512_setzero_ps();
            if (n + 16 < lim) {
                __m512 x1 = _mm512_fmsub_ps(_mm512_loadu_ps(s + n + 16), cv, mv16);
                p1 = sw_exp2_avx512_nonpos_z(x1, sw_amx_keymask(lim, n + 16));
            }
            sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
            /* low half <- p0 (keys n..n+15), high half <- p1: key order */
            _mm512_storeu_si512(p + n, (__m512i)_mm512_cvtne2ps_pbh(p1, p0));
        }
        for (; n < nk32; n += 32)
            _mm512_storeu_si512(p + n, _mm512_setzero_si512());
        alpha[r] = mold - muse; /* exponent; -inf while the row has seen no key */
        rowsum[r] = _mm512_reduce_add_ps(sum);
        m[r] = mnew;
    }
    for (int r = 0; r < mv; r += 16) {
        /* 2^0 is exactly 1; -inf (no key seen before) and < -125 give 0 */
        __m512 a = sw_exp2_avx512_nonpos_z(_mm512_loadu_ps(alpha + r), (__mmask16)0xffff);
        _mm512_storeu_ps(alpha + r, a);
        _mm512_storeu_ps(l + r,
                         _mm512_fmadd_ps(_mm512_loadu_ps(l + r), a, _mm512_loadu_ps(rowsum + r)));
    }
}

/* Short requests (the driver sets s->next): a 64-row unit reads its Q rows
 * and writes its O rows once, in runs of nh * d * 2 bytes (512 B..4 KiB)
 * one token apart; with little arithmetic per row that memory latency was a
 * large part of the unit (profile on the Zen 4 box, docs/perf/prefill.md
 * 2026-11-30). So the next unit's Q rows are prefetched into L2 and this
 * unit's output lines are fetched for writing (prefetchw) while the tiles
 * run. write: 0 Q of u, 1 O of u. */
static void sw_amx_prefetch_unit(const sw_attn_problem *pb, const sw_cpu_unit *u, int write)
{
    const int d = pb->head_dim;
    const int G = pb->num_qo_heads / pb->num_kv_heads;
    const int64_t q0 = pb->qo_indptr[u->req] + u->tok0;
    const size_t bytes = (size_t)u->nh * d * 2;
    for (int t = 0; t < u->ntok; t++) {
        const size_t off = ((size_t)((q0 + t) * (write ? pb->o_stride : pb->q_stride)) +
                            (size_t)(u->kvh * G + u->h0) * d) * 2;
        const char *p = (const char *)(write ? (const void *)pb->o : pb->q) + off;
        for (size_t b = 0; b < bytes; b += 64) {
            if (write)
                __asm__ volatile("prefetchw %0" ::"m"(*(p + b)));
            else
                _mm_prefetch(p + b, _MM_HINT_T1);
        }
    }
}

/* Keys per tile for a unit whose last row sees vis_max keys. More keys per
 * tile load/store the fp32 O tiles and rescale O less often per FLOP, but S
 * and P of a 64-row unit then outgrow L1 (256 keys: 64 KiB of S + 32 KiB of
 * P). Measured on the H200's host (2 threads, docs/perf/prefill.md
 * 2026-11-29): 256 keys won at 1 x 2048 (+14 % d256, +11 % d128) and mix-a
 * d256 (+7 %), 128 won at 4 x 512 d128 (+11 %). */
static inline int sw_amx_keys(int32_t vis_max)
{
    if (sw_cpu_amx_nkeys)
        return sw_cpu_amx_nkeys;
    return vis_max > 512 ? 256 : 128;
}

void SW_AMX_UNIT(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    /* The driver routes only bf16 with head_dim % 32 == 0 here (with the
     * pack function); anything else goes to a kernel that is correct for it. */
    if (pb->dtype != SW_DTYPE_BF16 || pb->head_dim % 32 != 0 || !s->pack) {
        if (pb->head_dim % 16 == 0)
            sw_cpu_unit_avx512(pb, u, s);
        else
            sw_cpu_unit_scalar(pb, u, s);
        return;
    }
    const int d = pb->head_dim;
    const int G = pb->num_qo_heads / pb->num_kv_heads;
    const int rows = u->ntok * u->nh;
    const int mv = (rows + 15) / 16 * 16; /* 16..64 */
    const int64_t q0 = pb->qo_indptr[u->req] + u->tok0;
    const float c = pb->sm_scale * 1.44269504088896341f;
    uint16_t *qb = (uint16_t *)s->qt; /* [mv][d] */
    int32_t vis_min, vis_max;

    SW_AMX_ASSERT(rows >= 1 && rows <= SW_CPU_MROWS);
    sw_cpu_unit_vis(pb, u, mv, s->vis, &vis_min, &vis_max);
    const int nk = sw_amx_keys(vis_max); /* keys per tile, multiple of 32 */
    const int lds = nk + 16, ldp = nk + 32;
    SW_AMX_ASSERT(nk % 32 == 0 && nk >= 32 && nk <= SW_CPU_AMX_NKEYS_MAX);
    for (int r = 0; r < mv; r++) {
        s->m[r] = -INFINITY;
        s->l[r] = 0.0f;
    }
    if (vis_max <= 0) { /* no visible key: zeros and LSE = -inf */
        memset(s->o, 0, (size_t)mv * d * sizeof(float));
        sw_cpu_store_o_avx512(pb, u, s->o, s->m, s->l);
        return;
    }
    if (s->next) { /* a short call: see sw_amx_prefetch_unit */
        sw_amx_prefetch_unit(pb, u, 1);
        sw_amx_prefetch_unit(pb, s->next, 0);
    }
    const uint16_t *kt, *vpk;
    sw_cpu_pack_get(s, pb, u->req, u->kvh, &kt, &vpk);
    const int32_t kv_len = pb->kv_indptr[u->req + 1] - pb->kv_indptr[u->req];
    (void)kv_len; /* emulation ranges only */

    SW_AMX_RANGES_RESET();
    SW_AMX_RANGE(qb, (size_t)mv * d * 2, "q");
    SW_AMX_RANGE(s->sx, (size_t)mv * lds * 4, "s");
    SW_AMX_RANGE(s->px, (size_t)mv * ldp * 2, "p");
    SW_AMX_RANGE(s->o, (size_t)mv * d * 4, "o");
    SW_AMX_RANGE(kt, (size_t)sw_cpu_pack_keys(kv_len) * d * 2, "kt");
    SW_AMX_RANGE(vpk, (size_t)sw_cpu_pack_keys(kv_len) * d * 2, "vp");
    /* emulation: NaN in every scratch word, so a word read before it is
     * written poisons the result */
    SW_AMX_POISON(qb, (size_t)mv * d * 2);
    SW_AMX_POISON(s->sx, (size_t)mv * lds * 4);
    SW_AMX_POISON(s->px, (size_t)mv * ldp * 2);
    SW_AMX_POISON(s->o, (size_t)mv * d * 4);

    /* Q rows: d is a multiple of 32, so 64-byte vector copies (not a libc
     * memcpy call per row: 64 calls of 128..512 bytes per unit) */
    for (int r = 0; r < rows; r++) {
        const uint16_t *src =
            (const uint16_t *)pb->q + (size_t)((q0 + r / u->nh) * pb->q_stride) +
            (size_t)(u->kvh * G + u->h0 + r % u->nh) * d;
        uint16_t *dst = qb + (size_t)r * d;
        for (int k = 0; k < d; k += 32)
            _mm512_storeu_si512(dst + k, _mm512_loadu_si512(src + k));
    }
    for (int r = rows; r < mv; r++)
        for (int k = 0; k < d; k += 32)
            _mm512_storeu_si512(qb + (size_t)r * d + k, _mm512_setzero_si512());
    SW_TILE_CONFIG(&sw_amx_cfg16);

    for (int32_t j0 = 0; j0 < vis_max; j0 += nk) {
        const int nn = vis_max - j0 < nk ? vis_max - j0 : nk;
        const int nk32 = (nn + 31) / 32 * 32; /* within the packed keys */
        const int masked = j0 + nn > vis_min;
        sw_amx_s(qb, d, mv, (const uint32_t *)kt, j0 / 16, (nn + 15) / 16 * 16, s->sx, lds);
        sw_amx_softmax(s->sx, lds, s->px, ldp, mv, nn, nk32, masked, s->vis, j0, c, s->m, s->l,
                       s->alpha, s->visr);
        if (j0 > 0)
            for (int r = 0; r < mv; r++) { /* O *= alpha where the max moved */
                const float a = s->alpha[r];
                if (a == 1.0f)
                    continue;
                const __m512 av = _mm512_set1_ps(a);
                float *orow = s->o + (size_t)r * d;
                for (int k = 0; k < d; k += 16)
                    _mm512_storeu_ps(orow + k, _mm512_mul_ps(_mm512_loadu_ps(orow + k), av));
            }
        sw_amx_pv(s->o, d, mv, s->px, ldp, (const uint32_t *)vpk + (size_t)(j0 / 2) * d, nk32,
                  j0 == 0);
    }
    SW_TILE_RELEASE();
    sw_cpu_store_o_avx512(pb, u, s->o, s->m, s->l);
}

#elif defined(__x86_64__) && !defined(SW_AMX_EMULATE)
/* Compiler without AMX (or built without the -mamx-* flags): never chosen. */
const int sw_cpu_amx_built = 0;
void sw_cpu_unit_amx(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    sw_cpu_unit_scalar(pb, u, s);
}
void sw_cpu_amx_pack(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                     uint16_t *vp)
{
    (void)pb, (void)req, (void)kvh, (void)kt, (void)vp;
}
#else
typedef int sw_cpu_fast_amx_unused; /* ISO C: no empty translation unit */
#endif
