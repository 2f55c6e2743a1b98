/* CPU fast path, AVX-512 kernel: the shared tile code (cpu_fast_tile.inc)
 * over __m512 (16 rows per vector), for every dtype. Compile with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq; called only when the CPU
 * reports AVX-512 F/BW/VL/DQ. Also the fp32/fp16 path of the avx512bf16 ISA. */
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

typedef __m512 sw_t_v;
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
