/* CPU fast path of ragged prefill attention: work units, threads, and the
 * run-time choice of instruction set. The arithmetic lives in the per-ISA
 * kernel files (see cpu_fast_kernels.h).
 *
 * Build: per-file compile flags (x86-64 with GCC or Clang; on other
 * architectures the x86 files compile to nothing and need no flags):
 *   src/attn/cpu_fast.c            (default flags)  needs -pthread at link
 *   src/attn/cpu_fast_scalar.c     (default flags)
 *   src/attn/cpu_fast_avx2.c       -mavx2 -mfma -mf16c
 *   src/attn/cpu_fast_avx512.c     -mavx512f -mavx512bw -mavx512vl -mavx512dq
 *   src/attn/cpu_fast_avx512bf16.c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16
 *   src/attn/cpu_fast_amx.c        the avx512bf16 flags + -mamx-tile -mamx-bf16 (without
 *                                  them it compiles to a stub and AMX is never chosen)
 * cpu_fast_tile.inc is included by the scalar/avx2/avx512 files, not compiled.
 * No file may be built with -march=native or an ISA flag beyond its own:
 * the driver decides at run time which of them may execute.
 *
 * Choice of ISA, once per process: the best the CPU and OS support
 * (amx > avx512bf16 > avx512 > avx2 > scalar), or SPILLWAY_CPU_ISA=
 * scalar|avx2|avx512|avx512bf16|amx, clamped to what is supported (an
 * unsupported or unknown choice falls back and keeps going). AMX counts as
 * supported only when cpuid reports AMX-TILE + AMX-BF16 (palette 1 with 8
 * tiles of 16 x 64 bytes), XCR0 enables the tile state and Linux grants it
 * to the process (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, inside the
 * pthread_once of the ISA choice). Per problem (sw_isa_kernel): head_dim
 * not a multiple of 16 always runs the scalar kernel; under amx, bf16 with
 * head_dim % 32 == 0 runs the AMX kernel and everything else the fp32
 * avx512 kernel (on the one AMX Xeon measured, avx512 beat avx512bf16 by
 * 1.3-1.6x: docs/perf/prefill.md). The AMX kernel reads K and V repacked
 * once per call (per request and kv head, by the first unit that needs them;
 * requests grouped so that the packs stay under SW_CPU_PACK_MAX_BYTES).
 * Threads: SPILLWAY_NUM_THREADS when set (> 0), else num_threads, else one
 * per online CPU. Keys per AMX tile: sw_cpu_amx_nkeys (cpu_fast_kernels.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall() */
#endif
#include "cpu_fast_kernels.h"
#include "../core/sw_core.h"
#include "../core/sw_half.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* ------------------------------------------------------------ ISA choice -- */

static const char *const sw_isa_names[SW_CPU_ISA_COUNT] = {"scalar", "avx2", "avx512",
                                                            "avx512bf16", "amx"};

const char *sw_cpu_isa_name(sw_cpu_isa isa)
{
    return (unsigned)isa < SW_CPU_ISA_COUNT ? sw_isa_names[isa] : "unknown";
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* AMX usable by this process: CPU, OS state and Linux's permission. Called
 * once (pthread_once), and only when AVX-512 was detected, so OSXSAVE is set. */
static int sw_amx_usable(void)
{
#if defined(__linux__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!sw_cpu_amx_built || __get_cpuid_max(0, NULL) < 0x1d)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!((d >> 24) & 1) || !((d >> 22) & 1)) /* AMX-TILE, AMX-BF16 */
        return 0;
    __cpuid_count(0x1d, 0, a, b, c, d); /* palettes: 1 is the one we configure */
    if (a < 1)
        return 0;
    __cpuid_count(0x1d, 1, a, b, c, d);
    if ((b & 0xffff) < 64 || (b >> 16) < 8 || (c & 0xffff) < 16)
        return 0; /* bytes per row, tile names, rows */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) /* XTILECFG, XTILEDATA */
        return 0;
    /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18); then check
     * with ARCH_GET_XCOMP_PERM (0x1022). Per process: every thread may use
     * the tiles afterwards. */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0)
        return 0;
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, 0x1022, &perm) != 0 || !((perm >> 18) & 1))
        return 0;
    return 1;
