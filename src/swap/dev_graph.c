/* CUDA graphs (sw_swap_graph_*, spillway_swap.h): the device pool's
 * resident decode step with a fixed workspace, so that its launch can be
 * captured. The tables are dev_fast.c's (page table from the pool's slots,
 * kv offsets, the decode split), at offsets fixed by capacities: room for
 * max_blocks blocks per sequence and for the most items sw_plan_decode
 * makes (the pairs unsplit, or 8 waves of the device's decode slots). The
 * decode kernel runs a fixed grid whose spare CTAs return
 * (args.num_items_dev), its merges folded in the launch (counters of the
 * graph's own). prepare writes the tables of the current lengths outside
 * the graph; attend is the launch alone.
 *
 * prepare's host work is constant in the number of blocks, like the
 * resident path's: the page tables come from the resident path's arena
 * (the offloads keep a settled layer's there) by one device-side copy
 * into the graph's fixed table; only a layer not settled is read on the
 * host, once, and settled. The small tables go up from a ring of pinned
 * buffers, so that prepare waits for the GPU only when it runs
 * GRAPH_RING steps ahead (with one buffer, each prepare waited for the
 * step before, and its O(blocks) host work -- ~0.1 ms at 32k blocks --
 * set the step's time). */
#include "dev_internal.h"
#include "swap_cuda.h"
#include "attn/attn_internal.h"
#include "core/sw_core.h"
#include "core/sw_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


#define GRAPH_RING 4

struct sw_swap_graph {
    sw_swap *s;
    int32_t layer, batch, q_len, max_blocks;
    uint64_t *ids;
    int64_t cap_items, cap_merges;
    sw_swap_dev_blob o;        /* its regions (dev_fast.c's layout) */
    char *host[GRAPH_RING];    /* the blob, pinned (a ring) ... */
    char *dev;                 /* ... and on the device */
    void *ev[GRAPH_RING];      /* each host buffer's last upload */
    int uploaded[GRAPH_RING];
    int next;
    void *part;                /* [cap_items] partial states */
    size_t lse_off;            /* where their lse part starts */
    int32_t *cnt;              /* [cap_merges] counters, zero between launches */
    sw_swap_seq **seqs;        /* host scratch */
};

void sw_swap_graph_destroy(sw_swap_graph *g)
{
    if (!g)
        return;
    for (int r = 0; r < GRAPH_RING; r++)
        if (g->uploaded[r])
            (void)sw_cuda_swap_event_sync(g->ev[r]);
    if (g->s && g->s->dev)
        (void)sw_swap_dev_wait_done(g->s->dev); /* a launch may still read them */
    for (int r = 0; r < GRAPH_RING; r++) {
        sw_cuda_swap_event_destroy(g->ev[r]);
        sw_cuda_host_free(g->host[r]);
    }
    sw_cuda_swap_free(g->dev);
    sw_cuda_swap_free(g->part);
    sw_cuda_swap_free(g->cnt);
    free(g->ids);
    free(g->seqs);
    free(g);
}

