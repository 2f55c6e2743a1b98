/* CPU fast path, portable kernel: the shared tile code (cpu_fast_tile.inc)
 * over plain floats. Used on non-x86 hosts, for head_dim not a multiple of
 * 16, and when SPILLWAY_CPU_ISA=scalar. Compiled with the project's default
 * flags (no ISA flags). */
#include "cpu_fast_kernels.h"
#include "../core/sw_half.h"

#include <math.h>

static void sw_t_cvt_rows(float *dst, int ld, const sw_attn_problem *pb, const void *base,
                          int64_t stride, int64_t row0, int32_t kvh, int n)
{
    const int d = pb->head_dim;
    for (int i = 0; i < n; i++) {
        const uint16_t *src = (const uint16_t *)sw_cpu_kv_row(pb, base, stride, row0 + i, kvh);
        float *o = dst + (size_t)i * ld;
        if (pb->dtype == SW_DTYPE_BF16)
            for (int k = 0; k < d; k++)
                o[k] = sw_bf16_to_f32(src[k]);
        else
            for (int k = 0; k < d; k++)
                o[k] = sw_f16_to_f32(src[k]);
    }
}

typedef float sw_t_v;
#define SW_T_NAME sw_cpu_unit_scalar
#define SW_T_VL 1
#define SW_T_LD(p) (*(p))
#define SW_T_ST(p, v) (*(p) = (v))
#define SW_T_SET1(x) ((float)(x))
#define SW_T_ADD(a, b) ((a) + (b))
#define SW_T_SUB(a, b) ((a) - (b))
#define SW_T_MUL(a, b) ((a) * (b))
#define SW_T_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SW_T_FMA(a, b, c) ((a) * (b) + (c))
#define SW_T_EXP2(x) exp2f(x)
#define SW_T_MASK(n, lim, s) ((n) < (lim) ? (s) : -INFINITY)
#define SW_T_SB 4
#define SW_T_KB 4
#define SW_T_PR 4
#define SW_T_PD 4
#include "cpu_fast_tile.inc"
