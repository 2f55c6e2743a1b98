/* Swap engine handle: configuration, sequence registry, offload, stats. */
#include "swap_internal.h"
#include "attend_internal.h"
#include "swap_cuda.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"

#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SW_SWAP_MAX_HEAD_DIM 1024
#define SW_SWAP_MAX_BLOCK 65536
/* sw_swap_config as first published (up to `device`) */
#define SW_SWAP_CONFIG_V1 (offsetof(sw_swap_config, device) + sizeof(int32_t))

void sw_swap_config_init(sw_swap_config *c)
{
    if (!c)
        return;
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    c->resident_blocks = 64;
    c->tile_blocks = 0;
    c->predictor_rank = 32;
    c->projection_seed = 0x5157;
    c->prefetch_depth = 4;
    c->policy = SW_SWAP_POLICY_SCORE;
    c->pool = SW_SWAP_POOL_HOST;
    c->thread_spin_us = -1;
}

void sw_swap_model_init(sw_swap_model *m)
{
    if (!m)
        return;
    memset(m, 0, sizeof *m);
    m->struct_size = sizeof *m;
}

void sw_swap_block_init(sw_swap_block *b)
{
    if (!b)
        return;
    memset(b, 0, sizeof *b);
    b->struct_size = sizeof *b;
    b->k_scale = b->v_scale = 1.0f;
    b->layout = SW_KV_HND;
}

void sw_swap_attend_params_init(sw_swap_attend_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->causal = 1;
}

const char *sw_swap_policy_name(sw_swap_policy p)
{
    switch (p) {
    case SW_SWAP_POLICY_SCORE: return "score";
    case SW_SWAP_POLICY_LRU: return "lru";
    }
    return "unknown";
}

/* CPUs this process may run on (its affinity mask; else the online ones). */
static int32_t affinity_cpus(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        cpus = CPU_COUNT(&set);
    return cpus < 1 ? 1 : cpus > INT32_MAX ? INT32_MAX : (int32_t)cpus;
}

static sw_status check_model(const sw_swap_model *m)
{
    if (m->struct_size != sizeof *m)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_model.struct_size %u, want %zu",
                       m->struct_size, sizeof *m);
    if (m->num_layers < 1)
        return sw_fail(SW_STATUS_INVALID, "num_layers %d < 1", m->num_layers);
    if (m->num_kv_heads < 1 || m->num_kv_heads > 65535)
        return sw_fail(SW_STATUS_INVALID, "num_kv_heads %d not in [1, 65535]", m->num_kv_heads);
    if (m->num_qo_heads < 1 || m->num_qo_heads % m->num_kv_heads)
        return sw_fail(SW_STATUS_INVALID, "num_qo_heads %d is not a positive multiple of "
                       "num_kv_heads %d", m->num_qo_heads, m->num_kv_heads);
    if (m->head_dim < 1 || m->head_dim > SW_SWAP_MAX_HEAD_DIM)
        return sw_fail(SW_STATUS_INVALID, "head_dim %d not in [1, %d]", m->head_dim,
                       SW_SWAP_MAX_HEAD_DIM);
    if (m->block_size < 1 || m->block_size > SW_SWAP_MAX_BLOCK)
        return sw_fail(SW_STATUS_INVALID, "block_size %d not in [1, %d]", m->block_size,
                       SW_SWAP_MAX_BLOCK);
    return SW_OK;
}

static sw_status check_config(const sw_swap_config *c)
{
    if (c->struct_size < SW_SWAP_CONFIG_V1 || c->struct_size > sizeof *c)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_config.struct_size %u, want %zu..%zu",
                       c->struct_size, (size_t)SW_SWAP_CONFIG_V1, sizeof *c);
    if (c->resident_blocks < 1)
        return sw_fail(SW_STATUS_INVALID, "resident_blocks %d < 1", c->resident_blocks);
    if (c->tile_blocks < 0)
        return sw_fail(SW_STATUS_INVALID, "tile_blocks %d < 0", c->tile_blocks);
    if (c->predictor_rank < 1 || c->predictor_rank > 128)
        return sw_fail(SW_STATUS_INVALID, "predictor_rank %d not in [1, 128]",
                       c->predictor_rank);
    if (c->prefetch_depth < 0 || c->prefetch_depth > SW_SWAP_MAX_PREFETCH)
        return sw_fail(SW_STATUS_INVALID, "prefetch_depth %d not in [0, %d]", c->prefetch_depth,
                       SW_SWAP_MAX_PREFETCH);
    if (c->policy != SW_SWAP_POLICY_SCORE && c->policy != SW_SWAP_POLICY_LRU)
        return sw_fail(SW_STATUS_INVALID, "unknown policy %d", (int)c->policy);
    if (c->pool != SW_SWAP_POOL_HOST && c->pool != SW_SWAP_POOL_DEVICE)
        return sw_fail(SW_STATUS_INVALID, "unknown pool kind %d", (int)c->pool);
    if (c->struct_size >= offsetof(sw_swap_config, thread_spin_us) + sizeof(int32_t) &&
        (c->thread_spin_us < -1 || c->thread_spin_us > 10000000))
        return sw_fail(SW_STATUS_INVALID, "thread_spin_us %d not in [-1, 10000000]",
                       c->thread_spin_us);
    if (c->struct_size >= offsetof(sw_swap_config, persist_manifests) + sizeof(int32_t) &&
        c->persist_manifests != 0 && c->persist_manifests != 1)
        return sw_fail(SW_STATUS_INVALID, "persist_manifests %d is neither 0 nor 1",
                       c->persist_manifests);
    return SW_OK;
}