sw_status sw_swap_graph_create(sw_swap *s, int32_t layer, int32_t batch, const uint64_t *seq_ids,
                               int32_t q_len, int32_t max_blocks, sw_swap_graph **out)
{
    if (!out)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_graph_create: null out");
    *out = NULL;
    if (!s || !seq_ids)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_graph_create: null argument");
    if (!s->dev)
        return sw_fail(SW_STATUS_UNSUPPORTED, "sw_swap_graph_create: a device pool's call (a "
                       "host pool attends on the CPU)");
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    const int32_t H = s->m.num_kv_heads, G = s->m.num_qo_heads / H, D = s->m.head_dim;
    if (layer < 0 || layer >= s->m.num_layers)
        return sw_fail(SW_STATUS_INVALID, "layer %d not in [0, %d)", layer, s->m.num_layers);
    if (batch < 1 || max_blocks < 1 || q_len < 1)
        return sw_fail(SW_STATUS_INVALID, "batch %d, q_len %d and max_blocks %d must be >= 1",
                       batch, q_len, max_blocks);
    if ((int64_t)q_len * G > SW_DECODE_ROWS)
        return sw_fail(SW_STATUS_UNSUPPORTED, "q_len %d x group %d query rows per kv head: at "
                       "most %d in the resident path", q_len, G, SW_DECODE_ROWS);
    if (D != 64 && D != 128 && D != 256)
        return sw_fail(SW_STATUS_UNSUPPORTED, "head_dim %d: the resident path has 64, 128, 256",
                       D);
    if ((int64_t)batch * max_blocks > INT32_MAX / 2 || (int64_t)batch * q_len > INT32_MAX / 2)
        return sw_fail(SW_STATUS_INVALID, "batch %d x max_blocks %d is too large", batch,
                       max_blocks);
    for (int32_t b = 0; b < batch; b++) {
        const sw_swap_seq *q = sw_swap_find_seq(s, seq_ids[b]);
        if (!q)
            return sw_fail(SW_STATUS_NOT_FOUND, "sequence %llu (batch entry %d) is not "
                           "registered", (unsigned long long)seq_ids[b], b);
        for (int32_t c = 0; c < b; c++)
            if (seq_ids[c] == seq_ids[b])
                return sw_fail(SW_STATUS_INVALID, "sequence %llu listed twice (entries %d, %d)",
                               (unsigned long long)seq_ids[b], c, b);
    }
    sw_swap_dev *d = s->dev;
    struct dev_fast *f = &d->fast;
    SW_TRY(sw_swap_dev_enter(s));
    if (f->slots == 0) {
        int32_t sms = 0, per = 0;
        f->slots = sw_cuda_paged_decode_config(d->device, D, SW_DTYPE_BF16, &sms, &per) == SW_OK
                       ? (int64_t)sms * per
                       : -1;
    }
    if (f->slots < 0)
        return sw_fail(SW_STATUS_UNSUPPORTED, "the decode kernel cannot run on device %d",
                       d->device);
    sw_swap_graph *g = calloc(1, sizeof *g);
    if (!g)
        return sw_fail(SW_STATUS_NO_MEMORY, "sw_swap_graph");
    g->s = s;
    g->layer = layer;
    g->batch = batch;
    g->q_len = q_len;
    g->max_blocks = max_blocks;
    /* sw_plan_decode's items: the pairs unsplit, or at most 8 waves */
    const int64_t pairs = (int64_t)batch * H;
    g->cap_items = pairs > 8 * f->slots ? pairs : 8 * f->slots;
    g->cap_merges = pairs;
    g->o = sw_swap_dev_blob_layout(batch, (int64_t)batch * max_blocks, g->cap_items,
                                   g->cap_merges);
    const size_t part_bytes = sw_swap_dev_parts_bytes(s, g->cap_items, &g->lse_off);
    sw_status st = SW_OK;
    g->ids = malloc(sizeof *g->ids * (size_t)batch);
    g->seqs = malloc(sizeof *g->seqs * (size_t)batch);
    if (!g->ids || !g->seqs)
        st = sw_fail(SW_STATUS_NO_MEMORY, "sw_swap_graph: %d sequences", batch);
    if (st == SW_OK)
        memcpy(g->ids, seq_ids, sizeof *g->ids * (size_t)batch);
    for (int r = 0; r < GRAPH_RING && st == SW_OK; r++)
        st = sw_cuda_host_alloc((void **)&g->host[r], g->o.bytes);
    if (st == SW_OK)
        st = sw_cuda_swap_alloc((void **)&g->dev, g->o.bytes);
    if (st == SW_OK)
        st = sw_cuda_swap_alloc(&g->part, part_bytes);
    if (st == SW_OK)
        st = sw_cuda_swap_alloc((void **)&g->cnt, sizeof(int32_t) * (size_t)g->cap_merges);
    if (st == SW_OK)
        st = sw_cuda_swap_zero(g->cnt, sizeof(int32_t) * (size_t)g->cap_merges, NULL);
    if (st == SW_OK)
        st = sw_cuda_swap_zero(g->dev, g->o.bytes, NULL); /* no item until prepared */
    if (st == SW_OK)
        st = sw_cuda_stream_sync(NULL);
    for (int r = 0; r < GRAPH_RING && st == SW_OK; r++)
        st = sw_cuda_swap_event_create(&g->ev[r], 0);
    if (st != SW_OK) {
        sw_swap_graph_destroy(g);
        return st;
    }
    *out = g;
    return SW_OK;
}

