/* The device pool's lifetime (streams, slots, staging, threads: created
 * once per engine) and the nudge of its threads. The parts, and who calls
 * whom: dev_internal.h. */
#include "dev_internal.h"
#include "core/sw_core.h"
#include "core/sw_cuda.h"

#include <stdlib.h>
#include <string.h>

sw_status sw_swap_dev_enter(sw_swap *s)
{
    return sw_cuda_set_device(s->dev->device);
}

/* The launcher stopped (it runs what it holds first) and every stream of
 * the pool waited for: no GPU work of the engine reads host memory after
 * it (a call cut short may have left some). At destroy, before the kept
 * leases are released. */
void sw_swap_dev_drain(sw_swap *s)
{
    sw_swap_dev *d = s->dev;
    if (!d)
        return;
    sw_swap_launcher_stop(d);
    sw_swap_prelease_wait(d->pl, 1);
    if (sw_cuda_set_device(d->device) == SW_OK) {
        if (d->pl && d->pl->lstream)
            (void)sw_cuda_stream_sync(d->pl->lstream);
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
}

void sw_swap_dev_destroy(sw_swap *s)
{
    sw_swap_dev *d = s->dev;
    if (!d)
        return;
    sw_swap_dev_drain(s);
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
    sw_swap_dev_ahead_drop(s);
    sw_swap_prelease_release(s);
    sw_swap_prelease_stop(d);
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
    sw_swap_dev_fast_free(d);
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
    d->spin_s = sw_swap_spin_seconds(s->tune.spin_us);
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
        SW_TRY(sw_swap_prelease_start(s));
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
        SW_TRY(sw_swap_launcher_start(d, sw_swap_dev_launch_direct));
    }
    return sw_cuda_stream_sync(d->own_stream);
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