sw_status sw_swap_create(const sw_swap_model *model, const sw_swap_config *config,
                         sw_store *store, sw_swap **out)
{
    return sw_swap_create_tuned(model, config, store, NULL, out);
}

sw_status sw_swap_create_tuned(const sw_swap_model *model, const sw_swap_config *config,
                               sw_store *store, const sw_swap_tuning *tuning, sw_swap **out)
{
    if (out)
        *out = NULL;
    if (!model || !config || !store || !out)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_create: null argument");
    SW_TRY(check_model(model));
    SW_TRY(check_config(config));
    /* a caller's older, shorter struct: the fields it lacks take defaults */
    sw_swap_config cfg;
    sw_swap_config_init(&cfg);
    memcpy(&cfg, config, config->struct_size);
    cfg.struct_size = sizeof cfg;
    config = &cfg;
    if (config->pool == SW_SWAP_POOL_DEVICE) {
        const int32_t nd = sw_cuda_devices();
        if (nd < 1)
            return sw_fail(SW_STATUS_NO_DEVICE, "device pool asked for, but no usable CUDA "
                           "device in this %s", sw_cuda_built() ? "machine" : "build");
        if (config->device < 0 || config->device >= nd)
            return sw_fail(SW_STATUS_NO_DEVICE, "device pool on CUDA device %d: %d usable "
                           "(ordinals 0..%d)", config->device, nd, nd - 1);
        if (!sw_cuda_swap_head_dim_ok(model->head_dim))
            return sw_fail(SW_STATUS_UNSUPPORTED, "device pool: head_dim %d has no tile kernel "
                           "(64, 128 or 256; the host pool takes any)", model->head_dim);
    }
    sw_store_stats sst;
    memset(&sst, 0, sizeof sst);
    sst.struct_size = sizeof sst;
    SW_TRY(sw_store_get_stats(store, &sst));

    sw_swap *s = calloc(1, sizeof *s);
    if (!s)
        return sw_fail(SW_STATUS_NO_MEMORY, "sw_swap_create: handle");
    s->m = *model;
    s->c = *config;
    s->ops = config->pool == SW_SWAP_POOL_DEVICE ? &sw_swap_dev_ops : &sw_swap_host_ops;
    s->store = store;
    s->store_stripe_bytes = (uint32_t)sst.stripe_bytes;
    {
        /* the heuristics' decisions for this machine and store, then the
         * caller's overrides (tests, bench/dev) */
        sw_swap_facts f;
        memset(&f, 0, sizeof f);
        f.device_pool = config->pool == SW_SWAP_POOL_DEVICE;
        f.host_tier = sst.host_capacity_bytes > 0;
        f.aligned = sst.run_blocks > 1 && sst.run_blocks <= UINT32_MAX;
        f.cpus = affinity_cpus();
        sw_status st = f.device_pool ? sw_cuda_swap_sm_count(config->device, &f.sms) : SW_OK;
        if (st != SW_OK) {
            free(s);
            return st;
        }
        sw_swap_heuristics(&f, &s->tune);
        if (config->thread_spin_us >= 0)
            s->tune.spin_us = config->thread_spin_us;
        if (tuning)
            sw_swap_tuning_apply(&s->tune, tuning);
        s->align_blocks = s->tune.align_tiles != 0 && f.aligned ? (uint32_t)sst.run_blocks : 0;
        const int32_t w = s->tune.run_evict;
        s->run_evict = s->align_blocks ? (w < 0 ? 0 : w > 64 ? 64 : w) : 0;
    }
    int32_t tb = config->tile_blocks;
    if (tb == 0) {
        tb = config->resident_blocks / 8;
        if (tb < 1)
            tb = 1;
        const int32_t cap = sw_swap_auto_tile_cap(config->pool == SW_SWAP_POOL_HOST,
                                                  sst.host_capacity_bytes > 0, s->align_blocks);
        if (tb > cap)
            tb = cap;
    }
    if (tb > config->resident_blocks)
        tb = config->resident_blocks;
    s->tile_blocks = tb;
    s->prefetch = sw_swap_prefetch_depth(config->prefetch_depth, config->resident_blocks, tb);
    s->elem_max = 2;
    s->stripe_elems = (size_t)model->block_size * (size_t)model->head_dim;
    s->slot_bytes = 2 * (size_t)model->num_kv_heads * s->stripe_elems * s->elem_max;
    s->slot_bytes = sw_align_up(s->slot_bytes, 64);

    const int32_t d = model->head_dim, r = config->predictor_rank;
    double *pd = malloc(sizeof(double) * (size_t)d * (size_t)r);
    s->proj = malloc(sizeof(float) * (size_t)d * (size_t)r);
    s->slots = calloc((size_t)config->resident_blocks, sizeof *s->slots);
    /* A device pool's slot bytes live in GPU memory (device.c). */
    const size_t nstage = ((size_t)s->prefetch + 1) * (size_t)tb;
    if (config->pool == SW_SWAP_POOL_HOST) {
        s->pool = sw_aligned_alloc(64, s->slot_bytes * (size_t)config->resident_blocks);
        s->stage_mem = sw_aligned_alloc(64, s->slot_bytes * nstage);
        s->stage = malloc(sizeof *s->stage * nstage);
        if (s->stage_mem && s->stage)
            for (size_t i = 0; i < nstage; i++)
                s->stage[i] = s->stage_mem + i * s->slot_bytes;
    }
    if (!pd || !s->proj || !s->slots ||
        (config->pool == SW_SWAP_POOL_HOST && (!s->pool || !s->stage_mem || !s->stage))) {
        free(pd);
        sw_swap_destroy(s);
        return sw_fail(SW_STATUS_NO_MEMORY, "sw_swap_create: %d slots of %zu bytes",
                       config->resident_blocks, s->slot_bytes);
    }
    sw_swap_projection_fill(config->projection_seed, d, r, pd);
    for (size_t i = 0; i < (size_t)d * (size_t)r; i++)
        s->proj[i] = (float)pd[i];
    free(pd);
    for (int32_t i = 0; i < config->resident_blocks; i++) {
        s->slots[i].data = s->pool ? s->pool + (size_t)i * s->slot_bytes : NULL;
        s->slots[i].score = -INFINITY;
    }
    if (config->pool == SW_SWAP_POOL_DEVICE) {
        sw_status st = sw_swap_dev_create(s);
        if (st != SW_OK) {
            sw_swap_destroy(s);
            return st;
        }
    } else {
        sw_status st = sw_swap_tile_init(s);
        if (st != SW_OK) {
            sw_swap_destroy(s);
            return st;
        }
    }
    s->st.policy = config->policy;
    *out = s;
    return SW_OK;
}

