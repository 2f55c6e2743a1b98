/* The CUDA prefill path against the fp64 reference: the same seeded family as
 * the CPU test (BF16 and FP16), plus longer ragged cases checked on sampled
 * rows, plan reuse across "layers", a non-default stream, workspace and
 * alignment refusals. Exit 77 (skipped) without a usable GPU. */
#include "sw_test.h"

#include "core/sw_core.h"
#include "core/sw_half.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#ifndef SW_HAVE_CUDA
int main(void)
{
    printf("test_prefill_cuda: skipped (built without CUDA)\n");
    return SW_TEST_SKIP;
}
#else
#include "sw_test_cuda.h"

static int run_case(sw_case *c, int row_sample, cudaStream_t st, int layers, sw_backend backend)
{
    return sw_cuda_case_run(c, row_sample, st, layers, backend, NULL);
}

/* A NaN in one key's K (the middle, the first: rows that see it alone, or
 * the last) or in one query row makes NaN exactly the rows that see it
 * (output and LSE), as in the fp64 reference, PyTorch and the CPU kernels;
 * every other row stays finite (zeros and -inf where it sees no key). An
 * epilogue's "no key" test (sum > 0) once took a NaN row to zeros and an
 * LSE of -inf. 24 random cases a backend (head_dim 64/128/256, GQA, causal
 * or not, BF16 and FP16), O and LSE poisoned with finite values: their
 * count. */
static int check_nan_key(cudaStream_t st, sw_backend backend, int *bad)
{
    int n = 0;
    for (int i = 0; i < 24; i++) {
        sw_case c;
        sw_case_make(&c, 777001, i, i % 2 ? SW_DTYPE_F16 : SW_DTYPE_BF16, i < 20 ? 300 : 2500);
        sw_nan_at at;
        if (sw_case_nan_put(&c, (i / 2) % 4, &at)) {
            n++;
            if (sw_cuda_case_exec(&c, st, 1, backend, NULL, 0x3c, 12345.0f) ||
                sw_case_nan_check(&c, &at, 12345.0f, sw_backend_name(backend)))
                (*bad)++;
        }
        sw_case_free(&c);
    }
    return n;
}

/* A request's result depends on its own rows only: request 1's K rows are NaN
 * and its V rows +inf, request 0's kv_len is not a multiple of any tile, so
 * every kernel loads some of request 1's rows into request 0's last tile
 * (TMA and cp.async load whole tiles). Masked scores must be replaced, not
 * multiplied, and those V rows must not meet a zero probability (0 * inf =
 * NaN). Request 0's rows are compared with the CPU reference run on request 0
 * alone; request 1's own rows are not checked (NaN in, NaN out). */
