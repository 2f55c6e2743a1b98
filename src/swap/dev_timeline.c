/* The device pool's timeline (tuning timeline, a diagnostic): timed events
 * at the start and end of every gather, tile compute and merge of a call,
 * with the host's clock when each was enqueued, and host-only phase marks;
 * printed to stderr at the call's end. A leaf: it calls no other part. */
#include "dev_internal.h"
#include "core/sw_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double sw_swap_tl_now(void)
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
    d->tl_host[d->ntl] = sw_swap_tl_now();
    d->tl_kind[d->ntl] = kind;
    d->tl_tag[d->ntl] = tag;
    d->ntl++;
}

void sw_swap_tl_mark(sw_swap_dev *d, void *stream, char kind, int32_t tag)
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
    d->tl_ph[d->tl_nph] = sw_swap_tl_now();
    d->tl_phk[d->tl_nph++] = kind;
}

/* After the call's work has completed: each mark's GPU time and host
 * enqueue time (ms from the call's B mark), and a summary: the span from B
 * to the last end, time with a gather running, with a compute running, with
 * either, and the GPU idle rest. */
int sw_swap_tl_report(sw_swap_dev *d)
{
    if (!d->tline || d->ntl < 2 || d->tl_kind[0] != 'B') {
        d->ntl = 0;
        d->tl_nph = 0;
        return -1;
    }
    const int32_t n = d->ntl;
    float *g = malloc(sizeof(float) * (size_t)n);
    if (!g) {
        d->ntl = 0;
        return -1;
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
    return call;
}
