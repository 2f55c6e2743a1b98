/* Offload: KV blocks into the store. A block comes dense in the slot layout
 * ([Hkv][block][d]), token-major ([block][Hkv][d]) or strided, from host or
 * GPU memory; every item of a batch is checked before anything is written,
 * device blocks are packed by one kernel and copied to pinned staging in
 * one copy, then each block's stripes are written and its predictor entry
 * made, in order. */
#include "swap_internal.h"
#include "attend_internal.h"
#include "swap_cuda.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"

#include <math.h>
#include <stddef.h>
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
    SW_TRY(stage_reserve(s, bytes, nitems));
    sw_swap_ostage *o = &s->ost;
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
                it[k].pad = 0;
                k++;
            }
    }
    SW_TRY(sw_cuda_swap_copy(o->items_dev, o->items_host, k * sizeof *it, stream));
    SW_TRY(sw_cuda_swap_pack(o->items_dev, (int32_t)k, o->dev, stream));
    SW_TRY(sw_cuda_swap_copy(o->host, o->dev, bytes, stream));
    SW_TRY(sw_cuda_swap_event_record(o->ev, stream));
    return sw_cuda_swap_event_sync(o->ev);
}

/* A strided or token-major host block packed into the slot layout (valid
 * rows; the rest of each stripe is not read). */
static sw_status pack_host(sw_swap *s, const sw_swap_block *b, const item_view *v,
                           uint8_t **k, uint8_t **vv)
{
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim;
    const size_t half = (size_t)H * s->stripe_elems * v->es;
    sw_swap_ostage *o = &s->ost;
    if (o->pack_cap < 2 * half) {
        uint8_t *p = realloc(o->pack, 2 * half);
        if (!p)
            return sw_fail(SW_STATUS_NO_MEMORY, "offload: %zu bytes to pack a block", 2 * half);
        o->pack = p;
        o->pack_cap = 2 * half;
    }
    const size_t row = (size_t)D * v->es;
    for (int kind = 0; kind < 2; kind++) {
        const uint8_t *src = kind ? b->v : b->k;
        uint8_t *dst = o->pack + kind * half;
        for (int32_t h = 0; h < H; h++)
            for (int32_t t = 0; t < b->valid_tokens; t++)
                memcpy(dst + ((size_t)h * s->stripe_elems + (size_t)t * D) * v->es,
                       src + ((size_t)h * (size_t)v->hs + (size_t)t * (size_t)v->ts) * v->es,
                       row);
    }
    *k = o->pack;
    *vv = o->pack + half;
    return SW_OK;
}

/* A failed offload of `block` (the layer had old_n blocks): the block and
 * every block after it become absent, the layer ends before it. */
static void cut_layer(sw_swap *s, sw_swap_layer *L, int32_t block, int32_t old_n)
{
    const int32_t keep = block < old_n ? block : old_n;
    for (int32_t i = keep; i < old_n; i++) {
        sw_swap_pool_drop(s, &L->blk[i]);
        L->blk[i].valid = 0;
    }
    L->nblocks = keep;
}

/* One checked block, k and v in the slot layout: the block index checked
 * against the layer as it is now, the stripes written, the predictor
 * entry made, the manifest written (persist_manifests). */
