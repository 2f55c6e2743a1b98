/* CPU fast path, AVX-512-BF16 kernel: bf16 inputs multiplied as bf16 pairs
 * with vdpbf16ps (fp32 accumulate), twice the multiply-adds of an fp32 FMA
 * per instruction and no K conversion at all. fp32 and fp16 problems go to
 * the AVX-512 fp32 kernel. Compile with
 *   -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16
 * called only when the CPU reports all of them.
 *
 * Pair layouts (vdpbf16ps multiplies adjacent bf16 pairs):
 *   S^T = K.Q^T pairs over head_dim: qp[p][row] is the 32-bit word p of a Q
 *     row (dims 2p, 2p+1), K's word p is broadcast straight from K's rows.
 *   O += P.V pairs over keys: vp[key pair][dim] = (V[2i][dim], V[2i+1][dim])
 *     repacked per tile; pp[key pair][row] = (P[row][2i], P[row][2i+1]) in
 *     bf16 (as FlashAttention rounds P to the input type). */
#include "cpu_fast_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "../core/sw_exp2_x86.h"
#include <float.h>
#include <math.h>
#include <string.h>

#define SW_BF_SB 2 /* S: row vectors (16 rows each) per register block */
#define SW_BF_KB 8 /* S: keys per register block */
#define SW_BF_PR 4 /* P.V: rows per register block */
#define SW_BF_PD 4 /* P.V: 16-dim vectors per register block */

static inline uint32_t sw_ld32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline __attribute__((always_inline)) void
sw_bf_s_block(const uint32_t *restrict qp, int mv, const uint16_t *restrict kr, int64_t kst,
              int d, float *restrict st, const int rv, const int kb)
{
    __m512 acc[SW_BF_KB][SW_BF_SB];
#pragma GCC unroll 16
    for (int n = 0; n < kb; n++)
#pragma GCC unroll 4
        for (int v = 0; v < rv; v++)
            acc[n][v] = _mm512_setzero_ps();
    for (int p = 0; p < d / 2; p++) {
        __m512bh q[SW_BF_SB];
#pragma GCC unroll 4
        for (int v = 0; v < rv; v++)
            q[v] = (__m512bh)_mm512_loadu_si512(qp + (size_t)p * mv + v * 16);
#pragma GCC unroll 16
        for (int n = 0; n < kb; n++) {
            __m512bh b = (__m512bh)_mm512_set1_epi32((int)sw_ld32(kr + n * kst + 2 * p));
#pragma GCC unroll 4
            for (int v = 0; v < rv; v++)
                acc[n][v] = _mm512_dpbf16_ps(acc[n][v], q[v], b);
        }
    }
#pragma GCC unroll 16
    for (int n = 0; n < kb; n++)
#pragma GCC unroll 4
        for (int v = 0; v < rv; v++)
            _mm512_storeu_ps(st + (size_t)n * mv + v * 16, acc[n][v]);
}

static void sw_bf_s_tile(const uint32_t *qp, int mv, const uint16_t *kr, int64_t kst, int d,
                         float *st, int nn)
{
    int r = 0;
    for (; r + SW_BF_SB * 16 <= mv; r += SW_BF_SB * 16) {
        int n = 0;
        for (; n + SW_BF_KB <= nn; n += SW_BF_KB)
            sw_bf_s_block(qp + r, mv, kr + n * kst, kst, d, st + (size_t)n * mv + r, SW_BF_SB,
                          SW_BF_KB);
        for (; n < nn; n++)
            sw_bf_s_block(qp + r, mv, kr + n * kst, kst, d, st + (size_t)n * mv + r, SW_BF_SB, 1);
    }
    for (; r < mv; r += 16) {
        int n = 0;
        for (; n + SW_BF_KB <= nn; n += SW_BF_KB)
            sw_bf_s_block(qp + r, mv, kr + n * kst, kst, d, st + (size_t)n * mv + r, 1, SW_BF_KB);
        for (; n < nn; n++)
            sw_bf_s_block(qp + r, mv, kr + n * kst, kst, d, st + (size_t)n * mv + r, 1, 1);
    }
}

/* vp[i][c] = (V[2i][c], V[2i+1][c]); an odd last key pairs with zeros. */
static void sw_bf_pack_v(uint32_t *vp, const sw_attn_problem *pb, int64_t row0, int32_t kvh,
                         int nn)
{
    const int d = pb->head_dim;
    const __m512i ilo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                         40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                         32, 0);
    const __m512i ihi = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25,
                                         56, 24, 55, 23, 54, 22, 53, 21, 52, 20, 51, 19, 50, 18,
                                         49, 17, 48, 16);
    for (int i = 0; 2 * i < nn; i++) {
        const uint16_t *a = (const uint16_t *)sw_cpu_kv_row(pb, pb->v, pb->v_stride, row0 + 2 * i, kvh);
        const uint16_t *b = 2 * i + 1 < nn ? (const uint16_t *)sw_cpu_kv_row(
                                                 pb, pb->v, pb->v_stride, row0 + 2 * i + 1, kvh)
                                           : NULL;
        uint32_t *dst = vp + (size_t)i * d;
        int c = 0;
        for (; c + 32 <= d; c += 32) {
            __m512i va = _mm512_loadu_si512(a + c);
            __m512i vb = b ? _mm512_loadu_si512(b + c) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + c, _mm512_permutex2var_epi16(va, ilo, vb));
            _mm512_storeu_si512(dst + c + 16, _mm512_permutex2var_epi16(va, ihi, vb));
        }
        if (c < d) { /* d % 32 == 16 */
            __m512i va = _mm512_maskz_loadu_epi16(0xffff, a + c);
            __m512i vb = b ? _mm512_maskz_loadu_epi16(0xffff, b + c) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + c, _mm512_permutex2var_epi16(va, ilo, vb));
        }
    }
}

