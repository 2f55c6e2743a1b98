/* The device pool's resident path: an attend whose blocks are all in the
 * pool, BF16, exact (sparse_top_k 0), with at most SW_DECODE_ROWS query
 * rows per (sequence, kv head) -- a decode step, a few speculative tokens
 * -- runs the paged decode kernel (src/cuda/attn/paged_decode.cu) straight
 * over the pool's slots, each slot a page of block_size tokens ([Hkv][B][d]
 * K, then V at v_off): no scores, no tile plan, no store.
 *
 * Each layer's page table lives on the device, in the table arena: built
 * once by the first resident call after the layer was unsettled (a block
 * evicted or dropped, an offload not written through), then kept by the
 * offloads' write-through (the pack kernel writes the new slot's entry).
 * A call over settled layers reads no block on the host: its work is the
 * batch's lengths, the decode split (sw_plan_decode) and those passed to
 * the launch in its parameters (a larger plan: one copy from a pinned
 * ring) -- constant in the number of blocks -- and it does not wait for
 * the GPU.
 *
 * What it leaves out, on purpose: slot scores (the SCORE policy's first
 * key) stay those of the last call that went through the tile loop; the
 * blocks' recency is the layer's (sw_swap_layer.touch), the same order a
 * tile-loop call's per-block ticks would give. Any other call (a block
 * missing, an FP8 block, a sparse call, a long chunk) takes the tile
 * loop, whose first wait (sw_swap_dev_wait_done) orders it after this
 * one. */
#include "attend_internal.h"
#include "dev_internal.h"
#include "swap_cuda.h"
#include "attn/attn_internal.h"
#include "core/sw_core.h"
#include "core/sw_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FAST_ALIGN 256

/* (the plan's words in a launch: its structs are int32_t fields) */
_Static_assert(sizeof(sw_decode_item) % sizeof(int32_t) == 0 &&
                   sizeof(sw_decode_merge) % sizeof(int32_t) == 0,
               "decode items and merges are whole words");

static size_t up(size_t x) { return (x + 15) & ~(size_t)15; }

/* 1 (and the batch's blocks) when every block is resident BF16 and every
 * sequence's rows fit one decode item; else 0 (the tile loop takes it). */
int sw_swap_dev_fast_eligible(sw_swap *s, const sw_swap_attend_params *p,
                              sw_swap_seq *const *seqs, int64_t *nblocks)
{
    const int32_t G = s->m.num_qo_heads / s->m.num_kv_heads, D = s->m.head_dim;
    /* the kernel moves q and o 16 bytes at a time (the tile loop does not
     * ask that of a caller's buffers) */
    if (!s->dev || !s->tune.resident_fast || p->sparse_top_k > 0 ||
        (D != 64 && D != 128 && D != 256) ||
        (((uintptr_t)p->q | (uintptr_t)p->o) & 15) || ((uintptr_t)p->lse & 3))
        return 0;
    struct dev_fast *f = &s->dev->fast;
    if (f->slots == 0) {
        /* once: decode CTAs resident at once; a device whose kernel cannot
         * run leaves every call to the tile loop */
        int32_t sms = 0, per = 0;
        f->slots = sw_cuda_paged_decode_config(s->dev->device, D, SW_DTYPE_BF16, &sms, &per) ==
                           SW_OK
                       ? (int64_t)sms * per
                       : -1;
    }
    if (f->slots < 0)
        return 0;
    int64_t n = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        const int32_t ql = p->q_indptr[b + 1] - p->q_indptr[b];
        if ((int64_t)ql * G > SW_DECODE_ROWS)
            return 0;
        const sw_swap_layer *L = &seqs[b]->layers[p->layer];
        if (!L->res_ok) /* (settled: known resident) */
            for (int32_t i = 0; i < L->nblocks; i++)
                if (!sw_swap_blk_resident(&L->blk[i]))
                    return 0;
        n += L->nblocks;
    }
    *nblocks = n;
    return 1;
}

