/* Device pool of the swap engine: slots in GPU memory, projected keys kept
 * on the GPU, staging buffers the store's device reads land in, and the
 * per-call work the tile loop of attend.c enqueues (scores, scatter, tile
 * kernel + merge, finalisation). Eviction and the tile plan are the host
 * pool's (pool.c, attend.c): only where bytes live differs.
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
 * copy-engine copies, or the gather kernel, an event per launch that the
 * tiles reading them wait for); and descriptors read in place from pinned
 * memory in a call that lands blocks (DESC_K). Without one (or with tuning
 * host_gather 0) tiles take the staged path: store tickets, upload,
 * scatter, tile kernel. */
#include "swap_internal.h"
#include "swap_cuda.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"
#include "core/sw_half.h"
#include "store/crc32c_gf2.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SW_SPIN_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define SW_SPIN_PAUSE() __asm__ __volatile__("isb" ::: "memory")
#else
#define SW_SPIN_PAUSE() ((void)0)
#endif

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
static uint32_t crc_raw_of(crc_cache *c, uint32_t crc, uint32_t len)
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
                               * chunks, each once launched (launch_direct) */
    int32_t merged;           /* the tile's chunks merged so far (launch_direct) */
    void *pstream[2], *mstream;
    void *ev_kdone[SW_SWAP_NPART], *ev_mdone[SW_SWAP_NPART], *ev_pass;
    float *d_partk[SW_SWAP_NPART];
    int32_t ptile;
    int pissued;
    /* the launcher (direct mode): a
     * thread that makes a direct tile's CUDA calls (descriptor upload,
     * kernel, events, merge), so the caller's thread only plans, leases and
     * writes descriptors; jobs in tile order, one at a time. Every other
     * CUDA call of a pass drains it first (launch_drain). The first failure
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
     * end (tl_report). Events reused from call to call. */
    int tline;
    void **tl_ev;
    double *tl_host;
    char *tl_kind;
    int32_t *tl_tag;
    int32_t ntl, tl_nev, tl_cap, tl_calls;
    pthread_mutex_t tl_mu;    /* tl_mark's: the launcher thread marks too */
    /* host-only phase marks of the call (sw_swap_dev_tl_phase), reported
     * from its B mark: where the call's host time goes outside the span */
    double tl_ph[16];
    char tl_phk[16];
    int32_t tl_nph;
} sw_swap_dev;

/* the descriptor space the kernels read: the device copy, or the pinned host
 * one itself (zc: this call's) */
#define DESC_K(d) ((d)->zc ? (d)->desc_host : (d)->desc_dev)

/* Uploads descriptor bytes [off, off + bytes) on `stream` for the kernels
 * after it; nothing to do when they read them in place (zc). */
static sw_status desc_up(const struct sw_swap_dev *d, size_t off, size_t bytes, void *stream)
{
    return d->zc ? SW_OK : sw_cuda_swap_copy(d->desc_dev + off, d->desc_host + off, bytes, stream);
}

static sw_status launcher_start(sw_swap_dev *d);
static void launcher_stop(sw_swap_dev *d);
struct prelease;
static void prelease_wait(struct prelease *P, int cancel);
static void prelease_stop_thread(sw_swap_dev *d);
static sw_status prelease_start_thread(sw_swap *s);
static void prelease_release(sw_swap *s);
static void prelease_free(struct prelease *P);
static void land_report(sw_swap_dev *d, int call);
static double spin_seconds(int64_t us);

static double tl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Marks `kind` on `stream`: B = the call's start (compute stream), g / G =
 * a gather's start / end (its stream), c / C = a tile's compute start / end
 * (descriptor upload .. merge), u = its descriptor upload done, M = a direct
 * tile's merge end (merge stream; tag: its partial buffer), Z = the
 * finalisation's end. tag: the tile's ring position (hbuf); for c,
 * 10 x hbuf + 1 if its gathers were issued ahead + 2 if it gathers on the
 * compute stream. Best effort: a failure only ends the marks. */
static void tl_mark_locked(sw_swap_dev *d, void *stream, char kind, int32_t tag)
{
    if (!d->tline)
        return; /* (turned off under the lock by another thread's failure) */
    if (d->ntl == d->tl_cap) {
        const int32_t nc = d->tl_cap ? 2 * d->tl_cap : 256;
        void **e = realloc(d->tl_ev, sizeof(void *) * (size_t)nc);
        if (e)
            d->tl_ev = e;
        double *h = realloc(d->tl_host, sizeof(double) * (size_t)nc);
        if (h)
            d->tl_host = h;
        char *k = realloc(d->tl_kind, (size_t)nc);
        if (k)
            d->tl_kind = k;
        int32_t *tg = realloc(d->tl_tag, sizeof(int32_t) * (size_t)nc);
        if (tg)
            d->tl_tag = tg;
        if (!e || !h || !k || !tg) {
            d->tline = 0;
            return;
        }
        d->tl_cap = nc;
    }
    if (d->ntl == d->tl_nev) {
        if (sw_cuda_swap_event_create(&d->tl_ev[d->tl_nev], 1) != SW_OK) {
            d->tline = 0;
            return;
        }
        d->tl_nev++;
    }
    if (sw_cuda_swap_event_record(d->tl_ev[d->ntl], stream) != SW_OK) {
        d->tline = 0;
        return;
    }
    d->tl_host[d->ntl] = tl_now();
    d->tl_kind[d->ntl] = kind;
    d->tl_tag[d->ntl] = tag;
    d->ntl++;
}

static void tl_mark(sw_swap_dev *d, void *stream, char kind, int32_t tag)
{
    if (!d->tline)
        return;
    pthread_mutex_lock(&d->tl_mu); /* the launcher thread marks too */
    tl_mark_locked(d, stream, kind, tag);
    pthread_mutex_unlock(&d->tl_mu);
}

void sw_swap_dev_tl_phase(sw_swap *s, char kind)
{
    sw_swap_dev *d = s->dev;
    if (!d || !d->tline)
        return;
    if (kind == 'A')
        d->tl_nph = 0; /* the call's first */
    if (d->tl_nph >= 16)
        return;
    d->tl_ph[d->tl_nph] = tl_now();
    d->tl_phk[d->tl_nph++] = kind;
}

/* After the call's work has completed: each mark's GPU time and host
 * enqueue time (ms from the call's B mark), and a summary: the span from B
 * to the last end, time with a gather running, with a compute running, with
 * either, and the GPU idle rest. */
static void tl_report(sw_swap_dev *d)
{
    if (!d->tline || d->ntl < 2 || d->tl_kind[0] != 'B') {
        d->ntl = 0;
        d->tl_nph = 0;
        land_report(d, -1); /* (nothing printed: its lines dropped) */
        return;
    }
    const int32_t n = d->ntl;
    float *g = malloc(sizeof(float) * (size_t)n);
    if (!g) {
        d->ntl = 0;
        return;
    }
    for (int32_t i = 0; i < n; i++)
        if (sw_cuda_swap_event_ms(&g[i], d->tl_ev[0], d->tl_ev[i]) != SW_OK)
            g[i] = -1.0f;
    const int call = d->tl_calls++;
    double span = 0;
    for (int32_t i = 0; i < n; i++) {
        fprintf(stderr, "swap timeline %d: %c %3d gpu %8.3f ms host %8.3f ms\n", call,
                d->tl_kind[i], d->tl_tag[i], g[i], 1e3 * (d->tl_host[i] - d->tl_host[0]));
        span = g[i] > span ? g[i] : span;
    }
    land_report(d, call);
    if (d->tl_nph > 0) {
        char line[16 * 16 + 1];
        size_t o = 0;
        for (int32_t i = 0; i < d->tl_nph && o + 16 < sizeof line; i++)
            o += (size_t)snprintf(line + o, sizeof line - o, " %c %.3f", d->tl_phk[i],
                                  1e3 * (d->tl_ph[i] - d->tl_host[0]));
        fprintf(stderr, "swap timeline %d: host phases (ms from B):%s\n", call, o ? line : "");
    }
    d->tl_nph = 0;
    /* busy time: a sweep over 1 us cells of the span (a diagnostic) */
    const int32_t cells = (int32_t)(span * 1000.0) + 1;
    unsigned char *busy = calloc((size_t)cells, 1);
    if (busy) {
        for (int32_t i = 0; i + 1 < n; i++) {
            const char k = d->tl_kind[i];
            const int32_t e = k == 'c' && d->tl_kind[i + 1] == 'u' ? i + 2 : i + 1;
            if ((k != 'g' && k != 'c') || e >= n || d->tl_kind[e] != (k == 'g' ? 'G' : 'C'))
                continue;
            const int32_t a = (int32_t)(g[i] * 1000.0), b = (int32_t)(g[e] * 1000.0);
            for (int32_t c = a < 0 ? 0 : a; c < b && c < cells; c++)
                busy[c] |= k == 'g' ? 1 : 2;
        }
        int32_t ng = 0, nc = 0, na = 0;
        for (int32_t c = 0; c < cells; c++) {
            ng += (busy[c] & 1) != 0;
            nc += (busy[c] & 2) != 0;
            na += busy[c] != 0;
        }
        fprintf(stderr, "swap timeline %d: span %.3f ms, gather running %.3f, compute running %.3f, "
                "either %.3f, idle %.3f ms\n", call, span, ng * 1e-3, nc * 1e-3, na * 1e-3,
                span - na * 1e-3);
        free(busy);
    }
    free(g);
    d->ntl = 0;
}

/* ------------------------------------------------------- heuristics -- */
int32_t sw_swap_dev_chunks(int32_t nblk, int32_t H, int32_t nrg, int32_t ctas)
{
    if (nblk < 1)
        return 1;
    const int64_t per = (int64_t)(H > 0 ? H : 1) * (nrg > 0 ? nrg : 1);
    const int64_t target = ctas > 0 ? ctas : 1;
    int64_t c = (target + per - 1) / per;
    const int64_t most = (nblk + 1) / 2; /* at least two blocks per CTA */
    if (c > most)
        c = most;
    if (c < 1)
        c = 1;
    return (int32_t)c;
}

