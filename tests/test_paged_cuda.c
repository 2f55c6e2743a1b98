/* Paged K/V on the GPU against the fp64 reference over the same keys laid
 * out contiguously: page sizes 1, 16, 64 and 256, both layouts (padded
 * strides sometimes), shuffled pages in a pool whose unused pages hold 1e4,
 * both table conventions, empty and one-token requests, decode (q_len 1 and
 * 3: the split-KV decode kernel, long contexts split across CTAs and
 * merged) and longer queries (pages gathered for the prefill kernel),
 * causal continuation, LSE, scores that rise and fall along the keys (the
 * online softmax's rescales); the CUDA and the portable backend. A run
 * captured in a CUDA graph and replayed gives the uncaptured run's bytes. A
 * NaN key makes NaN exactly the rows that see it (the split decode's merge
 * included). Plans made, run and destroyed behind a held stream neither wait for the
 * device nor read each other's tables.
 * Skipped (77) without a GPU. */
#include "attn/attn_internal.h"
#include "core/sw_core.h"
#include "core/sw_cuda.h"
#include "sw_test.h"
#include "test_paged_util.h"

#ifdef SW_HAVE_CUDA
#include "sw_test_cuda.h"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SW_HAVE_CUDA

typedef struct dev_paged {
    void *q, *k, *v, *o, *ws;
    float *lse;
    size_t q_bytes, o_bytes, lse_bytes, ws_bytes;
} dev_paged;

static sw_prefill_tensors dev_tensors(const sw_case *c, const pool *p, const dev_paged *d)
{
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = d->q;
    t.o = d->o;
    t.lse = d->lse;
    t.k = d->k;
    t.v = d->v;
    t.q_rows = c->total_q;
    t.q_row_stride = c->q_stride;
    t.o_row_stride = c->o_stride;
    t.k_row_stride = t.v_row_stride = p->tok;
    t.k_head_stride = t.v_head_stride = p->head;
    t.k_page_stride = t.v_page_stride = p->page;
    t.workspace = d->ws;
    t.workspace_bytes = d->ws_bytes;
    return t;
}