/* Ring entry r with room for `bytes`: its last upload done first.
 *
 * Resident calls run in call order on the GPU (each waits for the one
 * before: ev_done), so a call whose upload is done has every earlier
 * call's upload done too. Entry r's last user is known done when an
 * upload at least as recent was seen done: once every half ring an event
 * query of the entry used half a ring ago settles the next half ring's
 * entries, and an event query costs the host more than the rest of the
 * entry's bookkeeping. Only a GPU that falls behind makes the call wait. */
static sw_status blob_get(sw_swap_dev *d, int r, size_t bytes)
{
    struct dev_fast *f = &d->fast;
    if (f->call[r] > f->done_upto) {
        const int half = (r + SW_SWAP_FAST_RING / 2) % SW_SWAP_FAST_RING;
        if (f->call[half] > f->call[r]) {
            const int done = sw_cuda_swap_event_done(f->ev[half]);
            if (done < 0)
                return (sw_status)done;
            if (done)
                f->done_upto = f->call[half];
        }
        if (f->call[r] > f->done_upto) {
            SW_TRY(sw_cuda_swap_event_sync(f->ev[r]));
            f->done_upto = f->call[r];
        }
    }
    if (!f->ev[r])
        SW_TRY(sw_cuda_swap_event_create(&f->ev[r], 0));
    if (bytes > f->cap) {
        /* every entry grows at once, slices of one pinned and one device
         * slab: an entry's first use allocates nothing (one allocation a
         * use made the ring's first 32 calls wait for the GPU and the
         * allocator: 0.3-0.7 ms each on the H200), and a growth waits once
         * for the GPU, whose kernels read the old slab */
        SW_TRY(sw_swap_dev_wait_done(d));
        size_t cap = f->cap ? 2 * f->cap : 65536;
        while (cap < bytes)
            cap *= 2;
        sw_cuda_host_free(f->slab_host);
        sw_cuda_swap_free(f->slab_dev);
        f->slab_host = f->slab_dev = NULL;
        f->cap = 0;
        for (int i = 0; i < SW_SWAP_FAST_RING; i++)
            f->host[i] = f->dev[i] = NULL;
        SW_TRY(sw_cuda_host_alloc(&f->slab_host, cap * SW_SWAP_FAST_RING));
        sw_status st = sw_cuda_swap_alloc(&f->slab_dev, cap * SW_SWAP_FAST_RING);
        if (st != SW_OK) {
            sw_cuda_host_free(f->slab_host);
            f->slab_host = NULL;
            return st;
        }
        for (int i = 0; i < SW_SWAP_FAST_RING; i++) {
            f->host[i] = (char *)f->slab_host + (size_t)i * cap;
            f->dev[i] = (char *)f->slab_dev + (size_t)i * cap;
        }
        f->cap = cap;
    }
    return SW_OK;
}

/* A device buffer of the resident path with room for `bytes` (at least
 * `least`, doubled): grown after the calls that used it -- every resident
 * call waits on the GPU for the one before it, so the last one done, all
 * are -- and zeroed in stream order when `zero` (the merge counters). */
static sw_status grow(sw_swap_dev *d, void **buf, size_t *cap, size_t bytes, size_t least,
                      int zero, void *stream)
{
    if (bytes <= *cap)
        return SW_OK;
    SW_TRY(sw_swap_dev_wait_done(d));
    sw_cuda_swap_free(*buf);
    *buf = NULL;
    *cap = 0;
    size_t c = least;
    while (c < bytes)
        c *= 2;
    SW_TRY(sw_cuda_swap_alloc(buf, c));
    if (zero)
        SW_TRY(sw_cuda_swap_zero(*buf, c, stream));
    *cap = c;
    return SW_OK;
}

/* The entries a layer's region gets: twice its blocks (a decode appends
 * for a while before the region is outgrown), at least 64, at most the
 * sequence's max_blocks. */
