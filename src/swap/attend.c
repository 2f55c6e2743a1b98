/* Attend orchestration: score blocks, walk each sequence tile by tile
 * (resident blocks first, then missing ones in block order), read a tile's
 * missing stripes with one store read ticket submitted `prefetch` tiles
 * ahead of the tile being computed, and merge online-softmax states in
 * fp32. */
#include "swap_internal.h"
#include "swap_cuda.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"
#include "core/sw_half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct tile {
    uint64_t pin;
    int32_t bi;             /* batch entry */
    int32_t n;              /* blocks */
    int32_t *blocks, *slots;
    int32_t *miss_blocks;   /* logical ids of the blocks being read */
    int32_t *miss_slots;    /* the slots plan_tile gave them */
    int32_t nmiss;
    size_t nkeys;
    sw_store_key *keys;
    void **dst;
    size_t *lens;
    uint64_t *gens;
    sw_status *sts;
    sw_swap_read_job job;   /* job.ticket != 0: a read in flight */
    int hbuf;               /* staging of its reads (ring position) */
    int buf;                /* device pool: device staging buffer */
    /* device pool, host-tier gather: a lease per key (keys' order); with
     * nleased > 0 the ticket reads only the other keys, listed in r* with
     * rmap giving each one's index among the tile's keys */
    sw_store_lease *lease;
    sw_store_lease *tlease;    /* sw_swap_dev_lease_tile's room */
    size_t nleased;
    sw_store_key *rkeys;
    void **rdst;
    size_t *rlens;
    uint64_t *rgens;
    sw_status *rsts;
    uint32_t *rmap;
    int gathered;           /* device pool: 1 its gathers issued ahead, -1 not
                             * to be (sw_swap_dev_gather declined), 0 not
                             * tried yet */
    int direct;             /* device pool: 1 it goes to the direct kernel */
    void *land_ev;          /* device pool: its landed leases' event (or NULL) */
    int32_t *miss_ev;       /* device pool: per missing block its landing event
                             * (sw_swap_dev_lease_tile; -1: not landed) */
} tile;

static sw_swap_dev_tile dev_tile_of(const tile *t);

/* Per-call state. */
typedef struct run {
    sw_swap *s;
    const sw_swap_attend_params *p;
    int sparse;
    sw_swap_seq **seqs;     /* [batch] */
    float **scores;         /* [batch][nblocks] */
    /* planner */
    int32_t pb;             /* batch entry being planned */
    int32_t *order;         /* its block order */
    int32_t norder, pos;
    int32_t nres;           /* its first nres blocks: resident when it was built */
    /* softmax state for all rows; qf = q * sm_scale * log2(e), m in the
     * log2 domain until the pass's finalisation */
    float *qf, *m, *l, *acc;
    sw_swap_kblk *kb;       /* [num_kv_heads][tile_blocks]: the tile's blocks */
    float *part;            /* key-range states: [H][nsplit-1][m, l, o of ql*G rows] */
    int32_t nsplit;         /* key ranges per kv head and tile */
    int64_t attended, hits, misses, tiles;
    void *stream;           /* device pool: the caller's stream */
    /* victims of the tile being planned (sw_swap_pool_rank at its first
     * miss; vn < 0: not ranked yet) */
    int32_t *vrank;
    void *vscratch;
    int32_t vn, vpos;
    /* run-aware eviction (s->run_evict tiles, 0 = off): the first vwin
     * ranked victims reordered by runs_first, vtmp its scratch (NULL =
     * off); vwin = tile_blocks when off */
    int32_t vwin;
    int32_t *vtmp;
    /* the store's stats before the prelease attend_dev posted ahead of the
     * scores (early = 1 until the pass takes them as its start) */
    int early;
    sw_store_stats ss0;
} run;

/* The blocks of L not resident, selected (sel NULL: all), in block order:
 * the missing part of build_order's order, also posted to the prelease
 * before it is built (attend_dev). */
static int32_t missing_of(const sw_swap_layer *L, const uint8_t *sel, int32_t *out)
{
    int32_t n = 0;
    for (int32_t b = 0; b < L->nblocks; b++)
        if ((!sel || sel[b]) && L->blk[b].slot < 0)
            out[n++] = b;
    return n;
}

/* Builds the block order of batch entry bi: resident first, then missing
 * ones, both in block order. Sparse mode keeps the top-k scored,
 * the recent window and every unscored block. Also refreshes the scores of
 * the sequence's resident slots. */
static int32_t build_order(run *R, int32_t bi, int32_t *order)
{
    sw_swap *s = R->s;
    const sw_swap_seq *q = R->seqs[bi];
    const sw_swap_layer *L = &q->layers[R->p->layer];
    const float *sc = R->scores[bi];
    const int32_t n = L->nblocks;
    int32_t cnt = 0;
    /* selection */
    uint8_t *sel = calloc((size_t)n + 1, 1);
    if (!sel)
        return -1;
    if (!R->sparse) {
        memset(sel, 1, (size_t)n);
    } else if (sw_swap_sparse_select(sc, n, R->p->sparse_top_k, R->p->sparse_recent_blocks,
                                     sel) != 0) {
        free(sel);
        return -1;
    }
    for (int32_t b = 0; b < n; b++) {
        if (L->blk[b].slot >= 0)
            s->slots[L->blk[b].slot].score = sc[b];
        if (sel[b] && L->blk[b].slot >= 0)
            order[cnt++] = b;
    }
    R->nres = cnt;
    /* Missing blocks in block order: consecutive blocks of a stream sit in
     * adjacent extents, so a tile's read merges into a few large requests
     * (score order made them scattered 8 KiB reads: 12% of the raw disk
     * rate in `spillway bench swap`). What stays resident is decided by the
     * eviction policy, not by the visiting order. */
    cnt += missing_of(L, sel, order + cnt);
    free(sel);
    return cnt;
}

