/* The prelease thread: a sequence's host-tier leases taken while the caller
 * plans, and their landing (copy-engine copies into a device buffer, an
 * event per launch); a tile's leases (the thread's where it has them) and
 * the release of the call's leases. */
#include "dev_internal.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void prelease_free(struct prelease *P);

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
        uint64_t nbytes = 0;
        {
            /* copy engine: one copy per run of stripes that lie as far
             * apart in the host tier as in the landing (whole entries):
             * adjacent, or across a gap of blocks the job skips that has
             * landing room (loff); ~3.6 us each besides its bytes, so made
             * for long runs (run-aware eviction, the gaps). The host tier
             * is one pinned allocation, so a gap is readable memory. A
             * tile's own read from the landing checks the CRC. */
            const sw_cuda_swap_gather_item *g = P->items + P->item0;
            const int64_t n = P->nitem - P->item0;
            const uint64_t stb = P->land_stride;
            const uint64_t most = ((uint64_t)P->land_gap * 2 * (uint64_t)P->H + 1) * stb;
            /* the runs go out in batches of LAND_BATCH, one runtime call
             * each (sw_cuda_swap_copy_batch) */
            enum { LAND_BATCH = 64 };
            void *bd[LAND_BATCH];
            const void *bs[LAND_BATCH];
            size_t bb[LAND_BATCH];
            size_t nb = 0;
            for (int64_t k = 0; k < n && st == SW_OK;) {
                int64_t r = k + 1;
                while (r < n && g[r].dst > g[r - 1].dst && g[r].dst - g[r - 1].dst <= most &&
                       (const uint8_t *)g[r].src ==
                           (const uint8_t *)g[r - 1].src + (g[r].dst - g[r - 1].dst))
                    r++;
                bd[nb] = P->land + g[k].dst;
                bs[nb] = g[k].src;
                bb[nb++] = (size_t)(g[r - 1].dst - g[k].dst + stb);
                nbytes += bb[nb - 1];
                if (nb == LAND_BATCH || r == n) {
                    st = sw_cuda_swap_copy_batch(bd, bs, bb, nb, P->lstream);
                    nb = 0;
                }
                ncopy++;
                k = r;
            }
        }
        if (st == SW_OK && sw_cuda_swap_event_record(e, P->lstream) == SW_OK) {
            ev = P->chunk0 + P->ljob_ev++;
            if (P->tline && P->lt_n < 256) {
                P->lt_ev[P->lt_n] = ev;
                P->lt_host[P->lt_n] = sw_swap_tl_now();
                P->lt_items[P->lt_n] = (int32_t)(P->nitem - P->item0);
                P->lt_copies[P->lt_n] = ncopy;
                P->lt_mb[P->lt_n] = (double)nbytes / (1 << 20);
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
        g->dst = ((uint64_t)P->job_land0 + (uint64_t)P->loff[i] * spb + x) * st;
        g->length = lb[x].length;
        g->crc_raw = sw_swap_crc_raw(&P->crc, lb[x].crc, lb[x].length);
        g->id = 0;
        g->pad = 0;
    }
    P->pend[P->npend++] = i;
    return 1;
}