static int64_t region_of(const sw_swap_seq *q, const sw_swap_layer *L)
{
    int64_t n = 2 * (int64_t)L->nblocks;
    if (n < 64)
        n = 64;
    if (n > (int64_t)q->max_blocks)
        n = q->max_blocks;
    return n < L->nblocks ? L->nblocks : n;
}

static int needs_region(const sw_swap_layer *L)
{
    return !L->res_ok && (L->tab_off < 0 || L->tab_n < L->nblocks);
}

/* Regions in the table arena for the batch's unsettled layers that lack
 * one (or outgrew theirs). A full arena drops every region -- each layer
 * is rebuilt by its next resident call -- and is reallocated, when it
 * must grow, once the GPU is done with it (the kernels of earlier calls
 * read it, an offload's pack kernel writes it). */
sw_status sw_swap_dev_tab_regions(sw_swap *s, int32_t layer, int32_t batch,
                                 sw_swap_seq *const *seqs)
{
    sw_swap_dev *d = s->dev;
    struct dev_fast *f = &d->fast;
    int64_t need = 0;
    for (int32_t b = 0; b < batch; b++)
        if (needs_region(&seqs[b]->layers[layer]))
            need += region_of(seqs[b], &seqs[b]->layers[layer]);
    if (need == 0)
        return SW_OK;
    if (f->tab_used + need > f->tab_cap) {
        int64_t live = 0;
        for (size_t i = 0; i < s->nseqs; i++)
            for (int32_t l = 0; l < s->m.num_layers; l++) {
                sw_swap_layer *L = &s->seqs[i]->layers[l];
                if (L->tab_off >= 0)
                    live += L->tab_n;
                L->tab_off = -1;
                L->tab_n = 0;
                sw_swap_layer_unsettle(L);
            }
        need = 0;
        for (int32_t b = 0; b < batch; b++)
            need += region_of(seqs[b], &seqs[b]->layers[layer]);
        int64_t cap = 2 * (live + need);
        if (cap < 4096)
            cap = 4096;
        if (cap > INT32_MAX) {
            f->tab_used = 0; /* (every region was dropped above) */
            return sw_fail(SW_STATUS_UNSUPPORTED, "resident attend: page tables of %lld blocks",
                           (long long)cap);
        }
        if (cap > f->tab_cap) {
            SW_TRY(sw_swap_dev_wait_done(d));
            if (d->offload_pending) {
                SW_TRY(sw_cuda_swap_event_sync(d->ev_offload));
                d->offload_pending = 0;
            }
            sw_cuda_swap_free(f->tab);
            f->tab = NULL;
            f->tab_cap = 0;
            SW_TRY(sw_cuda_swap_alloc((void **)&f->tab, sizeof(int32_t) * (size_t)cap));
            f->tab_cap = cap;
        }
        f->tab_used = 0;
    }
    for (int32_t b = 0; b < batch; b++) {
        sw_swap_layer *L = &seqs[b]->layers[layer];
        if (needs_region(L)) {
            L->tab_off = f->tab_used;
            L->tab_n = (int32_t)region_of(seqs[b], L);
            f->tab_used += L->tab_n;
        }
    }
    return SW_OK;
}

int64_t sw_swap_dev_unsettled(int32_t layer, int32_t batch, sw_swap_seq *const *seqs)
{
    int64_t n = 0;
    for (int32_t b = 0; b < batch; b++)
        if (!seqs[b]->layers[layer].res_ok)
            n += seqs[b]->layers[layer].nblocks;
    return n;
}

