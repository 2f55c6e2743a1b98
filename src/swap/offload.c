/* Offload: KV blocks into the store. A block comes dense in the slot layout
 * ([Hkv][block][d]), token-major ([block][Hkv][d]) or strided, from host or
 * GPU memory; every item of a batch is checked before anything is written,
 * device blocks are packed by one kernel and copied to pinned staging in
 * one copy, strided host blocks packed on the host; then every item is
 * applied to its layer in order (prepare), all their stripes go to the
 * store in one sw_store_write_batch, and each block gets its predictor
 * entry, then (persist_manifests) all manifests in a second batch -- after
 * the stripes, so that a block whose manifest is in the store has its
 * stripes. */
#include "swap_internal.h"
#include "attend_internal.h"
#include "swap_cuda.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sw_swap_block as first published (up to v_scale). */
#define SW_SWAP_BLOCK_V1 offsetof(sw_swap_block, layout)

/* One item as checked: its sequence and layout with the strides resolved. */
typedef struct item_view {
    sw_swap_seq *q;
    size_t es;             /* element bytes */
    sw_kv_layout layout;
    int64_t ts, hs;        /* token and head strides, elements */
    int on_device;
    int dense;             /* the slot layout itself: k and v used in place */
    size_t staged;         /* device items: offset of its K in the staging */
    size_t packed;         /* strided host items: offset of its K in ost.pack */
    const uint8_t *kd, *vd; /* K and V in the slot layout, once staged/packed */
    int32_t old_n;         /* its layer's blocks before it was applied */
    int32_t oslot;         /* the slot its block had before (-1: none) */
    float oscore;          /* ... and that slot's score */
    int wt;                /* write-through gave its block a slot */
    int tabw;              /* ... and wrote it into its layer's arena entry */
    float *proj;           /* host engine, BF16: its projected keys */
} item_view;

/* "item i: " before a batch's messages (nothing for a single block). */
static const char *who(char *buf, size_t cap, int32_t i, int32_t n)
{
    if (n <= 1)
        buf[0] = 0;
    else
        snprintf(buf, cap, "item %d: ", i);
    return buf;
}

/* The static checks of one item (nothing that earlier items of the batch
 * change: the block index is checked when the item is applied). */
