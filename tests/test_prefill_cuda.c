/* The CUDA prefill path against the fp64 reference: the same seeded family as
 * the CPU test (BF16 and FP16), plus longer ragged cases checked on sampled
 * rows, plan reuse across "layers", a non-default stream, workspace and
 * alignment refusals. Exit 77 (skipped) without a usable GPU. */
#include "sw_test.h"

#include "core/sw_core.h"

#include <string.h>

#ifndef SPILLWAY_HAVE_CUDA
int main(void)
{
    printf("test_prefill_cuda: skipped (built without CUDA)\n");
    return SW_TEST_SKIP;
}
#else
#include <cuda_runtime_api.h>

#define CUDA_OK(x)                                                                         \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

typedef struct dev_case {
    void *q, *k, *v, *o, *ws;
    float *lse;
    size_t ws_bytes;
} dev_case;

static size_t bytes_of(const sw_case *c, int64_t rows, int64_t stride)
{
    return (size_t)(rows * stride) * sw_dtype_size(c->params.dtype) + 64;
}

static void upload(const sw_case *c, dev_case *d)
{
    CUDA_OK(cudaMalloc(&d->q, bytes_of(c, c->total_q, c->q_stride)));
    CUDA_OK(cudaMalloc(&d->o, bytes_of(c, c->total_q, c->o_stride)));
    CUDA_OK(cudaMalloc(&d->k, bytes_of(c, c->total_kv, c->k_stride)));
    CUDA_OK(cudaMalloc(&d->v, bytes_of(c, c->total_kv, c->v_stride)));
    CUDA_OK(cudaMalloc((void **)&d->lse, (size_t)c->total_q * c->params.num_qo_heads * 4 + 64));
    CUDA_OK(cudaMemcpy(d->q, c->q, bytes_of(c, c->total_q, c->q_stride) - 64, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->k, c->k, bytes_of(c, c->total_kv, c->k_stride) - 64, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->v, c->v, bytes_of(c, c->total_kv, c->v_stride) - 64, cudaMemcpyHostToDevice));
    d->ws = NULL;
    d->ws_bytes = 0;
}

static void release(dev_case *d)
{
    cudaFree(d->q); cudaFree(d->k); cudaFree(d->v); cudaFree(d->o); cudaFree(d->lse);
    cudaFree(d->ws);
}

static sw_prefill_tensors tensors_of(const sw_case *c, const dev_case *d)
{
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = d->q; t.k = d->k; t.v = d->v; t.o = d->o; t.lse = d->lse;
    t.q_rows = c->total_q; t.kv_rows = c->total_kv;
    t.q_row_stride = c->q_stride; t.k_row_stride = c->k_stride;
    t.v_row_stride = c->v_stride; t.o_row_stride = c->o_stride;
    t.workspace = d->ws; t.workspace_bytes = d->ws_bytes;
    return t;
}

/* Runs the case on the GPU `layers` times with one plan (fresh poison each
 * time) and checks the last result. */