sw_status sw_swap_dev_settle(sw_swap *s, int32_t layer, int32_t batch, sw_swap_seq *const *seqs,
                             int32_t *px, void *stream)
{
    int32_t *tab = s->dev->fast.tab;
    int64_t k = 0;
    for (int32_t b = 0; b < batch; b++) {
        sw_swap_layer *L = &seqs[b]->layers[layer];
        if (L->res_ok)
            continue;
        for (int32_t i = 0; i < L->nblocks; i++)
            px[k + i] = L->blk[i].slot;
        if (L->nblocks > 0)
            SW_TRY(sw_cuda_memcpy_h2d_async(tab + L->tab_off, px + k,
                                            sizeof(int32_t) * (size_t)L->nblocks, stream));
        k += L->nblocks;
        L->res_ok = 1;
    }
    return SW_OK;
}

sw_swap_dev_blob sw_swap_dev_blob_layout(int32_t batch, int64_t px, int64_t items,
                                         int64_t merges)
{
    const size_t b1 = up(sizeof(int32_t) * ((size_t)batch + 1));
    sw_swap_dev_blob o;
    o.qo = 0;
    o.kv = b1;
    o.pi = o.kv + b1;
    o.src = o.pi + b1;
    o.items = o.src + b1;
    o.merges = o.items + up(sizeof(sw_decode_item) * (size_t)items);
    o.count = o.merges + up(sizeof(sw_decode_merge) * (size_t)merges);
    o.px = o.count + 16;
    o.bytes = o.px + up(sizeof(int32_t) * (size_t)(px > 0 ? px : 1));
    return o;
}

size_t sw_swap_dev_parts_bytes(const sw_swap *s, int64_t np, size_t *lse_off)
{
    const size_t o = sizeof(float) * (size_t)np * SW_DECODE_ROWS * (size_t)s->m.head_dim;
    *lse_off = (o + FAST_ALIGN - 1) / FAST_ALIGN * FAST_ALIGN;
    return *lse_off + sizeof(float) * (size_t)np * SW_DECODE_ROWS;
}

sw_status sw_swap_dev_kv_offsets(const sw_swap *s, int32_t layer, int32_t batch,
                                 sw_swap_seq *const *seqs, int32_t *kvp)
{
    const int32_t B = s->m.block_size;
    kvp[0] = 0;
    for (int32_t b = 0; b < batch; b++) {
        const sw_swap_layer *L = &seqs[b]->layers[layer];
        const int64_t len = L->nblocks ? (int64_t)(L->nblocks - 1) * B + L->blk[L->nblocks - 1].valid
                                       : 0;
        if (kvp[b] + len > INT32_MAX)
            return sw_fail(SW_STATUS_UNSUPPORTED, "resident attend: %lld keys in one call",
                           (long long)(kvp[b] + len));
        kvp[b + 1] = kvp[b] + (int32_t)len;
    }
    return SW_OK;
}

void sw_swap_dev_decode_args(const sw_swap *s, const void *q, void *o, float *lse, int32_t causal,
                             float sm_scale, sw_cuda_paged_args *a)
{
    const sw_swap_dev *d = s->dev;
    const int32_t B = s->m.block_size, D = s->m.head_dim;
    memset(a, 0, sizeof *a);
    a->dtype = SW_DTYPE_BF16;
    a->num_qo_heads = s->m.num_qo_heads;
    a->num_kv_heads = s->m.num_kv_heads;
    a->head_dim = D;
    a->causal = causal;
    a->sm_scale = sm_scale != 0.0f ? sm_scale : 1.0f / sqrtf((float)D);
    a->q = q;
    a->k_pool = d->pool;
    a->v_pool = d->pool + d->v_off;
    a->o = o;
    a->lse = lse;
    a->q_stride = a->o_stride = (int64_t)s->m.num_qo_heads * D;
    a->k_tok = a->v_tok = D;
    a->k_head = a->v_head = (int64_t)B * D;
    a->k_page = a->v_page = (int64_t)(s->slot_bytes / 2);
    a->page_size = B;
    a->ps_log2 = (B & (B - 1)) == 0 ? __builtin_ctz((unsigned)B) : -1;
}

