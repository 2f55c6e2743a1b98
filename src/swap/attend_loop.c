/* The tile loop of an attend call: each sequence's visiting order
 * (resident blocks first, then missing ones in block order), its tiles cut
 * by the planner (plan.c), victims for the misses, a tile's missing
 * stripes read with one store read ticket submitted `prefetch` tiles ahead
 * of the tile being computed, and the pool's operations
 * (attend_internal.h) for everything that depends on where slots live. */
#include "attend_internal.h"
#include "core/sw_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double sw_swap_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* the missing part of build_order's order, also posted to the prelease
 * before it is built (attend_dev.c) */
int32_t sw_swap_missing_of(const sw_swap_layer *L, const uint8_t *sel, int32_t *out)
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
        if (L->blk[b].slot >= 0 && s->slots[L->blk[b].slot].score != sc[b]) {
            s->slots[L->blk[b].slot].score = sc[b];
            if (R->vheap)
                sw_swap_vheap_touch(s, R->vheap, L->blk[b].slot);
        }
        if (sel[b] && L->blk[b].slot >= 0)
            order[cnt++] = b;
    }
    R->nres = cnt;
    /* Missing blocks in block order: consecutive blocks of a stream sit in
     * adjacent extents, so a tile's read merges into a few large requests
     * (score order made them scattered 8 KiB reads: 12% of the raw disk
     * rate in `spillway bench swap`). What stays resident is decided by the
     * eviction policy, not by the visiting order. */
    cnt += sw_swap_missing_of(L, sel, order + cnt);
    free(sel);
    return cnt;
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
    *present = (int32_t)(b1 - b0);
    if (L->run_res)
        return L->run_res[(base % a + (uint64_t)sl->block) / a];
    int32_t c = 0;
    for (int64_t b = b0; b < b1; b++)
        c += L->blk[b].slot >= 0;
    return c;
}

/* Run-aware order of the first n ranked victims (out[0..n), ascending
 * policy order; tmp has room for 2 n int32 and n uint64 after them): a
 * resident block inside a store run that is mostly missing saves little
 * disk I/O (the run is read anyway and the read goes through it: store
 * gaps <= 64 KiB), one of a mostly resident run saves its share of a
 * read. Stable by the run's resident fraction in eighths, ascending, then
 * policy order: over the steps the pool's blocks gather in few runs, and
 * the runs that are read have fewer resident blocks to read through. The
 * policy still chooses which n slots are candidates (the caller's window).
 * A block of the layer this call attends, of a sequence it lists, counts
 * as in a resident run: the pass is reading that layer's runs now (they
 * end up resident unless evicted again), and the next step reads the same
 * layer -- a window ranked while the runs were still mostly missing, kept
 * for later tiles (keep_window), otherwise gave the pass's own blocks
 * first.
 *
 * In an exact pass (`exact`: every block of the listed sequences is
 * attended) those blocks of the pass's own go least recent first, their
 * scores only breaking ties: each is attended once a pass whatever the pool
 * keeps, so the scores cannot change the pass's hits nor the next exact
 * pass's, while score order left the survivors scattered over the store
 * runs, which the next pass then read through (64 KiB gaps). Least recent
 * first keeps the blocks the pass visited last: whole stretches of runs.
 * The bench's disk case with the GPU faked (bench/dev/fake_gpu): bytes read
 * 1.242 -> 1.018 x the payload at h32-8/d128, 1.232 -> 1.009 at h16-2/d256,
 * requests 624 -> 1366 KiB and 974 -> 1639 KiB, the same hits. Blocks of
 * other layers and sequences keep the policy's order (least recent first
 * would evict the layer a model's next step reads first). */
static void recency_sort(const sw_swap *s, int32_t *v, int32_t n, int32_t *tmp, uint64_t *key);