static sw_status check_item(sw_swap *s, int32_t i, int32_t n, uint64_t seq_id, int32_t layer,
                            const sw_swap_block *b, item_view *v)
{
    char w[32];
    who(w, sizeof w, i, n);
    if (!b)
        return sw_fail(SW_STATUS_INVALID, "%ssw_swap_offload: null block", w);
    if (b->struct_size != sizeof *b && b->struct_size != SW_SWAP_BLOCK_V1)
        return sw_fail(SW_STATUS_INVALID, "%ssw_swap_block.struct_size %u, want %zu", w,
                       b->struct_size, sizeof *b);
    if (layer < 0 || layer >= s->m.num_layers)
        return sw_fail(SW_STATUS_INVALID, "%slayer %d not in [0, %d)", w, layer,
                       s->m.num_layers);
    v->q = sw_swap_find_seq(s, seq_id);
    if (!v->q)
        return sw_fail(SW_STATUS_NOT_FOUND, "%ssequence %llu is not registered", w,
                       (unsigned long long)seq_id);
    const size_t es = sw_swap_kv_elem_size(b->dtype);
    if (es == 0)
        return sw_fail(SW_STATUS_INVALID, "%sunknown kv dtype %d", w, (int)b->dtype);
    v->es = es;
    const int32_t H = s->m.num_kv_heads, B = s->m.block_size, D = s->m.head_dim;
    if (!b->k || !b->v)
        return sw_fail(SW_STATUS_INVALID, "%ssw_swap_offload: null k or v buffer", w);
    if (b->valid_tokens < 1 || b->valid_tokens > B)
        return sw_fail(SW_STATUS_INVALID, "%svalid_tokens %d not in [1, %d]", w,
                       b->valid_tokens, B);
    const int v2 = b->struct_size == sizeof *b;
    v->layout = v2 ? b->layout : SW_KV_HND;
    v->ts = v2 ? b->token_stride : 0;
    v->hs = v2 ? b->head_stride : 0;
    v->on_device = v2 ? b->on_device : 0;
    if (v->layout != SW_KV_HND && v->layout != SW_KV_NHD)
        return sw_fail(SW_STATUS_INVALID, "%sblock layout %d is neither SW_KV_HND nor SW_KV_NHD",
                       w, (int)v->layout);
    if (v->on_device != 0 && v->on_device != 1)
        return sw_fail(SW_STATUS_INVALID, "%son_device %d is neither 0 nor 1", w, v->on_device);
    if (v->ts < 0 || v->hs < 0)
        return sw_fail(SW_STATUS_INVALID, "%snegative stride (token %lld, head %lld)", w,
                       (long long)v->ts, (long long)v->hs);
    const int nhd = v->layout == SW_KV_NHD;
    if (!v->ts)
        v->ts = nhd ? (int64_t)H * D : D;
    if (!v->hs)
        v->hs = nhd ? D : (int64_t)B * D;
    if (b->valid_tokens > 1 && v->ts < D)
        return sw_fail(SW_STATUS_INVALID, "%stoken_stride %lld is below head_dim %d: tokens "
                       "would overlap", w, (long long)v->ts, D);
    if (H > 1 && v->hs < D)
        return sw_fail(SW_STATUS_INVALID, "%shead_stride %lld is below head_dim %d: kv heads "
                       "would overlap", w, (long long)v->hs, D);
    v->dense = v->layout == SW_KV_HND && v->ts == D && v->hs == (int64_t)B * D;
    const size_t block = (size_t)H * s->stripe_elems * es;
    /* (strides so large that the span wraps size_t would pass the size
     * check below and read wild memory: bounded first, in doubles) */
    const double span_d = ((double)(H - 1) * (double)v->hs +
                           (double)(b->valid_tokens - 1) * (double)v->ts + (double)D) * (double)es;
    if (span_d > (double)(SIZE_MAX / 4))
        return sw_fail(SW_STATUS_INVALID, "%sthe %s layout with token stride %lld and head stride "
                       "%lld addresses %.3g bytes", w, nhd ? "NHD" : "HND", (long long)v->ts,
                       (long long)v->hs, span_d);
    {
        /* tokens and heads apart: the smaller stride spaces its rows at
         * least D apart and the larger clears a whole run of them (bounded
         * by the span above: no overflow) */
        const int64_t T = b->valid_tokens;
        const int inner_heads = v->ts >= v->hs;
        const int64_t inner = inner_heads ? v->hs : v->ts, outer = inner_heads ? v->ts : v->hs;
        const int64_t inner_n = inner_heads ? H : T, outer_n = inner_heads ? T : H;
        if (outer_n > 1 && inner_n > 1 && outer < inner * (inner_n - 1) + D)
            return sw_fail(SW_STATUS_INVALID, "%stoken_stride %lld and head_stride %lld make "
                           "rows overlap (%d kv heads, %d tokens, head_dim %d)", w,
                           (long long)v->ts, (long long)v->hs, H, b->valid_tokens, D);
    }
    const size_t span = ((size_t)(H - 1) * (size_t)v->hs +
                         (size_t)(b->valid_tokens - 1) * (size_t)v->ts + (size_t)D) * es;
    if (!v2 && (b->k_bytes != block || b->v_bytes != block))
        return sw_fail(SW_STATUS_INVALID, "%sblock buffers hold k %zu / v %zu bytes; a %s block "
                       "of %d kv heads x %d tokens x %d dims needs %zu each", w, b->k_bytes,
                       b->v_bytes, es == 2 ? "BF16" : "FP8", H, B, D, block);
    if (b->k_bytes < span || b->v_bytes < span)
        return sw_fail(SW_STATUS_INVALID, "%sblock buffers hold k %zu / v %zu bytes; the %s "
                       "layout with token stride %lld and head stride %lld addresses %zu each "
                       "(%d valid tokens)", w, b->k_bytes, b->v_bytes, nhd ? "NHD" : "HND",
                       (long long)v->ts, (long long)v->hs, span, b->valid_tokens);
    if (b->dtype == SW_SWAP_KV_FP8_E4M3 &&
        (!(b->k_scale > 0.0f) || !(b->v_scale > 0.0f) || isinf(b->k_scale) ||
         isinf(b->v_scale)))
        return sw_fail(SW_STATUS_INVALID, "%sFP8 scales k %g v %g must be finite and > 0", w,
                       (double)b->k_scale, (double)b->v_scale);
    const size_t stripe_len = (size_t)b->valid_tokens * (size_t)D * es;
    if (stripe_len > s->store_stripe_bytes)
        return sw_fail(SW_STATUS_INVALID, "%sa stripe of %zu bytes does not fit the store's "
                       "stripe_bytes %u", w, stripe_len, s->store_stripe_bytes);
    if (s->c.persist_manifests && sw_swap_manifest_size(H) > s->store_stripe_bytes)
        return sw_fail(SW_STATUS_INVALID, "%sa block manifest of %zu bytes (%d kv heads) does not "
                       "fit the store's stripe_bytes %u", w, sw_swap_manifest_size(H), H,
                       s->store_stripe_bytes);
    if (v->on_device && !sw_cuda_built())
        return sw_fail(SW_STATUS_UNSUPPORTED, "%son_device blocks need a CUDA build of Spillway",
                       w);
    /* Where the buffers are: asked of CUDA for device blocks, and for host
     * ones only with a device pool (the query would start CUDA in a host
     * engine's process). */
    if (v->on_device || s->dev) {
        const int kd = sw_cuda_is_device_ptr(b->k), vd = sw_cuda_is_device_ptr(b->v);
        if (v->on_device && !(kd && vd))
            return sw_fail(SW_STATUS_INVALID, "%son_device = 1 but %s is not device memory", w,
                           kd ? "v" : "k");
        if (!v->on_device && (kd || vd))
            return sw_fail(SW_STATUS_INVALID, "%s%s is device memory: set on_device = 1", w,
                           kd ? "k" : "v");
    }
    return SW_OK;
}

