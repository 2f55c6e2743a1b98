/* Helpers shared by the swap engine tests: a temporary store, synthetic KV
 * sequences (BF16 or FP8 per block) kept dequantised in double for the fp64
 * reference, offload, and the reference attention itself. Header-only so
 * each test stays one program built by sw_add_test. */
#ifndef TEST_SWAP_UTIL_H
#define TEST_SWAP_UTIL_H

#include "test_store_util.h"
#include "swap/swap_internal.h"
#include "core/sw_half.h"

#include <math.h>

/* One sequence's KV in one layer, dequantised: k/v[tok][H][D]; the dtype of
 * each block; scales. */
typedef struct tsw_layer {
    int64_t len, cap;
    double *k, *v;
} tsw_layer;

typedef struct tsw_seq {
    uint64_t id;
    int32_t L, H, D, B;
    tsw_layer *layers;
} tsw_seq;

static inline void tsw_seq_init(tsw_seq *q, uint64_t id, int32_t L, int32_t H, int32_t D,
                                int32_t B)
{
    memset(q, 0, sizeof *q);
    q->id = id;
    q->L = L;
    q->H = H;
    q->D = D;
    q->B = B;
    q->layers = calloc((size_t)L, sizeof *q->layers);
}

static inline void tsw_seq_free(tsw_seq *q)
{
    for (int32_t l = 0; l < q->L; l++) {
        free(q->layers[l].k);
        free(q->layers[l].v);
    }
    free(q->layers);
    memset(q, 0, sizeof *q);
}

static inline void tsw_reserve(tsw_seq *q, tsw_layer *y, int64_t len)
{
    if (len <= y->cap)
        return;
    int64_t nc = y->cap ? y->cap * 2 : 256;
    while (nc < len)
        nc *= 2;
    size_t row = (size_t)q->H * (size_t)q->D;
    y->k = realloc(y->k, sizeof(double) * row * (size_t)nc);
    y->v = realloc(y->v, sizeof(double) * row * (size_t)nc);
    y->cap = nc;
}

/* Quantises the raw values of block `blk` (tokens [blk*B, min(len, ..)) of
 * raw k/v [tok][H][D] in float) to `dt`, offloads it and stores the
 * dequantised values. raw arrays are indexed by absolute token. */
static inline sw_status tsw_offload_block(sw_swap *s, tsw_seq *q, int32_t layer, int32_t blk,
                                          const float *rk, const float *rv, int64_t len,
                                          sw_swap_kv_dtype dt)
{
    const int32_t H = q->H, D = q->D, B = q->B;
    const int64_t t0 = (int64_t)blk * B;
    int32_t valid = (int32_t)(len - t0 < B ? len - t0 : B);
    size_t es = dt == SW_SWAP_KV_BF16 ? 2 : 1;
    size_t bytes = (size_t)H * B * D * es;
    uint8_t *kb = calloc(1, bytes), *vb = calloc(1, bytes);
    float ks = 1.0f, vs = 1.0f;
    if (dt == SW_SWAP_KV_FP8_E4M3) {
        float mk = 0, mv = 0;
        for (int32_t t = 0; t < valid; t++)
            for (int32_t i = 0; i < H * D; i++) {
                float a = fabsf(rk[(t0 + t) * H * D + i]), b = fabsf(rv[(t0 + t) * H * D + i]);
                mk = a > mk ? a : mk;
                mv = b > mv ? b : mv;
            }
        ks = mk > 0 ? mk / 448.0f : 1.0f;
        vs = mv > 0 ? mv / 448.0f : 1.0f;
    }
    tsw_layer *y = &q->layers[layer];
    tsw_reserve(q, y, t0 + valid);
    for (int32_t h = 0; h < H; h++)
        for (int32_t t = 0; t < valid; t++)
            for (int32_t c = 0; c < D; c++) {
                const int64_t src = ((t0 + t) * H + h) * D + c;
                const size_t dsti = ((size_t)h * B + (size_t)t) * (size_t)D + (size_t)c;
                double dk, dv;
                if (dt == SW_SWAP_KV_BF16) {
                    uint16_t a = sw_f32_to_bf16(rk[src]), b = sw_f32_to_bf16(rv[src]);
                    ((uint16_t *)kb)[dsti] = a;
                    ((uint16_t *)vb)[dsti] = b;
                    dk = sw_bf16_to_f32(a);
                    dv = sw_bf16_to_f32(b);
                } else {
                    uint8_t a = sw_f32_to_e4m3(rk[src] / ks), b = sw_f32_to_e4m3(rv[src] / vs);
                    kb[dsti] = a;
                    vb[dsti] = b;
                    dk = (double)(sw_e4m3_to_f32(a) * ks);
                    dv = (double)(sw_e4m3_to_f32(b) * vs);
                }
                y->k[src] = dk;
                y->v[src] = dv;
            }
    if (t0 + valid > y->len)
        y->len = t0 + valid;
    /* Poison the padding rows: the engine must never read them. */
    if (dt == SW_SWAP_KV_BF16)
        for (size_t i = 0; i < bytes / 2; i++)
            if ((int32_t)((i / (size_t)D) % (size_t)B) >= valid)
                ((uint16_t *)kb)[i] = ((uint16_t *)vb)[i] = 0x7fc0; /* NaN */
    if (dt == SW_SWAP_KV_FP8_E4M3)
        for (size_t i = 0; i < bytes; i++)
            if ((int32_t)((i / (size_t)D) % (size_t)B) >= valid)
                kb[i] = vb[i] = 0x7f; /* E4M3 NaN */
    sw_swap_block b;
    sw_swap_block_init(&b);
    b.dtype = dt;
    b.valid_tokens = valid;
    b.k = kb;
    b.v = vb;
    b.k_bytes = b.v_bytes = bytes;
    b.k_scale = ks;
    b.v_scale = vs;
    sw_status st = sw_swap_offload(s, q->id, layer, blk, &b);
    free(kb);
    free(vb);
    return st;
}

