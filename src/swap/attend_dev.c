/* The device pool's operations (attend_internal.h): the call's scores,
 * passes and finalisation on the GPU (device.c and dev_*.c), host-tier
 * leases and gathers, direct tiles, the staging upload, the integrity
 * verdict at the call's end. q, o, lse are device memory; the work is
 * enqueued on the caller's stream. */
#include "attend_internal.h"
#include "swap_cuda.h"
#include "core/sw_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The device pool's view of a planned tile. */
static sw_swap_dev_tile dev_tile_of(const tile *t)
{
    sw_swap_dev_tile dt;
    dt.bi = t->bi;
    dt.n = t->n;
    dt.nmiss = t->nmiss;
    dt.buf = t->buf;
    dt.layout = 0; /* block-major: the host staging's order, uploaded as is */
    dt.blocks = t->blocks;
    dt.slots = t->slots;
    dt.miss_blocks = t->miss_blocks;
    dt.miss_slots = t->miss_slots;
    dt.lease = t->nleased ? t->lease : NULL;
    dt.hbuf = t->hbuf;
    dt.gathered = t->gathered > 0;
    dt.direct = t->direct;
    dt.land_ev = t->nleased ? t->land_ev : NULL;
    dt.miss_ev = t->nleased && t->land_ev ? t->miss_ev : NULL;
    return dt;
}

/* The tile's scatter, kernel and merge on the caller's stream. */
static sw_status dev_compute(run *R, const tile *t)
{
    sw_swap *s = R->s;
    const sw_swap_dev_tile dt = dev_tile_of(t);
    R->attended += t->n;
    return sw_swap_dev_compute(s, R->p, R->seqs[t->bi], &dt, R->stream);
}

/* Device pool: issues the gathers of the planned tiles from..upto-1 not yet
 * issued (sw_swap_dev_gather: into each tile's device staging, so they wait
 * for no compute and go out as soon as their tile is planned). */
static sw_status dev_issue(run *R, tile *tl, int ntl, int64_t from, int64_t upto)
{
    sw_swap *s = R->s;
    if (!sw_swap_dev_gathers(s))
        return SW_OK;
    const double t0 = sw_swap_now();
    sw_status st = SW_OK;
    for (int64_t j = from; j < upto && st == SW_OK; j++) {
        tile *t = &tl[j % ntl];
        if (t->gathered || !t->nleased)
            continue;
        int issued = 0;
        const sw_swap_dev_tile dt = dev_tile_of(t);
        st = sw_swap_dev_gather(s, R->p, R->seqs[t->bi], &dt, &issued);
        t->gathered = issued ? 1 : -1;
    }
    s->st.submit_seconds += sw_swap_now() - t0;
    return st;
}

/* Keys in the store's write order (offload: per kv head, K then V) into
 * the tile's host staging, block-major: the tile's stripes are one
 * contiguous upload. */
static void dev_miss_keys(run *R, tile *t, int32_t b)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    const sw_swap_seq *q = R->seqs[t->bi];
    const int32_t H = s->m.num_kv_heads;
    /* the block's 2H stripes are consecutive in the staging (kv head, then
     * K / V): one address and a stride, not a call per stripe */
    char *dst = sw_swap_dev_hstage_ptr(s, t->hbuf, t->nmiss, 0, 0);
    const size_t stride = sw_swap_dev_stage_stride(s);
    sw_store_key k = sw_swap_key_of(q, p->layer, b, 0, 0);
    sw_store_key *keys = t->keys + t->nkeys;
    void **dsts = t->dst + t->nkeys;
    for (int32_t x = 0; x < 2 * H; x++) {
        k.kv_head = (uint16_t)(x / 2);
        k.kind = (uint8_t)(x % 2);
        keys[x] = k;
        dsts[x] = dst + (size_t)x * stride;
    }
    t->nkeys += 2 * H;
}

static void dev_key_stripe(int32_t x, int32_t H, int32_t *h, int *kind)
{
    (void)H;
    *kind = x % 2;
    *h = x / 2;
}

static size_t dev_dst_bytes(const sw_swap *s)
{
    return sw_swap_dev_stage_stride(s);
}

static int dev_leases(const sw_swap *s)
{
    return sw_swap_dev_gathers(s);
}

static void dev_order_built(run *R, const int32_t *missing, int32_t n)
{
    (void)sw_swap_dev_prelease(R->s, R->seqs[R->pb], R->p->layer, missing, n);
}

/* Host-tier hits are leased and gathered by the GPU (dev_tile.c); a failed
 * lease leases nothing: the ticket reads every key. */
