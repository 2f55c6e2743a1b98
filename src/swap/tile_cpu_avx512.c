/* Swap tile kernel, AVX-512 (tile_cpu.inc over __m512). Compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c; called only when
 * the CPU prefill path's ISA choice is avx512 or above (tile_cpu.c). */
#include "swap_internal.h"
#include "core/sw_half.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* The CPU prefill path's exp2 (cpu_fast_avx512.c): exactly 0 for x <= -127
 * (-inf included), relative error ~1.2e-7. */
static inline __m512 sw_swap_exp2_avx512(__m512 x)
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
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

#define SW_K_CAT2(a, b) a##b
#define SW_K_CAT(a, b) SW_K_CAT2(a, b)
typedef __m512 sw_k_v;
#define SW_K_NAME sw_swap_kernel_avx512
#define SW_K_VL 16
#define SW_K_LD(p) _mm512_loadu_ps(p)
#define SW_K_ST(p, v) _mm512_storeu_ps((p), (v))
#define SW_K_SET1(x) _mm512_set1_ps(x)
#define SW_K_ADD(a, b) _mm512_add_ps((a), (b))
#define SW_K_SUB(a, b) _mm512_sub_ps((a), (b))
#define SW_K_MUL(a, b) _mm512_mul_ps((a), (b))
#define SW_K_MAX(a, b) _mm512_max_ps((a), (b))
#define SW_K_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define SW_K_EXP2(x) sw_swap_exp2_avx512(x)
#define SW_K_HSUM(v) _mm512_reduce_add_ps(v)
#define SW_K_LDBF16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32( \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
/* 32 zmm: 4x4 S accumulators + 4 K; 4x4 P.V accumulators + 4 V */
#define SW_K_SB 4
#define SW_K_KB 4
#define SW_K_PR 4
#define SW_K_PD 4
#include "tile_cpu.inc"

#else
typedef int sw_swap_tile_avx512_unused; /* ISO C: no empty translation unit */
#endif
