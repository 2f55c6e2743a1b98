/* The device pool's per-call and per-tile work on the caller's stream and
 * the engine's: workspace and descriptors (grown, kept from call to call),
 * scores, host-tier gathers, scatter, tile kernels (direct or staged),
 * merges and finalisation. */
#include "dev_internal.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"
#include "core/sw_half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sw_status merge_behind(sw_swap_dev *d, const sw_cuda_swap_tile_args *a, int32_t nr,
                              void *cs, int kp);
static sw_status timing_event(sw_swap_dev *d, int32_t i, void **ev);

/* A direct tile's CUDA calls (launcher thread, or the caller's without it). */
sw_status sw_swap_dev_launch_direct(sw_swap_dev *d, const launch_job *j)
{
    /* its partial buffer, once the merge that read it last ran; and after
     * the tile on the other stream whose slots it may take (prev_tile) */
    if (j->first) {
        SW_TRY(sw_cuda_swap_stream_wait(j->cs, d->ev_mdone[j->kp]));
        if (j->kprev >= 0)
            SW_TRY(sw_cuda_swap_stream_wait(j->cs, d->ev_kdone[j->kprev]));
    }
    if (j->land_ev) /* its landed stripes' copies */
        SW_TRY(sw_cuda_swap_stream_wait(j->cs, j->land_ev));
    sw_swap_tl_mark(d, j->cs, 'c', j->tag);
    if (j->first)
        SW_TRY(sw_swap_desc_up(d, j->bo, j->end - j->bo, j->cs));
    void *e0 = NULL, *e1 = NULL;
    if (d->timing) {
        SW_TRY(timing_event(d, 2 * d->tev_used, &e0));
        SW_TRY(timing_event(d, 2 * d->tev_used + 1, &e1));
        SW_TRY(sw_cuda_swap_event_record(e0, j->cs));
    }
    SW_TRY(sw_cuda_swap_tile_direct(&j->A, j->cs));
    if (d->timing) {
        SW_TRY(sw_cuda_swap_event_record(e1, j->cs));
        d->tev_used++;
    }
    sw_swap_tl_mark(d, j->cs, 'C', j->tag / 10);
    if (d->merge_chunks <= 0 || !j->ranged) /* a whole tile: one merge */
        return j->last ? merge_behind(d, &j->A.t, 1, j->cs, j->kp) : SW_OK;
    /* The tile's chunks merged in fixed ranges of merge_chunks, each behind
     * the first launch whose chunks complete it (the last range behind the
     * last launch): the call's last launch then leaves a merge of at most
     * one range after the last copy, not one of the tile's every chunk (~30
     * us on the H200), and the fold order depends on the tile
     * alone, not on where its landing launches fell (which timing decides).
     * The whole ranges a launch completes are merged together, each as it
     * would be alone (sw_cuda_swap_merge_ranges: one launch pair, not one a
     * range, ~17 us each on the H200, that trailed the call's last copy).
     * Launches of a tile come in chunk order, on one stream. */
    const int32_t nchunks = j->A.t.nchunks;
    const int32_t covered =
        j->last ? nchunks : j->A.c0 + (j->A.nch > 0 ? j->A.nch : nchunks - j->A.c0);
    if (j->first)
        d->merged = 0;
    while (d->merged < covered) {
        const int32_t whole = (covered - d->merged) / d->merge_chunks;
        const int32_t nr = whole > 0 ? whole : 1;
        const int32_t n = whole > 0 ? d->merge_chunks : covered - d->merged;
        if (whole == 0 && !j->last)
            break; /* a range the next launch completes */
        sw_cuda_swap_tile_args g = j->A.t;
        g.part += (size_t)d->merged * sw_cuda_swap_chunk_floats(g.H, g.nrg, g.D);
        g.nchunks = n;
        SW_TRY(merge_behind(d, &g, nr, j->cs, j->kp));
        d->merged += nr * n;
    }
    return SW_OK;
}


/* --------------------------------------------------------- workspace -- */
/* Descriptor space (pinned, mirrored on the device) handed out in 16-byte
 * units during one call. */
static void *desc_take(sw_swap_dev *d, size_t bytes, size_t *off)
{
    bytes = sw_align_up(bytes, 16);
    if (d->desc_used + bytes > d->desc_bytes)
        return NULL;
    *off = d->desc_used;
    d->desc_used += bytes;
    return d->desc_host + *off;
}

static sw_status ensure_desc(sw_swap_dev *d, size_t bytes)
{
    if (bytes <= d->desc_bytes)
        return SW_OK;
    size_t nb = d->desc_bytes ? 2 * d->desc_bytes : 65536;
    while (nb < bytes)
        nb *= 2;
    sw_cuda_host_free(d->desc_host);
    sw_cuda_swap_free(d->desc_dev);
    d->desc_host = NULL;
    d->desc_dev = NULL;
    d->desc_bytes = 0;
    SW_TRY(sw_cuda_host_alloc((void **)&d->desc_host, nb));
    SW_TRY(sw_cuda_swap_alloc((void **)&d->desc_dev, nb));
    d->desc_bytes = nb;
    return SW_OK;
}

static sw_status ensure_ws(sw_swap_dev *d, size_t floats)
{
    if (floats <= d->ws_floats)
        return SW_OK;
    size_t n = d->ws_floats ? 2 * d->ws_floats : (1u << 20);
    while (n < floats)
        n *= 2;
    sw_cuda_swap_free(d->ws);
    d->ws = NULL;
    d->ws_floats = 0;
    SW_TRY(sw_cuda_swap_alloc((void **)&d->ws, sizeof(float) * n));
    d->ws_floats = n;
    return SW_OK;
}

