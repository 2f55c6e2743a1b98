/* Swap tile kernel, AVX-512 (tile_cpu.inc over __m512). Compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c; called only when
 * the CPU prefill path's ISA choice is avx512 or above (tile_cpu.c). */
#include "swap_internal.h"
#include "core/sw_half.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include "core/sw_exp2_x86.h"

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
#define SW_K_EXP2(x) sw_exp2_avx512(x)
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