static void free_seq(sw_swap *s, sw_swap_seq *q)
{
    if (!q)
        return;
    if (q->layers) {
        for (int32_t l = 0; l < s->m.num_layers; l++) {
            sw_swap_layer *L = &q->layers[l];
            for (int32_t b = 0; b < L->cap; b++) {
                free(L->blk[b].proj);
                free(L->blk[b].gen);
                sw_swap_dev_entry_free(s, &L->blk[b]);
            }
            free(L->blk);
            free(L->run_res);
            free(L->kept); /* released before (sw_swap_kept_drop_*) */
        }
    }
    free(q->layers);
    free(q);
}

void sw_swap_destroy(sw_swap *s)
{
    if (!s)
        return;
    sw_swap_tile_fini(s);
    sw_swap_loop_free(s);
    sw_swap_dev_drain(s); /* no GPU work reads a kept lease any more */
    sw_swap_kept_drop_all(s);
    for (size_t i = 0; i < s->nseqs; i++)
        free_seq(s, s->seqs[i]);
    sw_swap_dev_destroy(s);
    sw_cuda_swap_free(s->ost.dev);
    sw_cuda_host_free(s->ost.host);
    sw_cuda_swap_free(s->ost.items_dev);
    sw_cuda_host_free(s->ost.items_host);
    if (s->ost.wt_pending)
        (void)sw_cuda_swap_event_sync(s->ost.ev_wt);
    sw_cuda_swap_event_destroy(s->ost.ev_wt);
    sw_cuda_swap_event_destroy(s->ost.ev);
    free(s->ost.pack);
    free(s->ost.views);
    free(s->ost.wkeys);
    free(s->ost.wsrc);
    free(s->ost.wlen);
    free(s->ost.wgen);
    free(s->ost.mbuf);
    free(s->seqs);
    free(s->seq_tab);
    free(s->slots);
    sw_aligned_free(s->pool);
    sw_aligned_free(s->stage_mem);
    free(s->stage);
    free(s->proj);
    free(s);
}