static void runs_first(const sw_swap *s, int32_t *out, int32_t n, int32_t *tmp, int32_t layer,
                       int exact)
{
    int32_t cnt[9] = {0};
    int32_t *cls = tmp + n;
    for (int32_t i = 0; i < n; i++) {
        const sw_swap_slot *sl = &s->slots[out[i]];
        int32_t present = 0;
        if (!sl->seq)
            cls[i] = 0; /* free: first */
        else if (sl->layer == layer && sl->seq->mark == s->marks)
            cls[i] = 8;
        else {
            const int32_t res = run_resident(s, out[i], &present);
            cls[i] = present > 0 ? (int32_t)((int64_t)res * 8 / present) : 0;
        }
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
    /* (class 8 comes last; a window no larger than a tile goes whole to the
     * next tile, so its order keeps no block: no sort, ~17 us a ranking of
     * 512 on the 2-CPU VM, four a step in the host-tier case) */
    if (exact && cnt[8] > 1 && cnt[8] > s->tile_blocks)
        recency_sort(s, out + (n - cnt[8]), cnt[8], tmp, (uint64_t *)(tmp + 2 * (size_t)n));
}

static int key_before(const void *ctx, int32_t x, int32_t y)
{
    const uint64_t *key = (const uint64_t *)ctx;
    return key[x] < key[y];
}

/* v[0..n) by slot recency, least recent first; stable (equal recencies
 * keep their order): each recency read once into key[0..n), the positions
 * sorted through tmp[0..2n). */
static void recency_sort(const sw_swap *s, int32_t *v, int32_t n, int32_t *tmp, uint64_t *key)
{
    int32_t *pos = tmp, *copy = tmp + n;
    for (int32_t i = 0; i < n; i++) {
        key[i] = sw_swap_slot_recency(&s->slots[v[i]]);
        pos[i] = i;
    }
    sw_swap_stable_sort(pos, n, copy, key_before, key);
    memcpy(copy, v, sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        v[i] = copy[pos[i]];
}

/* Eviction keys of the ranked candidates when ranked: a candidate whose
 * slot was touched since (its recency or score changed: a hit or a fill of
 * a tile of this pass) is passed over while a kept window serves later
 * tiles, as a fresh ranking would have placed it by its new key. */
static void snap_window(run *R)
{
    const sw_swap *s = R->s;
    for (int32_t i = 0; i < R->vn; i++) {
        const sw_swap_slot *sl = &s->slots[R->vrank[i]];
        R->vkeys[i].last = sw_swap_slot_recency(sl);
        memcpy(&R->vkeys[i].score, &sl->score, sizeof sl->score);
        R->vkeys[i].seq = sl->seq;
    }
}

/* The first vwin victims by the eviction policy, run-aware reordered. */
static void rank_window(run *R)
{
    sw_swap *s = R->s;
    R->vn = sw_swap_vheap_first(s, R->vheap, R->vwin, R->vrank);
    if (R->vn < 0)
        R->vn = sw_swap_victims_first(s, R->vwin, R->vrank, R->vscratch);
    R->vpos = 0;
    if (R->vtmp)
        runs_first(s, R->vrank, R->vn < R->vwin ? R->vn : R->vwin, R->vtmp, R->p->layer,
                   !R->sparse);
    snap_window(R);
}

/* Past the candidates pinned or touched since the ranking. */
static void skip_taken(run *R)
{
    const sw_swap *s = R->s;
    while (R->vpos < R->vn) {
        const sw_swap_slot *sl = &s->slots[R->vrank[R->vpos]];
        const vsnap *k = &R->vkeys[R->vpos];
        if (!sl->pin && sl->seq == k->seq && sw_swap_slot_recency(sl) == k->last &&
            memcmp(&sl->score, &k->score, sizeof sl->score) == 0)
            break;
        R->vpos++;
    }
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
        /* the blocks missing now are misses when visited (a block is
         * loaded once a pass): the pool may start on them */
        s->ops->order_built(R, R->order + R->nres, R->norder - R->nres);
    }
    const sw_swap_seq *q = R->seqs[R->pb];
    const sw_swap_layer *L = &q->layers[p->layer];
    const float *sc = R->scores[R->pb];
    t->pin = ++s->pin_seq;
    t->bi = R->pb;
    t->n = 0;
    t->nmiss = 0;
    t->nkeys = 0;
    t->nleased = 0;
    t->gathered = 0;
    t->direct = 0;
    t->job.ticket = 0;
    t->hbuf = hbuf;
    t->buf = hbuf; /* a device pool's staging: the ring position's */
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
    /* The window ranked for an earlier tile of the pass serves this one
     * while it holds a span's candidates (keep_window); else ranked anew. */
    if (!s->tune.keep_window || R->vn < 0 || R->vn - R->vpos < span)
        R->vn = -1;
    for (int32_t k = 0; k < span; k++) {
        const int32_t b = R->order[R->pos];
        sw_swap_blk *e = &L->blk[b];
        int32_t slot = e->slot;
        R->pos++;
        if (slot >= 0) {
            R->hits++;
        } else {
            if (R->vrank) {
                if (R->vn < 0)
                    rank_window(R);
                skip_taken(R);
                if (R->vpos == R->vn && s->tune.keep_window && R->vn > 0) {
                    rank_window(R); /* the kept window ran out */
                    skip_taken(R);
                }
                if (R->vpos == R->vn && R->vn == R->vwin) {
                    /* never reached (a tile consumes at most tile_blocks
                     * places), but the full ranking is the safe answer */
                    R->vn = sw_swap_pool_rank(s, R->vrank, R->vscratch);
                    R->vpos = 0;
                    snap_window(R);
                    skip_taken(R);
                }
                slot = R->vpos < R->vn ? R->vrank[R->vpos++] : -1;
            } else {
                slot = sw_swap_pool_victim(s);
            }
            if (slot < 0)
                return -2; /* every slot pinned: a bug in the tile sizing */
            sw_swap_slot *v = &s->slots[slot];
            if (v->seq) {
                sw_swap_layer_unsettle(&v->seq->layers[v->layer]);
                v->seq->layers[v->layer].blk[v->block].slot = -1;
                sw_swap_run_count(s, v->seq, &v->seq->layers[v->layer], v->block, -1);
                s->st.evictions++;
            }
            v->seq = (sw_swap_seq *)q;
            v->layer = p->layer;
            v->block = b;
            e->slot = slot;
            sw_swap_run_count(s, q, L, b, 1);
            R->misses++;
            s->ops->miss_keys(R, t, b);
            t->miss_slots[t->nmiss] = slot;
            t->miss_blocks[t->nmiss++] = b;
        }
        sw_swap_slot *sl = &s->slots[slot];
        sl->pin = t->pin;
        sl->score = sc[b];
        sl->last_access = ++s->tick;
        if (R->vheap)
            sw_swap_vheap_touch(s, R->vheap, slot);
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
    t->job.dst_bytes = s->ops->dst_bytes(s);
    t->job.lengths = t->lens;
    t->job.gens = t->gens;
    t->job.statuses = t->sts;
    t->nleased = 0;
    t->leased_bytes = 0;
    t->land_ev = NULL;
    if (t->nkeys == 0)
        return;
    s->st.read_calls++;
    s->st.stripes_read += t->nkeys;
    if (ahead)
        s->st.prefetched_tiles++;
    s->ops->before_read(R, t); /* leases: the ticket reads only the rest */
    (void)sw_swap_read_submit(s->store, &t->job);
    s->ops->after_submit(R, t);
}

/* Waits for the tile's read and checks every stripe: status, length and the
 * generation the engine wrote. On failure the tile's new slots are freed. */
static sw_status finish_read(run *R, tile *t)
{
    sw_swap *s = R->s;
    if (t->nkeys == 0)
        return SW_OK;
    {
        double t0 = sw_swap_now();
        sw_swap_read_wait(s->store, &t->job);
        s->st.read_wait_seconds += sw_swap_now() - t0;
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
    uint64_t tile_bytes = 0;
    size_t i = 0;
    for (int32_t m = 0; m < t->nmiss; m++) {
        const int32_t b = t->miss_blocks[m];
        const sw_swap_blk *e = &L->blk[b];
        const size_t want = (size_t)e->valid * (size_t)s->m.head_dim *
                            sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
        for (int32_t x = 0; x < 2 * H; x++, i++) {
                /* the order the pool listed the keys in (miss_keys) */
                int kind = 0;
                int32_t h = 0;
                s->ops->key_stripe(x, H, &h, &kind);
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
                    tile_bytes += t->lens[i];
                }
            }
    }
    if (bad == SW_OK) {
        /* this engine's reads only (the store's tier counters count every
         * caller of a shared store) */
        s->st.bytes_read += tile_bytes;
        s->st.host_bytes_read += t->job.tier_bytes[0] + t->leased_bytes;
        s->st.file_bytes_read += t->job.tier_bytes[1];
    }
    if (bad == SW_OK && t->nmiss > 0) {
        /* verified: to where the tile's compute reads them */
        double t0 = sw_swap_now();
        bad = s->ops->read_done(R, t);
        s->st.read_wait_seconds += sw_swap_now() - t0;
    }
    if (bad != SW_OK)
        for (int32_t m = 0; m < t->nmiss; m++)
            sw_swap_pool_drop(s, &L->blk[t->miss_blocks[m]]);
    return bad;
}

/* Unpins the slots tile t pinned: its own blocks' slots, not a scan of the
 * pool (a device pool of GPU-sized memory has 10^5-10^6 slots; a scan per
 * tile was O(pool)). A slot dropped and retaken since carries another pin
 * and is left alone. */
static void unpin_tile(sw_swap *s, sw_swap_vheap *vh, const tile *t)
{
    for (int32_t i = 0; i < t->n; i++) {
        sw_swap_slot *sl = &s->slots[t->slots[i]];
        if (sl->pin == t->pin) {
            sl->pin = 0;
            if (vh)
                sw_swap_vheap_touch(s, vh, t->slots[i]);
        }
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
        unpin_tile(s, R->vheap, u);
        u->pin = 0;
    }
    const double p0 = sw_swap_now();
    const int r = plan_tile(R, t, (int)(j % ntl));
    const double p1 = sw_swap_now();
    s->st.plan_seconds += p1 - p0;
    if (r == 0) {
        *end = 1;
        return SW_OK;
    }
    if (r < 0)
        return r == -1 ? sw_fail(SW_STATUS_NO_MEMORY, "block order")
                       : sw_fail(SW_STATUS_INTERNAL, "no unpinned slot for a tile");
    start_read(R, t, j > ncomp);
    s->st.submit_seconds += sw_swap_now() - p1;
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

/* The tile ring and the victim ranking's tables: sized by the engine
 * (tile_blocks, kv heads, read-ahead, pool), allocated at its first pass
 * and kept until sw_swap_loop_free, not allocated per call. */
struct sw_swap_loop {
    tile *tl;
    int ntl;
    int32_t *vrank;
    vsnap *vkeys;
    void *vscratch;
    int32_t *vtmp;
    sw_swap_vheap *vheap;
    /* the calls' tables (sw_swap_run_tables): grown, never shrunk */
    uint8_t *mem;
    size_t mem_bytes;
};

static void ring_free(sw_swap_loop *lp);

void sw_swap_loop_free(sw_swap *s)
{
    sw_swap_loop *lp = s->loop;
    if (!lp)
        return;
    ring_free(lp);
    sw_aligned_free(lp->mem);
    free(lp);
    s->loop = NULL;
}

/* The engine's loop scratch, allocated on first use; NULL without memory
 * (the next pass tries again). */
static sw_swap_loop *loop_get(sw_swap *s)
{
    if (!s->loop)
        s->loop = calloc(1, sizeof *s->loop);
    return s->loop;
}

static void ring_free(sw_swap_loop *lp)
{
    for (int i = 0; lp->tl && i < lp->ntl; i++) {
        tile *t = &lp->tl[i];
        free(t->blocks);
        free(t->slots);
        free(t->miss_blocks);
        free(t->miss_slots);
        free(t->keys);
        free(t->dst);
        free(t->lens);
        free(t->gens);
        free(t->sts);
        free(t->lease);
        free(t->tlease);
        free(t->rkeys);
        free(t->rdst);
        free(t->rlens);
        free(t->rgens);
        free(t->rsts);
        free(t->rmap);
        free(t->miss_ev);
    }
    free(lp->tl);
    lp->tl = NULL;
    free(lp->vrank);
    free(lp->vkeys);
    free(lp->vscratch);
    free(lp->vtmp);
    sw_swap_vheap_free(lp->vheap);
    lp->vrank = NULL;
    lp->vkeys = NULL;
    lp->vscratch = NULL;
    lp->vtmp = NULL;
    lp->vheap = NULL;
}

static sw_swap_loop *loop_scratch(sw_swap *s)
{
    sw_swap_loop *lp = loop_get(s);
    if (!lp)
        return NULL;
    if (lp->tl)
        return lp;
    const int ntl = s->prefetch + 1;
    const size_t maxkeys = (size_t)s->tile_blocks * (size_t)s->m.num_kv_heads * 2;
    lp->ntl = ntl;
    lp->tl = calloc((size_t)ntl, sizeof *lp->tl);
    int ok = lp->tl != NULL;
    for (int i = 0; ok && i < ntl; i++) {
        tile *t = &lp->tl[i];
        t->blocks = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
        t->slots = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
        t->miss_blocks = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
        t->miss_slots = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
        t->keys = malloc(sizeof(sw_store_key) * maxkeys);
        t->dst = malloc(sizeof(void *) * maxkeys);
        t->lens = malloc(sizeof(size_t) * maxkeys);
        t->gens = malloc(sizeof(uint64_t) * maxkeys);
        t->sts = malloc(sizeof(sw_status) * maxkeys);
        ok = t->blocks && t->slots && t->miss_blocks && t->miss_slots && t->keys && t->dst &&
             t->lens && t->gens && t->sts;
        if (ok && s->ops->leases(s)) {
            t->lease = malloc(sizeof(sw_store_lease) * maxkeys);
            t->tlease = malloc(sizeof(sw_store_lease) * maxkeys);
            t->rkeys = malloc(sizeof(sw_store_key) * maxkeys);
            t->rdst = malloc(sizeof(void *) * maxkeys);
            t->rlens = malloc(sizeof(size_t) * maxkeys);
            t->rgens = malloc(sizeof(uint64_t) * maxkeys);
            t->rsts = malloc(sizeof(sw_status) * maxkeys);
            t->rmap = malloc(sizeof(uint32_t) * maxkeys);
            t->miss_ev = malloc(sizeof(int32_t) * (size_t)s->tile_blocks);
            ok = t->lease && t->tlease && t->rkeys && t->rdst && t->rlens && t->rgens &&
                 t->rsts && t->rmap && t->miss_ev;
        }
    }
    if (!ok) {
        ring_free(lp);
        return NULL;
    }
    /* the ranking's tables are optional: without them, one scan per
     * missing block */
    const size_t pool = (size_t)(s->c.resident_blocks > 0 ? s->c.resident_blocks : 1);
    lp->vrank = malloc(sizeof(int32_t) * pool);
    lp->vkeys = malloc(sizeof(vsnap) * pool);
    lp->vscratch = malloc(sw_swap_pool_rank_scratch(s));
    if (!lp->vrank || !lp->vkeys || !lp->vscratch) {
        free(lp->vrank);
        free(lp->vkeys);
        free(lp->vscratch);
        lp->vrank = NULL;
        lp->vkeys = NULL;
        lp->vscratch = NULL;
    }
    const int64_t win = (int64_t)s->run_evict * s->tile_blocks;
    const int32_t vwin = win > 0 ? (int32_t)(win < s->c.resident_blocks ? win : s->c.resident_blocks)
                                 : s->tile_blocks;
    /* runs_first's scratch: 2 x vwin int32, then vwin uint64 */
    lp->vtmp = win > 0 ? malloc((2 * sizeof(int32_t) + sizeof(uint64_t)) * (size_t)vwin) : NULL;
    /* optional too */
    lp->vheap = lp->vrank ? sw_swap_vheap_new() : NULL;
    return lp;
}

sw_status sw_swap_run_pass(run *R, int sparse)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    SW_TRY(s->ops->pass_begin(R));
    R->sparse = sparse;
    R->pb = -1;
    R->pos = R->norder = 0;
    R->vn = -1;

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
    sw_swap_loop *lp = loop_scratch(s);
    tile *tl = lp ? lp->tl : NULL;
    sw_status st = tl ? SW_OK : sw_fail(SW_STATUS_NO_MEMORY, "tile tables");
    for (int i = 0; tl && i < ntl; i++) {
        /* what the cleanup below reads of a tile never planned this pass */
        tl[i].pin = 0;
        tl[i].bi = 0;
        tl[i].n = tl[i].nmiss = 0;
        tl[i].nkeys = tl[i].nleased = 0;
        tl[i].job.ticket = 0;
        tl[i].gathered = tl[i].direct = 0;
        tl[i].land_ev = NULL;
    }
    /* victim ranking (optional: without it, one scan per missing block) */
    R->vrank = lp ? lp->vrank : NULL;
    R->vkeys = lp ? lp->vkeys : NULL;
    R->vscratch = lp ? lp->vscratch : NULL;
    R->vtmp = lp ? lp->vtmp : NULL;
    R->vheap = lp ? lp->vheap : NULL;
    sw_swap_vheap_reset(R->vheap);
    s->vheap_live = R->vheap; /* (pool_drop's changes reach it) */
    {
        const int64_t win = (int64_t)s->run_evict * s->tile_blocks;
        R->vwin = win > 0 ? (int32_t)(win < s->c.resident_blocks ? win : s->c.resident_blocks)
                          : s->tile_blocks;
    }
    int64_t ncomp = 0, nplan = 0; /* tiles computed, tiles planned */
    int end = 0;
    /* A tile's gathers are issued as soon as it is planned (issue_gathers),
     * so PCIe starts while the host plans the rest of the read-ahead (~70 us
     * a tile). */
    while (st == SW_OK && !end &&
           nplan < (depth > 0 ? plan_ahead(tl, ntl, nplan, depth) : 1)) {
        st = plan_next(R, tl, ntl, &nplan, ncomp, depth > 0, &end);
        if (st == SW_OK && nplan > 0)
            st = s->ops->issue(R, tl, ntl, nplan - 1, nplan);
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
        st = s->ops->issue(R, tl, ntl, ncomp, nplan); /* the new tile's */
        if (st != SW_OK)
            break;
        double t0 = sw_swap_now();
        st = s->ops->compute(R, cur);
        s->st.compute_seconds += sw_swap_now() - t0;
        if (cur->pin)
            unpin_tile(s, R->vheap, cur);
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
            unpin_tile(s, R->vheap, &tl[i]);
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
    R->vrank = NULL;
    R->vscratch = NULL;
    R->vheap = NULL;
    s->vheap_live = NULL;
    R->vtmp = NULL;
    if (st != SW_OK)
        return st;
    return s->ops->pass_end(R);
}


void sw_swap_run_free(run *R, int32_t batch)
{
    (void)batch; /* the tables are the engine's (sw_swap_run_tables) */
    free(R->seqs);
    R->seqs = NULL;
    R->scores = NULL;
    R->order = NULL;
}

sw_status sw_swap_run_tables(run *R, size_t extra, void **extra_out)
{
    sw_swap *s = R->s;
    const sw_swap_attend_params *p = R->p;
    int32_t maxn = 1;
    size_t nsc = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        const int32_t n = R->seqs[b]->layers[p->layer].nblocks;
        maxn = n > maxn ? n : maxn;
        nsc += sw_align_up((size_t)(n > 0 ? n : 1) * sizeof(float), 64);
    }
    const size_t o_ptr = 0;
    const size_t o_ord = sw_align_up(sizeof(float *) * (size_t)p->batch, 64);
    const size_t o_sc = o_ord + sw_align_up(sizeof(int32_t) * (size_t)maxn, 64);
    const size_t o_x = o_sc + nsc;
    const size_t need = o_x + extra;
    sw_swap_loop *lp = loop_get(s);
    if (!lp)
        return sw_fail(SW_STATUS_NO_MEMORY, "attend tables");
    if (lp->mem_bytes < need) {
        sw_aligned_free(lp->mem);
        lp->mem_bytes = 0;
        lp->mem = sw_aligned_alloc(64, need);
        if (!lp->mem)
            return sw_fail(SW_STATUS_NO_MEMORY, "attend tables: %zu bytes", need);
        lp->mem_bytes = need;
    }
    R->scores = (float **)(void *)(lp->mem + o_ptr);
    R->order = (int32_t *)(void *)(lp->mem + o_ord);
    size_t o = o_sc;
    for (int32_t b = 0; b < p->batch; b++) {
        const int32_t n = R->seqs[b]->layers[p->layer].nblocks;
        R->scores[b] = (float *)(void *)(lp->mem + o);
        o += sw_align_up((size_t)(n > 0 ? n : 1) * sizeof(float), 64);
    }
    *extra_out = extra ? lp->mem + o_x : NULL;
    return SW_OK;
}


void sw_swap_run_account(run *R, sw_swap_attend_result *res, uint64_t h0, uint64_t m0,
                         int64_t total_blocks, double rel)
{
    sw_swap *s = R->s;
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
}