sw_status sw_swap_dev_attend_begin(sw_swap *s, const sw_swap_attend_params *p,
                                   sw_swap_seq *const *seqs, float **scores, void *stream)
{
    sw_swap_dev *d = s->dev;
    /* descriptors read in place this call when its first job (posted before
     * this, attend_dev) lands blocks: its copies would queue the uploads */
    d->zc = d->pl && d->pl->job_nland > 0;
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t D = s->m.head_dim, R = s->c.predictor_rank;
    const int64_t rows = p->q_indptr[p->batch];
    const int64_t hrows = rows * Hq;
    int64_t total = 0;
    size_t part = 0;
    size_t p2 = 0; /* the split merge's parts: as many as sw_cuda_swap_merge_split takes */
    for (int32_t b = 0; b < p->batch; b++) {
        total += seqs[b]->layers[p->layer].nblocks;
        const int32_t ql = p->q_indptr[b + 1] - p->q_indptr[b];
        const int64_t nrg = ((int64_t)ql * G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG;
        const int64_t np = sw_cuda_swap_merge_parts((int64_t)ql * G * H, d->sms);
        /* and with fixed merge ranges, the parts of a tile's every range
         * (sw_cuda_swap_merge_ranges: a range's parts, at most
         * merge_chunks / 16, side by side) */
        int64_t nparts = np;
        if (np >= 2 && d->merge_chunks > 0) {
            const int64_t per = d->merge_chunks / 16 < np ? d->merge_chunks / 16 : np;
            const int64_t ranges = (s->tile_blocks + d->merge_chunks - 1) / d->merge_chunks;
            nparts = ranges * per > nparts ? ranges * per : nparts;
        }
        const size_t need2 =
            np >= 2 ? (size_t)nparts * sw_cuda_swap_chunk_floats(H, (int32_t)nrg, D) : 0;
        p2 = need2 > p2 ? need2 : p2;
        const size_t need = sw_swap_dev_part_floats(ql, s->tile_blocks, H, G, D, d->ctas);
        part = need > part ? need : part;
    }
    if (d->direct) {
        /* a direct tile's partials: one per block and kv head (a CTA a
         * block, one row group: it is 4 warps, so occupancy comes from CTAs) */
        const size_t dp = (size_t)s->tile_blocks * sw_cuda_swap_chunk_floats(H, 1, D);
        part = dp > part ? dp : part;
    }
    d->hrows = hrows;
    d->part_floats = part;
    SW_TRY(sw_swap_dev_wait_done(d));
    d->ntl = 0;
    sw_swap_tl_mark(d, stream, 'B', 0);
    for (int32_t i = 0; d->pre && i < d->nhstage; i++)
        d->pre[i].set = 0; /* descriptors of a call that ended early: stale */
    /* m, l, acc, qp, scores, part, two fp32 outputs (sparse check) */
    const size_t hr = (size_t)(hrows > 0 ? hrows : 1);
    const size_t o_m = 0, o_l = o_m + sw_align_up(hr, 4), o_acc = o_l + sw_align_up(hr, 4);
    const size_t o_qp = o_acc + hr * (size_t)D, o_sc = o_qp + hr * (size_t)R;
    const size_t o_part = o_sc + sw_align_up((size_t)total + 1, 4);
    const size_t o_f32 = o_part + (d->direct ? SW_SWAP_NPART : 1) * part;
    const size_t o_p2 = o_f32 + (p->sparse_top_k > 0 && p->sparse_check ? hr * (size_t)D : 0);
    if (!d->direct)
        p2 = 0;
    const size_t need = o_p2 + p2;
    SW_TRY(ensure_ws(d, need));
    d->d_m = d->ws + o_m;
    d->d_l = d->ws + o_l;
    d->d_acc = d->ws + o_acc;
    d->d_qp = d->ws + o_qp;
    d->d_scores = d->ws + o_sc;
    d->d_part = d->ws + o_part;
    for (int i = 0; i < SW_SWAP_NPART; i++)
        d->d_partk[i] = d->direct ? d->ws + o_part + (size_t)i * part : NULL;
    d->d_f32 = d->ws + o_f32;
    d->d_part2 = p2 ? d->ws + o_p2 : NULL;
    d->part2_floats = p2;
    /* descriptors: scored blocks, 2 passes of tile blocks and fills, scores */
    const size_t nb = (size_t)total + 1;
    /* gathers: per pass (two with a sparse check) every stripe of every
     * block at most, and at most one per host-tier entry (a pass leases a
     * key once and holds its leases to the end of the call) */
    const size_t passes = p->sparse_top_k > 0 && p->sparse_check ? 2 : 1;
    size_t gmax = nb * 2 * (size_t)H;
    if (d->gather) {
        const size_t he = sw_store_host_entries(s->store);
        gmax = he < gmax ? he : gmax;
    }
    const size_t gbytes = d->gather ? passes * gmax * sizeof(sw_cuda_swap_gather_item) : 0;
    const size_t dbytes = sw_align_up(nb * sizeof(sw_cuda_swap_sblk), 16) +
                          2 * (nb + 2 * (size_t)p->batch + 64) *
                              (sizeof(sw_cuda_swap_blk) + sizeof(sw_cuda_swap_fill) + 32) +
                          gbytes + sw_align_up(nb * sizeof(float), 16) + 4096;
    SW_TRY(ensure_desc(d, dbytes));
    d->desc_used = 0;
    size_t so = 0, fo = 0;
    float *sh = desc_take(d, nb * sizeof(float), &fo);
    sw_cuda_swap_sblk *sb = desc_take(d, nb * sizeof(sw_cuda_swap_sblk), &so);
    if (!sh || !sb)
        return sw_fail(SW_STATUS_INTERNAL, "device descriptors: %zu bytes too few", d->desc_bytes);
    d->scores_host = sh;
    int64_t k = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        const sw_swap_layer *L = &seqs[b]->layers[p->layer];
        for (int32_t i = 0; i < L->nblocks; i++, k++) {
            const sw_swap_blk *e = &L->blk[i];
            sb[k].entry = e->valid > 0 && e->dtype == SW_SWAP_KV_BF16 ? e->dproj : -1;
            sb[k].valid = e->valid;
            sb[k].row0 = p->q_indptr[b];
            sb[k].ql = p->q_indptr[b + 1] - p->q_indptr[b];
        }
    }
    /* Offloads before this call must have projected their keys. */
    if (d->offload_pending)
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_offload));
    if (total > 0 && hrows > 0) {
        SW_TRY(sw_swap_desc_up(d, so, (size_t)total * sizeof *sb, stream)); /* sb: desc_host + so */
        SW_TRY(sw_cuda_swap_project(d->P, D, R, p->q, hrows, d->d_qp, stream));
        SW_TRY(sw_cuda_swap_score(d->d_qp, d->arena,
                                  (const sw_cuda_swap_sblk *)(DESC_K(d) + so),
                                  (int32_t)total, H, G, s->m.block_size, R, d->d_scores,
                                  stream));
        SW_TRY(sw_cuda_swap_copy(sh, d->d_scores, (size_t)total * sizeof(float), stream));
        SW_TRY(sw_cuda_stream_sync(stream));
    } else {
        for (int64_t i = 0; i < total; i++)
            sh[i] = -INFINITY;
    }
    k = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        const sw_swap_layer *L = &seqs[b]->layers[p->layer];
        const int32_t ql = p->q_indptr[b + 1] - p->q_indptr[b];
        for (int32_t i = 0; i < L->nblocks; i++, k++)
            scores[b][i] = ql > 0 ? sh[k] : -INFINITY;
    }
    return SW_OK;
}

