/* Internal contract of the swap engine: registry (swap.c), predictor
 * (predictor.c), resident pool (pool.c), tile planner (plan.c), read-ahead
 * (prefetch.c), heuristics (heuristics.c), CPU tile kernels (tile_cpu.c),
 * the device pool (device.c, dev_*.c; dev_internal.h); the attend call's
 * parts share attend_internal.h. */
#ifndef SW_SWAP_INTERNAL_H
#define SW_SWAP_INTERNAL_H

#include "spillway.h"
#include "spillway_swap.h"
#include "store/host_lease.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One offloaded block of one (sequence, layer). */
typedef struct sw_swap_blk {
    int32_t valid;        /* tokens; 0 = absent */
    uint8_t dtype;        /* sw_swap_kv_dtype */
    float k_scale, v_scale;
    int32_t slot;         /* resident slot or -1 */
    float *proj;          /* BF16, host pool: [num_kv_heads][block_size][rank]; NULL
                           * for FP8 and for a device pool */
    int32_t dproj;        /* BF16, device pool: entry of the device arena of
                           * projected keys; -1 = none */
    uint64_t *gen;        /* [num_kv_heads][2] store generations (K, V) */
} sw_swap_blk;

typedef struct sw_swap_layer {
    int32_t nblocks;      /* blocks 0..nblocks-1 present */
    int32_t hw;           /* blocks ever offloaded or attached (a failed batch's cut
                           * blocks may hold stripes: deleted with the sequence's) */
    int32_t cap;
    sw_swap_blk *blk;
    /* Device pool, the resident path (dev_fast.c): the layer's page table
     * in the device table arena, entries [tab_off, tab_off + tab_n)
     * (tab_off -1: none). res_ok: every block is resident BF16 and its
     * arena entry holds its slot (in stream order) -- a resident call
     * then reads no block of the layer on the host. Anything that takes
     * a block's slot clears it (sw_swap_layer_unsettle); an offload batch
     * that writes every block it touches through keeps it (res_keep: the
     * batch's epoch while it runs). touch: the tick of the layer's last
     * resident call, the recency of all its blocks (sw_swap_slot_recency). */
    int64_t tab_off;
    int32_t tab_n;
    uint8_t res_ok;
    uint64_t res_keep;
    uint64_t touch;
    /* Resident blocks of each store run (sw_swap.align_blocks blocks; run
     * r covers the sequence's blocks of store run block_base / align + r),
     * kept by every change of a block's slot (sw_swap_run_count): the
     * run-aware eviction's count is then one read, not a scan of the run
     * per victim. NULL without runs. */
    uint16_t *run_res;
    /* Device pool: host-tier leases kept from one call to the next
     * (dev_landing.c, "kept leases"), 2 x num_kv_heads a block in the
     * order of the block's keys (kv head, then K / V); a block's first
     * ptr NULL: none kept. kept_cap blocks; NULL: none yet. */
    struct sw_store_lease *kept;
    int32_t kept_cap;
    double kept_at;       /* monotonic seconds of its last job with kept leases */
} sw_swap_layer;

typedef struct sw_swap_seq {
    uint64_t id, ns;
    uint32_t block_base, max_blocks;
    uint64_t mark;         /* the last attend that listed it (duplicate check) */
    sw_swap_layer *layers; /* [num_layers] */
} sw_swap_seq;

static inline void sw_swap_layer_unsettle(sw_swap_layer *L)
{
    L->res_ok = 0;
    L->res_keep = 0;
}

typedef struct sw_swap_slot {
    sw_swap_seq *seq;     /* NULL = free */
    int32_t layer, block;
    float score;          /* last predictor score (-inf unscored) */
    uint64_t last_access; /* engine tick */
    uint64_t pin;         /* tile id that pins it (0 = none) */
    uint8_t *data;        /* K then V, slot layout, slot_bytes */
} sw_swap_slot;

/* One tile's batched store read, issued as a read ticket
 * (sw_store_read_submit) and collected by sw_swap_read_wait. dst are host
 * addresses: pool slots (host pool) or the tile's pinned host staging
 * (device pool). */
typedef struct sw_swap_read_job {
    size_t n;
    const sw_store_key *keys;
    void *const *dst;
    size_t dst_bytes;
    size_t *lengths;
    uint64_t *gens;
    sw_status *statuses;
    uint64_t ticket;         /* 0 = nothing outstanding */
    uint64_t tier_bytes[2];  /* the wait's: payload bytes from the host tier, the file */
} sw_swap_read_job;

/* Persistent compute pool (tpool.c): nthreads - 1 workers + the caller. */
typedef void (*sw_swap_task_fn)(void *ctx, int task, int tid);
typedef struct sw_swap_tpool {
    int nthreads, started, sync;
    pthread_t *th;
    void *args;
    pthread_mutex_t mu;
    pthread_cond_t cv, done;
    _Atomic uint64_t gen;
    atomic_int stop, next, active;
    sw_swap_task_fn fn;
    void *ctx;
    int ntasks;
} sw_swap_tpool;

/* Per-thread scratch of the tile kernels (tile_cpu.c). */
typedef struct sw_swap_tscratch {
    float *kf, *vf;   /* [block_size][head_dim] dequantised K, V of one block */
    float *sv;        /* [SW_SWAP_TROWS][bpad] scores, then probabilities */
} sw_swap_tscratch;

/* Rows of one kernel row group (query heads of one query row) and the
 * padded key count of a block's score row. */
#define SW_SWAP_TROWS 8

/* What the engine's heuristics decide from: the machine and the store as
 * sw_swap_create finds them. */
