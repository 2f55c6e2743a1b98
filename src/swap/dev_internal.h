/* The device pool's parts (files dev_*.c and device.c) and what they share:
 * the pool state (sw_swap_dev), the launcher's jobs, the prelease thread's
 * state, and each part's calls. Who calls whom, top down (no call goes back
 * up):
 *   device.c        lifetime (create, destroy), the threads' nudge
 *   dev_tile.c      per call and tile: workspace, scores, descriptors,
 *                   gathers, tile kernels, merges, finalisation
 *   dev_verdict.c   the call's integrity verdict (gathered stripes' CRC
 *                   report), lease release
 *   dev_landing.c   the prelease thread: host-tier leases and their landing
 *                   copies; a tile's leases
 *   dev_pool.c      projected-key arena, staging and its upload
 *   dev_threads.c   the launcher thread (runs a callback it is given) and
 *                   the threads' polling
 *   dev_timeline.c  the timeline diagnostic (a leaf)
 *
 * Device pool of the swap engine: slots in GPU memory, projected keys kept
 * on the GPU, staging buffers the store's device reads land in, and the
 * per-call work the tile loop (attend_loop.c, through attend_dev.c) enqueues (scores, scatter, tile
 * kernel + merge, finalisation). Eviction and the tile plan are the host
 * pool's (pool.c, plan.c, attend_loop.c): only where bytes live differs.
 *
 * Streams and ordering (docs/swap.md, "Device pool"):
 * - compute: the caller's stream. Scatter, tile, merge and finalise run on
 *   it in tile order, so a slot refilled for tile i+1 is written only after
 *   every earlier kernel that read it.
 * - copy: the engine's stream for the uploads of verified reads. The store
 *   reads a tile (a read ticket, prefetch.c) into one of prefetch + 1 pinned
 *   host staging buffers; once its wait has checked every stripe, one
 *   cudaMemcpyAsync moves it to a device staging buffer after the scatter
 *   that last read that buffer (GPU-side wait), and the host waits for the
 *   copy (so the host buffer can take the next ticket).
 * - own: the engine's stream for offload projections and score_blocks.
 *   The next attend waits for the last offload's event; an offload waits
 *   for the last attend's event before it rewrites projected keys.
 * The host waits once per attend (the scores it plans with) and where a
 * pinned buffer is reused (the offload upload buffer, the descriptors of
 * the previous call).
 *
 * Host-tier hits (the gather path, swap_gather.cu): a tile's stripes that
 * are in the store's pinned host tier are leased (store/host_lease.h) when
 * its read is submitted, not read through the ticket; the tile's gather
 * kernel, after its scatter on the compute stream, reads them straight from
 * the host tier into their slots and checks their CRC32C on the GPU. The
 * leases are held until the call's end, where one synchronisation brings
 * the mismatch report back (sw_swap_dev_attend_verdict): a call that
 * gathered a stripe whose CRC did not match returns SW_STATUS_CORRUPT and
 * its slot is dropped. The upload then moves only the stripes the ticket
 * read.
 *
 * Gathers issued ahead: a tile's
 * leased stripes are gathered on one of two gather streams into the tile's
 * device staging (one per read-ahead ring position), where the ticket's
 * upload puts the other stripes, as soon as the tile is planned; the tile's
 * scatter, on the compute stream after its gather's event, moves every
 * missing block into its slot. The gather waits only for the scatter of the
 * staging's previous tile (a ring's length earlier), so PCIe streams up to
 * the read-ahead's depth ahead of the computes. (The first version gathered straight
 * into the slots; a gather had to wait for the computes still reading its
 * victims -- always tile j-2's, as victims are the lowest scores -- which
 * chained one gather behind each compute: the timeline,
 * docs/perf/swap.md.) The gather items are read by the kernel
 * from the pinned descriptor space (no upload on the way). A tile whose
 * leases cannot go ahead (a lease's length is not its block's) gathers on
 * the compute stream after its scatter, straight into the slots.
 *
 * With a host tier the GPU can read (docs/swap.md "Direct tiles",
 * "Prelease", "Landing"): direct tiles (one kernel per host-tier tile, in groups
 * by landing launch, two tile streams and a merge stream, a launcher
 * thread); the prelease thread (a sequence's host-tier leases taken ahead,
 * posted at the call's start, its first blocks by the caller); its landing
 * (those blocks moved into a device buffer on the thread's own stream by
 * copy-engine copies, an event per launch that the
 * tiles reading them wait for); and descriptors read in place from pinned
 * memory in a call that lands blocks (DESC_K). Without one (or with tuning
 * host_gather 0) tiles take the staged path: store tickets, upload,
 * scatter, tile kernel. */
