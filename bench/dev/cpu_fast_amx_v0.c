/* cpu_fast_amx_v0.c - DEVELOPMENT ONLY: the first AMX kernel (S^T = K.Q^T,
 * P scattered into tile layout, V repacked per unit and tile), as it was in
 * src/attn/cpu_fast_amx.c until 2026-11-29, kept here as sw_cpu_unit_amx_v0
 * so bench/dev/cpu_fast_check can time it against the library's AMX kernel
 * ("amx-v0" in its perf table) in the same process on the Xeon. Built by
 * bench/dev/cpu_fast_check.sh with the AMX flags; never part of the library.
 * Measured (v0): 483 GFLOP/s at 1x2048 d256 causal, 2 threads, H200 host
 * (docs/perf/NOTES.md). The original header follows.
 *
 */
/* CPU fast path, AMX kernel: bf16 data, head_dim a multiple of 32, on Xeons
 * with AMX-TILE + AMX-BF16 (Sapphire Rapids on). Moved here from
 * bench/dev/cpu_fast_amx.c (removed there) with its arithmetic unchanged:
 * v0 measured 483 GFLOP/s on the H200's host at 1x2048 d256 causal, 2
 * threads (docs/perf/NOTES.md "CPU fast path", entry v3). Changes: the
 * tile config is a static table with compiler barriers around the tile
 * loads (GCC's asm does not declare their memory reads), the next tile's
 * K/V rows are prefetched as in the other kernels, and non-AMX shapes go to
 * a kernel that is correct for them.
 *
 * Compile with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16
 * -mamx-tile -mamx-bf16 (GCC >= 11, clang >= 12). Without the AMX flags the
 * file compiles to a stub (sw_cpu_amx_built = 0) and the driver never picks
 * AMX. Called only when cpu_fast.c found AMX usable (CPU, XCR0 and Linux's
 * ARCH_REQ_XCOMP_PERM). Each unit loads the tile configuration on the
 * thread that runs it and releases the tiles at its end, so no tile state
 * outlives a unit on any thread (the calling thread included).
 *
 * Unit structure (same units and 64-key tiles as cpu_fast_avx512bf16.c):
 *  S^T[keys][rows] = K . Q^T on tiles: A = 16 K rows x 32 dims read in
 *    place (a zero-padded copy when fewer than 16 keys remain, so no row past
 *    the last visible key is read), B = the unit's Q pair table qp[d/2][mv]
 *    (its 32-bit words are already the VNNI pairs), C stored to st[key][row].
 *  Softmax on AVX-512 in fp32 (log2 domain), P rounded to bf16 and scattered
 *    row-major as pairs: pa[row][key pair] (the A operand of P.V); pairs past
 *    the tile's keys are zero up to a multiple of 16.
 *  O[rows][d] = alpha * O + P . V: B = vp[key pair][d] (V repacked to pairs
 *    per tile, zero past the keys), C loaded from / stored to the fp32
 *    accumulator o in 16-column strips.
 * Tiles: 8 registers, all 16 rows x 64 bytes (palette 1). S: 0-3 C (one per
 * 16-row group), 4 A, 5-7 B. P.V: 0-3 C, 4 B, 5 A.
 *
 * Scratch (sw_cpu_scratch, sized by cpu_fast.c for any head_dim >= 32):
 *   qp   = qt: [d/2][mv] words          <= d * MROWS floats
 *   pa   = kf: [MROWS][NKEYS/2] words   =  2048 <= NKEYS * max(d, 32) floats
 *   vp   = vf: [NKEYS/2][d] words, then
 *   kpad = vf + NKEYS/2 * d words: [16][d] bf16 (8 d words); 40 d <= 64 d
 *
 * Development check without AMX: bench/dev/cpu_fast_amx_emul.c compiles this
 * file with SW_AMX_EMULATE and a scalar model of the tile instructions
 * (bench/dev/cpu_fast_amx_emul.h), as sw_cpu_unit_amx_emul. */
#include "../../src/attn/cpu_fast_kernels.h"

/* GCC names the AMX macros __AMX_TILE__/__AMX_BF16__, clang 14 __AMXTILE__/__AMXBF16__ */
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_BF16__) || defined(__AMXBF16__))
#define SW_AMX_FLAGS 1
#endif

