/* The host pool's operations (attend_internal.h): slots in host memory,
 * reads staged in slot layout and swapped in when a tile computes, tiles
 * computed on the CPU (a tile cut into (kv head, key range) tasks on the
 * engine's thread pool, merged in a fixed order), scores and outputs on
 * the host. */
#include "attend_internal.h"
#include "core/sw_core.h"
#include "core/sw_half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t v_offset(const sw_swap *s)
{
    return (size_t)s->m.num_kv_heads * s->stripe_elems * 2;
}

/* A tile's work: tasks (kv head, key range). The first range of a kv head
 * updates the call's state in place (no other task touches those rows);
 * the others start from an empty state in R->part and are merged after the
 * pool returns, in range order (deterministic). */
typedef struct tjob {
    run *R;
    const tile *t;
    sw_swap_kernel_fn fn;
    int32_t nsplit;
    int32_t ql, r0;
    int64_t len;
} tjob;

static float *part_of(const run *R, int32_t h, int32_t c, int32_t nsplit, int32_t ql,
                      int32_t G, int32_t D)
{
    const size_t rows = (size_t)ql * (size_t)G;
    return R->part + ((size_t)h * (size_t)(nsplit - 1) + (size_t)(c - 1)) * rows * (size_t)(D + 2);
}

static void tile_task(void *ctx, int task, int tid)
{
    const tjob *J = ctx;
    run *R = J->R;
    const sw_swap *s = R->s;
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t D = s->m.head_dim;
    const int32_t h = task / J->nsplit, c = task % J->nsplit;
    const int32_t n = J->t->n;
    const int32_t b0 = (int32_t)((int64_t)n * c / J->nsplit);
    const int32_t b1 = (int32_t)((int64_t)n * (c + 1) / J->nsplit);
    sw_swap_kargs a;
    a.D = D;
    a.G = G;
    a.ql = J->ql;
    a.causal = R->p->causal;
    a.len = J->len;
    a.q = R->qf + ((int64_t)J->r0 * Hq + (int64_t)h * G) * D;
    a.qs = Hq;
    a.blk = R->kb + (size_t)h * (size_t)s->tile_blocks + (size_t)b0;
    a.nblk = b1 - b0;
    a.bpad = s->bpad;
    if (c == 0) {
        const int64_t si = (int64_t)J->r0 * Hq + (int64_t)h * G;
        a.m = R->m + si;
        a.l = R->l + si;
        a.o = R->acc + si * D;
        a.rs = Hq;
    } else {
        const size_t rows = (size_t)J->ql * (size_t)G;
        float *pm = part_of(R, h, c, J->nsplit, J->ql, G, D);
        a.m = pm;
        a.l = pm + rows;
        a.o = pm + 2 * rows;
        a.rs = G;
        for (size_t i = 0; i < rows; i++) {
            a.m[i] = -INFINITY;
            a.l[i] = 0.0f;
        }
        memset(a.o, 0, sizeof(float) * rows * (size_t)D);
    }
    if (a.nblk > 0)
        J->fn(&a, &s->ts[tid]);
}

/* Host pool: the tile's verified reads become its slots' bytes. Slots are
 * assigned when a tile is planned (up to `prefetch` tiles early) but written
 * only here, in tile order, so a slot that a later tile took over still
 * holds what every earlier tile reads from it until those have computed:
 * the victims are what they would be with one tile of read-ahead. */
static void commit_tile(run *R, const tile *t)
{
    sw_swap *s = R->s;
    for (int32_t m = 0; m < t->nmiss; m++) {
        uint8_t **st = &s->stage[(size_t)t->hbuf * (size_t)s->tile_blocks + (size_t)m];
        uint8_t *x = s->slots[t->miss_slots[m]].data;
        s->slots[t->miss_slots[m]].data = *st;
        *st = x;
    }
}