static void dev_upload(const sw_case *c, const pool *p, dev_paged *d, cudaStream_t st)
{
    memset(d, 0, sizeof *d);
    d->q_bytes = bytes_of(c, c->total_q, c->q_stride);
    d->o_bytes = bytes_of(c, c->total_q, c->o_stride);
    d->lse_bytes = (size_t)c->total_q * c->params.num_qo_heads * 4 + 64;
    CUDA_OK(cudaMalloc(&d->q, d->q_bytes));
    CUDA_OK(cudaMalloc(&d->o, d->o_bytes));
    CUDA_OK(cudaMalloc((void **)&d->lse, d->lse_bytes));
    CUDA_OK(cudaMalloc(&d->k, p->bytes + 64));
    CUDA_OK(cudaMalloc(&d->v, p->bytes + 64));
    CUDA_OK(cudaMemcpyAsync(d->q, c->q, d->q_bytes - 64, cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaMemcpyAsync(d->k, p->k, p->bytes, cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaMemcpyAsync(d->v, p->v, p->bytes, cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaStreamSynchronize(st));
}

static void dev_free(dev_paged *d)
{
    cudaFree(d->q); cudaFree(d->k); cudaFree(d->v); cudaFree(d->o); cudaFree(d->lse);
    cudaFree(d->ws);
}

static void dev_poison(dev_paged *d, cudaStream_t st)
{
    CUDA_OK(cudaMemsetAsync(d->o, 0xff, d->o_bytes, st));
    CUDA_OK(cudaMemsetAsync(d->lse, 0xff, d->lse_bytes, st));
}

static int n_decode, n_gather;
static int32_t ps_override; /* a page size outside page_sizes[] when > 0 */

static int run_on_pool(sw_case *cp, sw_rng *r, int32_t ps, sw_kv_layout layout, int fa,
                       int padded, sw_backend backend, int ramp, int row_sample, cudaStream_t st);

/* Case `index` of the family (max_len bounds its lengths) on `backend`:
 * 0 when right. */
static int run_case(int index, sw_backend backend, int32_t max_len, int ramp, cudaStream_t st)
{
    sw_case c;
    sw_case_make(&c, 20261204, index, index % 3 == 2 ? SW_DTYPE_F16 : SW_DTYPE_BF16, max_len);
    if (ramp)
        sw_case_ramp(&c, index % 2 ? 300 : 1 << 30, 0.1, 1);
    sw_rng r = {4000 + (uint64_t)index};
    const int mode = index % 4; /* 0, 1 prefill; 2 decode q_len 1; 3 q_len <= 3 */
    if (mode >= 2 || max_len > 1000)
        shorten_queries(&c, mode == 3 ? 3 : 1);
    const int32_t ps = ps_override > 0 ? ps_override : page_sizes[(index / 4) % 4];
    const sw_kv_layout layout = (index / 2) % 2 ? SW_KV_HND : SW_KV_NHD;
    const int fa = (index / 3) % 2, padded = (index / 5) % 2;
    return run_on_pool(&c, &r, ps, layout, fa, padded, backend, ramp, 1, st);
}

/* Case c (freed here) over a pool of its keys (page size ps, shuffled
 * pages), run on `backend` and checked against the fp64 reference (every
 * row_sample-th row and head, the first and last of each request): 0 when
 * right. */
static int run_on_pool(sw_case *cp, sw_rng *r, int32_t ps, sw_kv_layout layout, int fa,
                       int padded, sw_backend backend, int ramp, int row_sample, cudaStream_t st)
{
    sw_case c = *cp;
    pool p;
    pool_make(&p, &c, r, ps, layout, fa, padded, 1);
    sw_case_poison(&c);
    c.params.backend = backend;
    const int decode = sw_paged_decode_fits(c.qo_indptr, c.batch,
                                            c.params.num_qo_heads / c.params.num_kv_heads);
    dev_paged d;
    dev_upload(&c, &p, &d, st);
    sw_prefill_plan *pl = NULL;
    sw_status s = sw_prefill_plan_create_paged(&c.params, c.batch, c.qo_indptr, &p.kv, &pl);
    if (s == SW_OK) {
        d.ws_bytes = sw_prefill_plan_workspace_size(pl);
        if (d.ws_bytes)
            CUDA_OK(cudaMalloc(&d.ws, d.ws_bytes));
        dev_poison(&d, st);
        sw_prefill_tensors t = dev_tensors(&c, &p, &d);
        s = sw_prefill_run(pl, &t, st);
    }
    const cudaError_t e = cudaStreamSynchronize(st);
    sw_prefill_plan_destroy(pl);
    int bad = 0;
    if (s != SW_OK || e != cudaSuccess) {
        fprintf(stderr, "FAIL %s page %d: %s %s / %s\n", c.name, ps, sw_status_str(s),
                sw_last_error(), cudaGetErrorString(e));
        if (e != cudaSuccess)
            exit(1);
        bad = 1;
    } else {
        CUDA_OK(cudaMemcpy(c.o, d.o, d.o_bytes - 64, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(c.lse, d.lse, (size_t)c.total_q * c.params.num_qo_heads * 4,
                           cudaMemcpyDeviceToHost));
        const sw_check ck = sw_case_check(&c, row_sample);
        bad = ck.rel_l2 > 1e-2 || ck.unwritten || ck.lse_bad || ck.lse_max_abs > 2e-2;
        if (bad || getenv("SW_TEST_VERBOSE"))
            fprintf(stderr, "%s %s page %d %s %s%s%s [%s, %s]: rel_l2=%.3g unwritten=%lld "
                    "lse_bad=%lld lse_err=%.3g\n", bad ? "FAIL" : "ok", c.name, ps,
                    layout == SW_KV_NHD ? "NHD" : "HND", fa ? "block_table" : "indptr",
                    padded ? " padded" : "", ramp ? " ramp" : "", sw_backend_name(backend),
                    decode ? "decode" : "gather", ck.rel_l2, (long long)ck.unwritten,
                    (long long)ck.lse_bad, ck.lse_max_abs);
        n_decode += decode;
        n_gather += !decode;
    }
    dev_free(&d);
    pool_free(&p);
    sw_case_free(&c);
    return bad;
}

/* Shapes of the serving benches, whose gather pieces reach the Hopper
 * kernel's bulk-copy limit: 4 keys of 8 x 128 heads are 8 KiB (copied by
 * bulk copies from an NHD pool of pages of 16 or 64), 16 x 128 are 16 KiB
 * (the register gatherers); long requests with their whole queries, so that
 * every gatherer copies many tiles, one continuing a cached prefix. */
static int shape_case(int k, cudaStream_t st)
{
    static const int32_t q_lens[3] = {3000, 700, 129}, kv_lens[3] = {3000, 1800, 129};
    const int32_t kvh = k % 2 ? 16 : 8, group = k % 2 ? 1 : 4;
    const int32_t ps = k < 2 ? 16 : 64;
    const sw_dtype dt = k == 1 ? SW_DTYPE_F16 : SW_DTYPE_BF16;
    sw_case c;
    sw_case_make_shape(&c, 20261207 + (uint64_t)k, dt, 128, kvh, group, 1, 3, q_lens, kv_lens);
    sw_rng r = {5000 + (uint64_t)k};
    return run_on_pool(&c, &r, ps, SW_KV_NHD, k == 3, 0, SW_BACKEND_CUDA, 0, 29, st);
}

/* A NaN over pages (sw_case_nan_put: a key in the middle, the first, the
 * last -- the newest, in decode -- or a query row): NaN exactly in the rows
 * that see it (output and LSE), every other row finite, as in
 * test_prefill_cuda; O and LSE poisoned with finite values. keep: the
 * queries' length at most (1: the decode kernel; long contexts split across
 * CTAs and merged: a NaN part must reach the merged row). 0 when right or
 * no request qualifies. */
static int nan_case(int index, int32_t max_len, int32_t keep, cudaStream_t st)
{
    sw_case c;
    sw_case_make(&c, 20261206, index, index % 2 ? SW_DTYPE_F16 : SW_DTYPE_BF16, max_len);
    shorten_queries(&c, keep);
    sw_nan_at at;
    if (!sw_case_nan_put(&c, (index / 2) % 4, &at)) {
        sw_case_free(&c);
        return 0;
    }
    sw_rng r = {91 + (uint64_t)index};
    pool p;
    pool_make(&p, &c, &r, 16, index % 3 ? SW_KV_HND : SW_KV_NHD, 0, 0, 1);
    c.params.backend = SW_BACKEND_CUDA;
    dev_paged d;
    dev_upload(&c, &p, &d, st); /* (q with its NaN row, if any) */
    sw_prefill_plan *pl = NULL;
    sw_status s = sw_prefill_plan_create_paged(&c.params, c.batch, c.qo_indptr, &p.kv, &pl);
    const size_t lb = (size_t)c.total_q * c.params.num_qo_heads * 4;
    if (s == SW_OK) {
        d.ws_bytes = sw_prefill_plan_workspace_size(pl);
        if (d.ws_bytes)
            CUDA_OK(cudaMalloc(&d.ws, d.ws_bytes));
        sw_case_poison_finite(&c, 12345.0f);
        CUDA_OK(cudaMemcpyAsync(d.o, c.o, d.o_bytes - 64, cudaMemcpyHostToDevice, st));
        CUDA_OK(cudaMemcpyAsync(d.lse, c.lse, lb, cudaMemcpyHostToDevice, st));
        sw_prefill_tensors t = dev_tensors(&c, &p, &d);
        s = sw_prefill_run(pl, &t, st);
    }
    CUDA_OK(cudaStreamSynchronize(st));
    sw_prefill_plan_destroy(pl);
    int bad = s != SW_OK;
    if (bad) {
        fprintf(stderr, "FAIL nan %s: %s %s\n", c.name, sw_status_str(s), sw_last_error());
    } else {
        CUDA_OK(cudaMemcpy(c.o, d.o, d.o_bytes - 64, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(c.lse, d.lse, lb, cudaMemcpyDeviceToHost));
        bad = sw_case_nan_check(&c, &at, 12345.0f,
                                sw_paged_decode_fits(c.qo_indptr, c.batch,
                                                     c.params.num_qo_heads /
                                                         c.params.num_kv_heads)
                                    ? "paged decode"
                                    : "paged gather");
    }
    dev_free(&d);
    pool_free(&p);
    sw_case_free(&c);
    return bad;
}

/* One plan run plainly, then captured in a CUDA graph and replayed twice
 * over poisoned outputs: the same bytes of O and LSE. */
static int graph_case(int index, int32_t keep, cudaStream_t st)
{
    sw_case c;
    sw_case_make(&c, 20261205, index, SW_DTYPE_BF16, 3000);
    shorten_queries(&c, keep);
    sw_rng r = {77 + (uint64_t)index};
    pool p;
    pool_make(&p, &c, &r, 16, index % 2 ? SW_KV_HND : SW_KV_NHD, 0, 0, 1);
    c.params.backend = SW_BACKEND_CUDA;
    dev_paged d;
    dev_upload(&c, &p, &d, st);
    sw_prefill_plan *pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create_paged(&c.params, c.batch, c.qo_indptr, &p.kv, &pl), SW_OK);
    if (!pl) {
        dev_free(&d);
        pool_free(&p);
        sw_case_free(&c);
        return 1;
    }
    d.ws_bytes = sw_prefill_plan_workspace_size(pl);
    if (d.ws_bytes)
        CUDA_OK(cudaMalloc(&d.ws, d.ws_bytes));
    sw_prefill_tensors t = dev_tensors(&c, &p, &d);
    dev_poison(&d, st);
    CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_OK);
    CUDA_OK(cudaStreamSynchronize(st));
    const size_t ob = d.o_bytes - 64, lb = (size_t)c.total_q * c.params.num_qo_heads * 4;
    char *o1 = malloc(ob + 1), *o2 = malloc(ob + 1), *l1 = malloc(lb + 1), *l2 = malloc(lb + 1);
    CUDA_OK(cudaMemcpy(o1, d.o, ob, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(l1, d.lse, lb, cudaMemcpyDeviceToHost));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    const sw_status s = sw_prefill_run(pl, &t, st);
    CUDA_OK(cudaStreamEndCapture(st, &g));
    CHECK_STATUS(s, SW_OK);
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    int bad = 0;
    for (int rep = 0; rep < 2; rep++) {
        dev_poison(&d, st);
        CUDA_OK(cudaGraphLaunch(ge, st));
        CUDA_OK(cudaStreamSynchronize(st));
        CUDA_OK(cudaMemcpy(o2, d.o, ob, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(l2, d.lse, lb, cudaMemcpyDeviceToHost));
        bad |= memcmp(o1, o2, ob) != 0 || memcmp(l1, l2, lb) != 0;
    }
    /* and the plain run was right */
    memcpy(c.o, o1, ob);
    memcpy(c.lse, l1, lb);
    const sw_check ck = sw_case_check(&c, 1);
    bad |= ck.rel_l2 > 1e-2 || ck.unwritten || ck.lse_bad;
    fprintf(stderr, "%s graph %s (q_len <= %d, %s): replay %s, rel_l2=%.3g\n", bad ? "FAIL" : "ok",
            c.name, keep,
            sw_paged_decode_fits(c.qo_indptr, c.batch,
                                 c.params.num_qo_heads / c.params.num_kv_heads) ? "decode" : "gather",
            bad ? "differs or wrong" : "identical", ck.rel_l2);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    sw_prefill_plan_destroy(pl);
    free(o1); free(o2); free(l1); free(l2);
    dev_free(&d);
    pool_free(&p);
    sw_case_free(&c);
    return bad;
}

/* The stream held by a host function until the gate opens. */
static atomic_int stage_gate;

static void CUDART_CB hold_stream(void *arg)
{
    (void)arg;
    const struct timespec nap = {0, 100000};
    while (!atomic_load(&stage_gate))
        nanosleep(&nap, NULL);
}

static void *open_gate_later(void *arg)
{
    (void)arg;
    const struct timespec wait = {0, 300000000};
    nanosleep(&wait, NULL);
    atomic_store(&stage_gate, 1);
    return NULL;
}

/* Plans made, run and destroyed back to back while the stream is held, as
 * a caller that plans every decode step does: one case in STAGE_PLANS pools
 * whose pages lie elsewhere, so each plan's tables differ and a plan that
 * read another's would compute over the wrong keys. The first 8 return
 * while the stream is held (destroy gives the pinned tables back to the
 * staging pool instead of cudaFreeHost, which waits for the device); later
 * ones may wait for the oldest upload, until a thread opens the gate.
 * Every output is checked against fp64. */
enum { STAGE_PLANS = 12 };

static int staging_case(cudaStream_t st)
{
    sw_case c;
    sw_case_make(&c, 20261206, 3, SW_DTYPE_BF16, 3000);
    shorten_queries(&c, 1);
    c.params.backend = SW_BACKEND_CUDA;
    CHECK(sw_paged_decode_fits(c.qo_indptr, c.batch,
                               c.params.num_qo_heads / c.params.num_kv_heads));
    pool p[STAGE_PLANS];
    dev_paged d[STAGE_PLANS];
    int bad = 0;
    for (int i = 0; i < STAGE_PLANS; i++) {
        sw_rng r = {91 + (uint64_t)i};
        pool_make(&p[i], &c, &r, 16, SW_KV_NHD, 0, 0, 1);
        dev_upload(&c, &p[i], &d[i], st);
        /* the workspace, and one run before the stream is held (a kernel's
         * first launch may load its module, which waits for the device) */
        sw_prefill_plan *pl = NULL;
        CHECK_STATUS(sw_prefill_plan_create_paged(&c.params, c.batch, c.qo_indptr, &p[i].kv, &pl),
                     SW_OK);
        d[i].ws_bytes = pl ? sw_prefill_plan_workspace_size(pl) : 0;
        if (d[i].ws_bytes)
            CUDA_OK(cudaMalloc(&d[i].ws, d[i].ws_bytes));
        if (pl) {
            sw_prefill_tensors t = dev_tensors(&c, &p[i], &d[i]);
            CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_OK);
        }
        CUDA_OK(cudaStreamSynchronize(st));
        sw_prefill_plan_destroy(pl);
    }
    for (int i = 0; i < STAGE_PLANS; i++)
        dev_poison(&d[i], st);
    CUDA_OK(cudaStreamSynchronize(st));
    sw_cuda_staging_stats s0, s1;
    sw_cuda_staging_get_stats(&s0);
    atomic_store(&stage_gate, 0);
    CUDA_OK(cudaLaunchHostFunc(st, hold_stream, NULL));
    pthread_t opener;
    CHECK(pthread_create(&opener, NULL, open_gate_later, NULL) == 0);
    int ahead = 0;
    for (int i = 0; i < STAGE_PLANS; i++) {
        sw_prefill_plan *pl = NULL;
        sw_status s = sw_prefill_plan_create_paged(&c.params, c.batch, c.qo_indptr, &p[i].kv, &pl);
        if (s == SW_OK) {
            sw_prefill_tensors t = dev_tensors(&c, &p[i], &d[i]);
            s = sw_prefill_run(pl, &t, st);
        }
        sw_prefill_plan_destroy(pl); /* its run is still queued behind the gate */
        bad |= s != SW_OK;
        if (i == 7)
            ahead = !atomic_load(&stage_gate);
    }
    pthread_join(opener, NULL);
    CUDA_OK(cudaStreamSynchronize(st));
    sw_cuda_staging_get_stats(&s1);
    const uint64_t fresh = s1.allocated - s0.allocated;
    const uint64_t again = (s1.reused - s0.reused) + (s1.waited - s0.waited);
    bad |= !ahead || fresh + again != STAGE_PLANS;
    double worst = 0;
    for (int i = 0; i < STAGE_PLANS; i++) {
        CUDA_OK(cudaMemcpy(c.o, d[i].o, d[i].o_bytes - 64, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(c.lse, d[i].lse, (size_t)c.total_q * c.params.num_qo_heads * 4,
                           cudaMemcpyDeviceToHost));
        const sw_check ck = sw_case_check(&c, 1);
        bad |= ck.rel_l2 > 1e-2 || ck.unwritten || ck.lse_bad;
        worst = ck.rel_l2 > worst ? ck.rel_l2 : worst;
        dev_free(&d[i]);
        pool_free(&p[i]);
    }
    fprintf(stderr, "%s staging: %d plans made, run and destroyed behind a held stream, the first "
            "8 %s; %llu pinned buffers allocated, %llu taken again (%llu after waiting for the "
            "oldest upload); worst rel_l2=%.3g\n", bad ? "FAIL" : "ok", STAGE_PLANS,
            ahead ? "without waiting" : "WAITED", (unsigned long long)fresh,
            (unsigned long long)again, (unsigned long long)(s1.waited - s0.waited), worst);
    sw_case_free(&c);
    return bad;
}

int main(void)
{
    if (sw_cuda_device_count() == 0) {
        printf("test_paged_cuda: no CUDA device, skipped\n");
        return 77;
    }
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const double t0 = sw_now_seconds();
    int failed = 0, n = 0;
    for (int i = 0; i < 64; i++, n++)
        failed += run_case(i, SW_BACKEND_CUDA, 200, i % 5 == 4, st);
    for (int i = 0; i < 32; i++, n++)
        failed += run_case(i, SW_BACKEND_CUDA_PORTABLE, 200, 0, st);
    /* long contexts: decode split across many CTAs */
    for (int i = 0; i < 12; i++, n++)
        failed += run_case(100 + i, SW_BACKEND_CUDA, 20000, i % 3 == 0, st);
    /* page sizes that are not powers of two (pages straddle the kernels'
     * tiles; the decode kernel's page lookup divides) */
    static const int32_t odd_sizes[2] = {24, 48};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 8; i++, n++) {
            ps_override = odd_sizes[k];
            failed += run_case(200 + i, SW_BACKEND_CUDA, i < 4 ? 200 : 3000, i % 3 == 0, st);
            ps_override = 0;
        }
    for (int i = 0; i < 4; i++, n++)
        failed += graph_case(i, i < 2 ? 1 : 64, st);
    for (int k = 0; k < 4; k++, n++)
        failed += shape_case(k, st);
    /* a NaN key or query row: decode (short, and split and merged), q_len
     * <= 3, gather */
    for (int i = 0; i < 32; i++, n++)
        failed += nan_case(300 + i, i < 16 ? 400 : 20000,
                           i % 8 == 7 ? 64 : i % 8 == 6 ? 3 : 1, st);
    failed += staging_case(st);
    n++;
    CHECK(n_decode > 0 && n_gather > 0);
    cudaStreamDestroy(st);
    printf("test_paged_cuda: %d cases (%d decode, %d gather), %d failed, %d failed checks, "
           "%.1f s\n", n, n_decode, n_gather, failed, sw_test_failures, sw_now_seconds() - t0);
    return failed || sw_test_failures ? 1 : 0;
}

#else
int main(void)
{
    printf("test_paged_cuda: built without CUDA, skipped\n");
    return 77;
}
#endif