typedef struct sw_swap_facts {
    int device_pool;      /* 1: slots in GPU memory */
    int host_tier;        /* 1: the store has a host-RAM tier */
    int aligned;          /* 1: tiles aligned to store runs (swap.align_blocks > 0) */
    int32_t sms;          /* device pool: the device's SMs (else 0) */
    int32_t cpus;         /* CPUs in the process's affinity mask */
} sw_swap_facts;

/* The engine's own decisions beyond its config, as sw_swap_heuristics makes
 * them; a test or a bench/dev program may override fields
 * (sw_swap_create_tuned). Every field is an int32_t; not a user option and
 * never read from the environment. Ranges are enforced where each is used. */
typedef struct sw_swap_tuning {
    /* run-aware eviction window in tiles, 0 = victims in plain policy order
     * (attend_loop.c runs_first): 8 for a device pool (over a host tier the
     * pass's misses are one run of entries the landing copies whole; over
     * the disk alone the store reads 1.07 x the payload against 1.16 at 4,
     * steps 27-29 ms against 30.5-30.8 on the H200), 4 for a host pool
     * without a host tier, 0 over one; 0 when tiles are not aligned to runs.
     * At most 64. */
    int32_t run_evict;
    /* tile-kernel CTAs per launch: one per SM (the bulk and streaming
     * kernels hold ~195-214 KiB of stages a CTA) */
    int32_t tile_ctas;
    /* CTAs per host-tier gather launch (swap_gather.cu; 0: one per stripe):
     * half the SMs (H200 host-tier case: 66 CTAs 52.6 / 52.8% of pinned H2D
     * against 40.4 / 50.0 / 47.4% with 132, 44.2% with 33) */
    int32_t gather_ctas;
    /* how long the engine's threads (prelease, launcher) poll for a job
     * before they sleep, us: 2000 with >= 8 CPUs, else 0 (a config's
     * thread_spin_us >= 0 replaces it) */
    int32_t spin_us;
    /* device landing buffer of the prelease thread, MiB (0: none; the tiles
     * then read the host tier): 64 at the start, more than the bench's 50
     * MB a call at h16-2/d256 */
    int32_t landing_mb;
    /* the landing buffer grows, at a call's first job, to the job's need up
     * to this many MiB (512): a block past the room is read by its tile
     * from the host tier, with the host driving it (h32-8/d128, 96 MiB a
     * call: 58.8% of pinned H2D with 64 MiB of room) */
    int32_t landing_max_mb;
    /* landing launch sizes, blocks: the job's first launch (64: its first
     * tile waits for it), later ones doubling up to land_blocks (256: 8 MiB
     * copies run at the copy engine's ~52.5 GB/s, 1 MiB ones lose 14%), and
     * the blocks the caller lands itself when it posts the job (320: the
     * copy engine starts ~0.1 ms earlier) */
    int32_t land_start, land_blocks, land_first;
    /* a direct tile's launches at most, by landing launch (4, 1..8) */
    int32_t land_groups;
    /* landing copies run on through gaps of up to this many KiB between
     * two of the job's blocks (resident blocks, read again into landing
     * room nobody reads) instead of a copy each side: a copy costs the
     * copy engine ~3.6 us besides its bytes, 128 KiB ~2.4 us (128; 0 =
     * a copy per run of wanted blocks) */
    int32_t land_gap_kb;
    /* a direct tile's partials merged in fixed ranges of this many chunks
     * (64; 0: one merge a tile) */
    int32_t merge_chunks;
    /* diagnostic: timed events per phase of each device-pool call, printed
     * to stderr at the call's end (0) */
    int32_t timeline;
    /* 1: host-tier hits read by the GPU from the store's pinned host tier
     * where the tier is mapped; 0: through the read tickets, as over a tier
     * CUDA cannot map (tests compare the two paths) */
    int32_t host_gather;
    /* 1: a tile's missing blocks kept within store runs; 0: tiles cut by
     * count, as over a store without runs (tests) */
    int32_t align_tiles;
    /* device pool: 1 = an all-resident BF16 decode call runs the paged
     * decode kernel over the pool (dev_fast.c), and offload writes device
     * BF16 blocks through into the pool; 0 = every call through the tile
     * loop, offload never fills slots (tests compare the two) */
    int32_t resident_fast;
    /* the victim window ranked for a tile serves the pass's later tiles
     * while it holds a tile's span of candidates not pinned or touched
     * since (attend_loop.c), instead of a ranking per tile: planning at
     * 128k tokens (GPU faked, host tier) 2.8 -> 1.3 ms a call, 8 layers x
     * 64k 46.6 -> ~8 ms a step; 0 = ranked per tile */
    int32_t keep_window;
    /* device pool: host-tier leases of whole blocks kept from one call to
     * the next, up to this percentage of the host tier's entries (75; 0 =
     * every lease released at its call's end). A kept block's next visit
     * costs one retouch of its entries (LRU, CLOCK, stats) instead of a
     * key lookup a stripe and its release, and lands at once; the rest of
     * the tier stays free for new stripes (CLOCK passes leased entries by) */
    int32_t kept_pct;
    /* a layer's kept leases are released once it has not been attended
     * for this many ms (1000; 0 = never for idleness), so that a sequence
     * at rest does not hold the host tier that active ones need; checked at
     * most every quarter of it, at a call's first job */
    int32_t kept_idle_ms;
    /* device pool, host tier: once a call has planned its last tile, up to
     * this many MiB of the missing blocks of the call expected next (the
     * batch's first sequence, the layer that followed this one last time)
     * are leased and their copies queued behind the call's own, so that
     * the copy engine runs on through the call's end and the next call's
     * start; taken over by that call's job where still current (16; 0 =
     * none, the tests' `no_ahead` row) */
    int32_t land_ahead_mb;
    /* device pool, resident path: 1 = a plan of at most
     * SW_DECODE_INLINE_WORDS words (offsets, items, merges: batch 16 x 32k
     * at 8 kv heads is ~2,900) goes in the decode launch's parameters,
     * where a copy-engine upload before the kernel held it until the
     * kernel before it was done and the copy had crossed; 0 = uploaded
     * from the pinned ring (larger plans always are) */
    int32_t resident_inline;
} sw_swap_tuning;

