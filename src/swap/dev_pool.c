/* The device pool's memory beside its slots: the arena of projected keys
 * (one entry per BF16 block), the read staging (pinned host buffers the
 * store's tickets fill, device buffers the scatter reads) and its upload. */
#include "dev_internal.h"
#include "core/sw_core.h"
#include "core/sw_cuda.h"

#include <stdlib.h>
#include <string.h>

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
        sw_status st = sw_swap_dev_wait_done(d);
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

uint8_t *sw_swap_dev_pool(sw_swap *s) { return s->dev->pool; }

int32_t *sw_swap_dev_tab(sw_swap *s) { return s->dev->fast.tab; }

sw_status sw_swap_dev_view(sw_swap *s, void *stream, void **k, void **v)
{
    sw_swap_dev *d = s->dev;
    SW_TRY(sw_cuda_set_device(d->device));
    /* the offloads' write-through copies and the tile loop's landings */
    if (d->offload_pending)
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_offload));
    if (d->done_pending)
        SW_TRY(sw_cuda_swap_stream_wait(stream, d->ev_done));
    *k = d->pool;
    *v = d->pool + d->v_off;
    return SW_OK;
}

int sw_swap_dev_done_pending(const sw_swap *s) { return s->dev && s->dev->done_pending; }

sw_status sw_swap_dev_wait_done_on(sw_swap *s, void *stream)
{
    return sw_cuda_swap_stream_wait(stream, s->dev->ev_done);
}

sw_status sw_swap_dev_offload_after(sw_swap *s, void *ev)
{
    sw_swap_dev *d = s->dev;
    SW_TRY(sw_cuda_swap_stream_wait(d->own_stream, ev));
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
            SW_TRY(sw_swap_launch_drain(d));
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


/* Waits for the previous attend call (its buffers are about to be reused). */
sw_status sw_swap_dev_wait_done(sw_swap_dev *d)
{
    if (!d->done_pending)
        return SW_OK;
    SW_TRY(sw_cuda_swap_event_sync(d->ev_done));
    d->done_pending = 0;
    return SW_OK;
}
