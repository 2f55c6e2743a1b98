/* Internal contract between the CPU fast path's driver (cpu_fast.c: work
 * units, threads, ISA choice) and its per-ISA kernels (cpu_fast_<isa>.c).
 *
 * A work unit is (request, kv head, a run of query tokens, a run of the
 * query heads of that kv head's GQA group). Its rows are r = t * nh + h
 * (token-major), so every K/V tile converted once serves all the query heads
 * that read it. A unit has at most SW_CPU_MROWS rows; a kernel walks the
 * visible keys in tiles of SW_CPU_NKEYS with an online softmax in fp32. */
#ifndef SW_CPU_FAST_KERNELS_H
#define SW_CPU_FAST_KERNELS_H

#include "attn_internal.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 64 rows x 64 keys: the K/V conversion of a tile (2*64*d elements) is
 * amortised over 64*64*d*4 FLOPs, and a tile of fp32 S plus a unit's fp32
 * Q^T and O stay within a 1-2 MiB L2 up to head_dim 256. */
#define SW_CPU_MROWS 64
#define SW_CPU_NKEYS 64

typedef enum sw_cpu_isa {
    SW_CPU_ISA_SCALAR = 0,
    SW_CPU_ISA_AVX2 = 1,       /* AVX2 + FMA + F16C */
    SW_CPU_ISA_AVX512 = 2,     /* AVX-512 F/BW/VL/DQ */
    SW_CPU_ISA_AVX512BF16 = 3, /* + AVX512_BF16: bf16 data uses vdpbf16ps */
    SW_CPU_ISA_AMX = 4,        /* + AMX-TILE/AMX-BF16 granted by the OS: bf16 data with
                                  head_dim % 32 == 0 uses tdpbf16ps (cpu_fast_amx.c) */
    SW_CPU_ISA_COUNT = 5
} sw_cpu_isa;

typedef struct sw_cpu_unit {
    int32_t req;
    int32_t kvh;   /* kv head */
    int32_t tok0;  /* first query token, relative to the request */
    int32_t ntok;
    int32_t h0;    /* first query head within the group (0..G-1) */
    int32_t nh;    /* query heads in the unit */
    int64_t cost;  /* for the longest-first order */
    int64_t chunk_cost; /* order of the unit's chunk (see sw_units_build) */
    int32_t chunk;
} sw_cpu_unit;

/* AMX kernel: keys per tile, a multiple of 32 up to SW_CPU_AMX_NKEYS_MAX;
 * 0 (the default): chosen per unit from its visible keys (cpu_fast_amx.c,
 * sw_amx_keys). A development tool (bench/dev/cpu_fast_check) may set it
 * before the first call; the library never does. */
#define SW_CPU_AMX_NKEYS_MAX 256
#define SW_CPU_AMX_NKEYS_DEFAULT 0
extern int sw_cpu_amx_nkeys;

/* K/V repacked once per call for kernels that want another layout (the AMX
 * kernel: K^T and V in bf16 pair layouts), per (request, kv head), packed
 * lazily by the first unit that needs it (cpu_fast_unit.c, sw_cpu_pack_get). */
typedef struct sw_cpu_pack sw_cpu_pack;
/* Writes the packed K and V of (req, kvh) to kt / vp, each
 * sw_cpu_pack_keys(kv_len) * head_dim elements of 2 bytes. */
typedef void (*sw_cpu_pack_fn)(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                               uint16_t *vp);
/* The call's packs: the kernel's pack function, the K and V buffers, and
 * per (request, kv head) 0 not packed, 1 packing, 2 ready. */
struct sw_cpu_pack {
    sw_cpu_pack_fn fn;
    uint16_t *k, *v;
    _Atomic int *state;
};
/* Keys of one packed (request, kv head): kv_len rounded up to 32 (the
 * padding is zero). */
static inline int64_t sw_cpu_pack_keys(int32_t kv_len) { return ((int64_t)kv_len + 31) / 32 * 32; }

/* Per-thread scratch, allocated once per call (sw_cpu_scratch_bytes). Row
 * arrays hold SW_CPU_MROWS entries, tiles SW_CPU_NKEYS keys. */
