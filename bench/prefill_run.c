/* The machinery of spillway-bench-prefill (prefill.c) and part 1 of
 * `spillway demo`: ragged batches of the named benchmark shapes, timed on
 * the chosen backend and checked row by row against the library's fp64
 * reference (SW_BACKEND_CPU_REF) on sampled query rows. The shapes and
 * length sets match bench/prefill.py. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "prefill_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const prefill_shape prefill_shapes[] = {
    {"h16-2/d256", 16, 2, 256},
    {"h32-8/d128", 32, 8, 128},
    {"h32-8/d64", 32, 8, 64},
};
const int prefill_num_shapes = 3;

/* Keep in step with LENGTH_SETS in bench/prefill.py. */
const prefill_lengths prefill_length_sets[] = {
    {"16x1k", 16, {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024,
                   1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}},
    {"4x4k", 4, {4096, 4096, 4096, 4096}},
    {"1x16k", 1, {16384}},
    {"mix-a", 10, {8192, 3000, 1500, 1200, 800, 600, 400, 300, 200, 100}},
    {"mix-b", 32, {4096, 4096, 2048, 2048, 2048, 1777, 1500, 1024, 1024, 1000, 900,
                   800, 700, 600, 513, 500, 400, 300, 257, 200, 150, 100, 100, 100,
                   3000, 2500, 1200, 999, 640, 333, 129, 100}},
};
const int prefill_num_length_sets = 5;

/* ---- bf16 helpers (the bench keeps its own: it uses the public API only) -- */
static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint64_t rng_state = 0x5eed;
static float rnd_normal(void)
{
    /* sum of uniforms: cheap, deterministic, close enough to normal for data */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
        s += (float)((rng_state >> 40) & 0xffffff) / 16777216.0f;
    }
    return (s - 2.0f) * 1.7320508f;
}

typedef struct job {
    const prefill_shape *shape;
    char case_name[96];
    int32_t batch;
    int32_t *indptr; /* q and kv share offsets: q_len = kv_len */
    int64_t total;
    int causal;
    uint16_t *q, *k, *v, *o; /* host */
    float *lse;
    void *dq, *dk, *dv, *dout, *dws; /* device */
    float *dlse;
    sw_prefill_plan *plan;
    sw_backend backend;
} job;

static void die_status(const char *what, sw_status s)
{
    fprintf(stderr, "spillway: %s: %s: %s\n", what, sw_status_str(s), sw_last_error());
    exit(1);
}

/* A failed GPU call (bench/common.c said which) ends the program. */
static void gpu_need(int ok)
{
    if (!ok)
        exit(1);
}