size_t sw_swap_dev_part_floats(int32_t ql, int32_t nblk, int32_t H, int32_t G, int32_t D,
                               int32_t ctas)
{
    /* Fewer row groups mean more block ranges: the product is what the
     * partials hold, so it is sized per sequence, never from the longest
     * one alone (a short sequence next to a long one needed more). The
     * chunk count never decreases with nblk, so the tile size bounds it. */
    if (ql <= 0)
        return 0;
    const int32_t nrg = (int32_t)(((int64_t)ql * G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG);
    const int32_t nch = sw_swap_dev_chunks(nblk, H, nrg, ctas);
    return (size_t)nch * (size_t)H * (size_t)nrg * SW_CUDA_SWAP_RG * (size_t)(D + 2);
}

int sw_swap_dev_layout(uint64_t host_bytes, uint64_t file_bytes, int prev)
{
    if (host_bytes == 0 && file_bytes == 0)
        return prev;
    return host_bytes >= file_bytes ? 0 : 1;
}

/* ---------------------------------------------------------- lifetime -- */
sw_status sw_swap_dev_enter(sw_swap *s)
{
    return sw_cuda_set_device(s->dev->device);
}

void sw_swap_dev_destroy(sw_swap *s)
{
    sw_swap_dev *d = s->dev;
    if (!d)
        return;
    launcher_stop(d); /* runs what it holds first */
    prelease_wait(d->pl, 1);
    if (sw_cuda_set_device(d->device) == SW_OK) {
        if (d->ev_done)
            (void)sw_cuda_swap_event_sync(d->ev_done);
        if (d->own_stream)
            (void)sw_cuda_stream_sync(d->own_stream);
        if (d->copy_stream)
            (void)sw_cuda_stream_sync(d->copy_stream);
    }
    for (int i = 0; i < 2; i++) {
        if (d->gstream[i] && sw_cuda_set_device(d->device) == SW_OK)
            (void)sw_cuda_stream_sync(d->gstream[i]);
        if (d->pstream[i] && sw_cuda_set_device(d->device) == SW_OK)
            (void)sw_cuda_stream_sync(d->pstream[i]);
    }
    if (d->mstream && sw_cuda_set_device(d->device) == SW_OK)
        (void)sw_cuda_stream_sync(d->mstream);
    for (int32_t i = 0; i < d->ntev; i++)
        sw_cuda_swap_event_destroy(d->tev[i]);
    free(d->tev);
    for (int32_t i = 0; i < d->tl_nev; i++)
        sw_cuda_swap_event_destroy(d->tl_ev[i]);
    free(d->tl_ev);
    free(d->tl_host);
    free(d->tl_kind);
    free(d->tl_tag);
    for (int32_t i = 0; d->ev_g && i < d->nhstage; i++)
        sw_cuda_swap_event_destroy(d->ev_g[i]);
    free(d->ev_g);
    free(d->pre);
    for (int i = 0; i < 2; i++) {
        sw_cuda_swap_stream_destroy(d->gstream[i]);
        sw_cuda_swap_stream_destroy(d->pstream[i]);
    }
    sw_cuda_swap_stream_destroy(d->mstream);
    for (int i = 0; i < SW_SWAP_NPART; i++) {
        sw_cuda_swap_event_destroy(d->ev_kdone[i]);
        sw_cuda_swap_event_destroy(d->ev_mdone[i]);
    }
    sw_cuda_swap_event_destroy(d->ev_pass);
    /* every call releases its leases; this is for a call that never ended
     * (after the streams' syncs above: no kernel reads them any more) */
    if (d->nlease)
        sw_store_host_release_entries(s->store, d->nlease, d->lease_ent);
    prelease_release(s);
    prelease_stop_thread(d);
    free(d->lease_ent);
    free(d->grec);
    sw_cuda_swap_free(d->d_bad);
    sw_cuda_host_free(d->h_bad);
    for (int32_t i = 0; d->stage && i < d->nhstage; i++) {
        sw_cuda_swap_event_destroy(d->ev_stage[i]);
        sw_cuda_swap_free(d->stage[i]);
    }
    free(d->stage);
    free(d->ev_stage);
    for (int32_t i = 0; d->hstage && i < d->nhstage; i++)
        sw_cuda_host_free(d->hstage[i]);
    free(d->hstage);
    sw_cuda_swap_event_destroy(d->ev_offload);
    sw_cuda_swap_event_destroy(d->ev_done);
    sw_cuda_swap_free(d->pool);
    sw_cuda_swap_free(d->P);
    sw_cuda_swap_free(d->arena);
    sw_cuda_swap_free(d->up_dev);
    sw_cuda_swap_free(d->ws);
    sw_cuda_swap_free(d->desc_dev);
    sw_cuda_host_free(d->up_host);
    sw_cuda_host_free(d->desc_host);
    sw_cuda_swap_stream_destroy(d->copy_stream);
    sw_cuda_swap_stream_destroy(d->own_stream);
    free(d->free_list);
    pthread_mutex_destroy(&d->tl_mu);
    free(d);
    s->dev = NULL;
}

sw_status sw_swap_dev_create(sw_swap *s)
{
    const int32_t H = s->m.num_kv_heads, B = s->m.block_size, D = s->m.head_dim;
    const int32_t R = s->c.predictor_rank;
    if (!sw_cuda_swap_head_dim_ok(D))
        return sw_fail(SW_STATUS_UNSUPPORTED, "device pool: head_dim %d has no tile kernel "
                       "(64, 128 or 256; the host pool takes any)", D);
    sw_swap_dev *d = calloc(1, sizeof *d);
    if (!d)
        return sw_fail(SW_STATUS_NO_MEMORY, "device pool state");
    s->dev = d;
    d->device = s->c.device;
    d->timing = s->c.kernel_timing != 0;
    d->tline = s->tune.timeline > 0;
    d->spin_s = spin_seconds(s->tune.spin_us);
    pthread_mutex_init(&d->tl_mu, NULL);
    SW_TRY(sw_cuda_set_device(d->device));
    sw_cuda_swap_preload(D); /* no kernel loaded lazily in the middle of a call */
    SW_TRY(sw_cuda_swap_sm_count(d->device, &d->sms));
    {
        const int64_t c = s->tune.tile_ctas;
        d->ctas = c < d->sms ? d->sms : c > 32 * (int64_t)d->sms ? 32 * d->sms : (int32_t)c;
    }
    SW_TRY(sw_cuda_swap_stream_create(&d->copy_stream));
    SW_TRY(sw_cuda_swap_stream_create(&d->own_stream));
    SW_TRY(sw_cuda_swap_event_create(&d->ev_offload, 0));
    SW_TRY(sw_cuda_swap_event_create(&d->ev_done, 0));
    d->v_off = (size_t)H * s->stripe_elems * 2;
    SW_TRY(sw_cuda_swap_alloc((void **)&d->pool, s->slot_bytes * (size_t)s->c.resident_blocks));
    SW_TRY(sw_cuda_swap_alloc((void **)&d->P, sizeof(float) * (size_t)D * (size_t)R));
    SW_TRY(sw_cuda_swap_copy(d->P, s->proj, sizeof(float) * (size_t)D * (size_t)R,
                             d->own_stream));
    /* Staging: stripes at the store's extent stride, so that runs of
     * stripes contiguous in the store's buffers are contiguous here too and
     * move in one copy. */
    sw_store_stats sst;
    memset(&sst, 0, sizeof sst);
    sst.struct_size = sizeof sst;
    SW_TRY(sw_store_get_stats(s->store, &sst));
    d->stage_stride = sst.extent_bytes ? (size_t)sst.extent_bytes : s->stripe_elems * 2;
    if (d->stage_stride < s->stripe_elems * 2)
        d->stage_stride = sw_align_up(s->stripe_elems * 2, 4096);
    d->stage_stride = sw_align_up(d->stage_stride, 16);
    const size_t sb = (size_t)s->tile_blocks * 2 * (size_t)H * d->stage_stride;
    d->stage_bytes = sb;
    d->hstage = calloc((size_t)s->prefetch + 1, sizeof *d->hstage);
    d->stage = calloc((size_t)s->prefetch + 1, sizeof *d->stage);
    d->ev_stage = calloc((size_t)s->prefetch + 1, sizeof *d->ev_stage);
    if (!d->hstage || !d->stage || !d->ev_stage)
        return sw_fail(SW_STATUS_NO_MEMORY, "device pool: staging tables");
    d->nhstage = s->prefetch + 1;
    for (int32_t i = 0; i < d->nhstage; i++) {
        SW_TRY(sw_cuda_host_alloc((void **)&d->hstage[i], sb));
        SW_TRY(sw_cuda_swap_alloc((void **)&d->stage[i], sb));
        SW_TRY(sw_cuda_swap_event_create(&d->ev_stage[i], 0));
    }
    const size_t up = (size_t)H * s->stripe_elems * 2;
    SW_TRY(sw_cuda_host_alloc((void **)&d->up_host, up));
    SW_TRY(sw_cuda_swap_alloc((void **)&d->up_dev, up));
    d->entry_floats = (size_t)H * (size_t)B * (size_t)R;
    d->gather = s->tune.host_gather != 0 && sw_store_host_mapped(s->store);
    const size_t bad_bytes = sizeof(uint32_t) * (1 + SW_SWAP_BAD_CAP);
    SW_TRY(sw_cuda_swap_alloc((void **)&d->d_bad, bad_bytes));
    SW_TRY(sw_cuda_host_alloc((void **)&d->h_bad, bad_bytes));
    SW_TRY(sw_cuda_memset_async(d->d_bad, 0, bad_bytes, d->own_stream));
    {
        /* ~0.5 MiB in flight still fills PCIe, and fewer outstanding reads
         * leave the other PCIe traffic less queued */
        const int64_t g = s->tune.gather_ctas;
        d->gather_ctas = g > 0 && g <= 64 * (int64_t)d->sms ? (int32_t)g : 0;
    }
    if (d->gather) {
        for (int i = 0; i < 2; i++)
            SW_TRY(sw_cuda_swap_stream_create(&d->gstream[i]));
        d->ev_g = calloc((size_t)d->nhstage, sizeof *d->ev_g);
        d->pre = calloc((size_t)d->nhstage, sizeof *d->pre);
        if (!d->ev_g || !d->pre)
            return sw_fail(SW_STATUS_NO_MEMORY, "device pool: gather events");
        for (int32_t i = 0; i < d->nhstage; i++)
            SW_TRY(sw_cuda_swap_event_create(&d->ev_g[i], 0));
    }
    if (d->gather)
        SW_TRY(prelease_start_thread(s));
    /* direct tiles (with the landing they are the fastest host-tier path
     * measured; alone, with the wait for tile j - 3 that correctness needs,
     * they were below the staged path, docs/perf/swap.md) and their wide
     * merge (identical results) */
    d->direct = d->gather;
    {
        const int64_t g = s->tune.land_groups;
        d->land_groups = g < 1 ? 1 : g > SW_SWAP_LAND_GROUPS_MAX ? SW_SWAP_LAND_GROUPS_MAX
                                                                 : (int32_t)g;
    }
    {
        const int64_t mc = s->tune.merge_chunks;
        d->merge_chunks = mc > 0 && mc <= (1 << 20) ? (int32_t)mc : 0;
    }
    if (d->direct) {
        for (int i = 0; i < 2; i++)
            SW_TRY(sw_cuda_swap_stream_create(&d->pstream[i]));
        SW_TRY(sw_cuda_swap_stream_create(&d->mstream));
        for (int i = 0; i < SW_SWAP_NPART; i++) {
            SW_TRY(sw_cuda_swap_event_create(&d->ev_kdone[i], 0));
            SW_TRY(sw_cuda_swap_event_create(&d->ev_mdone[i], 0));
        }
        SW_TRY(sw_cuda_swap_event_create(&d->ev_pass, 0));
        SW_TRY(launcher_start(d));
    }
    return sw_cuda_stream_sync(d->own_stream);
}

/* ------------------------------------------------------------ launcher -- */
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
};

static sw_status merge_behind(sw_swap_dev *d, const sw_cuda_swap_tile_args *a, void *cs, int kp);
static sw_status timing_event(sw_swap_dev *d, int32_t i, void **ev);

/* How long the engine's threads (launcher, prelease) poll for work before
 * they sleep (tuning spin_us; 0: never poll; at most 10 s). */
static double spin_seconds(int64_t us)
{
    if (us > 10000000)
        us = 10000000;
    return us > 0 ? 1e-6 * (double)us : 0.0;
}

/* Polls *a until it is no longer v, for at most spin_s seconds (the engine's
 * threads between jobs, before they sleep on their condition variable). */
static void poll_change(atomic_uint *a, unsigned v, double spin_s)
{
    const double end = tl_now() + spin_s;
    for (uint32_t k = 1; atomic_load_explicit(a, memory_order_acquire) == v; k++) {
        SW_SPIN_PAUSE();
        if ((k & 63) == 0 && tl_now() > end)
            break;
    }
}

/* A direct tile's CUDA calls (launcher thread, or the caller's without it). */
static sw_status launch_direct(sw_swap_dev *d, const launch_job *j)
{
    /* its partial buffer, once the merge that read it last ran; and after
     * the tile on the other stream whose slots it may take (prev_tile) */
    if (j->first) {
        SW_TRY(sw_cuda_swap_stream_wait(j->cs, d->ev_mdone[j->kp]));
        if (j->kprev >= 0)
            SW_TRY(sw_cuda_swap_stream_wait(j->cs, d->ev_kdone[j->kprev]));
    }
    if (j->land_ev) /* its landed stripes' copies */
        SW_TRY(sw_cuda_swap_stream_wait(j->cs, j->land_ev));
    tl_mark(d, j->cs, 'c', j->tag);
    if (j->first)
        SW_TRY(desc_up(d, j->bo, j->end - j->bo, j->cs));
    void *e0 = NULL, *e1 = NULL;
    if (d->timing) {
        SW_TRY(timing_event(d, 2 * d->tev_used, &e0));
        SW_TRY(timing_event(d, 2 * d->tev_used + 1, &e1));
        SW_TRY(sw_cuda_swap_event_record(e0, j->cs));
    }
    SW_TRY(sw_cuda_swap_tile_direct(&j->A, j->cs));
    if (d->timing) {
        SW_TRY(sw_cuda_swap_event_record(e1, j->cs));
        d->tev_used++;
    }
    tl_mark(d, j->cs, 'C', j->tag / 10);
    if (d->merge_chunks <= 0 || !j->ranged) /* a whole tile: one merge */
        return j->last ? merge_behind(d, &j->A.t, j->cs, j->kp) : SW_OK;
    /* The tile's chunks merged in fixed ranges of merge_chunks, each behind
     * the first launch whose chunks complete it (the last range behind the
     * last launch): the call's last launch then leaves a merge of at most
     * one range after the last copy, not one of the tile's every chunk (~30
     * us on the H200), and the fold order depends on the tile
     * alone, not on where its landing launches fell (which timing decides).
     * Launches of a tile come in chunk order, on one stream. */
    const int32_t nchunks = j->A.t.nchunks;
    const int32_t covered =
        j->last ? nchunks : j->A.c0 + (j->A.nch > 0 ? j->A.nch : nchunks - j->A.c0);
    if (j->first)
        d->merged = 0;
    while (d->merged < covered) {
        int32_t e = d->merged + d->merge_chunks;
        if (e > covered) {
            if (!j->last)
                break; /* a range the next launch completes */
            e = covered;
        }
        sw_cuda_swap_tile_args g = j->A.t;
        g.part += (size_t)d->merged * (size_t)g.H * (size_t)g.nrg * SW_CUDA_SWAP_RG *
                  (size_t)(g.D + 2);
        g.nchunks = e - d->merged;
        SW_TRY(merge_behind(d, &g, j->cs, j->kp));
        d->merged = e;
    }
    return SW_OK;
}