static int check_isolation(cudaStream_t st, sw_backend backend)
{
    int bad = 0;
    const int32_t qo[3] = {0, 37, 42}, kv[3] = {0, 77, 207};
    const int32_t hq = 4, hkv = 2;
    for (int di = 0; di < 3; di++)
        for (int causal = 0; causal < 2; causal++) {
            const int32_t d = 64 << di;
            const int64_t nq = (int64_t)qo[2] * hq * d, nk = (int64_t)kv[2] * hkv * d;
            const int64_t nq0 = (int64_t)qo[1] * hq * d, nk0 = (int64_t)kv[1] * hkv * d;
            uint16_t *q = malloc((size_t)nq * 2), *k = malloc((size_t)nk * 2);
            uint16_t *v = malloc((size_t)nk * 2), *o = malloc((size_t)nq * 2);
            uint16_t *ref = malloc((size_t)nq0 * 2);
            float *lse = malloc((size_t)qo[2] * hq * 4), *lse_ref = malloc((size_t)qo[1] * hq * 4);
            sw_rng r = {0x150a7e0ull + (uint64_t)(di * 2 + causal)};
            for (int64_t i = 0; i < nq; i++)
                q[i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
            for (int64_t i = 0; i < nk; i++) {
                k[i] = i < nk0 ? sw_f32_to_bf16((float)sw_rng_normal(&r)) : 0x7fc0; /* NaN */
                v[i] = i < nk0 ? sw_f32_to_bf16((float)sw_rng_normal(&r)) : 0x7f80; /* +inf */
            }
            sw_prefill_params p;
            sw_prefill_params_init(&p);
            p.dtype = SW_DTYPE_BF16;
            p.num_qo_heads = hq;
            p.num_kv_heads = hkv;
            p.head_dim = d;
            p.causal = causal;
            /* the reference: request 0 alone, on the CPU */
            sw_prefill_params pr = p;
            pr.backend = SW_BACKEND_CPU_REF;
            sw_prefill_tensors tr;
            sw_prefill_tensors_init(&tr);
            tr.q = q;
            tr.k = k;
            tr.v = v;
            tr.o = ref;
            tr.lse = lse_ref;
            tr.q_rows = qo[1];
            tr.kv_rows = kv[1];
            CHECK_STATUS(sw_prefill_host(&pr, 1, qo, kv, &tr), SW_OK);
            /* the kernel: both requests */
            void *dq, *dk, *dv, *dout, *dws = NULL;
            float *dlse;
            CUDA_OK(cudaMalloc(&dq, (size_t)nq * 2));
            CUDA_OK(cudaMalloc(&dk, (size_t)nk * 2));
            CUDA_OK(cudaMalloc(&dv, (size_t)nk * 2));
            CUDA_OK(cudaMalloc(&dout, (size_t)nq * 2));
            CUDA_OK(cudaMalloc((void **)&dlse, (size_t)qo[2] * hq * 4));
            /* on `st`, like the run (sw_test_cuda.h's upload says why) */
            CUDA_OK(cudaMemcpyAsync(dq, q, (size_t)nq * 2, cudaMemcpyHostToDevice, st));
            CUDA_OK(cudaMemcpyAsync(dk, k, (size_t)nk * 2, cudaMemcpyHostToDevice, st));
            CUDA_OK(cudaMemcpyAsync(dv, v, (size_t)nk * 2, cudaMemcpyHostToDevice, st));
            p.backend = backend;
            sw_prefill_plan *pl = NULL;
            sw_status s = sw_prefill_plan_create(&p, 2, qo, kv, &pl);
            if (s == SW_OK && sw_prefill_plan_workspace_size(pl))
                CUDA_OK(cudaMalloc(&dws, sw_prefill_plan_workspace_size(pl)));
            if (s == SW_OK) {
                sw_prefill_tensors t;
                sw_prefill_tensors_init(&t);
                t.q = dq;
                t.k = dk;
                t.v = dv;
                t.o = dout;
                t.lse = dlse;
                t.q_rows = qo[2];
                t.kv_rows = kv[2];
                t.workspace = dws;
                t.workspace_bytes = sw_prefill_plan_workspace_size(pl);
                s = sw_prefill_run(pl, &t, st);
            }
            CUDA_OK(cudaStreamSynchronize(st));
            sw_prefill_plan_destroy(pl);
            double num = 0, den = 0, lse_err = 0;
            int nonfinite = 0;
            if (s == SW_OK) {
                CUDA_OK(cudaMemcpy(o, dout, (size_t)nq * 2, cudaMemcpyDeviceToHost));
                CUDA_OK(cudaMemcpy(lse, dlse, (size_t)qo[2] * hq * 4, cudaMemcpyDeviceToHost));
                for (int64_t i = 0; i < nq0; i++) {
                    const double a = sw_bf16_to_f32(o[i]), b = sw_bf16_to_f32(ref[i]);
                    if (!isfinite(a))
                        nonfinite++;
                    num += (a - b) * (a - b);
                    den += b * b;
                }
                for (int64_t i = 0; i < (int64_t)qo[1] * hq; i++) {
                    const double e = fabs((double)lse[i] - lse_ref[i]);
                    lse_err = isfinite(e) ? (e > lse_err ? e : lse_err) : 1e30;
                }
            }
            const double rel = den > 0 ? sqrt(num / den) : 0;
            const int fail = s != SW_OK || nonfinite || !(rel <= 1e-2) || !(lse_err <= 2e-2);
            if (fail)
                fprintf(stderr, "FAIL isolation [%s] d%d %s: %s %s, request 0: %d non-finite, "
                        "rel_l2 %.3g, lse err %.3g\n", sw_backend_name(backend), (int)d,
                        causal ? "causal" : "full", sw_status_str(s),
                        s == SW_OK ? "" : sw_last_error(), nonfinite, rel, lse_err);
            bad += fail;
            cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dlse); cudaFree(dws);
            free(q); free(k); free(v); free(o); free(ref); free(lse); free(lse_ref);
        }
    return bad;
}

