/* cpu_fast_amx - DEVELOPMENT VARIANT (not in the library yet) of the CPU fast
 * path's bf16 unit kernel using Intel AMX (tdpbf16ps), for Xeons from
 * Sapphire Rapids on. It lives in bench/dev/ (STYLE.md: variants under
 * development) because this workplace's CPU (AMD EPYC, Zen 4) has no AMX:
 * it is compiled here but has NEVER RUN. bench/dev/cpu_fast_check runs its
 * random cases and timings when the CPU has AMX and the kernel grants the
 * tile state; once they pass on such a host, move it to src/attn/ as
 * cpu_fast_amx.c with an ISA entry "amx" above avx512bf16.
 *
 * Version 0 (this): same unit/tile structure as src/attn/cpu_fast_avx512bf16.c.
 *  S^T[keys][rows] = K . Q^T on tiles: A = 16 K rows x 32 dims read in place
 *    (padded copy for a partial last 16), B = the unit's Q^T pair table
 *    qp[d/2][mv] (VNNI layout for free), C stored to st[key][row].
 *  Softmax as the avx512bf16 kernel, but P pairs scattered row-major:
 *    pa[row][keypair] (the A operand of P.V).
 *  O[rows][d] += P . V on tiles: A = pa, B = vp[keypair][d] (V pairs), C
 *    loaded from / stored to the fp32 accumulator o after the alpha rescale.
 * Prediction (paper estimate, SPR at ~2.5 GHz): a 64x64 tile at d128 costs
 *  ~2k cycles of tdpbf16ps and ~4-6k of AVX-512 softmax, so the softmax bounds
 *  it at roughly 3x the avx512bf16 kernel's rate; not measured.
 *
 * Compile with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16
 * -mamx-tile -mamx-bf16 (GCC >= 11, clang >= 12). */
#define _GNU_SOURCE /* syscall() */
#include "../../src/attn/cpu_fast_kernels.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <cpuid.h>
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SW_ARCH_REQ_XCOMP_PERM 0x1023
#define SW_XFEATURE_XTILEDATA 18

/* 1 when the CPU has AMX-TILE + AMX-BF16 and Linux granted this process the
 * tile data state (per process, so once is enough for every thread). */
int sw_cpu_amx_available(void)
{
    static int state = -1;
    if (state >= 0)
        return state;
    unsigned a, b, c, d;
    state = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return state;
    if (!((d >> 22) & 1) || !((d >> 24) & 1)) /* AMX-BF16, AMX-TILE */
        return state;
    if (syscall(SYS_arch_prctl, SW_ARCH_REQ_XCOMP_PERM, SW_XFEATURE_XTILEDATA) != 0)
        return state;
    state = 1;
    return state;
}

typedef struct sw_amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} sw_amx_cfg;

static void sw_amx_config(void)
{
    sw_amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.rows[i] = 16;
        cfg.colsb[i] = 64;
    }
    _tile_loadconfig(&cfg);
}

static inline __m512 sw_amx_exp2(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(127.0f));
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.5403530393381608e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* S^T for keys [0, nn) (nn padded to 16 by the caller's K pointer logic).
 * Tiles: 0..3 C (one per 16-row group), 4 A (K), 5..7 B (Q^T pairs). */
static void sw_amx_s(const uint16_t *k16, int64_t kst_bytes, const uint32_t *qp, int mv, int d,
                     float *st, int n0)
{
    const int ng = mv / 16;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int k = 0; k < d; k += 32) {
        _tile_loadd(4, (const char *)k16 + (size_t)k * 2, kst_bytes);
        const uint32_t *b = qp + (size_t)(k / 2) * mv;
        _tile_loadd(5, b, mv * 4);
        _tile_dpbf16ps(0, 4, 5);
        if (ng > 1) {
            _tile_loadd(6, b + 16, mv * 4);
            _tile_dpbf16ps(1, 4, 6);
        }
        if (ng > 2) {
            _tile_loadd(7, b + 32, mv * 4);
            _tile_dpbf16ps(2, 4, 7);
        }
        if (ng > 3) {
            _tile_loadd(5, b + 48, mv * 4);
            _tile_dpbf16ps(3, 4, 5);
        }
    }
    float *c = st + (size_t)n0 * mv;
    _tile_stored(0, c, mv * 4);
    if (ng > 1)
        _tile_stored(1, c + 16, mv * 4);
    if (ng > 2)
        _tile_stored(2, c + 32, mv * 4);
    if (ng > 3)
        _tile_stored(3, c + 48, mv * 4);
}