#define SW_SWAP_TUNE_DEFAULT INT32_MIN /* a field left to the heuristics */

/* The library's tuning for these facts. Pure. */
void sw_swap_heuristics(const sw_swap_facts *f, sw_swap_tuning *t);
/* The landing places of a job's blocks (dev_landing.c, pure): loff[i] is
 * block i's place in blocks from the job's first, past room for each gap
 * of 1..gap_max blocks between blocks[i - 1] and blocks[i] (layer block
 * indices), so that one copy can run through it; other gaps (none, larger,
 * or an order that goes back) get no room. loff[n - 1] + 1 blocks of room
 * in all. */
void sw_swap_land_offsets(const int32_t *blocks, int32_t n, int32_t gap_max, int32_t *loff);

/* Every field at SW_SWAP_TUNE_DEFAULT (an override that overrides nothing). */
void sw_swap_tuning_default(sw_swap_tuning *t);
/* Fields of t set from "name=value[,name=value...]" (the field names of
 * sw_swap_tuning; A/B runs of `spillway-bench-swap --tune`): SW_OK, or
 * SW_STATUS_INVALID naming the bad part (t unchanged). */
sw_status sw_swap_tuning_parse(sw_swap_tuning *t, const char *spec);
/* t's fields overridden by o's that are not SW_SWAP_TUNE_DEFAULT. */
void sw_swap_tuning_apply(sw_swap_tuning *t, const sw_swap_tuning *o);

/* sw_swap_create with some of the heuristics' decisions overridden
 * (`tuning` from sw_swap_tuning_default with fields set; NULL = none). */
sw_status sw_swap_create_tuned(const sw_swap_model *model, const sw_swap_config *config,
                               sw_store *store, const sw_swap_tuning *tuning, sw_swap **out);

/* The pool's operations for the tile loop (attend_internal.h). */
typedef struct sw_swap_pool_ops sw_swap_pool_ops;
/* The tile loop's scratch, one per engine (attend_loop.c). */
typedef struct sw_swap_loop sw_swap_loop;

/* Offload's staging (offload.c; freed by sw_swap_destroy), made on first
 * use and grown: device blocks packed on the device (dev), copied to
 * pinned memory (host); pack items (sw_cuda_swap_pack_item) pinned and on
 * the device; host room to pack a strided host block; a batch's checked
 * items (offload.c's item_view). */
typedef struct sw_swap_ostage {
    uint8_t *dev, *host;
    size_t cap;
    void *items_host, *items_dev;
    size_t items_cap;
    void *ev;
    uint8_t *pack;
    size_t pack_cap;
    void *views;
    size_t views_cap;
    /* the batch's store writes: stripes, then manifests */
    sw_store_key *wkeys;
    const void **wsrc;
    size_t *wlen;
    uint64_t *wgen;
    size_t w_cap;
    uint8_t *mbuf;          /* the batch's manifests */
    size_t mbuf_cap;
    void *ev_wt;            /* after the last write-through (it reads the
                             * pack items and the device staging) */
    int wt_pending;
    uint64_t epoch;         /* offload batches so far (sw_swap_layer.res_keep) */
} sw_swap_ostage;

struct sw_swap {
    const sw_swap_pool_ops *ops; /* the host pool's or the device pool's */
    sw_swap_loop *loop;          /* NULL until the first pass */
    sw_swap_model m;
    sw_swap_config c;
    sw_swap_tuning tune;    /* the heuristics' decisions with the overrides */
    sw_store *store;
    int32_t tile_blocks;
    int32_t prefetch;       /* effective read-ahead depth in tiles (0 = none) */
    int32_t failed;
    size_t elem_max;        /* 2 */
    size_t stripe_elems;    /* block_size * head_dim */
    size_t slot_bytes;      /* 2 * num_kv_heads * stripe_elems * 2 */
    uint32_t store_stripe_bytes;
    /* Store chunk that a tile's missing blocks stay within (plan_tile):
     * the store's run_blocks, 0 = tiles cut by count only
     * (tuning align_tiles 0, or a store without runs). */
    uint32_t align_blocks;
    int32_t run_evict;      /* run-aware eviction window in tiles, 0 = off
                             * (sw_swap_tuning.run_evict) */
    float *proj;            /* P[head_dim][rank] */
    sw_swap_seq **seqs;
    size_t nseqs, seqs_cap;
    /* id -> index + 1 into seqs (0 = empty): open addressing, linear
     * probing, a power-of-two capacity kept >= 2 x nseqs (swap.c) */
    uint32_t *seq_tab;
    size_t seq_tab_cap;
    sw_swap_slot *slots;
    uint8_t *pool;
    /* host pool: (prefetch + 1) * tile_blocks slot-sized buffers that the
     * reads of the tiles in flight land in; a tile's read block is swapped
     * into its slot (data pointers exchanged) when the tile computes */
    uint8_t *stage_mem;
    uint8_t **stage;
    uint64_t tick;
    uint64_t marks;         /* attends so far (sw_swap_seq.mark) */
    struct sw_swap_vheap *vheap_live; /* the running pass's victim heap (else NULL) */
    uint32_t wt_cursor;     /* offload write-through's free-slot cursor */
    uint64_t pin_seq;
    sw_swap_tpool tp;       /* compute pool */
    sw_swap_tscratch *ts;   /* [tp.nthreads] */
    void *ts_mem;
    int32_t bpad;           /* block_size rounded up to 16 */
    int tile_isa;           /* sw_cpu_isa of the tile kernel */
    struct sw_swap_dev *dev; /* device pool (dev_internal.h); NULL for a host pool */
    sw_swap_ostage ost;
    sw_swap_stats st;
};