/* The largest power of two up to 16 dividing every value. */
static int32_t unit_of(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    const uint64_t x = a | b | c | d;
    int32_t u = 16;
    while (u > 1 && (x & (uint64_t)(u - 1)))
        u >>= 1;
    return u;
}

/* Room for `bytes` of device and pinned staging and `nitems` pack items. */
static sw_status stage_reserve(sw_swap *s, size_t bytes, size_t nitems)
{
    sw_swap_ostage *o = &s->ost;
    if (!o->ev)
        SW_TRY(sw_cuda_swap_event_create(&o->ev, 0));
    if (bytes > o->cap) {
        size_t cap = o->cap ? o->cap : 1 << 20;
        while (cap < bytes)
            cap *= 2;
        sw_cuda_swap_free(o->dev);
        sw_cuda_host_free(o->host);
        o->dev = o->host = NULL;
        o->cap = 0;
        SW_TRY(sw_cuda_swap_alloc((void **)&o->dev, cap));
        SW_TRY(sw_cuda_host_alloc((void **)&o->host, cap));
        o->cap = cap;
    }
    if (nitems > o->items_cap) {
        size_t cap = o->items_cap ? o->items_cap : 256;
        while (cap < nitems)
            cap *= 2;
        sw_cuda_swap_free(o->items_dev);
        sw_cuda_host_free(o->items_host);
        o->items_dev = o->items_host = NULL;
        o->items_cap = 0;
        const size_t ib = cap * sizeof(sw_cuda_swap_pack_item);
        SW_TRY(sw_cuda_swap_alloc(&o->items_dev, ib));
        SW_TRY(sw_cuda_host_alloc(&o->items_host, ib));
        o->items_cap = cap;
    }
    return SW_OK;
}

/* Packs every device item into the staging (dense, K then V of each, in the
 * slot layout), copies it to pinned memory on `stream` and waits for it. */
static sw_status stage_device(sw_swap *s, int32_t n, const sw_swap_block *const *kv,
                              item_view *v, void *stream)
{
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim;
    size_t bytes = 0, nitems = 0;
    for (int32_t i = 0; i < n; i++)
        if (v[i].on_device) {
            v[i].staged = bytes;
            bytes += 2 * (size_t)H * s->stripe_elems * v[i].es;
            nitems += 2 * (size_t)H;
        }
    if (!bytes)
        return SW_OK;
    if (s->dev)
        SW_TRY(sw_swap_dev_enter(s));
    sw_swap_ostage *o = &s->ost;
    if (o->wt_pending) { /* the last write-through reads the items and the staging */
        SW_TRY(sw_cuda_swap_event_sync(o->ev_wt));
        o->wt_pending = 0;
    }
    SW_TRY(stage_reserve(s, bytes, nitems));
    sw_cuda_swap_pack_item *it = o->items_host;
    size_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!v[i].on_device)
            continue;
        const size_t es = v[i].es, half = (size_t)H * s->stripe_elems * es;
        for (int kind = 0; kind < 2; kind++)
            for (int32_t h = 0; h < H; h++) {
                const uint8_t *src = (const uint8_t *)(kind ? kv[i]->v : kv[i]->k) +
                                     (size_t)h * (size_t)v[i].hs * es;
                const uint64_t dst = v[i].staged + kind * half + (size_t)h * s->stripe_elems * es;
                it[k].src = src;
                it[k].dst_off = dst;
                it[k].src_pitch = v[i].ts * (int64_t)es;
                it[k].rows = kv[i]->valid_tokens;
                it[k].row_bytes = D * (int32_t)es;
                it[k].vec = unit_of((uintptr_t)src, (uint64_t)it[k].src_pitch,
                                    (uint64_t)it[k].row_bytes, dst);
                it[k].tab_val = 0;
                it[k].tab1 = 0;
                k++;
            }
    }
    SW_TRY(sw_cuda_swap_copy(o->items_dev, o->items_host, k * sizeof *it, stream));
    SW_TRY(sw_cuda_swap_pack(o->items_dev, (int32_t)k, o->dev, NULL, stream));
    SW_TRY(sw_cuda_swap_copy(o->host, o->dev, bytes, stream));
    SW_TRY(sw_cuda_swap_event_record(o->ev, stream));
    return sw_cuda_swap_event_sync(o->ev);
}