/* o[rows][c0..c0+16) = o + P . V for one 16-dim column group; np16 pairs
 * (multiple of 16). Tiles: 0..3 C, 4 B (V pairs), 5 A (P pairs). */
static void sw_amx_pv(float *o, int d, const uint32_t *pa, const uint32_t *vp, int mv, int c0,
                      int np16)
{
    const int ng = mv / 16;
    _tile_loadd(0, o + c0, d * 4);
    if (ng > 1)
        _tile_loadd(1, o + (size_t)16 * d + c0, d * 4);
    if (ng > 2)
        _tile_loadd(2, o + (size_t)32 * d + c0, d * 4);
    if (ng > 3)
        _tile_loadd(3, o + (size_t)48 * d + c0, d * 4);
    for (int i = 0; i < np16; i += 16) {
        _tile_loadd(4, vp + (size_t)i * d + c0, d * 4);
        _tile_loadd(5, pa + i, SW_CPU_NKEYS / 2 * 4);
        _tile_dpbf16ps(0, 5, 4);
        if (ng > 1) {
            _tile_loadd(5, pa + (size_t)16 * (SW_CPU_NKEYS / 2) + i, SW_CPU_NKEYS / 2 * 4);
            _tile_dpbf16ps(1, 5, 4);
        }
        if (ng > 2) {
            _tile_loadd(5, pa + (size_t)32 * (SW_CPU_NKEYS / 2) + i, SW_CPU_NKEYS / 2 * 4);
            _tile_dpbf16ps(2, 5, 4);
        }
        if (ng > 3) {
            _tile_loadd(5, pa + (size_t)48 * (SW_CPU_NKEYS / 2) + i, SW_CPU_NKEYS / 2 * 4);
            _tile_dpbf16ps(3, 5, 4);
        }
    }
    _tile_stored(0, o + c0, d * 4);
    if (ng > 1)
        _tile_stored(1, o + (size_t)16 * d + c0, d * 4);
    if (ng > 2)
        _tile_stored(2, o + (size_t)32 * d + c0, d * 4);
    if (ng > 3)
        _tile_stored(3, o + (size_t)48 * d + c0, d * 4);
}

/* As sw_bf_softmax_tile (src/attn/cpu_fast_avx512bf16.c), P pairs scattered
 * to pa[row][pair] (row stride NKEYS/2 words); pairs [np, np16) zeroed. */