#if defined(__x86_64__) && (defined(SW_AMX_EMULATE) || (defined(SW_AMX_FLAGS) &&              \
                                                        defined(__AVX512BF16__) &&            \
                                                        defined(__AVX512BW__)))
#include <float.h>
#include <immintrin.h>

#include "../../src/core/sw_exp2_x86.h"
#include <math.h>
#include <string.h>

#if defined(SW_AMX_EMULATE)
/* bench/dev/cpu_fast_amx_emul.h, included before this file, defines the
 * SW_TILE_* operations on a scalar model and SW_AMX_RANGE/SW_AMX_ASSERT. */
#define SW_AMX_UNIT sw_cpu_unit_amx_emul
void sw_cpu_unit_amx_emul(const sw_attn_problem *pb, const sw_cpu_unit *u,
                          const sw_cpu_scratch *s);
#else
#define SW_AMX_UNIT sw_cpu_unit_amx_v0
void sw_cpu_unit_amx_v0(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s);
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

#define SW_AMX_PA_LD (SW_CPU_NKEYS / 2) /* words per pa row */

/* st[n0..n0+16)[0..mv) = K[16 keys] . Q^T; k16 points at dim 0 of the first
 * key row, kst_bytes apart (16 readable rows). ng = mv / 16 row groups. */
static void sw_amx_s(const uint16_t *k16, int64_t kst_bytes, const uint32_t *qp, int mv, int d,
                     float *st, int n0)
{
    const int ng = mv / 16;
    const int64_t bst = (int64_t)mv * 4;
    SW_TILE_ZERO(0);
    if (ng > 1)
        SW_TILE_ZERO(1);
    if (ng > 2)
        SW_TILE_ZERO(2);
    if (ng > 3)
        SW_TILE_ZERO(3);
    for (int k = 0; k < d; k += 32) {
        SW_TILE_LOADD(4, k16 + k, kst_bytes);
        const uint32_t *b = qp + (size_t)(k / 2) * mv; /* 16 pair rows x 16 Q rows */
        SW_TILE_LOADD(5, b, bst);
        SW_TILE_DP(0, 4, 5);
        if (ng > 1) {
            SW_TILE_LOADD(6, b + 16, bst);
            SW_TILE_DP(1, 4, 6);
        }
        if (ng > 2) {
            SW_TILE_LOADD(7, b + 32, bst);
            SW_TILE_DP(2, 4, 7);
        }
        if (ng > 3) {
            SW_TILE_LOADD(5, b + 48, bst);
            SW_TILE_DP(3, 4, 5);
        }
    }
    float *c = st + (size_t)n0 * mv;
    SW_TILE_STORED(0, c, bst);
    if (ng > 1)
        SW_TILE_STORED(1, c + 16, bst);
    if (ng > 2)
        SW_TILE_STORED(2, c + 32, bst);
    if (ng > 3)
        SW_TILE_STORED(3, c + 48, bst);
}

/* o[0..mv)[c0..c0+16) += P . V over np16 key pairs (a multiple of 16). */
static void sw_amx_pv(float *o, int d, const uint32_t *pa, const uint32_t *vp, int mv, int c0,
                      int np16)
{
    const int ng = mv / 16;
    const int64_t ost = (int64_t)d * 4, ast = SW_AMX_PA_LD * 4;
    SW_TILE_LOADD(0, o + c0, ost);
    if (ng > 1)
        SW_TILE_LOADD(1, o + (size_t)16 * d + c0, ost);
    if (ng > 2)
        SW_TILE_LOADD(2, o + (size_t)32 * d + c0, ost);
    if (ng > 3)
        SW_TILE_LOADD(3, o + (size_t)48 * d + c0, ost);
    for (int i = 0; i < np16; i += 16) {
        SW_TILE_LOADD(4, vp + (size_t)i * d + c0, ost); /* 16 pair rows x 16 dims */
        SW_TILE_LOADD(5, pa + i, ast);                   /* 16 rows x 16 pairs */
        SW_TILE_DP(0, 5, 4);
        if (ng > 1) {
            SW_TILE_LOADD(5, pa + (size_t)16 * SW_AMX_PA_LD + i, ast);
            SW_TILE_DP(1, 5, 4);
        }
        if (ng > 2) {
            SW_TILE_LOADD(5, pa + (size_t)32 * SW_AMX_PA_LD + i, ast);
            SW_TILE_DP(2, 5, 4);
        }
        if (ng > 3) {
            SW_TILE_LOADD(5, pa + (size_t)48 * SW_AMX_PA_LD + i, ast);
            SW_TILE_DP(3, 5, 4);
        }
    }
    SW_TILE_STORED(0, o + c0, ost);
    if (ng > 1)
        SW_TILE_STORED(1, o + (size_t)16 * d + c0, ost);
    if (ng > 2)
        SW_TILE_STORED(2, o + (size_t)32 * d + c0, ost);
    if (ng > 3)
        SW_TILE_STORED(3, o + (size_t)48 * d + c0, ost);
}