sw_status sw_swap_dev_pass_begin(sw_swap *s, const sw_swap_attend_params *p, void *stream)
{
    sw_swap_dev *d = s->dev;
    SW_TRY(sw_cuda_swap_state_init(d->d_m, d->d_l, d->d_acc, d->hrows, s->m.head_dim, stream));
    if (d->direct) {
        /* the tile streams start after the state's initialisation (and
         * after everything before it on the call's stream) */
        d->ptile = 0;
        d->pissued = 1;
        SW_TRY(sw_cuda_swap_event_record(d->ev_pass, stream));
        for (int i = 0; i < 2; i++)
            SW_TRY(sw_cuda_swap_stream_wait(d->pstream[i], d->ev_pass));
        SW_TRY(sw_cuda_swap_stream_wait(d->mstream, d->ev_pass));
        /* every partial buffer free */
        for (int i = 0; i < SW_SWAP_NPART; i++)
            SW_TRY(sw_cuda_swap_event_record(d->ev_mdone[i], stream));
    }
    return SW_OK;
}

static sw_status timing_event(sw_swap_dev *d, int32_t i, void **ev)
{
    if (i >= d->tev_cap) {
        int32_t nc = d->tev_cap ? 2 * d->tev_cap : 64;
        while (nc <= i)
            nc *= 2;
        void **n = realloc(d->tev, sizeof(void *) * (size_t)nc);
        if (!n)
            return sw_fail(SW_STATUS_NO_MEMORY, "timing events");
        d->tev = n;
        d->tev_cap = nc;
    }
    while (d->ntev <= i) {
        SW_TRY(sw_cuda_swap_event_create(&d->tev[d->ntev], 1));
        d->ntev++;
    }
    *ev = d->tev[i];
    return SW_OK;
}

/* Gather items of the tile's leased stripes into gd (room for every one),
 * each with its record (grec) for the verdict. */
static sw_status gather_items(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                              const sw_swap_dev_tile *t, int to_stage,
                              sw_cuda_swap_gather_item *gd, int32_t *n)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, B = s->m.block_size, D = s->m.head_dim;
    const sw_swap_layer *L = &q->layers[p->layer];
    const size_t spb = 2 * (size_t)H;
    int32_t ng = 0;
    for (int32_t m = 0; m < t->nmiss; m++) {
        const sw_swap_blk *e = &L->blk[t->miss_blocks[m]];
        const size_t es = sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
        for (size_t x = 0; x < spb; x++) {
            const sw_store_lease *l = &t->lease[(size_t)m * spb + x];
            if (!l->ptr)
                continue;
            /* block-major key order (plan_tile): x = h * 2 + kind */
            const int32_t h = (int32_t)(x / 2), kind = (int32_t)(x % 2);
            sw_cuda_swap_gather_item *g = &gd[ng++];
            g->src = l->ptr;
            /* into the tile's device staging (the stripe's place there,
             * scattered with the block), or straight into its slot */
            g->dst = to_stage ? ((uint64_t)m * spb + x) * d->stage_stride
                              : (uint64_t)t->miss_slots[m] * s->slot_bytes +
                                    (kind ? d->v_off : 0) +
                                    (uint64_t)h * (uint64_t)B * (uint64_t)D * es;
            g->length = l->length; /* = valid rows x D x es: finish_read checked it */
            g->crc_raw = sw_swap_crc_raw(&d->crc, l->crc, l->length);
            g->id = (uint32_t)d->ngrec;
            g->pad = 0;
            const gather_rec r = {q, p->layer, t->miss_blocks[m], t->miss_slots[m], h, kind,
                                  l->entry, l->generation};
            SW_TRY(sw_swap_dev_grec_push(d, &r));
        }
    }
    *n = ng;
    return SW_OK;
}