typedef struct sw_cpu_scratch {
    float *qt;     /* [head_dim][mv]   Q^T (fp32, scaled) or bf16 pairs */
    float *kf;     /* [NKEYS][head_dim] K tile as fp32 */
    float *vf;     /* [NKEYS][head_dim] V tile as fp32, or bf16 key pairs */
    uint16_t *kc;  /* [NKEYS][head_dim] K rows copied out of pages (avx512bf16) */
    float *st;     /* [NKEYS][mv]      S^T, then P^T */
    float *o;      /* [MROWS][head_dim] fp32 accumulator */
    float *m;      /* running max, log2 domain */
    float *l;      /* running sum */
    float *alpha;  /* rescale of this tile */
    float *visr;   /* visible keys of a row within the current tile */
    int32_t *vis;  /* visible keys of a row */
    float *sx;     /* [MROWS][AMX_NKEYS_MAX + 16] AMX kernel: S, row-major */
    uint16_t *px;  /* [MROWS][AMX_NKEYS_MAX + 32] AMX kernel: P in bf16, row-major */
    sw_cpu_pack *pack; /* shared by the call's threads; NULL when the kernel packs nothing */
    /* The unit this thread runs after the current one, or NULL. Set by the
     * driver only for calls of short requests with a packing kernel (every
     * kv_len < SW_CPU_SHORT_KV): the AMX kernel prefetches its Q rows. */
    const sw_cpu_unit *next;
} sw_cpu_scratch;

/* Threads for a call (a pure heuristic, test_prefill_cpu): at most `avail`
 * and `units`, and one more for each 2^20 of `work` (query rows x (keys +
 * 16) x head_dim, over all query heads): a thread's start and join cost
 * 15-40 us on the 2-core VM, more than a small call's whole compute (a
 * decode row over 512 keys, 9/3 heads d64: 57 us on one thread, 105 us on
 * two). */
int64_t sw_cpu_threads_for(int64_t work, int64_t units, int64_t avail);

/* Calls whose requests all have fewer keys than this count as short: the
 * driver claims each thread's next unit ahead (sw_cpu_scratch.next). */
#define SW_CPU_SHORT_KV 512

size_t sw_cpu_scratch_bytes(int32_t head_dim);
void sw_cpu_scratch_bind(sw_cpu_scratch *s, void *mem, int32_t head_dim);

/* One kernel runs one unit to completion (writes O and LSE of its rows). */
typedef void (*sw_cpu_unit_fn)(const sw_attn_problem *pb, const sw_cpu_unit *u,
                               const sw_cpu_scratch *s);

void sw_cpu_unit_scalar(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s);
#if defined(__x86_64__)
void sw_cpu_unit_avx2(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s);
void sw_cpu_unit_avx512(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s);
void sw_cpu_unit_avx512bf16(const sw_attn_problem *pb, const sw_cpu_unit *u,
                            const sw_cpu_scratch *s);
/* sw_cpu_store_o with AVX-512 F/BW (cpu_fast_avx512.c): same contract and
 * results, used by the avx512, avx512bf16 and amx kernels. */
void sw_cpu_store_o_avx512(const sw_attn_problem *pb, const sw_cpu_unit *u, const float *o,
                           const float *m, const float *l);
/* AMX kernel (cpu_fast_amx.c). Takes bf16 problems with head_dim % 32 == 0
 * run with its pack function (sw_cpu_amx_pack: K/V repacked once per call);
 * anything else it hands to sw_cpu_unit_avx512 (head_dim % 16 == 0) or the
 * scalar kernel. May run only after sw_cpu_isa_best() reported
 * SW_CPU_ISA_AMX (that call also asks Linux for the tile state). */
void sw_cpu_unit_amx(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s);
/* 1 when cpu_fast_amx.c was compiled with AMX (a data object, not a
 * function: the detector reads it before knowing whether the CPU may
 * execute code from that file). 0 when the compiler lacks -mamx-*. */
extern const int sw_cpu_amx_built;
#endif

/* ---- helpers shared by the kernels (cpu_fast_unit.c, plain C) ---- */

/* Fills s->vis for rows [0, mv) (rows past the unit's copy its last row, so
 * padding never forces a mask) and returns the smallest and largest visible
 * key count over the unit's real rows. */
void sw_cpu_unit_vis(const sw_attn_problem *pb, const sw_cpu_unit *u, int mv, int32_t *vis,
                     int32_t *vis_min, int32_t *vis_max);
/* Q^T as fp32, multiplied by `scale`: qt[k * mv + r]; rows >= ntok*nh zero. */
void sw_cpu_load_qt(const sw_attn_problem *pb, const sw_cpu_unit *u, int mv, float scale,
                    float *qt);
/* Epilogue: O = o / l converted to the dtype (round to nearest even), LSE =
 * ln2 * (m + log2 l); rows with l == 0 get zeros and -inf. m is in the log2
 * domain (scores pre-multiplied by sm_scale * log2 e). */
void sw_cpu_store_o(const sw_attn_problem *pb, const sw_cpu_unit *u, const float *o,
                    const float *m, const float *l);
/* Request req's first key row (kv_indptr, or kv_row0 over pages). */
static inline int64_t sw_cpu_kv0(const sw_attn_problem *pb, int32_t req)
{
    return pb->kv_row0 ? pb->kv_row0[req] : pb->kv_indptr[req];
}