static void job_make(job *j, const prefill_shape *sh, const prefill_lengths *ls, double scale,
                     int causal, sw_backend backend)
{
    memset(j, 0, sizeof *j);
    j->shape = sh;
    j->causal = causal;
    j->batch = ls->n;
    j->indptr = calloc((size_t)ls->n + 1, sizeof(int32_t));
    for (int b = 0; b < ls->n; b++) {
        int32_t l = (int32_t)lround(ls->len[b] * scale);
        j->indptr[b + 1] = j->indptr[b] + (l < 1 ? 1 : l);
    }
    j->total = j->indptr[j->batch];
    snprintf(j->case_name, sizeof j->case_name, "%s%s/%s/%s", ls->name,
             scale != 1.0 ? "(scaled)" : "", sh->name, causal ? "causal" : "full");
    const size_t nq = (size_t)j->total * sh->hq * sh->d, nk = (size_t)j->total * sh->hkv * sh->d;
    j->q = malloc(nq * 2);
    j->o = malloc(nq * 2);
    j->k = malloc(nk * 2);
    j->v = malloc(nk * 2);
    j->lse = malloc((size_t)j->total * sh->hq * sizeof(float));
    if (!j->q || !j->o || !j->k || !j->v || !j->lse) {
        fprintf(stderr, "spillway: out of host memory for %s\n", j->case_name);
        exit(1);
    }
    for (size_t i = 0; i < nq; i++)
        j->q[i] = f2bf(rnd_normal());
    for (size_t i = 0; i < nk; i++) {
        j->k[i] = f2bf(rnd_normal());
        j->v[i] = f2bf(rnd_normal());
    }
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_BF16;
    p.num_qo_heads = sh->hq;
    p.num_kv_heads = sh->hkv;
    p.head_dim = sh->d;
    p.causal = causal;
    p.backend = backend;
    sw_status s = sw_prefill_plan_create(&p, j->batch, j->indptr, j->indptr, &j->plan);
    if (s != SW_OK)
        die_status("plan", s);
    j->backend = sw_prefill_plan_backend(j->plan);
    if (j->backend == SW_BACKEND_CUDA || j->backend == SW_BACKEND_CUDA_PORTABLE ||
        j->backend == SW_BACKEND_CUDA_HOPPER) {
        gpu_need((j->dq = bench_gpu_alloc(nq * 2, "q")) != NULL);
        gpu_need((j->dout = bench_gpu_alloc(nq * 2, "o")) != NULL);
        gpu_need((j->dk = bench_gpu_alloc(nk * 2, "k")) != NULL);
        gpu_need((j->dv = bench_gpu_alloc(nk * 2, "v")) != NULL);
        gpu_need((j->dlse = bench_gpu_alloc((size_t)j->total * sh->hq * sizeof(float), "lse")) !=
                 NULL);
        size_t ws = sw_prefill_plan_workspace_size(j->plan);
        if (ws)
            gpu_need((j->dws = bench_gpu_alloc(ws, "workspace")) != NULL);
        gpu_need(!bench_gpu_copy(j->dq, j->q, nq * 2, NULL, "q upload"));
        gpu_need(!bench_gpu_copy(j->dk, j->k, nk * 2, NULL, "k upload"));
        gpu_need(!bench_gpu_copy(j->dv, j->v, nk * 2, NULL, "v upload"));
        gpu_need(!bench_gpu_fill(j->dout, 0xff, nq * 2, "o poison"));
    }
}

static int job_is_cuda(const job *j)
{
    return j->backend == SW_BACKEND_CUDA || j->backend == SW_BACKEND_CUDA_PORTABLE ||
        j->backend == SW_BACKEND_CUDA_HOPPER;
}

static void job_free(job *j)
{
    sw_prefill_plan_destroy(j->plan);
    bench_gpu_free(j->dq); bench_gpu_free(j->dk); bench_gpu_free(j->dv);
    bench_gpu_free(j->dout); bench_gpu_free(j->dlse); bench_gpu_free(j->dws);
    free(j->indptr); free(j->q); free(j->k); free(j->v); free(j->o); free(j->lse);
}