/* ---- the registry's id map (open addressing, linear probing) ---- */
static size_t seq_hash(uint64_t id, size_t cap)
{
    id ^= id >> 30;
    id *= 0xbf58476d1ce4e5b9ull;
    id ^= id >> 27;
    id *= 0x94d049bb133111ebull;
    id ^= id >> 31;
    return (size_t)id & (cap - 1);
}

/* The table position holding id, or the empty one where it would go. */
static size_t seq_pos(const sw_swap *s, uint64_t id)
{
    size_t p = seq_hash(id, s->seq_tab_cap);
    while (s->seq_tab[p] && s->seqs[s->seq_tab[p] - 1]->id != id)
        p = (p + 1) & (s->seq_tab_cap - 1);
    return p;
}

/* Rebuilds the map at a capacity of at least 2 x (nseqs + 1). */
static sw_status seq_tab_grow(sw_swap *s)
{
    size_t cap = s->seq_tab_cap ? s->seq_tab_cap : 32;
    while (cap < 2 * (s->nseqs + 1))
        cap *= 2;
    if (cap == s->seq_tab_cap)
        return SW_OK;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return sw_fail(SW_STATUS_NO_MEMORY, "sequence registry map");
    free(s->seq_tab);
    s->seq_tab = t;
    s->seq_tab_cap = cap;
    for (size_t i = 0; i < s->nseqs; i++)
        s->seq_tab[seq_pos(s, s->seqs[i]->id)] = (uint32_t)(i + 1);
    return SW_OK;
}

/* Removes the entry at table position p (backward-shift deletion: the
 * entries after it that probed past p move up, so lookups never stop at a
 * hole in their run). */
static void seq_tab_erase(sw_swap *s, size_t p)
{
    const size_t mask = s->seq_tab_cap - 1;
    size_t q = p;
    for (;;) {
        q = (q + 1) & mask;
        if (!s->seq_tab[q])
            break;
        const size_t home = seq_hash(s->seqs[s->seq_tab[q] - 1]->id, s->seq_tab_cap);
        /* q's entry may fill p if its home is not cyclically in (p, q] */
        if ((q > p && (home <= p || home > q)) || (q < p && home <= p && home > q)) {
            s->seq_tab[p] = s->seq_tab[q];
            p = q;
        }
    }
    s->seq_tab[p] = 0;
}

sw_swap_seq *sw_swap_find_seq(const sw_swap *s, uint64_t id)
{
    if (!s->seq_tab_cap)
        return NULL;
    const uint32_t e = s->seq_tab[seq_pos(s, id)];
    return e ? s->seqs[e - 1] : NULL;
}

sw_status sw_swap_seq_add(sw_swap *s, uint64_t seq_id, uint64_t ns, uint32_t block_base,
                          uint32_t max_blocks)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_seq_add: null handle");
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    if (sw_swap_find_seq(s, seq_id))
        return sw_fail(SW_STATUS_INVALID, "sequence %llu already registered",
                       (unsigned long long)seq_id);
    if (max_blocks < 1 || (uint64_t)block_base + max_blocks - 1 > UINT32_MAX)
        return sw_fail(SW_STATUS_INVALID, "block range base %u + %u blocks is empty or past "
                       "UINT32_MAX", block_base, max_blocks);
    for (size_t i = 0; i < s->nseqs; i++) {
        const sw_swap_seq *o = s->seqs[i];
        if (o->ns != ns)
            continue;
        uint64_t a0 = block_base, a1 = (uint64_t)block_base + max_blocks;
        uint64_t b0 = o->block_base, b1 = (uint64_t)o->block_base + o->max_blocks;
        if (a0 < b1 && b0 < a1)
            return sw_fail(SW_STATUS_INVALID, "blocks [%llu, %llu) of namespace %llu overlap "
                           "sequence %llu's [%llu, %llu)", (unsigned long long)a0,
                           (unsigned long long)a1, (unsigned long long)ns,
                           (unsigned long long)o->id, (unsigned long long)b0,
                           (unsigned long long)b1);
    }
    if (s->nseqs == s->seqs_cap) {
        size_t nc = s->seqs_cap ? 2 * s->seqs_cap : 16;
        sw_swap_seq **n = realloc(s->seqs, nc * sizeof *n);
        if (!n)
            return sw_fail(SW_STATUS_NO_MEMORY, "sequence registry");
        s->seqs = n;
        s->seqs_cap = nc;
    }
    if (s->nseqs >= UINT32_MAX - 1)
        return sw_fail(SW_STATUS_INVALID, "sequence registry full (%zu sequences)", s->nseqs);
    SW_TRY(seq_tab_grow(s));
    sw_swap_seq *q = calloc(1, sizeof *q);
    if (q)
        q->layers = calloc((size_t)s->m.num_layers, sizeof *q->layers);
    if (!q || !q->layers) {
        free(q);
        return sw_fail(SW_STATUS_NO_MEMORY, "sequence registry");
    }
    for (int32_t l = 0; l < s->m.num_layers; l++)
        q->layers[l].tab_off = -1;
    q->id = seq_id;
    q->ns = ns;
    q->block_base = block_base;
    q->max_blocks = max_blocks;
    s->seqs[s->nseqs++] = q;
    s->seq_tab[seq_pos(s, seq_id)] = (uint32_t)s->nseqs;
    s->st.sequences = s->nseqs;
    return SW_OK;
}

