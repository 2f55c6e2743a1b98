/* cpu_fast_check - development driver for the CPU fast path (src/attn/cpu_fast*.c).
 *
 * What it is: a standalone program, not part of the library or of ctest. It
 *  1. runs many seeded random ragged cases (lengths 0, 1, 17, 63..65, 100,
 *     tile non-multiples, q_len < kv_len and q_len > kv_len, head_dim 16..256,
 *     GQA 1/2/3/4/8/80 (80 > 64 rows: a group split over units), causal or
 *     not, row strides larger than the row, all three dtypes) through every
 *     instruction set this CPU supports and compares O (relative L2) and LSE
 *     with the fp64 oracle (sw_ref_row, cpu_ref.c); outputs are poisoned
 *     first, so an unwritten element fails the case;
 *  2. times the fast path on the reporting shapes (bf16, 1 x 2048, causal:
 *     Hq16/Hkv2 d256, Hq32/Hkv8 d128, Hq32/Hkv32 d128; not causal: Hq16/Hkv2
 *     d256) and prints GFLOP/s with FLOPs = 4 * q_len * kv_eff * d * Hq.
 * The AMX kernel (src/attn/cpu_fast_amx.c) is a library ISA ("amx"): run
 * like the others when the CPU has AMX and Linux grants the tile state.
 * Emulated AMX: the same program built with -DSW_AMX_EMULATE and linked with
 * bench/dev/cpu_fast_amx_emul.c (build/dev/cpu_fast_check_emul) also runs
 * every random case through the AMX kernel over a scalar model of the tile
 * instructions ("amx(emul)"; checks only, no timings), so the kernel's
 * logic is tested on CPUs without AMX (needs AVX-512 BF16).
 * Build (from the repo root; see the flags comment in src/attn/cpu_fast.c):
 *   sh bench/dev/cpu_fast_check.sh     -> build/dev/cpu_fast_check[_emul]
 * Run: cpu_fast_check [--cases N] [--seed S] [--threads T] [--reps R] [--isa-min I]
 *                     [--dtype f32|f16|bf16] [--emul-only] [--shapes report|bench] [--qamp A]
 *                     [--json FILE] [--perf-only|--check-only] [--amx-keys K]
 * --shapes bench times the bench/prefill.py --cpu cases (x 0.125) where the
 * v0 AMX kernel trailed torch, instead of the four 1 x 2048 reporting shapes;
 * where AMX runs, the previous kernel (bench/dev/cpu_fast_amx_v1.c) is
 * timed too, as "amx-v1". --amx-keys K (32..256, a multiple of
 * 32) fixes the AMX kernel's keys per tile (default: chosen per unit). --isa-min skips the ISAs below I in the checks and
 * the timings; --dtype fixes the dtype of the random cases; --emul-only
 * checks only amx(emul); --qamp A multiplies Q's amplitude (scores spread
 * over ~A times more log2 units; the LSE check is relative above 1).
 * Timing: median (and best) of --reps runs after one warm-up run.
 * Exit status 0 when every case passed, 1 otherwise.
 *
 * What each version measured: docs/perf/prefill.md, "CPU path". */
#define _GNU_SOURCE
#include "../../src/attn/attn_internal.h"
#include "../../src/attn/cpu_fast_kernels.h"
#include "../../src/attn/cpu_ref.h"
#include "../../src/core/sw_core.h"
#include "../../src/core/sw_half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(SW_AMX_EMULATE)
/* bench/dev/cpu_fast_amx_emul.c: the library's AMX kernel over the tile model */
void sw_cpu_unit_amx_emul(const sw_attn_problem *pb, const sw_cpu_unit *u,
                          const sw_cpu_scratch *s);
void sw_cpu_amx_pack_emul(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                          uint16_t *vp);
void sw_amx_emul_counts(long long out[4]);
static const sw_cpu_kernel sw_emul_kernel = {sw_cpu_unit_amx_emul, sw_cpu_amx_pack_emul};
#define SW_HAVE_EMUL 1
#else
#define SW_HAVE_EMUL 0
#endif
static int opt_dtype = -1, opt_emul_only = 0;
static float opt_qamp = 1.0f;