static sw_store_key key_of(const sw_swap_seq *q, int32_t layer, int32_t block, int32_t h, int kind)
{
    sw_store_key k;
    memset(&k, 0, sizeof k);
    k.ns = q->ns;
    k.layer = (uint32_t)layer;
    k.block = q->block_base + (uint32_t)block;
    k.kv_head = (uint16_t)h;
    k.kind = (uint8_t)kind;
    return k;
}

static size_t v_offset(const sw_swap *s)
{
    return (size_t)s->m.num_kv_heads * s->stripe_elems * 2;
}

/* Resident blocks of the store run (align_blocks blocks) that the block in
 * slot `i` lies in, and the run's present blocks (*present). */
static int32_t run_resident(const sw_swap *s, int32_t i, int32_t *present)
{
    const sw_swap_slot *sl = &s->slots[i];
    const sw_swap_layer *L = &sl->seq->layers[sl->layer];
    const uint64_t a = s->align_blocks, base = sl->seq->block_base;
    const uint64_t r0 = (base + (uint64_t)sl->block) / a * a;
    int64_t b0 = (int64_t)r0 - (int64_t)base, b1 = b0 + (int64_t)a;
    if (b0 < 0)
        b0 = 0;
    if (b1 > L->nblocks)
        b1 = L->nblocks;
    int32_t c = 0;
    for (int64_t b = b0; b < b1; b++)
        c += L->blk[b].slot >= 0;
    *present = (int32_t)(b1 - b0);
    return c;
}

/* Run-aware order of the first n ranked victims (out[0..n), ascending
 * policy order; tmp has room for 2 n entries): a resident block inside a
 * store run that is mostly missing saves little disk I/O (the run is read
 * anyway and the read goes through it: store gaps <= 64 KiB), one of a
 * mostly resident run saves its share of a read. Stable by the run's
 * resident fraction in eighths, ascending, then policy order: over the
 * steps the pool's blocks gather in few runs, and the runs that are read
 * have fewer resident blocks to read through. The policy still chooses
 * which n slots are candidates (the caller's window). */
static void runs_first(const sw_swap *s, int32_t *out, int32_t n, int32_t *tmp)
{
    int32_t cnt[9] = {0};
    int32_t *cls = tmp + n;
    for (int32_t i = 0; i < n; i++) {
        int32_t present = 0;
        const int32_t res = s->slots[out[i]].seq ? run_resident(s, out[i], &present) : 0;
        cls[i] = present > 0 ? (int32_t)((int64_t)res * 8 / present) : 0; /* free: first */
        cnt[cls[i]]++;
    }
    int32_t at[9];
    for (int32_t c = 0, o = 0; c < 9; c++) {
        at[c] = o;
        o += cnt[c];
    }
    for (int32_t i = 0; i < n; i++)
        tmp[at[cls[i]]++] = out[i];
    memcpy(out, tmp, sizeof(int32_t) * (size_t)n);
}

/* Plans the next tile; returns 1 when there is one, 0 at the end, <0 on
 * allocation failure. */
static int plan_tile(run *R, tile *t, int hbuf)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    while (R->pos >= R->norder) {
        R->pb++;
        while (R->pb < p->batch && p->q_indptr[R->pb + 1] == p->q_indptr[R->pb])
            R->pb++; /* no query rows: nothing to attend */
        if (R->pb >= p->batch)
            return 0;
        R->norder = build_order(R, R->pb, R->order);
        if (R->norder < 0)
            return -1;
        R->pos = 0;
        if (s->dev) /* the blocks missing now are misses when visited (a block
                     * is loaded once a pass): their leases can start */
            (void)sw_swap_dev_prelease(s, R->seqs[R->pb], p->layer, R->order + R->nres,
                                       R->norder - R->nres);
    }
    const sw_swap_seq *q = R->seqs[R->pb];
    const sw_swap_layer *L = &q->layers[p->layer];
    const float *sc = R->scores[R->pb];
    const int32_t H = s->m.num_kv_heads;
    t->pin = ++s->pin_seq;
    t->bi = R->pb;
    t->n = 0;
    t->nmiss = 0;
    t->nkeys = 0;
    t->nleased = 0;
    t->gathered = 0;
    t->direct = 0;
    t->job.ticket = 0;
    R->vn = -1;
    t->hbuf = hbuf;
    if (s->dev)
        t->buf = hbuf; /* its device staging: the ring position's */
    /* The tile's span of the order (sw_swap_plan_tile). The residency it
     * plans with is the order's as built (its first nres blocks resident):
     * no block of the order changes residency before it is planned (the
     * resident ones come first and are all planned before any miss can
     * evict, and a missing block becomes resident only when planned). */
    sw_swap_tile_plan tp;
    tp.order = R->order;
    tp.norder = R->norder;
    tp.nres = R->nres;
    tp.pos = R->pos;
    tp.block_base = q->block_base;
    tp.align_blocks = s->align_blocks;
    tp.tile_blocks = s->tile_blocks;
    const int32_t span = sw_swap_plan_tile(&tp);
    for (int32_t k = 0; k < span; k++) {
        const int32_t b = R->order[R->pos];
        sw_swap_blk *e = &L->blk[b];
        int32_t slot = e->slot;
        R->pos++;
        if (slot >= 0) {
            R->hits++;
        } else {
            if (R->vrank) {
                if (R->vn < 0) {
                    R->vn = sw_swap_victims_first(s, R->vwin, R->vrank, R->vscratch);
                    R->vpos = 0;
                    if (R->vtmp)
                        runs_first(s, R->vrank, R->vn < R->vwin ? R->vn : R->vwin, R->vtmp);
                }
                while (R->vpos < R->vn && s->slots[R->vrank[R->vpos]].pin)
                    R->vpos++; /* pinned since the ranking */
                if (R->vpos == R->vn && R->vn == R->vwin) {
                    /* never reached (a tile consumes at most tile_blocks
                     * places), but the full ranking is the safe answer */
                    R->vn = sw_swap_pool_rank(s, R->vrank, R->vscratch);
                    R->vpos = 0;
                    while (R->vpos < R->vn && s->slots[R->vrank[R->vpos]].pin)
                        R->vpos++;
                }
                slot = R->vpos < R->vn ? R->vrank[R->vpos++] : -1;
            } else {
                slot = sw_swap_pool_victim(s);
            }
            if (slot < 0)
                return -2; /* every slot pinned: a bug in the tile sizing */
            sw_swap_slot *v = &s->slots[slot];
            if (v->seq) {
                v->seq->layers[v->layer].blk[v->block].slot = -1;
                s->st.evictions++;
            }
            v->seq = (sw_swap_seq *)q;
            v->layer = p->layer;
            v->block = b;
            e->slot = slot;
            R->misses++;
            const size_t es = sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
            if (s->dev) {
                /* Keys in the store's write order (offload: per kv head, K
                 * then V) into the tile's host staging, block-major: the
                 * tile's stripes are one contiguous upload. */
                for (int32_t h = 0; h < H; h++)
                    for (int kind = 0; kind < 2; kind++) {
                        t->keys[t->nkeys] = key_of(q, p->layer, b, h, kind);
                        t->dst[t->nkeys] = sw_swap_dev_hstage_ptr(s, t->hbuf, t->nmiss, h,
                                                                  kind);
                        t->nkeys++;
                    }
            } else {
                /* into a staging buffer in slot layout, swapped into the
                 * slot when the tile computes (commit_tile) */
                uint8_t *stage = s->stage[(size_t)t->hbuf * (size_t)s->tile_blocks +
                                          (size_t)t->nmiss];
                for (int kind = 0; kind < 2; kind++)
                    for (int32_t h = 0; h < H; h++) {
                        t->keys[t->nkeys] = key_of(q, p->layer, b, h, kind);
                        t->dst[t->nkeys] = stage + (kind ? v_offset(s) : 0) +
                                           (size_t)h * s->stripe_elems * es;
                        t->nkeys++;
                    }
            }
            t->miss_slots[t->nmiss] = slot;
            t->miss_blocks[t->nmiss++] = b;
        }
        sw_swap_slot *sl = &s->slots[slot];
        sl->pin = t->pin;
        sl->score = sc[b];
        sl->last_access = ++s->tick;
        t->blocks[t->n] = b;
        t->slots[t->n] = slot;
        t->n++;
    }
    R->tiles++;
    return 1;
}

