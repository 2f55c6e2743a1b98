/* The FlashInfer opponents against the fp64 reference, so that the opponent a
 * benchmark measures is known to compute the same attention: its FA2 path
 * and, when compiled in (sw_opp_fi_has_fa3) and the GPU is sm_90, its FA3
 * path, each on the seeded
 * random family of the CUDA test (ragged lengths incl. 0, GQA, head_dim
 * 64/128/256, causal bottom-right with q_len < kv_len, strided Q/K/V, sm_scale,
 * LSE), BF16 and F16, plus longer ragged batches and short-query/long-prefix
 * cases that make its scheduler split the KV. Cases it refuses must be refused
 * with SW_STATUS_UNSUPPORTED (causal q_len > kv_len at plan time; for FA2 a
 * strided O at run time, after which the case is rerun with a dense O; FA3
 * writes O with its stride and is checked on it). For FA3 every case's work
 * list is also compared with the one FlashInfer's own planner
 * (PrefillSM90Plan) makes, and its own refusals (a device other than sm_90,
 * a batch large enough to share one schedule among heads) are checked.
 * Over paged K/V (run_paged: pages 1/16/64/256, both layouts, shuffled
 * pools): its batch decode, its FA2 paged prefill and, with FA3 compiled in
 * and sm_90, its FA3 paged prefill, each against the reference, with their
 * refusals. Registered only in an opponent build (-DSPILLWAY_OPPONENT_FLASHINFER) with
 * SPILLWAY_OPPONENT=flashinfer set by ctest; exit 77 without a GPU. */
#include "sw_test.h"

#include "core/sw_core.h"
#include "core/sw_half.h"
#include "opponents/opponent.h"

#include <string.h>

#if !defined(SW_HAVE_CUDA) || !defined(SW_HAVE_OPPONENT_FLASHINFER)
int main(void)
{
    printf("test_opponent_flashinfer: skipped (built without CUDA or without the opponent)\n");
    return SW_TEST_SKIP;
}
#else
#include "sw_test_cuda.h"
#include "test_paged_util.h"

/* FlashInfer writes O dense: give the case a dense O (the reference check
 * reads c->o with c->o_stride). */
static void make_o_dense(sw_case *c)
{
    const int64_t dq = (int64_t)c->params.num_qo_heads * c->params.head_dim;
    sw_aligned_free(c->o);
    c->o_stride = dq;
    c->o = sw_aligned_alloc(64, (size_t)(c->total_q * dq) * sw_dtype_size(c->params.dtype) + 64);
}

static int causal_q_longer(const sw_case *c)
{
    if (!c->params.causal)
        return 0;
    for (int32_t b = 0; b < c->batch; b++)
        if (c->qo_indptr[b + 1] - c->qo_indptr[b] > c->kv_indptr[b + 1] - c->kv_indptr[b])
            return 1;
    return 0;
}

static int refused, checked, schedules;
/* The opponent under test: SW_BACKEND_OPPONENT_FLASHINFER or _FA3. */
static sw_backend g_backend = SW_BACKEND_OPPONENT_FLASHINFER;

static uint16_t half_of(sw_dtype dt, double x)
{
    return dt == SW_DTYPE_BF16 ? sw_f32_to_bf16((float)x) : sw_f32_to_f16((float)x);
}

/* Plans the case for the opponent, runs it `layers` times on one plan (fresh
 * poison each time) and checks the last result. Returns 1 on failure. */