/* Every strided or token-major host item packed into the slot layout
 * (valid rows; the rest of each stripe is not read), each at its own
 * offset of ost.pack: the stripes are written after all items are packed. */
static sw_status pack_host(sw_swap *s, int32_t n, const sw_swap_block *const *kv, item_view *v)
{
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim;
    size_t bytes = 0;
    for (int32_t i = 0; i < n; i++)
        if (!v[i].on_device && !v[i].dense) {
            v[i].packed = bytes;
            bytes += 2 * (size_t)H * s->stripe_elems * v[i].es;
        }
    if (!bytes)
        return SW_OK;
    sw_swap_ostage *o = &s->ost;
    if (o->pack_cap < bytes) {
        uint8_t *p = realloc(o->pack, bytes);
        if (!p)
            return sw_fail(SW_STATUS_NO_MEMORY, "offload: %zu bytes to pack host blocks", bytes);
        o->pack = p;
        o->pack_cap = bytes;
    }
    for (int32_t i = 0; i < n; i++) {
        if (v[i].on_device || v[i].dense)
            continue;
        const sw_swap_block *b = kv[i];
        const size_t es = v[i].es, half = (size_t)H * s->stripe_elems * es, row = (size_t)D * es;
        for (int kind = 0; kind < 2; kind++) {
            const uint8_t *src = kind ? b->v : b->k;
            uint8_t *dst = o->pack + v[i].packed + kind * half;
            for (int32_t h = 0; h < H; h++)
                for (int32_t t = 0; t < b->valid_tokens; t++)
                    memcpy(dst + ((size_t)h * s->stripe_elems + (size_t)t * D) * es,
                           src + ((size_t)h * (size_t)v[i].hs + (size_t)t * (size_t)v[i].ts) * es,
                           row);
        }
    }
    return SW_OK;
}

/* Item i applied to its layer: the block index checked against the layer
 * as the items before it left it, room, generations, predictor storage,
 * its resident copy dropped; the block counts as written (valid) from here
 * -- a failure later in the call cuts it (offload_cut). */
static sw_status offload_prep(sw_swap *s, const char *w, item_view *v, int32_t layer,
                              int32_t block, const sw_swap_block *b)
{
    const int32_t H = s->m.num_kv_heads, B = s->m.block_size;
    sw_swap_seq *q = v->q;
    sw_swap_layer *L = &q->layers[layer];
    if (block < 0 || block > L->nblocks || (uint32_t)block >= q->max_blocks)
        return sw_fail(SW_STATUS_INVALID, "%sblock %d: the sequence has %d blocks in layer %d "
                       "(at most %u); offload appends or overwrites", w, block, L->nblocks,
                       layer, q->max_blocks);
    if (block == L->nblocks && block > 0 && L->blk[block - 1].valid < B)
        return sw_fail(SW_STATUS_INVALID, "%sblock %d appended after partial block %d (%d of %d "
                       "tokens)", w, block, block - 1, L->blk[block - 1].valid, B);
    if (block < L->nblocks - 1 && b->valid_tokens < B)
        return sw_fail(SW_STATUS_INVALID, "%sblock %d with %d of %d tokens would not be the last "
                       "(the sequence has %d blocks)", w, block, b->valid_tokens, B, L->nblocks);
    SW_TRY(sw_swap_layer_grow(s, L, block + 1));
    if (block + 1 > L->hw)
        L->hw = block + 1;
    sw_swap_blk *e = &L->blk[block];
    if (!e->gen) {
        e->gen = calloc((size_t)H * 2, sizeof *e->gen);
        if (!e->gen)
            return sw_fail(SW_STATUS_NO_MEMORY, "generations");
    }
    v->proj = NULL;
    if (s->dev) {
        /* projected keys live on the device: an entry for BF16, none for FP8 */
        if (b->dtype == SW_SWAP_KV_BF16)
            SW_TRY(sw_swap_dev_entry(s, e));
    } else if (b->dtype == SW_SWAP_KV_BF16) {
        /* a buffer of the item's own, never the block's: an earlier item of
         * the batch on the same block (FP8) may free that one first */
        v->proj = malloc(sizeof(float) * (size_t)H * (size_t)B * (size_t)s->c.predictor_rank);
        if (!v->proj)
            return sw_fail(SW_STATUS_NO_MEMORY, "projected keys");
    }
    v->oslot = e->slot;
    v->oscore = e->slot >= 0 ? s->slots[e->slot].score : NAN;
    v->wt = 0;
    v->tabw = 0;
    /* a layer all resident when the batch began stays so if the batch
     * writes every block it touches through (offload_items, the end) */
    const int settled = L->res_ok || L->res_keep == s->ost.epoch;
    if (e->slot >= 0) {
        sw_swap_pool_drop(s, e);
        s->st.invalidations++;
    }
    if (settled) {
        L->res_ok = 0;
        L->res_keep = s->ost.epoch;
    }
    v->old_n = L->nblocks;
    e->valid = b->valid_tokens;
    if (block == L->nblocks)
        L->nblocks = block + 1;
    return SW_OK;
}