/* As sw_bf_softmax_tile (cpu_fast_avx512bf16.c): scale (and mask) S, online
 * max, P = 2^(s - m) as bf16 pairs scattered to pa[row][pair]; pairs
 * [np, np16) of every row zeroed. */
static void sw_amx_softmax(float *st, uint32_t *pa, int mv, int nn, int masked, const float *visr,
                           float c, float *m, float *l, float *alpha)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512 cv = _mm512_set1_ps(c);
    /* word 2i <- p0[i] (word i), word 2i+1 <- p1[i] (word 16+i) */
    const __m512i ilv = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
    const __m512i rowidx = _mm512_mullo_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32(SW_AMX_PA_LD));
    const int np = (nn + 1) / 2, np16 = (np + 15) / 16 * 16;
    for (int r = 0; r < mv; r += 16) {
        __m512 mx = ninf;
        const __m512 lim = _mm512_loadu_ps(visr + r);
        for (int n = 0; n < nn; n++) {
            __m512 s = _mm512_mul_ps(_mm512_loadu_ps(st + (size_t)n * mv + r), cv);
            if (masked)
                s = _mm512_mask_blend_ps(
                    _mm512_cmp_ps_mask(_mm512_set1_ps((float)n), lim, _CMP_LT_OQ), ninf, s);
            _mm512_storeu_ps(st + (size_t)n * mv + r, s);
            mx = _mm512_max_ps(mx, s);
        }
        __m512 mold = _mm512_loadu_ps(m + r);
        __m512 mnew = _mm512_max_ps(mold, mx);
        /* a row that has seen no key keeps m = -inf: subtract -FLT_MAX instead,
         * so every exponent is -inf (P = 0, alpha = 0), never NaN */
        __m512 muse = _mm512_max_ps(mnew, _mm512_set1_ps(-FLT_MAX));
        __m512 a = sw_exp2_avx512(_mm512_sub_ps(mold, muse));
        __m512 sum = _mm512_setzero_ps();
        uint32_t *base = pa + (size_t)r * SW_AMX_PA_LD;
        for (int n = 0; n < nn; n += 2) {
            __m512 p0 = sw_exp2_avx512(_mm512_sub_ps(_mm512_loadu_ps(st + (size_t)n * mv + r), muse));
            __m512 p1 = n + 1 < nn ? sw_exp2_avx512(_mm512_sub_ps(
                                         _mm512_loadu_ps(st + (size_t)(n + 1) * mv + r), muse))
                                   : _mm512_setzero_ps();
            sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
            __m512i pk = (__m512i)_mm512_cvtne2ps_pbh(p1, p0);
            _mm512_i32scatter_epi32(base + n / 2, rowidx, _mm512_permutexvar_epi16(ilv, pk), 4);
        }
        for (int i = np; i < np16; i++)
            _mm512_i32scatter_epi32(base + i, rowidx, _mm512_setzero_si512(), 4);
        _mm512_storeu_ps(l + r, _mm512_fmadd_ps(_mm512_loadu_ps(l + r), a, sum));
        _mm512_storeu_ps(m + r, mnew);
        _mm512_storeu_ps(alpha + r, a);
    }
}

/* vp[i][c] = (V[2i][c], V[2i+1][c]) for i < np16; an odd last key pairs with
 * zero, pairs past the keys are zero. d % 32 == 0. */