/* workspace_tag: two plans over the same 200 rows (one request, and two
 * ragged ones) share a tagged workspace. A plan run again on it skips its
 * upload, so each run must leave the scheduler counter at 0 (else the next
 * run claims nothing and the poisoned output stays); a switch of plan
 * uploads; a run captured into a graph marks the workspace, whose replays
 * rewrite it behind the library's back (the eager plan after a replay
 * must upload again); workspaces carved from one buffer at two addresses
 * (a run over one takes the other's blob away); a new tag after the bytes
 * were scrambled uploads. */
static int check_workspace_tag(cudaStream_t st, sw_backend backend)
{
    const int32_t hq = 4, hkv = 2, d = 128, rows = 200;
    const int32_t qa[2] = {0, 200}, qb[3] = {0, 64, 200}, kb[3] = {0, 90, 200};
    const int64_t nq = (int64_t)rows * hq * d, nk = (int64_t)rows * hkv * d;
    uint16_t *q = malloc((size_t)nq * 2), *k = malloc((size_t)nk * 2), *v = malloc((size_t)nk * 2);
    uint16_t *o = malloc((size_t)nq * 2), *ref[2] = {malloc((size_t)nq * 2), malloc((size_t)nq * 2)};
    sw_rng r = {0x7a9ull};
    for (int64_t i = 0; i < nq; i++)
        q[i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
    for (int64_t i = 0; i < nk; i++) {
        k[i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
        v[i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
    }
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_BF16;
    p.num_qo_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = d;
    p.causal = 1;
    for (int i = 0; i < 2; i++) {
        sw_prefill_params pr = p;
        pr.backend = SW_BACKEND_CPU_REF;
        sw_prefill_tensors tr;
        sw_prefill_tensors_init(&tr);
        tr.q = q;
        tr.k = k;
        tr.v = v;
        tr.o = ref[i];
        tr.q_rows = tr.kv_rows = rows;
        CHECK_STATUS(sw_prefill_host(&pr, i ? 2 : 1, i ? qb : qa, i ? kb : qa, &tr), SW_OK);
    }
    p.backend = backend;
    sw_prefill_plan *pl[2] = {NULL, NULL};
    CHECK_STATUS(sw_prefill_plan_create(&p, 1, qa, qa, &pl[0]), SW_OK);
    CHECK_STATUS(sw_prefill_plan_create(&p, 2, qb, kb, &pl[1]), SW_OK);
    if (!pl[0] || !pl[1]) {
        sw_prefill_plan_destroy(pl[0]);
        sw_prefill_plan_destroy(pl[1]);
        free(q); free(k); free(v); free(o); free(ref[0]); free(ref[1]);
        return 1;
    }
    size_t wsb = sw_prefill_plan_workspace_size(pl[0]);
    if (sw_prefill_plan_workspace_size(pl[1]) > wsb)
        wsb = sw_prefill_plan_workspace_size(pl[1]);
    void *dq, *dk, *dv, *dout, *dws;
    CUDA_OK(cudaMalloc(&dq, (size_t)nq * 2));
    CUDA_OK(cudaMalloc(&dk, (size_t)nk * 2));
    CUDA_OK(cudaMalloc(&dv, (size_t)nk * 2));
    CUDA_OK(cudaMalloc(&dout, (size_t)nq * 2));
    CUDA_OK(cudaMalloc(&dws, wsb + 512));
    CUDA_OK(cudaMemcpyAsync(dq, q, (size_t)nq * 2, cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaMemcpyAsync(dk, k, (size_t)nk * 2, cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaMemcpyAsync(dv, v, (size_t)nk * 2, cudaMemcpyHostToDevice, st));
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = dq;
    t.k = dk;
    t.v = dv;
    t.o = dout;
    t.q_rows = t.kv_rows = rows;
    t.workspace = dws;
    t.workspace_bytes = wsb;
    t.workspace_tag = 0x5eed;
    int bad = 0, step = 0;
    /* which plan's output dout must hold, after a poisoned output (0xffff:
     * NaN) and the step's work */
#define TAG_CHECK(which, what)                                                                   \
    do {                                                                                         \
        CUDA_OK(cudaStreamSynchronize(st));                                                      \
        CUDA_OK(cudaMemcpy(o, dout, (size_t)nq * 2, cudaMemcpyDeviceToHost));                    \
        double num = 0, den = 0;                                                                 \
        int nonfinite = 0;                                                                       \
        const uint16_t *want = ref[which];                                                       \
        for (int64_t e = 0; e < nq; e++) {                                                       \
            const double a = sw_bf16_to_f32(o[e]), b = sw_bf16_to_f32(want[e]);                  \
            nonfinite += !isfinite(a);                                                           \
            num += (a - b) * (a - b);                                                            \
            den += b * b;                                                                        \
        }                                                                                        \
        const double rel = sqrt(num / den);                                                      \
        if (nonfinite || !(rel <= 1e-2)) {                                                       \
            fprintf(stderr, "FAIL workspace_tag [%s] step %d (%s): %d non-finite, rel_l2 %.3g\n", \
                    sw_backend_name(backend), step, what, nonfinite, rel);                      \
            bad++;                                                                               \
        }                                                                                        \
        step++;                                                                                  \
    } while (0)
    static const int seq[7] = {0, 0, 0, 1, 0, 1, 1};
    for (int i = 0; i < 7; i++) {
        CUDA_OK(cudaMemsetAsync(dout, 0xff, (size_t)nq * 2, st));
        CHECK_STATUS(sw_prefill_run(pl[seq[i]], &t, st), SW_OK);
        TAG_CHECK(seq[i], "eager");
    }
    /* plan 0 captured; plan 1 eager between replays */
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    const sw_status cs = sw_prefill_run(pl[0], &t, st);
    CUDA_OK(cudaStreamEndCapture(st, &g));
    CHECK_STATUS(cs, SW_OK);
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 2; rep++) {
        CUDA_OK(cudaMemsetAsync(dout, 0xff, (size_t)nq * 2, st));
        CHECK_STATUS(sw_prefill_run(pl[1], &t, st), SW_OK);
        TAG_CHECK(1, "eager before a replay");
        CUDA_OK(cudaMemsetAsync(dout, 0xff, (size_t)nq * 2, st));
        CUDA_OK(cudaGraphLaunch(ge, st));
        TAG_CHECK(0, "replay");
        CUDA_OK(cudaMemsetAsync(dout, 0xff, (size_t)nq * 2, st));
        CHECK_STATUS(sw_prefill_run(pl[1], &t, st), SW_OK);
        TAG_CHECK(1, "eager after a replay");
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    /* workspaces carved from one buffer: plan 0 at +256, plan 1 at +0 over
     * plan 0's blob; plan 0 again at +256 must upload */
    t.workspace_tag = 0x5eef;
    static const int carve[5] = {0, 0, 1, 0, 0};
    for (int i = 0; i < 5; i++) {
        t.workspace = (char *)dws + (carve[i] ? 0 : 256);
        t.workspace_bytes = wsb;
        CUDA_OK(cudaMemsetAsync(dout, 0xff, (size_t)nq * 2, st));
        CHECK_STATUS(sw_prefill_run(pl[carve[i]], &t, st), SW_OK);
        TAG_CHECK(carve[i], "overlapping workspaces");
    }
    t.workspace = dws;
    t.workspace_bytes = wsb;
    /* a new allocation (scrambled bytes) under a new tag, then untagged */
    for (int i = 0; i < 2; i++) {
        CUDA_OK(cudaMemsetAsync(dws, 0x5a, wsb, st));
        t.workspace_tag = i ? 0 : 0x5eee;
        for (int rep = 0; rep < 2; rep++) {
            CUDA_OK(cudaMemsetAsync(dout, 0xff, (size_t)nq * 2, st));
            CHECK_STATUS(sw_prefill_run(pl[1], &t, st), SW_OK);
            TAG_CHECK(1, i ? "untagged" : "new tag");
        }
    }
#undef TAG_CHECK
    sw_prefill_plan_destroy(pl[0]);
    sw_prefill_plan_destroy(pl[1]);
    cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dws);
    free(q); free(k); free(v); free(o); free(ref[0]); free(ref[1]);
    return bad;
}

static void check_refusals(cudaStream_t st)
{
    sw_case c;
    sw_case_make(&c, 99, 0, SW_DTYPE_BF16, 64);
    c.params.backend = SW_BACKEND_CUDA;
    dev_case d;
    upload(&c, &d, st);
    sw_prefill_plan *pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create(&c.params, c.batch, c.qo_indptr, c.kv_indptr, &pl), SW_OK);
    /* (a CUDA plan's tables go up into its workspace: never empty, so the
     * refusals below always run) */
    CHECK(pl && sw_prefill_plan_workspace_size(pl) > 0);
    if (pl && sw_prefill_plan_workspace_size(pl) > 0) {
        sw_prefill_tensors t = tensors_of(&c, &d);
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_STATUS_WORKSPACE_TOO_SMALL);
        CUDA_OK(cudaMalloc(&d.ws, sw_prefill_plan_workspace_size(pl)));
        t = tensors_of(&c, &d);
        t.workspace_bytes = sw_prefill_plan_workspace_size(pl) - 1;
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_STATUS_WORKSPACE_TOO_SMALL);
        t.workspace_bytes = sw_prefill_plan_workspace_size(pl);
        t.q = (const char *)d.q + 2; /* element-aligned but not 16-byte aligned */
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_STATUS_MISALIGNED);
        t = tensors_of(&c, &d);
        t.workspace_bytes = sw_prefill_plan_workspace_size(pl);
        t.k_row_stride = c.k_stride + 4; /* not a multiple of 8 elements */
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_STATUS_MISALIGNED);
        t = tensors_of(&c, &d);
        t.workspace_bytes = sw_prefill_plan_workspace_size(pl);
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_OK);
        CUDA_OK(cudaStreamSynchronize(st));
    }
    sw_prefill_plan_destroy(pl);
    release(&d);
    sw_case_free(&c);
}