/* Submits the tile's read as a store ticket; `ahead` when another tile
 * is still to be computed before it (read-ahead). A failed submit leaves
 * its status on every key, reported by finish_read. */
static void start_read(run *R, tile *t, int ahead)
{
    sw_swap *s = R->s;
    t->job.n = t->nkeys;
    t->job.keys = t->keys;
    t->job.dst = t->dst;
    t->job.dst_bytes = s->dev ? sw_swap_dev_stage_stride(s) : s->stripe_elems * 2;
    t->job.lengths = t->lens;
    t->job.gens = t->gens;
    t->job.statuses = t->sts;
    t->nleased = 0;
    t->land_ev = NULL;
    if (t->nkeys == 0)
        return;
    s->st.read_calls++;
    s->st.stripes_read += t->nkeys;
    if (ahead)
        s->st.prefetched_tiles++;
    if (t->lease && sw_swap_dev_gathers(s)) {
        /* Host-tier hits are leased and gathered by the GPU (dev_tile.c);
         * a failed lease leases nothing: the ticket reads every key. */
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
    (void)sw_swap_read_submit(s->store, &t->job);
    if (s->dev) { /* decided once, with its leases (sw_swap_dev_direct_tile) */
        const sw_swap_dev_tile dt = dev_tile_of(t);
        t->direct = sw_swap_dev_direct_tile(s, R->p, R->seqs[t->bi], &dt);
    }
}

/* Waits for the tile's read and checks every stripe: status, length and the
 * generation the engine wrote. On failure the tile's new slots are freed. */
static sw_status finish_read(run *R, tile *t)
{
    sw_swap *s = R->s;
    if (t->nkeys == 0)
        return SW_OK;
    {
        double t0 = now_s();
        sw_swap_read_wait(s->store, &t->job);
        s->st.read_wait_seconds += now_s() - t0;
    }
    for (size_t k = 0; t->nleased && k < t->job.n; k++) {
        const uint32_t i = t->rmap[k]; /* the ticket's results in key order */
        t->sts[i] = t->rsts[k];
        t->lens[i] = t->rlens[k];
        t->gens[i] = t->rgens[k];
    }
    const sw_swap_seq *q = R->seqs[t->bi];
    sw_swap_layer *L = &q->layers[R->p->layer];
    const int32_t H = s->m.num_kv_heads;
    sw_status bad = SW_OK;
    size_t i = 0;
    for (int32_t m = 0; m < t->nmiss; m++) {
        const int32_t b = t->miss_blocks[m];
        const sw_swap_blk *e = &L->blk[b];
        const size_t want = (size_t)e->valid * (size_t)s->m.head_dim *
                            sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
        for (int32_t x = 0; x < 2 * H; x++, i++) {
                /* the order plan_tile listed the keys in */
                const int kind = s->dev ? x % 2 : x / H;
                const int32_t h = s->dev ? x / 2 : x % H;
                if (bad != SW_OK)
                    continue;
                if (t->sts[i] != SW_OK) {
                    bad = sw_fail(t->sts[i], "stripe (ns %llu, layer %d, block %u, kv head %d, "
                                  "%s) of sequence %llu: store read returned %s",
                                  (unsigned long long)q->ns, R->p->layer, q->block_base + b, h,
                                  kind ? "V" : "K", (unsigned long long)q->id,
                                  sw_status_str(t->sts[i]));
                } else if (t->lens[i] != want || t->gens[i] != e->gen[h * 2 + kind]) {
                    bad = sw_fail(SW_STATUS_CORRUPT, "stripe (ns %llu, layer %d, block %u, kv "
                                  "head %d, %s): %zu bytes generation %llu, the engine wrote "
                                  "%zu bytes generation %llu", (unsigned long long)q->ns,
                                  R->p->layer, q->block_base + b, h, kind ? "V" : "K",
                                  t->lens[i], (unsigned long long)t->gens[i], want,
                                  (unsigned long long)e->gen[h * 2 + kind]);
                } else {
                    s->st.bytes_read += t->lens[i];
                }
            }
    }
    if (bad == SW_OK && s->dev && t->nmiss > 0) {
        /* verified: to the device staging the tile's scatter reads */
        double t0 = now_s();
        bad = sw_swap_dev_upload(s, t->hbuf, t->buf, t->nmiss, t->nleased ? t->lease : NULL);
        s->st.read_wait_seconds += now_s() - t0;
    }
    if (bad != SW_OK)
        for (int32_t m = 0; m < t->nmiss; m++)
            sw_swap_pool_drop(s, &L->blk[t->miss_blocks[m]]);
    return bad;
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

/* Device pool: the tile's scatter, kernel and merge on the caller's stream. */
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

static sw_status compute_tile_dev(run *R, const tile *t)
{
    sw_swap *s = R->s;
    const sw_swap_dev_tile dt = dev_tile_of(t);
    R->attended += t->n;
    return sw_swap_dev_compute(s, R->p, R->seqs[t->bi], &dt, R->stream);
}

/* Device pool: issues the gathers of the planned tiles from..upto-1 not yet
 * issued (sw_swap_dev_gather: into each tile's device staging, so they wait
 * for no compute and go out as soon as their tile is planned). */
static sw_status issue_gathers(run *R, tile *tl, int ntl, int64_t from, int64_t upto)
{
    sw_swap *s = R->s;
    if (!sw_swap_dev_gathers(s))
        return SW_OK;
    const double t0 = now_s();
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
    s->st.submit_seconds += now_s() - t0;
    return st;
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

static sw_status compute_tile(run *R, const tile *t)
{
    sw_swap *s = R->s;
    if (s->dev)
        return compute_tile_dev(R, t);
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

/* One pass over the batch: exact (sparse = 0) or sparse. Leaves the
 * normalised fp32 outputs in R->acc and the LSE in R->m. */
/* Unpins the slots tile t pinned: its own blocks' slots, not a scan of the
 * pool (a device pool of GPU-sized memory has 10^5-10^6 slots; a scan per
 * tile was O(pool)). A slot dropped and retaken since carries another pin
 * and is left alone. */
static void unpin_tile(sw_swap *s, const tile *t)
{
    for (int32_t i = 0; i < t->n; i++) {
        sw_swap_slot *sl = &s->slots[t->slots[i]];
        if (sl->pin == t->pin)
            sl->pin = 0;
    }
}

/* Plans tile *nplan into its ring position and submits its read, then
 * counts it; with read-ahead (`unpin`), the pins of the tile two before it
 * are released first (computed or not). Tiles ncomp.. are not computed
 * yet. No tile left: *end = 1. */
static sw_status plan_next(run *R, tile *tl, int ntl, int64_t *nplan, int64_t ncomp, int unpin,
                           int *end)
{
    sw_swap *s = R->s;
    const int64_t j = *nplan;
    tile *t = &tl[j % ntl];
    tile *u = unpin && j >= 2 ? &tl[(j - 2) % ntl] : NULL;
    if (u && u->pin) {
        unpin_tile(s, u);
        u->pin = 0;
    }
    const double p0 = now_s();
    const int r = plan_tile(R, t, (int)(j % ntl));
    const double p1 = now_s();
    s->st.plan_seconds += p1 - p0;
    if (r == 0) {
        *end = 1;
        return SW_OK;
    }
    if (r < 0)
        return r == -1 ? sw_fail(SW_STATUS_NO_MEMORY, "block order")
                       : sw_fail(SW_STATUS_INTERNAL, "no unpinned slot for a tile");
    start_read(R, t, j > ncomp);
    s->st.submit_seconds += now_s() - p1;
    (*nplan)++;
    return SW_OK;
}

/* Tiles to have planned beyond the one computing next: the read-ahead
 * depth, but one while the last tile planned is a direct one (its reads are
 * the kernel's, so planning further ahead only delays its launch; one tile
 * ahead keeps tile j + 1 planned with tile j pinned, and victims do not
 * depend on the depth). */
static int64_t plan_ahead(const tile *tl, int ntl, int64_t nplan, int depth)
{
    if (depth <= 1 || nplan == 0)
        return depth;
    return tl[(nplan - 1) % ntl].direct ? 1 : depth;
}

static sw_status run_pass(run *R, int sparse)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    const int32_t Hq = s->m.num_qo_heads, D = s->m.head_dim;
    const int64_t rows = (int64_t)p->q_indptr[p->batch] * Hq;
    if (s->dev) {
        SW_TRY(sw_swap_dev_pass_begin(s, p, R->stream));
    } else {
        for (int64_t i = 0; i < rows; i++) {
            R->m[i] = -INFINITY;
            R->l[i] = 0.0f;
        }
        memset(R->acc, 0, sizeof(float) * (size_t)rows * (size_t)D);
    }
    R->sparse = sparse;
    R->pb = -1;
    R->pos = R->norder = 0;

    /* Tiles i+1..i+D (D = s->prefetch) have their reads in flight while
     * tile i computes: a ring of D + 1 tiles, each reading into its own
     * staging (a host pool's slot-sized buffers, a device pool's pinned
     * host buffer). A tile's slots are assigned when it is planned, with
     * the pins of one tile of read-ahead (tile j is planned with tile j-1
     * pinned), and written only when it computes (commit_tile, the device
     * scatter), so victims, hits and results do not depend on D. With
     * D = 0 a tile is planned and read after the previous one computed. */
    const int32_t depth = s->prefetch;
    const int ntl = depth + 1;
    const size_t maxkeys = (size_t)s->tile_blocks * (size_t)s->m.num_kv_heads * 2;
    tile *tl = calloc((size_t)ntl, sizeof *tl);
    sw_status st = tl ? SW_OK : sw_fail(SW_STATUS_NO_MEMORY, "tile ring");
    for (int i = 0; tl && i < ntl; i++) {
        tile *t = &tl[i];
        t->blocks = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
        t->slots = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
        t->miss_blocks = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
        t->miss_slots = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
        t->keys = malloc(sizeof(sw_store_key) * maxkeys);
        t->dst = malloc(sizeof(void *) * maxkeys);
        t->lens = malloc(sizeof(size_t) * maxkeys);
        t->gens = malloc(sizeof(uint64_t) * maxkeys);
        t->sts = malloc(sizeof(sw_status) * maxkeys);
        if (!t->blocks || !t->slots || !t->miss_blocks || !t->miss_slots || !t->keys ||
            !t->dst || !t->lens || !t->gens || !t->sts)
            st = sw_fail(SW_STATUS_NO_MEMORY, "tile tables");
        if (sw_swap_dev_gathers(s)) {
            t->lease = malloc(sizeof(sw_store_lease) * maxkeys);
            t->tlease = malloc(sizeof(sw_store_lease) * maxkeys);
            t->rkeys = malloc(sizeof(sw_store_key) * maxkeys);
            t->rdst = malloc(sizeof(void *) * maxkeys);
            t->rlens = malloc(sizeof(size_t) * maxkeys);
            t->rgens = malloc(sizeof(uint64_t) * maxkeys);
            t->rsts = malloc(sizeof(sw_status) * maxkeys);
            t->rmap = malloc(sizeof(uint32_t) * maxkeys);
            t->miss_ev = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
            if (!t->lease || !t->tlease || !t->rkeys || !t->rdst || !t->rlens || !t->rgens || !t->rsts ||
                !t->rmap || !t->miss_ev)
                st = sw_fail(SW_STATUS_NO_MEMORY, "tile lease tables");
        }
    }
    /* victim ranking (optional: without it, one scan per missing block) */
    R->vrank = malloc(sizeof(int32_t) * (size_t)(s->c.resident_blocks > 0 ? s->c.resident_blocks : 1));
    R->vscratch = malloc(sw_swap_pool_rank_scratch(s));
    {
        const int64_t win = (int64_t)s->run_evict * s->tile_blocks;
        R->vwin = win > 0 ? (int32_t)(win < s->c.resident_blocks ? win : s->c.resident_blocks)
                          : s->tile_blocks;
        R->vtmp = win > 0 ? malloc(sizeof(int32_t) * 2 * (size_t)R->vwin) : NULL;
    }
    if (!R->vrank || !R->vscratch) {
        free(R->vrank);
        free(R->vscratch);
        R->vrank = NULL;
        R->vscratch = NULL;
    }
    /* store tier counters over the pass (a ticket's bytes are counted by
     * the store when it delivers them, not per call) */
    sw_store_stats ss0;
    memset(&ss0, 0, sizeof ss0);
    ss0.struct_size = sizeof ss0;
    if (R->early)
        ss0 = R->ss0; /* the prelease posted before the scores counts from there */
    else
        (void)sw_store_get_stats(s->store, &ss0);
    R->early = 0;
    int64_t ncomp = 0, nplan = 0; /* tiles computed, tiles planned */
    int end = 0;
    /* A tile's gathers are issued as soon as it is planned (issue_gathers),
     * so PCIe starts while the host plans the rest of the read-ahead (~70 us
     * a tile). */
    while (st == SW_OK && !end &&
           nplan < (depth > 0 ? plan_ahead(tl, ntl, nplan, depth) : 1)) {
        st = plan_next(R, tl, ntl, &nplan, ncomp, depth > 0, &end);
        if (st == SW_OK && nplan > 0)
            st = issue_gathers(R, tl, ntl, nplan - 1, nplan);
    }
    while (st == SW_OK && ncomp < nplan) {
        tile *cur = &tl[ncomp % ntl];
        st = finish_read(R, cur);
        if (st != SW_OK)
            break;
        /* up to tile ncomp + depth (ncomp + 1 behind a direct tile) */
        while (st == SW_OK && depth > 0 && !end &&
               nplan - ncomp <= plan_ahead(tl, ntl, nplan, depth))
            st = plan_next(R, tl, ntl, &nplan, ncomp, depth > 0, &end);
        if (st != SW_OK)
            break;
        st = issue_gathers(R, tl, ntl, ncomp, nplan); /* the new tile's */
        if (st != SW_OK)
            break;
        double t0 = now_s();
        st = compute_tile(R, cur);
        s->st.compute_seconds += now_s() - t0;
        if (cur->pin)
            unpin_tile(s, cur);
        cur->pin = 0;
        if (st != SW_OK)
            break; /* cur's new slots are dropped below */
        cur->nmiss = 0; /* filled: not to be dropped by the cleanup below */
        ncomp++;
        if (depth == 0 && !end)
            st = plan_next(R, tl, ntl, &nplan, ncomp, depth > 0, &end);
    }
    /* Never leave a read in flight (the store would still write into its
     * slots) or a slot pinned. */
    for (int i = 0; tl && i < ntl; i++) {
        sw_swap_read_wait(s->store, &tl[i].job);
        if (tl[i].pin)
            unpin_tile(s, &tl[i]);
    }
    {
        sw_store_stats ss1;
        memset(&ss1, 0, sizeof ss1);
        ss1.struct_size = sizeof ss1;
        if (sw_store_get_stats(s->store, &ss1) == SW_OK) {
            s->st.host_bytes_read += ss1.host_bytes_read - ss0.host_bytes_read;
            s->st.file_bytes_read += ss1.file_bytes_read - ss0.file_bytes_read;
        }
    }
    if (st != SW_OK) {
        /* Slots whose read was planned but not verified and consumed hold
         * garbage (or a failed key's bytes): never to be used. */
        for (int i = 0; tl && i < ntl; i++)
            for (int32_t m = 0; tl[i].miss_blocks && m < tl[i].nmiss && R->seqs; m++) {
                const sw_swap_seq *q = R->seqs[tl[i].bi];
                sw_swap_pool_drop(s, &q->layers[p->layer].blk[tl[i].miss_blocks[m]]);
            }
    }
    free(R->vrank);
    free(R->vscratch);
    free(R->vtmp);
    R->vrank = NULL;
    R->vscratch = NULL;
    R->vtmp = NULL;
    for (int i = 0; tl && i < ntl; i++) {
        free(tl[i].blocks);
        free(tl[i].slots);
        free(tl[i].miss_blocks);
        free(tl[i].miss_slots);
        free(tl[i].keys);
        free(tl[i].dst);
        free(tl[i].lens);
        free(tl[i].gens);
        free(tl[i].sts);
        free(tl[i].lease);
        free(tl[i].tlease);
        free(tl[i].rkeys);
        free(tl[i].rdst);
        free(tl[i].rlens);
        free(tl[i].rgens);
        free(tl[i].rsts);
        free(tl[i].rmap);
        free(tl[i].miss_ev);
    }
    free(tl);
    if (st != SW_OK)
        return st;
    if (s->dev)
        return SW_OK; /* finalised by the caller (sw_swap_dev_pass_end) */
    /* finalise: acc / sum, lse = ln2 * (m + log2(sum)) */
    for (int64_t i = 0; i < rows; i++) {
        float *o = R->acc + i * D;
        if (R->l[i] > 0.0f) {
            const float inv = 1.0f / R->l[i];
            for (int32_t c = 0; c < D; c++)
                o[c] *= inv;
            R->m[i] = (R->m[i] + log2f(R->l[i])) * 0.69314718055994531f;
        } else {
            for (int32_t c = 0; c < D; c++)
                o[c] = 0.0f;
            R->m[i] = -INFINITY;
        }
    }
    return SW_OK;
}

static sw_status validate(sw_swap *s, const sw_swap_attend_params *p, sw_swap_seq **seqs)
{
    if (p->struct_size != sizeof *p)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_attend_params.struct_size %u, want %zu",
                       p->struct_size, sizeof *p);
    if (p->layer < 0 || p->layer >= s->m.num_layers)
        return sw_fail(SW_STATUS_INVALID, "layer %d not in [0, %d)", p->layer,
                       s->m.num_layers);
    if (p->batch < 1 || !p->seq_ids || !p->q_indptr)
        return sw_fail(SW_STATUS_INVALID, "batch %d < 1 or null seq_ids / q_indptr", p->batch);
    if (p->q_indptr[0] != 0)
        return sw_fail(SW_STATUS_INVALID, "q_indptr[0]=%d, want 0", p->q_indptr[0]);
    for (int32_t b = 0; b < p->batch; b++)
        if (p->q_indptr[b + 1] < p->q_indptr[b])
            return sw_fail(SW_STATUS_INVALID, "q_indptr[%d]=%d < q_indptr[%d]=%d", b + 1,
                           p->q_indptr[b + 1], b, p->q_indptr[b]);
    if (p->q_indptr[p->batch] > 0 && (!p->q || !p->o))
        return sw_fail(SW_STATUS_INVALID, "null q or o");
    if (p->sparse_top_k < 0 || p->sparse_recent_blocks < 0)
        return sw_fail(SW_STATUS_INVALID, "sparse_top_k %d / sparse_recent_blocks %d < 0",
                       p->sparse_top_k, p->sparse_recent_blocks);
    for (int32_t b = 0; b < p->batch; b++) {
        seqs[b] = sw_swap_find_seq(s, p->seq_ids[b]);
        if (!seqs[b])
            return sw_fail(SW_STATUS_NOT_FOUND, "sequence %llu (batch entry %d) is not "
                           "registered", (unsigned long long)p->seq_ids[b], b);
        for (int32_t c = 0; c < b; c++)
            if (seqs[c] == seqs[b])
                return sw_fail(SW_STATUS_INVALID, "sequence %llu listed twice (entries %d, %d)",
                               (unsigned long long)p->seq_ids[b], c, b);
    }
    return SW_OK;
}

static void free_run(run *R, int32_t batch)
{
    if (R->scores)
        for (int32_t b = 0; b < batch; b++)
            free(R->scores[b]);
    free(R->scores);
    free(R->seqs);
    free(R->order);
    free(R->qf);
    free(R->m);
    free(R->l);
    free(R->acc);
    free(R->kb);
    free(R->part);
}

/* Device pool: q, o, lse are device memory; the work is enqueued on
 * `stream`; the host waits for the scores only (and for the fp32 outputs of
 * a sparse check). */
static sw_status attend_dev(run *R, sw_swap_attend_result *res, void *stream)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    const int32_t Hq = s->m.num_qo_heads, D = s->m.head_dim;
    const int64_t hrows = (int64_t)p->q_indptr[p->batch] * Hq;
    int32_t maxn = 1;
    int64_t total_blocks = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        const int32_t n = R->seqs[b]->layers[p->layer].nblocks;
        total_blocks += n;
        maxn = n > maxn ? n : maxn;
    }
    R->stream = stream;
    R->nsplit = 1;
    R->scores = calloc((size_t)p->batch, sizeof *R->scores);
    R->order = malloc(sizeof(int32_t) * (size_t)maxn);
    sw_status st = R->scores && R->order ? SW_OK
                                         : sw_fail(SW_STATUS_NO_MEMORY, "attend tables");
    for (int32_t b = 0; b < p->batch && st == SW_OK; b++) {
        const int32_t n = R->seqs[b]->layers[p->layer].nblocks;
        R->scores[b] = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        if (!R->scores[b])
            st = sw_fail(SW_STATUS_NO_MEMORY, "block scores");
    }
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
            memset(&R->ss0, 0, sizeof R->ss0);
            R->ss0.struct_size = sizeof R->ss0;
            R->early = sw_store_get_stats(s->store, &R->ss0) == SW_OK;
            sw_swap_dev_tl_phase(s, 'g');
            const int32_t n = missing_of(&R->seqs[bi]->layers[p->layer], NULL, R->order);
            sw_swap_dev_tl_phase(s, 'm');
            (void)sw_swap_dev_prelease(s, R->seqs[bi], p->layer, R->order, n);
            sw_swap_dev_tl_phase(s, 'P');
            sw_swap_dev_nudge(s, 2);
        }
    }
    if (st == SW_OK) {
        const double t0 = now_s();
        st = sw_swap_dev_attend_begin(s, p, R->seqs, R->scores, stream);
        s->st.score_seconds += now_s() - t0;
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
            st = run_pass(R, 0);
        if (st == SW_OK)
            st = sw_swap_dev_pass_end(s, p, NULL, NULL, exact, stream);
    }
    if (st == SW_OK) {
        R->attended = 0;
        st = run_pass(R, sparse);
    }
    const double tf0 = now_s();
    sw_swap_dev_tl_phase(s, 'R');
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
    if (s->dev) {
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
    s->st.finish_seconds += now_s() - tf0;
    if (st == SW_STATUS_CUDA)
        s->failed = 1; /* the context or a queued copy is broken */
    s->st.hits += (uint64_t)R->hits;
    s->st.misses += (uint64_t)R->misses;
    s->st.tiles += (uint64_t)R->tiles;
    s->st.attends++;
    if (res) {
        res->blocks_total = total_blocks;
        res->blocks_attended = R->attended;
        res->hits = (int64_t)(s->st.hits - h0);
        res->misses = (int64_t)(s->st.misses - m0);
        res->tiles = R->tiles;
        res->sparse_rel_l2 = rel;
    }
    free_run(R, p->batch);
    return st;
}