/* A prepared item that will not complete: its block and every block after
 * it become absent, the layer ends before it (its stripes may be half old,
 * half new). Items are cut newest first, so each layer ends where its
 * first failed item was. */
static void offload_cut(sw_swap *s, item_view *v, int32_t layer, int32_t block)
{
    sw_swap_layer *L = &v->q->layers[layer];
    free(v->proj); /* (the item's own buffer, never the block's) */
    v->proj = NULL;
    const int32_t keep = block < v->old_n ? block : v->old_n;
    const int32_t end = L->nblocks > v->old_n ? L->nblocks : v->old_n;
    sw_swap_layer_unsettle(L);
    for (int32_t i = keep; i < end; i++) {
        sw_swap_kept_drop_block(s, L, i);
        sw_swap_pool_drop(s, &L->blk[i]);
        L->blk[i].valid = 0;
    }
    /* (an older item cut later -- a lower block -- may not lengthen the
     * layer a newer item's cut shortened) */
    if (keep < L->nblocks)
        L->nblocks = keep;
}

/* A prepared item whose stripes are in the store: its predictor entry and
 * scales; its manifest encoded into `mb` (persist_manifests). */
static sw_status offload_finish(sw_swap *s, item_view *v, int32_t layer, int32_t block,
                                const sw_swap_block *b, uint8_t *mb)
{
    const int32_t H = s->m.num_kv_heads, B = s->m.block_size;
    sw_swap_blk *e = &v->q->layers[layer].blk[block];
    if (s->dev) {
        if (b->dtype == SW_SWAP_KV_BF16) {
            /* (its entry again: an earlier FP8 item of the batch on the same
             * block frees it) */
            sw_status st = sw_swap_dev_entry(s, e);
            if (st == SW_OK)
                st = sw_swap_dev_project_block(s, e, (const uint16_t *)v->kd);
            if (st != SW_OK) {
                if (st == SW_STATUS_CUDA)
                    s->failed = 1;
                return st;
            }
        } else {
            sw_swap_dev_entry_free(s, e);
        }
    } else if (b->dtype == SW_SWAP_KV_BF16) {
        for (int32_t h = 0; h < H; h++)
            sw_swap_project(s, (const uint16_t *)v->kd + (size_t)h * s->stripe_elems,
                            b->valid_tokens, v->proj + (size_t)h * B * (size_t)s->c.predictor_rank);
        free(e->proj);
        e->proj = v->proj;
        v->proj = NULL;
    } else {
        free(e->proj);
        e->proj = NULL;
    }
    e->dtype = (uint8_t)b->dtype;
    e->k_scale = b->dtype == SW_SWAP_KV_FP8_E4M3 ? b->k_scale : 1.0f;
    e->v_scale = b->dtype == SW_SWAP_KV_FP8_E4M3 ? b->v_scale : 1.0f;
    if (mb)
        sw_swap_manifest_encode(&s->m, e, mb);
    return SW_OK;
}

/* Room for `nw` store writes and `nm` manifests. */
static sw_status writes_reserve(sw_swap *s, size_t nw, size_t nm)
{
    sw_swap_ostage *o = &s->ost;
    if (nw > o->w_cap) {
        sw_store_key *k = realloc(o->wkeys, nw * sizeof *k);
        if (k)
            o->wkeys = k;
        const void **src = realloc(o->wsrc, nw * sizeof *src);
        if (src)
            o->wsrc = src;
        size_t *len = realloc(o->wlen, nw * sizeof *len);
        if (len)
            o->wlen = len;
        uint64_t *gen = realloc(o->wgen, nw * sizeof *gen);
        if (gen)
            o->wgen = gen;
        if (!k || !src || !len || !gen)
            return sw_fail(SW_STATUS_NO_MEMORY, "offload: %zu store writes", nw);
        o->w_cap = nw;
    }
    const size_t mbytes = nm * sw_swap_manifest_size(s->m.num_kv_heads);
    if (mbytes > o->mbuf_cap) {
        uint8_t *m = realloc(o->mbuf, mbytes);
        if (!m)
            return sw_fail(SW_STATUS_NO_MEMORY, "offload: %zu block manifests", nm);
        o->mbuf = m;
        o->mbuf_cap = mbytes;
    }
    return SW_OK;
}