#ifndef SW_SWAP_DEV_INTERNAL_H
#define SW_SWAP_DEV_INTERNAL_H

#include "swap_internal.h"
#include "swap_cuda.h"
#include "store/crc32c_gf2.h"
#include "store/host_lease.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A stripe the call's gather kernels wrote: enough to name its key and to
 * drop its slot when its CRC did not match. */
typedef struct gather_rec {
    const sw_swap_seq *q;
    int32_t layer, block, slot;
    int32_t h, kind;
    uint32_t entry;      /* the leased host-tier entry and its generation */
    uint64_t generation;
} gather_rec;

/* Raw-CRC offsets of the last stripe lengths seen (sw_crc32c_to_raw is ~30
 * GF(2) products): one per thread that writes gather items. Zeroed: unset
 * entries have length 0 and offset 0, right for 0. */
typedef struct crc_cache {
    uint32_t len[4], off[4];
    int next;
} crc_cache;

/* The store's CRC of a `len`-byte stripe as the raw register the gather
 * kernels compute: crc ^ off(len), off(len) = (~0 * x^(8 len)) ^ ~0. */
static inline uint32_t sw_swap_crc_raw(crc_cache *c, uint32_t crc, uint32_t len)
{
    for (int i = 0; i < 4; i++)
        if (c->len[i] == len)
            return crc ^ c->off[i];
    const uint32_t off = sw_crc32c_to_raw(0, len);
    c->len[c->next] = len;
    c->off[c->next] = off;
    c->next = (c->next + 1) & 3;
    return crc ^ off;
}

/* Mismatches the device reports by id (more are counted, not named). */
#define SW_SWAP_BAD_CAP 63u
/* Partial buffers of the direct mode's tiles (merged on their own stream). */
#define SW_SWAP_NPART 4
#define SW_SWAP_LAND_GROUPS_MAX 8 /* launches a direct tile at most (land_groups) */

/* The resident path's state (dev_fast.c): a ring of pinned page tables
 * and their device copies (an event each: the ring entry's upload done;
 * call[r] the number of the call that last used entry r, done_upto the
 * last call known to have its upload done), the decode split's partial
 * states and the fused merge's counters, the device's decode slots. 32
 * entries: a decode loop's host runs up to 32 calls (a step of a 32-layer
 * model) ahead of the GPU before a call waits for an entry. */
#define SW_SWAP_FAST_RING 32
struct dev_fast {
    /* the ring's entries: slices of one pinned and one device slab, all
     * of cap bytes (blob_get) */
    void *host[SW_SWAP_FAST_RING], *dev[SW_SWAP_FAST_RING], *ev[SW_SWAP_FAST_RING];
    void *slab_host, *slab_dev;
    size_t cap;
    uint64_t call[SW_SWAP_FAST_RING];
    uint64_t calls, done_upto;
    int next;
    void *part;
    size_t part_cap;
    void *cnt;                /* int32 merge counters, zero between launches */
    size_t cnt_cap;           /* bytes */
    int64_t slots;            /* decode CTAs resident at once (0: not asked yet) */
    int32_t *kv_scratch;      /* the call's kv_indptr */
    size_t kv_scratch_n;
    void *tev[2];             /* kernel_timing: around the launch */
    /* the table arena: every layer's page table (sw_swap_layer.tab_off),
     * int32 slots; regions given out in order, all dropped when it is full */
    int32_t *tab;
    int64_t tab_cap, tab_used; /* entries */
    /* the call's decode split before it goes into the ring */
    struct sw_decode_item *plan_items;
    struct sw_decode_merge *plan_merges;
    int64_t plan_cap, plan_mcap;
    /* the last plan's inputs (qo_indptr then kv_indptr, 2 x (batch + 1))
     * and outputs: a call with the same ones -- the layers of one decode
     * step -- takes it as it is (plan_n < 0: none) */
    int32_t *plan_in;
    size_t plan_in_cap;
    int32_t plan_batch;
    int64_t plan_n, plan_nm, plan_np;
    /* the words of a plan passed in the launch (tuning resident_inline;
     * allocated at its first use), and the calls that passed one */
    struct sw_decode_inline *inl;
    uint64_t inline_calls;
};