#else
    return 0;
#endif
}
#endif

static sw_cpu_isa sw_isa_detect(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks that the OS saves the ymm/zmm state. */
    /* F16C from cpuid: clang 14's __builtin_cpu_supports has no "f16c" */
    unsigned a = 0, b = 0, c = 0, d = 0;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512dq");
    int bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
    int amx = bf16 && sw_amx_usable();
    return amx ? SW_CPU_ISA_AMX
         : bf16 ? SW_CPU_ISA_AVX512BF16
         : avx512 ? SW_CPU_ISA_AVX512
         : avx2 ? SW_CPU_ISA_AVX2
                : SW_CPU_ISA_SCALAR;
#else
    return SW_CPU_ISA_SCALAR;
#endif
}

static pthread_once_t sw_isa_once = PTHREAD_ONCE_INIT;
static sw_cpu_isa sw_isa_best_v = SW_CPU_ISA_SCALAR;
static sw_cpu_isa sw_isa_chosen_v = SW_CPU_ISA_SCALAR;


static void sw_isa_init(void)
{
    sw_isa_best_v = sw_isa_detect();
    sw_isa_chosen_v = sw_isa_best_v;
    const char *e = getenv("SPILLWAY_CPU_ISA");
    if (!e || !*e)
        return;
    int found = -1;
    for (int i = 0; i < SW_CPU_ISA_COUNT; i++)
        if (strcmp(e, sw_isa_names[i]) == 0)
            found = i;
    if (found >= 0 && (sw_cpu_isa)found <= sw_isa_best_v)
        sw_isa_chosen_v = (sw_cpu_isa)found;
    else if (found >= 0)
        fprintf(stderr, "spillway: warning: SPILLWAY_CPU_ISA=%s: this CPU (or OS) runs up to %s; "
                        "using %s\n", e, sw_isa_names[sw_isa_best_v], sw_isa_names[sw_isa_best_v]);
    else
        fprintf(stderr, "spillway: warning: SPILLWAY_CPU_ISA=%s is not one of scalar, avx2, "
                        "avx512, avx512bf16, amx; using %s\n", e, sw_isa_names[sw_isa_best_v]);
}

sw_cpu_isa sw_cpu_isa_best(void)
{
    pthread_once(&sw_isa_once, sw_isa_init);
    return sw_isa_best_v;
}

const char *sw_cpu_prefill_isa(void)
{
    pthread_once(&sw_isa_once, sw_isa_init);
    return sw_isa_names[sw_isa_chosen_v];
}

static sw_cpu_kernel sw_isa_kernel(sw_cpu_isa isa, sw_dtype dtype, int32_t head_dim)
{
    sw_cpu_kernel k = {sw_cpu_unit_scalar, NULL};
    if (head_dim % 16 != 0)
        return k;
#if defined(__x86_64__)
    switch (isa) {
    case SW_CPU_ISA_AMX:
        /* Not avx512bf16 for the rest: on the AMX Xeon measured (the H200's
         * host) the fp32 avx512 kernel ran 1.3-1.6x faster than avx512bf16. */
        if (dtype == SW_DTYPE_BF16 && head_dim % 32 == 0) {
            k.unit = sw_cpu_unit_amx;
            k.pack = sw_cpu_amx_pack;
        } else {
            k.unit = sw_cpu_unit_avx512;
        }
        break;
    case SW_CPU_ISA_AVX512BF16: k.unit = sw_cpu_unit_avx512bf16; break;
    case SW_CPU_ISA_AVX512: k.unit = sw_cpu_unit_avx512; break;
    case SW_CPU_ISA_AVX2: k.unit = sw_cpu_unit_avx2; break;
    default: break;
    }
#else
    (void)isa, (void)dtype;
#endif
    return k;
}