static sw_status host_compute(run *R, const tile *t)
{
    sw_swap *s = R->s;
    commit_tile(R, t);
    const sw_swap_attend_params *p = R->p;
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t D = s->m.head_dim, B = s->m.block_size;
    const sw_swap_seq *q = R->seqs[t->bi];
    const sw_swap_layer *L = &q->layers[p->layer];
    tjob J;
    J.R = R;
    J.t = t;
    J.fn = sw_swap_tile_kernel(s);
    J.r0 = p->q_indptr[t->bi];
    J.ql = p->q_indptr[t->bi + 1] - J.r0;
    J.len = L->nblocks ? (int64_t)(L->nblocks - 1) * B + L->blk[L->nblocks - 1].valid : 0;
    J.nsplit = R->nsplit < t->n ? R->nsplit : t->n;
    if (J.nsplit < 1)
        J.nsplit = 1;
    for (int32_t i = 0; i < t->n; i++) {
        const int32_t b = t->blocks[i];
        const sw_swap_blk *e = &L->blk[b];
        const uint8_t *data = s->slots[t->slots[i]].data;
        const size_t es = sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
        R->attended++;
        for (int32_t h = 0; h < H; h++) {
            sw_swap_kblk *k = &R->kb[(size_t)h * (size_t)s->tile_blocks + (size_t)i];
            k->k = data + (size_t)h * s->stripe_elems * es;
            k->v = data + v_offset(s) + (size_t)h * s->stripe_elems * es;
            k->valid = e->valid;
            k->dtype = e->dtype;
            k->k_scale = e->k_scale;
            k->v_scale = e->v_scale;
            k->tok0 = (int64_t)b * B;
        }
    }
    sw_swap_tpool_run(&s->tp, tile_task, &J, H * J.nsplit);
    /* merge the other key ranges' states, in order */
    const size_t rows = (size_t)J.ql * (size_t)G;
    for (int32_t h = 0; h < H; h++)
        for (int32_t c = 1; c < J.nsplit; c++) {
            const float *pm = part_of(R, h, c, J.nsplit, J.ql, G, D);
            const float *pl = pm + rows, *po = pm + 2 * rows;
            for (int32_t r = 0; r < J.ql; r++)
                for (int32_t g = 0; g < G; g++) {
                    const size_t pi = (size_t)r * (size_t)G + (size_t)g;
                    const float mt = pm[pi];
                    if (mt == -INFINITY)
                        continue; /* no visible key in that range */
                    const int64_t si = (int64_t)(J.r0 + r) * Hq + (int64_t)h * G + g;
                    const float mg = R->m[si];
                    const float mn = mg > mt ? mg : mt;
                    const float cg = mg == -INFINITY ? 0.0f : exp2f(mg - mn);
                    const float ct = exp2f(mt - mn);
                    float *o = R->acc + si * D;
                    const float *ot = po + pi * (size_t)D;
                    for (int32_t x = 0; x < D; x++)
                        o[x] = o[x] * cg + ot[x] * ct;
                    R->l[si] = R->l[si] * cg + pl[pi] * ct;
                    R->m[si] = mn;
                }
        }
    return SW_OK;
}

/* Into a staging buffer in slot layout, swapped into the slot when the
 * tile computes (commit_tile): K of every kv head, then V. */
static void host_miss_keys(run *R, tile *t, int32_t b)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    const sw_swap_seq *q = R->seqs[t->bi];
    const sw_swap_blk *e = &q->layers[p->layer].blk[b];
    const int32_t H = s->m.num_kv_heads;
    const size_t es = sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
    uint8_t *stage = s->stage[(size_t)t->hbuf * (size_t)s->tile_blocks + (size_t)t->nmiss];
    for (int kind = 0; kind < 2; kind++)
        for (int32_t h = 0; h < H; h++) {
            t->keys[t->nkeys] = sw_swap_key_of(q, p->layer, b, h, kind);
            t->dst[t->nkeys] = stage + (kind ? v_offset(s) : 0) +
                               (size_t)h * s->stripe_elems * es;
            t->nkeys++;
        }
}

static void host_key_stripe(int32_t x, int32_t H, int32_t *h, int *kind)
{
    *kind = x / H;
    *h = x % H;
}

static size_t host_dst_bytes(const sw_swap *s)
{
    return s->stripe_elems * 2;
}

static int host_leases(const sw_swap *s)
{
    (void)s;
    return 0;
}

static void host_order_built(run *R, const int32_t *missing, int32_t n)
{
    (void)R;
    (void)missing;
    (void)n;
}

static void host_tile_nothing(run *R, tile *t)
{
    (void)R;
    (void)t;
}

static sw_status host_read_done(run *R, tile *t)
{
    (void)R;
    (void)t;
    return SW_OK;
}