static sw_status job_run(job *j)
{
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q_rows = t.kv_rows = j->total;
    if (job_is_cuda(j)) {
        t.q = j->dq; t.k = j->dk; t.v = j->dv; t.o = j->dout; t.lse = j->dlse;
        t.workspace = j->dws;
        t.workspace_bytes = sw_prefill_plan_workspace_size(j->plan);
    } else {
        t.q = j->q; t.k = j->k; t.v = j->v; t.o = j->o; t.lse = j->lse;
    }
    return sw_prefill_run(j->plan, &t, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median milliseconds of `reps` runs after `warmup` runs. */
static double job_time(job *j, int warmup, int reps)
{
    double *ms = calloc((size_t)reps, sizeof(double));
    for (int i = 0; i < warmup; i++) {
        sw_status s = job_run(j);
        if (s != SW_OK)
            die_status("run", s);
    }
    if (job_is_cuda(j)) {
        bench_gpu_timer t;
        gpu_need(!bench_gpu_timer_create(&t));
        for (int i = 0; i < reps; i++) {
            bench_gpu_timer_start(&t, NULL);
            sw_status s = job_run(j);
            if (s != SW_OK)
                die_status("run", s);
            ms[i] = bench_gpu_timer_stop_ms(&t, NULL);
            gpu_need(ms[i] >= 0);
        }
        bench_gpu_timer_destroy(&t);
    } else {
        for (int i = 0; i < reps; i++) {
            double t0 = bench_now();
            sw_status s = job_run(j);
            if (s != SW_OK)
                die_status("run", s);
            ms[i] = (bench_now() - t0) * 1e3;
        }
    }
    qsort(ms, (size_t)reps, sizeof(double), cmp_double);
    double med = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    free(ms);
    return med;
}

/* Checks `samples` query rows of each request (first, last, random) across all
 * heads against the reference run on fp32 copies of the visible keys, one row
 * at a time. Returns the largest per-row relative L2 error; counts rows with
 * unwritten (non-finite) output in *bad. */
static double job_check(job *j, int samples, int64_t *bad)
{
    const prefill_shape *sh = j->shape;
    const int d = sh->d;
    const size_t nq = (size_t)j->total * sh->hq * d;
    if (job_is_cuda(j)) {
        gpu_need(!bench_gpu_sync(NULL, "run"));
        gpu_need(!bench_gpu_copy(j->o, j->dout, nq * 2, NULL, "o download"));
    }
    *bad = 0;
    for (size_t i = 0; i < nq; i++)
        if (!isfinite(bf2f(j->o[i])))
            (*bad)++;
    int32_t maxlen = 0;
    for (int b = 0; b < j->batch; b++)
        if (j->indptr[b + 1] - j->indptr[b] > maxlen)
            maxlen = j->indptr[b + 1] - j->indptr[b];
    const size_t rowk = (size_t)sh->hkv * d, rowq = (size_t)sh->hq * d;
    float *kf = malloc((size_t)maxlen * rowk * 4), *vf = malloc((size_t)maxlen * rowk * 4);
    float *qf = malloc(rowq * 4), *of = malloc(rowq * 4);
    double worst = 0;
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_F32;
    p.num_qo_heads = sh->hq;
    p.num_kv_heads = sh->hkv;
    p.head_dim = d;
    p.backend = SW_BACKEND_CPU_REF;
    for (int b = 0; b < j->batch; b++) {
        const int32_t s0 = j->indptr[b], len = j->indptr[b + 1] - s0;
        int32_t rows[16];
        int nr = 0;
        rows[nr++] = 0;
        if (len > 1)
            rows[nr++] = len - 1;
        for (int i = 2; i < samples && nr < 16; i++)
            rows[nr++] = (int32_t)((uint64_t)(i * 2654435761u + (unsigned)b * 40503u) % (uint64_t)len);
        int32_t conv = 0; /* keys converted so far for this request */
        for (int r = 0; r < nr; r++) {
            const int32_t t = rows[r];
            const int32_t nvis = j->causal ? t + 1 : len;
            for (; conv < nvis; conv++)
                for (size_t x = 0; x < rowk; x++) {
                    kf[(size_t)conv * rowk + x] = bf2f(j->k[(size_t)(s0 + conv) * rowk + x]);
                    vf[(size_t)conv * rowk + x] = bf2f(j->v[(size_t)(s0 + conv) * rowk + x]);
                }
            for (size_t x = 0; x < rowq; x++)
                qf[x] = bf2f(j->q[(size_t)(s0 + t) * rowq + x]);
            /* One query row over its visible keys, non-causal: the same set of
             * keys the causal rule gives that row in the full problem. */
            int32_t qo[2] = {0, 1}, kv[2] = {0, nvis};
            sw_prefill_tensors tt;
            sw_prefill_tensors_init(&tt);
            tt.q = qf; tt.k = kf; tt.v = vf; tt.o = of;
            tt.q_rows = 1; tt.kv_rows = nvis;
            sw_status s = sw_prefill_host(&p, 1, qo, kv, &tt);
            if (s != SW_OK)
                die_status("reference", s);
            for (int h = 0; h < sh->hq; h++) {
                double num = 0, den = 0;
                for (int x = 0; x < d; x++) {
                    double got = bf2f(j->o[(size_t)(s0 + t) * rowq + (size_t)h * d + x]);
                    double ref = of[(size_t)h * d + x];
                    num += (got - ref) * (got - ref);
                    den += ref * ref;
                }
                double rel = den > 0 ? sqrt(num / den) : sqrt(num);
                if (!(rel <= worst))
                    worst = rel; /* NaN propagates as the worst */
            }
        }
    }
    free(kf); free(vf); free(qf); free(of);
    return worst;
}

static const char *const shape_names[] = {"h16-2/d256", "h32-8/d128", "h32-8/d64"};
static const char *const case_names[] = {"16x1k", "4x4k", "1x16k", "mix-a", "mix-b"};

int prefill_parse(int argc, char **argv, prefill_opts *o, const char *prog, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cpu")) o->cpu = 1;
        else if (!strcmp(a, "--full")) o->causal = 0;
        else if ((!strcmp(a, "--reps") || !strcmp(a, "--warmup") || !strcmp(a, "--samples")) &&
                 val) {
            int64_t n = 0;
            if (bench_arg_i64(prog, a, val, !strcmp(a, "--warmup") ? 0 : 1, 1000000, "", &n))
                return BENCH_USAGE;
            *(!strcmp(a, "--reps") ? &o->reps : !strcmp(a, "--warmup") ? &o->warmup
                                                                       : &o->samples) = (int)n;
            i++;
        }
        else if (!strcmp(a, "--scale") && val) {
            /* (lengths x scale stay well inside int32: at most 256) */
            char *end = NULL;
            o->scale = strtod(val, &end);
            if (end == val || *end || !(o->scale >= 0 && o->scale <= 256)) {
                fprintf(stderr, "%s: --scale wants a number in [0, 256] (0 = default), not "
                                "'%s'\n", prog, val);
                return BENCH_USAGE;
            }
            i++;
        }
        else if (!strcmp(a, "--cases") && val) { o->cases = val; i++; }
        else if (!strcmp(a, "--shapes") && val) { o->shapes = val; i++; }
        else if (!strcmp(a, "--json") && val) { o->json = val; i++; }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { printf("%s", usage); return -1; }
        else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n%s", prog, a, usage);
            return BENCH_USAGE;
        }
    }
    if (o->reps < 1 || o->warmup < 0 || !(o->scale >= 0) || o->samples < 1) {
        fprintf(stderr, "%s: --reps >= 1, --warmup >= 0, --scale > 0 (0 = default), "
                        "--samples >= 1\n", prog);
        return BENCH_USAGE;
    }
    if (bench_check_list(prog, "case", o->cases, case_names, prefill_num_length_sets) ||
        bench_check_list(prog, "shape", o->shapes, shape_names, prefill_num_shapes))
        return BENCH_USAGE;
    return 0;
}

