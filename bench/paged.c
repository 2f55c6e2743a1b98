/* spillway-bench-paged (`spillway bench paged`): attention over a paged KV
 * cache on the GPU, pages of --page tokens (default 16) in a shuffled pool,
 * NHD layout, BF16.
 *  - decode: one query token per request over every key of the request
 *    (16x32k, 64x4k, 1x512k), time per call against the device's copy rate
 *    over the KV bytes (a cudaMemcpyAsync device to device, read + write);
 *  - prefill: causal prefill over pages (1x16k, mix-a, mix-b: the prefill
 *    bench's lengths) against Spillway's own ragged prefill on the same
 *    keys laid out densely, runs interleaved.
 * Shapes h32-8/d128 and h16-2/d256. A call is timed from its enqueue to the
 * end of its work on the stream (CUDA events), the plan made once before:
 * alone, the median of --reps calls after --warmup; beside another
 * implementation (its ragged prefill, FlashInfer), 8 rounds that alternate
 * the two, --reps / 4 + 1 calls of each a round (--warmup before the
 * first round, one before each later one), the mean of the two middle
 * rounds' medians (time_pair). Sampled rows of every case are
 * checked against an fp64 reference. In a library built with the FlashInfer
 * opponent (docs/opponents.md) and SPILLWAY_OPPONENT=flashinfer set, each
 * case also runs FlashInfer on the same pages, interleaved with ours: its
 * batch decode (its CUDA-core kernel, its wrapper's default) or its paged
 * prefill (FA2), and its FA3 paged prefill where that path is compiled in
 * and the GPU is sm_90 (for the decode cases with one query row: a
 * tensor-core path, far slower there; its FA2 tensor-core decode, what
 * use_tensor_cores=True runs, is bench/swap_decode.py's flashinfer-tc);
 * SDPA on the gathered KV is bench/paged.py's. */
#include "common.h"
#include "core/sw_half.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROG "spillway-bench-paged"

static const char usage[] =
    "usage: spillway-bench-paged [--cases 16x32k,64x4k,1x512k,p1x16k,pmix-a,pmix-b]\n"
    "                            [--shapes h32-8/d128,h16-2/d256] [--page N]\n"
    "                            [--reps N] [--warmup N] [--json PATH]\n"
    "(also run as 'spillway bench paged')\n"
    "Decode (one query token per request) and causal prefill (p*) over a paged KV cache on\n"
    "the GPU: time per call (alone: the median of --reps, default 20, after --warmup,\n"
    "default 3; beside another implementation: 8 alternating rounds of --reps / 4 + 1 calls\n"
    "of each, the mean of the two middle round medians), the decode cases against the\n"
    "device copy rate over their KV bytes, the prefill cases against the ragged prefill\n"
    "over the same keys stored densely. Sampled rows are checked against an fp64\n"
    "reference. An unknown case or shape is a usage error (exit 2).\n"
    "  --page N     tokens per page, 1..256 (default 16)\n"
    "  --json PATH  results (default: a new bench/results/paged-<host>-<UTC time>.json,\n"
    "               never a committed record; ./ when there is no bench/results)\n"
    "Exit status: 0 when every case met the reference, 1 otherwise, 2 on a usage error.\n";

typedef struct pcase {
    const char *name;
    int prefill;
    int32_t n;
    int32_t len[64];
} pcase;

static const pcase cases[] = {
    {"16x32k", 0, 16, {32768, 32768, 32768, 32768, 32768, 32768, 32768, 32768, 32768, 32768,
                       32768, 32768, 32768, 32768, 32768, 32768}},
    {"64x4k", 0, 64, {0}}, /* filled in main: 64 x 4096 */
    {"1x512k", 0, 1, {524288}},
    {"p1x16k", 1, 1, {16384}},
    {"pmix-a", 1, 10, {8192, 3000, 1500, 1200, 800, 600, 400, 300, 200, 100}},
    {"pmix-b", 1, 32, {4096, 4096, 2048, 2048, 2048, 1777, 1500, 1024, 1024, 1000, 900, 800, 700,
                       600, 513, 500, 400, 300, 257, 200, 150, 100, 100, 100, 3000, 2500, 1200,
                       999, 640, 333, 129, 100}},
};
static const char *const case_names[] = {"16x32k", "64x4k", "1x512k", "p1x16k", "pmix-a",
                                         "pmix-b"};
