/* Swap tile kernel, AVX2 + FMA (tile_cpu.inc over __m256). Compiled with
 * -mavx2 -mfma -mf16c; called only when the CPU prefill path's ISA choice
 * is avx2 or above (tile_cpu.c). */
#include "swap_internal.h"
#include "core/sw_half.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include "core/sw_exp2_x86.h"

static inline float sw_swap_hsum_avx2(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

#define SW_K_CAT2(a, b) a##b
#define SW_K_CAT(a, b) SW_K_CAT2(a, b)
typedef __m256 sw_k_v;
#define SW_K_NAME sw_swap_kernel_avx2
#define SW_K_VL 8
#define SW_K_LD(p) _mm256_loadu_ps(p)
#define SW_K_ST(p, v) _mm256_storeu_ps((p), (v))
#define SW_K_SET1(x) _mm256_set1_ps(x)
#define SW_K_ADD(a, b) _mm256_add_ps((a), (b))
#define SW_K_SUB(a, b) _mm256_sub_ps((a), (b))
#define SW_K_MUL(a, b) _mm256_mul_ps((a), (b))
#define SW_K_MAX(a, b) _mm256_max_ps((a), (b))
#define SW_K_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define SW_K_EXP2(x) sw_exp2_avx2(x)
#define SW_K_HSUM(v) sw_swap_hsum_avx2(v)
#define SW_K_LDBF16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32( \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
/* 16 ymm: 2x4 S accumulators + 4 K + 1 Q; 4x2 P.V accumulators + 2 V + 1 P */
#define SW_K_SB 2
#define SW_K_KB 4
#define SW_K_PR 4
#define SW_K_PD 2
#include "tile_cpu.inc"

#else
typedef int sw_swap_tile_avx2_unused; /* ISO C: no empty translation unit */
#endif
