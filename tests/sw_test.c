#include "sw_test.h"

#include "attn/attn_internal.h"
#include "attn/cpu_ref.h"
#include "core/sw_core.h"
#include "core/sw_half.h"

#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

_Atomic int sw_test_failures = 0;
_Thread_local int sw_test_thread_failures = 0;

uint64_t sw_rng_next(sw_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double sw_rng_uniform(sw_rng *r) { return (double)(sw_rng_next(r) >> 11) * 0x1.0p-53; }

int32_t sw_rng_int(sw_rng *r, int32_t lo, int32_t hi)
{
    return lo + (int32_t)(sw_rng_next(r) % (uint64_t)(hi - lo + 1));
}

double sw_rng_normal(sw_rng *r)
{
    double u1 = sw_rng_uniform(r), u2 = sw_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double sw_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void put_elem(sw_dtype t, void *base, int64_t idx, float x)
{
    if (t == SW_DTYPE_F32)
        ((float *)base)[idx] = x;
    else if (t == SW_DTYPE_F16)
        ((uint16_t *)base)[idx] = sw_f32_to_f16(x);
    else
        ((uint16_t *)base)[idx] = sw_f32_to_bf16(x);
}

static void fill(sw_rng *r, sw_dtype t, void *buf, int64_t rows, int64_t stride, int64_t width)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < stride; j++) {
            /* Padding between rows gets a large value: a kernel that reads it
             * instead of real data produces a visible error. */
            double x = j < width ? sw_rng_normal(r) : 1e4;
            put_elem(t, buf, i * stride + j, (float)x);
        }
}

static int32_t pick_len(sw_rng *r, int32_t max_len)
{
    static const int32_t special[] = {0, 1, 17, 15, 31, 63, 65, 127, 129, 200};
    if (sw_rng_uniform(r) < 0.4) {
        int32_t v = special[sw_rng_int(r, 0, (int32_t)(sizeof special / sizeof special[0]) - 1)];
        return v > max_len ? max_len : v;
    }
    return sw_rng_int(r, 1, max_len);
}

/* The rest of a case once its parameters and lengths are set: buffers,
 * strides (padded rows when `strided`), random Q/K/V from r, its name. */
static void case_fill(sw_case *c, sw_rng *r, int index, int strided)
{
    const sw_prefill_params *p = &c->params;
    const sw_dtype dtype = p->dtype;
    c->total_q = c->qo_indptr[c->batch];
    c->total_kv = c->kv_indptr[c->batch];
    const int64_t dq = (int64_t)p->num_qo_heads * p->head_dim;
    const int64_t dk = (int64_t)p->num_kv_heads * p->head_dim;
    c->q_stride = dq + (strided ? 8 * sw_rng_int(r, 1, 4) : 0);
    c->o_stride = dq + (strided ? 8 * sw_rng_int(r, 0, 4) : 0);
    c->k_stride = dk + (strided ? 8 * sw_rng_int(r, 1, 4) : 0);
    c->v_stride = c->k_stride;
    const size_t es = sw_dtype_size(dtype);
    c->q = sw_aligned_alloc(64, (size_t)(c->total_q * c->q_stride) * es + 64);
    c->o = sw_aligned_alloc(64, (size_t)(c->total_q * c->o_stride) * es + 64);
    c->k = sw_aligned_alloc(64, (size_t)(c->total_kv * c->k_stride) * es + 64);
    c->v = sw_aligned_alloc(64, (size_t)(c->total_kv * c->v_stride) * es + 64);
    c->lse = sw_aligned_alloc(64, (size_t)c->total_q * (size_t)p->num_qo_heads * sizeof(float) + 64);
    fill(r, dtype, c->q, c->total_q, c->q_stride, dq);
    fill(r, dtype, c->k, c->total_kv, c->k_stride, dk);
    fill(r, dtype, c->v, c->total_kv, c->v_stride, dk);
    int n = snprintf(c->name, sizeof c->name, "seed=%llu#%d %s d%d h%d/%d %s b%d",
                     (unsigned long long)c->seed, index,
                     dtype == SW_DTYPE_BF16 ? "bf16" : dtype == SW_DTYPE_F16 ? "f16" : "f32",
                     p->head_dim, p->num_qo_heads, p->num_kv_heads,
                     p->causal ? "causal" : "full", c->batch);
    for (int32_t b = 0; b < c->batch && n < (int)sizeof c->name - 24; b++)
        n += snprintf(c->name + n, sizeof c->name - (size_t)n, " %d/%d",
                      c->qo_indptr[b + 1] - c->qo_indptr[b], c->kv_indptr[b + 1] - c->kv_indptr[b]);
    if (strided && n < (int)sizeof c->name - 10)
        snprintf(c->name + n, sizeof c->name - (size_t)n, " strided");
}