sw_status sw_swap_attend(sw_swap *s, const sw_swap_attend_params *p, sw_swap_attend_result *res,
                         void *stream)
{
    if (!s || !p)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_attend: null argument");
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    if (res && res->struct_size < sizeof *res)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_attend_result.struct_size %u, want %zu",
                       res->struct_size, sizeof *res);
    sw_swap_dev_tl_phase(s, 'A'); /* (nothing without a device pool) */
    run R;
    memset(&R, 0, sizeof R);
    R.s = s;
    R.p = p;
    R.seqs = calloc((size_t)(p->batch > 0 ? p->batch : 1), sizeof *R.seqs);
    if (!R.seqs)
        return sw_fail(SW_STATUS_NO_MEMORY, "batch table");
    sw_status st = validate(s, p, R.seqs);
    if (st != SW_OK) {
        free(R.seqs);
        return st;
    }
    if (s->dev) {
        if (p->sparse_top_k <= 0) /* the prelease thread gets a job (attend_dev) */
            sw_swap_dev_nudge(s, 1);
        return attend_dev(&R, res, stream);
    }
    const int32_t Hq = s->m.num_qo_heads, D = s->m.head_dim, Rk = s->c.predictor_rank;
    const int64_t nrows = p->q_indptr[p->batch];
    const int64_t hrows = nrows * Hq;
    int32_t maxn = 1;
    int64_t total_blocks = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        const int32_t n = R.seqs[b]->layers[p->layer].nblocks;
        total_blocks += n;
        if (n > maxn)
            maxn = n;
    }
    R.scores = calloc((size_t)p->batch, sizeof *R.scores);
    R.order = malloc(sizeof(int32_t) * (size_t)maxn);
    R.qf = malloc(sizeof(float) * (size_t)(hrows > 0 ? hrows : 1) * (size_t)D);
    R.m = malloc(sizeof(float) * (size_t)(hrows > 0 ? hrows : 1));
    R.l = malloc(sizeof(float) * (size_t)(hrows > 0 ? hrows : 1));
    R.acc = malloc(sizeof(float) * (size_t)(hrows > 0 ? hrows : 1) * (size_t)D);
    R.kb = malloc(sizeof(sw_swap_kblk) * (size_t)s->m.num_kv_heads * (size_t)s->tile_blocks);
    /* key ranges per (tile, kv head): enough tasks for every thread */
    {
        const int32_t H = s->m.num_kv_heads, nt = s->tp.nthreads;
        int32_t ns = (nt + H - 1) / H;
        if (ns > s->tile_blocks)
            ns = s->tile_blocks;
        R.nsplit = ns < 1 ? 1 : ns;
    }
    int32_t maxql = 0;
    for (int32_t b = 0; b < p->batch; b++)
        if (p->q_indptr[b + 1] - p->q_indptr[b] > maxql)
            maxql = p->q_indptr[b + 1] - p->q_indptr[b];
    if (R.nsplit > 1 && maxql > 0)
        R.part = malloc(sizeof(float) * (size_t)s->m.num_kv_heads * (size_t)(R.nsplit - 1) *
                        (size_t)maxql * (size_t)(Hq / s->m.num_kv_heads) * (size_t)(D + 2));
    else
        R.nsplit = 1;
    float *qp = malloc(sizeof(float) * (size_t)(hrows > 0 ? hrows : 1) * (size_t)Rk);
    if (!R.scores || !R.order || !R.qf || !R.m || !R.l || !R.acc || !R.kb ||
        (R.nsplit > 1 && !R.part) || !qp) {
        free(qp);
        free_run(&R, p->batch);
        return sw_fail(SW_STATUS_NO_MEMORY, "attend scratch for %lld rows",
                       (long long)nrows);
    }
    const uint16_t *q16 = p->q;
    const double ts0 = now_s();
    {
        /* scores in the log2 domain: exp2 in the kernels */
        const float scale = p->sm_scale != 0.0f ? p->sm_scale : 1.0f / sqrtf((float)D);
        const float qs = scale * 1.4426950408889634f;
        for (int64_t i = 0; i < hrows * D; i++)
            R.qf[i] = sw_bf16_to_f32(q16[i]) * qs;
    }
    if (hrows > 0)
        sw_swap_project_bf16(s->proj, D, Rk, q16, hrows, qp);
    for (int32_t b = 0; b < p->batch && st == SW_OK; b++) {
        const sw_swap_layer *L = &R.seqs[b]->layers[p->layer];
        const int32_t ql = p->q_indptr[b + 1] - p->q_indptr[b];
        R.scores[b] = malloc(sizeof(float) * (size_t)(L->nblocks > 0 ? L->nblocks : 1));
        if (!R.scores[b]) {
            st = sw_fail(SW_STATUS_NO_MEMORY, "block scores");
            break;
        }
        if (ql > 0)
            sw_swap_score_layer(s, L, qp + (size_t)p->q_indptr[b] * Hq * Rk, ql, R.scores[b]);
        else
            for (int32_t i = 0; i < L->nblocks; i++)
                R.scores[b][i] = -INFINITY;
    }
    free(qp);
    s->st.score_seconds += now_s() - ts0;
    const uint64_t h0 = s->st.hits, m0 = s->st.misses;
    double rel = -1.0;
    const int sparse = p->sparse_top_k > 0;
    float *exact = NULL;
    if (st == SW_OK && sparse && p->sparse_check) {
        st = run_pass(&R, 0);
        if (st == SW_OK) {
            exact = malloc(sizeof(float) * (size_t)(hrows > 0 ? hrows : 1) * (size_t)D);
            if (!exact)
                st = sw_fail(SW_STATUS_NO_MEMORY, "sparse check buffer");
            else
                memcpy(exact, R.acc, sizeof(float) * (size_t)hrows * (size_t)D);
        }
    }
    if (st == SW_OK) {
        R.attended = 0; /* the result reports the blocks of the returned pass */
        st = run_pass(&R, sparse);
    }
    if (st == SW_OK) {
        uint16_t *o16 = p->o;
        for (int64_t i = 0; i < hrows * D; i++)
            o16[i] = sw_f32_to_bf16(R.acc[i]);
        if (p->lse)
            for (int64_t i = 0; i < hrows; i++)
                p->lse[i] = R.m[i];
        if (exact) {
            double num = 0.0, den = 0.0;
            for (int64_t i = 0; i < hrows * D; i++) {
                const double d = (double)R.acc[i] - exact[i];
                num += d * d;
                den += (double)exact[i] * exact[i];
            }
            rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
        }
    }
    free(exact);
    s->st.hits += (uint64_t)R.hits;
    s->st.misses += (uint64_t)R.misses;
    s->st.tiles += (uint64_t)R.tiles;
    s->st.attends++;
    if (res) {
        res->blocks_total = total_blocks;
        res->blocks_attended = R.attended;
        res->hits = (int64_t)(s->st.hits - h0);
        res->misses = (int64_t)(s->st.misses - m0);
        res->tiles = R.tiles;
        res->sparse_rel_l2 = rel;
    }
    free_run(&R, p->batch);
    return st;
}