/* ---- swap.c ---- */
sw_swap_seq *sw_swap_find_seq(const sw_swap *s, uint64_t id);
/* Sequence seq_id's layer `layer` into *L: SW_STATUS_INVALID (layer out of
 * range), SW_STATUS_NOT_FOUND (not registered), with the detail. */
sw_status sw_swap_seq_layer(const sw_swap *s, uint64_t seq_id, int32_t layer,
                            const sw_swap_layer **L);
/* Block e is in the pool as BF16: what the resident path and its graphs
 * read in place. */
static inline int sw_swap_blk_resident(const sw_swap_blk *e)
{
    return e->slot >= 0 && e->valid > 0 && e->dtype == SW_SWAP_KV_BF16;
}
/* v[0..n) ordered by `before` (ctx, x, y: 1 when x goes before y), stable:
 * a bottom-up merge sort through tmp[0..n). Static inline so that each
 * caller's comparison is inlined (the sparse ranking's 32768 blocks, the
 * victim window's recencies). */
static inline void sw_swap_stable_sort(int32_t *v, int32_t n, int32_t *tmp,
                                       int (*before)(const void *, int32_t, int32_t),
                                       const void *ctx)
{
    int32_t *a = v, *b = tmp;
    for (int32_t w = 1; w < n; w *= 2) {
        for (int32_t lo = 0; lo < n; lo += 2 * w) {
            const int32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int32_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                b[o++] = before(ctx, a[j], a[i]) ? a[j++] : a[i++];
            while (i < mid)
                b[o++] = a[i++];
            while (j < hi)
                b[o++] = a[j++];
        }
        int32_t *t = a;
        a = b;
        b = t;
    }
    if (a != v)
        memcpy(v, a, sizeof(int32_t) * (size_t)n);
}
/* Slot sl's recency: its own last access, or its layer's last resident
 * call (which touched every block of the layer at once), the later. */
static inline uint64_t sw_swap_slot_recency(const sw_swap_slot *sl)
{
    const uint64_t t = sl->seq ? sl->seq->layers[sl->layer].touch : 0;
    return t > sl->last_access ? t : sl->last_access;
}
/* Room in L's block table for `need` blocks (new entries absent). */
sw_status sw_swap_layer_grow(sw_swap *s, sw_swap_layer *L, int32_t need);
/* Block b of q's layer L gained (d = 1) or lost (d = -1) its slot. */
static inline void sw_swap_run_count(const sw_swap *s, const sw_swap_seq *q,
                                     const sw_swap_layer *L, int32_t b, int d)
{
    if (L->run_res) {
        const uint32_t a = s->align_blocks;
        L->run_res[(q->block_base % a + (uint32_t)b) / a] += (uint16_t)d;
    }
}
/* Bytes of one element of a block of type t (0: unknown type). */
static inline size_t sw_swap_kv_elem_size(sw_swap_kv_dtype t)
{
    switch (t) {
    case SW_SWAP_KV_BF16: return 2;
    case SW_SWAP_KV_FP8_E4M3: return 1;
    }
    return 0;
}

/* ---- manifest.c: a block's manifest (sw_swap_seq_attach) ---- */
#define SW_SWAP_MANIFEST_HEAD 0xFFFFu /* the kv_head of a manifest's store key */
size_t sw_swap_manifest_size(int32_t num_kv_heads);
/* e's valid tokens, dtype, scales and generations, for model m. */
void sw_swap_manifest_encode(const sw_swap_model *m, const sw_swap_blk *e, void *out);
/* Back into e (e->gen has room for 2 * num_kv_heads); SW_STATUS_CORRUPT
 * (bad magic, length, field), SW_STATUS_UNSUPPORTED (a later version),
 * SW_STATUS_INVALID (another model shape), the detail saying which. */
sw_status sw_swap_manifest_decode(const sw_swap_model *m, const void *buf, size_t len,
                                  sw_swap_blk *e);

/* ---- predictor.c ---- */
/* Fills P[d][rank] (row-major) with N(0, 1/d) from splitmix64(seed) +
 * Box-Muller, in double. The engine rounds it to float. */
void sw_swap_projection_fill(uint64_t seed, int32_t d, int32_t rank, double *out);
/* Projects `rows` BF16 rows of length d: out[r][j] = sum_c x[r][c] P[c][j]
 * (fp32 accumulation). */
void sw_swap_project_bf16(const float *P, int32_t d, int32_t rank, const uint16_t *x,
                          int64_t rows, float *out);
/* The same sums (bit for bit) with the engine's instruction set (AVX-512
 * when s->tile_isa has it and the rank is a multiple of 16): the host
 * pool's keys at offload and queries at attend. */