void sw_case_make(sw_case *c, uint64_t seed, int index, sw_dtype dtype, int32_t max_len)
{
    memset(c, 0, sizeof *c);
    sw_rng r = {seed * 1000003ull + (uint64_t)index};
    c->seed = seed;
    sw_prefill_params_init(&c->params);
    sw_prefill_params *p = &c->params;
    static const int32_t dims[] = {64, 128, 256};
    static const int32_t groups[] = {1, 2, 4, 8};
    p->dtype = dtype;
    p->head_dim = dims[sw_rng_int(&r, 0, 2)];
    int32_t group = groups[sw_rng_int(&r, 0, 3)];
    p->num_kv_heads = sw_rng_int(&r, 1, p->head_dim == 256 ? 1 : 2);
    p->num_qo_heads = p->num_kv_heads * group;
    p->causal = sw_rng_int(&r, 0, 1);
    p->sm_scale = sw_rng_uniform(&r) < 0.2 ? 0.05f : 0.0f;
    c->batch = sw_rng_int(&r, 1, 4);
    int prefix = sw_rng_uniform(&r) < 0.35;
    c->qo_indptr = calloc((size_t)c->batch + 1, sizeof(int32_t));
    c->kv_indptr = calloc((size_t)c->batch + 1, sizeof(int32_t));
    for (int32_t b = 0; b < c->batch; b++) {
        int32_t ql = pick_len(&r, max_len), kl;
        if (prefix)
            kl = ql + sw_rng_int(&r, 0, max_len / 2); /* prompt continuing a cached prefix */
        else if (!p->causal && sw_rng_uniform(&r) < 0.5)
            kl = pick_len(&r, max_len);
        else
            kl = ql;
        if (sw_rng_uniform(&r) < 0.05)
            kl = sw_rng_int(&r, 0, ql); /* q_len > kv_len: early causal rows see nothing */
        c->qo_indptr[b + 1] = c->qo_indptr[b] + ql;
        c->kv_indptr[b + 1] = c->kv_indptr[b] + kl;
    }
    case_fill(c, &r, index, sw_rng_uniform(&r) < 0.25);
}

void sw_case_make_shape(sw_case *c, uint64_t seed, sw_dtype dtype, int32_t head_dim,
                        int32_t num_kv_heads, int32_t group, int causal, int32_t batch,
                        const int32_t *q_lens, const int32_t *kv_lens)
{
    memset(c, 0, sizeof *c);
    sw_rng r = {seed};
    c->seed = seed;
    sw_prefill_params_init(&c->params);
    sw_prefill_params *p = &c->params;
    p->dtype = dtype;
    p->head_dim = head_dim;
    p->num_kv_heads = num_kv_heads;
    p->num_qo_heads = num_kv_heads * group;
    p->causal = causal;
    c->batch = batch;
    c->qo_indptr = calloc((size_t)batch + 1, sizeof(int32_t));
    c->kv_indptr = calloc((size_t)batch + 1, sizeof(int32_t));
    for (int32_t b = 0; b < batch; b++) {
        c->qo_indptr[b + 1] = c->qo_indptr[b] + q_lens[b];
        c->kv_indptr[b + 1] = c->kv_indptr[b] + kv_lens[b];
    }
    case_fill(c, &r, -1, 0);
}