static int run_case(sw_case *c, int row_sample, cudaStream_t st, int layers)
{
    const char *bn = sw_backend_name(g_backend);
    const int fa3 = g_backend == SW_BACKEND_OPPONENT_FLASHINFER_FA3;
    c->params.backend = g_backend;
    sw_prefill_plan *pl = NULL;
    sw_status s = sw_prefill_plan_create(&c->params, c->batch, c->qo_indptr, c->kv_indptr, &pl);
    if (causal_q_longer(c)) {
        refused++;
        if (s != SW_STATUS_UNSUPPORTED || !strstr(sw_last_error(), "q_len")) {
            fprintf(stderr, "FAIL %s %s: causal q_len > kv_len: plan returned %s (%s), want "
                    "SW_STATUS_UNSUPPORTED\n", bn, c->name, sw_status_str(s), sw_last_error());
            sw_prefill_plan_destroy(pl);
            return 1;
        }
        return 0;
    }
    if (s != SW_OK) {
        fprintf(stderr, "FAIL %s %s: plan: %s %s\n", bn, c->name, sw_status_str(s),
                sw_last_error());
        return 1;
    }
    if (sw_prefill_plan_backend(pl) != g_backend) {
        fprintf(stderr, "FAIL %s %s: plan resolved to %s\n", bn, c->name,
                sw_backend_name(sw_prefill_plan_backend(pl)));
        sw_prefill_plan_destroy(pl);
        return 1;
    }
#ifdef SW_HAVE_OPPONENT_FLASHINFER_FA3
    if (fa3) {
        s = sw_opp_fi3_schedule_check(&c->params, c->batch, c->qo_indptr, c->kv_indptr);
        if (s != SW_OK) {
            fprintf(stderr, "FAIL %s %s: work list: %s %s\n", bn, c->name, sw_status_str(s),
                    sw_last_error());
            sw_prefill_plan_destroy(pl);
            return 1;
        }
        schedules++;
    }
#endif
    const int64_t dq = (int64_t)c->params.num_qo_heads * c->params.head_dim;
    dev_case d;
    if (!fa3 && c->o_stride != dq && c->total_q > 0) {
        upload(c, &d, st);
        d.ws_bytes = sw_prefill_plan_workspace_size(pl);
        if (d.ws_bytes)
            CUDA_OK(cudaMalloc(&d.ws, d.ws_bytes));
        sw_prefill_tensors t = tensors_of(c, &d);
        s = sw_prefill_run(pl, &t, st);
        release(&d);
        if (s != SW_STATUS_UNSUPPORTED || !strstr(sw_last_error(), "o_row_stride")) {
            fprintf(stderr, "FAIL %s %s: strided O: run returned %s (%s), want "
                    "SW_STATUS_UNSUPPORTED\n", bn, c->name, sw_status_str(s), sw_last_error());
            sw_prefill_plan_destroy(pl);
            return 1;
        }
        refused++;
    }
    if (!fa3 && c->o_stride != dq)
        make_o_dense(c);
    upload(c, &d, st);
    d.ws_bytes = sw_prefill_plan_workspace_size(pl);
    if (d.ws_bytes)
        CUDA_OK(cudaMalloc(&d.ws, d.ws_bytes));
    sw_prefill_tensors t = tensors_of(c, &d);
    s = SW_OK;
    for (int l = 0; l < layers && s == SW_OK; l++) {
        CUDA_OK(cudaMemsetAsync(d.o, 0xff, bytes_of(c, c->total_q, c->o_stride) - 64, st));
        CUDA_OK(cudaMemsetAsync(d.lse, 0xff, (size_t)c->total_q * c->params.num_qo_heads * 4, st));
        s = sw_prefill_run(pl, &t, st);
    }
    cudaError_t e = cudaStreamSynchronize(st);
    sw_prefill_plan_destroy(pl);
    if (s != SW_OK || e != cudaSuccess) {
        fprintf(stderr, "FAIL %s %s: run: %s %s / %s\n", bn, c->name, sw_status_str(s),
                sw_last_error(), cudaGetErrorString(e));
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
    checked++;
    int bad = ck.rel_l2 > 1e-2 || ck.unwritten || ck.lse_bad || ck.lse_max_abs > 2e-2;
    if (bad || getenv("SW_TEST_VERBOSE"))
        fprintf(stderr, "%s %s %s: rel_l2=%.3g unwritten=%lld lse_bad=%lld lse_err=%.3g\n",
                bad ? "FAIL" : "ok", bn, c->name, ck.rel_l2, (long long)ck.unwritten,
                (long long)ck.lse_bad, ck.lse_max_abs);
    return bad;
}

/* A case with given lengths and shape, dense rows, N(0,1) inputs. */
static void make_fixed(sw_case *c, uint64_t seed, sw_dtype dt, int32_t hq, int32_t hkv, int32_t d,
                       int causal, int32_t batch, const int32_t *ql, const int32_t *kl)
{
    memset(c, 0, sizeof *c);
    sw_rng r = {seed};
    c->seed = seed;
    sw_prefill_params_init(&c->params);
    c->params.dtype = dt;
    c->params.num_qo_heads = hq;
    c->params.num_kv_heads = hkv;
    c->params.head_dim = d;
    c->params.causal = causal;
    c->batch = batch;
    c->qo_indptr = calloc((size_t)batch + 1, sizeof(int32_t));
    c->kv_indptr = calloc((size_t)batch + 1, sizeof(int32_t));
    for (int32_t b = 0; b < batch; b++) {
        c->qo_indptr[b + 1] = c->qo_indptr[b] + ql[b];
        c->kv_indptr[b + 1] = c->kv_indptr[b] + kl[b];
    }
    c->total_q = c->qo_indptr[batch];
    c->total_kv = c->kv_indptr[batch];
    c->q_stride = c->o_stride = (int64_t)hq * d;
    c->k_stride = c->v_stride = (int64_t)hkv * d;
    const size_t es = sw_dtype_size(dt);
    c->q = sw_aligned_alloc(64, (size_t)(c->total_q * c->q_stride) * es + 64);
    c->o = sw_aligned_alloc(64, (size_t)(c->total_q * c->o_stride) * es + 64);
    c->k = sw_aligned_alloc(64, (size_t)(c->total_kv * c->k_stride) * es + 64);
    c->v = sw_aligned_alloc(64, (size_t)(c->total_kv * c->v_stride) * es + 64);
    c->lse = sw_aligned_alloc(64, (size_t)c->total_q * (size_t)hq * sizeof(float) + 64);
    const int64_t nq = c->total_q * c->q_stride, nk = c->total_kv * c->k_stride;
    uint16_t *q = c->q, *k = c->k, *v = c->v;
    for (int64_t i = 0; i < nq; i++)
        q[i] = half_of(dt, sw_rng_normal(&r));
    for (int64_t i = 0; i < nk; i++) {
        k[i] = half_of(dt, sw_rng_normal(&r));
        v[i] = half_of(dt, sw_rng_normal(&r));
    }
    int n = snprintf(c->name, sizeof c->name, "fixed %s d%d h%d/%d %s b%d",
                     dt == SW_DTYPE_BF16 ? "bf16" : "f16", d, hq, hkv,
                     causal ? "causal" : "full", batch);
    for (int32_t b = 0; b < batch && n < (int)sizeof c->name - 24; b++)
        n += snprintf(c->name + n, sizeof c->name - (size_t)n, " %d/%d", ql[b], kl[b]);
}

static void check_refusals(cudaStream_t st)
{
    sw_case c;
    const int32_t ql[2] = {40, 70}, kl[2] = {40, 90};
    make_fixed(&c, 7, SW_DTYPE_BF16, 4, 2, 128, 1, 2, ql, kl);
    c.params.backend = g_backend;
    dev_case d;
    upload(&c, &d, st);
    sw_prefill_plan *pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create(&c.params, c.batch, c.qo_indptr, c.kv_indptr, &pl), SW_OK);
    if (pl) {
        const size_t ws = sw_prefill_plan_workspace_size(pl);
        CHECK(ws > 0);
        sw_prefill_tensors t = tensors_of(&c, &d);
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_STATUS_WORKSPACE_TOO_SMALL);
        CUDA_OK(cudaMalloc(&d.ws, ws));
        d.ws_bytes = ws - 1;
        t = tensors_of(&c, &d);
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_STATUS_WORKSPACE_TOO_SMALL);
        d.ws_bytes = ws;
        t = tensors_of(&c, &d);
        t.q = (const char *)d.q + 2;
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_STATUS_MISALIGNED);
        t = tensors_of(&c, &d);
        t.k_row_stride = c.k_stride + 4;
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_STATUS_MISALIGNED);
        t = tensors_of(&c, &d);
        CHECK_STATUS(sw_prefill_run(pl, &t, st), SW_OK);
        CUDA_OK(cudaStreamSynchronize(st));
        sw_prefill_plan_destroy(pl);
    }
    release(&d);
    sw_case_free(&c);
}