typedef struct sw_swap_dev {
    double spin_s;            /* the threads' polling time (tuning spin_us) */
    int32_t device, sms;
    int32_t ctas;             /* tile-kernel CTAs wanted per launch (tuning
                               * tile_ctas) */
    void *copy_stream, *own_stream;
    uint8_t *pool;
    size_t v_off;
    float *P;                 /* projection [D][R] */
    /* projected keys: entries of H * B * R floats */
    float *arena;
    int32_t arena_cap, arena_top;
    int32_t *free_list;
    int32_t nfree, free_cap;
    size_t entry_floats;
    /* staging of the reads, one per read-ahead ring position (nhstage =
     * prefetch + 1): a pinned host buffer of tile_blocks * 2H stripes the
     * store's tickets fill, and a device buffer the upload and the host-tier
     * gathers fill and the tile's scatter moves into its slots (ev_stage:
     * after that scatter) */
    uint8_t **stage;
    size_t stage_stride, stage_bytes;
    void **ev_stage;
    uint8_t **hstage;
    int32_t nhstage;
    /* offload upload: pinned host + device */
    uint16_t *up_host, *up_dev;
    void *ev_offload, *ev_done;
    int offload_pending, done_pending;
    /* per-call workspace (device) and descriptors (pinned host + device) */
    float *ws;
    size_t ws_floats;
    float *d_m, *d_l, *d_acc, *d_qp, *d_scores, *d_part, *d_f32;
    uint8_t *desc_host, *desc_dev;
    /* zc: this call's kernels read the descriptors from desc_host (pinned)
     * over PCIe, nothing uploaded (no upload queued behind landing copies in
     * the copy engine); on only when the call's first job lands blocks (a
     * call with nothing to land keeps the uploads: the all-resident tile
     * kernel read its descriptors at 37% of D2D over PCIe against 80%) */
    int zc;
    size_t desc_bytes, desc_used;
    float *scores_host;       /* pinned, desc_host's tail */
    /* per-call plan */
    int64_t hrows;
    size_t part_floats;
    /* host-tier gather: enabled (tuning host_gather, and a host tier
     * pinned by CUDA); the call's leased entries and gathered
     * stripes; the device's mismatch report and its pinned copy
     * ([0] count, [1..SW_SWAP_BAD_CAP] gather ids); raw-CRC offsets */
    int gather;
    uint32_t *lease_ent;
    size_t nlease, lease_cap;
    gather_rec *grec;
    size_t ngrec, grec_cap;
    uint32_t *d_bad, *h_bad;
    crc_cache crc;
    /* gathers issued ahead (with the gather): the two gather streams (alternating),
     * the compute stream's event after the last tile enqueued, each tile's
     * gather-done event by ring position (nhstage), and whether this call
     * issued any (the verdict then waits for the gather streams too) */
    /* per ring position: the tile's descriptors, built and uploaded on its
     * gather stream ahead of the gather (so its compute uploads nothing
     * while the gathers fill PCIe); set = 1 until the compute takes them */
    struct dev_pre {
        int set;
        size_t bo, fo, end;
        int32_t nfill;
        uint64_t kv_bytes;
    } *pre;
    int32_t gather_ctas; /* CTAs per gather launch (tuning gather_ctas; 0: one per stripe) */
    void *gstream[2];
    void **ev_g;
    int gnext, gissued;
    /* direct tiles (with the gather, swap_tile_direct.cu): a tile
     * whose missing blocks are all leased from the host tier is one kernel
     * that reads them from the tier, writes their slots and attends. In that
     * mode every tile of a pass (direct or staged) goes to one of two tile
     * streams in turn, its partials to one of SW_SWAP_NPART buffers in turn,
     * and its merge to the merge stream: tile j runs after tile j - 2 (same
     * stream: the victims tile j takes were pinned by no tile after j - 2,
     * plan_next), so a tile's PCIe reads overlap its neighbours'; merges run
     * in tile order on their own stream (one running state) after their
     * tile (ev_kdone), and a tile reuses a partial buffer once the merge
     * that read it ran (ev_mdone). ptile counts a pass's tiles; pissued:
     * the streams ran this call (the verdict waits for them). */
    int direct;
    /* direct mode merges with sw_cuda_swap_merge_wide, in two steps
     * (sw_cuda_swap_merge_split, into d_part2): one CTA per row and kv head
     * folding 512 chunks took ~100 us a tile on the H200 */
    float *d_part2;           /* the split merge's parts (workspace; NULL: none) */
    size_t part2_floats;      /* their room */
    int32_t land_groups;      /* a direct tile's launches at most, by landing launch
                               * (tuning land_groups, 1..8) */
    int32_t merge_chunks;     /* tuning merge_chunks (0: one merge a tile): a direct
                               * tile's partials merged in fixed ranges of this many
                               * chunks, each once launched (sw_swap_dev_launch_direct) */
    int32_t merged;           /* the tile's chunks merged so far (sw_swap_dev_launch_direct) */
    void *pstream[2], *mstream;
    void *ev_kdone[SW_SWAP_NPART], *ev_mdone[SW_SWAP_NPART], *ev_pass;
    float *d_partk[SW_SWAP_NPART];
    int32_t ptile;
    int pissued;
    /* the launcher (direct mode): a
     * thread that makes a direct tile's CUDA calls (descriptor upload,
     * kernel, events, merge), so the caller's thread only plans, leases and
     * writes descriptors; jobs in tile order, one at a time. Every other
     * CUDA call of a pass drains it first (sw_swap_launch_drain). The first failure
     * is kept with its message for the next drain. */
    struct launcher *ln;
    /* prelease (with the gather): a thread of the engine leases the host-tier copies of a
     * sequence's blocks that are missing when its order is built (all of
     * them misses when visited: a block is loaded once a pass) while the
     * caller's thread plans, so a tile's leases are mostly there when it is
     * planned (sw_swap_dev_lease_tile). */
    struct prelease *pl;
    /* kernel timing (sw_swap_config.kernel_timing) */
    int timing;
    void **tev;               /* start/stop pairs, reused from call to call */
    int32_t ntev, tev_cap, tev_used;
    /* timeline (tuning timeline, a diagnostic): timed events at the
     * start and end of every gather and tile compute of a call, with the
     * host's clock when each was enqueued; printed to stderr at the call's
     * end (sw_swap_tl_report). Events reused from call to call. */
    int tline;
    void **tl_ev;
    double *tl_host;
    char *tl_kind;
    int32_t *tl_tag;
    int32_t ntl, tl_nev, tl_cap, tl_calls;
    pthread_mutex_t tl_mu;    /* sw_swap_tl_mark's: the launcher thread marks too */
    /* host-only phase marks of the call (sw_swap_dev_tl_phase), reported
     * from its B mark: where the call's host time goes outside the span */
    double tl_ph[16];
    char tl_phk[16];
    int32_t tl_nph;
    struct dev_fast fast;     /* the resident path (dev_fast.c) */
} sw_swap_dev;