static void *launcher_main(void *arg)
{
    struct launcher *L = arg;
    (void)sw_cuda_set_device(L->d->device);
    pthread_mutex_lock(&L->mu);
    for (;;) {
        if (L->n == 0 && !L->stop && L->spin_s > 0.0) {
            /* poll before sleeping (a push counts under mu); a nudge made
             * while the thread worked is this poll */
            L->nudge = 0;
            const unsigned seen = atomic_load_explicit(&L->pushes, memory_order_relaxed);
            pthread_mutex_unlock(&L->mu);
            poll_change(&L->pushes, seen, L->spin_s);
            pthread_mutex_lock(&L->mu);
        }
        while (L->n == 0 && !L->stop && !L->nudge)
            pthread_cond_wait(&L->cv_push, &L->mu);
        if (L->n == 0 && !L->stop) {
            L->nudge = 0; /* woken ahead of a push: poll for it */
            continue;
        }
        L->nudge = 0;
        if (L->n == 0)
            break; /* stop, nothing left */
        const launch_job j = L->ring[L->head];
        const int skip = L->err != SW_OK; /* after a failure the rest of the pass is dropped */
        L->busy = 1;
        pthread_mutex_unlock(&L->mu);
        const sw_status st = skip ? SW_OK : launch_direct(L->d, &j);
        pthread_mutex_lock(&L->mu);
        if (st != SW_OK && L->err == SW_OK) {
            L->err = st;
            snprintf(L->msg, sizeof L->msg, "%s", sw_last_error());
        }
        L->head = (L->head + 1) % SW_SWAP_LAUNCH_RING;
        L->n--;
        L->busy = 0;
        pthread_cond_broadcast(&L->cv_done);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

static sw_status launch_push(sw_swap_dev *d, const launch_job *j)
{
    struct launcher *L = d->ln;
    if (!L)
        return launch_direct(d, j);
    pthread_mutex_lock(&L->mu);
    while (L->n == SW_SWAP_LAUNCH_RING)
        pthread_cond_wait(&L->cv_done, &L->mu);
    L->ring[(L->head + L->n) % SW_SWAP_LAUNCH_RING] = *j;
    L->n++;
    atomic_fetch_add_explicit(&L->pushes, 1u, memory_order_release);
    pthread_cond_signal(&L->cv_push);
    pthread_mutex_unlock(&L->mu);
    return SW_OK;
}

/* Waits until every pushed job ran; the first failure since the last
 * clearing drain (the verdict's: a failed job leaves its tile's slots
 * unwritten, so the verdict drops every slot the call gathered). */
static sw_status launch_drain_x(sw_swap_dev *d, int clear)
{
    struct launcher *L = d->ln;
    if (!L)
        return SW_OK;
    pthread_mutex_lock(&L->mu);
    while (L->n > 0 || L->busy)
        pthread_cond_wait(&L->cv_done, &L->mu);
    const sw_status st = L->err;
    char msg[512];
    memcpy(msg, L->msg, sizeof msg);
    if (clear)
        L->err = SW_OK;
    pthread_mutex_unlock(&L->mu);
    return st == SW_OK ? SW_OK : sw_fail(st, "%s", msg);
}

static sw_status launch_drain(sw_swap_dev *d)
{
    return launch_drain_x(d, 0);
}

static sw_status launcher_start(sw_swap_dev *d)
{
    struct launcher *L = calloc(1, sizeof *L);
    if (!L)
        return sw_fail(SW_STATUS_NO_MEMORY, "device pool: launcher");
    L->d = d;
    atomic_init(&L->pushes, 0u);
    L->spin_s = d->spin_s;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv_push, NULL);
    pthread_cond_init(&L->cv_done, NULL);
    if (pthread_create(&L->th, NULL, launcher_main, L) != 0) {
        pthread_mutex_destroy(&L->mu);
        pthread_cond_destroy(&L->cv_push);
        pthread_cond_destroy(&L->cv_done);
        free(L);
        return sw_fail(SW_STATUS_NO_MEMORY, "device pool: launcher thread");
    }
    d->ln = L;
    return SW_OK;
}

static void launcher_stop(sw_swap_dev *d)
{
    struct launcher *L = d->ln;
    if (!L)
        return;
    pthread_mutex_lock(&L->mu);
    L->stop = 1;
    atomic_fetch_add_explicit(&L->pushes, 1u, memory_order_release);
    pthread_cond_signal(&L->cv_push);
    pthread_mutex_unlock(&L->mu);
    pthread_join(L->th, NULL);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv_push);
    pthread_cond_destroy(&L->cv_done);
    free(L);
    d->ln = NULL;
}

/* Waits for the previous attend call (its buffers are about to be reused). */
static sw_status wait_done(sw_swap_dev *d)
{
    if (!d->done_pending)
        return SW_OK;
    SW_TRY(sw_cuda_swap_event_sync(d->ev_done));
    d->done_pending = 0;
    return SW_OK;
}

/* ------------------------------------------------------------- arena -- */
sw_status sw_swap_dev_entry(sw_swap *s, sw_swap_blk *e)
{
    sw_swap_dev *d = s->dev;
    if (e->dproj >= 0)
        return SW_OK;
    if (d->nfree > 0) {
        e->dproj = d->free_list[--d->nfree];
        return SW_OK;
    }
    if (d->arena_top == d->arena_cap) {
        /* Grow: everything that reads or writes the arena must be done. */
        const int32_t nc = d->arena_cap ? 2 * d->arena_cap : 256;
        float *na = NULL;
        SW_TRY(sw_cuda_swap_alloc((void **)&na, sizeof(float) * d->entry_floats * (size_t)nc));
        sw_status st = wait_done(d);
        if (st == SW_OK)
            st = sw_cuda_stream_sync(d->own_stream);
        if (st == SW_OK && d->arena_top)
            st = sw_cuda_swap_copy(na, d->arena,
                                   sizeof(float) * d->entry_floats * (size_t)d->arena_top,
                                   d->own_stream);
        if (st == SW_OK)
            st = sw_cuda_stream_sync(d->own_stream);
        if (st != SW_OK) {
            sw_cuda_swap_free(na);
            return st;
        }
        sw_cuda_swap_free(d->arena);
        d->arena = na;
        d->arena_cap = nc;
    }
    e->dproj = d->arena_top++;
    return SW_OK;
}

void sw_swap_dev_entry_free(sw_swap *s, sw_swap_blk *e)
{
    sw_swap_dev *d = s->dev;
    if (!d || e->dproj < 0)
        return;
    if (d->nfree == d->free_cap) {
        int32_t nc = d->free_cap ? 2 * d->free_cap : 256;
        int32_t *n = realloc(d->free_list, sizeof(int32_t) * (size_t)nc);
        if (!n) {
            e->dproj = -1; /* leaked until destroy: never reused, never wrong */
            return;
        }
        d->free_list = n;
        d->free_cap = nc;
    }
    d->free_list[d->nfree++] = e->dproj;
    e->dproj = -1;
}

sw_status sw_swap_dev_project_block(sw_swap *s, const sw_swap_blk *e, const uint16_t *k)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim, R = s->c.predictor_rank;
    const size_t bytes = (size_t)H * s->stripe_elems * 2;
    /* The upload buffer is reused: the last projection must have read it;
     * the arena entry may be read by the last attend's scoring. */
    if (d->offload_pending) {
        SW_TRY(sw_cuda_swap_event_sync(d->ev_offload));
        d->offload_pending = 0;
    }
    if (d->done_pending)
        SW_TRY(sw_cuda_swap_stream_wait(d->own_stream, d->ev_done));
    memcpy(d->up_host, k, bytes);
    SW_TRY(sw_cuda_swap_copy(d->up_dev, d->up_host, bytes, d->own_stream));
    /* Every row, padding included: only valid tokens are ever scored. */
    SW_TRY(sw_cuda_swap_project(d->P, D, R, d->up_dev, (int64_t)H * s->m.block_size,
                                d->arena + (size_t)e->dproj * d->entry_floats, d->own_stream));
    SW_TRY(sw_cuda_swap_event_record(d->ev_offload, d->own_stream));
    d->offload_pending = 1;
    return SW_OK;
}

/* ----------------------------------------------------------- staging -- */
size_t sw_swap_dev_stage_stride(const sw_swap *s)
{
    return s->dev->stage_stride;
}

void *sw_swap_dev_hstage_ptr(const sw_swap *s, int hbuf, int32_t m, int32_t h, int kind)
{
    const sw_swap_dev *d = s->dev;
    const size_t H = (size_t)s->m.num_kv_heads;
    const size_t idx = ((size_t)m * H + (size_t)h) * 2 + (size_t)kind;
    return d->hstage[hbuf] + idx * d->stage_stride;
}

sw_status sw_swap_dev_upload(sw_swap *s, int hbuf, int buf, int32_t nmiss,
                             const sw_store_lease *lease)
{
    sw_swap_dev *d = s->dev;
    const size_t nstripes = (size_t)nmiss * 2 * (size_t)s->m.num_kv_heads;
    const size_t bytes = nstripes * d->stage_stride;
    if (hbuf < 0 || hbuf >= d->nhstage || buf < 0 || buf >= d->nhstage || bytes > d->stage_bytes)
        return sw_fail(SW_STATUS_INTERNAL, "device pool: upload of %d blocks from host staging "
                       "%d to %d", nmiss, hbuf, buf);
    /* Only the runs of stripes the ticket read (leased ones are gathered):
     * one copy when none is leased, none when all are. */
    int copied = 0;
    for (size_t i = 0; i < nstripes;) {
        if (lease && lease[i].ptr) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < nstripes && !(lease && lease[j].ptr))
            j++;
        if (!copied) {
            SW_TRY(launch_drain(d));
            SW_TRY(sw_cuda_swap_stream_wait(d->copy_stream, d->ev_stage[buf]));
        }
        copied = 1;
        SW_TRY(sw_cuda_swap_copy(d->stage[buf] + i * d->stage_stride,
                                 d->hstage[hbuf] + i * d->stage_stride,
                                 (j - i) * d->stage_stride, d->copy_stream));
        i = j;
    }
    return copied ? sw_cuda_stream_sync(d->copy_stream) : SW_OK;
}

/* ------------------------------------------------------------ gather -- */
int sw_swap_dev_gathers(const sw_swap *s)
{
    return s->dev && s->dev->gather;
}

/* ------------------------------------------------------------ prelease -- */
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
    int32_t job_nland;
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
    double lt_host[256];
    double lt_wake; /* the thread's clock when it took the call's first job (0: none) */
};

#define PL_CH 16   /* blocks a store call */
#define PL_LAND 64 /* blocks a landing launch at least (the job's last fewer) */

/* Launches the landing copies of the pending blocks (their items since the
 * last flush), records its event and hands the blocks over (DONE), each
 * with that event, or with none (-1: its tiles read the host tier) when a
 * CUDA call failed or `launch` is 0 (a cancelled job: no tile reads them). */
static void land_flush(struct prelease *P, int launch)
{
    /* (a request made while the block was in a store call is dropped here
     * when nothing is queued: the block then waits for the next launch by
     * size; keeping it made the launches at the job's end one store call
     * each with the GPU faked, not measured on a GPU) */
    atomic_store(&P->want, 0);
    if (P->npend == 0)
        return;
    int32_t ev = -1;
    if (launch && P->ljob_ev < P->ljob_nev) {
        void *e = P->lev[P->chunk0 + P->ljob_ev];
        sw_status st = SW_OK;
        int32_t ncopy = 0;
        {
            /* copy engine: one copy per run of stripes adjacent both in the
             * host tier and in the landing (whole entries); ~3 us each
             * besides its bytes, so made for long runs (run-aware eviction).
             * A tile's own read from the landing checks the CRC. */
            const sw_cuda_swap_gather_item *g = P->items + P->item0;
            const int64_t n = P->nitem - P->item0;
            const uint64_t stb = P->land_stride;
            for (int64_t k = 0; k < n && st == SW_OK;) {
                int64_t r = k + 1;
                while (r < n && (const uint8_t *)g[r].src == (const uint8_t *)g[r - 1].src + stb &&
                       g[r].dst == g[r - 1].dst + stb)
                    r++;
                st = sw_cuda_swap_copy(P->land + g[k].dst, g[k].src, (size_t)(r - k) * stb,
                                       P->lstream);
                ncopy++;
                k = r;
            }
        }
        if (st == SW_OK && sw_cuda_swap_event_record(e, P->lstream) == SW_OK) {
            ev = P->chunk0 + P->ljob_ev++;
            if (P->tline && P->lt_n < 256) {
                P->lt_ev[P->lt_n] = ev;
                P->lt_host[P->lt_n] = tl_now();
                P->lt_items[P->lt_n] = (int32_t)(P->nitem - P->item0);
                P->lt_copies[P->lt_n] = ncopy;
                P->lt_n++;
            }
        }
        P->lcopied = 1;
    }
    P->item0 = P->nitem;
    for (int32_t k = 0; k < P->npend; k++) {
        P->lev_of[P->pend[k]] = ev;
        atomic_store_explicit(&P->state[P->pend[k]], PL_DONE, memory_order_release);
    }
    P->npend = 0;
}

/* Queues block i (claimed, its leases lb[0..2H) taken) for the landing
 * when it is wholly leased and has landing room (and the thread's
 * device is set: land_ok); 0 when it is not (the caller hands it over
 * now). */
static int land_queue(struct prelease *P, int land_ok, int32_t i, const sw_store_lease *lb)
{
    const size_t spb = 2 * (size_t)P->H, st = P->land_stride;
    if (!land_ok || !P->land || i >= P->job_nland)
        return 0;
    for (size_t x = 0; x < spb; x++)
        if (!lb[x].ptr || lb[x].length > st)
            return 0;
    for (size_t x = 0; x < spb; x++) {
        sw_cuda_swap_gather_item *g = &P->items[P->nitem++];
        g->src = lb[x].ptr;
        g->dst = ((uint64_t)P->job_land0 + (uint64_t)i * spb + x) * st;
        g->length = lb[x].length;
        g->crc_raw = crc_raw_of(&P->crc, lb[x].crc, lb[x].length);
        g->id = 0;
        g->pad = 0;
    }
    P->pend[P->npend++] = i;
    return 1;
}

/* Blocks a landing launch holds before it goes: the job's first land_start,
 * then twice the previous launch's up to land_blocks, so that the copies
 * start early and the thread's leases stay ahead of them. */
static int32_t land_next(const struct prelease *P)
{
    if (P->ljob_ev == 0)
        return P->land_start;
    if (P->ljob_ev >= 8)
        return P->land_blocks;
    const int32_t g = P->land_start << P->ljob_ev;
    return g < P->land_blocks ? g : P->land_blocks;
}

/* Claims, leases and queues for landing the job's blocks [0, limit) not
 * claimed yet, a store call of PL_CH blocks at a time under lmu; at the end
 * launches what is queued (cancelled: hands it over unlaunched). The thread
 * runs it over the whole job; the caller over its first blocks when it
 * posts. */
