/* cpu_fast_amx_emul.h - DEVELOPMENT ONLY: a scalar model of the AMX
 * instructions used by src/attn/cpu_fast_amx.c, so that the kernel's exact
 * logic (tile shapes, strides, VNNI pair layouts, partial tiles, masks)
 * runs on a CPU without AMX against the fp64 oracle (bench/dev/cpu_fast_check
 * built as cpu_fast_check_emul by bench/dev/cpu_fast_check.sh).
 *
 * Semantics follow the Intel SDM pseudo-code:
 *  LDTILECFG  64-byte operand: palette (1), start_row (must be 0 here),
 *             14 reserved zero bytes, colsb[16] (u16), rows[16] (u8); tiles
 *             past palette 1's 8 must be 0x0; rows <= 16, colsb <= 64, a tile
 *             has both or neither (else #GP). Loading zeroes all tiles.
 *  TILELOADD  rows[t] rows of colsb[t] bytes from base + i * stride; the rest
 *             of each 64-byte row and the rows past rows[t] become zero.
 *  TILESTORED rows[t] rows of colsb[t] bytes to base + i * stride.
 *  TDPBF16PS  c.fp32[m][n] += sum over k < a.colsb/4 of
 *             a.bf16[m][2k] * b.bf16[k][2n] + a.bf16[m][2k+1] * b.bf16[k][2n+1]
 *             in that order, fp32 accumulate, bf16 denormal inputs as zero;
 *             #UD unless c.rows == a.rows, a.colsb / 4 == b.rows,
 *             c.colsb == b.colsb and c, a, b are three different tiles.
 *  TILERELEASE back to the init state (no config).
 * Stricter than the hardware, to catch logic errors: any tile instruction
 * without a loaded config on the calling thread aborts (each worker thread
 * must configure its own tiles), reading a tile never zeroed/loaded since
 * the config aborts, and every tile load/store must lie inside one of the
 * memory ranges the kernel registered for the unit (SW_AMX_RANGE), which in
 * turn must not overlap (a scratch layout error shows up as an overlap);
 * the kernel's scratch is filled with NaN at the start of every unit
 * (SW_AMX_POISON), so a pad it forgets to zero poisons the output.
 * Failures print the operation and abort(). */
#ifndef SW_CPU_FAST_AMX_EMUL_H
#define SW_CPU_FAST_AMX_EMUL_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sw_emul_tiles {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    int defined[8];
    uint8_t data[8][16][64];
} sw_emul_tiles;

typedef struct sw_emul_range {
    const char *lo, *hi, *name;
} sw_emul_range;

static _Thread_local sw_emul_tiles sw_emul_t;
static _Thread_local sw_emul_range sw_emul_rg[16];
static _Thread_local int sw_emul_nrg;
/* operation counts over all threads, printed by the checker */
static atomic_llong sw_emul_n_cfg, sw_emul_n_load, sw_emul_n_store, sw_emul_n_dp;

#define SW_EMUL_DIE(...)                                   \
    do {                                                   \
        fprintf(stderr, "AMX EMULATION ERROR: " __VA_ARGS__); \
        fprintf(stderr, "\n");                             \
        abort();                                           \
    } while (0)

static void sw_amx_emul_ranges_reset(void) { sw_emul_nrg = 0; }

static void sw_amx_emul_range(const void *p, size_t bytes, const char *name)
{
    const char *lo = (const char *)p, *hi = lo + bytes;
    for (int i = 0; i < sw_emul_nrg; i++)
        if (lo < sw_emul_rg[i].hi && sw_emul_rg[i].lo < hi)
            SW_EMUL_DIE("range %s [%p, %p) overlaps %s [%p, %p)", name, (void *)lo, (void *)hi,
                        sw_emul_rg[i].name, (void *)sw_emul_rg[i].lo, (void *)sw_emul_rg[i].hi);
    if (sw_emul_nrg >= 16)
        SW_EMUL_DIE("too many ranges");
    sw_emul_rg[sw_emul_nrg].lo = lo;
    sw_emul_rg[sw_emul_nrg].hi = hi;
    sw_emul_rg[sw_emul_nrg].name = name;
    sw_emul_nrg++;
}