/* Every stripe of a sequence and each block's manifest (after its
 * stripes), in store batches of DEL_CHUNK keys; a key already gone is not
 * an error. The first failure's status (the rest is still tried). */
enum { DEL_CHUNK = 65536 };

static sw_status delete_stripes_of(sw_swap *s, const sw_swap_seq *q)
{
    sw_store_key *keys = malloc(sizeof *keys * DEL_CHUNK);
    if (!keys)
        return sw_fail(SW_STATUS_NO_MEMORY, "sw_swap_seq_remove: the delete batch");
    sw_status first = SW_OK;
    size_t n = 0;
    for (int32_t l = 0; l < s->m.num_layers; l++)
        for (int32_t b = 0; b < q->layers[l].hw || b < q->layers[l].nblocks; b++)
            for (int32_t h = 0; h <= s->m.num_kv_heads; h++)
                for (int kind = 0; kind < 2; kind++) {
                    if (h == s->m.num_kv_heads && kind == SW_STORE_KIND_V)
                        continue;
                    const int32_t kh = h == s->m.num_kv_heads ? (int32_t)SW_SWAP_MANIFEST_HEAD : h;
                    keys[n++] = sw_swap_key_of(q, l, b, kh, kind);
                    /* a block's keys stay in one batch (its manifest last) */
                    const int block_end = h == s->m.num_kv_heads;
                    if (block_end && n + 2 * (size_t)s->m.num_kv_heads + 1 > DEL_CHUNK) {
                        const sw_status st = sw_store_delete_batch(s->store, n, keys, NULL, NULL);
                        if (st != SW_OK && first == SW_OK)
                            first = st;
                        n = 0;
                    }
                }
    if (n) {
        const sw_status st = sw_store_delete_batch(s->store, n, keys, NULL, NULL);
        if (st != SW_OK && first == SW_OK)
            first = st;
    }
    free(keys);
    return first;
}

sw_status sw_swap_seq_remove(sw_swap *s, uint64_t seq_id, int32_t delete_stripes)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_seq_remove: null handle");
    const size_t pos = s->seq_tab_cap ? seq_pos(s, seq_id) : 0;
    if (!s->seq_tab_cap || !s->seq_tab[pos])
        return sw_fail(SW_STATUS_NOT_FOUND, "sequence %llu is not registered",
                       (unsigned long long)seq_id);
    const size_t idx = s->seq_tab[pos] - 1;
    sw_swap_seq *q = s->seqs[idx];
    sw_status first = SW_OK;
    if (s->dev) {
        sw_swap_dev_quiesce(s);   /* the last call's leases released first */
        sw_swap_dev_ahead_drop(s); /* and those taken for the next call */
    }
    sw_swap_kept_drop_seq(s, q); /* and the ones kept, before the keys go */
    if (delete_stripes)
        first = delete_stripes_of(s, q);
    sw_swap_pool_drop_seq(s, q);
    seq_tab_erase(s, pos);
    s->seqs[idx] = s->seqs[--s->nseqs];
    if (idx < s->nseqs) /* the last sequence moved into idx: its map entry (which still
                         * names the old last index, whose pointer is still there) follows */
        s->seq_tab[seq_pos(s, s->seqs[idx]->id)] = (uint32_t)(idx + 1);
    free_seq(s, q);
    s->st.sequences = s->nseqs;
    return first;
}

sw_status sw_swap_seq_layer(const sw_swap *s, uint64_t seq_id, int32_t layer,
                            const sw_swap_layer **L)
{
    if (layer < 0 || layer >= s->m.num_layers)
        return sw_fail(SW_STATUS_INVALID, "layer %d not in [0, %d)", layer, s->m.num_layers);
    const sw_swap_seq *q = sw_swap_find_seq(s, seq_id);
    if (!q)
        return sw_fail(SW_STATUS_NOT_FOUND, "sequence %llu is not registered",
                       (unsigned long long)seq_id);
    *L = &q->layers[layer];
    return SW_OK;
}