static void prelease_run(struct prelease *P, int land_ok, int32_t limit, int caller)
{
    const size_t spb = 2 * (size_t)P->H;
    sw_store_key *kb = P->kb;
    sw_store_lease *lb = P->lb;
    int32_t mine[PL_CH];
    const int32_t n = limit < P->n ? limit : P->n;
    for (int32_t i0 = 0; i0 < n && !atomic_load(&P->cancel); i0 += PL_CH) {
        const int32_t i1 = n - i0 < PL_CH ? n : i0 + PL_CH;
        int32_t nm = 0;
        pthread_mutex_lock(&P->lmu);
        for (int32_t i = i0; i < i1; i++) {
            int expect = PL_FREE;
            if (atomic_compare_exchange_strong(&P->state[i], &expect, PL_BUSY))
                mine[nm++] = i;
        }
        if (nm == 0) {
            pthread_mutex_unlock(&P->lmu);
            continue;
        }
        size_t nk = 0;
        for (int32_t j = 0; j < nm; j++)
            for (int32_t h = 0; h < P->H; h++)
                for (int kind = 0; kind < 2; kind++) {
                    sw_store_key *k = &kb[nk++];
                    memset(k, 0, sizeof *k);
                    k->ns = P->ns;
                    k->layer = (uint32_t)P->layer;
                    k->block = P->bbase + (uint32_t)P->blk[mine[j]];
                    k->kv_head = (uint16_t)h;
                    k->kind = (uint8_t)kind;
                }
        size_t got = 0;
        if (P->nent + nk > P->ent_cap) {
            size_t nc = P->ent_cap ? 2 * P->ent_cap : 4096;
            while (nc < P->nent + nk)
                nc *= 2;
            uint32_t *ne = realloc(P->ent, sizeof(uint32_t) * nc);
            if (ne) {
                P->ent = ne;
                P->ent_cap = nc;
            }
        }
        if (P->nent + nk > P->ent_cap ||
            sw_store_host_lease(P->store, nk, kb, 16, lb, &got) != SW_OK)
            got = 0; /* nothing leased: those blocks' tiles read them */
        for (int32_t j = 0; j < nm; j++) {
            for (size_t x = 0; x < spb; x++) {
                sw_store_lease *l = &P->lease[(size_t)mine[j] * spb + x];
                if (got) {
                    *l = lb[(size_t)j * spb + x];
                    if (l->ptr)
                        P->ent[P->nent++] = l->entry;
                } else {
                    memset(l, 0, sizeof *l);
                }
            }
            P->lev_of[mine[j]] = -1;
            if (!got || !land_queue(P, land_ok, mine[j], &lb[(size_t)j * spb]))
                atomic_store_explicit(&P->state[mine[j]], PL_DONE, memory_order_release);
        }
        /* the job's first launch small (its first tile waits for it), then
         * larger (fewer launches, less tail per launch); near the job's end
         * halves: the tile chunks waiting for the last copy are
         * few (direct tiles launch by landing launch: land_groups) */
        const int32_t left = (P->job_nland < P->n ? P->job_nland : P->n) - i1;
        if (P->npend >= land_next(P) || atomic_load(&P->want) ||
            (P->npend >= P->land_start && P->npend >= left))
            land_flush(P, 1);
        pthread_mutex_unlock(&P->lmu);
    }
    /* every claimed block handed over: launched at the end; cancelled, not */
    pthread_mutex_lock(&P->lmu);
    land_flush(P, !atomic_load(&P->cancel));
    pthread_mutex_unlock(&P->lmu);
}

/* The timeline's landing lines (tuning timeline): each landing
 * launch's end on the GPU and the thread's clock at its record, from the
 * call's B mark (negative: before it, the job posted ahead of the scores);
 * call < 0: only dropped. */
static void land_report(sw_swap_dev *d, int call)
{
    struct prelease *P = d->pl;
    for (int32_t i = 0; P && call >= 0 && i < P->lt_n; i++) {
        /* the landing launches: their end on the GPU, the thread's clock */
        float ms = -1.0f;
        if (sw_cuda_swap_event_ms(&ms, d->tl_ev[0], P->lev[P->lt_ev[i]]) != SW_OK)
            ms = -1.0f;
        fprintf(stderr, "swap timeline %d: L %3d gpu %8.3f ms host %8.3f ms (%d stripes, %d copies)\n",
                call, i, ms, 1e3 * (P->lt_host[i] - d->tl_host[0]), P->lt_items[i],
                P->lt_copies[i]);
    }
    if (P && call >= 0 && P->lt_wake != 0)
        fprintf(stderr, "swap timeline %d: W thread woke host %8.3f ms\n", call,
                1e3 * (P->lt_wake - d->tl_host[0]));
    if (P) {
        P->lt_n = 0;
        P->lt_wake = 0;
    }
}

static void *prelease_main(void *arg)
{
    struct prelease *P = arg;
    /* without its device the thread lands nothing (the tiles read the host tier) */
    const int land_ok = P->land && sw_cuda_set_device(P->device) == SW_OK;
    pthread_mutex_lock(&P->mu);
    for (;;) {
        if (!P->job && !P->stop && P->spin_s > 0.0) {
            /* poll before sleeping (a post sets `posted` under mu); a nudge
             * made while the thread worked is this poll */
            P->nudge = 0;
            pthread_mutex_unlock(&P->mu);
            poll_change(&P->posted, 0u, P->spin_s);
            pthread_mutex_lock(&P->mu);
        }
        while (!P->job && !P->stop && !P->nudge)
            pthread_cond_wait(&P->cv, &P->mu);
        if (!P->job && !P->stop) {
            P->nudge = 0; /* woken ahead of a job: poll for it */
            continue;
        }
        if (!P->job)
            break;
        P->nudge = 0;
        atomic_store_explicit(&P->posted, 0u, memory_order_relaxed);
        P->running = 1;
        const int rel = P->rel;
        pthread_mutex_unlock(&P->mu);
        if (rel) {
            sw_store_host_release_entries(P->store, P->rn, P->rent);
            P->rn = 0;
        } else {
            if (P->tline && P->lt_wake == 0)
                P->lt_wake = tl_now();
            prelease_run(P, land_ok, P->n, 0);
        }
        pthread_mutex_lock(&P->mu);
        P->rel = 0;
        P->job = 0;
        P->running = 0;
        pthread_cond_broadcast(&P->cv);
    }
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

/* Waits for the posted job (cancelled first when `cancel`). */
static void prelease_wait(struct prelease *P, int cancel)
{
    if (!P)
        return;
    if (cancel)
        atomic_store(&P->cancel, 1);
    pthread_mutex_lock(&P->mu);
    while (P->job)
        pthread_cond_wait(&P->cv, &P->mu);
    pthread_mutex_unlock(&P->mu);
}

static sw_status prelease_start_thread(sw_swap *s)
{
    sw_swap_dev *d = s->dev;
    struct prelease *P = calloc(1, sizeof *P);
    if (!P)
        return sw_fail(SW_STATUS_NO_MEMORY, "device pool: prelease");
    P->store = s->store;
    P->H = s->m.num_kv_heads;
    P->device = d->device;
    P->layer = -1;
    P->tline = d->tline;
    P->spin_s = d->spin_s;
    atomic_init(&P->posted, 0u);
    d->pl = P; /* from here prelease_stop_thread frees what is set up */
    {
        const int64_t mb = s->tune.landing_mb;
        /* host-tier entries are one extent apart (a leased ptr is its
         * entry's first byte): leases that far apart are adjacent */
        sw_store_stats sst;
        memset(&sst, 0, sizeof sst);
        sst.struct_size = sizeof sst;
        const size_t st = sw_store_get_stats(s->store, &sst) == SW_OK && sst.host_capacity_bytes
                              ? (size_t)sst.extent_bytes
                              : 0;
        const size_t spb = 2 * (size_t)P->H;
        if (mb > 0 && mb <= ((int64_t)1 << 20) && st > 0 && st % 16 == 0) {
            const int64_t cap = (mb << 20) / (int64_t)st / (int64_t)spb * (int64_t)spb;
            if (cap > 0 &&
                sw_cuda_swap_alloc((void **)&P->land, (size_t)cap * st) == SW_OK) {
                P->land_stride = st;
                P->land_cap = cap;
                const int64_t lb = s->tune.land_blocks;
                P->land_blocks = lb >= PL_LAND && lb <= (1 << 20) ? (int32_t)lb : 256;
                const int64_t ls = s->tune.land_start;
                P->land_start = ls >= PL_CH && ls <= P->land_blocks ? (int32_t)ls : PL_LAND;
                int64_t lf = s->tune.land_first;
                lf = lf >= 0 && lf <= (1 << 20) ? lf : 320;
                /* whole store calls: one split between the caller and the
                 * thread would be two, and a launch more than counted */
                P->land_first = (int32_t)((lf + PL_CH - 1) / PL_CH * PL_CH);
                if (sw_cuda_swap_stream_create(&P->lstream) != SW_OK ||
                    sw_cuda_host_alloc((void **)&P->items, sizeof *P->items * (size_t)cap) !=
                        SW_OK) {
                    sw_cuda_swap_free(P->land);
                    P->land = NULL; /* the rest is freed with the thread */
                }
            } else {
                P->land = NULL; /* no room on the device: the host tier is read as before */
            }
        }
    }
    pthread_mutex_init(&P->mu, NULL);
    pthread_mutex_init(&P->lmu, NULL);
    pthread_cond_init(&P->cv, NULL);
    if (pthread_create(&P->th, NULL, prelease_main, P) != 0) {
        pthread_mutex_destroy(&P->mu);
        pthread_mutex_destroy(&P->lmu);
        pthread_cond_destroy(&P->cv);
        prelease_free(P);
        d->pl = NULL;
        return sw_fail(SW_STATUS_NO_MEMORY, "device pool: prelease thread");
    }
    return SW_OK;
}

/* Sets a polling thread's nudge flag and wakes it (under its mutex). */
static void nudge_one(pthread_mutex_t *mu, pthread_cond_t *cv, int *nudge)
{
    pthread_mutex_lock(mu);
    *nudge = 1;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(mu);
}

void sw_swap_dev_nudge(sw_swap *s, int which)
{
    sw_swap_dev *d = s->dev;
    if (!d)
        return;
    struct prelease *P = (which & 1) ? d->pl : NULL;
    if (P && P->spin_s > 0.0)
        nudge_one(&P->mu, &P->cv, &P->nudge);
    struct launcher *L = (which & 2) ? d->ln : NULL;
    if (L && L->spin_s > 0.0)
        nudge_one(&L->mu, &L->cv_push, &L->nudge);
}

void sw_swap_dev_quiesce(sw_swap *s)
{
    if (s->dev)
        prelease_wait(s->dev->pl, 0);
}

int sw_swap_dev_preleases(const sw_swap *s)
{
    return s->dev && s->dev->pl;
}

/* Waits out the prelease thread and releases its leases. */
static void prelease_release(sw_swap *s)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    if (!P)
        return;
    prelease_wait(P, 1);
    P->job_nland = 0; /* the next call's descriptors are uploaded unless it lands again */
    /* copies still reading leased memory (a cancelled job's, whose blocks no
     * tile read) end before the leases do; the tiles that read the landing
     * were waited by the verdict, so the next call may refill it */
    if (P->lcopied && (sw_cuda_set_device(P->device) != SW_OK ||
                       sw_cuda_stream_sync(P->lstream) != SW_OK))
        return; /* a broken context: the entries stay leased rather than reused under a copy */
    P->lcopied = 0;
    if (P->nent > 0) {
        /* the thread releases them (the entry list swapped for its spare) */
        uint32_t *e = P->ent;
        const size_t cap = P->ent_cap;
        P->ent = P->rent;
        P->ent_cap = P->rent_cap;
        P->rent = e;
        P->rent_cap = cap;
        P->rn = P->nent;
        P->n = 0; /* (no claims: a release job) */
        pthread_mutex_lock(&P->mu);
        P->rel = 1;
        P->job = 1;
        atomic_store_explicit(&P->posted, 1u, memory_order_release);
        pthread_cond_signal(&P->cv);
        pthread_mutex_unlock(&P->mu);
    }
    P->nent = 0;
    P->n = 0;
    P->q = NULL;
    P->layer = -1;
    P->land_used = 0;
    P->lev_used = 0;
    P->nitem = 0;
    P->item0 = 0;
}

/* Frees what prelease_start_thread set up (the thread joined or never
 * started): the landing stream synced first, so no gather still reads the
 * items or writes the landing. */
static void prelease_free(struct prelease *P)
{
    if (P->lstream) {
        (void)sw_cuda_stream_sync(P->lstream);
        sw_cuda_swap_stream_destroy(P->lstream);
    }
    free(P->blk);
    free(P->rent);
    free(P->lease);
    free(P->state);
    free(P->pos);
    free(P->kb);
    free(P->lb);
    free(P->ent);
    free(P->lev_of);
    free(P->pend);
    sw_cuda_host_free(P->items);
    for (int32_t i = 0; i < P->lev_cap; i++)
        sw_cuda_swap_event_destroy(P->lev[i]);
    free(P->lev);
    sw_cuda_swap_free(P->land);
    free(P);
}

static void prelease_stop_thread(sw_swap_dev *d)
{
    struct prelease *P = d->pl;
    if (!P)
        return;
    prelease_wait(P, 1);
    pthread_mutex_lock(&P->mu);
    P->stop = 1;
    atomic_store_explicit(&P->posted, 1u, memory_order_release);
    pthread_cond_signal(&P->cv);
    pthread_mutex_unlock(&P->mu);
    pthread_join(P->th, NULL);
    pthread_mutex_destroy(&P->mu);
    pthread_mutex_destroy(&P->lmu);
    pthread_cond_destroy(&P->cv);
    prelease_free(P);
    d->pl = NULL;
}

