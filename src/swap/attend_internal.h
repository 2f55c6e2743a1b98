/* The attend call's parts and what they share (attend.c the public call
 * and its validation; attend_loop.c the tile loop; plan.c the tile planner;
 * attend_host.c and attend_dev.c the two pools' operations): the per-call
 * state (run), a tile of the loop, and the table of pool operations the
 * loop calls, so that it never asks which pool it runs on. */
#ifndef SW_SWAP_ATTEND_INTERNAL_H
#define SW_SWAP_ATTEND_INTERNAL_H

#include "swap_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A tile of the loop: its blocks, slots and misses, the store keys of the
 * misses and where they land, the read in flight. */
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
    uint64_t leased_bytes;     /* their payload bytes */
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

/* Per-call state (the host pool's softmax state and key ranges too). */
/* A ranked victim's eviction key when ranked (attend_loop.c). */
typedef struct vsnap {
    uint64_t last;
    uint32_t score; /* its bits */
    const struct sw_swap_seq *seq;
} vsnap;

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
    /* victims of the tile being planned (ranked at its first miss, or
     * kept from an earlier tile of the pass: tuning keep_window; vn < 0:
     * not ranked yet) and their keys when ranked (vkeys[i] of vrank[i]) */
    int32_t *vrank;
    vsnap *vkeys;
    void *vscratch;
    int32_t vn, vpos;
    /* run-aware eviction (s->run_evict tiles, 0 = off): the first vwin
     * ranked victims reordered by runs_first, vtmp its scratch (NULL =
     * off); vwin = tile_blocks when off */
    int32_t vwin;
    int32_t *vtmp;
    /* the ranking kept across the pass's tiles (pool.c's victim heap; NULL:
     * victims_first per tile) */
    sw_swap_vheap *vheap;
} run;

/* What the tile loop asks of a pool (the host pool: attend_host.c; the
 * device pool: attend_dev.c). Every entry is set; one a pool has nothing to
 * do for returns at once. */
struct sw_swap_pool_ops {
    /* the public call once validated (R->s, R->p, R->seqs set): scores,
     * passes (sw_swap_run_pass), outputs, counters (sw_swap_run_account);
     * frees R (sw_swap_run_free) */
    sw_status (*attend)(run *R, sw_swap_attend_result *res, void *stream);
    /* sw_swap_score_blocks (arguments checked): scores of layer L's blocks
     * for q_len host BF16 query rows */
    sw_status (*score)(sw_swap *s, const sw_swap_layer *L, const void *q, int32_t q_len,
                       float *scores);
    /* 1 when tiles take host-tier leases (the loop allocates their tables) */
    int (*leases)(const sw_swap *s);
    /* the order of batch entry R->pb was built: missing[0..n) are the
     * blocks that will be read, in visiting order */
    void (*order_built)(run *R, const int32_t *missing, int32_t n);
    /* appends missing block b's 2 x num_kv_heads store keys to t->keys and
     * where each lands to t->dst (t->nkeys advanced; b is the tile's
     * t->nmiss-th missing block) */
    void (*miss_keys)(run *R, tile *t, int32_t b);
    /* the stripe of key x (0 .. 2H) of a missing block in miss_keys' order */
    void (*key_stripe)(int32_t x, int32_t H, int32_t *h, int *kind);
    /* bytes each t->dst entry has room for */
    size_t (*dst_bytes)(const sw_swap *s);
    /* before the tile's ticket is submitted (t->job set): keys served
     * otherwise (host-tier leases) leave the ticket */
    void (*before_read)(run *R, tile *t);
    /* after: decisions that need its leases */
    void (*after_submit)(run *R, tile *t);
    /* its stripes verified: to where its compute reads them */
    sw_status (*read_done)(run *R, tile *t);
    /* tiles [from, upto) of the ring tl[ntl] are planned: work that may start */
    sw_status (*issue)(run *R, tile *tl, int ntl, int64_t from, int64_t upto);
    /* a pass's start (running state reset), a tile's compute, the pass's end */
    sw_status (*pass_begin)(run *R);
    sw_status (*compute)(run *R, const tile *t);
    sw_status (*pass_end)(run *R);
};
extern const sw_swap_pool_ops sw_swap_host_ops; /* attend_host.c */
extern const sw_swap_pool_ops sw_swap_dev_ops;  /* attend_dev.c */

/* ---- attend_loop.c ---- */
double sw_swap_now(void);
/* The blocks of L not resident, selected (sel NULL: all), in block order. */
int32_t sw_swap_missing_of(const sw_swap_layer *L, const uint8_t *sel, int32_t *out);
static inline sw_store_key sw_swap_key_of(const sw_swap_seq *q, int32_t layer, int32_t block,
                                          int32_t h, int kind)
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
/* One pass over the batch, exact (sparse = 0) or sparse: tiles planned,
 * read, computed; the pool's pass_begin / pass_end around it. */
sw_status sw_swap_run_pass(run *R, int sparse);
/* The call's counters into the engine's stats and `res` (may be NULL):
 * h0, m0 the stats' hits and misses before the call. */
void sw_swap_run_account(run *R, sw_swap_attend_result *res, uint64_t h0, uint64_t m0,
                         int64_t total_blocks, double rel);
/* R's per-call tables: the block scores of each batch entry (R->scores),
 * the visiting order (R->order) and `extra` bytes for the pool
 * (*extra_out, 64-byte aligned; NULL when extra is 0), from the engine's
 * scratch (grown, kept from call to call: valid until the next call). */
sw_status sw_swap_run_tables(run *R, size_t extra, void **extra_out);
/* Ends the call's use of R (its batch table). */
void sw_swap_run_free(run *R, int32_t batch);
/* Frees the engine's loop scratch (the tile ring; sw_swap_destroy). */
void sw_swap_loop_free(sw_swap *s);

/* dev_fast.c: the device pool's resident path, for a call it takes (every
 * block resident, BF16, exact, few rows: eligible, with the batch's block
 * count); the device made current by the caller. */
int sw_swap_dev_fast_eligible(sw_swap *s, const sw_swap_attend_params *p,
                              sw_swap_seq *const *seqs, int64_t *nblocks);
sw_status sw_swap_dev_fast_attend(sw_swap *s, const sw_swap_attend_params *p,
                                  sw_swap_seq *const *seqs, int64_t nblocks,
                                  sw_swap_attend_result *res, void *stream);

#endif