void sw_case_ramp(sw_case *c, int32_t period, double slope, int mix)
{
    const sw_prefill_params *p = &c->params;
    const int32_t D = p->head_dim;
    const double scale = p->sm_scale != 0.0f ? p->sm_scale : 1.0 / sqrt((double)D);
    if (period < 1)
        period = 1;
    for (int64_t t = 0; t < c->total_q; t++)
        for (int32_t h = 0; h < p->num_qo_heads; h++)
            put_elem(p->dtype, c->q, t * c->q_stride + (int64_t)h * D,
                     mix ? (float)(1 - (int)((t / 16) % 3)) : 1.0f);
    for (int32_t b = 0; b < c->batch; b++) {
        const int32_t k0 = c->kv_indptr[b], kl = c->kv_indptr[b + 1] - k0;
        for (int32_t j = 0; j < kl; j++) {
            const float x = (float)(slope * (double)((kl - 1 - j) % period) / scale);
            for (int32_t h = 0; h < p->num_kv_heads; h++)
                put_elem(p->dtype, c->k, (int64_t)(k0 + j) * c->k_stride + (int64_t)h * D, x);
        }
    }
    const size_t n = strlen(c->name);
    snprintf(c->name + n, sizeof c->name - n, " ramp%g%s%s", slope,
             period < (1 << 30) ? "/saw" : "", mix ? "/mix" : "");
}

void sw_case_free(sw_case *c)
{
    free(c->qo_indptr);
    free(c->kv_indptr);
    sw_aligned_free(c->q);
    sw_aligned_free(c->k);
    sw_aligned_free(c->v);
    sw_aligned_free(c->o);
    sw_aligned_free(c->lse);
    memset(c, 0, sizeof *c);
}

void sw_case_poison(sw_case *c)
{
    const size_t es = sw_dtype_size(c->params.dtype);
    /* 0xff bytes are NaN in every float format we use. */
    memset(c->o, 0xff, (size_t)(c->total_q * c->o_stride) * es);
    memset(c->lse, 0xff, (size_t)c->total_q * (size_t)c->params.num_qo_heads * sizeof(float));
}

static void nan_at(sw_case *c, void *base, int64_t at)
{
    if (c->params.dtype == SW_DTYPE_F32)
        ((float *)base)[at] = NAN;
    else
        ((uint16_t *)base)[at] = c->params.dtype == SW_DTYPE_F16 ? 0x7e00 : 0x7fc0;
}

int sw_case_nan_put(sw_case *c, int mode, sw_nan_at *at)
{
    memset(at, 0, sizeof *at);
    at->mode = mode;
    at->b = -1;
    for (int32_t r = 0; r < c->batch && at->b < 0; r++)
        if (c->kv_indptr[r + 1] - c->kv_indptr[r] >= 2 && c->qo_indptr[r + 1] > c->qo_indptr[r])
            at->b = r;
    if (at->b < 0)
        return 0;
    const int32_t kl = c->kv_indptr[at->b + 1] - c->kv_indptr[at->b];
    const int32_t ql = c->qo_indptr[at->b + 1] - c->qo_indptr[at->b];
    const int32_t d = c->params.head_dim;
    at->hkv = c->params.num_kv_heads - 1;
    at->h = c->params.num_qo_heads - 1;
    if (mode == 3) {
        at->t = ql - 1; /* (it sees every key: bottom-right causal) */
        nan_at(c, c->q, (c->qo_indptr[at->b] + at->t) * c->q_stride + (int64_t)at->h * d + 1);
        return 1;
    }
    at->j = mode == 1 ? 0 : mode == 2 ? kl - 1 : kl / 2;
    nan_at(c, c->k, (c->kv_indptr[at->b] + at->j) * c->k_stride + (int64_t)at->hkv * d + 1);
    return 1;
}