/* First element of K (or V: base is pb->k or pb->v) row `row` (absolute)
 * of kv head kvh; over pages, through the page table. */
static inline const void *sw_cpu_kv_row(const sw_attn_problem *pb, const void *base,
                                        int64_t stride, int64_t row, int32_t kvh)
{
    size_t es = pb->dtype == SW_DTYPE_F32 ? 4 : 2;
    if (pb->pages) {
        const sw_cpu_pages *pg = pb->pages;
        const int64_t pi = pg->shift >= 0 ? row >> pg->shift : row / pg->page_size;
        const int64_t t = row - pi * pg->page_size;
        const int v = base == pb->v && base != pb->k;
        const int64_t off = (int64_t)pg->page_indices[pi] * (v ? pg->v_page : pg->k_page) +
                            t * (v ? pg->v_token : pg->k_token) +
                            kvh * (v ? pg->v_head : pg->k_head);
        return (const char *)base + (size_t)off * es;
    }
    return (const char *)base + ((size_t)(row * stride) + (size_t)kvh * pb->head_dim) * es;
}

/* The stride (elements) between rows row0 .. row0 + n - 1 of K (or V), when
 * one stride spans them all (contiguous K/V; over pages, rows of one page),
 * else 0 (read them a row at a time). */
static inline int64_t sw_cpu_kv_stride(const sw_attn_problem *pb, const void *base,
                                       int64_t stride, int64_t row0, int n)
{
    if (!pb->pages)
        return stride;
    const sw_cpu_pages *pg = pb->pages;
    if (row0 / pg->page_size != (row0 + n - 1) / pg->page_size)
        return 0;
    return base == pb->v && base != pb->k ? pg->v_token : pg->k_token;
}

/* Prefetches n rows of K or V into the cache while the current tile
 * computes. Rows of one kv head are (num_kv_heads * head_dim) elements
 * apart: with many kv heads every row sits on its own 4 KiB page, where the
 * hardware stream prefetcher stops (measured: MHA 32 heads d128 ran ~25%
 * slower than GQA before this). */
static inline void sw_cpu_prefetch_rows(const sw_attn_problem *pb, const void *base,
                                        int64_t stride, int64_t row0, int32_t kvh, int n)
{
#if defined(__GNUC__) || defined(__clang__)
    size_t bytes = (size_t)pb->head_dim * (pb->dtype == SW_DTYPE_F32 ? 4 : 2);
    for (int i = 0; i < n; i++) {
        const char *r = (const char *)sw_cpu_kv_row(pb, base, stride, row0 + i, kvh);
        for (size_t off = 0; off < bytes; off += 64)
            __builtin_prefetch(r + off, 0, 3);
    }
#else
    (void)pb, (void)base, (void)stride, (void)row0, (void)kvh, (void)n;
#endif
}

/* Packed K (kt) and V (vp) of (req, kvh), packing them first when no other
 * unit did (another thread packing them is waited for). Only for kernels
 * run with a pack function (sw_cpu_prefill_fast_kernel). */
void sw_cpu_pack_get(const sw_cpu_scratch *s, const sw_attn_problem *pb, int32_t req,
                     int32_t kvh, const uint16_t **kt, const uint16_t **vp);

/* A unit kernel and, when it reads K/V repacked, the function that packs
 * them (NULL: it reads K/V in place). */
typedef struct sw_cpu_kernel {
    sw_cpu_unit_fn unit;
    sw_cpu_pack_fn pack;
} sw_cpu_kernel;
#if defined(__x86_64__)
/* K^T / V pair layouts of the AMX kernel (cpu_fast_amx.c); AVX-512 only. */
void sw_cpu_amx_pack(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                     uint16_t *vp);
#endif

/* Runs the fast path with a given instruction set (clamped to what the CPU
 * supports). The driver and tests use it to cover every ISA in one process. */
sw_status sw_cpu_prefill_fast_isa(const sw_attn_problem *pb, int num_threads, sw_cpu_isa isa);
/* Same, with an explicit unit kernel (development variants in bench/dev/). */
sw_status sw_cpu_prefill_fast_fn(const sw_attn_problem *pb, int num_threads, sw_cpu_unit_fn fn);
/* Same, with a kernel that may pack K/V first. */
sw_status sw_cpu_prefill_fast_kernel(const sw_attn_problem *pb, int num_threads,
                                     const sw_cpu_kernel *kernel);
/* Best instruction set this CPU (and OS) supports; names for logs. */
sw_cpu_isa sw_cpu_isa_best(void);
const char *sw_cpu_isa_name(sw_cpu_isa isa);

#ifdef __cplusplus
}
#endif
#endif