static void dev_before_read(run *R, tile *t)
{
    sw_swap *s = R->s;
    if (t->lease && sw_swap_dev_gathers(s)) {
        size_t nl = 0;
        if (sw_swap_dev_lease_tile(s, t->miss_blocks, t->nmiss, t->nkeys, t->keys, t->lease,
                                   t->rkeys, t->tlease, t->rmap, &nl, &t->land_ev,
                                   t->miss_ev) != SW_OK)
            nl = 0;
        t->nleased = nl;
        if (nl) {
            size_t k = 0;
            for (size_t i = 0; i < t->nkeys; i++) {
                const sw_store_lease *l = &t->lease[i];
                if (l->ptr) {
                    t->sts[i] = SW_OK;
                    t->lens[i] = l->length;
                    t->gens[i] = l->generation;
                    t->leased_bytes += l->length;
                    continue;
                }
                t->rkeys[k] = t->keys[i];
                t->rdst[k] = t->dst[i];
                t->rmap[k] = (uint32_t)i;
                k++;
            }
            t->job.n = k;
            t->job.keys = t->rkeys;
            t->job.dst = t->rdst;
            t->job.lengths = t->rlens;
            t->job.gens = t->rgens;
            t->job.statuses = t->rsts;
        }
    }
}

/* Decided once, with its leases (sw_swap_dev_direct_tile). */
static void dev_after_submit(run *R, tile *t)
{
    const sw_swap_dev_tile dt = dev_tile_of(t);
    t->direct = sw_swap_dev_direct_tile(R->s, R->p, R->seqs[t->bi], &dt);
}

/* Verified: to the device staging the tile's scatter reads. */
static sw_status dev_read_done(run *R, tile *t)
{
    return sw_swap_dev_upload(R->s, t->hbuf, t->buf, t->nmiss, t->nleased ? t->lease : NULL);
}

static sw_status dev_pass_begin(run *R)
{
    return sw_swap_dev_pass_begin(R->s, R->p, R->stream);
}

/* Finalised by the call (sw_swap_dev_pass_end). */
static sw_status dev_pass_end(run *R)
{
    (void)R;
    return SW_OK;
}

static sw_status dev_score(sw_swap *s, const sw_swap_layer *L, const void *q, int32_t q_len,
                           float *scores)
{
    SW_TRY(sw_swap_dev_enter(s));
    return sw_swap_dev_score_host(s, L, q, q_len, scores);
}

/* Device pool: q, o, lse are device memory; the work is enqueued on
 * `stream`; the host waits for the scores only (and for the fp32 outputs of
 * a sparse check). */