/* The tile's descriptors in the pinned descriptor space: its blocks, its
 * fills (blocks scattered from the staging: every missing block when its
 * stripes were gathered ahead into the staging, else those not wholly
 * leased) and, when not gathered ahead, its gather items. Offsets of each
 * and the end of the span to upload. */
static sw_status build_desc(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                            const sw_swap_dev_tile *t, int gathered, size_t *bo_o, size_t *fo_o,
                            size_t *go_o, size_t *end_o, int32_t *nfill_o, int32_t *ngather_o,
                            uint64_t *kv_o)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim;
    const sw_swap_layer *L = &q->layers[p->layer];
    const size_t spb = 2 * (size_t)H; /* stripes per block */
    int32_t nfill = 0, ngather = 0;
    for (int32_t m = 0; m < t->nmiss; m++) {
        int32_t leased = 0;
        for (size_t x = 0; t->lease && x < spb; x++)
            leased += t->lease[(size_t)m * spb + x].ptr != NULL;
        if (!gathered)
            ngather += leased;
        /* gathered ahead: the whole block is in the staging */
        nfill += gathered || (size_t)leased < spb;
    }
    size_t bo = 0, fo = 0, go = 0;
    sw_cuda_swap_blk *bd = desc_take(d, sizeof(sw_cuda_swap_blk) * (size_t)t->n, &bo);
    sw_cuda_swap_fill *fd = nfill > 0
                                ? desc_take(d, sizeof(sw_cuda_swap_fill) * (size_t)nfill, &fo)
                                : NULL;
    sw_cuda_swap_gather_item *gd =
        ngather > 0 ? desc_take(d, sizeof(*gd) * (size_t)ngather, &go) : NULL;
    if (!bd || (nfill > 0 && !fd) || (ngather > 0 && !gd))
        return sw_fail(SW_STATUS_INTERNAL, "device descriptors exhausted (%zu of %zu bytes)",
                       d->desc_used, d->desc_bytes);
    uint64_t kv_bytes = 0;
    for (int32_t i = 0; i < t->n; i++) {
        const sw_swap_blk *e = &L->blk[t->blocks[i]];
        memset(&bd[i], 0, sizeof bd[i]);
        bd[i].slot = t->slots[i];
        bd[i].block = t->blocks[i];
        bd[i].valid = e->valid;
        bd[i].dtype = e->dtype;
        bd[i].k_scale = e->k_scale;
        bd[i].v_scale = e->v_scale;
        kv_bytes += 2 * (uint64_t)H * (uint64_t)e->valid * (uint64_t)D *
                    sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
    }
    int32_t nf = 0, ng = 0;
    if (ngather > 0)
        SW_TRY(gather_items(s, p, q, t, 0, gd, &ng));
    for (int32_t m = 0; m < t->nmiss; m++) {
        const sw_swap_blk *e = &L->blk[t->miss_blocks[m]];
        size_t leased = 0;
        for (size_t x = 0; t->lease && x < spb; x++)
            leased += t->lease[(size_t)m * spb + x].ptr != NULL;
        if (leased == spb && !gathered)
            continue; /* nothing of it in the staging */
        /* the slot the tile planned, not the block's current one: a tile
         * planned since (read-ahead) may already have evicted this block */
        fd[nf].slot = t->miss_slots[m];
        fd[nf].m = m;
        fd[nf].valid = e->valid;
        fd[nf].dtype = e->dtype;
        nf++;
    }
    /* fills and gathers follow the blocks in the descriptor space: one copy */
    *end_o = ngather > 0 ? go + sizeof(*gd) * (size_t)ngather
                       : nfill > 0 ? fo + sizeof(sw_cuda_swap_fill) * (size_t)nfill
                                   : bo + sizeof(sw_cuda_swap_blk) * (size_t)t->n;
    *bo_o = bo;
    *fo_o = fo;
    *go_o = go;
    *nfill_o = nfill;
    *ngather_o = ngather;
    *kv_o = kv_bytes;
    return SW_OK;
}

/* 1 when tile t goes to the direct kernel: direct tiles on, a missing
 * block in it (a tile of resident blocks goes to the faster tile kernels:
 * the direct kernel's CTAs of one block each are made for PCIe reads),
 * nothing of it in the staging, every stripe of its missing blocks leased at
 * the length its block has, BF16 blocks only, and a shape the kernel takes. */