typedef struct tsw_ref_job {
    const tsw_seq *q;
    const tsw_layer *y;
    int32_t Hq, ql;
    const uint16_t *qrows;
    int causal;
    double scale, *out, *lse;
} tsw_ref_job;

/* One (query row, head) of tsw_reference. */
static inline void tsw_reference_row(int job, int worker, void *ctx)
{
    (void)worker;
    const tsw_ref_job *R = ctx;
    const tsw_layer *y = R->y;
    const int32_t H = R->q->H, D = R->q->D, G = R->Hq / H, Hq = R->Hq;
    const int32_t i = job / Hq, h = job % Hq, kh = h / G;
    int64_t nv = y->len;
    if (R->causal) {
        int64_t lim = (int64_t)i + y->len - R->ql + 1;
        nv = lim < 0 ? 0 : lim < nv ? lim : nv;
    }
    double *o = R->out + ((size_t)i * Hq + h) * D;
    for (int32_t c = 0; c < D; c++)
        o[c] = 0;
    if (nv == 0) {
        R->lse[i * Hq + h] = -INFINITY;
        return;
    }
    double *sc = malloc(sizeof(double) * (size_t)nv);
    double mx = -INFINITY;
    for (int64_t j = 0; j < nv; j++) {
        double a = 0;
        for (int32_t c = 0; c < D; c++)
            a += (double)sw_bf16_to_f32(R->qrows[((size_t)i * Hq + h) * D + c]) *
                 y->k[(j * H + kh) * D + c];
        sc[j] = a * R->scale;
        mx = sc[j] > mx ? sc[j] : mx;
    }
    double sum = 0;
    for (int64_t j = 0; j < nv; j++) {
        double pj = exp(sc[j] - mx);
        sum += pj;
        for (int32_t c = 0; c < D; c++)
            o[c] += pj * y->v[(j * H + kh) * D + c];
    }
    for (int32_t c = 0; c < D; c++)
        o[c] /= sum;
    R->lse[i * Hq + h] = mx + log(sum);
    free(sc);
}

/* fp64 reference over all tokens of layer `layer` of q for query rows
 * qrows[ql][Hq][D] (bf16), causal bottom-right; out fp64 [ql][Hq][D]. The
 * (row, head) pairs of a large problem are spread over the CPUs (the
 * reference is most of the GPU tests' time). */