/* ------------------------------------------------------ shared helpers -- */

/* kf/vf also hold the bf16 kernel's P pairs, [NKEYS/2][MROWS] words */
static size_t sw_kf_cols(size_t d) { return d > SW_CPU_MROWS / 2 ? d : SW_CPU_MROWS / 2; }

size_t sw_cpu_scratch_bytes(int32_t head_dim)
{
    size_t d = (size_t)head_dim;
    size_t floats = d * SW_CPU_MROWS              /* qt */
                    + 2 * (size_t)SW_CPU_NKEYS * sw_kf_cols(d) /* kf, vf */
                    + (size_t)SW_CPU_NKEYS * d / 2 /* kc (16-bit) */
                    + (size_t)SW_CPU_NKEYS * SW_CPU_MROWS /* st */
                    + (size_t)SW_CPU_MROWS * d    /* o */
                    + 5 * (size_t)SW_CPU_MROWS    /* m, l, alpha, visr, vis */
                    + (size_t)SW_CPU_MROWS * (SW_CPU_AMX_NKEYS_MAX + 16) /* sx */
                    + (size_t)SW_CPU_MROWS * (SW_CPU_AMX_NKEYS_MAX + 32) / 2; /* px */
    /* each array starts on its own 64-byte line */
    return sw_align_up(floats * sizeof(float) + 13 * 64, 64);
}

void sw_cpu_scratch_bind(sw_cpu_scratch *s, void *mem, int32_t head_dim)
{
    size_t d = (size_t)head_dim;
    char *p = (char *)mem;
#define SW_TAKE(field, type, count)              \
    do {                                         \
        s->field = (type *)p;                    \
        p += sw_align_up((count) * sizeof(type), 64); \
    } while (0)
    SW_TAKE(qt, float, d * SW_CPU_MROWS);
    SW_TAKE(kf, float, (size_t)SW_CPU_NKEYS * sw_kf_cols(d));
    SW_TAKE(vf, float, (size_t)SW_CPU_NKEYS * sw_kf_cols(d));
    SW_TAKE(kc, uint16_t, (size_t)SW_CPU_NKEYS * d);
    SW_TAKE(st, float, (size_t)SW_CPU_NKEYS * SW_CPU_MROWS);
    SW_TAKE(o, float, (size_t)SW_CPU_MROWS * d);
    SW_TAKE(m, float, (size_t)SW_CPU_MROWS);
    SW_TAKE(l, float, (size_t)SW_CPU_MROWS);
    SW_TAKE(alpha, float, (size_t)SW_CPU_MROWS);
    SW_TAKE(visr, float, (size_t)SW_CPU_MROWS);
    SW_TAKE(vis, int32_t, (size_t)SW_CPU_MROWS);
    SW_TAKE(sx, float, (size_t)SW_CPU_MROWS * (SW_CPU_AMX_NKEYS_MAX + 16));
    SW_TAKE(px, uint16_t, (size_t)SW_CPU_MROWS * (SW_CPU_AMX_NKEYS_MAX + 32));
    s->pack = NULL;
    s->next = NULL;
#undef SW_TAKE
}

/* ---------------------------------------------------------- work units -- */

/* K+V bytes of the kv heads whose units run together (a chunk): small enough
 * to stay in the last-level cache while both threads sweep their tokens.
 * Measured on the Zen 4 box: MHA 32 heads d128 at 1x1024 (16 MB of K/V) ran
 * as fast as GQA, at 1x2048 (33 MB > 32 MiB L3) ~20 % slower in plain
 * longest-first order, which interleaves every head. */
#define SW_CPU_CHUNK_BYTES ((int64_t)4 << 20)

/* Units of one problem: per request with q_len > 0 and per kv head, the
 * group's query heads (at most MROWS of them per unit) times as many tokens
 * as fill MROWS rows. Cost ~ rows x visible keys of the unit's last token.
 * Order: chunks (a request's kv heads, SW_CPU_CHUNK_BYTES of K/V at a time)
 * longest request first, and longest unit first within a chunk, so the list
 * still ends with the shortest units of the shortest request. */