sw_status sw_swap_graph_prepare(sw_swap_graph *g, void *stream)
{
    if (!g)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_graph_prepare: null graph");
    sw_swap *s = g->s;
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    sw_swap_dev *d = s->dev;
    const int32_t batch = g->batch, layer = g->layer;
    int64_t nblk = 0;
    for (int32_t b = 0; b < batch; b++) {
        sw_swap_seq *q = sw_swap_find_seq(s, g->ids[b]);
        if (!q)
            return sw_fail(SW_STATUS_NOT_FOUND, "sequence %llu (batch entry %d) is no longer "
                           "registered", (unsigned long long)g->ids[b], b);
        const sw_swap_layer *L = &q->layers[layer];
        if (L->nblocks > g->max_blocks)
            return sw_fail(SW_STATUS_WORKSPACE_TOO_SMALL, "sequence %llu has %d blocks, the "
                           "graph room for %d", (unsigned long long)g->ids[b], L->nblocks,
                           g->max_blocks);
        if (!L->res_ok) /* (settled: known resident) */
            for (int32_t i = 0; i < L->nblocks; i++)
                if (!sw_swap_blk_resident(&L->blk[i]))
                    return sw_fail(SW_STATUS_NOT_FOUND, "block %d of sequence %llu (layer %d) "
                                   "is not resident: attend without the graph", i,
                                   (unsigned long long)g->ids[b], layer);
        g->seqs[b] = q;
        nblk += L->nblocks;
    }
    SW_TRY(sw_swap_dev_enter(s));
    SW_TRY(sw_swap_dev_tab_regions(s, layer, batch, g->seqs));
    /* the ring's next buffer: its last upload read first */
    const int r = g->next;
    if (g->uploaded[r]) {
        SW_TRY(sw_cuda_swap_event_sync(g->ev[r]));
        g->uploaded[r] = 0;
    }
    char *h = g->host[r];
    int32_t *qo = (int32_t *)(h + g->o.qo), *kvp = (int32_t *)(h + g->o.kv);
    int32_t *pi = (int32_t *)(h + g->o.pi), *src = (int32_t *)(h + g->o.src);
    SW_TRY(sw_swap_dev_kv_offsets(s, layer, batch, g->seqs, kvp));
    const uint64_t tick = ++s->tick;
    for (int32_t b = 0; b <= batch; b++) {
        qo[b] = b * g->q_len;
        pi[b] = b * g->max_blocks;
        if (b < batch) {
            sw_swap_layer *L = &g->seqs[b]->layers[layer];
            src[b] = (int32_t)L->tab_off; /* (the arena has < 2^31 entries) */
            L->touch = tick;
        }
    }
    /* into the blob's regions, sized by the plan's bound (the pairs, or at
     * most 8 waves: test_planner holds the planner to it) */
    int64_t nm = 0, np = 0;
    const int64_t ni = sw_plan_decode(qo, kvp, batch, s->m.num_kv_heads, d->fast.slots,
                                      (sw_decode_item *)(h + g->o.items),
                                      (sw_decode_merge *)(h + g->o.merges), &nm, &np);
    if (ni == -2)
        return sw_fail(SW_STATUS_NO_MEMORY, "graph: the plan's buffers");
    SW_ASSERT_RET(ni >= 0 && ni <= g->cap_items && nm <= g->cap_merges && np <= g->cap_items);
    *(int32_t *)(h + g->o.count) = (int32_t)ni;
    /* after the engine's pool writes and its last resident call */
    if (d->offload_pending)
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_offload));
    if (d->done_pending)
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_done));
    /* the small tables (the page table's region is the copy's), the layers
     * not settled into the arena, then every sequence's table out of it */
    SW_TRY(sw_cuda_memcpy_h2d_async(g->dev, h, g->o.px, stream));
    SW_TRY(sw_swap_dev_settle(s, layer, batch, g->seqs, (int32_t *)(h + g->o.px), stream));
    SW_TRY(sw_cuda_swap_copy_tables((int32_t *)(g->dev + g->o.px), g->max_blocks, d->fast.tab,
                                    (const int32_t *)(g->dev + g->o.src),
                                    (const int32_t *)(g->dev + g->o.kv), s->m.block_size, batch,
                                    stream));
    SW_TRY(sw_cuda_swap_event_record(g->ev[r], stream));
    g->uploaded[r] = 1;
    g->next = (r + 1) % GRAPH_RING;
    /* a prepared step is one resident attend in the stats (its launch or
     * replay counts nothing: a replay runs without the host) */
    s->st.attends++;
    s->st.resident_attends++;
    s->st.hits += (uint64_t)nblk;
    return SW_OK;
}