static inline void tsw_reference(const tsw_seq *q, int32_t layer, int32_t Hq,
                                 const uint16_t *qrows, int32_t ql, int causal, double scale,
                                 double *out, double *lse)
{
    tsw_ref_job R = {q, &q->layers[layer], Hq, ql, qrows, causal, scale, out, lse};
    const int64_t work = (int64_t)ql * Hq * q->layers[layer].len * q->D;
    int workers = work >= ((int64_t)1 << 22) ? sw_cpu_count() : 1;
    if (workers > 16)
        workers = 16;
    sw_test_pool_run(workers, ql * Hq, tsw_reference_row, &R);
}

/* fp64 reference of one query row (bf16 [Hq][D]) over the keys of blocks
 * kb[0..n) of layer `layer` of q alone, in that order, not causal -- what
 * sparse attention keeping those blocks computes; out [Hq][D], lse [Hq].
 * Returns the relative L2 distance of got (bf16 [Hq][D]) from it. */
static inline double tsw_rel_l2_over_blocks(const tsw_seq *q, int32_t layer, int32_t Hq,
                                            const uint16_t *qrow, const int32_t *kb, int n,
                                            const uint16_t *got)
{
    const tsw_layer *y = &q->layers[layer];
    const int32_t H = q->H, D = q->D, B = q->B;
    tsw_seq kept;
    tsw_seq_init(&kept, q->id, 1, H, D, B);
    int64_t nk = 0;
    for (int i = 0; i < n; i++) {
        const int64_t t0 = (int64_t)kb[i] * B, t1 = t0 + B < y->len ? t0 + B : y->len;
        tsw_reserve(&kept, &kept.layers[0], nk + (t1 > t0 ? t1 - t0 : 0));
        for (int64_t t = t0; t < t1; t++, nk++) {
            memcpy(kept.layers[0].k + (size_t)nk * H * D, y->k + (size_t)t * H * D,
                   sizeof(double) * H * D);
            memcpy(kept.layers[0].v + (size_t)nk * H * D, y->v + (size_t)t * H * D,
                   sizeof(double) * H * D);
        }
    }
    kept.layers[0].len = nk;
    double *ro = malloc(sizeof(double) * (size_t)Hq * D), *rl = malloc(sizeof(double) * Hq);
    tsw_reference(&kept, 0, Hq, qrow, 1, 0, 1.0 / sqrt((double)D), ro, rl);
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < (size_t)Hq * D; i++) {
        const double g = sw_bf16_to_f32(got[i]);
        e2 += (g - ro[i]) * (g - ro[i]);
        r2 += ro[i] * ro[i];
    }
    free(ro);
    free(rl);
    tsw_seq_free(&kept);
    return sqrt(e2 / (r2 > 0 ? r2 : 1));
}

/* Whether a sparse call's reported sparse_rel_l2 is the relative L2
 * distance of its output got (bf16 [Hq][D], one query row qrow of layer
 * `layer`) from the exact attention over all nb blocks, as computed here
 * (within 2e-3 + 5%); prints both when not. */
static inline int tsw_sparse_rel_ok(const tsw_seq *q, int32_t layer, int32_t Hq,
                                    const uint16_t *qrow, int32_t nb, const uint16_t *got,
                                    double reported, const char *what)
{
    int32_t *all = malloc(sizeof(int32_t) * (size_t)nb);
    for (int32_t b = 0; b < nb; b++)
        all[b] = b;
    const double exact = tsw_rel_l2_over_blocks(q, layer, Hq, qrow, all, nb, got);
    free(all);
    const int ok = fabs(reported - exact) <= 2e-3 + 0.05 * exact;
    if (!ok)
        printf("%s: sparse_rel_l2 %.4g reported, %.4g computed here\n", what, reported, exact);
    return ok;
}

/* An engine of `slots` slots, tiles of 2 blocks, rank 16; persist:
 * sw_swap_config.persist_manifests; tuning: NULL or overrides. */
static inline sw_swap *tsw_engine(sw_store *st, int32_t layers, int32_t kv_heads,
                                  int32_t qo_heads, int32_t head_dim, int32_t block,
                                  sw_swap_pool_kind pool, int32_t persist, int32_t slots,
                                  const sw_swap_tuning *tuning)
{
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = layers;
    m.num_kv_heads = kv_heads;
    m.num_qo_heads = qo_heads;
    m.head_dim = head_dim;
    m.block_size = block;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = slots;
    c.tile_blocks = 2;
    c.predictor_rank = 16;
    c.pool = pool;
    c.persist_manifests = persist;
    sw_swap *s = NULL;
    CHECK_STATUS(sw_swap_create_tuned(&m, &c, st, tuning, &s), SW_OK);
    return s;
}