static int64_t sw_units_build(const sw_attn_problem *pb, sw_cpu_unit *out)
{
    const int32_t G = pb->num_qo_heads / pb->num_kv_heads;
    const int32_t hpu = G < SW_CPU_MROWS ? G : SW_CPU_MROWS;
    const int32_t tpu = SW_CPU_MROWS / hpu;
    const int64_t es = pb->dtype == SW_DTYPE_F32 ? 4 : 2;
    int64_t n = 0;
    int32_t chunk = 0;
    for (int32_t b = 0; b < pb->batch; b++) {
        int32_t q_len = pb->qo_indptr[b + 1] - pb->qo_indptr[b];
        int32_t kv_len = pb->kv_indptr[b + 1] - pb->kv_indptr[b];
        int64_t head_bytes = (int64_t)kv_len * pb->head_dim * 2 * es;
        int64_t hc = head_bytes > 0 ? SW_CPU_CHUNK_BYTES / head_bytes : pb->num_kv_heads;
        if (hc < 1)
            hc = 1;
        int64_t chunk_cost = ((int64_t)kv_len + 16) * SW_CPU_MROWS;
        for (int32_t kvh = 0; kvh < pb->num_kv_heads; kvh++)
            for (int32_t h0 = 0; h0 < G; h0 += hpu)
                for (int32_t t0 = 0; t0 < q_len; t0 += tpu) {
                    if (out) {
                        sw_cpu_unit *u = &out[n];
                        u->req = b;
                        u->kvh = kvh;
                        u->tok0 = t0;
                        u->ntok = q_len - t0 < tpu ? q_len - t0 : tpu;
                        u->h0 = h0;
                        u->nh = G - h0 < hpu ? G - h0 : hpu;
                        int32_t vis = sw_visible_keys(t0 + u->ntok - 1, q_len, kv_len, pb->causal);
                        u->cost = ((int64_t)vis + 16) * u->ntok * u->nh;
                        u->chunk = chunk + (int32_t)(kvh / hc);
                        u->chunk_cost = chunk_cost;
                    }
                    n++;
                }
        chunk += (int32_t)((pb->num_kv_heads + hc - 1) / hc);
    }
    return n;
}

static int sw_unit_cmp(const void *pa, const void *pb_)
{
    const sw_cpu_unit *a = (const sw_cpu_unit *)pa, *b = (const sw_cpu_unit *)pb_;
    if (a->chunk_cost != b->chunk_cost)
        return a->chunk_cost > b->chunk_cost ? -1 : 1;
    if (a->chunk != b->chunk)
        return a->chunk < b->chunk ? -1 : 1;
    if (a->cost != b->cost)
        return a->cost > b->cost ? -1 : 1;
    if (a->req != b->req)
        return a->req < b->req ? -1 : 1;
    if (a->kvh != b->kvh)
        return a->kvh < b->kvh ? -1 : 1;
    if (a->h0 != b->h0)
        return a->h0 < b->h0 ? -1 : 1;
    return a->tok0 < b->tok0 ? -1 : a->tok0 > b->tok0;
}

/* ---------------------------------------------------------- K/V packs -- */

/* Packed K/V of one call (or of one group of its requests, see below). */
/* Requests whose packed K+V exceed this run in groups of requests, one pack
 * buffer each, so the extra memory stays bounded (a single larger request
 * still runs alone). */
#define SW_CPU_PACK_MAX_BYTES ((int64_t)512 << 20)

/* The scratch + pack block of the last call, kept for the next one. A fresh buffer
 * costs a page fault per 4 KiB on first touch (glibc returns freed blocks
 * of this size to the kernel): 1024 faults, ~1.5 ms of a 2.6 ms pack, per
 * 16 x 128-token d256 call on the Zen 4 box (docs/perf/prefill.md,
 * 2026-11-30), where the attention itself is a few ms. One block for the
 * whole process, taken with an atomic exchange (a concurrent call that finds
 * the slot empty allocates its own; of two returned, the later is kept);
 * blocks over SW_CPU_PACK_KEEP_BYTES are freed at the end of the call: for
 * requests that long the faults are noise next to the attention. */