sw_status sw_swap_score_blocks(sw_swap *s, uint64_t seq_id, int32_t layer, const void *q,
                               int32_t q_len, float *scores, int32_t capacity, int32_t *nblocks)
{
    if (!s || !q || !nblocks || q_len < 1)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_score_blocks: null argument or q_len < 1");
    if (layer < 0 || layer >= s->m.num_layers)
        return sw_fail(SW_STATUS_INVALID, "layer %d not in [0, %d)", layer, s->m.num_layers);
    const sw_swap_seq *sq = sw_swap_find_seq(s, seq_id);
    if (!sq)
        return sw_fail(SW_STATUS_NOT_FOUND, "sequence %llu is not registered",
                       (unsigned long long)seq_id);
    const sw_swap_layer *L = &sq->layers[layer];
    *nblocks = L->nblocks;
    if (capacity < L->nblocks || (!scores && L->nblocks > 0))
        return sw_fail(SW_STATUS_WORKSPACE_TOO_SMALL, "scores has room for %d, the sequence "
                       "has %d blocks", capacity, L->nblocks);
    if (s->dev) {
        if (s->failed)
            return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
        SW_TRY(sw_swap_dev_enter(s));
        return sw_swap_dev_score_host(s, L, q, q_len, scores);
    }
    const int64_t hrows = (int64_t)q_len * s->m.num_qo_heads;
    float *qp = malloc(sizeof(float) * (size_t)hrows * (size_t)s->c.predictor_rank);
    if (!qp)
        return sw_fail(SW_STATUS_NO_MEMORY, "projected queries");
    sw_swap_project_bf16(s->proj, s->m.head_dim, s->c.predictor_rank, q, hrows, qp);
    sw_swap_score_layer(s, L, qp, q_len, scores);
    free(qp);
    return SW_OK;
}