static const char *const shape_names[] = {"h32-8/d128", "h16-2/d256"};
static const int32_t shape_hq[] = {32, 16}, shape_hkv[] = {8, 2}, shape_d[] = {128, 256};

/* The pools repeat one random block of PAT elements: element i of K is
 * pat[i % PAT], of V pat[(i + PAT / 2) % PAT]; the reference reads them so. */
#define PAT ((size_t)1 << 22)
static uint16_t *pat;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void die(const char *what, sw_status s)
{
    fprintf(stderr, PROG ": %s: %s: %s\n", what, sw_status_str(s), sw_last_error());
    exit(1);
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median ms of `reps` runs of plan on t, after `warmup` (the upper of the
 * two middle runs when reps is even). */
static double time_runs(sw_prefill_plan *pl, const sw_prefill_tensors *t, void *st, int warmup,
                        int reps, bench_gpu_timer *tm)
{
    for (int i = 0; i < warmup; i++) {
        sw_status s = sw_prefill_run(pl, t, st);
        if (s != SW_OK)
            die("run", s);
    }
    double *ms = malloc(sizeof(double) * (size_t)reps);
    for (int i = 0; i < reps; i++) {
        bench_gpu_timer_start(tm, st);
        sw_status s = sw_prefill_run(pl, t, st);
        if (s != SW_OK)
            die("run", s);
        ms[i] = bench_gpu_timer_stop_ms(tm, st);
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_d);
    const double m = ms[reps / 2];
    free(ms);
    return m;
}

/* Two plans timed in turn: 8 rounds of reps / 4 + 1 runs of each (warm-up
 * before the first), the median of the rounds' medians into *ma and *mb. */
static void time_pair(sw_prefill_plan *pa, const sw_prefill_tensors *ta, sw_prefill_plan *pb,
                      const sw_prefill_tensors *tb, void *st, int warmup, int reps,
                      bench_gpu_timer *tm, double *ma, double *mb)
{
    double a[8], b[8];
    for (int round = 0; round < 8; round++) {
        a[round] = time_runs(pa, ta, st, round ? 1 : warmup, reps / 4 + 1, tm);
        b[round] = time_runs(pb, tb, st, round ? 1 : warmup, reps / 4 + 1, tm);
    }
    qsort(a, 8, sizeof(double), cmp_d);
    qsort(b, 8, sizeof(double), cmp_d);
    *ma = (a[3] + a[4]) / 2;
    *mb = (b[3] + b[4]) / 2;
}

/* fp64 attention of query row (request b, token tq of q_len, head h) over
 * the request's keys in the pool; rel. L2 error of out (host copy). */
static double check_row(const uint16_t *q, const uint16_t *o, const int32_t *qo,
                        const int32_t *pindptr, const int32_t *pidx, int32_t ps, int32_t b,
                        int32_t tq, int32_t h, int32_t hq, int32_t hkv, int32_t d, int32_t kvlen,
                        int causal)
{
    const int32_t ql = qo[b + 1] - qo[b], kvh = h / (hq / hkv);
    const int32_t vis = causal ? kvlen - ql + tq + 1 : kvlen;
    const uint16_t *qr = q + ((size_t)(qo[b] + tq) * hq + h) * d;
    double *s = malloc(sizeof(double) * (size_t)(vis > 0 ? vis : 1)), mx = -INFINITY;
    const double scale = 1.0 / sqrt((double)d);
    for (int32_t j = 0; j < vis; j++) {
        const size_t base = (((size_t)pidx[pindptr[b] + j / ps] * ps + (size_t)(j % ps)) * hkv +
                             kvh) * d;
        double acc = 0;
        for (int32_t c = 0; c < d; c++)
            acc += (double)sw_bf16_to_f32(qr[c]) * sw_bf16_to_f32(pat[(base + c) % PAT]);
        s[j] = acc * scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    double sum = 0, err = 0, nrm = 0;
    for (int32_t j = 0; j < vis; j++)
        sum += (s[j] = exp(s[j] - mx));
    const uint16_t *orow = o + ((size_t)(qo[b] + tq) * hq + h) * d;
    for (int32_t c = 0; c < d; c++) {
        double ref = 0;
        for (int32_t j = 0; j < vis; j++) {
            const size_t base = (((size_t)pidx[pindptr[b] + j / ps] * ps + (size_t)(j % ps)) *
                                     hkv + kvh) * d;
            ref += s[j] * sw_bf16_to_f32(pat[(base + c + PAT / 2) % PAT]);
        }
        ref /= sum;
        const double x = sw_bf16_to_f32(orow[c]);
        err += (x - ref) * (x - ref);
        nrm += ref * ref;
    }
    free(s);
    return sqrt(err / (nrm > 0 ? nrm : 1));
}

/* The worst check_row over the first and last request, first and last
 * head, each request's last query token. */
static double check_sample(const uint16_t *q, const uint16_t *o, const int32_t *qo,
                           const int32_t *kv, int32_t B, const int32_t *pindptr,
                           const int32_t *pidx, int32_t ps, int32_t hq, int32_t hkv, int32_t d,
                           int causal)
{
    double worst = 0;
    const int32_t bs[2] = {0, B - 1}, hs[2] = {0, hq - 1};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            const int32_t b = bs[i], ql = qo[b + 1] - qo[b];
            const double e = check_row(q, o, qo, pindptr, pidx, ps, b, ql - 1, hs[k], hq, hkv, d,
                                       kv[b + 1] - kv[b], causal);
            worst = e > worst ? e : worst;
        }
    return worst;
}

/* FlashInfer on the same pages through `backend` (its FA2 backend: its
 * batch decode for one query token per request, else its paged prefill; its
 * FA3 backend: its FA3 paged prefill) where this library was built with it and
 * SPILLWAY_OPPONENT=flashinfer is set: timed interleaved with ours (*ms),
 * its output checked like ours (*err). Returns its ms, or -1 with the
 * refusal in note. */
static double time_flashinfer(sw_backend backend, sw_prefill_plan *pl,
                              const sw_prefill_tensors *t, const sw_prefill_params *p,
                              const sw_paged_kv *pk, int32_t B, const int32_t *qo,
                              const int32_t *kv, const uint16_t *qh, size_t q_elems, void *st,
                              int warmup, int reps, bench_gpu_timer *tm, double *ms, double *err,
                              char *note, size_t note_len)
{
    sw_prefill_params po = *p;
    po.backend = backend;
    sw_prefill_plan *pf = NULL;
    if (sw_prefill_plan_create_paged(&po, B, qo, pk, &pf) != SW_OK) {
        snprintf(note, note_len, "%s", sw_last_error());
        return -1;
    }
    const size_t wf = sw_prefill_plan_workspace_size(pf);
    void *wsf = wf ? bench_gpu_alloc(wf, "workspace") : NULL;
    uint16_t *of = bench_gpu_alloc(q_elems * 2, "O (flashinfer)");
    sw_prefill_tensors tf = *t;
    tf.o = of;
    tf.workspace = wsf;
    tf.workspace_bytes = wf;
    double ms_fi = -1;
    time_pair(pl, t, pf, &tf, st, warmup, reps, tm, ms, &ms_fi);
    uint16_t *ofh = malloc(q_elems * 2);
    if (bench_gpu_sync(st, "flashinfer") || bench_gpu_copy(ofh, of, q_elems * 2, st, "O"))
        exit(1);
    *err = check_sample(qh, ofh, qo, kv, B, pk->page_indptr, pk->page_indices, pk->page_size,
                        p->num_qo_heads, p->num_kv_heads, p->head_dim, p->causal);
    free(ofh);
    bench_gpu_free(of);
    bench_gpu_free(wsf);
    sw_prefill_plan_destroy(pf);
    return ms_fi;
}

static int run_case(const pcase *pc, int si, int32_t ps, int warmup, int reps, FILE *js,
                    int *first)
{
    const int32_t hq = shape_hq[si], hkv = shape_hkv[si], d = shape_d[si], B = pc->n;
    int32_t *qo = calloc((size_t)B + 1, 4), *kv = calloc((size_t)B + 1, 4);
    int32_t *pindptr = calloc((size_t)B + 1, 4), *last = calloc((size_t)B + 1, 4);
    for (int32_t b = 0; b < B; b++) {
        const int32_t len = pc->len[b];
        qo[b + 1] = qo[b] + (pc->prefill ? len : 1);
        kv[b + 1] = kv[b] + len;
        const int32_t np = (len + ps - 1) / ps;
        pindptr[b + 1] = pindptr[b] + np;
        last[b] = np ? len - (np - 1) * ps : 0;
    }
    const int32_t npages = pindptr[B];
    int32_t *pidx = malloc(sizeof(int32_t) * (size_t)npages);
    for (int32_t i = 0; i < npages; i++)
        pidx[i] = i;
    for (int32_t i = npages - 1; i > 0; i--) {
        const int32_t j = (int32_t)(rnd() * (i + 1)), t = pidx[i];
        pidx[i] = pidx[j];
        pidx[j] = t;
    }
    const size_t tok_elems = (size_t)hkv * d, pool_elems = (size_t)npages * ps * tok_elems;
    const size_t pool_bytes = pool_elems * 2, q_elems = (size_t)qo[B] * hq * d;
    const size_t kv_bytes = (size_t)kv[B] * tok_elems * 2 * 2; /* K and V read */
    uint16_t *kp = bench_gpu_alloc(pool_bytes, "K pool"), *vp = bench_gpu_alloc(pool_bytes, "V pool");
    uint16_t *qd = bench_gpu_alloc(q_elems * 2, "Q"), *od = bench_gpu_alloc(q_elems * 2, "O");
    if (!kp || !vp || !qd || !od)
        exit(1);
    void *st = bench_gpu_stream_create("stream");
    /* pools: the pattern, copied block by block (V shifted by half) */
    for (size_t off = 0; off < pool_elems; off += PAT) {
        const size_t n = pool_elems - off < PAT ? pool_elems - off : PAT;
        if (bench_gpu_copy(kp + off, pat, n * 2, st, "K pool") ||
            bench_gpu_copy(vp + off, pat + PAT / 2, (n < PAT / 2 ? n : PAT / 2) * 2, st, "V pool") ||
            (n > PAT / 2 && bench_gpu_copy(vp + off + PAT / 2, pat, (n - PAT / 2) * 2, st, "V pool")))
            exit(1);
    }
    uint16_t *qh = malloc(q_elems * 2), *oh = malloc(q_elems * 2);
    for (size_t i = 0; i < q_elems; i++)
        qh[i] = sw_f32_to_bf16((float)(rnd() * 2 - 1));
    if (bench_gpu_copy(qd, qh, q_elems * 2, st, "Q"))
        exit(1);

    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_BF16;
    p.num_qo_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = d;
    p.causal = pc->prefill;
    sw_paged_kv pk;
    sw_paged_kv_init(&pk);
    pk.page_size = ps;
    pk.layout = SW_KV_NHD;
    pk.num_pages = npages;
    pk.page_indptr = pindptr;
    pk.page_indices = pidx;
    pk.last_page_len = last;
    sw_prefill_plan *pl = NULL;
    sw_status s = sw_prefill_plan_create_paged(&p, B, qo, &pk, &pl);
    if (s != SW_OK)
        die("paged plan", s);
    const size_t ws_bytes = sw_prefill_plan_workspace_size(pl);
    void *ws = ws_bytes ? bench_gpu_alloc(ws_bytes, "workspace") : NULL;
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = qd;
    t.k = kp;
    t.v = vp;
    t.o = od;
    t.q_rows = qo[B];
    t.workspace = ws;
    t.workspace_bytes = ws_bytes;
    bench_gpu_timer tm;
    if (bench_gpu_timer_create(&tm))
        exit(1);

    double ms = 0, ms_ref = 0, ref_rate = 0, ms_fi = -1, fi_err = 0;
    double ms_beside_fi = 0; /* ours in the pair with FlashInfer (decode: = ms) */
    double ms_fa3 = -1, fa3_err = 0, ms_beside_fa3 = 0; /* its FA3 paged prefill */
    char fi_note[256] = "", fa3_note[256] = "";
    const char *ref_name = pc->prefill ? "ragged_prefill_ms" : "d2d_copy_GBps";
    if (pc->prefill) {
        /* the same keys densely: gathered once through a plan of its own */
        uint16_t *kd = bench_gpu_alloc((size_t)kv[B] * tok_elems * 2, "dense K");
        uint16_t *vd = bench_gpu_alloc((size_t)kv[B] * tok_elems * 2, "dense V");
        if (!kd || !vd)
            exit(1);
        uint16_t *hk = malloc((size_t)kv[B] * tok_elems * 2), *hv = malloc((size_t)kv[B] * tok_elems * 2);
        for (int32_t b = 0; b < B; b++)
            for (int32_t j = 0; j < kv[b + 1] - kv[b]; j++) {
                const size_t base = ((size_t)pidx[pindptr[b] + j / ps] * ps + (size_t)(j % ps)) * tok_elems;
                for (size_t c = 0; c < tok_elems; c++) {
                    hk[(size_t)(kv[b] + j) * tok_elems + c] = pat[(base + c) % PAT];
                    hv[(size_t)(kv[b] + j) * tok_elems + c] = pat[(base + c + PAT / 2) % PAT];
                }
            }
        if (bench_gpu_copy(kd, hk, (size_t)kv[B] * tok_elems * 2, st, "dense K") ||
            bench_gpu_copy(vd, hv, (size_t)kv[B] * tok_elems * 2, st, "dense V"))
            exit(1);
        free(hk);
        free(hv);
        sw_prefill_plan *pr = NULL;
        if ((s = sw_prefill_plan_create(&p, B, qo, kv, &pr)) != SW_OK)
            die("ragged plan", s);
        const size_t wr = sw_prefill_plan_workspace_size(pr);
        void *wsr = wr ? bench_gpu_alloc(wr, "workspace") : NULL;
        sw_prefill_tensors tr = t;
        tr.k = kd;
        tr.v = vd;
        tr.kv_rows = kv[B];
        tr.workspace = wsr;
        tr.workspace_bytes = wr;
        time_pair(pl, &t, pr, &tr, st, warmup, reps, &tm, &ms, &ms_ref);
        ref_rate = ms_ref;
        /* ours again, timed beside FlashInfer's paged prefill: its ratio's */
        ms_fi = time_flashinfer(SW_BACKEND_OPPONENT_FLASHINFER, pl, &t, &p, &pk, B, qo, kv, qh,
                                q_elems, st, warmup, reps, &tm, &ms_beside_fi, &fi_err, fi_note,
                                sizeof fi_note);
        /* and beside its FA3 paged prefill (what it runs on Hopper) */
        ms_fa3 = time_flashinfer(SW_BACKEND_OPPONENT_FLASHINFER_FA3, pl, &t, &p, &pk, B, qo, kv,
                                 qh, q_elems, st, warmup, reps, &tm, &ms_beside_fa3, &fa3_err,
                                 fa3_note, sizeof fa3_note);
        sw_prefill_plan_destroy(pr);
        bench_gpu_free(wsr);
        bench_gpu_free(kd);
        bench_gpu_free(vd);
    } else {
        ms_fi = time_flashinfer(SW_BACKEND_OPPONENT_FLASHINFER, pl, &t, &p, &pk, B, qo, kv, qh,
                                q_elems, st, warmup, reps, &tm, &ms, &fi_err, fi_note,
                                sizeof fi_note);
        if (ms_fi < 0)
            ms = time_runs(pl, &t, st, warmup, reps, &tm);
        ms_beside_fi = ms;
        /* and beside its FA3 paged prefill with one query row */
        ms_fa3 = time_flashinfer(SW_BACKEND_OPPONENT_FLASHINFER_FA3, pl, &t, &p, &pk, B, qo, kv,
                                 qh, q_elems, st, warmup, reps, &tm, &ms_beside_fa3, &fa3_err,
                                 fa3_note, sizeof fa3_note);
        /* copy rate over the same bytes (capped at the pool: a buffer beside it) */
        void *tmp = bench_gpu_alloc(pool_bytes, "copy buffer");
        ref_rate = tmp ? bench_gpu_copy_gbps(tmp, kp, pool_bytes, 2.0) : -1;
        bench_gpu_free(tmp);
        ms_ref = ref_rate > 0 ? kv_bytes / (ref_rate * 1e6) : -1;
    }
    if (bench_gpu_sync(st, "case") || bench_gpu_copy(oh, od, q_elems * 2, st, "O"))
        exit(1);
    /* checks: the first and last request, first and last head, last token */
    const double worst =
        check_sample(qh, oh, qo, kv, B, pindptr, pidx, ps, hq, hkv, d, pc->prefill);
    const int ok = worst < 1e-2;
    const double flops = sw_prefill_plan_flops(pl);
    if (pc->prefill)
        printf("%-8s %-11s page %3d  paged %8.3f ms %6.1f TFLOP/s  ragged %8.3f ms  paged/ragged "
               "%5.1f%%  rel_l2 %.1e %s", pc->name, shape_names[si], ps, ms, flops / ms / 1e9,
               ms_ref, 100.0 * ms_ref / ms, worst, ok ? "ok" : "FAIL");
    else
        printf("%-8s %-11s page %3d  %8.3f ms  %7.1f GB/s of KV  copy %7.1f GB/s  %5.1f%% of copy"
               "  rel_l2 %.1e %s", pc->name, shape_names[si], ps, ms, kv_bytes / (ms * 1e6),
               ref_rate, 100.0 * kv_bytes / (ms * 1e6) / ref_rate, worst, ok ? "ok" : "FAIL");
    if (ms_fi > 0)
        printf("  | flashinfer %8.3f ms (rel_l2 %.1e)  its time / ours %.2fx", ms_fi,
               fi_err, ms_fi / ms_beside_fi);
    else
        printf("  | flashinfer: not measured");
    if (ms_fa3 > 0)
        printf("  | fa3 %8.3f ms (rel_l2 %.1e)  its time / ours %.2fx", ms_fa3, fa3_err,
               ms_fa3 / ms_beside_fa3);
    else
        printf("  | fa3: not measured");
    printf("\n");
    fprintf(js, "%s{\"case\": \"%s\", \"shape\": \"%s\", \"page_size\": %d, \"kind\": \"%s\", "
            "\"ms\": %.5f, \"kv_bytes\": %zu, \"%s\": %.5f, \"ratio\": %.4f, \"tflops\": %.2f, "
            "\"max_rel_l2\": %.3e, \"ok\": %s, \"flashinfer_ms\": %.5f, "
            "\"ms_beside_flashinfer\": %.5f, "
            "\"flashinfer_max_rel_l2\": %.3e, \"flashinfer_note\": \"%s\", "
            "\"flashinfer_fa3_ms\": %.5f, \"ms_beside_flashinfer_fa3\": %.5f, "
            "\"flashinfer_fa3_max_rel_l2\": %.3e, \"flashinfer_fa3_note\": \"%s\"}",
            *first ? "" : ",\n", pc->name, shape_names[si],
            ps, pc->prefill ? "prefill" : "decode", ms, kv_bytes, ref_name,
            pc->prefill ? ms_ref : ref_rate,
            pc->prefill ? ms_ref / ms : kv_bytes / (ms * 1e6) / ref_rate,
            pc->prefill ? flops / ms / 1e9 : 0.0, worst, ok ? "true" : "false", ms_fi,
            ms_beside_fi, fi_err,
            fi_note[0] ? "not measured" : "", ms_fa3, ms_beside_fa3, fa3_err,
            fa3_note[0] ? "not measured" : "");
    *first = 0;
    bench_gpu_timer_destroy(&tm);
    sw_prefill_plan_destroy(pl);
    bench_gpu_free(ws);
    bench_gpu_free(kp);
    bench_gpu_free(vp);
    bench_gpu_free(qd);
    bench_gpu_free(od);
    bench_gpu_stream_destroy(st);
    free(qh);
    free(oh);
    free(qo);
    free(kv);
    free(pindptr);
    free(last);
    free(pidx);
    return !ok;
}

int main(int argc, char **argv)
{
    const char *case_list = NULL, *shape_list = NULL, *json = NULL;
    int64_t ps = 16, reps = 20, warmup = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, PROG ": unknown option or missing value '%s'\n%s", a, usage);
            return BENCH_USAGE;
        }
        i++;
        if (!strcmp(a, "--cases"))
            case_list = v;
        else if (!strcmp(a, "--shapes"))
            shape_list = v;
        else if (!strcmp(a, "--json"))
            json = v;
        else if (!strcmp(a, "--page"))
            BENCH_NUM(ps, 1, 256);
        else if (!strcmp(a, "--reps"))
            BENCH_NUM(reps, 1, 100000);
        else if (!strcmp(a, "--warmup"))
            BENCH_NUM(warmup, 0, 100000);
        else {
            fprintf(stderr, PROG ": unknown option '%s'\n%s", a, usage);
            return BENCH_USAGE;
        }
    }
    if (bench_check_list(PROG, "case", case_list, case_names, 6) ||
        bench_check_list(PROG, "shape", shape_list, shape_names, 2))
        return BENCH_USAGE;
    if (sw_cuda_device_count() == 0) {
        fprintf(stderr, PROG ": no usable CUDA device (this bench runs on the GPU)\n");
        return 1;
    }
    pcase all[6];
    memcpy(all, cases, sizeof all);
    for (int i = 0; i < 64; i++)
        all[1].len[i] = 4096;
    char path[4096];
    FILE *js = bench_result_open(json, "paged", path, sizeof path);
    if (!js) {
        fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
        return 1;
    }
    bench_json_begin(js, "paged", argc, argv);
    pat = malloc(PAT * 2);
    for (size_t i = 0; i < PAT; i++)
        pat[i] = sw_f32_to_bf16((float)(rnd() * 2 - 1));
    int failures = 0, first = 1;
    for (int c = 0; c < 6; c++) {
        if (!bench_in_list(case_list, all[c].name))
            continue;
        for (int si = 0; si < 2; si++)
            if (bench_in_list(shape_list, shape_names[si]))
                failures += run_case(&all[c], si, (int32_t)ps, (int)warmup, (int)reps, js, &first);
    }
    bench_json_end(js);
    free(pat);
    if (fclose(js)) {
        fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("results: %s\n", path);
    return failures ? 1 : 0;
}