static void sw_amx_pack_v(uint32_t *vp, const sw_attn_problem *pb, int64_t row0, int32_t kvh,
                          int nn)
{
    const int d = pb->head_dim;
    const __m512i ilo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                         40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                         32, 0);
    const __m512i ihi = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25,
                                         56, 24, 55, 23, 54, 22, 53, 21, 52, 20, 51, 19, 50, 18,
                                         49, 17, 48, 16);
    const int np = (nn + 1) / 2, np16 = (np + 15) / 16 * 16;
    for (int i = 0; i < np16; i++) {
        uint32_t *dst = vp + (size_t)i * d;
        if (i >= np) {
            memset(dst, 0, (size_t)d * 4);
            continue;
        }
        const uint16_t *a =
            (const uint16_t *)sw_cpu_kv_row(pb, pb->v, pb->v_stride, row0 + 2 * i, kvh);
        const uint16_t *b = 2 * i + 1 < nn ? (const uint16_t *)sw_cpu_kv_row(
                                                 pb, pb->v, pb->v_stride, row0 + 2 * i + 1, kvh)
                                           : NULL;
        for (int c = 0; c < d; c += 32) {
            __m512i va = _mm512_loadu_si512(a + c);
            __m512i vb = b ? _mm512_loadu_si512(b + c) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + c, _mm512_permutex2var_epi16(va, ilo, vb));
            _mm512_storeu_si512(dst + c + 16, _mm512_permutex2var_epi16(va, ihi, vb));
        }
    }
}