sw_status sw_swap_dev_prelease(sw_swap *s, const sw_swap_seq *q, int32_t layer,
                               const int32_t *blocks, int32_t n)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    if (!P)
        return SW_OK;
    const sw_swap_layer *L = &q->layers[layer];
    if (P->q == q && P->layer == layer && P->n == n && P->nblk == L->nblocks && n > 0 &&
        !atomic_load(&P->cancel)) {
        /* posted at the call's start (attend_dev): the same blocks, keep it */
        int32_t i = 0;
        while (i < n && blocks[i] >= 0 && blocks[i] < P->nblk && P->pos[blocks[i]] == i)
            i++;
        if (i == n)
            return SW_OK;
    }
    prelease_wait(P, 1); /* the previous sequence's job: every block of it planned */
    const size_t spb = 2 * (size_t)P->H;
    P->q = NULL;
    P->layer = -1;
    P->n = 0;
    P->nblk = 0;
    P->job_nland = 0; /* (the call's zero-copy descriptors follow it) */
    if (n <= 0)
        return SW_OK;
    if (!P->kb) {
        P->kb = malloc(sizeof *P->kb * PL_CH * spb);
        P->lb = malloc(sizeof *P->lb * PL_CH * spb);
        if (!P->kb || !P->lb) {
            free(P->kb);
            free(P->lb);
            P->kb = NULL;
            P->lb = NULL;
            return SW_OK; /* nothing preleased: the tiles lease their keys */
        }
    }
    if (n > P->ncap) {
        int32_t *k = realloc(P->blk, sizeof *k * (size_t)n);
        if (k)
            P->blk = k;
        sw_store_lease *l = k ? realloc(P->lease, sizeof *l * spb * (size_t)n) : NULL;
        if (l)
            P->lease = l;
        atomic_int *st = l ? realloc(P->state, sizeof *st * (size_t)n) : NULL;
        if (st)
            P->state = st;
        int32_t *lo = st ? realloc(P->lev_of, sizeof *lo * (size_t)n) : NULL;
        if (lo)
            P->lev_of = lo;
        int32_t *pd = lo ? realloc(P->pend, sizeof *pd * (size_t)n) : NULL;
        if (!pd)
            return SW_OK; /* nothing preleased: the tiles lease their keys */
        P->pend = pd;
        P->ncap = n;
    }
    if (L->nblocks > P->nblk_cap) {
        int32_t *ps = realloc(P->pos, sizeof *ps * (size_t)L->nblocks);
        if (!ps)
            return SW_OK;
        P->pos = ps;
        P->nblk_cap = L->nblocks;
    }
    for (int32_t b = 0; b < L->nblocks; b++)
        P->pos[b] = -1;
    for (int32_t i = 0; i < n; i++) {
        const int32_t b = blocks[i];
        P->pos[b] = i;
        P->blk[i] = b;
        atomic_init(&P->state[i], PL_FREE);
    }
    P->ns = q->ns;
    P->bbase = q->block_base;
    /* landing room for the job's first blocks (what is left of the call's),
     * and an event per landing launch (at most nl / PL_CH + 2); job_nland
     * was zeroed above */
    P->ljob_nev = 0;
    P->ljob_ev = 0;
    P->npend = 0;
    if (P->land) {
        const int64_t room = (P->land_cap - P->land_used) / (int64_t)spb;
        int32_t nl = room < (int64_t)n ? (int32_t)(room > 0 ? room : 0) : n;
        /* launches: about one a store call's PL_CH blocks at most, one spare
         * (past them a block is handed over unlanded: read from the host tier) */
        const int32_t nev = nl / PL_CH + 2;
        if (nl > 0 && P->lev_used + nev > P->lev_cap) {
            const int32_t cap = P->lev_used + nev + 16;
            void **ev = realloc(P->lev, sizeof *ev * (size_t)cap);
            if (ev) {
                P->lev = ev;
                while (P->lev_cap < cap &&
                       sw_cuda_swap_event_create(&P->lev[P->lev_cap], P->tline) == SW_OK)
                    P->lev_cap++;
            }
            if (P->lev_used + nev > P->lev_cap)
                nl = 0; /* no events: this job lands nothing */
        }
        if (nl > 0) {
            P->job_nland = nl;
            P->job_land0 = P->land_used;
            P->chunk0 = P->lev_used;
            P->land_used += (int64_t)nl * (int64_t)spb;
            P->lev_used += nev;
            P->ljob_nev = nev;
        }
    }
    P->q = q;
    P->layer = layer;
    P->n = n;
    P->nblk = L->nblocks;
    atomic_store(&P->cancel, 0);
    pthread_mutex_lock(&P->mu);
    P->job = 1;
    atomic_store_explicit(&P->posted, 1u, memory_order_release);
    pthread_cond_signal(&P->cv);
    pthread_mutex_unlock(&P->mu);
    /* The thread takes tens of microseconds to wake: the first blocks'
     * leases and landing copy are made here meanwhile (this thread's device
     * is the engine's: sw_swap_dev_enter), so the copy engine starts now;
     * the thread goes on from the blocks not claimed yet. */
    if (P->job_nland > 0 && P->land_first > 0)
        prelease_run(P, 1, P->land_first < P->job_nland ? P->land_first : P->job_nland, 1);
    return SW_OK;
}

sw_status sw_swap_dev_lease_tile(sw_swap *s, const int32_t *miss_blocks, int32_t nmiss,
                                 size_t nkeys, const sw_store_key *keys, sw_store_lease *lease,
                                 sw_store_key *tmp_keys, sw_store_lease *tmp_lease,
                                 uint32_t *tmp_map, size_t *nleased, void **land_ev,
                                 int32_t *miss_ev)
{
    sw_swap_dev *d = s->dev;
    struct prelease *P = d->pl;
    *nleased = 0;
    *land_ev = NULL;
    for (int32_t m = 0; miss_ev && m < nmiss; m++)
        miss_ev[m] = -1;
    const size_t spb = 2 * (size_t)s->m.num_kv_heads;
    if (!P || P->n == 0 || nkeys != (size_t)nmiss * spb)
        return sw_swap_dev_lease(s, nkeys, keys, lease, nleased);
    /* block by block: the thread's leases, or claimed and leased here */
    size_t nk = 0, got = 0;
    int32_t lchunk = -1;
    for (int32_t m = 0; m < nmiss; m++) {
        const int32_t b = miss_blocks[m];
        int32_t i = b >= 0 && b < P->nblk ? P->pos[b] : -1;
        if (i >= 0) {
            const sw_store_key *k = &keys[(size_t)m * spb];
            if (k->ns != P->ns || k->layer != (uint32_t)P->layer ||
                k->block != P->bbase + (uint32_t)b)
                i = -1; /* not this job's block (never expected): leased here */
        }
        int from_pl = 0;
        if (i >= 0) {
            int expect = PL_FREE;
            if (!atomic_compare_exchange_strong(&P->state[i], &expect, PL_MAIN)) {
                /* the thread is in the store call for it (microseconds,
                 * unless it lost its core: then let it run) or has it queued
                 * for its next landing launch (asked to launch now; only for
                 * a block not handed over yet: asked for every block, the
                 * launches shrank to one store call's blocks) */
                if (expect == PL_BUSY)
                    atomic_store(&P->want, 1);
                for (int spin = 0;
                     atomic_load_explicit(&P->state[i], memory_order_acquire) == PL_BUSY; spin++)
                    if (spin >= 256)
                        sched_yield();
                from_pl = expect != PL_MAIN;
            }
        }
        /* landed: its stripes are read from the landing, after its chunk's
         * gather (recorded in order on one stream: the tile's last one
         * covers every earlier) */
        const int landed = from_pl && P->lev_of[i] >= 0;
        if (landed && P->lev_of[i] > lchunk)
            lchunk = P->lev_of[i];
        if (landed && miss_ev)
            miss_ev[m] = P->lev_of[i];
        for (size_t x = 0; x < spb; x++) {
            const size_t k = (size_t)m * spb + x;
            if (from_pl) {
                lease[k] = P->lease[(size_t)i * spb + x];
                if (landed)
                    lease[k].ptr = P->land + ((uint64_t)P->job_land0 + (uint64_t)i * spb + x) *
                                                 P->land_stride;
                got += lease[k].ptr != NULL;
            } else {
                memset(&lease[k], 0, sizeof lease[k]);
                tmp_keys[nk] = keys[k];
                tmp_map[nk++] = (uint32_t)k;
            }
        }
    }
    if (nk > 0) {
        size_t g = 0;
        if (sw_swap_dev_lease(s, nk, tmp_keys, tmp_lease, &g) == SW_OK && g > 0)
            for (size_t j = 0; j < nk; j++)
                lease[tmp_map[j]] = tmp_lease[j];
        got += g;
    }
    *nleased = got;
    if (lchunk >= 0)
        *land_ev = P->lev[lchunk];
    return SW_OK;
}

sw_status sw_swap_dev_lease(sw_swap *s, size_t n, const sw_store_key *keys,
                            sw_store_lease *lease, size_t *nleased)
{
    sw_swap_dev *d = s->dev;
    *nleased = 0;
    if (d->nlease + n > d->lease_cap) {
        size_t nc = d->lease_cap ? 2 * d->lease_cap : 4096;
        while (nc < d->nlease + n)
            nc *= 2;
        uint32_t *ne = realloc(d->lease_ent, sizeof(uint32_t) * nc);
        if (!ne)
            return sw_fail(SW_STATUS_NO_MEMORY, "lease table of %zu entries", nc);
        d->lease_ent = ne;
        d->lease_cap = nc;
    }
    /* 16: the gather kernel moves 16-byte pieces (every stripe the engine
     * writes qualifies: valid rows x head_dim >= 64 x 1 or 2 bytes) */
    size_t got = 0;
    SW_TRY(sw_store_host_lease(s->store, n, keys, 16, lease, &got));
    for (size_t i = 0; i < n && got; i++)
        if (lease[i].ptr)
            d->lease_ent[d->nlease++] = lease[i].entry;
    *nleased = got;
    return SW_OK;
}

static sw_status grec_push(sw_swap_dev *d, const gather_rec *r)
{
    if (d->ngrec == d->grec_cap) {
        size_t nc = d->grec_cap ? 2 * d->grec_cap : 4096;
        gather_rec *n = realloc(d->grec, sizeof *n * nc);
        if (!n)
            return sw_fail(SW_STATUS_NO_MEMORY, "gather records");
        d->grec = n;
        d->grec_cap = nc;
    }
    d->grec[d->ngrec++] = *r;
    return SW_OK;
}

sw_status sw_swap_dev_attend_verdict(sw_swap *s, void *stream, int report)
{
    sw_swap_dev *d = s->dev;
    /* direct mode: every job launched and every tile / merge stream done
     * (their kernels read the leases and report into d_bad) */
    sw_status st = launch_drain_x(d, 1);
    /* the prelease thread done with this call (its leases released below) */
    prelease_wait(d->pl, 1);
    sw_swap_dev_tl_phase(s, 'w');
    for (int i = 0; d->pissued && i < 3; i++) {
        const sw_status g = sw_cuda_stream_sync(i < 2 ? d->pstream[i] : d->mstream);
        if (st == SW_OK)
            st = g;
    }
    d->pissued = 0;
    if (d->nlease == 0 && d->ngrec == 0 && !(d->pl && d->pl->nent)) {
        prelease_release(s); /* nothing leased: the landing's counters for the next call */
        return st;
    }
    const size_t bad_bytes = sizeof(uint32_t) * (1 + SW_SWAP_BAD_CAP);
    /* Gathers issued ahead of a tile that never computed (a failed call)
     * are waited by no kernel of `stream`: wait for them first, so that the
     * leases outlive them and the report copied below holds their
     * mismatches too (copied before, it could miss one, and the stale count
     * would then be read by the next call against its own records). */
    for (int i = 0; d->gissued && i < 2; i++) {
        const sw_status g = sw_cuda_stream_sync(d->gstream[i]);
        if (st == SW_OK)
            st = g;
    }
    d->gissued = 0;
    if (d->ngrec && st == SW_OK)
        st = sw_cuda_swap_copy(d->h_bad, d->d_bad, bad_bytes, stream);
    /* the one wait on the call's stream: the gathers are done with the
     * leased memory, and the report is here */
    const sw_status sy = sw_cuda_stream_sync(stream);
    sw_swap_dev_tl_phase(s, 's');
    if (st == SW_OK)
        st = sy;
    sw_status out = st;
    if (st != SW_OK && d->ngrec) {
        /* the report is unknown: no slot the call gathered is to be trusted,
         * and the report is cleared for the next call (whatever it holds) */
        for (size_t i = 0; i < d->ngrec; i++) {
            const gather_rec *r = &d->grec[i];
            sw_swap_blk *b = &r->q->layers[r->layer].blk[r->block];
            if (b->slot == r->slot)
                sw_swap_pool_drop(s, b);
        }
        (void)sw_cuda_memset_async(d->d_bad, 0, bad_bytes, stream);
    } else if (d->ngrec && d->h_bad[0]) {
        /* Each bad stripe's slot is dropped and its host-tier copy leaves
         * the tier (still leased here, so the entry cannot have been reused
         * for another key): the next read of the key comes from the file
         * tier, with the store's own check. */
        const uint32_t nbad = d->h_bad[0];
        const gather_rec *first = NULL;
        if (nbad > SW_SWAP_BAD_CAP) {
            /* not every one named: every stripe the call gathered */
            for (size_t i = 0; i < d->ngrec; i++) {
                const gather_rec *r = &d->grec[i];
                sw_swap_blk *b = &r->q->layers[r->layer].blk[r->block];
                if (b->slot == r->slot)
                    sw_swap_pool_drop(s, b);
                (void)sw_store_host_invalidate(s->store, r->entry, r->generation);
            }
        }
        for (uint32_t i = 0; i < nbad && i < SW_SWAP_BAD_CAP; i++) {
            const uint32_t id = d->h_bad[1 + i];
            if (id >= d->ngrec)
                continue;
            const gather_rec *r = &d->grec[id];
            sw_swap_blk *b = &r->q->layers[r->layer].blk[r->block];
            if (b->slot == r->slot) /* still the slot it filled */
                sw_swap_pool_drop(s, b);
            (void)sw_store_host_invalidate(s->store, r->entry, r->generation);
            if (!first || id < (uint32_t)(first - d->grec))
                first = r;
        }
        if (report && first)
            out = sw_fail(SW_STATUS_CORRUPT, "stripe (ns %llu, layer %d, block %u, kv head %d, "
                          "%s) of sequence %llu: its host-tier copy failed the CRC32C check on "
                          "the GPU (%u gather(s) of this call failed); the copy left the host "
                          "tier and its slot is dropped, so the next read comes from the file",
                          (unsigned long long)first->q->ns, first->layer,
                          first->q->block_base + (uint32_t)first->block, first->h,
                          first->kind ? "V" : "K", (unsigned long long)first->q->id, nbad);
        else if (report)
            out = sw_fail(SW_STATUS_CORRUPT, "%u host-tier gather(s) of this call failed the "
                          "CRC32C check on the GPU; the copies left the host tier and their "
                          "slots are dropped", nbad);
        else
            out = SW_STATUS_CORRUPT;
        /* reset for the next call (before its wait on ev_done) */
        const sw_status ms = sw_cuda_memset_async(d->d_bad, 0, bad_bytes, stream);
        if (ms != SW_OK)
            out = ms;
    }
    sw_store_host_release_entries(s->store, d->nlease, d->lease_ent);
    d->nlease = 0;
    d->ngrec = 0;
    prelease_release(s);
    return out;
}