/* One case of a seeded family, run by a worker of the pool. */
typedef struct job {
    uint64_t seed;
    int index, row_sample, layers;
    sw_dtype dtype;
    int32_t max_len;
    int ramp, mix;            /* sw_case_ramp(period, slope, mix) when ramp */
    int32_t period;
    double slope;
} job;

typedef struct pool {
    const job *jobs;
    sw_backend backend;
    int wide_only;            /* only the non-causal d128 cases, wide K/V tiles forced */
    cudaStream_t st[64];
    atomic_int failed, ran;
} pool;

static void pool_job(int j, int w, void *ctx)
{
    pool *p = ctx;
    const job *jb = &p->jobs[j];
    sw_case c;
    sw_case_make(&c, jb->seed, jb->index, jb->dtype, jb->max_len);
    if (jb->ramp)
        sw_case_ramp(&c, jb->period, jb->slope, jb->mix);
    if (!p->wide_only || (c.params.head_dim == 128 && !c.params.causal)) {
        /* wide_only: the Hopper kernel's 144-key K/V tiles, forced */
        sw_prefill_tuning tu;
        sw_prefill_tuning_default(&tu);
        tu.wide_kv = p->wide_only ? 1 : -1;
        atomic_fetch_add(&p->failed, sw_cuda_case_run(&c, jb->row_sample, p->st[w], jb->layers,
                                                    p->backend, &tu));
        atomic_fetch_add(&p->ran, 1);
    }
    sw_case_free(&c);
}