#define SW_CPU_PACK_KEEP_BYTES ((size_t)64 << 20)
typedef struct sw_pack_mem {
    size_t bytes; /* usable bytes after the header */
    char pad[56];
} sw_pack_mem;
static _Atomic(sw_pack_mem *) sw_pack_kept;

/* A block of >= bytes (64-byte aligned, uninitialised), or NULL. */
static void *sw_pack_mem_take(size_t bytes)
{
    sw_pack_mem *h = atomic_exchange_explicit(&sw_pack_kept, NULL, memory_order_acquire);
    if (h && h->bytes >= bytes)
        return h + 1;
    sw_aligned_free(h);
    if (bytes <= SW_CPU_PACK_KEEP_BYTES) /* room to grow a little between calls */
        bytes = sw_align_up(bytes + bytes / 8, (size_t)1 << 16);
    h = (sw_pack_mem *)sw_aligned_alloc(64, sizeof *h + bytes);
    if (!h)
        return NULL;
    h->bytes = bytes;
    return h + 1;
}

static void sw_pack_mem_give(void *p)
{
    if (!p)
        return;
    sw_pack_mem *h = (sw_pack_mem *)p - 1;
    if (h->bytes > SW_CPU_PACK_KEEP_BYTES) {
        sw_aligned_free(h);
        return;
    }
    sw_pack_mem *old = atomic_exchange_explicit(&sw_pack_kept, h, memory_order_acq_rel);
    sw_aligned_free(old);
}

static int64_t sw_pack_bytes_req(const sw_attn_problem *pb, int32_t b)
{
    int64_t kv_len = pb->kv_indptr[b + 1] - pb->kv_indptr[b];
    return (kv_len + 32) * pb->num_kv_heads * pb->head_dim * 2 /* K, V */ * 2 /* bf16 */;
}

/* ------------------------------------------------------------- threads -- */

typedef struct sw_cpu_job {
    const sw_attn_problem *pb;
    const sw_cpu_unit *units;
    int64_t num_units;
    atomic_int_fast64_t next;
    sw_cpu_unit_fn fn;
    int ahead; /* claim each thread's next unit before running the current one */
} sw_cpu_job;

typedef struct sw_cpu_worker {
    sw_cpu_job *job;
    sw_cpu_scratch scratch;
    pthread_t tid;
} sw_cpu_worker;

static void *sw_cpu_worker_main(void *arg)
{
    sw_cpu_worker *w = (sw_cpu_worker *)arg;
    sw_cpu_job *job = w->job;
    if (job->ahead) {
        /* short requests: the unit after this one is known while this one
         * runs (the kernel may prefetch its inputs); the order stays longest
         * first, a thread holds at most one unit more than it runs */
        int64_t i = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
        while (i < job->num_units) {
            int64_t j = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
            w->scratch.next = j < job->num_units ? &job->units[j] : NULL;
            job->fn(job->pb, &job->units[i], &w->scratch);
            i = j;
        }
        w->scratch.next = NULL;
        return NULL;
    }
    for (;;) {
        int64_t i = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
        if (i >= job->num_units)
            break;
        job->fn(job->pb, &job->units[i], &w->scratch);
    }
    return NULL;
}

sw_status sw_cpu_prefill_fast_isa(const sw_attn_problem *pb, int num_threads, sw_cpu_isa isa)
{
    if (isa > sw_cpu_isa_best())
        isa = sw_cpu_isa_best();
    sw_cpu_kernel k = {sw_cpu_unit_scalar, NULL};
    if (pb)
        k = sw_isa_kernel(isa, pb->dtype, pb->head_dim);
    return sw_cpu_prefill_fast_kernel(pb, num_threads, &k);
}