/* every row [base + i*stride, + colsb) inside one registered range */
static void sw_emul_check_mem(const char *op, int t, const void *base, long stride)
{
    const char *b = (const char *)base;
    for (int i = 0; i < sw_emul_t.rows[t]; i++) {
        const char *lo = b + (long)i * stride, *hi = lo + sw_emul_t.colsb[t];
        int ok = 0;
        for (int k = 0; k < sw_emul_nrg && !ok; k++)
            ok = lo >= sw_emul_rg[k].lo && hi <= sw_emul_rg[k].hi;
        if (!ok)
            SW_EMUL_DIE("%s tmm%d row %d: [%p, %p) outside every registered range (stride %ld)",
                        op, t, i, (void *)lo, (void *)hi, stride);
    }
}

static void sw_emul_need(const char *op, int t)
{
    if (!sw_emul_t.configured)
        SW_EMUL_DIE("%s tmm%d without a tile config on this thread", op, t);
    if (t < 0 || t > 7 || sw_emul_t.rows[t] == 0)
        SW_EMUL_DIE("%s tmm%d: tile not configured", op, t);
}

static void sw_amx_emul_loadconfig(const void *cfgp)
{
    const uint8_t *c = (const uint8_t *)cfgp;
    memset(&sw_emul_t, 0, sizeof sw_emul_t);
    if (c[0] != 1)
        SW_EMUL_DIE("ldtilecfg: palette %d (expected 1)", c[0]);
    if (c[1] != 0)
        SW_EMUL_DIE("ldtilecfg: start_row %d", c[1]);
    for (int i = 2; i < 16; i++)
        if (c[i])
            SW_EMUL_DIE("ldtilecfg: reserved byte %d = %d", i, c[i]);
    for (int t = 0; t < 16; t++) {
        uint16_t colsb;
        memcpy(&colsb, c + 16 + 2 * t, 2);
        uint8_t rows = c[48 + t];
        if (t >= 8) {
            if (colsb || rows)
                SW_EMUL_DIE("ldtilecfg: tile %d configured beyond palette 1", t);
            continue;
        }
        if (rows > 16 || colsb > 64 || (rows == 0) != (colsb == 0))
            SW_EMUL_DIE("ldtilecfg: tile %d rows %d colsb %d", t, rows, colsb);
        sw_emul_t.rows[t] = rows;
        sw_emul_t.colsb[t] = colsb;
    }
    sw_emul_t.configured = 1;
    atomic_fetch_add(&sw_emul_n_cfg, 1);
}

static void sw_amx_emul_release(void)
{
    if (!sw_emul_t.configured)
        SW_EMUL_DIE("tilerelease without a config (unbalanced)");
    memset(&sw_emul_t, 0, sizeof sw_emul_t);
}

static void sw_amx_emul_zero(int t)
{
    sw_emul_need("tilezero", t);
    memset(sw_emul_t.data[t], 0, sizeof sw_emul_t.data[t]);
    sw_emul_t.defined[t] = 1;
}

static void sw_amx_emul_loadd(int t, const void *base, long stride)
{
    sw_emul_need("tileloadd", t);
    sw_emul_check_mem("tileloadd", t, base, stride);
    memset(sw_emul_t.data[t], 0, sizeof sw_emul_t.data[t]);
    for (int i = 0; i < sw_emul_t.rows[t]; i++)
        memcpy(sw_emul_t.data[t][i], (const char *)base + (long)i * stride, sw_emul_t.colsb[t]);
    sw_emul_t.defined[t] = 1;
    atomic_fetch_add(&sw_emul_n_load, 1);
}

static void sw_amx_emul_stored(int t, void *base, long stride)
{
    sw_emul_need("tilestored", t);
    if (!sw_emul_t.defined[t])
        SW_EMUL_DIE("tilestored tmm%d: tile never written since the config", t);
    sw_emul_check_mem("tilestored", t, base, stride);
    for (int i = 0; i < sw_emul_t.rows[t]; i++)
        memcpy((char *)base + (long)i * stride, sw_emul_t.data[t][i], sw_emul_t.colsb[t]);
    atomic_fetch_add(&sw_emul_n_store, 1);
}

