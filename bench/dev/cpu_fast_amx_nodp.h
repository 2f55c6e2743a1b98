/* cpu_fast_amx_nodp.h - DEVELOPMENT ONLY: tile macros that compile an AMX
 * kernel file (its SW_AMX_EMULATE path) into the same kernel WITHOUT the
 * tile arithmetic, for bench/dev/cpu_fast_overhead ("nodp", "nodp-v1"):
 *   tileloadd   16 rows of 64 bytes read with vector loads (the memory
 *               traffic of the load, nothing kept)
 *   tilestored  16 rows of 64 bytes of zeros written (so S and O hold zeros:
 *               the softmax and the epilogue see finite, normal data)
 *   tdpbf16ps, tilezero, ldtilecfg, tilerelease: nothing
 * Everything else (unit setup, Q copy, K/V packing, softmax, O rescale,
 * epilogue) runs as in the real kernel, so on the Xeon "amx" minus "nodp"
 * is the time of the tile instructions, and on a CPU without AMX "nodp"
 * times all the rest. Results are garbage; timing only. Include before the
 * kernel file, with SW_AMX_EMULATE defined. Built through
 * cpu_fast_amx_nodp.c / cpu_fast_amx_v1_nodp.c by bench/dev/cpu_fast_check.sh. */
#ifndef SW_CPU_FAST_AMX_NODP_H
#define SW_CPU_FAST_AMX_NODP_H

#include <immintrin.h>

static inline void sw_nodp_load(const void *p, long st)
{
    const char *c = (const char *)p;
    __m512i a = _mm512_setzero_si512();
    for (int i = 0; i < 16; i++)
        a = _mm512_or_si512(a, _mm512_loadu_si512(c + (long)i * st));
    __asm__ volatile("" ::"v"(a));
}

static inline void sw_nodp_store(void *p, long st)
{
    char *c = (char *)p;
    for (int i = 0; i < 16; i++)
        _mm512_storeu_si512(c + (long)i * st, _mm512_setzero_si512());
}

#define SW_TILE_CONFIG(cfg) ((void)(cfg))
#define SW_TILE_LOADD(t, p, st) ((void)(t), sw_nodp_load((const void *)(p), (long)(st)))
#define SW_TILE_STORED(t, p, st) ((void)(t), sw_nodp_store((void *)(p), (long)(st)))
#define SW_TILE_ZERO(t) ((void)(t))
#define SW_TILE_DP(c, a, b) ((void)(c), (void)(a), (void)(b))
#define SW_TILE_RELEASE() ((void)0)
#define SW_AMX_RANGE(p, bytes, name) ((void)0)
#define SW_AMX_RANGES_RESET() ((void)0)
#define SW_AMX_ASSERT(x) ((void)0)
#define SW_AMX_POISON(p, bytes) ((void)0)

#endif