/* FA3's own plan refusals: a batch of more than 4096 query tiles per head
 * (FlashInfer would share one schedule among heads, not instantiated here);
 * plan only, no tensors. */
static void check_fa3_refusals(void)
{
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.backend = SW_BACKEND_OPPONENT_FLASHINFER_FA3;
    p.dtype = SW_DTYPE_BF16;
    p.num_qo_heads = 8;
    p.num_kv_heads = 8;
    p.head_dim = 128;
    const int32_t qo[2] = {0, 4097 * 128}, kv[2] = {0, 4097 * 128};
    sw_prefill_plan *pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create(&p, 1, qo, kv, &pl), SW_STATUS_UNSUPPORTED);
    CHECK(strstr(sw_last_error(), "schedule") != NULL);
    sw_prefill_plan_destroy(pl);
    refused++;
}

/* All cases for the backend in g_backend; returns the number that failed. */
static int run_backend(uint64_t seed, int ncases, cudaStream_t st, int *total)
{
    int failed = 0, n = 0;
    const double t0 = sw_now_seconds();
    check_refusals(st);
    if (g_backend == SW_BACKEND_OPPONENT_FLASHINFER_FA3)
        check_fa3_refusals();
    const sw_dtype dts[2] = {SW_DTYPE_BF16, SW_DTYPE_F16};
    for (int di = 0; di < 2; di++)
        for (int i = 0; i < ncases; i++) {
            sw_case c;
            sw_case_make(&c, seed + (uint64_t)di, i, dts[di], 160);
            failed += run_case(&c, 1, st, i % 10 == 0 ? 3 : 1);
            n++;
            sw_case_free(&c);
        }
    for (int di = 0; di < 2; di++)
        for (int i = 0; i < 12; i++) {
            sw_case c;
            sw_case_make(&c, seed + 100 + (uint64_t)di, i, dts[di], 2500);
            failed += run_case(&c, 29, st, 1);
            n++;
            sw_case_free(&c);
        }
    /* Fixed shapes of the benchmark's kind (heads 16/2 d256, 32/8 d128 and
     * d64, causal and not), and short queries on long prefixes: few query
     * tiles against 132 SMs make FA2 split the KV and merge. The last one
     * gives FA3's per-SM work lists several tiles of unequal cost each. */
    static const struct { int32_t hq, hkv, d, causal, batch, ql[4], kl[4]; } fixed[] = {
        {16, 2, 256, 1, 3, {700, 1031, 129}, {700, 1031, 129}},
        {32, 8, 128, 1, 3, {700, 1031, 129}, {700, 1031, 129}},
        {32, 8, 64, 0, 3, {700, 1031, 129}, {700, 1031, 129}},
        {32, 8, 128, 1, 1, {17}, {3000}},
        {16, 2, 256, 1, 2, {5, 33}, {2100, 900}},
        {32, 8, 64, 0, 4, {1, 16, 0, 64}, {4000, 2000, 100, 64}},
        {32, 8, 128, 0, 2, {48, 9}, {0, 1500}},
        {32, 4, 128, 1, 4, {2000, 513, 1, 1200}, {2000, 900, 64, 1200}},
    };
    for (int di = 0; di < 2; di++)
        for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
            sw_case c;
            make_fixed(&c, seed + 200 + i, dts[di], fixed[i].hq, fixed[i].hkv, fixed[i].d,
                       fixed[i].causal, fixed[i].batch, fixed[i].ql, fixed[i].kl);
            failed += run_case(&c, 7, st, 2);
            n++;
            sw_case_free(&c);
        }
    printf("test_opponent_flashinfer: %s: %d cases, %d failed, %.1f s\n",
           sw_backend_name(g_backend), n, failed, sw_now_seconds() - t0);
    *total += n;
    return failed;
}