sw_status sw_cpu_prefill_fast_fn(const sw_attn_problem *pb, int num_threads, sw_cpu_unit_fn fn)
{
    sw_cpu_kernel k = {fn, NULL};
    return sw_cpu_prefill_fast_kernel(pb, num_threads, &k);
}

int64_t sw_cpu_threads_for(int64_t work, int64_t units, int64_t avail)
{
    int64_t n = 1 + (work >> 20);
    if (n > units)
        n = units;
    if (n > avail)
        n = avail;
    return n < 1 ? 1 : n;
}

/* One validated problem (or group of requests) with one pack buffer. */
static sw_status sw_cpu_run(const sw_attn_problem *pb, int64_t nt, const sw_cpu_kernel *kn)
{
    int64_t num_units = sw_units_build(pb, NULL);
    if (num_units == 0)
        return SW_OK;
    int64_t work = 0;
    for (int32_t b = 0; b < pb->batch; b++)
        work += (int64_t)(pb->qo_indptr[b + 1] - pb->qo_indptr[b]) *
                ((int64_t)(pb->kv_indptr[b + 1] - pb->kv_indptr[b]) + 16);
    nt = sw_cpu_threads_for(work * pb->num_qo_heads * pb->head_dim, num_units, nt);

    sw_cpu_unit *units = (sw_cpu_unit *)malloc((size_t)num_units * sizeof *units);
    sw_cpu_worker *workers = (sw_cpu_worker *)calloc((size_t)nt, sizeof *workers);
    size_t sbytes = sw_cpu_scratch_bytes(pb->head_dim);
    sw_cpu_pack pack = {kn->pack, NULL, NULL, NULL};
    size_t pack_elems = 0;
    if (kn->pack) {
        pack_elems = (size_t)(pb->kv_indptr[pb->batch] - pb->kv_indptr[0] + 32 * (int64_t)pb->batch) *
                     (size_t)pb->num_kv_heads * (size_t)pb->head_dim;
        pack_elems = sw_align_up(pack_elems, 32); /* V starts on a cache line */
        pack.state = (atomic_int *)malloc((size_t)pb->batch * (size_t)pb->num_kv_heads *
                                          sizeof(atomic_int));
        if (pack.state)
            for (int64_t i = 0; i < (int64_t)pb->batch * pb->num_kv_heads; i++)
                atomic_init(&pack.state[i], 0);
    }
    /* one block: the threads' scratch, then packed K, then packed V */
    char *mem = (char *)sw_pack_mem_take(sbytes * (size_t)nt + pack_elems * 4);
    if (mem && kn->pack) {
        pack.k = (uint16_t *)(mem + sbytes * (size_t)nt);
        pack.v = pack.k + pack_elems;
    }
    if (!units || !workers || !mem || (kn->pack && !pack.state)) {
        free(units);
        free(workers);
        sw_pack_mem_give(mem);
        free(pack.state);
        return sw_fail(SW_STATUS_NO_MEMORY,
                       "cpu fast path: %lld units, %lld threads x %zu B, K/V pack 2 x %zu B",
                       (long long)num_units, (long long)nt, sbytes, pack_elems * 2);
    }
    sw_units_build(pb, units);
    qsort(units, (size_t)num_units, sizeof *units, sw_unit_cmp);

    sw_cpu_job job;
    job.pb = pb;
    job.units = units;
    job.num_units = num_units;
    atomic_init(&job.next, 0);
    job.fn = kn->unit;
    job.ahead = 0;
    if (kn->pack) {
        int32_t max_kv = 0;
        for (int32_t b = 0; b < pb->batch; b++) {
            int32_t kv_len = pb->kv_indptr[b + 1] - pb->kv_indptr[b];
            max_kv = kv_len > max_kv ? kv_len : max_kv;
        }
        job.ahead = max_kv < SW_CPU_SHORT_KV;
    }

    int64_t started = 0;
    for (int64_t i = 0; i < nt; i++) {
        workers[i].job = &job;
        sw_cpu_scratch_bind(&workers[i].scratch, mem + (size_t)i * sbytes, pb->head_dim);
        workers[i].scratch.pack = kn->pack ? &pack : NULL;
    }
    /* The calling thread is worker 0; a thread that fails to start only
     * costs parallelism, the others drain its share. */
    for (int64_t i = 1; i < nt; i++) {
        if (pthread_create(&workers[i].tid, NULL, sw_cpu_worker_main, &workers[i]) != 0)
            break;
        started = i;
    }
    sw_cpu_worker_main(&workers[0]);
    for (int64_t i = 1; i <= started; i++)
        pthread_join(workers[i].tid, NULL);

    free(units);
    free(workers);
    sw_pack_mem_give(mem);
    free(pack.state);
    return SW_OK;
}