void sw_swap_project(const sw_swap *s, const uint16_t *x, int64_t rows, float *out);
void sw_swap_project_bf16_avx512(const float *P, int32_t d, int32_t rank, const uint16_t *x,
                                 int64_t rows, float *out);
/* Block scores for one (seq, layer) given projected queries
 * qp[q_len][num_qo_heads][rank]; blocks without a predictor get -inf. A
 * block's score is the max over its tokens and its kv head's query rows of
 * the fp32 dot product summed in rank order from 0 (the device kernels'
 * order too); vectorised across query rows and tokens (SSE2, or AVX-512
 * when s->tile_isa has it), tasks of 64 blocks on the compute pool. */
void sw_swap_score_layer(sw_swap *s, const sw_swap_layer *L, const float *qp, int32_t q_len,
                         float *scores);
/* Blocks [b0, b1) of blk, AVX-512 (predictor_avx512.c): qT is the kv
 * heads' projected queries transposed, [H][R][Mp] (M rows, Mp a multiple
 * of 8, zero past M). Bit-identical to the scalar form. */
void sw_swap_score_blocks_avx512(const sw_swap_blk *blk, int32_t b0, int32_t b1, int32_t H,
                                 int32_t B, int32_t R, const float *qT, size_t M, size_t Mp,
                                 float *scores);
/* The same, one dot product at a time (bit-identical: tests compare). */
void sw_swap_score_layer_scalar(const sw_swap *s, const sw_swap_layer *L, const float *qp,
                                int32_t q_len, float *scores);

/* ---- pool.c ---- */
/* Chooses a slot for a new block: a free one, else the victim of the
 * policy among slots not pinned. Returns -1 when every slot is pinned. */
int32_t sw_swap_pool_victim(sw_swap *s);
/* Every unpinned slot in the order repeated sw_swap_pool_victim calls would
 * return them if each chosen slot were pinned at once (free slots by index,
 * then the policy's order): out has room for resident_blocks entries,
 * scratch for sw_swap_pool_rank_scratch() bytes. Returns the count. One
 * O(S log S) pass per tile instead of an O(S) scan per missing block. */
int32_t sw_swap_pool_rank(sw_swap *s, int32_t *out, void *scratch);
size_t sw_swap_pool_rank_scratch(const sw_swap *s);
/* The first min(k, unpinned slots) entries of sw_swap_pool_rank's order
 * (same out / scratch sizes): what one tile of k blocks can take. */
int32_t sw_swap_victims_first(sw_swap *s, int32_t k, int32_t *out, void *scratch);
/* Drops the resident copy of a block (if any). */
/* The victim heap (pool.c): sw_swap_victims_first's answers across the
 * tiles of a pass without a scan of the pool per tile. reset at a pass's
 * start (built from the slots at its first ranking); touch after every
 * change of a slot's score, last access or occupancy during the pass, and
 * after every unpin (a pinned slot's entry is left out until then);
 * first: the k first unpinned slots of sw_swap_pool_rank's order, as
 * sw_swap_victims_first gives them, or -1 (use sw_swap_victims_first: k
 * is large against the pool, or an allocation failed). */
typedef struct sw_swap_vheap sw_swap_vheap;
sw_swap_vheap *sw_swap_vheap_new(void);
void sw_swap_vheap_free(sw_swap_vheap *vh);
void sw_swap_vheap_reset(sw_swap_vheap *vh);
void sw_swap_vheap_touch(sw_swap *s, sw_swap_vheap *vh, int32_t slot);
int32_t sw_swap_vheap_first(sw_swap *s, sw_swap_vheap *vh, int32_t k, int32_t *out);
void sw_swap_pool_drop(sw_swap *s, sw_swap_blk *b);
/* Drops every resident block of a sequence. */
void sw_swap_pool_drop_seq(sw_swap *s, sw_swap_seq *q);
uint64_t sw_swap_pool_used(const sw_swap *s);

/* ---- plan.c: the tile planner (pure) ---- */
/* Sparse attend's block selection over n blocks with scores sc: sel[b] = 1
 * for the last w blocks, every unscored block (+-inf) and the k highest by
 * score (NaN lowest), ties to the higher block index; O(n log n). Returns 0,
 * or -1 without memory. */
int sw_swap_sparse_select(const float *sc, int32_t n, int32_t k, int32_t w, uint8_t *sel);
/* Whether a tile whose missing blocks lie in store chunk `cur` (of
 * align_blocks blocks; cur < 0: none missing yet) and that has `room` blocks
 * left takes a missing block of chunk `next`, of which `ahead` missing
 * blocks (this one included) come next in the tile order. A tile's read is
 * then one request per stream run instead of a cut through two runs of each
 * stream with a separate header read for the second part (the disk case of
 * `spillway bench swap`, tile 64: 11 device requests per tile, a third of
 * them 4 KiB header reads; 2.3 per tile with this rule,
 * the log added in 8d2b95b). Pure. */
int sw_swap_tile_takes(int64_t cur, int64_t next, int32_t ahead, int32_t room);

/* A sequence's visiting order as the tile loop builds it: order[0..nres)
 * its resident blocks, order[nres..norder) its missing ones, each part in
 * ascending block order; pos, the first block not planned yet. Tiles hold at
 * most tile_blocks blocks; with align_blocks > 0 (the store's run, in
 * blocks; store block = block_base + block) a tile's missing blocks stay
 * within one run unless all of the next run's missing blocks fit too
 * (sw_swap_tile_takes). */