/* ... with a small pool (4 slots, the library's tuning), so that most
 * tiles read. */
static inline sw_swap *tsw_small_engine(sw_store *st, int32_t layers, int32_t kv_heads,
                                        int32_t qo_heads, int32_t head_dim, int32_t block,
                                        sw_swap_pool_kind pool, int32_t persist)
{
    return tsw_engine(st, layers, kv_heads, qo_heads, head_dim, block, pool, persist, 4, NULL);
}

/* A store sized for `stripe` bytes per stripe and about `stripes` stripes. */
static inline sw_store *tsw_store_open(const char *dir, uint32_t stripe, uint64_t stripes,
                                       uint64_t host_tier_bytes)
{
    sw_store_config c = ts_config(dir, stripe, 64, (stripes + 63) / 64 + 4);
    c.host_tier_bytes = host_tier_bytes;
    sw_store *s = NULL;
    sw_status st = sw_store_open(&c, &s);
    if (st != SW_OK) {
        fprintf(stderr, "store open failed: %s (%s)\n", sw_status_str(st), sw_last_error());
        return NULL;
    }
    return s;
}

/* The needle: key = c x query of head hq (BF16), planted at token `tok` of
 * kv head hq / G, with c chosen from the engine's own projection P so that
 * its block must rank first. A block's score is the max over its tokens and
 * the query heads of their group of (q P).(k P); by Cauchy-Schwarz every
 * other key scores at most max_h |q_h P| x max_k |k P|, while the needle
 * scores c |q_hq P|^2 (BF16 rounding moves that by ~2^-8). c is 4 x that
 * bound / |q_hq P|^2, so the ranking is a property of the data, not luck of
 * the random projection. Writes the needle into rk and returns c. */
static inline double tsw_plant_needle(const sw_swap *s, const uint16_t *q, int32_t Hq,
                                      int32_t hq, float *rk, int64_t len, int32_t H, int32_t D,
                                      int64_t tok)
{
    sw_swap_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (sw_swap_get_stats(s, &st) != SW_OK)
        return 0;
    const int32_t R = st.predictor_rank;
    float *P = malloc(sizeof(float) * (size_t)D * (size_t)R);
    if (!P || sw_swap_get_projection(s, P, (size_t)D * (size_t)R) != SW_OK) {
        free(P);
        return 0;
    }
    /* |x P| of a row x (float) */
#define TSW_PNORM(get, out)                                                                  do {                                                                                         double n2_ = 0;                                                                          for (int32_t j_ = 0; j_ < R; j_++) {                                                         double a_ = 0;                                                                           for (int32_t c_ = 0; c_ < D; c_++)                                                           a_ += (double)(get) * (double)P[(size_t)c_ * R + j_];                                n2_ += a_ * a_;                                                                      }                                                                                        (out) = sqrt(n2_);                                                                   } while (0)
    double qmax = 0, kmax = 0, qn = 0;
    for (int32_t h = 0; h < Hq; h++) {
        double n;
        TSW_PNORM(sw_bf16_to_f32(q[(size_t)h * D + c_]), n);
        qmax = n > qmax ? n : qmax;
        if (h == hq)
            qn = n;
    }
    for (int64_t t = 0; t < len; t++)
        for (int32_t h = 0; h < H; h++) {
            /* keys are stored as BF16: bound the rounded values */
            const float *k = rk + ((size_t)t * H + (size_t)h) * D;
            double n;
            TSW_PNORM(sw_bf16_to_f32(sw_f32_to_bf16(k[c_])), n);
            kmax = n > kmax ? n : kmax;
        }
#undef TSW_PNORM
    free(P);
    const double c = qn > 0 ? 4.0 * qmax * kmax / (qn * qn) : 0;
    const int32_t hk = hq / (Hq / H);
    for (int32_t x = 0; x < D; x++)
        rk[((size_t)tok * H + (size_t)hk) * D + x] =
            (float)(c * sw_bf16_to_f32(q[(size_t)hq * D + x]));
    return c;
}

#endif