sw_status sw_swap_seq_length(const sw_swap *s, uint64_t seq_id, int32_t layer, int64_t *tokens,
                             int32_t *blocks)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_seq_length: null handle");
    const sw_swap_layer *L = NULL;
    SW_TRY(sw_swap_seq_layer(s, seq_id, layer, &L));
    if (tokens) {
        int64_t t = 0;
        if (L->nblocks > 0)
            t = (int64_t)(L->nblocks - 1) * s->m.block_size + L->blk[L->nblocks - 1].valid;
        *tokens = t;
    }
    if (blocks)
        *blocks = L->nblocks;
    return SW_OK;
}

sw_status sw_swap_layer_grow(sw_swap *s, sw_swap_layer *L, int32_t need)
{
    if (need <= L->cap)
        return SW_OK;
    int32_t nc = L->cap ? 2 * L->cap : 64;
    while (nc < need)
        nc *= 2;
    if (s->align_blocks) {
        /* (one run more than the blocks fill: the first may start part-way) */
        const size_t a = s->align_blocks, was = L->cap ? (L->cap + a - 1) / a + 1 : 0,
                     runs = ((size_t)nc + a - 1) / a + 1;
        uint16_t *r = realloc(L->run_res, runs * sizeof *r);
        if (!r)
            return sw_fail(SW_STATUS_NO_MEMORY, "run counts of %d blocks", nc);
        memset(r + was, 0, (runs - was) * sizeof *r);
        L->run_res = r;
    }
    sw_swap_blk *n = realloc(L->blk, (size_t)nc * sizeof *n);
    if (!n)
        return sw_fail(SW_STATUS_NO_MEMORY, "block table of %d blocks", nc);
    for (int32_t i = L->cap; i < nc; i++) {
        memset(&n[i], 0, sizeof n[i]);
        n[i].slot = -1;
        n[i].dproj = -1;
    }
    L->blk = n;
    L->cap = nc;
    return SW_OK;
}

/* Blocks whose manifests (and K stripes) one store read of attach takes. */
#define SW_ATTACH_CHUNK 64

/* Layer `layer` of an attached sequence: its blocks' manifests from block 0
 * up to the first one the store does not have, checked and entered into the
 * registry; the predictor's projected keys of its BF16 blocks recomputed
 * from their K stripes, whose generations must be the manifests'. */
