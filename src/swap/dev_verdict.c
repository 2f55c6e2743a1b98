/* The device pool's integrity verdict at an attend call's end: the stripes
 * the call's gathers wrote, the device's CRC mismatch report, slots dropped
 * and SW_STATUS_CORRUPT for a mismatch, the call's leases released. */
#include "dev_internal.h"
#include "core/sw_cuda.h"
#include "core/sw_core.h"

#include <stdlib.h>
#include <string.h>

sw_status sw_swap_dev_grec_grow(sw_swap_dev *d)
{
    size_t nc = d->grec_cap ? 2 * d->grec_cap : 4096;
    gather_rec *n = realloc(d->grec, sizeof *n * nc);
    if (!n)
        return sw_fail(SW_STATUS_NO_MEMORY, "gather records");
    d->grec = n;
    d->grec_cap = nc;
    return SW_OK;
}

sw_status sw_swap_dev_attend_verdict(sw_swap *s, void *stream, int report)
{
    sw_swap_dev *d = s->dev;
    /* direct mode: every job launched and every tile / merge stream done
     * (their kernels read the leases and report into d_bad) */
    sw_status st = sw_swap_launch_drain_x(d, 1);
    /* the prelease thread done with this call (its leases released below) */
    sw_swap_prelease_wait(d->pl, 1);
    sw_swap_dev_tl_phase(s, 'w');
    for (int i = 0; d->pissued && i < 3; i++) {
        const sw_status g = sw_cuda_stream_sync(i < 2 ? d->pstream[i] : d->mstream);
        if (st == SW_OK)
            st = g;
    }
    d->pissued = 0;
    if (d->nlease == 0 && d->ngrec == 0 && !(d->pl && d->pl->nent)) {
        sw_swap_prelease_release(s); /* nothing leased: the landing's counters for the next call */
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
    sw_swap_prelease_release(s);
    return out;
}