/* --------------------------------------------------------- workspace -- */
/* Descriptor space (pinned, mirrored on the device) handed out in 16-byte
 * units during one call. */
static void *desc_take(sw_swap_dev *d, size_t bytes, size_t *off)
{
    bytes = sw_align_up(bytes, 16);
    if (d->desc_used + bytes > d->desc_bytes)
        return NULL;
    *off = d->desc_used;
    d->desc_used += bytes;
    return d->desc_host + *off;
}

static sw_status ensure_desc(sw_swap_dev *d, size_t bytes)
{
    if (bytes <= d->desc_bytes)
        return SW_OK;
    size_t nb = d->desc_bytes ? 2 * d->desc_bytes : 65536;
    while (nb < bytes)
        nb *= 2;
    sw_cuda_host_free(d->desc_host);
    sw_cuda_swap_free(d->desc_dev);
    d->desc_host = NULL;
    d->desc_dev = NULL;
    d->desc_bytes = 0;
    SW_TRY(sw_cuda_host_alloc((void **)&d->desc_host, nb));
    SW_TRY(sw_cuda_swap_alloc((void **)&d->desc_dev, nb));
    d->desc_bytes = nb;
    return SW_OK;
}

static sw_status ensure_ws(sw_swap_dev *d, size_t floats)
{
    if (floats <= d->ws_floats)
        return SW_OK;
    size_t n = d->ws_floats ? 2 * d->ws_floats : (1u << 20);
    while (n < floats)
        n *= 2;
    sw_cuda_swap_free(d->ws);
    d->ws = NULL;
    d->ws_floats = 0;
    SW_TRY(sw_cuda_swap_alloc((void **)&d->ws, sizeof(float) * n));
    d->ws_floats = n;
    return SW_OK;
}

sw_status sw_swap_dev_attend_begin(sw_swap *s, const sw_swap_attend_params *p,
                                   sw_swap_seq *const *seqs, float **scores, void *stream)
{
    sw_swap_dev *d = s->dev;
    /* descriptors read in place this call when its first job (posted before
     * this, attend_dev) lands blocks: its copies would queue the uploads */
    d->zc = d->pl && d->pl->job_nland > 0;
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t D = s->m.head_dim, R = s->c.predictor_rank;
    const int64_t rows = p->q_indptr[p->batch];
    const int64_t hrows = rows * Hq;
    int64_t total = 0;
    size_t part = 0;
    size_t p2 = 0; /* the split merge's parts: as many as sw_cuda_swap_merge_split takes */
    for (int32_t b = 0; b < p->batch; b++) {
        total += seqs[b]->layers[p->layer].nblocks;
        const int32_t ql = p->q_indptr[b + 1] - p->q_indptr[b];
        const int64_t nrg = ((int64_t)ql * G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG;
        const int64_t np = sw_cuda_swap_merge_parts((int64_t)ql * G * H, d->sms);
        const size_t need2 = np >= 2 ? (size_t)np * (size_t)H * (size_t)nrg * SW_CUDA_SWAP_RG *
                                           (size_t)(D + 2)
                                     : 0;
        p2 = need2 > p2 ? need2 : p2;
        const size_t need = sw_swap_dev_part_floats(ql, s->tile_blocks, H, G, D, d->ctas);
        part = need > part ? need : part;
    }
    if (d->direct) {
        /* a direct tile's partials: one per block and kv head (a CTA a
         * block: it is 4 warps, so occupancy comes from CTAs) */
        const size_t dp = (size_t)s->tile_blocks * (size_t)H * SW_CUDA_SWAP_RG * (size_t)(D + 2);
        part = dp > part ? dp : part;
    }
    d->hrows = hrows;
    d->part_floats = part;
    SW_TRY(wait_done(d));
    d->ntl = 0;
    tl_mark(d, stream, 'B', 0);
    for (int32_t i = 0; d->pre && i < d->nhstage; i++)
        d->pre[i].set = 0; /* descriptors of a call that ended early: stale */
    /* m, l, acc, qp, scores, part, two fp32 outputs (sparse check) */
    const size_t hr = (size_t)(hrows > 0 ? hrows : 1);
    const size_t o_m = 0, o_l = o_m + sw_align_up(hr, 4), o_acc = o_l + sw_align_up(hr, 4);
    const size_t o_qp = o_acc + hr * (size_t)D, o_sc = o_qp + hr * (size_t)R;
    const size_t o_part = o_sc + sw_align_up((size_t)total + 1, 4);
    const size_t o_f32 = o_part + (d->direct ? SW_SWAP_NPART : 1) * part;
    const size_t o_p2 = o_f32 + (p->sparse_top_k > 0 && p->sparse_check ? hr * (size_t)D : 0);
    if (!d->direct)
        p2 = 0;
    const size_t need = o_p2 + p2;
    SW_TRY(ensure_ws(d, need));
    d->d_m = d->ws + o_m;
    d->d_l = d->ws + o_l;
    d->d_acc = d->ws + o_acc;
    d->d_qp = d->ws + o_qp;
    d->d_scores = d->ws + o_sc;
    d->d_part = d->ws + o_part;
    for (int i = 0; i < SW_SWAP_NPART; i++)
        d->d_partk[i] = d->direct ? d->ws + o_part + (size_t)i * part : NULL;
    d->d_f32 = d->ws + o_f32;
    d->d_part2 = p2 ? d->ws + o_p2 : NULL;
    d->part2_floats = p2;
    /* descriptors: scored blocks, 2 passes of tile blocks and fills, scores */
    const size_t nb = (size_t)total + 1;
    /* gathers: per pass (two with a sparse check) every stripe of every
     * block at most, and at most one per host-tier entry (a pass leases a
     * key once and holds its leases to the end of the call) */
    const size_t passes = p->sparse_top_k > 0 && p->sparse_check ? 2 : 1;
    size_t gmax = nb * 2 * (size_t)H;
    if (d->gather) {
        const size_t he = sw_store_host_entries(s->store);
        gmax = he < gmax ? he : gmax;
    }
    const size_t gbytes = d->gather ? passes * gmax * sizeof(sw_cuda_swap_gather_item) : 0;
    const size_t dbytes = sw_align_up(nb * sizeof(sw_cuda_swap_sblk), 16) +
                          2 * (nb + 2 * (size_t)p->batch + 64) *
                              (sizeof(sw_cuda_swap_blk) + sizeof(sw_cuda_swap_fill) + 32) +
                          gbytes + sw_align_up(nb * sizeof(float), 16) + 4096;
    SW_TRY(ensure_desc(d, dbytes));
    d->desc_used = 0;
    size_t so = 0, fo = 0;
    float *sh = desc_take(d, nb * sizeof(float), &fo);
    sw_cuda_swap_sblk *sb = desc_take(d, nb * sizeof(sw_cuda_swap_sblk), &so);
    if (!sh || !sb)
        return sw_fail(SW_STATUS_INTERNAL, "device descriptors: %zu bytes too few", d->desc_bytes);
    d->scores_host = sh;
    int64_t k = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        const sw_swap_layer *L = &seqs[b]->layers[p->layer];
        for (int32_t i = 0; i < L->nblocks; i++, k++) {
            const sw_swap_blk *e = &L->blk[i];
            sb[k].entry = e->valid > 0 && e->dtype == SW_SWAP_KV_BF16 ? e->dproj : -1;
            sb[k].valid = e->valid;
            sb[k].row0 = p->q_indptr[b];
            sb[k].ql = p->q_indptr[b + 1] - p->q_indptr[b];
        }
    }
    /* Offloads before this call must have projected their keys. */
    if (d->offload_pending)
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_offload));
    if (total > 0 && hrows > 0) {
        SW_TRY(desc_up(d, so, (size_t)total * sizeof *sb, stream)); /* sb: desc_host + so */
        SW_TRY(sw_cuda_swap_project(d->P, D, R, p->q, hrows, d->d_qp, stream));
        SW_TRY(sw_cuda_swap_score(d->d_qp, d->arena,
                                  (const sw_cuda_swap_sblk *)(DESC_K(d) + so),
                                  (int32_t)total, H, G, s->m.block_size, R, d->d_scores,
                                  stream));
        SW_TRY(sw_cuda_swap_copy(sh, d->d_scores, (size_t)total * sizeof(float), stream));
        SW_TRY(sw_cuda_stream_sync(stream));
    } else {
        for (int64_t i = 0; i < total; i++)
            sh[i] = -INFINITY;
    }
    k = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        const sw_swap_layer *L = &seqs[b]->layers[p->layer];
        const int32_t ql = p->q_indptr[b + 1] - p->q_indptr[b];
        for (int32_t i = 0; i < L->nblocks; i++, k++)
            scores[b][i] = ql > 0 ? sh[k] : -INFINITY;
    }
    return SW_OK;
}

sw_status sw_swap_dev_pass_begin(sw_swap *s, const sw_swap_attend_params *p, void *stream)
{
    sw_swap_dev *d = s->dev;
    SW_TRY(sw_cuda_swap_state_init(d->d_m, d->d_l, d->d_acc, d->hrows, s->m.head_dim, stream));
    if (d->direct) {
        /* the tile streams start after the state's initialisation (and
         * after everything before it on the call's stream) */
        d->ptile = 0;
        d->pissued = 1;
        SW_TRY(sw_cuda_swap_event_record(d->ev_pass, stream));
        for (int i = 0; i < 2; i++)
            SW_TRY(sw_cuda_swap_stream_wait(d->pstream[i], d->ev_pass));
        SW_TRY(sw_cuda_swap_stream_wait(d->mstream, d->ev_pass));
        /* every partial buffer free */
        for (int i = 0; i < SW_SWAP_NPART; i++)
            SW_TRY(sw_cuda_swap_event_record(d->ev_mdone[i], stream));
    }
    return SW_OK;
}

static sw_status timing_event(sw_swap_dev *d, int32_t i, void **ev)
{
    if (i >= d->tev_cap) {
        int32_t nc = d->tev_cap ? 2 * d->tev_cap : 64;
        while (nc <= i)
            nc *= 2;
        void **n = realloc(d->tev, sizeof(void *) * (size_t)nc);
        if (!n)
            return sw_fail(SW_STATUS_NO_MEMORY, "timing events");
        d->tev = n;
        d->tev_cap = nc;
    }
    while (d->ntev <= i) {
        SW_TRY(sw_cuda_swap_event_create(&d->tev[d->ntev], 1));
        d->ntev++;
    }
    *ev = d->tev[i];
    return SW_OK;
}

/* Gather items of the tile's leased stripes into gd (room for every one),
 * each with its record (grec) for the verdict. */
static sw_status gather_items(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                              const sw_swap_dev_tile *t, int to_stage,
                              sw_cuda_swap_gather_item *gd, int32_t *n)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, B = s->m.block_size, D = s->m.head_dim;
    const sw_swap_layer *L = &q->layers[p->layer];
    const size_t spb = 2 * (size_t)H;
    int32_t ng = 0;
    for (int32_t m = 0; m < t->nmiss; m++) {
        const sw_swap_blk *e = &L->blk[t->miss_blocks[m]];
        const size_t es = sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
        for (size_t x = 0; x < spb; x++) {
            const sw_store_lease *l = &t->lease[(size_t)m * spb + x];
            if (!l->ptr)
                continue;
            /* block-major key order (plan_tile): x = h * 2 + kind */
            const int32_t h = (int32_t)(x / 2), kind = (int32_t)(x % 2);
            sw_cuda_swap_gather_item *g = &gd[ng++];
            g->src = l->ptr;
            /* into the tile's device staging (the stripe's place there,
             * scattered with the block), or straight into its slot */
            g->dst = to_stage ? ((uint64_t)m * spb + x) * d->stage_stride
                              : (uint64_t)t->miss_slots[m] * s->slot_bytes +
                                    (kind ? d->v_off : 0) +
                                    (uint64_t)h * (uint64_t)B * (uint64_t)D * es;
            g->length = l->length; /* = valid rows x D x es: finish_read checked it */
            g->crc_raw = crc_raw_of(&d->crc, l->crc, l->length);
            g->id = (uint32_t)d->ngrec;
            g->pad = 0;
            const gather_rec r = {q, p->layer, t->miss_blocks[m], t->miss_slots[m], h, kind,
                                  l->entry, l->generation};
            SW_TRY(grec_push(d, &r));
        }
    }
    *n = ng;
    return SW_OK;
}

/* The tile's descriptors in the pinned descriptor space: its blocks, its
 * fills (blocks scattered from the staging: every missing block when its
 * stripes were gathered ahead into the staging, else those not wholly
 * leased) and, when not gathered ahead, its gather items. Offsets of each
 * and the end of the span to upload. */