static int direct_tile(const sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                       const sw_swap_dev_tile *t)
{
    const sw_swap_dev *d = s->dev;
    if (!d->direct || t->gathered || t->nmiss == 0 || !t->lease)
        return 0;
    const int32_t H = s->m.num_kv_heads, G = s->m.num_qo_heads / H, D = s->m.head_dim;
    const int64_t ql = p->q_indptr[t->bi + 1] - p->q_indptr[t->bi];
    const int32_t nrg = (int32_t)((ql * G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG);
    if (!sw_cuda_swap_direct_ok(D, s->m.block_size, nrg))
        return 0;
    const sw_swap_layer *L = &q->layers[p->layer];
    for (int32_t i = 0; i < t->n; i++)
        if (L->blk[t->blocks[i]].dtype != SW_SWAP_KV_BF16)
            return 0;
    const size_t spb = 2 * (size_t)H;
    for (int32_t m = 0; m < t->nmiss; m++) {
        const size_t want = (size_t)L->blk[t->miss_blocks[m]].valid * (size_t)D * 2;
        for (size_t x = 0; x < spb; x++) {
            const sw_store_lease *l = &t->lease[(size_t)m * spb + x];
            if (!l->ptr || l->length != want)
                return 0;
        }
    }
    return 1;
}

int sw_swap_dev_direct_tile(const sw_swap *s, const sw_swap_attend_params *p,
                            const sw_swap_seq *q, const sw_swap_dev_tile *t)
{
    return s->dev && direct_tile(s, p, q, t);
}

sw_status sw_swap_dev_gather(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                             const sw_swap_dev_tile *t, int *issued)
{
    sw_swap_dev *d = s->dev;
    *issued = 0;
    if (t->direct)
        return SW_OK; /* the direct kernel reads it when the tile computes */
    if (!d->gather || !t->lease || t->hbuf < 0 || t->hbuf >= d->nhstage || t->buf < 0 ||
        t->buf >= d->nhstage)
        return SW_OK;
    const size_t spb = 2 * (size_t)s->m.num_kv_heads;
    const sw_swap_layer *L = &q->layers[p->layer];
    int32_t ngather = 0;
    for (int32_t m = 0; m < t->nmiss; m++) {
        /* Issued before finish_read has checked the leases: a length other
         * than the block's would write past its stripe, so such a tile
         * waits for that check (which fails the call) on the old path. */
        const sw_swap_blk *e = &L->blk[t->miss_blocks[m]];
        const size_t want = (size_t)e->valid * (size_t)s->m.head_dim *
                            sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
        size_t leased = 0;
        for (size_t x = 0; x < spb; x++) {
            const sw_store_lease *l = &t->lease[(size_t)m * spb + x];
            if (!l->ptr)
                continue;
            if (l->length != want)
                return SW_OK;
            leased++;
        }
        ngather += (int32_t)leased;
    }
    if (ngather == 0)
        return SW_OK;
    size_t go = 0;
    sw_cuda_swap_gather_item *gd = desc_take(d, sizeof(*gd) * (size_t)ngather, &go);
    if (!gd)
        return sw_fail(SW_STATUS_INTERNAL, "device descriptors exhausted (%zu of %zu bytes)",
                       d->desc_used, d->desc_bytes);
    int32_t n = 0;
    SW_TRY(gather_items(s, p, q, t, 1, gd, &n));
    struct dev_pre *pr = &d->pre[t->hbuf];
    int32_t ng0 = 0;
    size_t go0 = 0;
    SW_TRY(build_desc(s, p, q, t, 1, &pr->bo, &pr->fo, &go0, &pr->end, &pr->nfill, &ng0,
                      &pr->kv_bytes));
    void *gs = d->gstream[d->gnext];
    d->gnext ^= 1;
    /* into the tile's device staging, once the scatter of the tile that
     * used it before (a ring's length earlier) has run; the tile's
     * descriptors go up first, on the same stream */
    SW_TRY(sw_cuda_swap_stream_wait(gs, d->ev_stage[t->buf]));
    if (t->land_ev) /* its landed stripes' copies */
        SW_TRY(sw_cuda_swap_stream_wait(gs, t->land_ev));
    SW_TRY(sw_swap_desc_up(d, pr->bo, pr->end - pr->bo, gs));
    pr->set = 1;
    sw_cuda_swap_gather_args ga;
    memset(&ga, 0, sizeof ga);
    ga.g = gd; /* pinned: the kernel reads the items over PCIe, no upload */
    ga.n = n;
    ga.pool = d->stage[t->buf];
    ga.bad = d->d_bad;
    ga.bad_cap = SW_SWAP_BAD_CAP;
    ga.ctas = d->gather_ctas;
    d->gissued = 1; /* from here the verdict waits for the gather streams */
    sw_swap_tl_mark(d, gs, 'g', t->hbuf);
    SW_TRY(sw_cuda_swap_gather(&ga, gs));
    sw_swap_tl_mark(d, gs, 'G', t->hbuf);
    SW_TRY(sw_cuda_swap_event_record(d->ev_g[t->hbuf], gs));
    *issued = 1;
    return SW_OK;
}

/* Tile t through the direct kernel on stream cs, its partials in part. */
/* The tile kernels' arguments both tile paths share: the sequence's rows,
 * shapes, state and partials (nchunks: a direct tile's one per block, else
 * sw_swap_dev_chunks'), checked against the partials planned. The caller
 * sets blk. */
static sw_status tile_args_of(const sw_swap *s, const sw_swap_attend_params *p,
                              const sw_swap_seq *q, const sw_swap_dev_tile *t, float *part,
                              int direct, sw_cuda_swap_tile_args *a)
{
    const sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t D = s->m.head_dim, B = s->m.block_size;
    const sw_swap_layer *L = &q->layers[p->layer];
    const int32_t r0 = p->q_indptr[t->bi];
    const int32_t ql = p->q_indptr[t->bi + 1] - r0;
    memset(a, 0, sizeof *a);
    a->pool = d->pool;
    a->slot_bytes = s->slot_bytes;
    a->v_off = d->v_off;
    a->nblk = t->n;
    a->q = (const uint16_t *)p->q + (size_t)r0 * (size_t)Hq * (size_t)D;
    a->ql = ql;
    a->Hq = Hq;
    a->H = H;
    a->G = G;
    a->D = D;
    a->B = B;
    a->len = L->nblocks ? (int64_t)(L->nblocks - 1) * B + L->blk[L->nblocks - 1].valid : 0;
    a->causal = p->causal;
    const float scale = p->sm_scale != 0.0f ? p->sm_scale : 1.0f / sqrtf((float)D);
    a->qscale = scale * 1.4426950408889634f;
    a->nrg = (int32_t)(((int64_t)ql * G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG);
    a->nchunks = direct ? t->n : sw_swap_dev_chunks(t->n, H, a->nrg, d->ctas);
    if ((size_t)a->nchunks * sw_cuda_swap_chunk_floats(H, a->nrg, D) > d->part_floats)
        return sw_fail(SW_STATUS_INTERNAL, "tile partials: %d chunks x %d row groups exceed "
                       "the %zu floats planned", a->nchunks, a->nrg, d->part_floats);
    a->part = part;
    a->row0 = r0;
    a->m = d->d_m;
    a->l = d->d_l;
    a->acc = d->d_acc;
    return SW_OK;
}

/* Direct mode: the merge of the tile just enqueued on cs (partials in
 * buffer kp) on the merge stream, after it: nr ranges of a->nchunks chunks
 * from a->part on, in order. */
static sw_status merge_behind(sw_swap_dev *d, const sw_cuda_swap_tile_args *a, int32_t nr,
                              void *cs, int kp)
{
    SW_TRY(sw_cuda_swap_event_record(d->ev_kdone[kp], cs));
    SW_TRY(sw_cuda_swap_stream_wait(d->mstream, d->ev_kdone[kp]));
    SW_TRY(sw_cuda_swap_merge_ranges(a, nr, d->d_part2, d->d_part2 ? d->part2_floats : 0, d->sms,
                                     d->mstream));
    sw_swap_tl_mark(d, d->mstream, 'M', kp);
    return sw_cuda_swap_event_record(d->ev_mdone[kp], d->mstream);
}

static sw_status compute_direct(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                                const sw_swap_dev_tile *t, void *cs, float *part, int kp,
                                int kprev)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim;
    const sw_swap_layer *L = &q->layers[p->layer];
    const size_t spb = 2 * (size_t)H;
    size_t bo = 0, go = 0;
    sw_cuda_swap_dblk *bd = desc_take(d, sizeof(sw_cuda_swap_dblk) * (size_t)t->n, &bo);
    const size_t nitems = (size_t)t->nmiss * spb;
    sw_cuda_swap_gather_item *gd =
        nitems > 0 ? desc_take(d, sizeof(*gd) * nitems, &go) : NULL;
    if (!bd || (nitems > 0 && !gd))
        return sw_fail(SW_STATUS_INTERNAL, "device descriptors exhausted (%zu of %zu bytes)",
                       d->desc_used, d->desc_bytes);
    int32_t ng = 0;
    if (nitems > 0)
        SW_TRY(gather_items(s, p, q, t, 0, gd, &ng)); /* dst: the victim slot's stripe */
    if ((size_t)ng != nitems)
        return sw_fail(SW_STATUS_INTERNAL, "direct tile: %d of %zu stripes leased", ng, nitems);
    uint64_t kv_bytes = 0;
    int32_t m = 0;
    for (int32_t i = 0; i < t->n; i++) {
        const sw_swap_blk *e = &L->blk[t->blocks[i]];
        bd[i].slot = t->slots[i];
        bd[i].block = t->blocks[i];
        bd[i].valid = e->valid;
        bd[i].item = -1;
        if (m < t->nmiss && t->miss_blocks[m] == t->blocks[i]) {
            bd[i].item = (int32_t)((size_t)m * spb); /* misses in tile order */
            m++;
        }
        kv_bytes += 2 * (uint64_t)H * (uint64_t)e->valid * (uint64_t)D * 2;
    }
    if (m != t->nmiss)
        return sw_fail(SW_STATUS_INTERNAL, "direct tile: %d of %d missing blocks placed", m,
                       t->nmiss);
    const size_t end = nitems > 0 ? go + sizeof(*gd) * nitems : bo + sizeof(*bd) * (size_t)t->n;
    sw_cuda_swap_direct_args A;
    memset(&A, 0, sizeof A);
    SW_TRY(tile_args_of(s, p, q, t, part, 1, &A.t)); /* nrg = 1: direct_tile checked it */
    A.blk = (const sw_cuda_swap_dblk *)(DESC_K(d) + bo);
    A.items = nitems > 0 ? (const sw_cuda_swap_gather_item *)(DESC_K(d) + go) : NULL;
    A.pool = d->pool;
    A.bad = d->d_bad;
    A.bad_cap = SW_SWAP_BAD_CAP;
    launch_job j;
    j.A = A;
    j.cs = cs;
    j.bo = bo;
    j.end = end;
    j.kp = kp;
    j.kprev = kprev;
    j.tag = 10 * t->hbuf + 4;
    j.land_ev = t->land_ev;
    j.first = j.last = 1;
    j.ranged = 0;
    s->st.kernel_kv_bytes += kv_bytes;
    struct prelease *P = d->pl;
    if (!t->miss_ev || !P || d->land_groups <= 1)
        return sw_swap_launch_push(d, &j);
    /* Its chunks in groups by the landing launch they wait for (the latest
     * of their blocks'; nondecreasing over the tile), at most land_groups,
     * each launched after its own: the chunks over the last landed blocks,
     * not the whole tile, then run after the call's last copy. */
    const int32_t nch = A.t.nchunks, nb = A.t.nblk;
    /* groups: gc[k] its first chunk, ge[k] its event (-1: none); a group
     * opens where the running event grows; past land_groups, the earliest
     * fold into the first (which then waits for the latest of them) */
    int32_t gc[SW_SWAP_LAND_GROUPS_MAX], ge[SW_SWAP_LAND_GROUPS_MAX];
    int32_t ngr = 0, ev_run = -1;
    m = 0;
    for (int32_t c = 0, i = 0; c < nch; c++) {
        const int32_t i1 = (int32_t)((int64_t)nb * (c + 1) / nch);
        int32_t ev = ev_run;
        for (; i < i1; i++)
            if (bd[i].item >= 0) {
                const int32_t e = t->miss_ev[m++];
                ev = e > ev ? e : ev;
            }
        if (c > 0 && ev == ev_run)
            continue;
        ev_run = ev;
        if (ngr == d->land_groups) {
            /* fold group 1 into group 0 */
            ge[0] = ge[1];
            for (int32_t k = 1; k + 1 < ngr; k++) {
                gc[k] = gc[k + 1];
                ge[k] = ge[k + 1];
            }
            ngr--;
        }
        gc[ngr] = c;
        ge[ngr] = ev;
        ngr++;
    }
    for (int32_t k = 0; k < ngr; k++) {
        launch_job g = j;
        g.A.c0 = gc[k];
        g.A.nch = (k + 1 < ngr ? gc[k + 1] : nch) - gc[k];
        g.land_ev = ge[k] >= 0 ? P->lev[ge[k]] : NULL;
        g.first = k == 0;
        g.last = k + 1 == ngr;
        g.ranged = 1; /* even alone: how many groups there are is timing's */
        SW_TRY(sw_swap_launch_push(d, &g));
    }
    return SW_OK;
}

sw_status sw_swap_dev_compute(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                              const sw_swap_dev_tile *t, void *stream)
{
    sw_swap_dev *d = s->dev;
    float *part = d->d_part;
    int kp = 0;
    if (d->direct) {
        /* The pass's tiles take the two tile streams and the partial
         * buffers in turn; a buffer is reused after its last merge (tile j
         * - 4's: so tile j also follows every tile <= j - 4, merges being
         * in order). Tile j writes victim slots that tile j - 1 never uses
         * (it was pinned when tile j was planned) but that tile j - 3, on
         * the other stream, may still read or write: tile j waits for it.
         * Without read-ahead (prefetch 0) tile j is planned after tile j - 1
         * was unpinned: it waits for tile j - 1. */
        const int64_t back = s->prefetch > 0 ? 3 : 1;
        const int kprev = d->ptile >= back ? (int)((d->ptile - back) % SW_SWAP_NPART) : -1;
        kp = (int)(d->ptile % SW_SWAP_NPART);
        stream = d->pstream[d->ptile & 1];
        part = d->d_partk[kp];
        d->ptile++;
        if (t->direct)
            return compute_direct(s, p, q, t, stream, part, kp, kprev);
        /* a staged tile: its calls from this thread, after the launcher's */
        SW_TRY(sw_swap_launch_drain(d));
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_mdone[kp]));
        if (kprev >= 0)
            SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_kdone[kprev]));
    }
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim, B = s->m.block_size;
    /* descriptors of the tile, its fills and its gathers in one upload:
     * uploaded ahead with its gathers, or now */
    size_t bo = 0, fo = 0, go = 0, end = 0;
    int32_t nfill = 0, ngather = 0;
    uint64_t kv_bytes = 0;
    if (t->gathered) {
        /* sw_swap_dev_gather built them and put them on the gather stream
         * before the gather: ev_g covers the upload */
        if (!d->pre || t->hbuf < 0 || t->hbuf >= d->nhstage || !d->pre[t->hbuf].set)
            return sw_fail(SW_STATUS_INTERNAL, "tile gathered ahead without its descriptors");
        struct dev_pre *pr = &d->pre[t->hbuf];
        bo = pr->bo;
        fo = pr->fo;
        end = pr->end;
        nfill = pr->nfill;
        kv_bytes = pr->kv_bytes;
        pr->set = 0;
    } else {
        SW_TRY(build_desc(s, p, q, t, 0, &bo, &fo, &go, &end, &nfill, &ngather, &kv_bytes));
    }
    sw_swap_tl_mark(d, stream, 'c', 10 * t->hbuf + (t->gathered ? 1 : 0) + (ngather > 0 ? 2 : 0));
    if (!t->gathered)
        SW_TRY(sw_swap_desc_up(d, bo, end - bo, stream));
    sw_swap_tl_mark(d, stream, 'u', t->hbuf);
    if (t->gathered) /* its gathers into the staging, issued ahead on a gather stream */
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_g[t->hbuf]));
    if (nfill > 0) {
        /* A block with some stripes gathered (the host tier held part of
         * it) is scattered whole: the gather below overwrites those. */
        sw_cuda_swap_scatter_args sa;
        memset(&sa, 0, sizeof sa);
        sa.stage = d->stage[t->buf];
        sa.stage_stride = d->stage_stride;
        sa.stage_blocks = s->tile_blocks;
        sa.layout = t->layout;
        sa.fill = (const sw_cuda_swap_fill *)(DESC_K(d) + fo);
        sa.nfill = nfill;
        sa.pool = d->pool;
        sa.slot_bytes = s->slot_bytes;
        sa.v_off = d->v_off;
        sa.H = H;
        sa.B = B;
        sa.D = D;
        SW_TRY(sw_cuda_swap_scatter(&sa, stream));
    }
    if (ngather > 0) {
        sw_cuda_swap_gather_args ga;
        memset(&ga, 0, sizeof ga);
        ga.g = (const sw_cuda_swap_gather_item *)(DESC_K(d) + go);
        ga.n = ngather;
        ga.pool = d->pool;
        ga.bad = d->d_bad;
        ga.bad_cap = SW_SWAP_BAD_CAP;
        ga.ctas = d->gather_ctas;
        if (t->land_ev) /* its landed stripes' copies */
            SW_TRY(sw_cuda_swap_stream_wait(stream, t->land_ev));
        SW_TRY(sw_cuda_swap_gather(&ga, stream));
    }
    /* the staging buffer may be refilled once the scatter has run */
    SW_TRY(sw_cuda_swap_event_record(d->ev_stage[t->buf], stream));
    sw_cuda_swap_tile_args a;
    SW_TRY(tile_args_of(s, p, q, t, part, 0, &a));
    a.blk = (const sw_cuda_swap_blk *)(DESC_K(d) + bo);
    void *e0 = NULL, *e1 = NULL;
    if (d->timing) {
        SW_TRY(timing_event(d, 2 * d->tev_used, &e0));
        SW_TRY(timing_event(d, 2 * d->tev_used + 1, &e1));
        SW_TRY(sw_cuda_swap_event_record(e0, stream));
    }
    SW_TRY(sw_cuda_swap_tile(&a, stream));
    if (d->timing) {
        SW_TRY(sw_cuda_swap_event_record(e1, stream));
        d->tev_used++;
    }
    if (d->direct) /* on the merge stream, in tile order */
        SW_TRY(merge_behind(d, &a, 1, stream, kp));
    else
        SW_TRY(sw_cuda_swap_merge(&a, stream));
    sw_swap_tl_mark(d, stream, 'C', t->hbuf);
    s->st.kernel_kv_bytes += kv_bytes;
    return SW_OK;
}