static sw_status attach_layer(sw_swap *s, sw_swap_seq *q, int32_t layer, uint8_t *mbuf,
                              uint8_t *kbuf, sw_store_key *keys, void **dst, size_t *lens,
                              uint64_t *gens, sw_status *sts)
{
    const int32_t H = s->m.num_kv_heads, B = s->m.block_size, D = s->m.head_dim;
    const int32_t R = s->c.predictor_rank;
    const size_t mlen = sw_swap_manifest_size(H), kstripe = s->stripe_elems * 2;
    sw_swap_layer *L = &q->layers[layer];
    int done = 0;
    for (uint32_t b0 = 0; !done && b0 < q->max_blocks; b0 += SW_ATTACH_CHUNK) {
        const uint32_t nb = q->max_blocks - b0 < SW_ATTACH_CHUNK ? q->max_blocks - b0
                                                                 : SW_ATTACH_CHUNK;
        for (uint32_t i = 0; i < nb; i++) {
            keys[i] = sw_swap_key_of(q, layer, (int32_t)(b0 + i), SW_SWAP_MANIFEST_HEAD,
                               SW_STORE_KIND_K);
            dst[i] = mbuf + (size_t)i * mlen;
        }
        (void)sw_store_read(s->store, nb, keys, dst, mlen, lens, NULL, sts);
        uint32_t got = 0;
        for (; got < nb; got++) {
            const int32_t b = (int32_t)(b0 + got);
            if (sts[got] == SW_STATUS_NOT_FOUND) {
                /* the end of the layer -- unless a later block of the chunk
                 * has a manifest: then block b was lost */
                for (uint32_t j = got + 1; j < nb; j++)
                    if (sts[j] != SW_STATUS_NOT_FOUND)
                        return sw_fail(SW_STATUS_NOT_FOUND, "layer %d block %d: its manifest is "
                                       "missing but block %u has one", layer, b, b0 + j);
                done = 1;
                break;
            }
            if (sts[got] != SW_OK)
                return sw_fail(sts[got], "layer %d block %d: its manifest could not be read (%s)",
                               layer, b, sw_status_str(sts[got]));
            if (b > 0 && L->blk[b - 1].valid < B)
                return sw_fail(SW_STATUS_CORRUPT, "layer %d: block %d holds %d of %d tokens but "
                               "block %d follows it", layer, b - 1, L->blk[b - 1].valid, B, b);
            SW_TRY(sw_swap_layer_grow(s, L, b + 1));
            sw_swap_blk *e = &L->blk[b];
            if (!e->gen && !(e->gen = calloc((size_t)H * 2, sizeof *e->gen)))
                return sw_fail(SW_STATUS_NO_MEMORY, "generations");
            sw_status st = sw_swap_manifest_decode(&s->m, dst[got], lens[got], e);
            if (st != SW_OK) {
                e->valid = 0;
                return sw_fail(st, "layer %d block %d: %s", layer, b, sw_last_error());
            }
        }
        /* K stripes of this chunk's BF16 blocks, for the predictor */
        size_t n = 0;
        for (uint32_t i = 0; i < got; i++) {
            const sw_swap_blk *e = &L->blk[b0 + i];
            if (e->dtype != SW_SWAP_KV_BF16)
                continue;
            for (int32_t h = 0; h < H; h++, n++) {
                keys[n] = sw_swap_key_of(q, layer, (int32_t)(b0 + i), h, SW_STORE_KIND_K);
                dst[n] = kbuf + (size_t)i * H * kstripe + (size_t)h * kstripe;
            }
        }
        if (n > 0)
            (void)sw_store_read(s->store, n, keys, dst, kstripe, lens, gens, sts);
        n = 0;
        for (uint32_t i = 0; i < got; i++) {
            const int32_t b = (int32_t)(b0 + i);
            sw_swap_blk *e = &L->blk[b];
            const int32_t valid = e->valid;
            e->valid = 0; /* absent until its predictor entry is made */
            if (e->dtype == SW_SWAP_KV_BF16) {
                for (int32_t h = 0; h < H; h++, n++) {
                    if (sts[n] != SW_OK)
                        return sw_fail(sts[n], "layer %d block %d: K stripe of kv head %d: %s",
                                       layer, b, h, sw_status_str(sts[n]));
                    if (gens[n] != e->gen[h * 2] || lens[n] != (size_t)valid * D * 2)
                        return sw_fail(SW_STATUS_CORRUPT, "layer %d block %d: K stripe of kv head "
                                       "%d has generation %llu and %zu bytes; its manifest says "
                                       "%llu and %zu", layer, b, h, (unsigned long long)gens[n],
                                       lens[n], (unsigned long long)e->gen[h * 2],
                                       (size_t)valid * D * 2);
                }
                const uint16_t *k = (const uint16_t *)(kbuf + (size_t)i * H * kstripe);
                if (s->dev) {
                    SW_TRY(sw_swap_dev_entry(s, e));
                    e->valid = valid; /* the projection reads valid rows */
                    sw_status st = sw_swap_dev_project_block(s, e, k);
                    if (st != SW_OK) {
                        e->valid = 0;
                        if (st == SW_STATUS_CUDA)
                            s->failed = 1;
                        return st;
                    }
                } else {
                    if (!e->proj &&
                        !(e->proj = malloc(sizeof(float) * (size_t)H * (size_t)B * (size_t)R)))
                        return sw_fail(SW_STATUS_NO_MEMORY, "projected keys");
                    for (int32_t h = 0; h < H; h++)
                        sw_swap_project(s, k + (size_t)h * s->stripe_elems, valid,
                                        e->proj + (size_t)h * B * (size_t)R);
                }
            }
            e->valid = valid;
            L->nblocks = b + 1;
        }
    }
    return SW_OK;
}

sw_status sw_swap_seq_attach(sw_swap *s, uint64_t seq_id, uint64_t ns, uint32_t block_base,
                             uint32_t max_blocks)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_seq_attach: null handle");
    SW_TRY(sw_swap_seq_add(s, seq_id, ns, block_base, max_blocks));
    sw_swap_seq *q = sw_swap_find_seq(s, seq_id);
    const int32_t H = s->m.num_kv_heads;
    const size_t per = (size_t)H * SW_ATTACH_CHUNK;
    uint8_t *mbuf = malloc(sw_swap_manifest_size(H) * SW_ATTACH_CHUNK);
    uint8_t *kbuf = malloc(s->stripe_elems * 2 * per);
    sw_store_key *keys = malloc(sizeof *keys * per);
    void **dst = malloc(sizeof *dst * per);
    size_t *lens = malloc(sizeof *lens * per);
    uint64_t *gens = malloc(sizeof *gens * per);
    sw_status *sts = malloc(sizeof *sts * per);
    sw_status st = mbuf && kbuf && keys && dst && lens && gens && sts
                       ? SW_OK
                       : sw_fail(SW_STATUS_NO_MEMORY, "attach buffers");
    if (st == SW_OK && s->dev) {
        sw_swap_dev_quiesce(s);
        sw_swap_dev_ahead_drop(s);
        st = sw_swap_dev_enter(s);
    }
    for (int32_t l = 0; st == SW_OK && l < s->m.num_layers; l++)
        st = attach_layer(s, q, l, mbuf, kbuf, keys, dst, lens, gens, sts);
    free(mbuf);
    free(kbuf);
    free(keys);
    free(dst);
    free(lens);
    free(gens);
    free(sts);
    if (st != SW_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", sw_last_error());
        (void)sw_swap_seq_remove(s, seq_id, 0); /* the store is left as it was */
        return sw_fail(st, "sequence %llu not attached: %s", (unsigned long long)seq_id, why);
    }
    return SW_OK;
}