static sw_status host_issue(run *R, tile *tl, int ntl, int64_t from, int64_t upto)
{
    (void)R;
    (void)tl;
    (void)ntl;
    (void)from;
    (void)upto;
    return SW_OK;
}

static sw_status host_pass_begin(run *R)
{
    const sw_swap_attend_params *p = R->p;
    const int32_t Hq = R->s->m.num_qo_heads, D = R->s->m.head_dim;
    const int64_t rows = (int64_t)p->q_indptr[p->batch] * Hq;
    for (int64_t i = 0; i < rows; i++) {
        R->m[i] = -INFINITY;
        R->l[i] = 0.0f;
    }
    memset(R->acc, 0, sizeof(float) * (size_t)rows * (size_t)D);
    return SW_OK;
}

/* Leaves the normalised fp32 outputs in R->acc and the LSE in R->m. */
static sw_status host_pass_end(run *R)
{
    const sw_swap_attend_params *p = R->p;
    const int32_t Hq = R->s->m.num_qo_heads, D = R->s->m.head_dim;
    const int64_t rows = (int64_t)p->q_indptr[p->batch] * Hq;
    /* finalise: acc / sum, lse = ln2 * (m + log2(sum)) */
    for (int64_t i = 0; i < rows; i++) {
        float *o = R->acc + i * D;
        if (R->l[i] > 0.0f) {
            const float inv = 1.0f / R->l[i];
            for (int32_t c = 0; c < D; c++)
                o[c] *= inv;
            R->m[i] = (R->m[i] + log2f(R->l[i])) * 0.69314718055994531f;
        } else if (isnan(R->l[i])) { /* a NaN score or value: NaN, not "no key" */
            for (int32_t c = 0; c < D; c++)
                o[c] = NAN;
            R->m[i] = NAN;
        } else {
            for (int32_t c = 0; c < D; c++)
                o[c] = 0.0f;
            R->m[i] = -INFINITY;
        }
    }
    return SW_OK;
}
static sw_status host_score(sw_swap *s, const sw_swap_layer *L, const void *q, int32_t q_len,
                            float *scores)
{
    const int64_t hrows = (int64_t)q_len * s->m.num_qo_heads;
    float *qp = malloc(sizeof(float) * (size_t)hrows * (size_t)s->c.predictor_rank);
    if (!qp)
        return sw_fail(SW_STATUS_NO_MEMORY, "projected queries");
    sw_swap_project(s, q, hrows, qp);
    sw_swap_score_layer(s, L, qp, q_len, scores);
    free(qp);
    return SW_OK;
}