void sw_swap_land_offsets(const int32_t *blocks, int32_t n, int32_t gap_max, int32_t *loff)
{
    for (int32_t i = 0; i < n; i++) {
        const int32_t gap = i > 0 ? blocks[i] - blocks[i - 1] - 1 : 0;
        loff[i] = i == 0 ? 0 : loff[i - 1] + 1 + (gap > 0 && gap <= gap_max ? gap : 0);
    }
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

/* The claimed blocks mine[0..nm) whose leases are kept (kept_of[j] 1),
 * retouched in one store call: their number. None when the call may not
 * use kept leases, and none (the call's kept leases then unused: stale)
 * when a generation differs from the block's or the retouch fails. */
static int kept_reuse(struct prelease *P, const int32_t *mine, int32_t nm, uint8_t *kept_of)
{
    memset(kept_of, 0, (size_t)nm);
    if (!P->kept || P->kept_stale)
        return 0;
    const size_t spb = 2 * (size_t)P->H;
    const sw_swap_blk *blk = P->q->layers[P->layer].blk;
    size_t nr = 0;
    int n = 0;
    for (int32_t j = 0; j < nm; j++) {
        const int32_t b = P->blk[mine[j]];
        if (b >= P->kept_blocks || !P->kept[(size_t)b * spb].ptr)
            continue;
        const sw_store_lease *k = &P->kept[(size_t)b * spb];
        for (size_t x = 0; x < spb; x++) {
            if (k[x].generation != blk[b].gen[x]) {
                P->kept_stale = 1; /* rewritten without its kept leases dropped: never expected */
                memset(kept_of, 0, (size_t)nm);
                return 0;
            }
            P->rt[nr++] = k[x].entry;
        }
        kept_of[j] = 1;
        n++;
    }
    if (nr && !sw_store_host_retouch(P->store, P->kept_unmaps, nr, P->rt)) {
        P->kept_stale = 1;
        memset(kept_of, 0, (size_t)nm);
        return 0;
    }
    P->kept_visits += (uint64_t)n;
    return n;
}

/* Block i's new leases lb[0..2H) kept with its layer (1) when the call may
 * take kept leases, the block is whole (bsize tokens) and wholly leased at
 * the generations the engine wrote, and the engine's kept stripes stay
 * within kept_lim; else 0 (released at the call's end). */
static int kept_take(struct prelease *P, int32_t i, const sw_store_lease *lb)
{
    const size_t spb = 2 * (size_t)P->H;
    const int32_t b = P->blk[i];
    if (!P->kept || P->kept_stale || b >= P->kept_blocks || P->kept[(size_t)b * spb].ptr ||
        P->kept_n + (int64_t)spb > P->kept_lim)
        return 0; /* (a block kept already keeps its leases) */
    const sw_swap_blk *e = &P->q->layers[P->layer].blk[b];
    if (e->valid != P->bsize)
        return 0;
    for (size_t x = 0; x < spb; x++)
        if (!lb[x].ptr || lb[x].generation != e->gen[x])
            return 0; /* (a stripe rewritten behind the engine: its tile says so) */
    memcpy(&P->kept[(size_t)b * spb], lb, sizeof *lb * spb);
    P->kept_n += (int64_t)spb;
    return 1;
}

/* Room in the entry list for `more` entries (grown by doubling): 1 when
 * there is. */
static int ent_room(struct prelease *P, size_t more)
{
    if (P->nent + more > P->ent_cap) {
        size_t nc = P->ent_cap ? 2 * P->ent_cap : 4096;
        while (nc < P->nent + more)
            nc *= 2;
        uint32_t *e = realloc(P->ent, sizeof(uint32_t) * nc);
        if (e) {
            P->ent = e;
            P->ent_cap = nc;
        }
    }
    return P->nent + more <= P->ent_cap;
}

/* Room in lev for `more` events past lev_used (created as needed, 16
 * spare): 1 when there is. */
static int lev_room(struct prelease *P, int32_t more)
{
    if (P->lev_used + more > P->lev_cap) {
        const int32_t cap = P->lev_used + more + 16;
        void **ev = realloc(P->lev, sizeof *ev * (size_t)cap);
        if (ev) {
            P->lev = ev;
            while (P->lev_cap < cap &&
                   sw_cuda_swap_event_create(&P->lev[P->lev_cap], P->tline) == SW_OK)
                P->lev_cap++;
        }
    }
    return P->lev_used + more <= P->lev_cap;
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
        /* blocks with kept leases reuse them after one retouch (else they
         * are leased like the rest) */
        uint8_t kept_of[PL_CH];
        const int kept_nr = kept_reuse(P, mine, nm, kept_of);
        size_t nk = 0;
        for (int32_t j = 0; j < nm; j++) {
            if (kept_of[j])
                continue;
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
        }
        size_t got = 0;
        if (!ent_room(P, nk) ||
            (nk && sw_store_host_lease(P->store, nk, kb, 16, lb, &got) != SW_OK))
            got = 0; /* nothing leased: those blocks' tiles read them */
        else
            got += (size_t)kept_nr * spb;
        if (got && kept_nr) {
            /* each block's leases to its place in lb, the new ones moved up
             * from their key order (from the last block: none is
             * overwritten before it moves) */
            size_t src = nk;
            for (int32_t j = nm; j-- > 0;) {
                sw_store_lease *dst = &lb[(size_t)j * spb];
                if (kept_of[j]) {
                    memcpy(dst, &P->kept[(size_t)P->blk[mine[j]] * spb], sizeof *dst * spb);
                } else {
                    src -= spb;
                    memmove(dst, &lb[src], sizeof *dst * spb);
                }
            }
        }
        for (int32_t j = 0; j < nm; j++) {
            const int keep = got && !kept_of[j] && kept_take(P, mine[j], &lb[(size_t)j * spb]);
            for (size_t x = 0; x < spb; x++) {
                sw_store_lease *l = &P->lease[(size_t)mine[j] * spb + x];
                if (got) {
                    *l = lb[(size_t)j * spb + x];
                    if (l->ptr && !kept_of[j] && !keep)
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
void sw_swap_land_report(sw_swap_dev *d, int call)
{
    struct prelease *P = d->pl;
    for (int32_t i = 0; P && call >= 0 && i < P->lt_n; i++) {
        /* the landing launches: their end on the GPU, the thread's clock */
        float ms = -1.0f;
        if (sw_cuda_swap_event_ms(&ms, d->tl_ev[0], P->lev[P->lt_ev[i]]) != SW_OK)
            ms = -1.0f;
        fprintf(stderr,
                "swap timeline %d: L %3d gpu %8.3f ms host %8.3f ms (%d stripes, %d copies, "
                "%.2f MiB)\n",
                call, i, ms, 1e3 * (P->lt_host[i] - d->tl_host[0]), P->lt_items[i],
                P->lt_copies[i], P->lt_mb[i]);
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
            sw_swap_poll_change(&P->posted, 0u, P->spin_s);
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
                P->lt_wake = sw_swap_tl_now();
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
void sw_swap_prelease_wait(struct prelease *P, int cancel)
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

sw_status sw_swap_prelease_start(sw_swap *s)
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
    P->bsize = s->m.block_size;
    P->fresh = 1;
    P->prev_layer = -1;
    P->a_layer = -1;
    {
        const int64_t pct = s->tune.kept_pct;
        P->kept_max = pct > 0 && pct <= 100
                          ? (int64_t)sw_store_host_entries(s->store) * pct / 100
                          : 0;
        P->rt = P->kept_max > 0 ? malloc(sizeof *P->rt * PL_CH * 2 * (size_t)P->H) : NULL;
        if (!P->rt)
            P->kept_max = 0;
        P->kept_unmaps = sw_store_host_unmaps(s->store, NULL);
        const int64_t idle = s->tune.kept_idle_ms;
        P->kept_idle_s = idle > 0 ? 1e-3 * (double)idle : 0.0;
    }
    atomic_init(&P->posted, 0u);
    d->pl = P; /* from here sw_swap_prelease_stop frees what is set up */
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
                const int64_t gk = s->tune.land_gap_kb;
                P->land_gap = gk > 0 && gk <= (1 << 20)
                                  ? (int32_t)((gk << 10) / ((int64_t)st * (int64_t)spb))
                                  : 0;
                const int64_t mx = s->tune.landing_max_mb;
                const int64_t mcap =
                    mx > mb && mx <= ((int64_t)1 << 20)
                        ? (mx << 20) / (int64_t)st / (int64_t)spb * (int64_t)spb
                        : cap;
                P->land_max = mcap > cap ? mcap : cap;
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

void sw_swap_dev_quiesce(sw_swap *s)
{
    if (s->dev)
        sw_swap_prelease_wait(s->dev->pl, 0);
}

int sw_swap_dev_preleases(const sw_swap *s)
{
    return s->dev && s->dev->pl;
}

/* Waits out the prelease thread and releases its leases. */
void sw_swap_prelease_release(sw_swap *s)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    if (!P)
        return;
    sw_swap_prelease_wait(P, 1);
    P->job_nland = 0; /* the next call's descriptors are uploaded unless it lands again */
    /* copies still reading leased memory (a cancelled job's, whose blocks no
     * tile read) end before the leases do; the tiles that read the landing
     * were waited by the verdict, so the next call may refill it */
    /* (the copies queued ahead for the next call after the mark are not
     * waited for: they read leases of their own) */
    if (P->lcopied && (sw_cuda_set_device(P->device) != SW_OK ||
                       (P->a_marked ? sw_cuda_swap_event_sync(P->a_mark)
                                    : sw_cuda_stream_sync(P->lstream)) != SW_OK))
        return; /* a broken context: the entries stay leased rather than reused under a copy */
    P->lcopied = 0;
    P->a_marked = 0;
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
    P->last_need = P->call_need; /* the next call grows the room to it */
    P->call_need = 0;
    P->lev_used = 0;
    P->nitem = 0;
    P->item0 = 0;
    P->fresh = 1; /* every copy of the call done: kept leases may be released */
    P->kept = NULL;
    P->kept_blocks = 0;
    s->st.kept_visits += P->kept_visits;
    P->kept_visits = 0;
}

/* Frees what sw_swap_prelease_start set up (the thread joined or never
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
    free(P->rt);
    free(P->ent);
    free(P->lev_of);
    free(P->pend);
    free(P->loff);
    sw_cuda_host_free(P->items);
    for (int32_t i = 0; i < P->lev_cap; i++)
        sw_cuda_swap_event_destroy(P->lev[i]);
    free(P->lev);
    sw_cuda_swap_free(P->land);
    free(P->ladr);
    /* (the blocks held ahead were released by sw_swap_dev_ahead_drop) */
    for (int i = 0; i < (int)(sizeof P->a_ev / sizeof P->a_ev[0]); i++)
        if (P->a_ev[i])
            sw_cuda_swap_event_destroy(P->a_ev[i]);
    if (P->a_mark)
        sw_cuda_swap_event_destroy(P->a_mark);
    sw_cuda_swap_free(P->a_land);
    free(P->a_blk);
    free(P->a_loff);
    free(P->a_ev_of);
    free(P->a_lease);
    free(P->a_kept);
    free(P->a_keys);
    free(P->a_tmp);
    free(P->a_rt);
    free(P->succ);
    free(P);
}

void sw_swap_prelease_stop(sw_swap_dev *d)
{
    struct prelease *P = d->pl;
    if (!P)
        return;
    sw_swap_prelease_wait(P, 1);
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

/* The landing room grown to `need` stripes (at most land_max) at a call's
 * first job: the new buffer and items allocated first (either failing
 * keeps the old ones), the old freed after the landing stream's copies --
 * the previous call's tiles read them before its verdict returned, and
 * cudaFree waits for the device besides. Rare: the room only grows. */
static void land_grow(struct prelease *P, int64_t need)
{
    if (P->land_used != 0 || need <= P->land_cap || P->land_cap >= P->land_max)
        return;
    int64_t cap = P->land_cap;
    while (cap < need && cap < P->land_max)
        cap *= 2;
    if (cap > P->land_max)
        cap = P->land_max;
    uint8_t *land = NULL;
    sw_cuda_swap_gather_item *items = NULL;
    if (sw_cuda_swap_alloc((void **)&land, (size_t)cap * P->land_stride) != SW_OK)
        return;
    if (sw_cuda_host_alloc((void **)&items, sizeof *items * (size_t)cap) != SW_OK) {
        sw_cuda_swap_free(land);
        return;
    }
    if (sw_cuda_stream_sync(P->lstream) != SW_OK) {
        sw_cuda_host_free(items);
        sw_cuda_swap_free(land);
        return;
    }
    sw_cuda_swap_free(P->land);
    sw_cuda_host_free(P->items);
    P->land = land;
    P->items = items;
    P->land_cap = cap;
}

static int kept_drop_idle(sw_swap *s, struct prelease *P, double before,
                          const sw_swap_layer *keep);

/* The copies landing ahead done: they read kept leases (a_kept blocks)
 * that the ahead does not hold itself, so before any kept lease is
 * released (a verdict waits for the call's own copies only). 0 when that
 * cannot be known (the leases then stay). */
static int ahead_quiet(struct prelease *P)
{
    if (P->a_n == 0 || P->a_nev == 0 || P->a_quiet)
        return 1;
    if (sw_cuda_set_device(P->device) != SW_OK ||
        sw_cuda_swap_event_sync(P->a_ev[P->a_nev - 1]) != SW_OK)
        return 0;
    P->a_quiet = 1;
    return 1;
}

/* Kept leases at a job's post: the store's count of leased entries
 * unmapped checked (moved: every kept lease released at the call's first
 * job, before any copy of the call can read one; later in the call the
 * call only stops using them), at a call's first job the layers idle for
 * kept_idle_s released, and the layer's array grown to its blocks (P->kept
 * NULL, nothing kept for the job, when that fails). */
static void kept_post(sw_swap *s, struct prelease *P, sw_swap_layer *L)
{
    P->kept = NULL;
    P->kept_blocks = 0;
    if (P->kept_max <= 0)
        return;
    size_t leased = 0;
    uint64_t unmaps = sw_store_host_unmaps(P->store, &leased);
    const double now = sw_swap_tl_now();
    if (P->fresh) {
        P->fresh = 0;
        if (P->kept_stale || unmaps != P->kept_unmaps) {
            sw_swap_kept_drop_all(s);
            unmaps = sw_store_host_unmaps(P->store, &leased);
        } else if (P->kept_idle_s > 0 && P->kept_n > 0 &&
                   now - P->kept_scan_at >= 0.25 * P->kept_idle_s) {
            if (ahead_quiet(P) && kept_drop_idle(s, P, now - P->kept_idle_s, L))
                unmaps = sw_store_host_unmaps(P->store, &leased);
            P->kept_scan_at = now;
        }
    } else if (unmaps != P->kept_unmaps) {
        P->kept_stale = 1;
    }
    if (P->kept_stale)
        return;
    /* room left by the store's other leases (another engine's kept ones,
     * this call's): kept_max bounds what is leased over the store */
    const int64_t others = (int64_t)leased - P->kept_n;
    P->kept_lim = P->kept_max - (others > 0 ? others : 0);
    const size_t spb = 2 * (size_t)P->H;
    if (L->kept_cap < L->nblocks) {
        int32_t cap = L->kept_cap ? L->kept_cap : 64;
        while (cap < L->nblocks)
            cap = cap > INT32_MAX / 2 ? L->nblocks : cap * 2;
        sw_store_lease *k = realloc(L->kept, sizeof *k * spb * (size_t)cap);
        if (!k)
            return;
        memset(k + spb * (size_t)L->kept_cap, 0, sizeof *k * spb * (size_t)(cap - L->kept_cap));
        L->kept = k;
        L->kept_cap = cap;
    }
    P->kept = L->kept;
    P->kept_blocks = L->kept_cap;
    L->kept_at = now;
}

/* The kept leases of L's blocks [b0, b1) released (their ptr NULL again). */
static void kept_drop_range(sw_swap *s, struct prelease *P, sw_swap_layer *L, int32_t b0,
                            int32_t b1)
{
    if (!L->kept)
        return;
    const size_t spb = 2 * (size_t)P->H;
    if (b1 > L->kept_cap)
        b1 = L->kept_cap;
    if (b0 >= b1)
        return;
    sw_store_lease *k = &L->kept[(size_t)b0 * spb];
    const size_t n = (size_t)(b1 - b0) * spb;
    for (size_t i = 0; i < n; i += spb)
        if (k[i].ptr)
            P->kept_n -= (int64_t)spb;
    sw_store_host_release(s->store, n, k);
    memset(k, 0, sizeof *k * n);
}

/* The kept leases of every layer last posted before `before` (monotonic
 * seconds; never `keep`, the layer being posted) released and their
 * arrays freed: a sequence at rest hands the host tier back. Called at a
 * call's first job (no copy of the engine in flight). 1 when it released
 * any. */
static int kept_drop_idle(sw_swap *s, struct prelease *P, double before,
                          const sw_swap_layer *keep)
{
    int any = 0;
    for (size_t i = 0; i < s->nseqs; i++)
        for (int32_t l = 0; l < s->m.num_layers; l++) {
            sw_swap_layer *L = &s->seqs[i]->layers[l];
            if (!L->kept || L == keep || L->kept_at >= before)
                continue;
            kept_drop_range(s, P, L, 0, L->kept_cap);
            free(L->kept);
            L->kept = NULL;
            L->kept_cap = 0;
            any = 1;
        }
    return any;
}

/* No copy of the call reads host-tier memory any more (a call that ended
 * synced them; one cut short may not have): 0 when that cannot be known,
 * and the leases then stay. */
static int kept_quiet(struct prelease *P)
{
    sw_swap_prelease_wait(P, 0);
    if (!ahead_quiet(P))
        return 0;
    if (!P->lcopied)
        return 1;
    if (sw_cuda_set_device(P->device) != SW_OK || sw_cuda_stream_sync(P->lstream) != SW_OK)
        return 0;
    P->lcopied = 0;
    return 1;
}

void sw_swap_kept_drop_block(sw_swap *s, sw_swap_layer *L, int32_t block)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    if (P && L->kept && block >= 0 && block < L->kept_cap && kept_quiet(P) &&
        L->kept[(size_t)block * 2 * (size_t)P->H].ptr)
        kept_drop_range(s, P, L, block, block + 1);
}

void sw_swap_kept_drop_seq(sw_swap *s, sw_swap_seq *q)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    for (int32_t l = 0; P && l < s->m.num_layers; l++) {
        sw_swap_layer *L = &q->layers[l];
        if (L->kept && kept_quiet(P)) {
            kept_drop_range(s, P, L, 0, L->kept_cap);
            if (P->kept == L->kept) {
                P->kept = NULL;
                P->kept_blocks = 0;
            }
        }
    }
}

void sw_swap_kept_drop_all(sw_swap *s)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    if (!P || P->kept_max <= 0 || !kept_quiet(P))
        return;
    for (size_t i = 0; i < s->nseqs; i++)
        sw_swap_kept_drop_seq(s, s->seqs[i]);
    P->kept_n = 0;
    P->kept_stale = 0;
    P->kept_unmaps = sw_store_host_unmaps(s->store, NULL);
}

/* ---- landing ahead (tuning land_ahead_mb; dev_internal.h) ---- */

/* The blocks held ahead released: their copies waited for first (they read
 * the leased host memory). */
static void ahead_release(sw_swap *s, struct prelease *P)
{
    if (P->a_n == 0)
        return;
    const size_t spb = 2 * (size_t)P->H;
    if (P->a_nev > 0 && (sw_cuda_set_device(P->device) != SW_OK ||
                         sw_cuda_swap_event_sync(P->a_ev[P->a_nev - 1]) != SW_OK)) {
        P->a_n = 0; /* a broken context: the entries stay leased rather than reused under a copy */
        P->a_nev = 0;
        return;
    }
    for (int32_t j = 0; j < P->a_n; j++)
        if (!P->a_kept[j]) /* (kept ones stay with their layer) */
            sw_store_host_release(s->store, spb, &P->a_lease[(size_t)j * spb]);
    P->a_n = 0;
    P->a_nev = 0;
}

void sw_swap_dev_ahead_drop(sw_swap *s)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    if (P)
        ahead_release(s, P);
}

void sw_swap_dev_note_layer(sw_swap *s, int32_t layer)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    if (!P || s->tune.land_ahead_mb <= 0)
        return;
    if (!P->succ) {
        P->succ = malloc(sizeof *P->succ * (size_t)s->m.num_layers);
        if (!P->succ)
            return;
        for (int32_t l = 0; l < s->m.num_layers; l++)
            P->succ[l] = -1;
    }
    if (P->prev_layer >= 0 && P->prev_layer < s->m.num_layers)
        P->succ[P->prev_layer] = layer;
    P->prev_layer = layer;
}

/* Block b's leases l[0..2H) whole (every stripe leased, no longer than a
 * landing stripe) and at the generations the engine wrote. */
static int ahead_current(const struct prelease *P, const sw_swap_blk *e, const sw_store_lease *l)
{
    if (e->valid != P->bsize || e->slot >= 0)
        return 0;
    for (size_t x = 0; x < 2 * (size_t)P->H; x++)
        if (!l[x].ptr || l[x].length > P->land_stride || l[x].generation != e->gen[x])
            return 0;
    return 1;
}

void sw_swap_dev_land_ahead(sw_swap *s, const sw_swap_attend_params *p, sw_swap_seq *const *seqs)
{
    struct prelease *P = s->dev ? s->dev->pl : NULL;
    if (!P || !P->land || !P->succ || s->tune.land_ahead_mb <= 0 || p->sparse_top_k > 0 ||
        p->layer < 0 || p->layer >= s->m.num_layers)
        return;
    const int32_t layer = P->succ[p->layer];
    int32_t bi = 0;
    while (bi < p->batch && p->q_indptr[bi + 1] == p->q_indptr[bi])
        bi++;
    if (layer < 0 || bi == p->batch)
        return;
    const sw_swap_seq *q = seqs[bi];
    const sw_swap_layer *L = &q->layers[layer];
    const size_t spb = 2 * (size_t)P->H, st = P->land_stride;
    /* the call's own copies all queued (every block of its jobs is planned:
     * the thread has at most its last launch to make) */
    sw_swap_prelease_wait(P, 0);
    ahead_release(s, P); /* (not taken over by this call) */
    if (!P->a_land) {
        const int64_t cap = ((int64_t)s->tune.land_ahead_mb << 20) / (int64_t)(spb * st);
        if (cap <= 0 || cap > (1 << 20))
            return;
        P->a_blk = malloc(sizeof *P->a_blk * (size_t)cap);
        P->a_loff = malloc(sizeof *P->a_loff * (size_t)cap);
        P->a_ev_of = malloc(sizeof *P->a_ev_of * (size_t)cap);
        P->a_lease = malloc(sizeof *P->a_lease * spb * (size_t)cap);
        P->a_kept = malloc((size_t)cap);
        P->a_keys = malloc(sizeof *P->a_keys * spb * (size_t)cap);
        P->a_tmp = malloc(sizeof *P->a_tmp * spb * (size_t)cap);
        P->a_rt = malloc(sizeof *P->a_rt * spb * (size_t)cap);
        if (!P->a_blk || !P->a_loff || !P->a_ev_of || !P->a_lease || !P->a_kept || !P->a_keys ||
            !P->a_tmp || !P->a_rt ||
            sw_cuda_swap_event_create(&P->a_mark, 0) != SW_OK ||
            sw_cuda_swap_alloc((void **)&P->a_land, 2 * (size_t)cap * spb * st) != SW_OK) {
            s->tune.land_ahead_mb = 0; /* no room: not again */
            return;
        }
        P->a_cap = (int32_t)cap;
    }
    /* the next call's first missing blocks (its job's order: missing ones
     * in block order), whole blocks only (the last, partial one is written
     * again by the next step), as many as fit with the gaps the copies run
     * through */
    int32_t n = 0, place = 0;
    for (int32_t b = 0; b < L->nblocks; b++) {
        const sw_swap_blk *e = &L->blk[b];
        if (e->slot >= 0)
            continue;
        if (e->valid != P->bsize)
            break;
        const int32_t gap = n > 0 ? b - P->a_blk[n - 1] - 1 : 0;
        const int32_t at = n == 0 ? 0 : place + 1 + (gap > 0 && gap <= P->land_gap ? gap : 0);
        if (at >= P->a_cap)
            break;
        P->a_blk[n] = b;
        P->a_loff[n] = at;
        place = at;
        n++;
    }
    if (n == 0)
        return;
    /* a block with kept leases (whole, at the block's generations, while
     * the store's unmap count says they all still map their keys) uses
     * them, retouched as a visit would (kept_reuse); the others are
     * leased */
    const int kept_ok = P->kept_max > 0 && !P->kept_stale && L->kept &&
                        sw_store_host_unmaps(P->store, NULL) == P->kept_unmaps;
    size_t nk = 0, nr = 0;
    for (int32_t j = 0; j < n; j++) {
        const int32_t b = P->a_blk[j];
        const sw_store_lease *k = kept_ok && b < L->kept_cap ? &L->kept[(size_t)b * spb] : NULL;
        int kept = k && k->ptr;
        for (size_t x = 0; kept && x < spb; x++)
            kept = k[x].ptr && k[x].generation == L->blk[b].gen[x];
        P->a_kept[j] = (uint8_t)kept;
        if (kept) {
            memcpy(&P->a_lease[(size_t)j * spb], k, sizeof *k * spb);
            for (size_t x = 0; x < spb; x++)
                P->a_rt[nr++] = k[x].entry;
            continue;
        }
        for (size_t x = 0; x < spb; x++) {
            sw_store_key *key = &P->a_keys[nk++];
            memset(key, 0, sizeof *key);
            key->ns = q->ns;
            key->layer = (uint32_t)layer;
            key->block = q->block_base + (uint32_t)b;
            key->kv_head = (uint16_t)(x / 2);
            key->kind = (uint8_t)(x % 2);
        }
    }
    if (nr && !sw_store_host_retouch(P->store, P->kept_unmaps, nr, P->a_rt))
        return; /* the unmap count moved since: nothing leased yet, none ahead */
    size_t got = 0;
    if (nk && sw_store_host_lease(P->store, nk, P->a_keys, 16, P->a_tmp, &got) != SW_OK)
        nk = 0;
    for (int32_t j = 0, t = 0; j < n; j++) {
        if (P->a_kept[j])
            continue;
        if (nk)
            memcpy(&P->a_lease[(size_t)j * spb], &P->a_tmp[(size_t)t * spb], sizeof *P->a_tmp * spb);
        else
            memset(&P->a_lease[(size_t)j * spb], 0, sizeof *P->a_lease * spb);
        t++;
    }
    if (got == 0 && nr == 0)
        return;
    P->a_n = n; /* from here ahead_release gives the leases back */
    P->a_nev = 0;
    P->a_layer = layer;
    P->a_ns = q->ns;
    P->a_bbase = q->block_base;
    for (int32_t k = 0; k < n; k++)
        P->a_ev_of[k] = -1; /* (none landed yet) */
    P->a_unmaps = sw_store_host_unmaps(P->store, NULL);
    P->a_quiet = 0;
    P->a_half ^= 1;
    uint8_t *base = P->a_land + (size_t)P->a_half * (size_t)P->a_cap * spb * st;
    /* the end of the call's own copies: the verdict waits for it, not for these */
    if (sw_cuda_swap_event_record(P->a_mark, P->lstream) != SW_OK)
        return;
    P->a_marked = 1;
    /* launches of land_start blocks, then twice as many up to land_blocks,
     * an event each; a copy per run of stripes as far apart in the host
     * tier as in the landing (land_flush) */
    enum { BATCH = 64 };
    void *bd[BATCH];
    const void *bs[BATCH];
    size_t bb[BATCH];
    const uint64_t most = ((uint64_t)P->land_gap * spb + 1) * st;
    int32_t j = 0, landed = 0;
    while (j < n && P->a_nev < (int32_t)(sizeof P->a_ev / sizeof P->a_ev[0])) {
        int32_t want = P->land_start << P->a_nev;
        if (want > P->land_blocks || want <= 0)
            want = P->land_blocks;
        const int32_t j1 = n - j < want ? n : j + want;
        if (!P->a_ev[P->a_nev] && sw_cuda_swap_event_create(&P->a_ev[P->a_nev], P->tline) != SW_OK)
            break;
        sw_status rc = SW_OK;
        size_t nb = 0;
        const uint8_t *run_src = NULL;
        uint64_t run_dst = 0, run_end = 0;
        for (int32_t k = j; k < j1 && rc == SW_OK; k++) {
            const sw_store_lease *l = &P->a_lease[(size_t)k * spb];
            if (!ahead_current(P, &L->blk[P->a_blk[k]], l)) {
                P->a_ev_of[k] = -1;
                continue;
            }
            P->a_ev_of[k] = P->a_nev;
            landed++;
            for (size_t x = 0; x < spb && rc == SW_OK; x++) {
                const uint64_t dst = ((uint64_t)P->a_loff[k] * spb + x) * st;
                const uint8_t *src = l[x].ptr;
                if (run_src && dst > run_end - st && dst - (run_end - st) <= most &&
                    src == run_src + (dst - run_dst)) {
                    run_end = dst + st;
                    continue;
                }
                if (run_src) {
                    bd[nb] = base + run_dst;
                    bs[nb] = run_src;
                    bb[nb++] = (size_t)(run_end - run_dst);
                    if (nb == BATCH) {
                        rc = sw_cuda_swap_copy_batch(bd, bs, bb, nb, P->lstream);
                        nb = 0;
                    }
                }
                run_src = src;
                run_dst = dst;
                run_end = dst + st;
            }
        }
        if (rc == SW_OK && run_src) {
            bd[nb] = base + run_dst;
            bs[nb] = run_src;
            bb[nb++] = (size_t)(run_end - run_dst);
        }
        if (rc == SW_OK && nb)
            rc = sw_cuda_swap_copy_batch(bd, bs, bb, nb, P->lstream);
        if (rc != SW_OK || sw_cuda_swap_event_record(P->a_ev[P->a_nev], P->lstream) != SW_OK) {
            /* nothing of this launch is taken over; its copies issued end
             * here, before their leases can */
            for (int32_t k = j; k < j1; k++)
                landed -= P->a_ev_of[k] >= 0;
            for (int32_t k = j; k < j1; k++)
                P->a_ev_of[k] = -1;
            if (sw_cuda_stream_sync(P->lstream) != SW_OK) {
                P->a_n = 0; /* a broken context: the entries stay leased rather than
                             * reused under a copy */
                P->a_nev = 0;
                return;
            }
            break;
        }
        P->a_nev++;
        j = j1;
    }
    s->st.ahead_blocks += (uint64_t)landed; /* (past the events: not landed, -1) */
}

/* The job being posted (q, layer: its blocks' positions in pos) takes
 * over the blocks held ahead for it that are still current: landed
 * (DONE, their leases the ahead ones, their places in the ahead half,
 * their launches' events moved into lev ahead of the job's own). Every
 * ahead lease then goes to the call's entries (released at its end). */
static void ahead_take(sw_swap *s, struct prelease *P, const sw_swap_seq *q, int32_t layer)
{
    if (P->a_n == 0 || P->a_ns != q->ns || P->a_layer != layer || P->a_bbase != q->block_base)
        return;
    const size_t spb = 2 * (size_t)P->H, st = P->land_stride;
    const sw_swap_layer *L = &q->layers[layer];
    if (sw_store_host_unmaps(P->store, NULL) != P->a_unmaps) {
        ahead_release(s, P); /* an entry leased then may map another key now */
        return;
    }
    /* room: the events in lev, the entries in ent */
    if (!lev_room(P, P->a_nev) || !ent_room(P, (size_t)P->a_n * spb)) {
        ahead_release(s, P);
        return;
    }
    const int32_t ev0 = P->lev_used;
    for (int32_t k = 0; k < P->a_nev; k++) {
        void *e = P->lev[ev0 + k];
        P->lev[ev0 + k] = P->a_ev[k];
        P->a_ev[k] = e;
    }
    P->lev_used += P->a_nev;
    const uint8_t *base = P->a_land + (size_t)P->a_half * (size_t)P->a_cap * spb * st;
    uint64_t used = 0;
    for (int32_t j = 0; j < P->a_n; j++) {
        const sw_store_lease *l = &P->a_lease[(size_t)j * spb];
        const int32_t b = P->a_blk[j];
        const int32_t i = b < L->nblocks ? P->pos[b] : -1;
        const int take = P->a_ev_of[j] >= 0 && i >= 0 && ahead_current(P, &L->blk[b], l);
        /* a block taken over on leases of the ahead's own stays with its
         * layer as a kept block would */
        const int keep = take && !P->a_kept[j] && kept_take(P, i, l);
        for (size_t x = 0; x < spb && !P->a_kept[j] && !keep; x++)
            if (l[x].ptr)
                P->ent[P->nent++] = l[x].entry;
        if (!take)
            continue;
        P->kept_visits += P->a_kept[j];
        memcpy(&P->lease[(size_t)i * spb], l, sizeof *l * spb);
        P->ladr[i] = (uint8_t *)base + (size_t)P->a_loff[j] * spb * st;
        P->lev_of[i] = ev0 + P->a_ev_of[j];
        atomic_store_explicit(&P->state[i], PL_DONE, memory_order_release);
        used++;
    }
    P->lcopied = 1;
    s->st.ahead_used += used;
    P->a_n = 0;
    P->a_nev = 0;
}

sw_status sw_swap_dev_prelease(sw_swap *s, sw_swap_seq *q, int32_t layer,
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
    sw_swap_prelease_wait(P, 1); /* the previous sequence's job: every block of it planned */
    const size_t spb = 2 * (size_t)P->H;
    P->q = NULL;
    P->layer = -1;
    P->n = 0;
    P->nblk = 0;
    kept_post(s, P, &q->layers[layer]);
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
        if (pd)
            P->pend = pd;
        int32_t *lf = pd ? realloc(P->loff, sizeof *lf * (size_t)n) : NULL;
        if (lf)
            P->loff = lf;
        uint8_t **la = lf ? realloc(P->ladr, sizeof *la * (size_t)n) : NULL;
        if (!la)
            return SW_OK; /* nothing preleased: the tiles lease their keys */
        P->ladr = la;
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
        P->ladr[i] = NULL;
        atomic_init(&P->state[i], PL_FREE);
    }
    sw_swap_land_offsets(blocks, n, P->land_gap, P->loff);
    P->ns = q->ns;
    P->bbase = q->block_base;
    P->q = q; /* (for kept_take; the job is posted below) */
    P->layer = layer;
    ahead_take(s, P, q, layer); /* (its events reserved before the job's) */
    /* landing room for the job's first blocks (what is left of the call's),
     * and an event per landing launch (at most nl / PL_CH + 2); job_nland
     * was zeroed above */
    P->ljob_nev = 0;
    P->ljob_ev = 0;
    P->npend = 0;
    if (P->land) {
        /* (a batch's later jobs: room as large as the last call's jobs) */
        P->call_need += ((int64_t)P->loff[n - 1] + 1) * (int64_t)spb;
        land_grow(P, P->call_need > P->last_need ? P->call_need : P->last_need);
        const int64_t room = (P->land_cap - P->land_used) / (int64_t)spb;
        int32_t nl = n;
        while (nl > 0 && (int64_t)P->loff[nl - 1] + 1 > room)
            nl--;
        /* launches: about one a store call's PL_CH blocks at most, one spare
         * (past them a block is handed over unlanded: read from the host tier) */
        const int32_t nev = nl / PL_CH + 2;
        if (nl > 0 && !lev_room(P, nev))
            nl = 0; /* no events: this job lands nothing */
        if (nl > 0) {
            P->job_nland = nl;
            P->job_land0 = P->land_used;
            P->chunk0 = P->lev_used;
            P->land_used += ((int64_t)P->loff[nl - 1] + 1) * (int64_t)spb;
            P->lev_used += nev;
            P->ljob_nev = nev;
        }
    }
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
                    lease[k].ptr =
                        P->ladr[i]
                            ? P->ladr[i] + x * P->land_stride
                            : P->land + ((uint64_t)P->job_land0 + (uint64_t)P->loff[i] * spb + x) *
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