sw_status sw_swap_dev_pass_end(sw_swap *s, const sw_swap_attend_params *p, void *o, float *lse,
                               float *host_f32, void *stream)
{
    sw_swap_dev *d = s->dev;
    const int32_t D = s->m.head_dim;
    SW_TRY(sw_swap_launch_drain(d));
    if (d->direct && d->ptile > 0) {
        /* the finalisation after both tile streams and the merge stream */
        for (int i = 0; i < 3; i++) {
            void *x = i < 2 ? d->pstream[i] : d->mstream;
            SW_TRY(sw_cuda_swap_event_record(d->ev_pass, x));
            SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_pass));
        }
    }
    if (d->hrows <= 0)
        return SW_OK;
    SW_TRY(sw_cuda_swap_finalize(d->d_m, d->d_l, d->d_acc, d->hrows, D, o, lse,
                                 host_f32 ? d->d_f32 : NULL, stream));
    sw_swap_tl_mark(d, stream, 'Z', 0);
    if (host_f32) {
        SW_TRY(sw_cuda_swap_copy(host_f32, d->d_f32, sizeof(float) * (size_t)d->hrows * D,
                                 stream));
        SW_TRY(sw_cuda_stream_sync(stream));
    }
    return SW_OK;
}

sw_status sw_swap_dev_attend_end(sw_swap *s, void *stream)
{
    sw_swap_dev *d = s->dev;
    SW_TRY(sw_cuda_swap_event_record(d->ev_done, stream));
    d->done_pending = 1;
    sw_swap_dev_tl_phase(s, 'E');
    if (d->tline && d->ntl > 0) {
        SW_TRY(sw_swap_dev_wait_done(d));
        /* the landing's lines under the call's number (-1: only dropped) */
        sw_swap_land_report(d, sw_swap_tl_report(d));
    }
    if (d->timing && d->tev_used > 0) {
        SW_TRY(sw_swap_dev_wait_done(d));
        double sum = 0;
        for (int32_t i = 0; i < d->tev_used; i++) {
            float ms = 0;
            SW_TRY(sw_cuda_swap_event_ms(&ms, d->tev[2 * i], d->tev[2 * i + 1]));
            sum += ms;
        }
        s->st.kernel_seconds += sum * 1e-3;
        d->tev_used = 0;
    }
    return SW_OK;
}