typedef struct sw_swap_tile_plan {
    const int32_t *order;
    int32_t norder, nres, pos;
    uint64_t block_base;
    uint32_t align_blocks;
    int32_t tile_blocks;
} sw_swap_tile_plan;
/* The next tile: the number of blocks from pos it takes, in order (1 ..
 * tile_blocks; 0 only when pos >= norder). Consecutive calls, pos advanced
 * by each answer, cover every block of the order exactly once. Pure. */
int32_t sw_swap_plan_tile(const sw_swap_tile_plan *in);

/* ---- prefetch.c ---- */
/* Read-ahead depth for a config and tile size: the configured depth, at
 * most SW_SWAP_MAX_PREFETCH (staging: depth + 1 tiles), 0 when
 * resident_blocks < 2 * tile_blocks (a tile and the next are pinned at
 * once). Pure. */
#define SW_SWAP_MAX_PREFETCH 32
int32_t sw_swap_prefetch_depth(int32_t configured, int32_t resident_blocks, int32_t tile_blocks);
/* Upper bound of the default tile (config tile_blocks 0, which is also
 * at most resident_blocks / 8): 16 for a device pool; for a host pool
 * whose store has no host tier (host_tier 0) and whose tiles are aligned
 * to store runs of align_blocks >= 16 blocks, align_blocks, else 16; at
 * most SW_SWAP_MAX_AUTO_TILE. Pure. */
#define SW_SWAP_MAX_AUTO_TILE 256
int32_t sw_swap_auto_tile_cap(int host_pool, int host_tier, uint32_t align_blocks);
/* Submits a job as a store read ticket (n = 0: nothing). On failure every
 * status is the submit's error, no ticket is outstanding, and that status
 * is returned. Before the wait, statuses read SW_STATUS_INTERNAL. */
sw_status sw_swap_read_submit(sw_store *store, sw_swap_read_job *job);
/* Waits for the job's ticket (none: returns at once); results land in
 * lengths / gens / statuses as sw_store_read would leave them. */
void sw_swap_read_wait(sw_store *store, sw_swap_read_job *job);

/* ---- tpool.c ---- */
sw_status sw_swap_tpool_start(sw_swap_tpool *p, int nthreads);
void sw_swap_tpool_stop(sw_swap_tpool *p);
/* Runs tasks 0..ntasks-1 on the pool (caller included, tid 0) and returns
 * when all are done. */
void sw_swap_tpool_run(sw_swap_tpool *p, sw_swap_task_fn fn, void *ctx, int ntasks);

/* ---- tile_cpu.c: CPU tile kernels ---- */
/* One block of one kv head, as the kernel sees it. */
typedef struct sw_swap_kblk {
    const uint8_t *k, *v;  /* stripes */
    int32_t valid;
    int32_t dtype;         /* sw_swap_kv_dtype */
    float k_scale, v_scale;
    int64_t tok0;          /* first token of the block */
} sw_swap_kblk;

/* Online-softmax update of the rows of one kv head over a run of blocks.
 * Rows: query row r in [0, ql) and head g in [0, G); the state of (r, g) is
 * m[r*rs+g] (max, log2 domain), l[r*rs+g], o[(r*rs+g)*D..]; the query is
 * q[(r*qs+g)*D..], already multiplied by sm_scale*log2(e). Causal: row r
 * sees keys j <= r + len - ql (bottom-right). Rows that see no key of a
 * block keep their state. */
typedef struct sw_swap_kargs {
    int32_t D, G, ql, causal;
    int64_t len;
    const float *q;
    int64_t qs;
    float *m, *l, *o;
    int64_t rs;
    const sw_swap_kblk *blk;
    int32_t nblk;
    int32_t bpad;
} sw_swap_kargs;
typedef void (*sw_swap_kernel_fn)(const sw_swap_kargs *a, const sw_swap_tscratch *t);
void sw_swap_kernel_scalar(const sw_swap_kargs *a, const sw_swap_tscratch *t);
#if defined(__x86_64__)
void sw_swap_kernel_avx2(const sw_swap_kargs *a, const sw_swap_tscratch *t);
void sw_swap_kernel_avx512(const sw_swap_kargs *a, const sw_swap_tscratch *t);
#endif
/* Picks the ISA (the CPU prefill path's choice, SPILLWAY_CPU_ISA included),
 * starts the pool (SPILLWAY_NUM_THREADS or sw_cpu_count()) and allocates
 * per-thread scratch. */
sw_status sw_swap_tile_init(sw_swap *s);
void sw_swap_tile_fini(sw_swap *s);
/* Kernel for this handle and head_dim. */
sw_swap_kernel_fn sw_swap_tile_kernel(const sw_swap *s);
/* E4M3 code -> fp32 table (256 entries; fp8.c), filled by
 * sw_swap_e4m3_lut_init (once per process, thread-safe). */
extern float sw_swap_e4m3_lut[256];
void sw_swap_e4m3_lut_init(void);

/* ---- the device pool (device.c, dev_*.c; dev_internal.h) ---- */
/* Heuristics (pure, unit-tested without a GPU; heuristics.c). */
/* Block ranges per (tile, kv head, row group) of the tile kernel: about
 * `ctas` CTAs in all (tuning tile_ctas), at least two blocks
 * per CTA; 1..nblk, never decreasing with nblk. */
int32_t sw_swap_dev_chunks(int32_t nblk, int32_t H, int32_t nrg, int32_t ctas);
/* Floats of the tile kernel's partial states for a sequence of ql query
 * rows and tiles of up to nblk blocks (what sw_swap_dev_compute will use). */
size_t sw_swap_dev_part_floats(int32_t ql, int32_t nblk, int32_t H, int32_t G, int32_t D,
                               int32_t ctas);