sw_status sw_swap_get_pool_view(sw_swap *s, void *stream, sw_swap_pool_view *view)
{
    if (!s || !view)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_get_pool_view: null argument");
    if (view->struct_size != sizeof *view)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_pool_view.struct_size %u, want %zu",
                       view->struct_size, sizeof *view);
    if (!s->dev)
        return sw_fail(SW_STATUS_UNSUPPORTED, "sw_swap_get_pool_view: a host pool's slots move "
                       "(the view is the device pool's)");
    if (s->failed)
        return sw_fail(SW_STATUS_FAILED, "swap engine failed earlier");
    void *k = NULL, *v = NULL;
    sw_status st = sw_swap_dev_view(s, stream, &k, &v);
    if (st != SW_OK) {
        if (st == SW_STATUS_CUDA)
            s->failed = 1;
        return st;
    }
    view->device = s->c.device;
    view->num_slots = s->c.resident_blocks;
    view->reserved = 0;
    view->k = k;
    view->v = v;
    view->page_stride = (int64_t)(s->slot_bytes / 2);
    view->head_stride = (int64_t)s->m.block_size * s->m.head_dim;
    view->token_stride = s->m.head_dim;
    return SW_OK;
}

sw_status sw_swap_resident_slots(const sw_swap *s, uint64_t seq_id, int32_t layer, int32_t *slots,
                                 int32_t capacity, int32_t *nblocks)
{
    if (!s || !nblocks)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_resident_slots: null argument");
    if (!slots && capacity > 0)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_resident_slots: slots is NULL with capacity "
                       "%d (NULL asks for the count only, with capacity 0)", capacity);
    const sw_swap_layer *L = NULL;
    SW_TRY(sw_swap_seq_layer(s, seq_id, layer, &L));
    *nblocks = L->nblocks;
    if (capacity < L->nblocks || (!slots && L->nblocks > 0))
        return sw_fail(SW_STATUS_WORKSPACE_TOO_SMALL, "slots has room for %d, the sequence has "
                       "%d blocks", capacity, L->nblocks);
    for (int32_t b = 0; b < L->nblocks; b++)
        slots[b] = sw_swap_blk_resident(&L->blk[b]) ? L->blk[b].slot : -1;
    return SW_OK;
}

sw_status sw_swap_get_projection(const sw_swap *s, float *out, size_t capacity)
{
    if (!s || !out)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_get_projection: null argument");
    size_t n = (size_t)s->m.head_dim * (size_t)s->c.predictor_rank;
    if (capacity < n)
        return sw_fail(SW_STATUS_INVALID, "projection needs %zu floats, room for %zu", n,
                       capacity);
    memcpy(out, s->proj, n * sizeof(float));
    return SW_OK;
}

sw_status sw_swap_get_stats(const sw_swap *s, sw_swap_stats *st)
{
    if (!s || !st || st->struct_size < 8)
        return sw_fail(SW_STATUS_INVALID, "sw_swap_get_stats: null or struct_size < 8");
    sw_swap_stats t = s->st;
    t.policy = s->c.policy;
    t.resident_blocks = s->c.resident_blocks;
    t.tile_blocks = s->tile_blocks;
    t.predictor_rank = s->c.predictor_rank;
    t.prefetch = s->prefetch;
    t.failed = s->failed;
    t.sequences = s->nseqs;
    t.resident_used = sw_swap_pool_used(s);
    size_t n = st->struct_size < sizeof t ? st->struct_size : sizeof t;
    uint32_t keep = st->struct_size;
    memcpy(st, &t, n);
    st->struct_size = keep;
    return SW_OK;
}

void sw_swap_reset_stats(sw_swap *s)
{
    if (!s)
        return;
    sw_swap_stats z;
    memset(&z, 0, sizeof z);
    z.sequences = s->nseqs;
    s->st = z;
}