/* the descriptor space the kernels read: the device copy, or the pinned host
 * one itself (zc: this call's) */
#define DESC_K(d) ((d)->zc ? (d)->desc_host : (d)->desc_dev)

/* Uploads descriptor bytes [off, off + bytes) on `stream` for the kernels
 * after it; nothing to do when they read them in place (zc). */
static inline sw_status sw_swap_desc_up(const struct sw_swap_dev *d, size_t off, size_t bytes, void *stream)
{
    return d->zc ? SW_OK : sw_cuda_swap_copy(d->desc_dev + off, d->desc_host + off, bytes, stream);
}

/* ---- the launcher (dev_threads.c): a direct tile's CUDA calls, as jobs ---- */
typedef struct launch_job {
    sw_cuda_swap_direct_args A;
    void *cs;
    size_t bo, end;          /* descriptor bytes to upload */
    int kp;
    int kprev;               /* ev_kdone of the tile it must follow (-1: none) */
    int32_t tag;             /* timeline tag */
    void *land_ev;           /* its landed stripes' copies (NULL: none) */
    int first, last;         /* a tile's first launch (waits, uploads) / last (merge) */
    int ranged;              /* one of a tile's launches by landing group: its partials
                              * merged in fixed ranges (merge_chunks) */
} launch_job;