void sw_case_poison_finite(sw_case *c, float lse_poison)
{
    memset(c->o, 0x3c, (size_t)(c->total_q * c->o_stride) * sw_dtype_size(c->params.dtype));
    for (int64_t i = 0; i < c->total_q * c->params.num_qo_heads; i++)
        c->lse[i] = lse_poison;
}

int sw_case_nan_check(const sw_case *c, const sw_nan_at *at, float lse_poison, const char *what)
{
    const sw_dtype dt = c->params.dtype;
    const int32_t d = c->params.head_dim, hq = c->params.num_qo_heads;
    const int32_t G = hq / c->params.num_kv_heads;
    int64_t nsees = 0;
    for (int32_t r = 0; r < c->batch; r++) {
        const int32_t ql = c->qo_indptr[r + 1] - c->qo_indptr[r];
        const int32_t kl = c->kv_indptr[r + 1] - c->kv_indptr[r];
        for (int32_t t = 0; t < ql; t++)
            for (int32_t h = 0; h < hq; h++) {
                const int32_t vis = sw_visible_keys(t, ql, kl, c->params.causal);
                const int sees = r == at->b && (at->mode == 3 ? t == at->t && h == at->h && vis > 0
                                                              : h / G == at->hkv && vis > at->j);
                int64_t nans = 0, nonzero = 0, inf = 0;
                for (int32_t x = 0; x < d; x++) {
                    const double v = sw_test_elem(dt, c->o, (c->qo_indptr[r] + t) * c->o_stride +
                                                                (int64_t)h * d + x);
                    nans += isnan(v);
                    inf += isinf(v);
                    nonzero += v != 0.0;
                }
                const float lse = c->lse[(c->qo_indptr[r] + t) * hq + h];
                const char *why = NULL;
                nsees += sees;
                if (sees)
                    why = !isnan(lse) ? "LSE not NaN" : nans != d ? "output not all NaN" : NULL;
                else if (vis == 0)
                    why = !(isinf(lse) && lse < 0) ? "LSE not -inf (no key)"
                          : nonzero ? "output not zeros (no key)" : NULL;
                else
                    why = !isfinite(lse) || lse == lse_poison ? "LSE not finite or unwritten"
                          : nans || inf ? "output not finite" : NULL;
                if (why) {
                    fprintf(stderr, "FAIL nan mode %d %s %s: request %d row %d head %d (sees the "
                            "NaN: %d, %d keys visible): %s (LSE %g, %lld NaN of %d)\n", at->mode,
                            what, c->name, r, t, h, sees, vis, why, (double)lse, (long long)nans, d);
                    return 1;
                }
            }
    }
    if (nsees == 0) { /* (request b's last row sees every key: never expected) */
        fprintf(stderr, "FAIL nan mode %d %s %s: no row sees the NaN\n", at->mode, what, c->name);
        return 1;
    }
    return 0;
}

sw_attn_problem sw_case_problem(const sw_case *c)
{
    sw_attn_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.dtype = c->params.dtype;
    pb.batch = c->batch;
    pb.num_qo_heads = c->params.num_qo_heads;
    pb.num_kv_heads = c->params.num_kv_heads;
    pb.head_dim = c->params.head_dim;
    pb.causal = c->params.causal;
    pb.sm_scale = c->params.sm_scale != 0.0f ? c->params.sm_scale
                                              : (float)(1.0 / sqrt((double)c->params.head_dim));
    pb.qo_indptr = c->qo_indptr;
    pb.kv_indptr = c->kv_indptr;
    pb.q = c->q;
    pb.k = c->k;
    pb.v = c->v;
    pb.o = c->o;
    pb.lse = c->lse;
    pb.q_stride = c->q_stride;
    pb.k_stride = c->k_stride;
    pb.v_stride = c->v_stride;
    pb.o_stride = c->o_stride;
    return pb;
}

double sw_test_elem(sw_dtype t, const void *base, int64_t idx)
{
    if (t == SW_DTYPE_F32)
        return ((const float *)base)[idx];
    if (t == SW_DTYPE_F16)
        return sw_f16_to_f32(((const uint16_t *)base)[idx]);
    return sw_bf16_to_f32(((const uint16_t *)base)[idx]);
}