static int run_case(sw_case *c, int row_sample, cudaStream_t st, int layers, sw_backend backend)
{
    dev_case d;
    upload(c, &d);
    c->params.backend = backend;
    sw_prefill_plan *pl = NULL;
    sw_status s = sw_prefill_plan_create(&c->params, c->batch, c->qo_indptr, c->kv_indptr, &pl);
    if (s != SW_OK) {
        fprintf(stderr, "FAIL %s [%s]: plan: %s %s\n", c->name, sw_backend_name(backend),
                sw_status_str(s), sw_last_error());
        release(&d);
        return 1;
    }
    d.ws_bytes = sw_prefill_plan_workspace_size(pl);
    if (d.ws_bytes)
        CUDA_OK(cudaMalloc(&d.ws, d.ws_bytes));
    sw_prefill_tensors t = tensors_of(c, &d);
    for (int l = 0; l < layers && s == SW_OK; l++) {
        CUDA_OK(cudaMemsetAsync(d.o, 0xff, bytes_of(c, c->total_q, c->o_stride) - 64, st));
        CUDA_OK(cudaMemsetAsync(d.lse, 0xff, (size_t)c->total_q * c->params.num_qo_heads * 4, st));
        s = sw_prefill_run(pl, &t, st);
    }
    cudaError_t e = cudaStreamSynchronize(st);
    sw_prefill_plan_destroy(pl);
    if (s != SW_OK || e != cudaSuccess) {
        fprintf(stderr, "FAIL %s [%s]: run: %s %s / %s\n", c->name, sw_backend_name(backend),
                sw_status_str(s), sw_last_error(), cudaGetErrorString(e));
        release(&d);
        if (e != cudaSuccess)
            exit(1); /* a sticky error poisons the context: stop here */
        return 1;
    }
    CUDA_OK(cudaMemcpy(c->o, d.o, bytes_of(c, c->total_q, c->o_stride) - 64, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(c->lse, d.lse, (size_t)c->total_q * c->params.num_qo_heads * 4,
                       cudaMemcpyDeviceToHost));
    release(&d);
    sw_check ck = sw_case_check(c, row_sample);
    int bad = ck.rel_l2 > 1e-2 || ck.unwritten || ck.lse_bad || ck.lse_max_abs > 2e-2;
    if (bad || getenv("SPILLWAY_TEST_VERBOSE"))
        fprintf(stderr, "%s %s: rel_l2=%.3g unwritten=%lld lse_bad=%lld lse_err=%.3g\n",
                bad ? "FAIL" : "ok", c->name, ck.rel_l2, (long long)ck.unwritten,
                (long long)ck.lse_bad, ck.lse_max_abs);
    return bad;
}

static void check_refusals(cudaStream_t st)
{
    sw_case c;
    sw_case_make(&c, 99, 0, SW_DTYPE_BF16, 64);
    c.params.backend = SW_BACKEND_CUDA;
    dev_case d;
    upload(&c, &d);
    sw_prefill_plan *pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create(&c.params, c.batch, c.qo_indptr, c.kv_indptr, &pl), SW_OK);
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

int main(void)
{
    if (sw_cuda_device_count() == 0) {
        printf("test_prefill_cuda: skipped (no usable CUDA device)\n");
        return SW_TEST_SKIP;
    }
    const uint64_t seed = (uint64_t)sw_env_int("SPILLWAY_TEST_SEED", 20261129);
    const int ncases = (int)sw_env_int("SPILLWAY_TEST_CASES", 100);
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
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
    for (int bi = 0; bi < nb; bi++) {
        int f0 = failed, n0 = total;
        for (int di = 0; di < 2; di++)
            for (int i = 0; i < ncases; i++) {
                sw_case c;
                sw_case_make(&c, seed + (uint64_t)di, i, dts[di], 160); /* same family as CPU */
                failed += run_case(&c, 1, st, i % 10 == 0 ? 3 : 1, backends[bi]);
                total++;
                sw_case_free(&c);
            }
        /* Longer ragged batches: several tiles per request, the persistent
         * loop, causal skipping; sampled rows keep the fp64 reference
         * affordable. */
        for (int di = 0; di < 2; di++)
            for (int i = 0; i < 24; i++) {
                sw_case c;
                sw_case_make(&c, seed + 100 + (uint64_t)di, i, dts[di], 2500);
                failed += run_case(&c, 29, st, 1, backends[bi]);
                total++;
                sw_case_free(&c);
            }
        printf("test_prefill_cuda: %s: %d cases, %d failed\n", sw_backend_name(backends[bi]),
               total - n0, failed - f0);
    }
    cudaStreamDestroy(st);
    printf("test_prefill_cuda: %d cases (seed %llu), %d failed, %.1f s\n", total,
           (unsigned long long)seed, failed, sw_now_seconds() - t0);
    return failed || sw_test_failures ? 1 : 0;
}
#endif
