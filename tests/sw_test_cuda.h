/* Shared by the C tests that run prefill on a GPU (test_prefill_cuda,
 * test_opponent_flashinfer): a fatal CUDA check, and a generated case's
 * tensors copied to the device. Include only where SW_HAVE_CUDA. */
#ifndef SW_TEST_CUDA_H
#define SW_TEST_CUDA_H

#include "sw_test.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>

/* A failed CUDA call leaves the test nothing to check: report and stop. */
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

/* Bytes of a tensor of `rows` rows at `stride` elements, plus 64 bytes of
 * slack that the copies leave out. */
static inline size_t bytes_of(const sw_case *c, int64_t rows, int64_t stride)
{
    return (size_t)(rows * stride) * sw_dtype_size(c->params.dtype) + 64;
}

/* Q, K, V copied to fresh device buffers; O and LSE allocated; no workspace.
 * The copies are ordered on `st`, the stream the case then runs on, and the
 * stream is synchronised before this returns. A plain cudaMemcpy from
 * pageable memory is NOT enough: it runs on the legacy default stream, which
 * a cudaStreamNonBlocking stream does not wait for, and it may return once
 * the bytes are staged, before the DMA has landed them -- a kernel launched
 * next on `st` could read Q/K/V before they arrive (seen as wrong results
 * only while other processes kept the copy engines busy). */
static inline void upload(const sw_case *c, dev_case *d, cudaStream_t st)
{
    memset(d, 0, sizeof *d);
    CUDA_OK(cudaMalloc(&d->q, bytes_of(c, c->total_q, c->q_stride)));
    CUDA_OK(cudaMalloc(&d->o, bytes_of(c, c->total_q, c->o_stride)));
    CUDA_OK(cudaMalloc(&d->k, bytes_of(c, c->total_kv, c->k_stride)));
    CUDA_OK(cudaMalloc(&d->v, bytes_of(c, c->total_kv, c->v_stride)));
    CUDA_OK(cudaMalloc((void **)&d->lse, (size_t)c->total_q * c->params.num_qo_heads * 4 + 64));
#ifdef SW_TEST_UPLOAD_UNORDERED
    /* bench/dev only: the upload as it was before this function took a
     * stream (to show that test_prefill_stress catches it). */
    (void)st;
    CUDA_OK(cudaMemcpy(d->q, c->q, bytes_of(c, c->total_q, c->q_stride) - 64, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->k, c->k, bytes_of(c, c->total_kv, c->k_stride) - 64, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->v, c->v, bytes_of(c, c->total_kv, c->v_stride) - 64, cudaMemcpyHostToDevice));
#else
    CUDA_OK(cudaMemcpyAsync(d->q, c->q, bytes_of(c, c->total_q, c->q_stride) - 64,
                            cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaMemcpyAsync(d->k, c->k, bytes_of(c, c->total_kv, c->k_stride) - 64,
                            cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaMemcpyAsync(d->v, c->v, bytes_of(c, c->total_kv, c->v_stride) - 64,
                            cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaStreamSynchronize(st));
#endif
}

static inline void release(dev_case *d)
{
    cudaFree(d->q); cudaFree(d->k); cudaFree(d->v); cudaFree(d->o); cudaFree(d->lse);
    cudaFree(d->ws);
}

static inline sw_prefill_tensors tensors_of(const sw_case *c, const dev_case *d)
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

/* Runs the case on `backend` on stream `st`, `layers` times with one plan
 * (its own buffers and workspace, fresh poison each time: bytes o_poison in
 * O -- 0xff: NaN --, lse_poison in LSE) and copies the last result back into c->o /
 * c->lse: 0 when it ran, 1 (reported on stderr) when not. tuning: NULL = the
 * plan's defaults. A CUDA error ends the program (a sticky error poisons the
 * context). */
static inline int sw_cuda_case_exec(sw_case *c, cudaStream_t st, int layers, sw_backend backend,
                                    const sw_prefill_tuning *tuning, int o_poison,
                                    float lse_poison)
{
    dev_case d;
    upload(c, &d, st);
    c->params.backend = backend;
    sw_prefill_plan *pl = NULL;
    sw_status s = sw_prefill_plan_create_tuned(&c->params, c->batch, c->qo_indptr, c->kv_indptr,
                                               tuning, &pl);
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
    const size_t nl = (size_t)c->total_q * c->params.num_qo_heads;
    for (size_t i = 0; i < nl; i++)
        c->lse[i] = lse_poison; /* (the host copy, uploaded below) */
    for (int l = 0; l < layers && s == SW_OK; l++) {
        CUDA_OK(cudaMemsetAsync(d.o, o_poison, bytes_of(c, c->total_q, c->o_stride) - 64, st));
        CUDA_OK(cudaMemcpyAsync(d.lse, c->lse, nl * 4, cudaMemcpyHostToDevice, st));
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
    CUDA_OK(cudaMemcpyAsync(c->o, d.o, bytes_of(c, c->total_q, c->o_stride) - 64,
                            cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaMemcpyAsync(c->lse, d.lse, nl * 4, cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaStreamSynchronize(st));
    release(&d);
    return 0;
}

/* sw_cuda_case_exec (LSE poisoned with NaN) and the result checked against
 * the fp64 reference (every row_sample-th row): 0 when right, 1 (reported
 * on stderr) when not. */
static inline int sw_cuda_case_run(sw_case *c, int row_sample, cudaStream_t st, int layers,
                                   sw_backend backend, const sw_prefill_tuning *tuning)
{
    if (sw_cuda_case_exec(c, st, layers, backend, tuning, 0xff, NAN))
        return 1;
    sw_check ck = sw_case_check(c, row_sample);
    int bad = ck.rel_l2 > 1e-2 || ck.unwritten || ck.lse_bad || ck.lse_max_abs > 2e-2;
    if (bad || getenv("SW_TEST_VERBOSE"))
        fprintf(stderr, "%s %s: rel_l2=%.3g unwritten=%lld lse_bad=%lld lse_err=%.3g\n",
                bad ? "FAIL" : "ok", c->name, ck.rel_l2, (long long)ck.unwritten,
                (long long)ck.lse_bad, ck.lse_max_abs);
    return bad;
}

#endif
