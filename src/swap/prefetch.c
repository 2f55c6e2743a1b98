/* Read-ahead: each tile's batched store read is a read ticket
 * (sw_store_read_submit), so that several tiles' file I/O is queued on the
 * store's ring while the engine checks and computes an earlier one. The
 * store copies a ticket's verified stripes into host memory at the wait:
 * pool slots for a host pool, a pinned staging buffer per tile in flight
 * for a device pool (dev_pool.c uploads it). One tile at a time through a
 * synchronous read on a worker thread left the disk idle between tiles
 * (H200: 0.74 GB/s of the disk's 1.89 GB/s, docs/perf/swap.md). */
#include "swap_internal.h"
#include "core/sw_core.h"

#include <string.h>

int32_t sw_swap_prefetch_depth(int32_t configured, int32_t resident_blocks, int32_t tile_blocks)
{
    /* Two tiles are pinned at once whatever the depth (attend_loop.c): the one
     * computing and the next; the staging holds the rest. */
    if (configured <= 0 || tile_blocks < 1 || resident_blocks < 2 * tile_blocks)
        return 0;
    return configured > SW_SWAP_MAX_PREFETCH ? SW_SWAP_MAX_PREFETCH : configured;
}

int32_t sw_swap_auto_tile_cap(int host_pool, int host_tier, uint32_t align_blocks)
{
    if (!host_pool)
        return 16;
    /* A host pool's tile is one read ticket, cut at store runs: at 16
     * blocks, every ticket was a quarter of a 64-block run per stream, read
     * as 64 KiB device requests with ~4 tiles in flight (`spillway bench
     * swap --cases disk` on the VM: 763 requests per step, 40.6% of the raw
     * read, the log added in c4b0cc2). A whole run per
     * tile makes each stream's part of a ticket one run-sized request:
     * 72 requests of 687 KiB, step 49 -> 41 ms (medians of 4 interleaved
     * runs, the logs added in 69399a2). Not in front of a host
     * tier: there the reads are copies, and 4 tiles of 64 blocks staged
     * ahead (8 MiB) no longer stay in the CPU's cache while they wait to be
     * computed (host-tier case: 51 -> 42 tokens/s,
     * the logs added in 69399a2). */
    if (!host_tier && align_blocks >= 16)
        return align_blocks < SW_SWAP_MAX_AUTO_TILE ? (int32_t)align_blocks
                                                    : SW_SWAP_MAX_AUTO_TILE;
    return 16;
}

sw_status sw_swap_read_submit(sw_store *store, sw_swap_read_job *job)
{
    job->ticket = 0;
    job->tier_bytes[0] = job->tier_bytes[1] = 0;
    if (job->n == 0)
        return SW_OK;
    /* A status the wait did not write (it writes none for a ticket it does
     * not know) must not read as OK. */
    for (size_t i = 0; i < job->n; i++) {
        job->statuses[i] = SW_STATUS_INTERNAL;
        job->lengths[i] = 0;
        job->gens[i] = 0;
    }
    sw_status st = sw_store_read_submit(store, job->n, job->keys, job->dst, job->dst_bytes,
                                        &job->ticket);
    if (st != SW_OK) {
        job->ticket = 0;
        for (size_t i = 0; i < job->n; i++)
            job->statuses[i] = st;
    }
    return st;
}

void sw_swap_read_wait(sw_store *store, sw_swap_read_job *job)
{
    if (job->ticket == 0)
        return;
    (void)sw_store_read_wait_tiers(store, job->ticket, job->n, job->lengths, job->gens,
                                   job->statuses, job->tier_bytes);
    job->ticket = 0;
}