sw_status sw_cpu_prefill_fast_kernel(const sw_attn_problem *pb, int num_threads,
                                     const sw_cpu_kernel *kn)
{
    if (!pb || !pb->qo_indptr || !pb->kv_indptr)
        return sw_fail(SW_STATUS_INVALID, "cpu fast path: null problem or indptr");
    if (pb->num_qo_heads < 1 || pb->num_kv_heads < 1 ||
        pb->num_qo_heads % pb->num_kv_heads != 0 || pb->head_dim < 1)
        return sw_fail(SW_STATUS_INVALID, "cpu fast path: heads %d/%d, head_dim %d",
                       (int)pb->num_qo_heads, (int)pb->num_kv_heads, (int)pb->head_dim);
    if (pb->dtype != SW_DTYPE_F32 && pb->dtype != SW_DTYPE_F16 && pb->dtype != SW_DTYPE_BF16)
        return sw_fail(SW_STATUS_UNSUPPORTED, "cpu fast path: dtype %d", (int)pb->dtype);
    if (!kn || !kn->unit)
        return sw_fail(SW_STATUS_INVALID, "cpu fast path: no kernel");

    if (sw_units_build(pb, NULL) == 0)
        return SW_OK;
    /* (empty sides may pass NULL, as the plan allows: no keys, no k / v) */
    const int has_keys = pb->kv_indptr[pb->batch] > pb->kv_indptr[0];
    if (!pb->q || !pb->o || (has_keys && (!pb->k || !pb->v)))
        return sw_fail(SW_STATUS_INVALID, "cpu fast path: null tensor");

    int64_t nt = sw_env_int("SPILLWAY_NUM_THREADS", 0);
    if (nt <= 0)
        nt = num_threads > 0 ? num_threads : sw_cpu_count();
    if (nt > 1024)
        nt = 1024;
    if (!kn->pack)
        return sw_cpu_run(pb, nt, kn);

    /* Requests in groups whose packed K/V fit SW_CPU_PACK_MAX_BYTES. The
     * kernels index rows through qo_indptr/kv_indptr, which hold absolute
     * offsets, so a group is the same problem seen from its first request. */
    for (int32_t b0 = 0; b0 < pb->batch;) {
        int32_t b1 = b0 + 1;
        int64_t bytes = sw_pack_bytes_req(pb, b0);
        while (b1 < pb->batch && bytes + sw_pack_bytes_req(pb, b1) <= SW_CPU_PACK_MAX_BYTES)
            bytes += sw_pack_bytes_req(pb, b1++);
        sw_attn_problem g = *pb;
        g.batch = b1 - b0;
        g.qo_indptr = pb->qo_indptr + b0;
        g.kv_indptr = pb->kv_indptr + b0;
        if (g.kv_row0)
            g.kv_row0 = pb->kv_row0 + b0;
        sw_status st = sw_cpu_run(&g, nt, kn);
        if (st != SW_OK)
            return st;
        b0 = b1;
    }
    return SW_OK;
}

sw_status sw_cpu_prefill_fast(const sw_attn_problem *pb, int num_threads)
{
    pthread_once(&sw_isa_once, sw_isa_init);
    return sw_cpu_prefill_fast_isa(pb, num_threads, sw_isa_chosen_v);
}