sw_check sw_case_check(const sw_case *c, int row_sample)
{
    sw_check res = {0, 0, 0, 0};
    sw_attn_problem pb = sw_case_problem(c);
    const int32_t d = pb.head_dim;
    int32_t max_kv = 1;
    for (int32_t b = 0; b < c->batch; b++)
        if (c->kv_indptr[b + 1] - c->kv_indptr[b] > max_kv)
            max_kv = c->kv_indptr[b + 1] - c->kv_indptr[b];
    double *scratch = malloc(sizeof(double) * (size_t)max_kv);
    double *ref = malloc(sizeof(double) * (size_t)d);
    double num = 0.0, den = 0.0;
    int64_t counter = 0;
    for (int32_t b = 0; b < c->batch; b++) {
        const int32_t q0 = c->qo_indptr[b], ql = c->qo_indptr[b + 1] - q0;
        for (int32_t t = 0; t < ql; t++) {
            for (int32_t h = 0; h < pb.num_qo_heads; h++) {
                int take = row_sample <= 1 || t == 0 || t == ql - 1 || (counter++ % row_sample) == 0;
                const int64_t ob = (int64_t)(q0 + t) * c->o_stride + (int64_t)h * d;
                if (!take) {
                    /* Unsampled rows are still checked for having been written. */
                    for (int32_t x = 0; x < d; x++)
                        if (!isfinite(sw_test_elem(pb.dtype, c->o, ob + x)))
                            res.unwritten++;
                    continue;
                }
                double lse;
                sw_ref_row(&pb, b, t, h, ref, &lse, scratch);
                for (int32_t x = 0; x < d; x++) {
                    double got = sw_test_elem(pb.dtype, c->o, ob + x);
                    if (!isfinite(got)) {
                        res.unwritten++;
                        continue;
                    }
                    num += (got - ref[x]) * (got - ref[x]);
                    den += ref[x] * ref[x];
                }
                double gl = c->lse[(int64_t)(q0 + t) * pb.num_qo_heads + h];
                if (isinf(lse)) {
                    if (!(isinf(gl) && gl < 0))
                        res.lse_bad++;
                } else if (!isfinite(gl)) {
                    res.lse_bad++;
                } else if (fabs(gl - lse) > res.lse_max_abs) {
                    res.lse_max_abs = fabs(gl - lse);
                }
            }
        }
    }
    res.rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    free(scratch);
    free(ref);
    return res;
}

typedef struct pool_arg {
    void (*fn)(int, int, void *);
    void *ctx;
    atomic_int *next;
    int njobs, worker;
} pool_arg;

static void *pool_main(void *p)
{
    pool_arg *a = p;
    for (int j; (j = atomic_fetch_add(a->next, 1)) < a->njobs;)
        a->fn(j, a->worker, a->ctx);
    return NULL;
}

void sw_test_pool_run(int workers, int njobs, void (*fn)(int job, int worker, void *ctx), void *ctx)
{
    if (workers > 64)
        workers = 64;
    if (workers <= 1) {
        for (int j = 0; j < njobs; j++)
            fn(j, 0, ctx);
        return;
    }
    atomic_int next = 0;
    pthread_t th[64];
    pool_arg args[64];
    int started = 0;
    for (int w = 0; w < workers; w++) {
        args[w] = (pool_arg){fn, ctx, &next, njobs, w};
        if (w > 0 && pthread_create(&th[w], NULL, pool_main, &args[w]) == 0)
            started = w;
        else if (w > 0)
            break;
    }
    pool_main(&args[0]); /* the caller is worker 0 */
    for (int w = 1; w <= started; w++)
        pthread_join(th[w], NULL);
}

double sw_cpu_tol(sw_dtype t)
{
    return t == SW_DTYPE_F32 ? 1e-4 : t == SW_DTYPE_F16 ? 1e-3 : 1e-2;
}