sw_status sw_swap_graph_attend(sw_swap_graph *g, const void *q, void *o, float *lse,
                               int32_t causal, float sm_scale, void *stream)
{
    if (!g || (g->batch > 0 && (!q || !o)))
        return sw_fail(SW_STATUS_INVALID, "sw_swap_graph_attend: null argument");
    if ((((uintptr_t)q | (uintptr_t)o) & 15) || ((uintptr_t)lse & 3))
        return sw_fail(SW_STATUS_MISALIGNED, "sw_swap_graph_attend: q and o 16-byte aligned, "
                       "lse 4-byte");
    sw_swap *s = g->s;
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    sw_swap_dev *d = s->dev;
    sw_cuda_paged_args a;
    sw_swap_dev_decode_args(s, q, o, lse, causal, sm_scale, &a);
    a.batch = g->batch;
    a.total_kv = 0; /* (the gather's; the decode kernel reads kv_indptr) */
    a.qo_indptr = (const int32_t *)(g->dev + g->o.qo);
    a.kv_indptr = (const int32_t *)(g->dev + g->o.kv);
    a.page_indptr = (const int32_t *)(g->dev + g->o.pi);
    a.page_indices = (const int32_t *)(g->dev + g->o.px);
    a.items = (const sw_decode_item *)(g->dev + g->o.items);
    a.num_items = (int32_t)g->cap_items;
    a.num_items_dev = (const int32_t *)(g->dev + g->o.count);
    a.merges = (const sw_decode_merge *)(g->dev + g->o.merges);
    a.num_merges = (int32_t)g->cap_merges;
    a.merge_count = g->cnt;
    a.part_o = (float *)g->part;
    a.part_lse = (float *)((char *)g->part + g->lse_off);
    SW_TRY(sw_swap_dev_enter(s));
    /* Captured: the launch and a record node of ev_done (every replay
     * records it, so the engine's next calls, which wait on it, come after
     * the replay; the event itself stays usable outside the graph). Not
     * captured: after the engine's last resident call, as sw_swap_attend's
     * resident path, then ev_done recorded. */
    const int cap = sw_cuda_swap_capturing(stream);
    if (cap < 0) {
        s->failed = 1;
        return (sw_status)cap;
    }
    sw_status st = SW_OK;
    if (!cap && d->done_pending)
        st = sw_cuda_swap_stream_wait(stream, d->ev_done);
    if (st == SW_OK)
        st = sw_cuda_paged_decode_launch(&a, stream);
    if (st == SW_OK)
        st = cap ? sw_cuda_swap_event_record_node(d->ev_done, stream)
                 : sw_cuda_swap_event_record(d->ev_done, stream);
    if (st != SW_OK) {
        if (st == SW_STATUS_CUDA)
            s->failed = 1;
        return st;
    }
    d->done_pending = 1;
    return SW_OK;
}