sw_status sw_swap_dev_fast_attend(sw_swap *s, const sw_swap_attend_params *p,
                                  sw_swap_seq *const *seqs, int64_t nblk,
                                  sw_swap_attend_result *res, void *stream)
{
    sw_swap_dev *d = s->dev;
    struct dev_fast *f = &d->fast;
    const int32_t batch = p->batch;
    const int64_t rows = p->q_indptr[batch];
    if (rows > 0 && (!sw_cuda_is_device_ptr(p->q) || !sw_cuda_is_device_ptr(p->o) ||
                     (p->lse && !sw_cuda_is_device_ptr(p->lse))))
        return sw_fail(SW_STATUS_INVALID, "device pool: q (%p), o (%p) and lse (%p) must be device "
                       "memory", p->q, p->o, (void *)p->lse);
    /* the blob: [qo_indptr | kv_indptr | page_indptr | page_indices | items | merges] */
    const size_t b1 = sizeof(int32_t) * ((size_t)batch + 1);
    int32_t *kvp = f->kv_scratch;
    if ((size_t)batch + 1 > f->kv_scratch_n) {
        kvp = realloc(f->kv_scratch, b1);
        if (!kvp)
            return sw_fail(SW_STATUS_NO_MEMORY, "resident attend: %d sequences", batch);
        f->kv_scratch = kvp;
        f->kv_scratch_n = (size_t)batch + 1;
    }
    if (2 * ((size_t)batch + 1) > f->plan_in_cap) {
        int32_t *in = realloc(f->plan_in, 2 * b1);
        if (!in)
            return sw_fail(SW_STATUS_NO_MEMORY, "resident attend: %d sequences", batch);
        f->plan_in = in;
        f->plan_in_cap = 2 * ((size_t)batch + 1);
        f->plan_n = -1;
    }
    SW_TRY(sw_swap_dev_kv_offsets(s, p->layer, batch, seqs, kvp));
    SW_TRY(sw_swap_dev_tab_regions(s, p->layer, batch, seqs));
    /* entries of the layers rebuilt by this call */
    const int64_t nre = sw_swap_dev_unsettled(p->layer, batch, seqs);
    /* the split, planned once into scratch sized by its bound: the pairs
     * unsplit, or at most 8 waves of the device's decode slots */
    const int64_t pairs = (int64_t)batch * s->m.num_kv_heads;
    const int64_t bound = pairs > 8 * f->slots ? pairs : 8 * f->slots;
    if (bound > f->plan_cap) {
        free(f->plan_items);
        f->plan_items = malloc(sizeof *f->plan_items * (size_t)bound);
        f->plan_n = -1;
        f->plan_cap = f->plan_items ? bound : 0;
    }
    if (pairs > f->plan_mcap) {
        free(f->plan_merges);
        f->plan_merges = malloc(sizeof *f->plan_merges * (size_t)pairs);
        f->plan_n = -1;
        f->plan_mcap = f->plan_merges ? pairs : 0;
    }
    if (!f->plan_items || !f->plan_merges)
        return sw_fail(SW_STATUS_NO_MEMORY, "resident attend: a plan of %lld items",
                       (long long)bound);
    int64_t nm = 0, np = 0, ni;
    if (f->plan_n >= 0 && f->plan_in && f->plan_batch == batch &&
        !memcmp(f->plan_in, p->q_indptr, b1) && !memcmp(f->plan_in + batch + 1, kvp, b1)) {
        ni = f->plan_n; /* the same lengths: the same plan (its buffers unchanged) */
        nm = f->plan_nm;
        np = f->plan_np;
    } else {
        f->plan_n = -1;
        ni = sw_plan_decode(p->q_indptr, kvp, batch, s->m.num_kv_heads, f->slots,
                            f->plan_items, f->plan_merges, &nm, &np);
        if (ni == -2)
            return sw_fail(SW_STATUS_NO_MEMORY, "resident attend: the plan's buffers");
        if (ni >= 0 && (size_t)batch + 1 <= f->plan_in_cap / 2) {
            memcpy(f->plan_in, p->q_indptr, b1);
            memcpy(f->plan_in + batch + 1, kvp, b1);
            f->plan_batch = batch;
            f->plan_n = ni;
            f->plan_nm = nm;
            f->plan_np = np;
        }
    }
    SW_ASSERT_RET(ni >= 0 && ni <= bound && nm <= pairs);
    size_t lse_off = 0;
    const size_t part_bytes = sw_swap_dev_parts_bytes(s, np, &lse_off);
    SW_TRY(grow(d, &f->part, &f->part_cap, part_bytes > 0 ? part_bytes : 1, 1 << 20, 0, stream));
    SW_TRY(grow(d, &f->cnt, &f->cnt_cap, sizeof(int32_t) * (size_t)nm,
                sizeof(int32_t) * 1024, 1, stream));
    sw_cuda_paged_args a;
    sw_swap_dev_decode_args(s, p->q, p->o, p->lse, p->causal, p->sm_scale, &a);
    a.batch = batch;
    a.total_kv = kvp[batch];
    a.page_indices = f->tab;
    a.num_items = (int32_t)ni;
    a.num_merges = (int32_t)nm;
    a.part_o = (float *)f->part;
    a.part_lse = (float *)((char *)f->part + lse_off);
    a.merge_count = (int32_t *)f->cnt; /* the merges fold in the decode launch */
    /* the plan in the launch's parameters: no layer to settle (their
     * slots go up from the ring), few enough words, and their room; else
     * in ring entry r, uploaded */
    const int inl = nre == 0 && s->tune.resident_inline &&
                    sw_decode_inline_words(batch, ni, nm) <= SW_DECODE_INLINE_WORDS &&
                    (f->inl || (f->inl = malloc(sizeof *f->inl)) != NULL);
    const int r = f->next;
    sw_swap_dev_blob o = {0};
    int32_t *qo, *kv, *pi;
    void *items, *merges;
    if (inl) {
        sw_decode_inline *w = f->inl;
        w->qo = 0;
        w->kv = batch + 1;
        w->pi = 2 * (batch + 1);
        w->items = 3 * (batch + 1);
        w->merges = w->items + (int32_t)(sizeof *f->plan_items / sizeof(int32_t)) * (int32_t)ni;
        qo = w->w + w->qo;
        kv = w->w + w->kv;
        pi = w->w + w->pi;
        items = w->w + w->items;
        merges = w->w + w->merges;
        a.inl = w; /* (copied by the launch) */
        f->inline_calls++;
    } else {
        o = sw_swap_dev_blob_layout(batch, nre, ni, nm);
        SW_TRY(blob_get(d, r, o.bytes)); /* (px: the rebuilt layers' staging) */
        char *h = f->host[r];
        qo = (int32_t *)(h + o.qo);
        kv = (int32_t *)(h + o.kv);
        pi = (int32_t *)(h + o.pi);
        items = h + o.items;
        merges = h + o.merges;
    }
    memcpy(qo, p->q_indptr, b1);
    memcpy(kv, kvp, b1);
    /* page_indptr: each layer's region; an unsettled layer's slots go up
     * into it from the ring (below) */
    const uint64_t tick = ++s->tick;
    for (int32_t b = 0; b < batch; b++) {
        sw_swap_layer *L = &seqs[b]->layers[p->layer];
        pi[b] = (int32_t)L->tab_off;
        L->touch = tick;
    }
    pi[batch] = 0; /* (the kernel reads a sequence's pages from pi[b]) */
    memcpy(items, f->plan_items, sizeof *f->plan_items * (size_t)ni);
    memcpy(merges, f->plan_merges, sizeof *f->plan_merges * (size_t)nm);
    /* after the last call (its partials, the slots it read) and the last
     * offload's projections and pool writes */
    if (d->done_pending)
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_done));
    if (d->offload_pending)
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_offload));
    if (inl) {
        /* (settles the batch's layers without blocks: nothing to copy) */
        SW_TRY(sw_swap_dev_settle(s, p->layer, batch, seqs, NULL, stream));
    } else {
        char *h = f->host[r], *dv = f->dev[r];
        /* (no item count: the grid is the items) */
        SW_TRY(sw_cuda_memcpy_h2d_async(dv, h, o.count, stream));
        SW_TRY(sw_swap_dev_settle(s, p->layer, batch, seqs, (int32_t *)(h + o.px), stream));
        SW_TRY(sw_cuda_swap_event_record(f->ev[r], stream));
        f->call[r] = ++f->calls;
        f->next = (r + 1) % SW_SWAP_FAST_RING;
        a.qo_indptr = (const int32_t *)(dv + o.qo);
        a.kv_indptr = (const int32_t *)(dv + o.kv);
        a.page_indptr = (const int32_t *)(dv + o.pi);
        a.items = (const sw_decode_item *)(dv + o.items);
        a.merges = (const sw_decode_merge *)(dv + o.merges);
    }
    /* kernel_timing: the kernel's GPU time, the call then waits for it */
    if (d->timing && !f->tev[0]) {
        SW_TRY(sw_cuda_swap_event_create(&f->tev[0], 1));
        SW_TRY(sw_cuda_swap_event_create(&f->tev[1], 1));
    }
    sw_status st = d->timing ? sw_cuda_swap_event_record(f->tev[0], stream) : SW_OK;
    if (st == SW_OK)
        st = sw_cuda_paged_decode_launch(&a, stream);
    if (st == SW_OK && d->timing)
        st = sw_cuda_swap_event_record(f->tev[1], stream);
    if (st == SW_OK)
        st = sw_cuda_swap_event_record(d->ev_done, stream);
    if (st != SW_OK)
        return st; /* (SW_STATUS_CUDA: the caller marks the engine failed) */
    d->done_pending = 1;
    if (d->timing) {
        float ms = 0.0f;
        SW_TRY(sw_cuda_swap_event_sync(f->tev[1]));
        SW_TRY(sw_cuda_swap_event_ms(&ms, f->tev[0], f->tev[1]));
        s->st.kernel_seconds += ms * 1e-3;
    }
    s->st.kernel_kv_bytes += (uint64_t)kvp[batch] * 2u * (uint64_t)s->m.num_kv_heads *
                             (uint64_t)s->m.head_dim * 2u;
    s->st.attends++;
    s->st.resident_attends++;
    s->st.hits += (uint64_t)nblk;
    if (res) {
        res->blocks_total = nblk;
        res->blocks_attended = nblk;
        res->hits = nblk;
        res->misses = 0;
        res->tiles = 0;
        res->sparse_rel_l2 = -1.0;
    }
    return SW_OK;
}

void sw_swap_dev_fast_free(sw_swap_dev *d)
{
    struct dev_fast *f = &d->fast;
    for (int r = 0; r < SW_SWAP_FAST_RING; r++) {
        if (f->call[r] > f->done_upto)
            (void)sw_cuda_swap_event_sync(f->ev[r]);
        sw_cuda_swap_event_destroy(f->ev[r]);
    }
    sw_cuda_host_free(f->slab_host);
    sw_cuda_swap_free(f->slab_dev);
    sw_cuda_swap_event_destroy(f->tev[0]);
    sw_cuda_swap_event_destroy(f->tev[1]);
    sw_cuda_swap_free(f->part);
    sw_cuda_swap_free(f->cnt);
    sw_cuda_swap_free(f->tab);
    free(f->kv_scratch);
    free(f->plan_items);
    free(f->plan_merges);
    free(f->plan_in);
    free(f->inl);
    memset(f, 0, sizeof *f);
    f->plan_n = -1;
}