/* Scale (and mask) S, online max, P = 2^(s - m) packed as bf16 key pairs. */
static void sw_bf_softmax_tile(float *st, uint32_t *pp, int mv, int nn, int masked,
                               const float *visr, float c, float *m, float *l, float *alpha)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512 cv = _mm512_set1_ps(c);
    /* word 2i <- p0[i] (word i), word 2i+1 <- p1[i] (word 16+i) */
    const __m512i ilv = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
    for (int r = 0; r < mv; r += 16) {
        __m512 mx = ninf;
        if (masked) {
            __m512 lim = _mm512_loadu_ps(visr + r);
            for (int n = 0; n < nn; n++) {
                __m512 s = _mm512_mul_ps(_mm512_loadu_ps(st + (size_t)n * mv + r), cv);
                s = _mm512_mask_blend_ps(
                    _mm512_cmp_ps_mask(_mm512_set1_ps((float)n), lim, _CMP_LT_OQ), ninf, s);
                _mm512_storeu_ps(st + (size_t)n * mv + r, s);
                mx = _mm512_max_ps(mx, s);
            }
        } else {
            for (int n = 0; n < nn; n++) {
                __m512 s = _mm512_mul_ps(_mm512_loadu_ps(st + (size_t)n * mv + r), cv);
                _mm512_storeu_ps(st + (size_t)n * mv + r, s);
                mx = _mm512_max_ps(mx, s);
            }
        }
        __m512 mold = _mm512_loadu_ps(m + r);
        __m512 mnew = _mm512_max_ps(mold, mx);
        __m512 muse = _mm512_max_ps(mnew, _mm512_set1_ps(-FLT_MAX)); /* see cpu_fast_tile.inc */
        __m512 a = sw_exp2_avx512(_mm512_sub_ps(mold, muse));
        __m512 sum = _mm512_setzero_ps();
        for (int n = 0; n < nn; n += 2) {
            __m512 p0 = sw_exp2_avx512(_mm512_sub_ps(_mm512_loadu_ps(st + (size_t)n * mv + r), muse));
            __m512 p1 = n + 1 < nn ? sw_exp2_avx512(_mm512_sub_ps(
                                         _mm512_loadu_ps(st + (size_t)(n + 1) * mv + r), muse))
                                   : _mm512_setzero_ps();
            sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
            __m512i pk = (__m512i)_mm512_cvtne2ps_pbh(p1, p0);
            _mm512_storeu_si512(pp + (size_t)(n / 2) * mv + r, _mm512_permutexvar_epi16(ilv, pk));
        }
        _mm512_storeu_ps(l + r, _mm512_fmadd_ps(_mm512_loadu_ps(l + r), a, sum));
        _mm512_storeu_ps(m + r, mnew);
        _mm512_storeu_ps(alpha + r, a);
    }
}