/* A free slot for a written-through block: its previous slot when still
 * free, else the first free one of at most 64 from a rotating cursor (a
 * full pool takes nothing: offload never evicts). -1: none. */
static int32_t wt_slot(sw_swap *s, int32_t oslot)
{
    if (oslot >= 0 && !s->slots[oslot].seq)
        return oslot;
    const int32_t n = s->c.resident_blocks;
    for (int32_t k = 0; k < 64 && k < n; k++) {
        const int32_t i = (int32_t)((s->wt_cursor + (uint32_t)k) % (uint32_t)n);
        if (!s->slots[i].seq && !s->slots[i].pin) {
            s->wt_cursor = (uint32_t)(i + 1) % (uint32_t)n;
            return i;
        }
    }
    return -1;
}

/* Device pool: the first `n` items' device BF16 blocks, written, also put
 * into pool slots (write-through) from the device staging, one pack item
 * per block, on `stream` -- so a decode step's rewritten last block stays
 * resident instead of being read back from the store by the next attend.
 * A block given again later in the batch loses the earlier copy's slot
 * (the later one gets a slot only if it is a device BF16 block itself), so
 * the pool never holds an older copy than the store. The slot keeps its
 * score when the block rewrites its own slot; a new one scores NaN
 * (neutral: 0 for the SCORE policy, recency decides) until a call through
 * the tile loop scores it. The next attend waits for the copies
 * (ev_offload). On a failure the slots given here are dropped again. */
static sw_status write_through(sw_swap *s, int32_t n, const int32_t *layers,
                               const int32_t *blocks, const sw_swap_block *const *kv,
                               item_view *v, void *stream)
{
    sw_swap_ostage *o = &s->ost;
    if (!s->dev || !s->tune.resident_fast)
        return SW_OK;
    sw_cuda_swap_pack_item *it = o->items_host;
    int32_t k = 0;
    uint64_t given = 0;
    for (int32_t i = 0; i < n; i++) {
        sw_swap_blk *e = &v[i].q->layers[layers[i]].blk[blocks[i]];
        if (e->slot >= 0) {
            /* an earlier copy of this block got a slot in this batch */
            for (int32_t j = 0; j < k; j++)
                if (it[j].rows && it[j].dst_off == (uint64_t)e->slot * s->slot_bytes) {
                    it[j].rows = 0;
                    it[j].tab1 = 0;
                    given--;
                }
            for (int32_t j = 0; j < i; j++)
                if (v[j].wt && &v[j].q->layers[layers[j]].blk[blocks[j]] == e)
                    v[j].wt = v[j].tabw = 0;
            sw_swap_pool_drop(s, e);
        }
        if (!v[i].on_device || kv[i]->dtype != SW_SWAP_KV_BF16)
            continue;
        const int32_t slot = wt_slot(s, v[i].oslot);
        if (slot < 0)
            continue;
        sw_swap_slot *sl = &s->slots[slot];
        sl->seq = v[i].q;
        sl->layer = layers[i];
        sl->block = blocks[i];
        sl->score = slot == v[i].oslot ? v[i].oscore : NAN;
        sl->last_access = ++s->tick;
        sl->pin = 0;
        e->slot = slot;
        sw_swap_run_count(s, v[i].q, &v[i].q->layers[layers[i]], blocks[i], 1);
        v[i].wt = 1;
        const uint8_t *src = o->dev + v[i].staged;
        it[k].src = src;
        it[k].dst_off = (uint64_t)slot * s->slot_bytes;
        it[k].src_pitch = 0;
        it[k].rows = 1;
        it[k].row_bytes = (int32_t)s->slot_bytes;
        it[k].vec = unit_of((uintptr_t)src, 0, s->slot_bytes, it[k].dst_off);
        /* the block's entry in its layer's page table (dev_fast.c), when the
         * layer has one that reaches it */
        const sw_swap_layer *L = &v[i].q->layers[layers[i]];
        v[i].tabw = L->tab_off >= 0 && blocks[i] < L->tab_n;
        it[k].tab1 = v[i].tabw ? L->tab_off + blocks[i] + 1 : 0;
        it[k].tab_val = slot;
        k++;
        given++;
    }
    if (!k)
        return SW_OK;
    sw_status st = sw_swap_dev_enter(s);
    if (st == SW_OK && !o->ev_wt)
        st = sw_cuda_swap_event_create(&o->ev_wt, 0);
    /* the slots may be read by the last attend's kernels */
    if (st == SW_OK && sw_swap_dev_done_pending(s))
        st = sw_swap_dev_wait_done_on(s, stream);
    if (st == SW_OK)
        st = sw_cuda_swap_copy(o->items_dev, o->items_host, (size_t)k * sizeof *it, stream);
    if (st == SW_OK)
        st = sw_cuda_swap_pack(o->items_dev, k, sw_swap_dev_pool(s), sw_swap_dev_tab(s), stream);
    if (st == SW_OK)
        st = sw_cuda_swap_event_record(o->ev_wt, stream);
    if (st == SW_OK) {
        o->wt_pending = 1;
        st = sw_swap_dev_offload_after(s, o->ev_wt);
    }
    if (st != SW_OK) {
        for (int32_t i = 0; i < n; i++)
            if (v[i].wt) {
                sw_swap_pool_drop(s, &v[i].q->layers[layers[i]].blk[blocks[i]]);
                v[i].wt = v[i].tabw = 0;
            }
        return st;
    }
    s->st.offload_resident += given;
    return SW_OK;
}