static void sw_amx_softmax(float *st, uint32_t *pa, int mv, int nn, int masked, const float *visr,
                           float c, float *m, float *l, float *alpha)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512 cv = _mm512_set1_ps(c);
    const __m512i ilv = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
    const __m512i rowidx = _mm512_mullo_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32(SW_CPU_NKEYS / 2));
    const int np = (nn + 1) / 2, np16 = (np + 15) / 16 * 16;
    for (int r = 0; r < mv; r += 16) {
        __m512 mx = ninf;
        __m512 lim = _mm512_loadu_ps(visr + r);
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
        __m512 muse = _mm512_max_ps(mnew, _mm512_set1_ps(-FLT_MAX));
        __m512 a = sw_amx_exp2(_mm512_sub_ps(mold, muse));
        __m512 sum = _mm512_setzero_ps();
        uint32_t *base = pa + (size_t)r * (SW_CPU_NKEYS / 2);
        for (int n = 0; n < nn; n += 2) {
            __m512 p0 = sw_amx_exp2(_mm512_sub_ps(_mm512_loadu_ps(st + (size_t)n * mv + r), muse));
            __m512 p1 = n + 1 < nn ? sw_amx_exp2(_mm512_sub_ps(
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

/* vp[i][c] = (V[2i][c], V[2i+1][c]) for i < np16; rows past the keys zero. */
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
        const uint16_t *a = (const uint16_t *)sw_cpu_kv_row(pb, pb->v, pb->v_stride, row0 + 2 * i, kvh);
        const uint16_t *b = 2 * i + 1 < nn ? (const uint16_t *)sw_cpu_kv_row(
                                                 pb, pb->v, pb->v_stride, row0 + 2 * i + 1, kvh)
                                           : NULL;
        for (int c = 0; c < d; c += 32) { /* d % 32 == 0 (checked by the caller) */
            __m512i va = _mm512_loadu_si512(a + c);
            __m512i vb = b ? _mm512_loadu_si512(b + c) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + c, _mm512_permutex2var_epi16(va, ilo, vb));
            _mm512_storeu_si512(dst + c + 16, _mm512_permutex2var_epi16(va, ihi, vb));
        }
    }
}

void sw_cpu_unit_amx(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    if (pb->dtype != SW_DTYPE_BF16 || pb->head_dim % 32 != 0 || pb->head_dim < 64) {
        sw_cpu_unit_avx512bf16(pb, u, s);
        return;
    }
    const int d = pb->head_dim;
    const int G = pb->num_qo_heads / pb->num_kv_heads;
    const int rows = u->ntok * u->nh;
    const int mv = (rows + 15) / 16 * 16;
    const int64_t kv0 = pb->kv_indptr[u->req];
    const int64_t q0 = pb->qo_indptr[u->req] + u->tok0;
    const float c = pb->sm_scale * 1.44269504088896341f;
    uint32_t *qp = (uint32_t *)s->qt;       /* [d/2][mv] */
    uint32_t *vp = (uint32_t *)s->vf;       /* [NKEYS/2][d] */
    uint16_t *kpad = (uint16_t *)s->kf;     /* [16][d] partial last key group */
    /* [MROWS][NKEYS/2] P pairs after kpad: fits kf ([NKEYS][d] floats) for d >= 64 */
    uint32_t *pa = (uint32_t *)s->kf + (size_t)8 * d;
    int32_t vis_min, vis_max;

    sw_cpu_unit_vis(pb, u, mv, s->vis, &vis_min, &vis_max);
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
    sw_amx_config();

    for (int32_t j0 = 0; j0 < vis_max; j0 += SW_CPU_NKEYS) {
        const int nn = vis_max - j0 < SW_CPU_NKEYS ? vis_max - j0 : SW_CPU_NKEYS;
        const int masked = j0 + nn > vis_min;
        if (masked)
            for (int r = 0; r < mv; r++) {
                int32_t lim = s->vis[r] - j0;
                s->visr[r] = (float)(lim < 0 ? 0 : lim > nn ? nn : lim);
            }
        for (int n0 = 0; n0 < nn; n0 += 16) {
            const uint16_t *k16 =
                (const uint16_t *)sw_cpu_kv_row(pb, pb->k, pb->k_stride, kv0 + j0 + n0, u->kvh);
            int64_t kst = pb->k_stride * 2;
            if (nn - n0 < 16) { /* never read past the last key row */
                memset(kpad, 0, (size_t)16 * d * 2);
                for (int i = 0; i < nn - n0; i++)
                    memcpy(kpad + (size_t)i * d,
                           sw_cpu_kv_row(pb, pb->k, pb->k_stride, kv0 + j0 + n0 + i, u->kvh),
                           (size_t)d * 2);
                k16 = kpad;
                kst = d * 2;
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
    _tile_release();
    sw_cpu_store_o(pb, u, s->o, s->m, s->l);
}

#else
int sw_cpu_amx_available(void) { return 0; }
void sw_cpu_unit_amx(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s)
{
    sw_cpu_unit_scalar(pb, u, s);
}
#endif