/* FA3 compiled in but the device is not sm_90: its plan must refuse, naming
 * the architecture it needs. */
static void check_fa3_device_refusal(int major, int minor)
{
    sw_case c;
    const int32_t ql[1] = {64}, kl[1] = {64};
    make_fixed(&c, 3, SW_DTYPE_BF16, 4, 2, 128, 0, 1, ql, kl);
    c.params.backend = SW_BACKEND_OPPONENT_FLASHINFER_FA3;
    sw_prefill_plan *pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create(&c.params, c.batch, c.qo_indptr, c.kv_indptr, &pl),
                 SW_STATUS_UNSUPPORTED);
    CHECK(strstr(sw_last_error(), "sm_90") != NULL);
    sw_prefill_plan_destroy(pl);
    sw_case_free(&c);
    refused++;
    printf("test_opponent_flashinfer: fa3 is compiled in but device 0 is sm_%d%d: its refusal "
           "checked, its cases skipped\n", major, minor);
}

/* FlashInfer over paged K/V against the reference, pages 1/16/64/256
 * shuffled in a pool whose spare pages hold 1e4, both layouts, the case
 * family's GQA groups and head dims: with prefill 0 its batch decode
 * (flashinfer_decode.cu; q_len 1, groups its kernel does not dispatch
 * refused), with prefill 1 its paged prefill (flashinfer_prefill.cu; BF16,
 * the family's ragged queries, causal or not: causal q_len > kv_len
 * refused). Then the refusals of a q_len 2 decode-shaped batch in F16. */