static sw_status offload_one(sw_swap *s, const char *w, sw_swap_seq *q, int32_t layer,
                             int32_t block, const sw_swap_block *b, const uint8_t *kd,
                             const uint8_t *vd, size_t es)
{
    const int32_t H = s->m.num_kv_heads, B = s->m.block_size, D = s->m.head_dim;
    const size_t stripe_len = (size_t)b->valid_tokens * (size_t)D * es;
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
    if (s->dev)
        sw_swap_dev_quiesce(s); /* the last call's leases released before the store writes */
    SW_TRY(sw_swap_layer_grow(s, L, block + 1));
    sw_swap_blk *e = &L->blk[block];
    if (!e->gen) {
        e->gen = calloc((size_t)H * 2, sizeof *e->gen);
        if (!e->gen)
            return sw_fail(SW_STATUS_NO_MEMORY, "generations");
    }
    if (s->dev)
        SW_TRY(sw_swap_dev_enter(s));
    float *proj = NULL;
    if (s->dev) {
        /* projected keys live on the device: an entry for BF16, none for FP8 */
        if (b->dtype == SW_SWAP_KV_BF16)
            SW_TRY(sw_swap_dev_entry(s, e));
    } else if (b->dtype == SW_SWAP_KV_BF16) {
        proj = e->proj ? e->proj
                       : malloc(sizeof(float) * (size_t)H * (size_t)B *
                                (size_t)s->c.predictor_rank);
        if (!proj)
            return sw_fail(SW_STATUS_NO_MEMORY, "projected keys");
    }
    if (e->slot >= 0) {
        sw_swap_pool_drop(s, e);
        s->st.invalidations++;
    }
    /* From here the old contents are gone: mark absent until every stripe is
     * written, so that a failure never leaves a half-new block readable. */
    const int32_t old_n = L->nblocks;
    e->valid = 0;
    for (int32_t h = 0; h < H; h++)
        for (int kind = 0; kind < 2; kind++) {
            const uint8_t *src = (kind ? vd : kd) + (size_t)h * s->stripe_elems * es;
            sw_store_key k = sw_swap_key_of(q, layer, block, h, kind);
            uint64_t g = 0;
            sw_status st = sw_store_write(s->store, &k, src, stripe_len, &g);
            if (st != SW_OK) {
                if (proj != e->proj)
                    free(proj);
                cut_layer(s, L, block, old_n);
                return st;
            }
            e->gen[h * 2 + kind] = g;
        }
    if (s->dev) {
        if (b->dtype == SW_SWAP_KV_BF16) {
            sw_status st = sw_swap_dev_project_block(s, e, (const uint16_t *)kd);
            if (st != SW_OK) {
                /* stripes written, predictor not: the block stays absent */
                cut_layer(s, L, block, old_n);
                if (st == SW_STATUS_CUDA)
                    s->failed = 1;
                return st;
            }
        } else {
            sw_swap_dev_entry_free(s, e);
        }
    } else if (b->dtype == SW_SWAP_KV_BF16) {
        for (int32_t h = 0; h < H; h++)
            sw_swap_project_bf16(s->proj, D, s->c.predictor_rank,
                                 (const uint16_t *)kd + (size_t)h * s->stripe_elems,
                                 b->valid_tokens,
                                 proj + (size_t)h * B * (size_t)s->c.predictor_rank);
        e->proj = proj;
    } else {
        free(e->proj);
        e->proj = NULL;
    }
    e->dtype = (uint8_t)b->dtype;
    e->k_scale = b->dtype == SW_SWAP_KV_FP8_E4M3 ? b->k_scale : 1.0f;
    e->v_scale = b->dtype == SW_SWAP_KV_FP8_E4M3 ? b->v_scale : 1.0f;
    /* The manifest last: a block whose manifest is written has its stripes. */
    if (s->c.persist_manifests) {
        sw_swap_blk m = *e;
        m.valid = b->valid_tokens;
        uint8_t buf[32 + 16 * 64];
        const size_t mlen = sw_swap_manifest_size(H);
        uint8_t *mb = mlen <= sizeof buf ? buf : malloc(mlen);
        sw_status st = mb ? SW_OK : sw_fail(SW_STATUS_NO_MEMORY, "block manifest");
        if (st == SW_OK) {
            sw_swap_manifest_encode(&s->m, &m, mb);
            sw_store_key k =
                sw_swap_key_of(q, layer, block, SW_SWAP_MANIFEST_HEAD, SW_STORE_KIND_K);
            st = sw_store_write(s->store, &k, mb, mlen, NULL);
        }
        if (mb != buf)
            free(mb);
        if (st != SW_OK) {
            /* stripes written, manifest not: the block stays absent */
            cut_layer(s, L, block, old_n);
            return st;
        }
    }
    e->valid = b->valid_tokens;
    if (block == old_n)
        L->nblocks = old_n + 1;
    s->st.offloads++;
    s->st.offload_bytes += 2 * (uint64_t)H * stripe_len;
    return SW_OK;
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
    for (int32_t i = 0; i < n && st == SW_OK; i++) {
        const sw_swap_block *b = kv[i];
        uint8_t *k = (uint8_t *)b->k, *vv = (uint8_t *)b->v;
        if (v[i].on_device) {
            k = s->ost.host + v[i].staged;
            vv = k + (size_t)s->m.num_kv_heads * s->stripe_elems * v[i].es;
        } else if (!v[i].dense) {
            st = pack_host(s, b, &v[i], &k, &vv);
            if (st != SW_OK)
                break;
        }
        char w[32];
        st = offload_one(s, who(w, sizeof w, i, n), v[i].q, layers[i], blocks[i], b, k, vv,
                         v[i].es);
        if (st == SW_OK && n_done)
            *n_done = i + 1;
    }
    return st;
}

sw_status sw_swap_offload(sw_swap *s, uint64_t seq_id, int32_t layer, int32_t block,
                          const sw_swap_block *b)
{
    if (!s || !b)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_offload: null argument");
    return sw_swap_offload_batch(s, 1, &seq_id, &layer, &block, &b, NULL, NULL);
}