#define SW_SWAP_LAUNCH_RING 16

/* What the launcher runs for each job (dev_tile.c's sw_swap_dev_launch_direct). */
typedef sw_status (*sw_swap_launch_fn)(sw_swap_dev *d, const launch_job *j);

struct launcher {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv_push, cv_done;
    launch_job ring[SW_SWAP_LAUNCH_RING];
    int head, n, busy, stop;
    atomic_uint pushes;      /* pushes (and the stop) so far: polled between jobs */
    int nudge;               /* sw_swap_dev_nudge: wake up and poll (under mu) */
    double spin_s;           /* d->spin_s */
    sw_status err;
    char msg[512];
    sw_swap_dev *d;
    sw_swap_launch_fn run;  /* what a job runs */
};

/* ---- the prelease thread and its landing (dev_landing.c) ---- */
enum { PL_FREE = 0, PL_BUSY = 1, PL_DONE = 2, PL_MAIN = 3 };

struct prelease {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, job, running;      /* job: one posted; running: the thread has it */
    /* Between jobs the thread polls `posted` for spin_s seconds before it
     * sleeps on cv (tuning spin_us; 0: sleep at once),
     * as io_uring's SQPOLL thread does for sq_thread_idle: a condition
     * variable's wake took 40-70 us on the H200's VM and 150-280 us in about
     * one call of six, and the copy engine idled until the thread took over
     * from the caller's first blocks (docs/perf/swap.md). */
    atomic_uint posted;          /* 1 from a post until the thread takes it */
    double spin_s;
    int nudge;                   /* sw_swap_dev_nudge: wake up and poll (under mu) */
    /* the call's host-tier leases released by the thread after the call
     * (rel: the posted job is that release of rent[0..rn)): ~25 us of the
     * caller's on the H200. The next post, the verdict and the thread's stop
     * wait for it like for any job. */
    int rel;
    uint32_t *rent;
    size_t rn, rent_cap;
    atomic_int cancel;
    sw_store *store;
    int32_t H;
    /* the job: blocks n in visiting order (blk: their layer block indices;
     * keys made per store call: namespace ns, block base bbase, h * 2 + kind,
     * the order plan_tile lists a tile's keys in), their 2H leases, each
     * block's state (PL_*: the thread claims FREE -> BUSY -> DONE, the
     * caller's thread FREE -> MAIN, or waits out BUSY), and the position of
     * a layer block in the job (-1: not in it) */
    int32_t n, ncap, nblk, nblk_cap;
    int32_t *blk;
    uint64_t ns;
    uint32_t bbase;
    sw_store_lease *lease;
    /* held for each store call's claims, leases and landing queue (the
     * thread's, or the caller's first blocks: sw_swap_dev_prelease) */
    pthread_mutex_t lmu;
    int32_t land_first;         /* blocks the caller lands itself when it posts
                                 * (tuning land_first, rounded up to a multiple
                                 * of PL_CH; 0: none) */
    int32_t land_start;         /* blocks the job's first launch (tuning
                                 * land_start); later ones grow to land_blocks */
    atomic_int *state;
    int32_t *pos;
    /* one store call's keys and leases (PL_CH blocks) */
    sw_store_key *kb;
    sw_store_lease *lb;
    /* entries the thread leased, released by the verdict */
    uint32_t *ent;
    size_t nent, ent_cap;
    /* the job: its sequence and layer (a job posted again is kept) */
    const sw_swap_seq *q;
    int32_t layer;
    /* Kept leases (tuning kept_pct): a whole block's leases, taken for a
     * block of bsize tokens (never a sequence's last, partial block: each
     * step rewrites it), stay with its layer (sw_swap_layer.kept) after
     * the call instead of being released (kept_n stripes; none taken past
     * kept_lim: kept_max, less the store's other leases at the job's
     * post). A later call's visit reuses them after one retouch
     * (sw_store_host_retouch) while the store's count of leased
     * entries unmapped is still kept_unmaps and each stripe's generation
     * the block's. kept: the job layer's array, kept_blocks long (NULL:
     * none); stale: the count moved, or a retouch or a generation failed,
     * during the call: no kept lease is used or taken until every one is
     * released, at the first job of a call (fresh: no copy of the call
     * in flight yet). All under lmu while a job runs. */
    sw_store_lease *kept;
    int32_t kept_blocks, bsize;
    int64_t kept_n, kept_max, kept_lim;
    uint64_t kept_visits;        /* the call's (sw_swap_stats.kept_visits at its end) */
    uint64_t kept_unmaps;
    int kept_stale, fresh;
    double kept_idle_s, kept_scan_at; /* tuning kept_idle_ms; the last idle scan */
    uint32_t *rt;                /* one store call's kept entries (PL_CH blocks) */
    /* Landing (tuning landing_mb MiB of device memory; 0: none): the
     * thread also moves each block it leased whole into a device buffer by
     * copy-engine copies, one per run of adjacent host-tier entries, in
     * launches of land_start, then twice as many blocks up to land_blocks,
     * halving near the job's end, on its own stream, and records an event
     * per launch; a tile then reads those stripes from device memory (its
     * own gather or direct kernel, with the CRC check as before) after that
     * event. So PCIe streams from the call's start, not at the pace tiles
     * are planned. With the pool's residents scattered (~200 copies a step
     * in the bench) 38-43% of pinned H2D; with run-aware eviction (whole 8
     * MiB runs) and in-place descriptors (DESC_K: the uploads had queued
     * behind the copies) 60-66% at tile 512, and with the caller's first
     * blocks, the split merge and tiles launched by landing launch ~80%
     * (docs/swap.md, "Landing"). Room is handed out in job order
     * through the call (land_used stripes; never reused within a call, so
     * no reader of an earlier job sees it overwritten); a block past it is
     * read from the host tier as before. */
    int32_t device;
    uint8_t *land;
    size_t land_stride;
    int64_t land_cap, land_used, job_land0;
    int64_t land_max;           /* stripes the room may grow to (landing_max_mb) */
    int64_t call_need, last_need; /* stripes the jobs of this call / the last asked for */
    int32_t job_nland;
    /* per job block: its landing place in blocks from job_land0, past the
     * gaps the copies run through (land_gap blocks at most: tuning
     * land_gap_kb) */
    int32_t *loff;
    /* per job block taken over from the landing ahead: its first stripe's
     * place there (NULL: the job's room, at loff) */
    uint8_t **ladr;
    int32_t land_gap;
    void *lstream;
    void **lev;
    int32_t lev_cap, lev_used, chunk0;
    int32_t ljob_nev, ljob_ev;  /* the job's events (reserved, used) */
    int lcopied;                /* a gather went on lstream this call */
    int32_t *lev_of;            /* per job block: its landing event, -1 none */
    /* the landing's items (pinned host; one per landed stripe of the call:
     * nitem), those since the last flush from item0, and the claimed blocks
     * waiting for that flush */
    sw_cuda_swap_gather_item *items;
    int64_t nitem, item0;
    int32_t *pend;
    int32_t npend;
    int32_t land_blocks;        /* blocks a landing launch at most (tuning
                                 * land_blocks) */
    atomic_int want;            /* the caller waits for a queued block: launch now */
    crc_cache crc;              /* the thread's (the caller's is d->crc) */
    /* timeline (tuning timeline): per landing launch its event's
     * index, the host clock when recorded, its stripes and copies */
    int tline;
    int32_t lt_n;
    int32_t lt_ev[256], lt_items[256], lt_copies[256];
    double lt_mb[256]; /* MiB each launch copied (gaps read through included) */
    double lt_host[256];
    double lt_wake; /* the thread's clock when it took the call's first job (0: none) */
    /* Landing ahead (tuning land_ahead_mb; 0: none; dev_landing.c,
     * sw_swap_dev_land_ahead): once a call has planned its last tile, the
     * caller leases the first missing blocks of the call it expects next
     * (the same batch's first sequence, the layer that followed this one
     * last time: succ) and queues their copies on lstream behind the
     * call's own, into one half of its own buffer (the halves alternate:
     * the other may be read by this call's tiles). The copy engine then
     * runs on from one call into the next instead of idling through the
     * call's last kernels, its return and the next call's start. The next
     * call's job takes a block over (sw_swap_dev_prelease) while the
     * store's unmap count is a_unmaps and its stripes' generations are the
     * block's; the rest are released at that call's end. */
    uint8_t *a_land;            /* two halves of a_cap block places */
    int32_t a_cap, a_half;
    int32_t a_n;                /* blocks held ahead (0: none) */
    uint64_t a_ns;
    uint32_t a_bbase;
    int32_t a_layer;
    int32_t *a_blk, *a_loff, *a_ev_of;
    sw_store_lease *a_lease;    /* a_n x 2H (ptr NULL: the block is not held) */
    uint8_t *a_kept;            /* per block: its leases are its layer's kept ones
                                 * (retouched, not released with the rest) */
    sw_store_key *a_keys;       /* the blocks' keys without kept leases */
    sw_store_lease *a_tmp;      /* their leases, in key order */
    uint32_t *a_rt;             /* the kept entries retouched */
    int32_t a_nev;              /* launches made (events a_ev[0..a_nev)) */
    int a_quiet;                /* their copies known done (ahead_quiet) */
    void *a_ev[16];
    uint64_t a_unmaps;
    void *a_mark;               /* recorded on lstream before the ahead copies:
                                 * the end of the call's own (the verdict's sync) */
    int a_marked;
    int32_t *succ, prev_layer; /* per layer (of the model's) the layer attended next */
};