static int run_paged(uint64_t seed, int ncases, int prefill, sw_backend backend, cudaStream_t st,
                     int *total)
{
    int failed = 0;
    const int fa3 = backend == SW_BACKEND_OPPONENT_FLASHINFER_FA3;
    const char *what = fa3 ? "fa3 paged prefill" : prefill ? "paged prefill" : "paged decode";
    for (int i = 0; i < ncases; i++) {
        sw_case c;
        sw_case_make(&c, seed + (prefill ? 11 : 7), i,
                     i % 2 && !prefill ? SW_DTYPE_F16 : SW_DTYPE_BF16, i % 5 == 0 ? 6000 : 300);
        if (!prefill)
            shorten_queries(&c, 1);
        make_o_dense(&c);
        sw_rng r = {seed + (uint64_t)i};
        pool p;
        pool_make(&p, &c, &r, page_sizes[i % 4], (i / 4) % 2 ? SW_KV_HND : SW_KV_NHD, i % 3 == 0,
                  0, 1);
        sw_case_poison(&c);
        c.params.backend = backend;
        c.params.causal = prefill && i % 2;
        int ones = 1, q_past_kv = 0;
        for (int32_t b = 0; b < c.batch; b++) {
            const int32_t ql = c.qo_indptr[b + 1] - c.qo_indptr[b];
            ones &= ql == 1;
            q_past_kv |= ql > c.kv_indptr[b + 1] - c.kv_indptr[b];
        }
        sw_prefill_plan *pl = NULL;
        sw_status s = sw_prefill_plan_create_paged(&c.params, c.batch, c.qo_indptr, &p.kv, &pl);
        const int g = c.params.num_qo_heads / c.params.num_kv_heads;
        if (s == SW_STATUS_UNSUPPORTED && strstr(sw_last_error(), "group size")) {
            CHECK(ones && g != 1 && g != 2 && g != 4 && g != 8);
            refused++;
        } else if (s == SW_STATUS_UNSUPPORTED && strstr(sw_last_error(), "kv_len >= q_len")) {
            CHECK(prefill && c.params.causal && q_past_kv);
            refused++;
        } else if (s != SW_OK) {
            fprintf(stderr, "FAIL %s %s: plan: %s %s\n", what, c.name, sw_status_str(s),
                    sw_last_error());
            failed++;
        } else {
            void *dq, *dk, *dv, *dout, *ws = NULL;
            float *dl;
            const size_t qb = (size_t)c.total_q * c.q_stride * 2;
            const size_t ob = (size_t)c.total_q * c.o_stride * 2;
            const size_t lb = (size_t)c.total_q * c.params.num_qo_heads * 4;
            const size_t wb = sw_prefill_plan_workspace_size(pl);
            CUDA_OK(cudaMalloc(&dq, qb + 64));
            CUDA_OK(cudaMalloc(&dout, ob + 64));
            CUDA_OK(cudaMalloc((void **)&dl, lb + 64));
            CUDA_OK(cudaMalloc(&dk, p.bytes + 64));
            CUDA_OK(cudaMalloc(&dv, p.bytes + 64));
            if (wb)
                CUDA_OK(cudaMalloc(&ws, wb));
            CUDA_OK(cudaMemcpyAsync(dq, c.q, qb, cudaMemcpyHostToDevice, st));
            CUDA_OK(cudaMemcpyAsync(dk, p.k, p.bytes, cudaMemcpyHostToDevice, st));
            CUDA_OK(cudaMemcpyAsync(dv, p.v, p.bytes, cudaMemcpyHostToDevice, st));
            CUDA_OK(cudaMemsetAsync(dout, 0xff, ob, st));
            sw_prefill_tensors t;
            sw_prefill_tensors_init(&t);
            t.q = dq; t.k = dk; t.v = dv; t.o = dout; t.lse = dl;
            t.q_rows = c.total_q;
            t.q_row_stride = c.q_stride;
            t.k_row_stride = t.v_row_stride = p.tok;
            t.k_head_stride = t.v_head_stride = p.head;
            t.k_page_stride = t.v_page_stride = p.page;
            t.workspace = ws;
            t.workspace_bytes = wb;
            s = sw_prefill_run(pl, &t, st);
            CUDA_OK(cudaStreamSynchronize(st));
            if (s == SW_OK) {
                CUDA_OK(cudaMemcpy(c.o, dout, ob, cudaMemcpyDeviceToHost));
                CUDA_OK(cudaMemcpy(c.lse, dl, lb, cudaMemcpyDeviceToHost));
                /* requests without keys: FlashInfer's rows are its own business */
                int empty = 0;
                for (int32_t b = 0; b < c.batch; b++)
                    empty |= c.kv_indptr[b + 1] == c.kv_indptr[b] && c.qo_indptr[b + 1] > c.qo_indptr[b];
                const sw_check ck = sw_case_check(&c, 1);
                const int bad = ck.rel_l2 > 1e-2 || (!empty && (ck.unwritten || ck.lse_max_abs > 2e-2));
                if (bad || getenv("SW_TEST_VERBOSE"))
                    fprintf(stderr, "%s %s %s page %d: rel_l2=%.3g unwritten=%lld "
                            "lse_err=%.3g%s\n", bad ? "FAIL" : "ok", what, c.name, p.kv.page_size,
                            ck.rel_l2, (long long)ck.unwritten, ck.lse_max_abs,
                            empty ? " (empty requests)" : "");
                failed += bad;
                checked++;
            } else {
                fprintf(stderr, "FAIL %s %s: run: %s %s\n", what, c.name, sw_status_str(s),
                        sw_last_error());
                failed++;
            }
            cudaFree(dq); cudaFree(dout); cudaFree(dl); cudaFree(dk); cudaFree(dv); cudaFree(ws);
        }
        (*total)++;
        sw_prefill_plan_destroy(pl);
        pool_free(&p);
        sw_case_free(&c);
    }
    /* q_len 2 in F16: past the decode, and the paged prefills are BF16 only */
    if (prefill) {
        sw_case c;
        sw_case_make(&c, seed, 1, SW_DTYPE_F16, 100);
        shorten_queries(&c, 2);
        sw_rng r = {seed};
        pool p;
        pool_make(&p, &c, &r, 16, SW_KV_NHD, 0, 0, 1);
        c.params.backend = backend;
        sw_prefill_plan *pl = NULL;
        int two = 0;
        for (int32_t b = 0; b < c.batch; b++)
            two |= c.qo_indptr[b + 1] - c.qo_indptr[b] == 2;
        if (two) {
            CHECK_STATUS(sw_prefill_plan_create_paged(&c.params, c.batch, c.qo_indptr, &p.kv, &pl),
                         SW_STATUS_UNSUPPORTED);
            CHECK(strstr(sw_last_error(), "BF16 only") != NULL);
            refused++;
        }
        sw_prefill_plan_destroy(pl);
        pool_free(&p);
        sw_case_free(&c);
    }
    return failed;
}