static sw_status build_desc(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                            const sw_swap_dev_tile *t, int gathered, size_t *bo_o, size_t *fo_o,
                            size_t *go_o, size_t *end_o, int32_t *nfill_o, int32_t *ngather_o,
                            uint64_t *kv_o)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim;
    const sw_swap_layer *L = &q->layers[p->layer];
    const size_t spb = 2 * (size_t)H; /* stripes per block */
    int32_t nfill = 0, ngather = 0;
    for (int32_t m = 0; m < t->nmiss; m++) {
        int32_t leased = 0;
        for (size_t x = 0; t->lease && x < spb; x++)
            leased += t->lease[(size_t)m * spb + x].ptr != NULL;
        if (!gathered)
            ngather += leased;
        /* gathered ahead: the whole block is in the staging */
        nfill += gathered || (size_t)leased < spb;
    }
    size_t bo = 0, fo = 0, go = 0;
    sw_cuda_swap_blk *bd = desc_take(d, sizeof(sw_cuda_swap_blk) * (size_t)t->n, &bo);
    sw_cuda_swap_fill *fd = nfill > 0
                                ? desc_take(d, sizeof(sw_cuda_swap_fill) * (size_t)nfill, &fo)
                                : NULL;
    sw_cuda_swap_gather_item *gd =
        ngather > 0 ? desc_take(d, sizeof(*gd) * (size_t)ngather, &go) : NULL;
    if (!bd || (nfill > 0 && !fd) || (ngather > 0 && !gd))
        return sw_fail(SW_STATUS_INTERNAL, "device descriptors exhausted (%zu of %zu bytes)",
                       d->desc_used, d->desc_bytes);
    uint64_t kv_bytes = 0;
    for (int32_t i = 0; i < t->n; i++) {
        const sw_swap_blk *e = &L->blk[t->blocks[i]];
        memset(&bd[i], 0, sizeof bd[i]);
        bd[i].slot = t->slots[i];
        bd[i].block = t->blocks[i];
        bd[i].valid = e->valid;
        bd[i].dtype = e->dtype;
        bd[i].k_scale = e->k_scale;
        bd[i].v_scale = e->v_scale;
        kv_bytes += 2 * (uint64_t)H * (uint64_t)e->valid * (uint64_t)D *
                    sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
    }
    int32_t nf = 0, ng = 0;
    if (ngather > 0)
        SW_TRY(gather_items(s, p, q, t, 0, gd, &ng));
    for (int32_t m = 0; m < t->nmiss; m++) {
        const sw_swap_blk *e = &L->blk[t->miss_blocks[m]];
        size_t leased = 0;
        for (size_t x = 0; t->lease && x < spb; x++)
            leased += t->lease[(size_t)m * spb + x].ptr != NULL;
        if (leased == spb && !gathered)
            continue; /* nothing of it in the staging */
        /* the slot the tile planned, not the block's current one: a tile
         * planned since (read-ahead) may already have evicted this block */
        fd[nf].slot = t->miss_slots[m];
        fd[nf].m = m;
        fd[nf].valid = e->valid;
        fd[nf].dtype = e->dtype;
        nf++;
    }
    /* fills and gathers follow the blocks in the descriptor space: one copy */
    *end_o = ngather > 0 ? go + sizeof(*gd) * (size_t)ngather
                       : nfill > 0 ? fo + sizeof(sw_cuda_swap_fill) * (size_t)nfill
                                   : bo + sizeof(sw_cuda_swap_blk) * (size_t)t->n;
    *bo_o = bo;
    *fo_o = fo;
    *go_o = go;
    *nfill_o = nfill;
    *ngather_o = ngather;
    *kv_o = kv_bytes;
    return SW_OK;
}

/* 1 when tile t goes to the direct kernel: direct tiles on, a missing
 * block in it (a tile of resident blocks goes to the faster tile kernels:
 * the direct kernel's CTAs of one block each are made for PCIe reads),
 * nothing of it in the staging, every stripe of its missing blocks leased at
 * the length its block has, BF16 blocks only, and a shape the kernel takes. */
static int direct_tile(const sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                       const sw_swap_dev_tile *t)
{
    const sw_swap_dev *d = s->dev;
    if (!d->direct || t->gathered || t->nmiss == 0 || !t->lease)
        return 0;
    const int32_t H = s->m.num_kv_heads, G = s->m.num_qo_heads / H, D = s->m.head_dim;
    const int64_t ql = p->q_indptr[t->bi + 1] - p->q_indptr[t->bi];
    const int32_t nrg = (int32_t)((ql * G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG);
    if (!sw_cuda_swap_direct_ok(D, s->m.block_size, nrg))
        return 0;
    const sw_swap_layer *L = &q->layers[p->layer];
    for (int32_t i = 0; i < t->n; i++)
        if (L->blk[t->blocks[i]].dtype != SW_SWAP_KV_BF16)
            return 0;
    const size_t spb = 2 * (size_t)H;
    for (int32_t m = 0; m < t->nmiss; m++) {
        const size_t want = (size_t)L->blk[t->miss_blocks[m]].valid * (size_t)D * 2;
        for (size_t x = 0; x < spb; x++) {
            const sw_store_lease *l = &t->lease[(size_t)m * spb + x];
            if (!l->ptr || l->length != want)
                return 0;
        }
    }
    return 1;
}

int sw_swap_dev_direct_tile(const sw_swap *s, const sw_swap_attend_params *p,
                            const sw_swap_seq *q, const sw_swap_dev_tile *t)
{
    return s->dev && direct_tile(s, p, q, t);
}

sw_status sw_swap_dev_gather(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                             const sw_swap_dev_tile *t, int *issued)
{
    sw_swap_dev *d = s->dev;
    *issued = 0;
    if (t->direct)
        return SW_OK; /* the direct kernel reads it when the tile computes */
    if (!d->gather || !t->lease || t->hbuf < 0 || t->hbuf >= d->nhstage || t->buf < 0 ||
        t->buf >= d->nhstage)
        return SW_OK;
    const size_t spb = 2 * (size_t)s->m.num_kv_heads;
    const sw_swap_layer *L = &q->layers[p->layer];
    int32_t ngather = 0;
    for (int32_t m = 0; m < t->nmiss; m++) {
        /* Issued before finish_read has checked the leases: a length other
         * than the block's would write past its stripe, so such a tile
         * waits for that check (which fails the call) on the old path. */
        const sw_swap_blk *e = &L->blk[t->miss_blocks[m]];
        const size_t want = (size_t)e->valid * (size_t)s->m.head_dim *
                            sw_swap_kv_elem_size((sw_swap_kv_dtype)e->dtype);
        size_t leased = 0;
        for (size_t x = 0; x < spb; x++) {
            const sw_store_lease *l = &t->lease[(size_t)m * spb + x];
            if (!l->ptr)
                continue;
            if (l->length != want)
                return SW_OK;
            leased++;
        }
        ngather += (int32_t)leased;
    }
    if (ngather == 0)
        return SW_OK;
    size_t go = 0;
    sw_cuda_swap_gather_item *gd = desc_take(d, sizeof(*gd) * (size_t)ngather, &go);
    if (!gd)
        return sw_fail(SW_STATUS_INTERNAL, "device descriptors exhausted (%zu of %zu bytes)",
                       d->desc_used, d->desc_bytes);
    int32_t n = 0;
    SW_TRY(gather_items(s, p, q, t, 1, gd, &n));
    struct dev_pre *pr = &d->pre[t->hbuf];
    int32_t ng0 = 0;
    size_t go0 = 0;
    SW_TRY(build_desc(s, p, q, t, 1, &pr->bo, &pr->fo, &go0, &pr->end, &pr->nfill, &ng0,
                      &pr->kv_bytes));
    void *gs = d->gstream[d->gnext];
    d->gnext ^= 1;
    /* into the tile's device staging, once the scatter of the tile that
     * used it before (a ring's length earlier) has run; the tile's
     * descriptors go up first, on the same stream */
    SW_TRY(sw_cuda_swap_stream_wait(gs, d->ev_stage[t->buf]));
    if (t->land_ev) /* its landed stripes' copies */
        SW_TRY(sw_cuda_swap_stream_wait(gs, t->land_ev));
    SW_TRY(desc_up(d, pr->bo, pr->end - pr->bo, gs));
    pr->set = 1;
    sw_cuda_swap_gather_args ga;
    memset(&ga, 0, sizeof ga);
    ga.g = gd; /* pinned: the kernel reads the items over PCIe, no upload */
    ga.n = n;
    ga.pool = d->stage[t->buf];
    ga.bad = d->d_bad;
    ga.bad_cap = SW_SWAP_BAD_CAP;
    ga.ctas = d->gather_ctas;
    d->gissued = 1; /* from here the verdict waits for the gather streams */
    tl_mark(d, gs, 'g', t->hbuf);
    SW_TRY(sw_cuda_swap_gather(&ga, gs));
    tl_mark(d, gs, 'G', t->hbuf);
    SW_TRY(sw_cuda_swap_event_record(d->ev_g[t->hbuf], gs));
    *issued = 1;
    return SW_OK;
}

/* Tile t through the direct kernel on stream cs, its partials in part. */
/* The tile kernels' arguments both tile paths share: the sequence's rows,
 * shapes, state and partials (nchunks: a direct tile's one per block, else
 * sw_swap_dev_chunks'), checked against the partials planned. The caller
 * sets blk. */
static sw_status tile_args_of(const sw_swap *s, const sw_swap_attend_params *p,
                              const sw_swap_seq *q, const sw_swap_dev_tile *t, float *part,
                              int direct, sw_cuda_swap_tile_args *a)
{
    const sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t D = s->m.head_dim, B = s->m.block_size;
    const sw_swap_layer *L = &q->layers[p->layer];
    const int32_t r0 = p->q_indptr[t->bi];
    const int32_t ql = p->q_indptr[t->bi + 1] - r0;
    memset(a, 0, sizeof *a);
    a->pool = d->pool;
    a->slot_bytes = s->slot_bytes;
    a->v_off = d->v_off;
    a->nblk = t->n;
    a->q = (const uint16_t *)p->q + (size_t)r0 * (size_t)Hq * (size_t)D;
    a->ql = ql;
    a->Hq = Hq;
    a->H = H;
    a->G = G;
    a->D = D;
    a->B = B;
    a->len = L->nblocks ? (int64_t)(L->nblocks - 1) * B + L->blk[L->nblocks - 1].valid : 0;
    a->causal = p->causal;
    const float scale = p->sm_scale != 0.0f ? p->sm_scale : 1.0f / sqrtf((float)D);
    a->qscale = scale * 1.4426950408889634f;
    a->nrg = (int32_t)(((int64_t)ql * G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG);
    a->nchunks = direct ? t->n : sw_swap_dev_chunks(t->n, H, a->nrg, d->ctas);
    if ((size_t)a->nchunks * (size_t)H * (size_t)a->nrg * SW_CUDA_SWAP_RG * (size_t)(D + 2) >
        d->part_floats)
        return sw_fail(SW_STATUS_INTERNAL, "tile partials: %d chunks x %d row groups exceed "
                       "the %zu floats planned", a->nchunks, a->nrg, d->part_floats);
    a->part = part;
    a->row0 = r0;
    a->m = d->d_m;
    a->l = d->d_l;
    a->acc = d->d_acc;
    return SW_OK;
}

/* Direct mode: the merge of the tile just enqueued on cs (partials in
 * buffer kp) on the merge stream, after it. */
static sw_status merge_behind(sw_swap_dev *d, const sw_cuda_swap_tile_args *a, void *cs, int kp)
{
    SW_TRY(sw_cuda_swap_event_record(d->ev_kdone[kp], cs));
    SW_TRY(sw_cuda_swap_stream_wait(d->mstream, d->ev_kdone[kp]));
    if (d->d_part2)
        SW_TRY(sw_cuda_swap_merge_split(a, d->d_part2, d->part2_floats, d->sms, d->mstream));
    else
        SW_TRY(sw_cuda_swap_merge_wide(a, d->mstream));
    tl_mark(d, d->mstream, 'M', kp);
    return sw_cuda_swap_event_record(d->ev_mdone[kp], d->mstream);
}

static sw_status compute_direct(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                                const sw_swap_dev_tile *t, void *cs, float *part, int kp,
                                int kprev)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim;
    const sw_swap_layer *L = &q->layers[p->layer];
    const size_t spb = 2 * (size_t)H;
    size_t bo = 0, go = 0;
    sw_cuda_swap_dblk *bd = desc_take(d, sizeof(sw_cuda_swap_dblk) * (size_t)t->n, &bo);
    const size_t nitems = (size_t)t->nmiss * spb;
    sw_cuda_swap_gather_item *gd =
        nitems > 0 ? desc_take(d, sizeof(*gd) * nitems, &go) : NULL;
    if (!bd || (nitems > 0 && !gd))
        return sw_fail(SW_STATUS_INTERNAL, "device descriptors exhausted (%zu of %zu bytes)",
                       d->desc_used, d->desc_bytes);
    int32_t ng = 0;
    if (nitems > 0)
        SW_TRY(gather_items(s, p, q, t, 0, gd, &ng)); /* dst: the victim slot's stripe */
    if ((size_t)ng != nitems)
        return sw_fail(SW_STATUS_INTERNAL, "direct tile: %d of %zu stripes leased", ng, nitems);
    uint64_t kv_bytes = 0;
    int32_t m = 0;
    for (int32_t i = 0; i < t->n; i++) {
        const sw_swap_blk *e = &L->blk[t->blocks[i]];
        bd[i].slot = t->slots[i];
        bd[i].block = t->blocks[i];
        bd[i].valid = e->valid;
        bd[i].item = -1;
        if (m < t->nmiss && t->miss_blocks[m] == t->blocks[i]) {
            bd[i].item = (int32_t)((size_t)m * spb); /* misses in tile order */
            m++;
        }
        kv_bytes += 2 * (uint64_t)H * (uint64_t)e->valid * (uint64_t)D * 2;
    }
    if (m != t->nmiss)
        return sw_fail(SW_STATUS_INTERNAL, "direct tile: %d of %d missing blocks placed", m,
                       t->nmiss);
    const size_t end = nitems > 0 ? go + sizeof(*gd) * nitems : bo + sizeof(*bd) * (size_t)t->n;
    sw_cuda_swap_direct_args A;
    memset(&A, 0, sizeof A);
    SW_TRY(tile_args_of(s, p, q, t, part, 1, &A.t)); /* nrg = 1: direct_tile checked it */
    A.blk = (const sw_cuda_swap_dblk *)(DESC_K(d) + bo);
    A.items = nitems > 0 ? (const sw_cuda_swap_gather_item *)(DESC_K(d) + go) : NULL;
    A.pool = d->pool;
    A.bad = d->d_bad;
    A.bad_cap = SW_SWAP_BAD_CAP;
    launch_job j;
    j.A = A;
    j.cs = cs;
    j.bo = bo;
    j.end = end;
    j.kp = kp;
    j.kprev = kprev;
    j.tag = 10 * t->hbuf + 4;
    j.land_ev = t->land_ev;
    j.first = j.last = 1;
    j.ranged = 0;
    s->st.kernel_kv_bytes += kv_bytes;
    struct prelease *P = d->pl;
    if (!t->miss_ev || !P || d->land_groups <= 1)
        return launch_push(d, &j);
    /* Its chunks in groups by the landing launch they wait for (the latest
     * of their blocks'; nondecreasing over the tile), at most land_groups,
     * each launched after its own: the chunks over the last landed blocks,
     * not the whole tile, then run after the call's last copy. */
    const int32_t nch = A.t.nchunks, nb = A.t.nblk;
    /* groups: gc[k] its first chunk, ge[k] its event (-1: none); a group
     * opens where the running event grows; past land_groups, the earliest
     * fold into the first (which then waits for the latest of them) */
    int32_t gc[SW_SWAP_LAND_GROUPS_MAX], ge[SW_SWAP_LAND_GROUPS_MAX];
    int32_t ngr = 0, ev_run = -1;
    m = 0;
    for (int32_t c = 0, i = 0; c < nch; c++) {
        const int32_t i1 = (int32_t)((int64_t)nb * (c + 1) / nch);
        int32_t ev = ev_run;
        for (; i < i1; i++)
            if (bd[i].item >= 0) {
                const int32_t e = t->miss_ev[m++];
                ev = e > ev ? e : ev;
            }
        if (c > 0 && ev == ev_run)
            continue;
        ev_run = ev;
        if (ngr == d->land_groups) {
            /* fold group 1 into group 0 */
            ge[0] = ge[1];
            for (int32_t k = 1; k + 1 < ngr; k++) {
                gc[k] = gc[k + 1];
                ge[k] = ge[k + 1];
            }
            ngr--;
        }
        gc[ngr] = c;
        ge[ngr] = ev;
        ngr++;
    }
    for (int32_t k = 0; k < ngr; k++) {
        launch_job g = j;
        g.A.c0 = gc[k];
        g.A.nch = (k + 1 < ngr ? gc[k + 1] : nch) - gc[k];
        g.land_ev = ge[k] >= 0 ? P->lev[ge[k]] : NULL;
        g.first = k == 0;
        g.last = k + 1 == ngr;
        g.ranged = 1; /* even alone: how many groups there are is timing's */
        SW_TRY(launch_push(d, &g));
    }
    return SW_OK;
}

sw_status sw_swap_dev_compute(sw_swap *s, const sw_swap_attend_params *p, const sw_swap_seq *q,
                              const sw_swap_dev_tile *t, void *stream)
{
    sw_swap_dev *d = s->dev;
    float *part = d->d_part;
    int kp = 0;
    if (d->direct) {
        /* The pass's tiles take the two tile streams and the partial
         * buffers in turn; a buffer is reused after its last merge (tile j
         * - 4's: so tile j also follows every tile <= j - 4, merges being
         * in order). Tile j writes victim slots that tile j - 1 never uses
         * (it was pinned when tile j was planned) but that tile j - 3, on
         * the other stream, may still read or write: tile j waits for it.
         * Without read-ahead (prefetch 0) tile j is planned after tile j - 1
         * was unpinned: it waits for tile j - 1. */
        const int64_t back = s->prefetch > 0 ? 3 : 1;
        const int kprev = d->ptile >= back ? (int)((d->ptile - back) % SW_SWAP_NPART) : -1;
        kp = (int)(d->ptile % SW_SWAP_NPART);
        stream = d->pstream[d->ptile & 1];
        part = d->d_partk[kp];
        d->ptile++;
        if (t->direct)
            return compute_direct(s, p, q, t, stream, part, kp, kprev);
        /* a staged tile: its calls from this thread, after the launcher's */
        SW_TRY(launch_drain(d));
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_mdone[kp]));
        if (kprev >= 0)
            SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_kdone[kprev]));
    }
    const int32_t H = s->m.num_kv_heads, D = s->m.head_dim, B = s->m.block_size;
    /* descriptors of the tile, its fills and its gathers in one upload:
     * uploaded ahead with its gathers, or now */
    size_t bo = 0, fo = 0, go = 0, end = 0;
    int32_t nfill = 0, ngather = 0;
    uint64_t kv_bytes = 0;
    if (t->gathered) {
        /* sw_swap_dev_gather built them and put them on the gather stream
         * before the gather: ev_g covers the upload */
        if (!d->pre || t->hbuf < 0 || t->hbuf >= d->nhstage || !d->pre[t->hbuf].set)
            return sw_fail(SW_STATUS_INTERNAL, "tile gathered ahead without its descriptors");
        struct dev_pre *pr = &d->pre[t->hbuf];
        bo = pr->bo;
        fo = pr->fo;
        end = pr->end;
        nfill = pr->nfill;
        kv_bytes = pr->kv_bytes;
        pr->set = 0;
    } else {
        SW_TRY(build_desc(s, p, q, t, 0, &bo, &fo, &go, &end, &nfill, &ngather, &kv_bytes));
    }
    tl_mark(d, stream, 'c', 10 * t->hbuf + (t->gathered ? 1 : 0) + (ngather > 0 ? 2 : 0));
    if (!t->gathered)
        SW_TRY(desc_up(d, bo, end - bo, stream));
    tl_mark(d, stream, 'u', t->hbuf);
    if (t->gathered) /* its gathers into the staging, issued ahead on a gather stream */
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_g[t->hbuf]));
    if (nfill > 0) {
        /* A block with some stripes gathered (the host tier held part of
         * it) is scattered whole: the gather below overwrites those. */
        sw_cuda_swap_scatter_args sa;
        memset(&sa, 0, sizeof sa);
        sa.stage = d->stage[t->buf];
        sa.stage_stride = d->stage_stride;
        sa.stage_blocks = s->tile_blocks;
        sa.layout = t->layout;
        sa.fill = (const sw_cuda_swap_fill *)(DESC_K(d) + fo);
        sa.nfill = nfill;
        sa.pool = d->pool;
        sa.slot_bytes = s->slot_bytes;
        sa.v_off = d->v_off;
        sa.H = H;
        sa.B = B;
        sa.D = D;
        SW_TRY(sw_cuda_swap_scatter(&sa, stream));
    }
    if (ngather > 0) {
        sw_cuda_swap_gather_args ga;
        memset(&ga, 0, sizeof ga);
        ga.g = (const sw_cuda_swap_gather_item *)(DESC_K(d) + go);
        ga.n = ngather;
        ga.pool = d->pool;
        ga.bad = d->d_bad;
        ga.bad_cap = SW_SWAP_BAD_CAP;
        ga.ctas = d->gather_ctas;
        if (t->land_ev) /* its landed stripes' copies */
            SW_TRY(sw_cuda_swap_stream_wait(stream, t->land_ev));
        SW_TRY(sw_cuda_swap_gather(&ga, stream));
    }
    /* the staging buffer may be refilled once the scatter has run */
    SW_TRY(sw_cuda_swap_event_record(d->ev_stage[t->buf], stream));
    sw_cuda_swap_tile_args a;
    SW_TRY(tile_args_of(s, p, q, t, part, 0, &a));
    a.blk = (const sw_cuda_swap_blk *)(DESC_K(d) + bo);
    void *e0 = NULL, *e1 = NULL;
    if (d->timing) {
        SW_TRY(timing_event(d, 2 * d->tev_used, &e0));
        SW_TRY(timing_event(d, 2 * d->tev_used + 1, &e1));
        SW_TRY(sw_cuda_swap_event_record(e0, stream));
    }
    SW_TRY(sw_cuda_swap_tile(&a, stream));
    if (d->timing) {
        SW_TRY(sw_cuda_swap_event_record(e1, stream));
        d->tev_used++;
    }
    if (d->direct) /* on the merge stream, in tile order */
        SW_TRY(merge_behind(d, &a, stream, kp));
    else
        SW_TRY(sw_cuda_swap_merge(&a, stream));
    tl_mark(d, stream, 'C', t->hbuf);
    s->st.kernel_kv_bytes += kv_bytes;
    return SW_OK;
}