/* The checked, staged items applied: prepared in order, their stripes
 * written in one batch, finished, their manifests written in a second.
 * *done: items complete. On a failure the failing item and every item
 * after it are cut (newest first). */
static sw_status offload_items(sw_swap *s, int32_t n, const int32_t *layers,
                               const int32_t *blocks, const sw_swap_block *const *kv,
                               item_view *v, void *stream, int32_t *done)
{
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim;
    const size_t per = 2 * (size_t)H;
    const int manifests = s->c.persist_manifests;
    sw_status st = writes_reserve(s, (size_t)n * per, manifests ? (size_t)n : 0);
    if (st != SW_OK)
        return st;
    if (s->dev)
        sw_swap_dev_quiesce(s); /* the last call's leases released before the store writes */
    if (s->dev)
        SW_TRY(sw_swap_dev_enter(s));
    sw_swap_ostage *o = &s->ost;
    o->epoch++;
    int32_t prepped = 0, ok = 0;
    for (; prepped < n; prepped++) {
        char w[32];
        st = offload_prep(s, who(w, sizeof w, prepped, n), &v[prepped], layers[prepped],
                          blocks[prepped], kv[prepped]);
        if (st != SW_OK)
            break;
        /* a block written again: its kept leases go before its keys change */
        sw_swap_kept_drop_block(s, &v[prepped].q->layers[layers[prepped]], blocks[prepped]);
        const size_t stripe_len = (size_t)kv[prepped]->valid_tokens * (size_t)D * v[prepped].es;
        for (int32_t h = 0; h < H; h++)
            for (int kind = 0; kind < 2; kind++) {
                const size_t j = (size_t)prepped * per + (size_t)h * 2 + (size_t)kind;
                o->wkeys[j] = sw_swap_key_of(v[prepped].q, layers[prepped], blocks[prepped], h,
                                             kind);
                o->wsrc[j] = (kind ? v[prepped].vd : v[prepped].kd) +
                             (size_t)h * s->stripe_elems * v[prepped].es;
                o->wlen[j] = stripe_len;
            }
    }
    size_t wdone = 0;
    if (prepped > 0) {
        sw_status ws = sw_store_write_batch(s->store, (size_t)prepped * per, o->wkeys, o->wsrc,
                                            o->wlen, o->wgen, &wdone);
        if (ws != SW_OK && st == SW_OK) {
            st = ws;
            const int32_t i = (int32_t)(wdone / per);
            char keep[600];
            snprintf(keep, sizeof keep, "%s", sw_last_error());
            if (n > 1)
                sw_fail(st, "item %d: %s", i, keep);
        }
    }
    /* items whose stripes are all written get their predictor entries */
    const int32_t written = (int32_t)(wdone / per);
    const size_t mlen = sw_swap_manifest_size(H);
    for (; ok < written; ok++) {
        for (size_t j = 0; j < per; j++)
            v[ok].q->layers[layers[ok]].blk[blocks[ok]].gen[j] = o->wgen[(size_t)ok * per + j];
        sw_status fs = offload_finish(s, &v[ok], layers[ok], blocks[ok], kv[ok],
                                      manifests ? o->mbuf + (size_t)ok * mlen : NULL);
        if (fs != SW_OK) {
            st = fs;
            break;
        }
    }
    if (ok > 0) {
        /* a cache of what the store holds: a failure leaves the blocks
         * offloaded, only not resident */
        sw_status ws = write_through(s, ok, layers, blocks, kv, v, stream);
        if (ws != SW_OK) {
            if (ws == SW_STATUS_CUDA)
                s->failed = 1; /* the context or the stream is broken */
            if (st == SW_OK)
                st = ws;
        }
    }
    if (manifests && ok > 0) {
        size_t mdone = 0;
        for (int32_t i = 0; i < ok; i++) {
            o->wkeys[i] = sw_swap_key_of(v[i].q, layers[i], blocks[i], SW_SWAP_MANIFEST_HEAD,
                                         SW_STORE_KIND_K);
            o->wsrc[i] = o->mbuf + (size_t)i * mlen;
            o->wlen[i] = mlen;
        }
        sw_status ms = sw_store_write_batch(s->store, (size_t)ok, o->wkeys, o->wsrc, o->wlen,
                                            NULL, &mdone);
        if (ms != SW_OK) {
            /* stripes written, manifest not: those blocks stay absent */
            st = ms;
            ok = (int32_t)mdone;
        }
    }
    for (int32_t i = prepped; i-- > ok;)
        offload_cut(s, &v[i], layers[i], blocks[i]);
    /* a layer that was all resident stays so when every block the batch
     * gave it is in the pool with its arena entry written */
    for (int32_t i = 0; i < ok; i++)
        if (!v[i].tabw)
            sw_swap_layer_unsettle(&v[i].q->layers[layers[i]]);
    for (int32_t i = 0; i < ok; i++) {
        sw_swap_layer *L = &v[i].q->layers[layers[i]];
        if (L->res_keep == o->epoch) {
            L->res_ok = 1;
            L->res_keep = 0;
        }
    }
    for (int32_t i = 0; i < ok; i++) {
        s->st.offloads++;
        s->st.offload_bytes += 2 * (uint64_t)H * kv[i]->valid_tokens * (uint64_t)D * v[i].es;
    }
    *done = ok;
    return st;
}