/* `--only bf16|f16 INDEX portable|hopper`: that one case of the short family,
 * three times (for compute-sanitizer's tools, which are too slow for the
 * whole program). */
static int run_only(char **argv, uint64_t seed, cudaStream_t st)
{
    const int f16 = strcmp(argv[2], "f16") == 0;
    const sw_backend b = strcmp(argv[4], "hopper") == 0 ? SW_BACKEND_CUDA_HOPPER
                                                         : SW_BACKEND_CUDA_PORTABLE;
    sw_case c;
    sw_case_make(&c, seed + (uint64_t)f16, atoi(argv[3]), f16 ? SW_DTYPE_F16 : SW_DTYPE_BF16, 160);
    printf("test_prefill_cuda: only %s [%s]\n", c.name, sw_backend_name(b));
    const int bad = run_case(&c, 1, st, 3, b);
    sw_case_free(&c);
    return bad;
}

int main(int argc, char **argv)
{
    if (sw_cuda_device_count() == 0) {
        printf("test_prefill_cuda: skipped (no usable CUDA device)\n");
        return SW_TEST_SKIP;
    }
    const uint64_t seed = (uint64_t)sw_env_int("SW_TEST_SEED", 20261129);
    const int ncases = (int)sw_env_int("SW_TEST_CASES", 100);
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (argc == 5 && strcmp(argv[1], "--only") == 0) {
        const int bad = run_only(argv, seed, st);
        cudaStreamDestroy(st);
        return bad || sw_test_failures ? 1 : 0;
    }
    check_refusals(st);
    int failed = 0, total = 0;
    double t0 = sw_now_seconds();
    const sw_dtype dts[2] = {SW_DTYPE_BF16, SW_DTYPE_F16};
    /* Every CUDA kernel this device can run: the portable one always, the
     * Hopper one on compute capability 9.0 with an sm_90a build (what
     * SW_BACKEND_CUDA picks there). */
    sw_backend backends[2] = {SW_BACKEND_CUDA_PORTABLE, SW_BACKEND_CUDA_HOPPER};
    int nb = 1;
    {
        sw_case c;
        sw_case_make(&c, 98, 0, SW_DTYPE_BF16, 64);
        c.params.backend = SW_BACKEND_CUDA_HOPPER;
        sw_prefill_plan *pl = NULL;
        sw_status hs = sw_prefill_plan_create(&c.params, c.batch, c.qo_indptr, c.kv_indptr, &pl);
        if (hs == SW_OK)
            nb = 2;
        else
            printf("test_prefill_cuda: Hopper kernel not run here: %s (%s)\n", sw_status_str(hs),
                   sw_last_error());
        sw_prefill_plan_destroy(pl);
        sw_case_free(&c);
    }
    /* The families' cases run on a pool of threads, each with its own
     * stream: the CPU-side work (generating a case, the fp64 reference) is
     * most of this program's time. */
    int workers = (int)sw_env_int("SW_TEST_THREADS", sw_cpu_count());
    if (workers < 1)
        workers = 1;
    if (workers > 64)
        workers = 64;
    pool P;
    memset(&P, 0, sizeof P);
    P.st[0] = st;
    for (int w = 1; w < workers; w++)
        CUDA_OK(cudaStreamCreateWithFlags(&P.st[w], cudaStreamNonBlocking));
    /* The short family (every row; every tenth case run three times with one
     * plan: plan reuse across "layers"), then longer ragged batches (several
     * tiles per request, the persistent loop, causal skipping; sampled rows
     * keep the fp64 reference affordable). */
    const int njobs = 2 * ncases + 2 * 24 + 2 * 2 * 16;
    job *jobs = calloc((size_t)njobs + 2 * 2 * 60, sizeof *jobs);
    int nj = 0;
    for (int di = 0; di < 2; di++)
        for (int i = 0; i < ncases; i++)
            jobs[nj++] = (job){.seed = seed + (uint64_t)di, .index = i, .dtype = dts[di],
                               .max_len = 160, .row_sample = 1, .layers = i % 10 == 0 ? 3 : 1};
    for (int di = 0; di < 2; di++)
        for (int i = 0; i < 24; i++)
            jobs[nj++] = (job){.seed = seed + 100 + (uint64_t)di, .index = i, .dtype = dts[di],
                               .max_len = 2500, .row_sample = 29, .layers = 1};
    /* Rising scores (sw_case_ramp): the row maxima grow by more than the
     * max slack from one key tile to the next, so the kernels' rescale
     * paths run on every tile (with random data they almost never do).
     * The second family: a gentler slope (0.055: tiles of 96-128 keys
     * then alternate between kept and refused no-max steps on a steady
     * ramp) and rows of one warp on rising, flat and falling ramps;
     * every row checked. */
    static const struct {
        uint64_t seed;
        int32_t max_len;
        int row_sample, mix;
        double slope01, slope23; /* for i % 4 < 2, else */
    } ramps[2] = {{200, 1500, 13, 0, 0.1, 0.1}, {300, 600, 1, 1, 0.055, 0.1}};
    for (int f = 0; f < 2; f++)
        for (int di = 0; di < 2; di++)
            for (int i = 0; i < 16; i++)
                jobs[nj++] = (job){.seed = seed + ramps[f].seed + (uint64_t)di, .index = i,
                                   .dtype = dts[di], .max_len = ramps[f].max_len,
                                   .row_sample = ramps[f].row_sample, .layers = 1, .ramp = 1,
                                   .period = i % 2 ? 300 : 1 << 30,
                                   .slope = i % 4 < 2 ? ramps[f].slope01 : ramps[f].slope23,
                                   .mix = ramps[f].mix};
    /* Hopper's wide K/V tile kernel (non-causal d128, chosen by the plan for
     * long batches): forced on the non-causal d128 cases of both families,
     * so its partial tiles (lengths not multiples of 144) and q_len !=
     * kv_len are checked whatever the random lengths. */
    job *wide = jobs + nj;
    int nw = 0;
    for (int fam = 0; fam < 2; fam++)
        for (int di = 0; di < 2; di++)
            for (int i = 0; i < 60; i++)
                wide[nw++] = (job){.seed = seed + (fam ? 100 : 0) + (uint64_t)di, .index = i,
                                   .dtype = dts[di], .max_len = fam ? 2500 : 160,
                                   .row_sample = fam ? 29 : 1, .layers = 1};
    for (int bi = 0; bi < nb; bi++) {
        int f0 = failed, n0 = total;
        P.jobs = jobs;
        P.backend = backends[bi];
        P.wide_only = 0;
        atomic_store(&P.failed, 0);
        atomic_store(&P.ran, 0);
        sw_test_pool_run(workers, nj, pool_job, &P);
        failed += atomic_load(&P.failed);
        total += atomic_load(&P.ran);
        failed += check_isolation(st, backends[bi]);
        total += 6;
        total += check_nan_key(st, backends[bi], &failed);
        failed += check_workspace_tag(st, backends[bi]);
        total += 1;
        if (backends[bi] == SW_BACKEND_CUDA_HOPPER) {
            P.jobs = wide;
            P.wide_only = 1;
            atomic_store(&P.failed, 0);
            atomic_store(&P.ran, 0);
            sw_test_pool_run(workers, nw, pool_job, &P);
            failed += atomic_load(&P.failed);
            total += atomic_load(&P.ran);
            CHECK(atomic_load(&P.ran) >= 12); /* the families do hold such cases */
        }
        printf("test_prefill_cuda: %s: %d cases, %d failed\n", sw_backend_name(backends[bi]),
               total - n0, failed - f0);
    }
    for (int w = 1; w < workers; w++)
        cudaStreamDestroy(P.st[w]);
    free(jobs);
    cudaStreamDestroy(st);
    printf("test_prefill_cuda: %d cases (seed %llu), %d failed, %.1f s\n", total,
           (unsigned long long)seed, failed, sw_now_seconds() - t0);
    return failed || sw_test_failures ? 1 : 0;
}
#endif