sw_status sw_swap_dev_score_host(sw_swap *s, const sw_swap_layer *L, const void *q,
                                 int32_t q_len, float *scores)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t D = s->m.head_dim, R = s->c.predictor_rank;
    const int32_t n = L->nblocks;
    const int64_t hrows = (int64_t)q_len * Hq;
    SW_TRY(sw_swap_dev_wait_done(d));
    SW_TRY(ensure_desc(d, sw_align_up(sizeof(sw_cuda_swap_sblk) * ((size_t)n + 1), 16) +
                              sw_align_up(sizeof(float) * ((size_t)n + 1), 16) +
                              sw_align_up((size_t)hrows * D * 2, 16) + 64));
    SW_TRY(ensure_ws(d, sw_align_up((size_t)hrows * (size_t)R, 4) + (size_t)n + 4));
    d->desc_used = 0;
    size_t so = 0, fo = 0, qo = 0;
    sw_cuda_swap_sblk *sb = desc_take(d, sizeof *sb * ((size_t)n + 1), &so);
    float *sh = desc_take(d, sizeof(float) * ((size_t)n + 1), &fo);
    uint16_t *qh = desc_take(d, (size_t)hrows * D * 2, &qo);
    if (!sb || !sh || !qh)
        return sw_fail(SW_STATUS_INTERNAL, "score descriptors");
    for (int32_t i = 0; i < n; i++) {
        const sw_swap_blk *e = &L->blk[i];
        sb[i].entry = e->valid > 0 && e->dtype == SW_SWAP_KV_BF16 ? e->dproj : -1;
        sb[i].valid = e->valid;
        sb[i].row0 = 0;
        sb[i].ql = q_len;
    }
    memcpy(qh, q, (size_t)hrows * D * 2);
    float *qp = d->ws, *dsc = d->ws + sw_align_up((size_t)hrows * R, 4);
    void *st = d->own_stream;
    /* descriptors and the query rows in one upload (the scores' room rides along) */
    SW_TRY(sw_cuda_swap_copy(d->desc_dev + so, d->desc_host + so,
                             qo + (size_t)hrows * D * 2 - so, st));
    SW_TRY(sw_cuda_swap_project(d->P, D, R, (const uint16_t *)(d->desc_dev + qo), hrows, qp, st));
    SW_TRY(sw_cuda_swap_score(qp, d->arena, (const sw_cuda_swap_sblk *)(d->desc_dev + so), n, H,
                              G, s->m.block_size, R, dsc, st));
    SW_TRY(sw_cuda_swap_copy(sh, dsc, sizeof(float) * (size_t)n, st));
    SW_TRY(sw_cuda_stream_sync(st));
    memcpy(scores, sh, sizeof(float) * (size_t)n);
    return SW_OK;
}
