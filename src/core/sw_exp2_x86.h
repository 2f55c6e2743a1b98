/* Vector 2^x for the CPU kernels (prefill fast path, AMX, swap tiles): one
 * definition, included by each per-ISA file; each function exists only when
 * the including file is compiled with its instruction set.
 *
 * x = n + f, |f| <= 1/2; 2^f by its degree-6 Taylor polynomial in f*ln2
 * (relative error ~1.2e-7); 2^n built in the exponent field. x is clamped to
 * [-127, 127] first, so x <= -127 (and -inf) gives exactly 0: a row with no
 * visible key sums to 0, never NaN. A NaN stays NaN (the clamps take x as
 * their second operand, which max/min return when either is NaN): a NaN
 * score makes its row NaN, as in the reference, not a masked key. Not
 * _mm512_scalef_ps, which would turn -inf into a denormal. */
#ifndef SW_EXP2_X86_H
#define SW_EXP2_X86_H

#if defined(__x86_64__)
#include <immintrin.h>

#define SW_EXP2_C6 1.5403530393381608e-4f
#define SW_EXP2_C5 1.3333558146428443e-3f
#define SW_EXP2_C4 9.6181291076284772e-3f
#define SW_EXP2_C3 5.5504108664821580e-2f
#define SW_EXP2_C2 2.4022650695910071e-1f
#define SW_EXP2_C1 6.9314718055994531e-1f

#if defined(__AVX2__) && defined(__FMA__)
static inline __m256 sw_exp2_avx2(__m256 x)
{
    x = _mm256_max_ps(_mm256_set1_ps(-127.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(127.0f), x);
    __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_sub_ps(x, n);
    __m256 p = _mm256_set1_ps(SW_EXP2_C6);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(SW_EXP2_C5));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(SW_EXP2_C4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(SW_EXP2_C3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(SW_EXP2_C2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(SW_EXP2_C1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

#if defined(__AVX512F__)
static inline __m512 sw_exp2_avx512(__m512 x)
{
    x = _mm512_max_ps(_mm512_set1_ps(-127.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(127.0f), x);
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(SW_EXP2_C6);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C5));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* 2^f for f in [-0.5, 0.5]: the degree-5 polynomial of the two variants
 * below (relative error ~2.4e-6). */
static inline __m512 sw_exp2_poly5_avx512(__m512 f)
{
    __m512 p = _mm512_set1_ps(SW_EXP2_C5);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(SW_EXP2_C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return p;
}

/* 2^x for x <= 0 (and -inf, which gives exactly 0), with fewer operations
 * for the AMX kernel's softmax, whose P is rounded to bf16 (8 bits) right
 * after: degree-5 polynomial (relative error ~2.4e-6) and vscalefps for 2^n.
 * x is clamped to >= -160 first, so -inf and anything below -150 give 0
 * (2^-160 underflows to +0; 2^-127..2^-149 come out as denormals, harmless
 * next to the row's maximum, which is 2^0). */
static inline __m512 sw_exp2_avx512_nonpos(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-160.0f));
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_scalef_ps(sw_exp2_poly5_avx512(_mm512_sub_ps(x, n)), n);
}

/* 2^x for x <= 0 on the lanes of `keep`, exactly 0 on the others and where
 * x < -125 (-inf included; a NaN on a kept lane stays NaN), with no operation on any lane that
 * produces a denormal or underflows. sw_exp2_avx512_nonpos takes -inf to
 * 2^-160 through vscalefps, an underflow; on Intel cores an FP result that
 * underflows while MXCSR.FTZ is off costs a microcode assist (~150 cycles
 * for the whole instruction), and the AMX kernel's softmax fed it -inf for
 * every masked key of every causal diagonal tile. Here excluded lanes
 * compute 2^0 and are zeroed by the final masked vscalefps; kept lanes
 * have n >= -125 and p >= 2^-0.5, so every result is a normal number
 * (>= 2^-125.5). Same polynomial as sw_exp2_avx512_nonpos. */
static inline __m512 sw_exp2_avx512_nonpos_z(__m512 x, __mmask16 keep)
{
    keep &= _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.0f), _CMP_NLT_UQ); /* (NaN kept) */
    x = _mm512_maskz_mov_ps(keep, x);
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_maskz_scalef_ps(keep, sw_exp2_poly5_avx512(_mm512_sub_ps(x, n)), n);
}
#endif

#endif /* __x86_64__ */
#endif