/* Staging layout of the next tile's read from the tier mix of the last one:
 * 0 = block-major (host-tier copies are in the store's write order), 1 =
 * stream-major (file reads arrive in placement order); `prev` when the last
 * read moved nothing. */
int sw_swap_dev_layout(uint64_t host_bytes, uint64_t file_bytes, int prev);

sw_status sw_swap_dev_create(sw_swap *s);
void sw_swap_dev_destroy(sw_swap *s);
/* Makes the engine's device current on the calling thread. */
sw_status sw_swap_dev_enter(sw_swap *s);
/* Arena entry for a BF16 block's projected keys (kept when it has one). */
sw_status sw_swap_dev_entry(sw_swap *s, sw_swap_blk *e);
void sw_swap_dev_entry_free(sw_swap *s, sw_swap_blk *e);
/* Projects the block's keys k [H][B][D] (host BF16) into its entry. */
sw_status sw_swap_dev_project_block(sw_swap *s, const sw_swap_blk *e, const uint16_t *k);
/* Offload's write-through (offload.c): the pool's base; whether an attend's
 * work may still run and a GPU-side wait of `stream` for it; the next
 * attend ordered after `ev` (with the projections, ev_offload). */
uint8_t *sw_swap_dev_pool(sw_swap *s);
/* ... and the resident path's table arena (sw_swap_layer.tab_off; NULL
 * before the first resident call) */
int32_t *sw_swap_dev_tab(sw_swap *s);
/* sw_swap_get_pool_view's device part: the pool's K and V bases and the
 * engine's pending pool writes ordered before work on `stream`. */
sw_status sw_swap_dev_view(sw_swap *s, void *stream, void **k, void **v);
int sw_swap_dev_done_pending(const sw_swap *s);
sw_status sw_swap_dev_wait_done_on(sw_swap *s, void *stream);
sw_status sw_swap_dev_offload_after(sw_swap *s, void *ev);
/* Pinned host staging `hbuf` (0..prefetch: one per tile in flight) of the
 * store's read tickets, block-major (layout 0): address of stripe (h, kind)
 * of the m-th missing block. */
void *sw_swap_dev_hstage_ptr(const sw_swap *s, int hbuf, int32_t m, int32_t h, int kind);
size_t sw_swap_dev_stage_stride(const sw_swap *s);
/* Moves the first nmiss blocks of host staging `hbuf` into device staging
 * `buf` on the engine's copy stream, after the scatter that last read `buf`,
 * and waits for it (the host buffer is free on return): one copy per run of
 * stripes whose lease (per stripe, block-major; NULL: none leased) has no
 * ptr, so nothing when every stripe is gathered. */
sw_status sw_swap_dev_upload(sw_swap *s, int hbuf, int buf, int32_t nmiss,
                             const sw_store_lease *lease);
/* Host-tier gather (swap_gather.cu): 1 when this device pool reads
 * host-tier hits straight from the store's pinned host tier. */
int sw_swap_dev_gathers(const sw_swap *s);
/* Leases keys[0..n) (sw_store_host_lease; lease[i].ptr NULL: read it
 * through the ticket). The entries stay leased until the call's verdict. */
/* Prelease (with the host-tier gather): blocks[0..n) of sequence q (missing
 * when its order was built, in visiting order) leased from the host tier by
 * a thread of the engine while the caller plans; no-op when it is off. */
sw_status sw_swap_dev_prelease(sw_swap *s, sw_swap_seq *q, int32_t layer,
                               const int32_t *blocks, int32_t n);
/* 1 when the prelease thread runs (sw_swap_dev_prelease does something):
 * attend posts the first sequence's job before its scores, so that its
 * leases and landing copies start with the call; the same job posted again
 * when the order is built is kept, not restarted. */
int sw_swap_dev_preleases(const sw_swap *s);
/* The timeline's host-only phase mark `kind` (tuning timeline; else
 * nothing): printed with the call's marks, in ms from its B mark. */
void sw_swap_dev_tl_phase(sw_swap *s, char kind);
/* Waits for the prelease thread's work of the last call (the release of its
 * host-tier leases): before the engine writes the
 * store, so that its eviction sees the tier as it would without the thread. */
void sw_swap_dev_quiesce(sw_swap *s);
/* Landing ahead (tuning land_ahead_mb; dev_landing.c): the layer of an
 * attend call noted (the next call is expected to attend the layer that
 * followed it last time); once the call's tiles are planned, the first
 * missing blocks of that next call leased and their copies queued; the
 * blocks held ahead released (before a sequence goes or is attached, at
 * the engine's end). No-ops without a device pool or the tuning. */
void sw_swap_dev_note_layer(sw_swap *s, int32_t layer);
void sw_swap_dev_land_ahead(sw_swap *s, const sw_swap_attend_params *p, sw_swap_seq *const *seqs);
void sw_swap_dev_ahead_drop(sw_swap *s);
/* Kept host-tier leases (dev_landing.c) released: a block's (before the
 * engine writes or cuts it), a sequence's (before it goes), every one
 * (at the engine's end). No-ops without a device pool or kept leases. */
void sw_swap_kept_drop_block(sw_swap *s, sw_swap_layer *L, int32_t block);
void sw_swap_kept_drop_seq(sw_swap *s, sw_swap_seq *q);
void sw_swap_kept_drop_all(sw_swap *s);
/* The device pool's GPU work all done and its launcher stopped (device.c;
 * no-op without a device pool). */