sw_status sw_swap_offload_batch(sw_swap *s, int32_t n, const uint64_t *seq_ids,
                                const int32_t *layers, const int32_t *blocks,
                                const sw_swap_block *const *kv, void *stream, int32_t *n_done)
{
    if (n_done)
        *n_done = 0;
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_offload_batch: null engine");
    if (n < 0)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_offload_batch: n = %d", n);
    if (n == 0)
        return SW_OK;
    if (!seq_ids || !layers || !blocks || !kv)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_offload_batch: null array");
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    sw_swap_ostage *o = &s->ost;
    if ((size_t)n > o->views_cap) {
        void *nv = realloc(o->views, (size_t)n * sizeof(item_view));
        if (!nv)
            return sw_fail(SW_STATUS_NO_MEMORY, "offload of %d blocks", n);
        o->views = nv;
        o->views_cap = (size_t)n;
    }
    item_view *v = o->views;
    sw_status st = SW_OK;
    int any_device = 0;
    for (int32_t i = 0; i < n && st == SW_OK; i++) {
        st = check_item(s, i, n, seq_ids[i], layers[i], kv[i], &v[i]);
        any_device |= st == SW_OK && v[i].on_device;
    }
    if (st == SW_OK && any_device) {
        st = stage_device(s, n, kv, v, stream);
        if (st == SW_STATUS_CUDA && s->dev)
            s->failed = 1; /* the device pool's context may be gone */
    }
    if (st == SW_OK)
        st = pack_host(s, n, kv, v);
    if (st != SW_OK)
        return st;
    for (int32_t i = 0; i < n; i++) {
        const size_t half = (size_t)s->m.num_kv_heads * s->stripe_elems * v[i].es;
        if (v[i].on_device || !v[i].dense) {
            v[i].kd = v[i].on_device ? s->ost.host + v[i].staged : s->ost.pack + v[i].packed;
            v[i].vd = v[i].kd + half;
        } else {
            v[i].kd = (const uint8_t *)kv[i]->k;
            v[i].vd = (const uint8_t *)kv[i]->v;
        }
    }
    int32_t done = 0;
    st = offload_items(s, n, layers, blocks, kv, v, stream, &done);
    if (n_done)
        *n_done = done;
    return st;
}

sw_status sw_swap_offload(sw_swap *s, uint64_t seq_id, int32_t layer, int32_t block,
                          const sw_swap_block *b)
{
    if (!s || !b)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_offload: null argument");
    return sw_swap_offload_batch(s, 1, &seq_id, &layer, &block, &b, NULL, NULL);
}
