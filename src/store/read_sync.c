/* Synchronous batched reads: sw_store_read, sw_store_read_device and the
 * swap engine's sw_store_read_device_owned, through the shared read path
 * (read.h) under the handle's lock; local misses then go to the remote
 * tier without it. */
#include "store/read.h"

#include "core/sw_cuda.h"
#include "store/remote_tier.h"

#include <stdlib.h>
#include <string.h>

static sw_status store_read(sw_store *s, size_t n, const sw_store_key *keys, sw_read_sink *out,
                            size_t dst_bytes, size_t *lengths, uint64_t *generations,
                            sw_status *statuses)
{
    sw_read_ctx c = {s, dst_bytes, lengths, generations, statuses, out, 0, 0};
    /* Scratch kept by the handle (under its lock): items, then per key its
     * hash. */
    size_t need = (n ? n : 1) * (sizeof(sw_read_item) + sizeof(uint64_t));
    if (s->rd_scratch_bytes < need) {
        void *p = realloc(s->rd_scratch, need);
        if (!p)
            return sw_fail(SW_STATUS_NO_MEMORY, "read of %zu keys", n);
        s->rd_scratch = p;
        s->rd_scratch_bytes = need;
    }
    sw_read_item *items = (sw_read_item *)s->rd_scratch;
    uint64_t *hs = (uint64_t *)(items + (n ? n : 1));
    size_t m = sw_store_read_lookup(&c, n, keys, items, hs);
    /* Host-tier copies must be complete before file reads may evict the
     * host entries they come from. */
    sw_read_sink_barrier(out);
    sw_status st = sw_store_read_file(&c, items, m);
    sw_read_sink_barrier(out);
    if (st != SW_OK)
        return st;
    if (out->err != SW_OK) {
        for (size_t i = 0; i < n; i++)
            if (statuses[i] == SW_OK)
                statuses[i] = out->err;
        return out->err;
    }
    return sw_store_read_summary(s, keys, n, dst_bytes, statuses);
}

static sw_status read_common(sw_store *s, size_t n, const sw_store_key *keys, sw_read_sink *out,
                             size_t dst_bytes, size_t *lengths, uint64_t *generations,
                             sw_status *statuses)
{
    if (!statuses)
        return sw_fail(SW_STATUS_INVALID, "sw_store_read: statuses is NULL");
    sw_status bad = SW_OK;
    if (!s || (n && (!keys || !out->dst)))
        bad = sw_fail(SW_STATUS_INVALID, "sw_store_read: null store, keys or dst");
    else if (n > 0xfffffffful)
        bad = sw_fail(SW_STATUS_INVALID, "sw_store_read: %zu keys in one call", n);
    else
        bad = sw_store_enter(s);
    if (bad != SW_OK) {
        for (size_t i = 0; i < n; i++)
            statuses[i] = bad;
        return bad;
    }
    sw_status st = store_read(s, n, keys, out, dst_bytes, lengths, generations, statuses);
    pthread_mutex_unlock(&s->lock);
    /* Local misses go to the remote tier in one pipelined batch, without the
     * store's lock (a slow server must not stall other callers). Only after
     * a complete local pass: per-key statuses are set. */
    if (s->rt && (st == SW_STATUS_NOT_FOUND || st == SW_STATUS_CORRUPT ||
                  st == SW_STATUS_IO || st == SW_STATUS_INVALID)) {
        sw_status rst = sw_remote_tier_fetch(s->rt, n, keys, out->dst, out->device, out->stream,
                                             dst_bytes, lengths, generations, statuses);
        if (rst != SW_OK && rst != SW_STATUS_NO_MEMORY)
            return rst; /* a device copy failed */
        /* Under the lock again, briefly: the detail must name a key that
         * stayed CORRUPT because it cannot be proven current. */
        pthread_mutex_lock(&s->lock);
        st = sw_store_read_summary(s, keys, n, dst_bytes, statuses);
        pthread_mutex_unlock(&s->lock);
    }
    return st;
}