#define PL_CH 16   /* blocks a store call */
#define PL_LAND 64 /* blocks a landing launch at least (the job's last fewer) */

/* ---- dev_timeline.c ---- */
double sw_swap_tl_now(void);
/* Marks `kind` on `stream` (see the file); nothing unless the timeline is on. */
void sw_swap_tl_mark(sw_swap_dev *d, void *stream, char kind, int32_t tag);
/* Prints the call's marks once its work completed; returns the call's
 * number, -1 when nothing was printed. */
int sw_swap_tl_report(sw_swap_dev *d);

/* ---- dev_threads.c ---- */
/* Polling time of the engine's threads, seconds (tuning spin_us; at most 10 s). */
double sw_swap_spin_seconds(int64_t us);
/* Polls *a until it is no longer v, for at most spin_s seconds. */
void sw_swap_poll_change(atomic_uint *a, unsigned v, double spin_s);
/* Starts the launcher thread (d->ln), which runs `run` for each job. */
sw_status sw_swap_launcher_start(sw_swap_dev *d, sw_swap_launch_fn run);
/* Runs what it holds, then stops and frees it. */
void sw_swap_launcher_stop(sw_swap_dev *d);
sw_status sw_swap_launch_push(sw_swap_dev *d, const launch_job *j);
/* Waits until every pushed job ran; the first failure since the last
 * clearing drain (clear: forget it). */
