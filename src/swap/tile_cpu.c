/* CPU tile kernels of the swap engine: the portable scalar kernel (the
 * shared tile_cpu.inc over plain floats), the ISA choice (the CPU prefill
 * path's: sw_cpu_prefill_isa(), SPILLWAY_CPU_ISA included), the E4M3 table
 * and the per-handle compute pool + per-thread scratch. The AVX2 / AVX-512
 * kernels are tile_cpu_avx2.c / tile_cpu_avx512.c (per-file -m flags). */
#include "swap_internal.h"
#include "attn/cpu_fast_kernels.h"
#include "core/sw_core.h"
#include "core/sw_half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SW_K_CAT2(a, b) a##b
#define SW_K_CAT(a, b) SW_K_CAT2(a, b)
typedef float sw_k_v;
#define SW_K_NAME sw_swap_kernel_scalar
#define SW_K_VL 1
#define SW_K_LD(p) (*(p))
#define SW_K_ST(p, v) (*(p) = (v))
#define SW_K_SET1(x) (x)
#define SW_K_ADD(a, b) ((a) + (b))
#define SW_K_SUB(a, b) ((a) - (b))
#define SW_K_MUL(a, b) ((a) * (b))
#define SW_K_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SW_K_FMA(a, b, c) ((a) * (b) + (c))
#define SW_K_EXP2(x) exp2f(x)
#define SW_K_HSUM(v) (v)
#define SW_K_LDBF16(p) sw_bf16_to_f32(*(p))
#define SW_K_SB 2
#define SW_K_KB 2
#define SW_K_PR 4
#define SW_K_PD 1
#include "tile_cpu.inc"

static int isa_chosen(void)
{
    const char *name = sw_cpu_prefill_isa();
    for (int i = 0; i < SW_CPU_ISA_COUNT; i++)
        if (strcmp(name, sw_cpu_isa_name((sw_cpu_isa)i)) == 0)
            return i;
    return SW_CPU_ISA_SCALAR;
}

sw_swap_kernel_fn sw_swap_tile_kernel(const sw_swap *s)
{
#if defined(__x86_64__)
    const int32_t D = s->m.head_dim;
    if (s->tile_isa >= SW_CPU_ISA_AVX512 && D % 16 == 0)
        return sw_swap_kernel_avx512;
    if (s->tile_isa >= SW_CPU_ISA_AVX2 && D % 8 == 0)
        return sw_swap_kernel_avx2;
#else
    (void)s;
#endif
    return sw_swap_kernel_scalar;
}

sw_status sw_swap_tile_init(sw_swap *s)
{
    sw_swap_e4m3_lut_init();
    s->tile_isa = isa_chosen();
    int64_t nt = sw_env_int("SPILLWAY_NUM_THREADS", 0);
    if (nt <= 0)
        nt = sw_cpu_count();
    if (nt < 1)
        nt = 1;
    if (nt > 256)
        nt = 256;
    sw_status st = sw_swap_tpool_start(&s->tp, (int)nt);
    if (st != SW_OK)
        return st;
    const int32_t B = s->m.block_size, D = s->m.head_dim;
    s->bpad = (B + 15) / 16 * 16;
    /* kf, vf, sv per thread, each rounded to a 64-byte multiple */
    const size_t kvb = sw_align_up(sizeof(float) * (size_t)B * (size_t)D, 64);
    const size_t svb = sw_align_up(sizeof(float) * SW_SWAP_TROWS * (size_t)s->bpad, 64);
    const size_t per = 2 * kvb + svb;
    s->ts = calloc((size_t)s->tp.nthreads, sizeof *s->ts);
    s->ts_mem = sw_aligned_alloc(64, per * (size_t)s->tp.nthreads);
    if (!s->ts || !s->ts_mem)
        return sw_fail(SW_STATUS_NO_MEMORY, "tile scratch for %d threads", s->tp.nthreads);
    for (int i = 0; i < s->tp.nthreads; i++) {
        uint8_t *b = (uint8_t *)s->ts_mem + per * (size_t)i;
        s->ts[i].kf = (float *)b;
        s->ts[i].vf = (float *)(b + kvb);
        s->ts[i].sv = (float *)(b + 2 * kvb);
    }
    return SW_OK;
}

void sw_swap_tile_fini(sw_swap *s)
{
    sw_swap_tpool_stop(&s->tp);
    free(s->ts);
    sw_aligned_free(s->ts_mem);
    s->ts = NULL;
    s->ts_mem = NULL;
}
