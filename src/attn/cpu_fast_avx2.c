/* CPU fast path, AVX2 kernel: the shared tile code (cpu_fast_tile.inc) over
 * __m256 (8 rows per vector). Compile with -mavx2 -mfma -mf16c; the driver
 * calls it only when the CPU reports all three. */
#include "cpu_fast_kernels.h"
#include "../core/sw_half.h"

#if defined(__x86_64__)
#include <immintrin.h>

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
            for (; k + 8 <= d; k += 8) {
                __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + k)));
                _mm256_storeu_ps(o + k, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
            }
            for (; k < d; k++)
                o[k] = sw_bf16_to_f32(src[k]);
        } else {
            for (; k + 8 <= d; k += 8)
                _mm256_storeu_ps(o + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + k))));
            for (; k < d; k++)
                o[k] = sw_f16_to_f32(src[k]);
        }
    }
}

typedef __m256 sw_t_v;
#define SW_T_NAME sw_cpu_unit_avx2
#define SW_T_VL 8
#define SW_T_LD(p) _mm256_loadu_ps(p)
#define SW_T_ST(p, v) _mm256_storeu_ps((p), (v))
#define SW_T_SET1(x) _mm256_set1_ps(x)
#define SW_T_ADD(a, b) _mm256_add_ps((a), (b))
#define SW_T_SUB(a, b) _mm256_sub_ps((a), (b))
#define SW_T_MUL(a, b) _mm256_mul_ps((a), (b))
#define SW_T_MAX(a, b) _mm256_max_ps((a), (b))
#define SW_T_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define SW_T_EXP2(x) sw_exp2_avx2(x)
#define SW_T_MASK(n, lim, s) \
    _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), (s), _mm256_cmp_ps((n), (lim), _CMP_LT_OQ))
/* 16 ymm registers: 2x4 S accumulators, 4x2 P.V accumulators. */
#define SW_T_SB 2
#define SW_T_KB 4
#define SW_T_PR 4
#define SW_T_PD 2
#include "cpu_fast_tile.inc"

#else
typedef int sw_cpu_fast_avx2_unused; /* ISO C: no empty translation unit */
#endif /* __x86_64__ */