static sw_status dev_attend(run *R, sw_swap_attend_result *res, void *stream)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    int64_t nres = 0;
    sw_swap_dev_note_layer(s, p->layer);
    if (sw_swap_dev_fast_eligible(s, p, R->seqs, &nres)) {
        const double t0 = sw_swap_now();
        sw_status fst = sw_swap_dev_enter(s);
        if (fst == SW_OK)
            fst = sw_swap_dev_fast_attend(s, p, R->seqs, nres, res, stream);
        if (fst == SW_STATUS_CUDA)
            s->failed = 1; /* the context or a queued copy is broken */
        s->st.compute_seconds += sw_swap_now() - t0;
        sw_swap_run_free(R, p->batch);
        return fst;
    }
    if (p->sparse_top_k <= 0) /* the prelease thread gets a job (below) */
        sw_swap_dev_nudge(s, 1);
    const int32_t Hq = s->m.num_qo_heads, D = s->m.head_dim;
    const int64_t hrows = (int64_t)p->q_indptr[p->batch] * Hq;
    int64_t total_blocks = 0;
    for (int32_t b = 0; b < p->batch; b++)
        total_blocks += R->seqs[b]->layers[p->layer].nblocks;
    R->stream = stream;
    R->nsplit = 1;
    void *unused = NULL;
    sw_status st = sw_swap_run_tables(R, 0, &unused);
    if (st == SW_OK)
        st = sw_swap_dev_enter(s);
    sw_swap_dev_tl_phase(s, 'e');
    /* A host buffer here would fault inside a kernel (a sticky error that
     * ends the context): refuse it up front. */
    if (st == SW_OK && hrows > 0 &&
        (!sw_cuda_is_device_ptr(p->q) || !sw_cuda_is_device_ptr(p->o) ||
         (p->lse && !sw_cuda_is_device_ptr(p->lse))))
        st = sw_fail(SW_STATUS_INVALID, "device pool: q (%p), o (%p) and lse (%p) must be device "
                     "memory", p->q, p->o, (void *)p->lse);
    const int sparse = p->sparse_top_k > 0;
    if (st == SW_OK && !sparse && sw_swap_dev_preleases(s)) {
        /* The first sequence's missing blocks are known before its scores
         * (the order puts them after the resident ones, in block order,
         * build_order): their leases and landing copies start now, and
         * build_order's post of the same job keeps it. */
        int32_t bi = 0;
        while (bi < p->batch && p->q_indptr[bi + 1] == p->q_indptr[bi])
            bi++;
        if (bi < p->batch) {
            sw_swap_dev_tl_phase(s, 'g');
            const int32_t n = sw_swap_missing_of(&R->seqs[bi]->layers[p->layer], NULL, R->order);
            sw_swap_dev_tl_phase(s, 'm');
            (void)sw_swap_dev_prelease(s, R->seqs[bi], p->layer, R->order, n);
            sw_swap_dev_tl_phase(s, 'P');
            sw_swap_dev_nudge(s, 2);
        }
    }
    if (st == SW_OK) {
        const double t0 = sw_swap_now();
        st = sw_swap_dev_attend_begin(s, p, R->seqs, R->scores, stream);
        s->st.score_seconds += sw_swap_now() - t0;
        sw_swap_dev_tl_phase(s, 'b');
    }
    const uint64_t h0 = s->st.hits, m0 = s->st.misses;
    float *exact = NULL, *got = NULL;
    double rel = -1.0;
    if (st == SW_OK && sparse && p->sparse_check) {
        const size_t n = (size_t)(hrows > 0 ? hrows : 1) * (size_t)D;
        exact = malloc(sizeof(float) * n);
        got = malloc(sizeof(float) * n);
        if (!exact || !got)
            st = sw_fail(SW_STATUS_NO_MEMORY, "sparse check buffers");
        if (st == SW_OK)
            st = sw_swap_run_pass(R, 0);
        if (st == SW_OK)
            st = sw_swap_dev_pass_end(s, p, NULL, NULL, exact, stream);
    }
    if (st == SW_OK) {
        R->attended = 0;
        st = sw_swap_run_pass(R, sparse);
    }
    /* every tile planned: the next call's first blocks land behind this
     * call's copies (counted in finish_seconds) */
    const double tf0 = sw_swap_now();
    sw_swap_dev_tl_phase(s, 'R');
    if (st == SW_OK && !sparse && s->tune.land_ahead_mb > 0) {
        sw_swap_dev_land_ahead(s, p, R->seqs);
        sw_swap_dev_tl_phase(s, 'h');
    }
    if (st == SW_OK)
        st = sw_swap_dev_pass_end(s, p, p->o, p->lse, exact ? got : NULL, stream);
    sw_swap_dev_tl_phase(s, 'F');
    if (st == SW_OK && exact) {
        double num = 0.0, den = 0.0;
        for (int64_t i = 0; i < hrows * D; i++) {
            const double d = (double)got[i] - exact[i];
            num += d * d;
            den += (double)exact[i] * exact[i];
        }
        rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    }
    free(exact);
    free(got);
    {
        /* the gathers' CRC verdict and the leases' release, on every path
         * (a failed call still drops the slots of stripes that failed) */
        sw_status v = sw_swap_dev_attend_verdict(s, stream, st == SW_OK);
        sw_swap_dev_tl_phase(s, 'V');
        if (st == SW_OK)
            st = v;
        /* recorded even after a failure: the next call waits for what was
         * enqueued */
        sw_status e = sw_swap_dev_attend_end(s, stream);
        if (st == SW_OK)
            st = e;
        if (v == SW_STATUS_CUDA || e == SW_STATUS_CUDA)
            s->failed = 1; /* even when the call had failed before for another reason */
    }
    s->st.finish_seconds += sw_swap_now() - tf0;
    if (st == SW_STATUS_CUDA)
        s->failed = 1; /* the context or a queued copy is broken */
    sw_swap_run_account(R, res, h0, m0, total_blocks, rel);
    sw_swap_run_free(R, p->batch);
    return st;
}


const sw_swap_pool_ops sw_swap_dev_ops = {
    dev_attend,       dev_score,       dev_leases,      dev_order_built,
    dev_miss_keys,    dev_key_stripe,  dev_dst_bytes,   dev_before_read,
    dev_after_submit, dev_read_done,   dev_issue,       dev_pass_begin,
    dev_compute,      dev_pass_end,
};