sw_status sw_swap_launch_drain_x(sw_swap_dev *d, int clear);
sw_status sw_swap_launch_drain(sw_swap_dev *d);

/* ---- dev_pool.c ---- */
/* Waits for the previous attend call (its buffers are about to be reused). */
sw_status sw_swap_dev_wait_done(sw_swap_dev *d);

/* ---- dev_landing.c ---- */
sw_status sw_swap_prelease_start(sw_swap *s);
/* Waits for the posted job (cancelled first when `cancel`). */
void sw_swap_prelease_wait(struct prelease *P, int cancel);
/* Waits out the thread and releases its leases. */
void sw_swap_prelease_release(sw_swap *s);
/* Stops the thread and frees its state. */
void sw_swap_prelease_stop(sw_swap_dev *d);
/* The timeline's landing lines of call `call` (< 0: only dropped). */
void sw_swap_land_report(sw_swap_dev *d, int call);

/* ---- dev_verdict.c ---- */
/* Records a stripe the call's gathers write (for the verdict). */
sw_status sw_swap_dev_grec_grow(sw_swap_dev *d);
/* (inline: once per gathered stripe, ~200k a call at 32k tokens) */
static inline sw_status sw_swap_dev_grec_push(sw_swap_dev *d, const gather_rec *r)
{
    if (d->ngrec == d->grec_cap) {
        const sw_status st = sw_swap_dev_grec_grow(d);
        if (st != SW_OK)
            return st;
    }
    d->grec[d->ngrec++] = *r;
    return SW_OK;
}