void SW_AMX_UNIT(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    /* The driver routes only bf16 with head_dim % 32 == 0 here; anything
     * else goes to a kernel that is correct for it (the fp32 avx512 kernel
     * needs head_dim % 16 == 0: the dev version forwarded head_dim 40 to it
     * and wrote past O's rows, bench/dev history in docs/perf/NOTES.md). */
    if (pb->dtype != SW_DTYPE_BF16 || pb->head_dim % 32 != 0) {
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
    const int64_t kv0 = pb->kv_indptr[u->req];
    const int64_t q0 = pb->qo_indptr[u->req] + u->tok0;
    const float c = pb->sm_scale * 1.44269504088896341f;
    uint32_t *qp = (uint32_t *)s->qt;                             /* [d/2][mv] */
    uint32_t *pa = (uint32_t *)s->kf;                             /* [MROWS][NKEYS/2] */
    uint32_t *vp = (uint32_t *)s->vf;                             /* [NKEYS/2][d] */
    uint16_t *kpad = (uint16_t *)(vp + (size_t)SW_CPU_NKEYS / 2 * d); /* [16][d] */
    int32_t vis_min, vis_max;

    SW_AMX_ASSERT(rows >= 1 && rows <= SW_CPU_MROWS);
    SW_AMX_RANGES_RESET();
    SW_AMX_RANGE(qp, (size_t)d / 2 * mv * 4, "qp");
    SW_AMX_RANGE(pa, (size_t)SW_CPU_MROWS * SW_AMX_PA_LD * 4, "pa");
    SW_AMX_RANGE(vp, (size_t)SW_CPU_NKEYS / 2 * d * 4, "vp");
    SW_AMX_RANGE(kpad, (size_t)16 * d * 2, "kpad");
    SW_AMX_RANGE(s->st, (size_t)SW_CPU_NKEYS * mv * 4, "st");
    SW_AMX_RANGE(s->o, (size_t)mv * d * 4, "o");
    /* emulation: NaN in every scratch word, so a word read before it is
     * written (a missing zero pad) poisons the result */
    SW_AMX_POISON(qp, (size_t)d / 2 * mv * 4);
    SW_AMX_POISON(pa, (size_t)SW_CPU_MROWS * SW_AMX_PA_LD * 4);
    SW_AMX_POISON(vp, (size_t)SW_CPU_NKEYS / 2 * d * 4 + (size_t)16 * d * 2);
    SW_AMX_POISON(s->st, (size_t)SW_CPU_NKEYS * mv * 4);
    SW_AMX_POISON(s->o, (size_t)mv * d * 4);

    sw_cpu_unit_vis(pb, u, mv, s->vis, &vis_min, &vis_max);
    /* tile loads of K stay within the unit's visible keys */
    if (vis_max > 0)
        SW_AMX_RANGE(sw_cpu_kv_row(pb, pb->k, pb->k_stride, kv0, u->kvh),
                     (size_t)((int64_t)(vis_max - 1) * pb->k_stride + d) * 2, "K");
    for (int r = 0; r < rows; r++) {
        const char *src = (const char *)pb->q +
                          ((size_t)((q0 + r / u->nh) * pb->q_stride) +
                           (size_t)(u->kvh * G + u->h0 + r % u->nh) * d) * 2;
        for (int p = 0; p < d / 2; p++)
            memcpy(&qp[(size_t)p * mv + r], src + 4 * p, 4);
    }
    for (int r = rows; r < mv; r++)
        for (int p = 0; p < d / 2; p++)
            qp[(size_t)p * mv + r] = 0;
    for (int r = 0; r < mv; r++) {
        s->m[r] = -INFINITY;
        s->l[r] = 0.0f;
        s->visr[r] = (float)SW_CPU_NKEYS;
    }
    memset(s->o, 0, (size_t)mv * d * sizeof(float));
    if (vis_max > 0)
        SW_TILE_CONFIG(&sw_amx_cfg16);

    for (int32_t j0 = 0; j0 < vis_max; j0 += SW_CPU_NKEYS) {
        const int nn = vis_max - j0 < SW_CPU_NKEYS ? vis_max - j0 : SW_CPU_NKEYS;
        const int masked = j0 + nn > vis_min;
        if (masked)
            for (int r = 0; r < mv; r++) {
                int32_t lim = s->vis[r] - j0;
                s->visr[r] = (float)(lim < 0 ? 0 : lim > nn ? nn : lim);
            }
        if (j0 + nn < vis_max) { /* rows of one kv head sit pages apart under MHA */
            int nx = vis_max - j0 - nn < SW_CPU_NKEYS ? vis_max - j0 - nn : SW_CPU_NKEYS;
            sw_cpu_prefetch_rows(pb, pb->k, pb->k_stride, kv0 + j0 + nn, u->kvh, nx);
            sw_cpu_prefetch_rows(pb, pb->v, pb->v_stride, kv0 + j0 + nn, u->kvh, nx);
        }
        for (int n0 = 0; n0 < nn; n0 += 16) {
            const uint16_t *k16 =
                (const uint16_t *)sw_cpu_kv_row(pb, pb->k, pb->k_stride, kv0 + j0 + n0, u->kvh);
            int64_t kst = pb->k_stride * 2;
            if (nn - n0 < 16) { /* never read past the last visible key row */
                memset(kpad, 0, (size_t)16 * d * 2);
                for (int i = 0; i < nn - n0; i++)
                    memcpy(kpad + (size_t)i * d,
                           sw_cpu_kv_row(pb, pb->k, pb->k_stride, kv0 + j0 + n0 + i, u->kvh),
                           (size_t)d * 2);
                k16 = kpad;
                kst = (int64_t)d * 2;
            }
            sw_amx_s(k16, kst, qp, mv, d, s->st, n0);
        }
        sw_amx_pack_v(vp, pb, kv0 + j0, u->kvh, nn);
        sw_amx_softmax(s->st, pa, mv, nn, masked, s->visr, c, s->m, s->l, s->alpha);
        for (int r = 0; r < mv; r++) { /* O *= alpha, then O += P.V on tiles */
            __m512 a = _mm512_set1_ps(s->alpha[r]);
            for (int k = 0; k < d; k += 16)
                _mm512_storeu_ps(s->o + (size_t)r * d + k,
                                 _mm512_mul_ps(_mm512_loadu_ps(s->o + (size_t)r * d + k), a));
        }
        const int np16 = ((nn + 1) / 2 + 15) / 16 * 16;
        for (int c0 = 0; c0 < d; c0 += 16)
            sw_amx_pv(s->o, d, pa, vp, mv, c0, np16);
    }
    if (vis_max > 0)
        SW_TILE_RELEASE();
    sw_cpu_store_o(pb, u, s->o, s->m, s->l);
}

#elif defined(__x86_64__)
/* Compiler without AMX (or built without the -mamx-* flags): never chosen. */
void sw_cpu_unit_amx_v0(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s);
void sw_cpu_unit_amx_v0(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    sw_cpu_unit_scalar(pb, u, s);
}
#else
typedef int sw_cpu_fast_amx_unused; /* ISO C: no empty translation unit */
#endif