static const char *impl_name(const job *j)
{
    return job_is_cuda(j) ? "spillway" : "spillway-cpu";
}

int prefill_run(prefill_opts *o, FILE *js)
{
    sw_backend backend = o->cpu ? SW_BACKEND_CPU : SW_BACKEND_AUTO;
    int gpu = !o->cpu && sw_cuda_device_count() > 0;
    if (o->scale == 0)
        o->scale = gpu ? 1.0 : 0.125;
    printf("spillway %s | backend: %s | cpu isa: %s\n", sw_version_string(),
           gpu ? "cuda" : "cpu", sw_prefill_cpu_isa());
    printf("%-34s %-14s %9s %10s %10s %8s\n", "case", "impl", "tokens", "ms", gpu ? "TFLOP/s" : "GFLOP/s",
           "rel_err");
    int failures = 0, first = 1;
    for (int si = 0; si < prefill_num_shapes; si++) {
        if (!bench_in_list(o->shapes, prefill_shapes[si].name))
            continue;
        for (int li = 0; li < prefill_num_length_sets; li++) {
            if (!bench_in_list(o->cases, prefill_length_sets[li].name))
                continue;
            job j;
            job_make(&j, &prefill_shapes[si], &prefill_length_sets[li], o->scale, o->causal,
                     backend);
            double ms = job_time(&j, o->warmup, o->reps);
            int64_t bad = 0;
            double err = job_check(&j, o->samples, &bad);
            double flops = sw_prefill_plan_flops(j.plan);
            double rate = flops / (ms * 1e-3) / (gpu ? 1e12 : 1e9);
            int ok = err <= 1e-2 && bad == 0;
            failures += !ok;
            printf("%-34s %-14s %9lld %10.3f %10.1f %8.1e %s\n", j.case_name, impl_name(&j),
                   (long long)j.total, ms, rate, err, ok ? "ok" : "FAIL");
            if (bad)
                printf("  %lld output elements were not written (or not finite)\n", (long long)bad);
            if (js) {
                fprintf(js, "%s  {\"case\": \"%s\", \"impl\": \"%s\", \"tflops\": %.6g, \"ms\": %.6g, "
                        "\"max_rel_err\": %.3g, \"tokens\": %lld}", first ? "" : ",\n",
                        j.case_name, impl_name(&j), flops / (ms * 1e-3) / 1e12, ms, err,
                        (long long)j.total);
                first = 0;
            }
            fflush(stdout);
            job_free(&j);
        }
    }
    return failures;
}