sw_status sw_swap_dev_pass_end(sw_swap *s, const sw_swap_attend_params *p, void *o, float *lse,
                               float *host_f32, void *stream)
{
    sw_swap_dev *d = s->dev;
    const int32_t D = s->m.head_dim;
    SW_TRY(launch_drain(d));
    if (d->direct && d->ptile > 0) {
        /* the finalisation after both tile streams and the merge stream */
        for (int i = 0; i < 3; i++) {
            void *x = i < 2 ? d->pstream[i] : d->mstream;
            SW_TRY(sw_cuda_swap_event_record(d->ev_pass, x));
            SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_pass));
        }
    }
    if (d->hrows <= 0)
        return SW_OK;
    SW_TRY(sw_cuda_swap_finalize(d->d_m, d->d_l, d->d_acc, d->hrows, D, o, lse,
                                 host_f32 ? d->d_f32 : NULL, stream));
    tl_mark(d, stream, 'Z', 0);
    if (host_f32) {
        SW_TRY(sw_cuda_swap_copy(host_f32, d->d_f32, sizeof(float) * (size_t)d->hrows * D,
                                 stream));
        SW_TRY(sw_cuda_stream_sync(stream));
    }
    return SW_OK;
}

sw_status sw_swap_dev_attend_end(sw_swap *s, void *stream)
{
    sw_swap_dev *d = s->dev;
    SW_TRY(sw_cuda_swap_event_record(d->ev_done, stream));
    d->done_pending = 1;
    sw_swap_dev_tl_phase(s, 'E');
    if (d->tline && d->ntl > 0) {
        SW_TRY(wait_done(d));
        tl_report(d);
    }
    if (d->timing && d->tev_used > 0) {
        SW_TRY(wait_done(d));
        double sum = 0;
        for (int32_t i = 0; i < d->tev_used; i++) {
            float ms = 0;
            SW_TRY(sw_cuda_swap_event_ms(&ms, d->tev[2 * i], d->tev[2 * i + 1]));
            sum += ms;
        }
        s->st.kernel_seconds += sum * 1e-3;
        d->tev_used = 0;
    }
    return SW_OK;
}

sw_status sw_swap_dev_score_host(sw_swap *s, const sw_swap_layer *L, const void *q,
                                 int32_t q_len, float *scores)
{
    sw_swap_dev *d = s->dev;
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t D = s->m.head_dim, R = s->c.predictor_rank;
    const int32_t n = L->nblocks;
    const int64_t hrows = (int64_t)q_len * Hq;
    SW_TRY(wait_done(d));
    SW_TRY(ensure_desc(d, sw_align_up(sizeof(sw_cuda_swap_sblk) * ((size_t)n + 1), 16) +
                              sw_align_up(sizeof(float) * ((size_t)n + 1), 16) +
                              sw_align_up((size_t)hrows * D * 2, 16) + 64));
    SW_TRY(ensure_ws(d, sw_align_up((size_t)hrows * (size_t)R, 4) + (size_t)n + 4));
    d->desc_used = 0;
    size_t so = 0, fo = 0, qo = 0;
    sw_cuda_swap_sblk *sb = desc_take(d, sizeof *sb * ((size_t)n + 1), &so);
    float *sh = desc_take(d, sizeof(float) * ((size_t)n + 1), &fo);
    uint16_t *qh = desc_take(d, (size_t)hrows * D * 2, &qo);
    if (!sb || !sh || !qh)
        return sw_fail(SW_STATUS_INTERNAL, "score descriptors");
    for (int32_t i = 0; i < n; i++) {
        const sw_swap_blk *e = &L->blk[i];
        sb[i].entry = e->valid > 0 && e->dtype == SW_SWAP_KV_BF16 ? e->dproj : -1;
        sb[i].valid = e->valid;
        sb[i].row0 = 0;
        sb[i].ql = q_len;
    }
    memcpy(qh, q, (size_t)hrows * D * 2);
    float *qp = d->ws, *dsc = d->ws + sw_align_up((size_t)hrows * R, 4);
    void *st = d->own_stream;
    /* descriptors and the query rows in one upload (the scores' room rides along) */
    SW_TRY(sw_cuda_swap_copy(d->desc_dev + so, d->desc_host + so,
                             qo + (size_t)hrows * D * 2 - so, st));
    SW_TRY(sw_cuda_swap_project(d->P, D, R, (const uint16_t *)(d->desc_dev + qo), hrows, qp, st));
    SW_TRY(sw_cuda_swap_score(qp, d->arena, (const sw_cuda_swap_sblk *)(d->desc_dev + so), n, H,
                              G, s->m.block_size, R, dsc, st));
    SW_TRY(sw_cuda_swap_copy(sh, dsc, sizeof(float) * (size_t)n, st));
    SW_TRY(sw_cuda_stream_sync(st));
    memcpy(scores, sh, sizeof(float) * (size_t)n);
    return SW_OK;
}

#ifndef SW_HAVE_CUDA
/* A build without CUDA never creates a device pool; src/core/cuda_stub.c
 * has no entry for the gather kernel, so its stub lives here. */
sw_status sw_cuda_swap_gather(const sw_cuda_swap_gather_args *a, void *stream)
{
    (void)a;
    (void)stream;
    return sw_fail(SW_STATUS_NO_DEVICE, "this build of Spillway has no CUDA support");
}
#endif