sw_status sw_store_read(sw_store *s, size_t n, const sw_store_key *keys, void *const *dst,
                        size_t dst_bytes, size_t *lengths, uint64_t *generations,
                        sw_status *statuses)
{
    sw_read_sink out = {0, NULL, dst, NULL, NULL, 0, SW_OK};
    return read_common(s, n, keys, &out, dst_bytes, lengths, generations, statuses);
}

static sw_status no_device(size_t n, sw_status *statuses)
{
    sw_status st = sw_fail(SW_STATUS_NO_DEVICE, "sw_store_read_device: %s",
                           sw_cuda_built() ? "no usable GPU" : "built without CUDA");
    for (size_t i = 0; statuses && i < n; i++)
        statuses[i] = st;
    return st;
}

/* Host memory passed as a device destination would fail inside the copy
 * after the read; it is refused up front. One cudaPointerGetAttributes per
 * destination cost more than the read's own bookkeeping, so destinations are
 * checked per gap-free run, in call order: dst[i] continues the run when it
 * starts inside the run or right at its end (lo <= dst[i] <= hi, hi the end
 * of the run's furthest dst_bytes room); only the first and the last
 * destination of each run are looked up. Both being device memory is taken
 * to mean the run is: a host mapping does not lie between two pieces of a
 * device allocation range without a gap the rule would see. The swap
 * engine's staging buffers, K and V stripes back to back, are one run per
 * call. Returns the index of a destination that is not device memory, or n. */
size_t sw_store_first_host_dst(size_t n, void *const *dst, size_t dst_bytes)
{
    size_t i = 0;
    while (i < n) {
        uintptr_t lo = (uintptr_t)dst[i];
        uintptr_t room = dst_bytes ? (uintptr_t)dst_bytes : 1;
        uintptr_t hi = lo > UINTPTR_MAX - room ? UINTPTR_MAX : lo + room;
        size_t j = i + 1;
        while (j < n && dst[j]) {
            uintptr_t p = (uintptr_t)dst[j];
            if (p < lo || p > hi)
                break;
            uintptr_t e = p > UINTPTR_MAX - room ? UINTPTR_MAX : p + room;
            if (e > hi)
                hi = e;
            j++;
        }
        if (!sw_cuda_is_device_ptr(dst[i]))
            return i;
        if (j - 1 > i && !sw_cuda_is_device_ptr(dst[j - 1]))
            return j - 1;
        i = j;
    }
    return n;
}

sw_status sw_store_read_device(sw_store *s, size_t n, const sw_store_key *keys,
                               void *const *dst, size_t dst_bytes, size_t *lengths,
                               uint64_t *generations, sw_status *statuses, void *stream)
{
    if (!sw_cuda_built() || sw_cuda_devices() <= 0)
        return no_device(n, statuses);
    size_t i = dst ? sw_store_first_host_dst(n, dst, dst_bytes) : n;
    if (i < n) {
        sw_status bad = sw_fail(SW_STATUS_INVALID, "sw_store_read_device: dst[%zu]=%p is not "
                                "device memory; nothing was read", i, dst[i]);
        for (size_t j = 0; statuses && j < n; j++)
            statuses[j] = bad;
        return bad;
    }
    sw_read_sink out = {1, stream, dst, NULL, NULL, 0, SW_OK};
    return read_common(s, n, keys, &out, dst_bytes, lengths, generations, statuses);
}

sw_status sw_store_read_device_owned(sw_store *s, size_t n, const sw_store_key *keys,
                                     void *const *dst, size_t dst_bytes, size_t *lengths,
                                     uint64_t *generations, sw_status *statuses, void *stream)
{
    if (!sw_cuda_built() || sw_cuda_devices() <= 0)
        return no_device(n, statuses);
    sw_read_sink out = {1, stream, dst, NULL, NULL, 0, SW_OK};
    return read_common(s, n, keys, &out, dst_bytes, lengths, generations, statuses);
}