/* ---- dev_tile.c ---- */
/* A direct tile's CUDA calls (the launcher's job). */
sw_status sw_swap_dev_launch_direct(sw_swap_dev *d, const launch_job *j);

/* ---- dev_fast.c ---- */
/* The decode kernel's arguments over the pool (its pages, strides and
 * heads) for q, o, lse and the options; the tables are the caller's. */
/* The resident tables' blob: [qo_indptr | kv_indptr | page_indptr |
 * table sources (batch entries, a graph's) | items | merges | item count |
 * page_indices (px entries)], 16-byte aligned regions. */
typedef struct sw_swap_dev_blob {
    size_t qo, kv, pi, src, items, merges, count, px, bytes;
} sw_swap_dev_blob;
sw_swap_dev_blob sw_swap_dev_blob_layout(int32_t batch, int64_t px, int64_t items,
                                         int64_t merges);
/* Bytes of the decode split's partial states for np parts: o first, lse
 * at *lse_off (256-byte aligned). */
size_t sw_swap_dev_parts_bytes(const sw_swap *s, int64_t np, size_t *lse_off);
/* kv_indptr of the batch's layer (SW_STATUS_UNSUPPORTED past INT32_MAX
 * keys). */
sw_status sw_swap_dev_kv_offsets(const sw_swap *s, int32_t layer, int32_t batch,
                                 sw_swap_seq *const *seqs, int32_t *kvp);
struct sw_cuda_paged_args;
void sw_swap_dev_decode_args(const sw_swap *s, const void *q, void *o, float *lse, int32_t causal,
                             float sm_scale, struct sw_cuda_paged_args *a);
void sw_swap_dev_fast_free(sw_swap_dev *d);
/* Regions in the table arena for the batch's unsettled layers that lack
 * one (or outgrew theirs); a full arena drops (unsettles) every layer's. */
sw_status sw_swap_dev_tab_regions(sw_swap *s, int32_t layer, int32_t batch,
                                  sw_swap_seq *const *seqs);
/* The blocks of the batch's unsettled layers (sw_swap_layer.res_ok 0). */
int64_t sw_swap_dev_unsettled(int32_t layer, int32_t batch, sw_swap_seq *const *seqs);
/* The batch's unsettled layers settled: their slots staged in px (pinned,
 * room for sw_swap_dev_unsettled entries, unchanged until the copies are
 * done; NULL when that is 0) and copied into their arena regions (sw_swap_dev_tab_regions
 * first) on `stream`. Every block of those layers must be resident. */
sw_status sw_swap_dev_settle(sw_swap *s, int32_t layer, int32_t batch, sw_swap_seq *const *seqs,
                             int32_t *px, void *stream);

#endif