static uint64_t rng_state;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int rng_int(int n) { return (int)(rng_next() % (uint64_t)n); }
static float rng_unif(void) { return (float)((rng_next() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }

static size_t esize(sw_dtype t) { return t == SW_DTYPE_F32 ? 4 : 2; }

static void fill(void *p, sw_dtype t, size_t n, float amp)
{
    for (size_t i = 0; i < n; i++) {
        float x = rng_unif() * amp;
        if (t == SW_DTYPE_F32)
            ((float *)p)[i] = x;
        else if (t == SW_DTYPE_F16)
            ((uint16_t *)p)[i] = sw_f32_to_f16(x);
        else
            ((uint16_t *)p)[i] = sw_f32_to_bf16(x);
    }
}

static double get(const void *p, sw_dtype t, size_t i)
{
    if (t == SW_DTYPE_F32)
        return ((const float *)p)[i];
    if (t == SW_DTYPE_F16)
        return sw_f16_to_f32(((const uint16_t *)p)[i]);
    return sw_bf16_to_f32(((const uint16_t *)p)[i]);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct problem {
    sw_attn_problem pb;
    int32_t *qo, *kv;
    void *q, *k, *v, *o;
    float *lse;
    int64_t total_q, total_kv;
} problem;

static void problem_free(problem *p)
{
    free(p->qo);
    free(p->kv);
    free(p->q);
    free(p->k);
    free(p->v);
    free(p->o);
    free(p->lse);
}

static void problem_make(problem *p, sw_dtype dt, int batch, const int32_t *ql, const int32_t *kl,
                         int hq, int hkv, int d, int causal, int pad)
{
    memset(p, 0, sizeof *p);
    p->qo = malloc(sizeof(int32_t) * (batch + 1));
    p->kv = malloc(sizeof(int32_t) * (batch + 1));
    p->qo[0] = p->kv[0] = 0;
    for (int b = 0; b < batch; b++) {
        p->qo[b + 1] = p->qo[b] + ql[b];
        p->kv[b + 1] = p->kv[b] + kl[b];
    }
    p->total_q = p->qo[batch];
    p->total_kv = p->kv[batch];
    sw_attn_problem *pb = &p->pb;
    pb->dtype = dt;
    pb->batch = batch;
    pb->num_qo_heads = hq;
    pb->num_kv_heads = hkv;
    pb->head_dim = d;
    pb->causal = causal;
    pb->sm_scale = 1.0f / sqrtf((float)d);
    pb->qo_indptr = p->qo;
    pb->kv_indptr = p->kv;
    pb->q_stride = (int64_t)hq * d + pad * 8;
    pb->k_stride = (int64_t)hkv * d + pad * 16;
    pb->v_stride = (int64_t)hkv * d + pad * 24;
    pb->o_stride = (int64_t)hq * d + pad * 8;
    size_t es = esize(dt);
    p->q = malloc(es * (size_t)(p->total_q * pb->q_stride + 1));
    p->k = malloc(es * (size_t)(p->total_kv * pb->k_stride + 1));
    p->v = malloc(es * (size_t)(p->total_kv * pb->v_stride + 1));
    p->o = malloc(es * (size_t)(p->total_q * pb->o_stride + 1));
    p->lse = malloc(sizeof(float) * (size_t)(p->total_q * hq + 1));
    /* amplitude 2 on Q and K: scores spread over several units, softmax not flat
     * (--qamp scales Q: with 100, scores spread over hundreds of log2 units, so
     * most probabilities fall below 2^-125, where the AMX softmax gives 0) */
    fill(p->q, dt, (size_t)(p->total_q * pb->q_stride), 2.0f * opt_qamp);
    fill(p->k, dt, (size_t)(p->total_kv * pb->k_stride), 2.0f);
    fill(p->v, dt, (size_t)(p->total_kv * pb->v_stride), 1.0f);
    pb->q = p->q;
    pb->k = p->k;
    pb->v = p->v;
    pb->o = p->o;
    pb->lse = p->lse;
}

/* Poison, run, compare with the oracle. Returns 1 when it passes. */
static int check_case(problem *p, sw_cpu_isa isa, const sw_cpu_kernel *kn, int threads,
                      double *err_out, const char **why)
{
    sw_attn_problem *pb = &p->pb;
    size_t es = esize(pb->dtype);
    memset(p->o, 0xff, es * (size_t)(p->total_q * pb->o_stride)); /* NaN in every dtype */
    memset(p->lse, 0xff, sizeof(float) * (size_t)(p->total_q * pb->num_qo_heads));
    sw_status st = kn ? sw_cpu_prefill_fast_kernel(pb, threads, kn)
                      : sw_cpu_prefill_fast_isa(pb, threads, isa);
    *why = "";
    if (st != SW_OK) {
        *why = sw_last_error();
        return 0;
    }
    const int d = pb->head_dim;
    int32_t max_kv = 1;
    for (int b = 0; b < pb->batch; b++)
        if (p->kv[b + 1] - p->kv[b] > max_kv)
            max_kv = p->kv[b + 1] - p->kv[b];
    double *ref = malloc(sizeof(double) * d), *scratch = malloc(sizeof(double) * (max_kv + 1));
    double num = 0, den = 0, lse_err = 0;
    int bad_lse = 0, unwritten = 0;
    for (int b = 0; b < pb->batch; b++)
        for (int t = 0; t < p->qo[b + 1] - p->qo[b]; t++)
            for (int h = 0; h < pb->num_qo_heads; h++) {
                double lse;
                sw_ref_row(pb, b, t, h, ref, &lse, scratch);
                int64_t row = p->qo[b] + t;
                for (int c = 0; c < d; c++) {
                    double x = get(p->o, pb->dtype, (size_t)(row * pb->o_stride + (int64_t)h * d + c));
                    if (!isfinite(x))
                        unwritten++;
                    num += (x - ref[c]) * (x - ref[c]);
                    den += ref[c] * ref[c];
                }
                float got = p->lse[row * pb->num_qo_heads + h];
                if (isinf(lse) || isinf(got)) {
                    if (!(isinf(lse) && isinf(got) && got < 0))
                        bad_lse++;
                } else {
                    /* relative above 1: fp32 scores of magnitude ~|lse| (--qamp) */
                    double e = fabs(got - lse) / (fabs(lse) > 1.0 ? fabs(lse) : 1.0);
                    if (e > lse_err)
                        lse_err = e;
                }
            }
    free(ref);
    free(scratch);
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    *err_out = rel;
    double tol = pb->dtype == SW_DTYPE_F32 ? 2e-5 : 1e-2;
    double lse_tol = pb->dtype == SW_DTYPE_F32 ? 1e-4 : 2e-2;
    if (unwritten) {
        *why = "unwritten/non-finite output";
        return 0;
    }
    if (bad_lse || lse_err > lse_tol) {
        *why = "lse mismatch";
        return 0;
    }
    if (rel > tol) {
        *why = "relative L2 over tolerance";
        return 0;
    }
    return 1;
}

static const char *dt_name(sw_dtype t)
{
    return t == SW_DTYPE_F32 ? "f32" : t == SW_DTYPE_F16 ? "f16" : "bf16";
}

static int run_random(int ncases, uint64_t seed, int threads, int isa_min)
{
    static const int lens[] = {0, 1, 2, 17, 31, 63, 64, 65, 100, 127, 129, 200};
    /* 32 and 192: head_dims % 32 == 0 besides 64/128/256 for the AMX kernel */
    static const int dims[] = {64, 128, 256, 64, 128, 256, 16, 48, 80, 96, 40, 32, 192};
    static const int groups[] = {1, 2, 4, 8, 1, 2, 4, 8, 3, 80}; /* 80 > MROWS: split groups */
    int fails = 0, total = 0;
    double worst[3] = {0, 0, 0};
    sw_cpu_isa best = sw_cpu_isa_best();
    const int emul = SW_HAVE_EMUL; /* one more pseudo-ISA after best: amx(emul) */
    for (int ci = 0; ci < ncases; ci++) {
        uint64_t cseed = seed * 1000003ull + (uint64_t)ci + 1;
        rng_state = cseed * 0x9E3779B97F4A7C15ull | 1;
        int batch = 1 + rng_int(4);
        int32_t ql[4], kl[4];
        int causal = rng_int(2);
        for (int b = 0; b < batch; b++) {
            ql[b] = lens[rng_int(12)];
            int mode = rng_int(4);
            kl[b] = mode == 0 ? ql[b] : mode == 1 ? ql[b] + lens[rng_int(12)] : lens[rng_int(12)];
        }
        int d = dims[rng_int((int)(sizeof dims / sizeof dims[0]))];
        int g = groups[rng_int(10)];
        int hkv = 1 + rng_int(2);
        sw_dtype dt = (sw_dtype)rng_int(3);
        if (opt_dtype >= 0)
            dt = (sw_dtype)opt_dtype;
        int pad = rng_int(2);
        problem p;
        problem_make(&p, dt, batch, ql, kl, hkv * g, hkv, d, causal, pad);
        char name[256];
        int n = snprintf(name, sizeof name, "%s d%d hq%d hkv%d %s%s b%d [", dt_name(dt), d,
                         hkv * g, hkv, causal ? "causal" : "full", pad ? " strided" : "", batch);
        for (int b = 0; b < batch && n < 200; b++)
            n += snprintf(name + n, sizeof name - n, "%s%d/%d", b ? " " : "", ql[b], kl[b]);
        snprintf(name + n, sizeof name - n, "]");
        for (int isa = opt_emul_only ? (int)best + 1 : isa_min; isa <= (int)best + emul; isa++) {
            double err = 0;
            const char *why;
            const sw_cpu_kernel *fn = NULL;
#if SW_HAVE_EMUL
            if (isa > (int)best)
                fn = &sw_emul_kernel;
#endif
            int ok = check_case(&p, (sw_cpu_isa)isa, fn, threads, &err, &why);
            total++;
            if (err > worst[dt])
                worst[dt] = err;
            if (!ok) {
                fails++;
                printf("FAIL case %d seed %llu isa %s: %s: rel_l2 %.3g: %s\n", ci,
                       (unsigned long long)seed, fn ? "amx(emul)" : sw_cpu_isa_name((sw_cpu_isa)isa),
                       name, err, why);
            }
        }
        problem_free(&p);
    }
    printf("random cases: %d runs (%d cases x ISAs up to %s), %d failed; worst rel L2: f32 %.2e "
           "f16 %.2e bf16 %.2e (seed %llu)\n",
           total, ncases, emul ? "amx(emul)" : sw_cpu_isa_name(best), fails, worst[0], worst[1],
           worst[2], (unsigned long long)seed);
#if SW_HAVE_EMUL
    long long cnt[4];
    sw_amx_emul_counts(cnt);
    printf("amx(emul): %lld tile configs, %lld tileloadd, %lld tilestored, %lld tdpbf16ps executed\n",
           cnt[0], cnt[1], cnt[2], cnt[3]);
#endif
    return fails;
}

/* FLOPs by the reporting convention: 4 * q_len * kv_eff * d * Hq per request */
static double sw_attn_flops_local(const sw_attn_problem *pb)
{
    double f = 0;
    for (int b = 0; b < pb->batch; b++) {
        int32_t ql = pb->qo_indptr[b + 1] - pb->qo_indptr[b];
        int32_t kl = pb->kv_indptr[b + 1] - pb->kv_indptr[b];
        double vis = 0;
        for (int t = 0; t < ql; t++)
            vis += sw_visible_keys(t, ql, kl, pb->causal);
        f += 4.0 * vis * pb->head_dim * pb->num_qo_heads;
    }
    return f;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#if defined(__x86_64__)
/* bench/dev/cpu_fast_amx_v1.c: the previous AMX kernel, timed as "amx-v1" */
void sw_cpu_unit_amx_v1(const sw_attn_problem *pb, const sw_cpu_unit *u, const sw_cpu_scratch *s);
void sw_cpu_amx_pack_v1(const sw_attn_problem *pb, int32_t req, int32_t kvh, uint16_t *kt,
                        uint16_t *vp);
static const sw_cpu_kernel perf_old[1] = {{sw_cpu_unit_amx_v1, sw_cpu_amx_pack_v1}};
#else
static const sw_cpu_kernel perf_old[1] = {{sw_cpu_unit_scalar, NULL}};
#endif
static const char *const perf_old_name[1] = {"amx-v1"};

typedef struct perf_shape {
    const char *name;
    int batch;
    int32_t lens[32]; /* q_len = kv_len per request */
    int hq, hkv, d, causal;
} perf_shape;

/* --shapes report: the four reporting shapes (1 x 2048). --shapes bench: the
 * bench/prefill.py --cpu cases (lengths x 0.125) where v0 or v1 trailed torch
 * on the Xeon (docs/perf/prefill.md). amx_keys 0: keys per AMX
 * tile chosen per unit (the library default). */
static const perf_shape perf_report[] = {
    {"1x2048", 1, {2048}, 16, 2, 256, 1},
    {"1x2048", 1, {2048}, 32, 8, 128, 1},
    {"1x2048", 1, {2048}, 32, 32, 128, 1},
    {"1x2048", 1, {2048}, 16, 2, 256, 0},
};
static const perf_shape perf_bench[] = {
    {"16x128", 16, {128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128},
     16, 2, 256, 1},
    {"16x128", 16, {128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128},
     32, 8, 128, 1},
    {"4x512", 4, {512, 512, 512, 512}, 32, 8, 128, 1},
    {"1x2048", 1, {2048}, 16, 2, 256, 1},
    {"1x2048", 1, {2048}, 32, 8, 128, 1},
    {"mix-a@0.125", 10, {1024, 375, 188, 150, 100, 75, 50, 38, 25, 12}, 16, 2, 256, 1},
    {"16x128", 16, {128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128},
     32, 8, 64, 1},
    {"mix-a@0.125", 10, {1024, 375, 188, 150, 100, 75, 50, 38, 25, 12}, 32, 8, 128, 1},
    {"mix-b@0.125", 32, {512, 512, 256, 256, 256, 222, 188, 128, 128, 125, 112, 100, 88, 75, 64, 62,
                         50, 38, 32, 25, 19, 12, 12, 12, 375, 312, 150, 125, 80, 42, 16, 12},
     32, 8, 128, 1},
};

static void run_perf(int threads, int reps, int isa_min, int bench_shapes, FILE *json)
{
    const perf_shape *shapes = bench_shapes ? perf_bench : perf_report;
    const size_t nshapes = bench_shapes ? sizeof perf_bench / sizeof perf_bench[0]
                                        : sizeof perf_report / sizeof perf_report[0];
    sw_cpu_isa best = sw_cpu_isa_best();
    /* the library's ISAs, then amx-v1 where AMX runs */
    const int nvar = (int)best + 1 + (best == SW_CPU_ISA_AMX ? 1 : 0);
    double *ts = malloc(sizeof(double) * (reps > 0 ? reps : 1));
    int first = 1;
    if (json)
        fprintf(json, "{\"driver\": \"bench/dev/cpu_fast_check\", \"threads\": %d, \"reps\": %d, "
                      "\"amx_keys\": %d, \"results\": [\n", threads, reps, sw_cpu_amx_nkeys);
    for (size_t si = 0; si < nshapes; si++) {
        const perf_shape *sh = &shapes[si];
        problem p;
        rng_state = 12345 + si;
        problem_make(&p, SW_DTYPE_BF16, sh->batch, sh->lens, sh->lens, sh->hq, sh->hkv, sh->d,
                     sh->causal, 0);
        double flops = sw_attn_flops_local(&p.pb);
        for (int v = isa_min; v < nvar; v++) {
            const char *iname =
                v <= (int)best ? sw_cpu_isa_name((sw_cpu_isa)v) : perf_old_name[v - best - 1];
#define RUN_ONCE()                                                                      \
    (v <= (int)best ? sw_cpu_prefill_fast_isa(&p.pb, threads, (sw_cpu_isa)v)             \
                    : sw_cpu_prefill_fast_kernel(&p.pb, threads, &perf_old[v - best - 1]))
            RUN_ONCE(); /* warm-up */
            for (int r = 0; r < reps; r++) {
                double t0 = now_s();
                RUN_ONCE();
                ts[r] = now_s() - t0;
            }
#undef RUN_ONCE
            qsort(ts, (size_t)reps, sizeof *ts, cmp_double);
            double med = ts[reps / 2], mn = ts[0];
            printf("perf bf16 %-11s hq%d hkv%d d%d %s isa %-10s threads %d amx_keys %d: median "
                   "%8.3f ms %6.1f GFLOP/s (best %6.1f, %d runs)\n",
                   sh->name, sh->hq, sh->hkv, sh->d, sh->causal ? "causal" : "full", iname,
                   threads, sw_cpu_amx_nkeys, med * 1e3, flops / med * 1e-9, flops / mn * 1e-9,
                   reps);
            fflush(stdout);
            if (json) {
                fprintf(json, "%s  {\"impl\": \"spillway-cpu-%s\", \"dtype\": \"bf16\", "
                              "\"shape\": \"%s\", \"hq\": %d, \"hkv\": %d, \"d\": %d, "
                              "\"causal\": %d, \"median_ms\": %.4f, \"gflops_median\": %.2f, "
                              "\"gflops_best\": %.2f}",
                        first ? "" : ",\n", iname, sh->name, sh->hq, sh->hkv, sh->d, sh->causal,
                        med * 1e3, flops / med * 1e-9, flops / mn * 1e-9);
                first = 0;
            }
        }
        problem_free(&p);
    }
    if (json)
        fprintf(json, "\n]}\n");
    free(ts);
}

int main(int argc, char **argv)
{
    int ncases = 300, threads = 2, reps = 5, perf_only = 0, check_only = 0, isa_min = 0;
    int bench_shapes = 0;
    uint64_t seed = 1;
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            ncases = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--isa-min") && i + 1 < argc)
            isa_min = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *t = argv[++i];
            opt_dtype = !strcmp(t, "f32") ? SW_DTYPE_F32 : !strcmp(t, "f16") ? SW_DTYPE_F16
                      : !strcmp(t, "bf16") ? SW_DTYPE_BF16 : -2;
            if (opt_dtype == -2) {
                fprintf(stderr, "--dtype: f32, f16 or bf16\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--qamp") && i + 1 < argc)
            opt_qamp = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--amx-keys") && i + 1 < argc) {
            const int k = atoi(argv[++i]);
            if (k < 32 || k > SW_CPU_AMX_NKEYS_MAX || k % 32) {
                fprintf(stderr, "cpu_fast_check: --amx-keys wants 32..%d, a multiple of 32\n",
                        SW_CPU_AMX_NKEYS_MAX);
                return 2;
            }
            sw_cpu_amx_nkeys = k;
        } else if (!strcmp(argv[i], "--emul-only"))
            opt_emul_only = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
            bench_shapes = !strcmp(argv[++i], "bench");
        else if (!strcmp(argv[i], "--perf-only"))
            perf_only = 1;
        else if (!strcmp(argv[i], "--check-only"))
            check_only = 1;
        else {
            fprintf(stderr, "usage: %s [--cases N] [--seed S] [--threads T] [--reps R] "
                            "[--isa-min I] [--dtype T] [--emul-only] [--shapes report|bench] [--json FILE] "
                            "[--perf-only|--check-only]\n", argv[0]);
            return 2;
        }
    }
    printf("cpu fast path: best ISA %s, chosen %s; AMX %s%s\n", sw_cpu_isa_name(sw_cpu_isa_best()),
           sw_cpu_prefill_isa(),
           sw_cpu_isa_best() == SW_CPU_ISA_AMX ? "available (library ISA amx)" : "not available",
           SW_HAVE_EMUL ? "; emulated AMX kernel checked as amx(emul)" : "");
    if (opt_emul_only && !SW_HAVE_EMUL) {
        fprintf(stderr, "--emul-only: this build has no emulated AMX (use cpu_fast_check_emul)\n");
        return 2;
    }
    int fails = 0;
    if (!perf_only)
        fails = run_random(ncases, seed, threads, isa_min);
    if (!check_only) {
        FILE *json = json_path ? fopen(json_path, "w") : NULL;
        run_perf(threads, reps, isa_min, bench_shapes, json);
        if (json)
            fclose(json);
    }
    return fails ? 1 : 0;
}