static inline __attribute__((always_inline)) void
sw_bf_pv_block(float *restrict o, int d, const uint32_t *restrict pp, int mv,
               const uint32_t *restrict vp, const float *restrict alpha, int np, int r0, int c0,
               const int rr, const int dv)
{
    __m512 acc[SW_BF_PR][SW_BF_PD];
#pragma GCC unroll 8
    for (int i = 0; i < rr; i++) {
        __m512 a = _mm512_set1_ps(alpha[r0 + i]);
#pragma GCC unroll 8
        for (int c = 0; c < dv; c++)
            acc[i][c] = _mm512_mul_ps(_mm512_loadu_ps(o + (size_t)(r0 + i) * d + c0 + c * 16), a);
    }
    for (int k = 0; k < np; k++) {
        __m512bh vv[SW_BF_PD];
#pragma GCC unroll 8
        for (int c = 0; c < dv; c++)
            vv[c] = (__m512bh)_mm512_loadu_si512(vp + (size_t)k * d + c0 + c * 16);
#pragma GCC unroll 8
        for (int i = 0; i < rr; i++) {
            __m512bh p = (__m512bh)_mm512_set1_epi32((int)pp[(size_t)k * mv + r0 + i]);
#pragma GCC unroll 8
            for (int c = 0; c < dv; c++)
                acc[i][c] = _mm512_dpbf16_ps(acc[i][c], vv[c], p);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < rr; i++)
#pragma GCC unroll 8
        for (int c = 0; c < dv; c++)
            _mm512_storeu_ps(o + (size_t)(r0 + i) * d + c0 + c * 16, acc[i][c]);
}

static void sw_bf_pv_tile(float *o, int d, const uint32_t *pp, int mv, int mr,
                          const uint32_t *vp, const float *alpha, int np)
{
    int c = 0;
    for (; c + SW_BF_PD * 16 <= d; c += SW_BF_PD * 16)
        for (int r = 0; r < mr; r += SW_BF_PR)
            sw_bf_pv_block(o, d, pp, mv, vp, alpha, np, r, c, SW_BF_PR, SW_BF_PD);
    for (; c < d; c += 16)
        for (int r = 0; r < mr; r += SW_BF_PR)
            sw_bf_pv_block(o, d, pp, mv, vp, alpha, np, r, c, SW_BF_PR, 1);
}

void sw_cpu_unit_avx512bf16(const sw_attn_problem *pb, const sw_cpu_unit *u,
                            const sw_cpu_scratch *s)
{
    if (pb->dtype != SW_DTYPE_BF16) {
        sw_cpu_unit_avx512(pb, u, s);
        return;
    }
    const int d = pb->head_dim;
    const int G = pb->num_qo_heads / pb->num_kv_heads;
    const int rows = u->ntok * u->nh;
    const int mv = (rows + 15) / 16 * 16;
    const int mr = (rows + SW_BF_PR - 1) / SW_BF_PR * SW_BF_PR; /* P.V skips padding rows */
    const int64_t kv0 = sw_cpu_kv0(pb, u->req);
    const int64_t q0 = pb->qo_indptr[u->req] + u->tok0;
    const float c = pb->sm_scale * 1.44269504088896341f;
    uint32_t *qp = (uint32_t *)s->qt; /* [d/2][mv] */
    uint32_t *pp = (uint32_t *)s->kf; /* [NKEYS/2][mv]; K is read in place */
    uint32_t *vp = (uint32_t *)s->vf; /* [NKEYS/2][d] */
    int32_t vis_min, vis_max;

    sw_cpu_unit_vis(pb, u, mv, s->vis, &vis_min, &vis_max);
    for (int r = 0; r < rows; r++) {
        const char *src = (const char *)pb->q +
                          ((size_t)((q0 + r / u->nh) * pb->q_stride) +
                           (size_t)(u->kvh * G + u->h0 + r % u->nh) * d) * 2;
        for (int p = 0; p < d / 2; p++)
            qp[(size_t)p * mv + r] = sw_ld32(src + 4 * p);
    }
    for (int r = rows; r < mv; r++)
        for (int p = 0; p < d / 2; p++)
            qp[(size_t)p * mv + r] = 0;
    for (int r = 0; r < mv; r++) {
        s->m[r] = -INFINITY;
        s->l[r] = 0.0f;
    }
    memset(s->o, 0, (size_t)mv * d * sizeof(float));

    for (int32_t j0 = 0; j0 < vis_max; j0 += SW_CPU_NKEYS) {
        const int nn = vis_max - j0 < SW_CPU_NKEYS ? vis_max - j0 : SW_CPU_NKEYS;
        const uint16_t *kr =
            (const uint16_t *)sw_cpu_kv_row(pb, pb->k, pb->k_stride, kv0 + j0, u->kvh);
        int64_t kst = sw_cpu_kv_stride(pb, pb->k, pb->k_stride, kv0 + j0, nn);
        if (!kst) { /* rows of several pages: copied out (L1) */
            for (int i = 0; i < nn; i++)
                memcpy(s->kc + (size_t)i * d,
                       sw_cpu_kv_row(pb, pb->k, pb->k_stride, kv0 + j0 + i, u->kvh),
                       (size_t)d * 2);
            kr = s->kc;
            kst = d;
        }
        const int masked = j0 + nn > vis_min;
        if (masked)
            for (int r = 0; r < mv; r++) {
                int32_t lim = s->vis[r] - j0;
                s->visr[r] = (float)(lim < 0 ? 0 : lim > nn ? nn : lim);
            }
        if (j0 + nn < vis_max) {
            int nx = vis_max - j0 - nn < SW_CPU_NKEYS ? vis_max - j0 - nn : SW_CPU_NKEYS;
            sw_cpu_prefetch_rows(pb, pb->k, pb->k_stride, kv0 + j0 + nn, u->kvh, nx);
            sw_cpu_prefetch_rows(pb, pb->v, pb->v_stride, kv0 + j0 + nn, u->kvh, nx);
        }
        sw_bf_pack_v(vp, pb, kv0 + j0, u->kvh, nn);
        sw_bf_s_tile(qp, mv, kr, kst, d, s->st, nn);
        sw_bf_softmax_tile(s->st, pp, mv, nn, masked, s->visr, c, s->m, s->l, s->alpha);
        sw_bf_pv_tile(s->o, d, pp, mv, mr, vp, s->alpha, (nn + 1) / 2);
    }
    sw_cpu_store_o_avx512(pb, u, s->o, s->m, s->l);
}

#else
typedef int sw_cpu_fast_avx512bf16_unused; /* ISO C: no empty translation unit */
#endif /* __x86_64__ */