void sw_swap_dev_drain(sw_swap *s);
/* Wakes the engine's threads ahead of their jobs (which: 1 the prelease
 * thread, at an attend call's start; 2 the launcher, once the call's first
 * job is posted), so that they poll (tuning spin_us) rather than
 * sleep when the jobs come: a sleeping thread took 40-280 us to wake on
 * the H200's VM. */
void sw_swap_dev_nudge(sw_swap *s, int which);
/* A tile's leases (keys block-major for its nmiss missing blocks): the
 * prelease thread's where it has them, the others leased here
 * (sw_swap_dev_lease); tmp_*: room for nkeys. A block the prelease thread
 * also copied into the device landing buffer has its leases' ptr pointing
 * there (device memory); *land_ev is then the event the tile's reads of
 * those must wait for (NULL: nothing of the tile landed), and miss_ev[m]
 * (room for nmiss) the landing launch of missing block m (-1: not landed;
 * launches in job order, so nondecreasing over landed blocks). */
sw_status sw_swap_dev_lease_tile(sw_swap *s, const int32_t *miss_blocks, int32_t nmiss,
                                 size_t nkeys, const sw_store_key *keys, sw_store_lease *lease,
                                 sw_store_key *tmp_keys, sw_store_lease *tmp_lease,
                                 uint32_t *tmp_map, size_t *nleased, void **land_ev,
                                 int32_t *miss_ev);
sw_status sw_swap_dev_lease(sw_swap *s, size_t n, const sw_store_key *keys,
                            sw_store_lease *lease, size_t *nleased);
/* End of an attend call, before sw_swap_dev_attend_end, on every path:
 * when the call leased or gathered anything, waits for `stream` (the call's
 * one wait for this), releases the leases and reads the gathers' mismatch
 * report; a mismatch drops the slot it filled (if the block still has it)
 * and returns SW_STATUS_CORRUPT naming the first such stripe's key (with
 * the detail only when `report`; a failed call keeps its own). */
sw_status sw_swap_dev_attend_verdict(sw_swap *s, void *stream, int report);

/* Per attend call. begin: waits for the previous call's buffers, sizes the
 * workspaces, projects the queries (q device BF16) and scores every block
 * of the batch into scores[b][...] (host; one synchronisation). */
sw_status sw_swap_dev_attend_begin(sw_swap *s, const sw_swap_attend_params *p,
                                   sw_swap_seq *const *seqs, float **scores, void *stream);
/* Pass start: running state reset. */
sw_status sw_swap_dev_pass_begin(sw_swap *s, const sw_swap_attend_params *p, void *stream);
/* One tile: scatter of its nmiss read blocks out of staging buffer `buf`
 * (layout), then the tile kernel + merge for batch entry bi. */
typedef struct sw_swap_dev_tile {
    int32_t bi, n, nmiss, buf, layout;
    const int32_t *blocks, *slots, *miss_blocks, *miss_slots;
    /* per stripe of the missing blocks, block-major ((m * H + h) * 2 +
     * kind): leased host-tier copies, gathered after the scatter; NULL:
     * none (everything from the staging) */
    const sw_store_lease *lease;
    /* the tile's ring position (read-ahead ring, 0..prefetch) and 1 when
     * sw_swap_dev_gather issued its gathers ahead (then the kernel waits
     * for them instead of gathering after the scatter) */
    int32_t hbuf, gathered;
    /* 1: the direct kernel's (sw_swap_dev_direct_tile, decided once its
     * leases are taken) */
    int32_t direct;
    /* the landing copies its leases point into: what its reads of them wait
     * for (NULL: none; sw_swap_dev_lease_tile) */
    void *land_ev;
    /* per missing block its landing launch (-1: none; NULL: none landed): a
     * direct tile's chunks run in groups, each after its own launch */
    const int32_t *miss_ev;
} sw_swap_dev_tile;
/* Issues the tile's gathers ahead of its kernel, on a gather stream, into
 * its device staging (t->buf), which the tile's scatter moves into its
 * slots in stream order: no wait for other tiles' computes, only for the
 * staging's previous scatter. *issued = 0 (nothing done) when there is no
 * gather (a host tier CUDA cannot read), nothing is leased, or a
 * lease's length is not its block's; the tile then gathers in
 * sw_swap_dev_compute. */
sw_status sw_swap_dev_gather(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                             const sw_swap_dev_tile *t, int *issued);
/* 1 when tile t (planned, its leases taken) goes to the direct kernel:
 * nothing of it needs reading ahead. */
int sw_swap_dev_direct_tile(const sw_swap *s, const sw_swap_attend_params *p,
                            const sw_swap_seq *q, const sw_swap_dev_tile *t);
sw_status sw_swap_dev_compute(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                              const sw_swap_dev_tile *t, void *stream);
/* Pass end: outputs. o/lse (device, may be NULL) and/or fp32 copy to host
 * `host_f32` (synchronises). */
sw_status sw_swap_dev_pass_end(sw_swap *s, const sw_swap_attend_params *p, void *o, float *lse,
                               float *host_f32, void *stream);
/* Call end: records the completion event; with kernel timing, waits and
 * adds the tile kernels' time to the stats. */
sw_status sw_swap_dev_attend_end(sw_swap *s, void *stream);
/* Scores for sw_swap_score_blocks (q on the host). */
sw_status sw_swap_dev_score_host(sw_swap *s, const sw_swap_layer *L, const void *q,
                                 int32_t q_len, float *scores);

/* ---- fp8 ---- */
float sw_e4m3_to_f32(uint8_t x);
uint8_t sw_f32_to_e4m3(float f); /* round to nearest even, saturating to +-448 */

#ifdef __cplusplus
}
#endif
#endif