int main(void)
{
    if (sw_cuda_device_count() == 0) {
        printf("test_opponent_flashinfer: skipped (no usable CUDA device)\n");
        return SW_TEST_SKIP;
    }
    const char *env = getenv("SPILLWAY_OPPONENT");
    if (!env || !strstr(env, "flashinfer")) {
        printf("test_opponent_flashinfer: skipped (SPILLWAY_OPPONENT=flashinfer is not set; "
               "ctest sets it)\n");
        return SW_TEST_SKIP;
    }
    const uint64_t seed = (uint64_t)sw_env_int("SW_TEST_SEED", 20261129);
    const int ncases = (int)sw_env_int("SW_TEST_CASES", 60);
    /* SW_TEST_OPPONENT=fa2|fa3|decode|paged|fa3-paged runs one path only. */
    const char *only = getenv("SW_TEST_OPPONENT");
    int major = 0, minor = 0;
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int failed = 0, total = 0;
    const double t0 = sw_now_seconds();
    if (!only || strcmp(only, "fa2") == 0) {
        g_backend = SW_BACKEND_OPPONENT_FLASHINFER;
        failed += run_backend(seed, ncases, st, &total);
    }
    if (!only || strcmp(only, "decode") == 0)
        failed += run_paged(seed, ncases / 2, 0, SW_BACKEND_OPPONENT_FLASHINFER, st, &total);
    if (!only || strcmp(only, "paged") == 0)
        failed += run_paged(seed, ncases / 2, 1, SW_BACKEND_OPPONENT_FLASHINFER, st, &total);
    if (sw_opp_fi_has_fa3() && (!only || strcmp(only, "fa3") == 0 ||
                                strcmp(only, "fa3-paged") == 0)) {
        if (major == 9 && minor == 0) {
            g_backend = SW_BACKEND_OPPONENT_FLASHINFER_FA3;
            if (!only || strcmp(only, "fa3") == 0)
                failed += run_backend(seed, ncases, st, &total);
            if (!only || strcmp(only, "fa3-paged") == 0)
                failed += run_paged(seed, ncases / 2, 1, SW_BACKEND_OPPONENT_FLASHINFER_FA3, st,
                                    &total);
        } else {
            check_fa3_device_refusal(major, minor);
        }
    }
    cudaStreamDestroy(st);
    printf("test_opponent_flashinfer: %s; %d cases (seed %llu), %d checked against the "
           "reference, %d fa3 work lists equal to PrefillSM90Plan's, %d refusals verified, "
           "%d failed, %.1f s\n", sw_version_string(), total, (unsigned long long)seed, checked,
           schedules, refused, failed, sw_now_seconds() - t0);
    return failed || sw_test_failures ? 1 : 0;
}
#endif
