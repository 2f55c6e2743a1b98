/* CPU fast path, AVX-512 kernel: the shared tile code (cpu_fast_tile.inc)
 * over __m512 (16 rows per vector), for every dtype. Compile with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq; called only when the CPU
 * reports AVX-512 F/BW/VL/DQ. Also the fp32/fp16 path of the avx512bf16 ISA. */
#include "cpu_fast_kernels.h"
#include "../core/sw_half.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "../core/sw_exp2_x86.h"

static void sw_t_cvt_rows(float *dst, int ld, const sw_attn_problem *pb, const void *base,
                          int64_t stride, int64_t row0, int32_t kvh, int n)
{
    const int d = pb->head_dim;
    for (int i = 0; i < n; i++) {
        const uint16_t *src = (const uint16_t *)sw_cpu_kv_row(pb, base, stride, row0 + i, kvh);
        float *o = dst + (size_t)i * ld;
        int k = 0;
        if (pb->dtype == SW_DTYPE_BF16) {
            for (; k + 16 <= d; k += 16) {
                __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + k)));
                _mm512_storeu_ps(o + k, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
            }
            for (; k < d; k++)
                o[k] = sw_bf16_to_f32(src[k]);
        } else {
            for (; k + 16 <= d; k += 16)
                _mm512_storeu_ps(o + k,
                                 _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + k))));
            for (; k < d; k++)
                o[k] = sw_f16_to_f32(src[k]);
        }
    }
}

/* sw_cpu_store_o with AVX-512: the same results (bf16 and fp16 rounded to
 * nearest even, NaN kept NaN), 16 elements per step. The scalar epilogue
 * (bit arithmetic per element) cost ~4 ns per output element on the Zen 4
 * box: 8.5 ms of a 16 x 128-token call at d256 on 2 threads, as much as
 * the attention arithmetic itself (docs/perf/prefill.md, 2026-11-30). */
void sw_cpu_store_o_avx512(const sw_attn_problem *pb, const sw_cpu_unit *u, const float *o,
                           const float *m, const float *l)
{
    const int d = pb->head_dim;
    const int G = pb->num_qo_heads / pb->num_kv_heads;
    const int rows = u->ntok * u->nh;
    const int64_t q0 = pb->qo_indptr[u->req] + u->tok0;
    const size_t es = pb->dtype == SW_DTYPE_F32 ? 4 : 2;
    const __m512i rnd = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    const __m512i qnan = _mm512_set1_epi32(0x40);
    for (int r = 0; r < rows; r++) {
        int64_t tok = q0 + r / u->nh;
        int32_t head = u->kvh * G + u->h0 + r % u->nh;
        char *dst = (char *)pb->o + ((size_t)(tok * pb->o_stride) + (size_t)head * d) * es;
        const float *src = o + (size_t)r * d;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        const __m512 iv = _mm512_set1_ps(inv);
        int k = 0;
        switch (pb->dtype) {
        case SW_DTYPE_F32:
            for (; k + 16 <= d; k += 16)
                _mm512_storeu_ps((float *)dst + k, _mm512_mul_ps(_mm512_loadu_ps(src + k), iv));
            for (; k < d; k++)
                ((float *)dst)[k] = src[k] * inv;
            break;
        case SW_DTYPE_F16:
            for (; k + 16 <= d; k += 16)
                _mm256_storeu_si256((__m256i *)((uint16_t *)dst + k),
                                    _mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(src + k), iv),
                                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            for (; k < d; k++)
                ((uint16_t *)dst)[k] = sw_f32_to_f16(src[k] * inv);
            break;
        default:
            for (; k + 16 <= d; k += 16) {
                __m512 x = _mm512_mul_ps(_mm512_loadu_ps(src + k), iv);
                __m512i w = _mm512_castps_si512(x);
                __m512i hi = _mm512_srli_epi32(w, 16);
                /* w + 0x7fff + (bit 16 of w), then the high half */
                __m512i rn = _mm512_srli_epi32(
                    _mm512_add_epi32(w, _mm512_add_epi32(rnd, _mm512_and_si512(hi, one))), 16);
                __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
                rn = _mm512_mask_or_epi32(rn, nan, hi, qnan);
                _mm256_storeu_si256((__m256i *)((uint16_t *)dst + k), _mm512_cvtepi32_epi16(rn));
            }
            for (; k < d; k++)
                ((uint16_t *)dst)[k] = sw_f32_to_bf16(src[k] * inv);
            break;
        }
        if (pb->lse) /* (a NaN row: NaN, not a row that sees no key) */
            pb->lse[tok * pb->num_qo_heads + head] =
                l[r] > 0.0f ? (float)(0.69314718055994531 * ((double)m[r] + log2((double)l[r])))
                : isnan(l[r]) ? NAN
                              : -INFINITY;
    }
}

typedef __m512 sw_t_v;
#define SW_T_STORE_O sw_cpu_store_o_avx512
#define SW_T_NAME sw_cpu_unit_avx512
#define SW_T_VL 16
#define SW_T_LD(p) _mm512_loadu_ps(p)
#define SW_T_ST(p, v) _mm512_storeu_ps((p), (v))
#define SW_T_SET1(x) _mm512_set1_ps(x)
#define SW_T_ADD(a, b) _mm512_add_ps((a), (b))
#define SW_T_SUB(a, b) _mm512_sub_ps((a), (b))
#define SW_T_MUL(a, b) _mm512_mul_ps((a), (b))
#define SW_T_MAX(a, b) _mm512_max_ps((a), (b))
#define SW_T_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define SW_T_EXP2(x) sw_exp2_avx512(x)
#define SW_T_MASK(n, lim, s) \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask((n), (lim), _CMP_LT_OQ), _mm512_set1_ps(-INFINITY), (s))
/* 32 zmm registers: 2x8 S accumulators, 4x4 P.V accumulators. */
#define SW_T_SB 2
#define SW_T_KB 8
#define SW_T_PR 4
#define SW_T_PD 4
#include "cpu_fast_tile.inc"

#else
typedef int sw_cpu_fast_avx512_unused; /* ISO C: no empty translation unit */
#endif /* __x86_64__ */