static inline float sw_emul_bf16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    if ((h & 0x7f80) == 0) /* zero or denormal: DAZ */
        h &= 0x8000;
    uint32_t w = (uint32_t)h << 16;
    float f;
    memcpy(&f, &w, 4);
    return f;
}

static void sw_amx_emul_dp(int c, int a, int b)
{
    sw_emul_need("tdpbf16ps(dst)", c);
    sw_emul_need("tdpbf16ps(src1)", a);
    sw_emul_need("tdpbf16ps(src2)", b);
    if (c == a || c == b || a == b)
        SW_EMUL_DIE("tdpbf16ps tmm%d, tmm%d, tmm%d: tiles must differ", c, a, b);
    if (!sw_emul_t.defined[c] || !sw_emul_t.defined[a] || !sw_emul_t.defined[b])
        SW_EMUL_DIE("tdpbf16ps tmm%d, tmm%d, tmm%d: reads a tile never written", c, a, b);
    const int M = sw_emul_t.rows[c], K = sw_emul_t.colsb[a] / 4, N = sw_emul_t.colsb[c] / 4;
    if (sw_emul_t.colsb[a] % 4 || sw_emul_t.colsb[c] % 4 || sw_emul_t.rows[a] != M ||
        sw_emul_t.rows[b] != K || sw_emul_t.colsb[b] != sw_emul_t.colsb[c])
        SW_EMUL_DIE("tdpbf16ps tmm%d (%dx%d), tmm%d (%dx%d), tmm%d (%dx%d): shapes (#UD)", c,
                    sw_emul_t.rows[c], sw_emul_t.colsb[c], a, sw_emul_t.rows[a],
                    sw_emul_t.colsb[a], b, sw_emul_t.rows[b], sw_emul_t.colsb[b]);
    for (int m = 0; m < M; m++) {
        float tmp[16];
        memcpy(tmp, sw_emul_t.data[c][m], 64);
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                const uint8_t *ar = sw_emul_t.data[a][m], *br = sw_emul_t.data[b][k];
                tmp[n] += sw_emul_bf16(ar + 4 * k) * sw_emul_bf16(br + 4 * n);
                tmp[n] += sw_emul_bf16(ar + 4 * k + 2) * sw_emul_bf16(br + 4 * n + 2);
            }
        memset(sw_emul_t.data[c][m], 0, 64);
        memcpy(sw_emul_t.data[c][m], tmp, (size_t)N * 4);
    }
    atomic_fetch_add(&sw_emul_n_dp, 1);
}

static inline void sw_amx_emul_assert(int ok, const char *what)
{
    if (!ok)
        SW_EMUL_DIE("assertion failed: %s", what);
}

#define SW_TILE_CONFIG(cfg) sw_amx_emul_loadconfig(cfg)
#define SW_TILE_LOADD(t, p, st) sw_amx_emul_loadd(t, (const void *)(p), (long)(st))
#define SW_TILE_STORED(t, p, st) sw_amx_emul_stored(t, (void *)(p), (long)(st))
#define SW_TILE_ZERO(t) sw_amx_emul_zero(t)
#define SW_TILE_DP(c, a, b) sw_amx_emul_dp(c, a, b)
#define SW_TILE_RELEASE() sw_amx_emul_release()
#define SW_AMX_RANGE(p, bytes, name) sw_amx_emul_range((const void *)(p), (bytes), (name))
#define SW_AMX_RANGES_RESET() sw_amx_emul_ranges_reset()
#define SW_AMX_ASSERT(x) sw_amx_emul_assert(!!(x), #x)
#define SW_AMX_POISON(p, bytes) memset((p), 0xff, (bytes)) /* NaN in fp32 and bf16 */

/* for the checker: total operations executed */
void sw_amx_emul_counts(long long out[4]);

#endif