/* The call on the CPU: q, o, lse are host memory. */
static sw_status host_attend(run *R, sw_swap_attend_result *res, void *stream)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    sw_status st = SW_OK;
    (void)stream;
    const int32_t Hq = s->m.num_qo_heads, D = s->m.head_dim, Rk = s->c.predictor_rank;
    const int64_t nrows = p->q_indptr[p->batch];
    const int64_t hrows = nrows * Hq;
    int64_t total_blocks = 0;
    for (int32_t b = 0; b < p->batch; b++)
        total_blocks += R->seqs[b]->layers[p->layer].nblocks;
    /* key ranges per (tile, kv head): enough tasks for every thread */
    {
        const int32_t H = s->m.num_kv_heads, nt = s->tp.nthreads;
        int32_t ns = (nt + H - 1) / H;
        if (ns > s->tile_blocks)
            ns = s->tile_blocks;
        R->nsplit = ns < 1 ? 1 : ns;
    }
    int32_t maxql = 0;
    for (int32_t b = 0; b < p->batch; b++)
        if (p->q_indptr[b + 1] - p->q_indptr[b] > maxql)
            maxql = p->q_indptr[b + 1] - p->q_indptr[b];
    if (R->nsplit <= 1 || maxql <= 0)
        R->nsplit = 1;
    /* the softmax state, the tile's blocks, the key ranges' states and the
     * projected queries, from the engine's scratch */
    const size_t hr = (size_t)(hrows > 0 ? hrows : 1);
    const size_t n_qf = sw_align_up(sizeof(float) * hr * (size_t)D, 64);
    const size_t n_ml = sw_align_up(sizeof(float) * hr, 64);
    const size_t n_kb =
        sw_align_up(sizeof(sw_swap_kblk) * (size_t)s->m.num_kv_heads * (size_t)s->tile_blocks, 64);
    const size_t n_part =
        R->nsplit > 1 ? sw_align_up(sizeof(float) * (size_t)s->m.num_kv_heads *
                                        (size_t)(R->nsplit - 1) * (size_t)maxql *
                                        (size_t)(Hq / s->m.num_kv_heads) * (size_t)(D + 2),
                                    64)
                      : 0;
    const size_t n_qp = sw_align_up(sizeof(float) * hr * (size_t)Rk, 64);
    uint8_t *x = NULL;
    if (sw_swap_run_tables(R, 2 * n_qf + 2 * n_ml + n_kb + n_part + n_qp, (void **)&x) != SW_OK) {
        sw_swap_run_free(R, p->batch);
        return sw_fail(SW_STATUS_NO_MEMORY, "attend scratch for %lld rows", (long long)nrows);
    }
    R->qf = (float *)(void *)x;
    R->acc = (float *)(void *)(x += n_qf);
    R->m = (float *)(void *)(x += n_qf);
    R->l = (float *)(void *)(x += n_ml);
    R->kb = (sw_swap_kblk *)(void *)(x += n_ml);
    R->part = n_part ? (float *)(void *)(x + n_kb) : NULL;
    float *qp = (float *)(void *)(x + n_kb + n_part);
    const uint16_t *q16 = p->q;
    const double ts0 = sw_swap_now();
    {
        /* scores in the log2 domain: exp2 in the kernels */
        const float scale = p->sm_scale != 0.0f ? p->sm_scale : 1.0f / sqrtf((float)D);
        const float qs = scale * 1.4426950408889634f;
        for (int64_t i = 0; i < hrows * D; i++)
            R->qf[i] = sw_bf16_to_f32(q16[i]) * qs;
    }
    if (hrows > 0)
        sw_swap_project(s, q16, hrows, qp);
    for (int32_t b = 0; b < p->batch && st == SW_OK; b++) {
        const sw_swap_layer *L = &R->seqs[b]->layers[p->layer];
        const int32_t ql = p->q_indptr[b + 1] - p->q_indptr[b];
        if (ql > 0)
            sw_swap_score_layer(s, L, qp + (size_t)p->q_indptr[b] * Hq * Rk, ql, R->scores[b]);
        else
            for (int32_t i = 0; i < L->nblocks; i++)
                R->scores[b][i] = -INFINITY;
    }
    s->st.score_seconds += sw_swap_now() - ts0;
    const uint64_t h0 = s->st.hits, m0 = s->st.misses;
    double rel = -1.0;
    const int sparse = p->sparse_top_k > 0;
    float *exact = NULL;
    if (st == SW_OK && sparse && p->sparse_check) {
        st = sw_swap_run_pass(R, 0);
        if (st == SW_OK) {
            exact = malloc(sizeof(float) * (size_t)(hrows > 0 ? hrows : 1) * (size_t)D);
            if (!exact)
                st = sw_fail(SW_STATUS_NO_MEMORY, "sparse check buffer");
            else
                memcpy(exact, R->acc, sizeof(float) * (size_t)hrows * (size_t)D);
        }
    }
    if (st == SW_OK) {
        R->attended = 0; /* the result reports the blocks of the returned pass */
        st = sw_swap_run_pass(R, sparse);
    }
    if (st == SW_OK) {
        uint16_t *o16 = p->o;
        for (int64_t i = 0; i < hrows * D; i++)
            o16[i] = sw_f32_to_bf16(R->acc[i]);
        if (p->lse)
            for (int64_t i = 0; i < hrows; i++)
                p->lse[i] = R->m[i];
        if (exact) {
            double num = 0.0, den = 0.0;
            for (int64_t i = 0; i < hrows * D; i++) {
                const double d = (double)R->acc[i] - exact[i];
                num += d * d;
                den += (double)exact[i] * exact[i];
            }
            rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
        }
    }
    free(exact);
    sw_swap_run_account(R, res, h0, m0, total_blocks, rel);
    sw_swap_run_free(R, p->batch);
    return st;
}


const sw_swap_pool_ops sw_swap_host_ops = {
    host_attend,       host_score,         host_leases,        host_order_built,
    host_miss_keys,    host_key_stripe,    host_dst_bytes,     host_tile_nothing,
    host_tile_nothing, host_read_done,     host_issue,         host_pass_begin,
    host_compute,      host_pass_end,
};
