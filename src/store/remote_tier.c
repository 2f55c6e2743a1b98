/* The store's remote tier (remote_tier.h): write-through queue drained by
 * one worker thread (sw_remote_put_batch), the fetch of locally missing keys
 * on read (sw_remote_get_batch) and the write-back of what was fetched. See
 * docs/remote.md, "The store's remote tier". */
#include "store/remote_tier.h"

#include "core/sw_core.h"
#include "core/sw_cuda.h"
#include "spillway_remote.h"
#include "store/format.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RT_DEF_QUEUE 256u
#define RT_DEF_WAIT_MS 50
#define RT_DEF_CLOSE_MS 2000
#define RT_MAX_QUEUE (1u << 20)

typedef struct rt_entry {
    sw_store_key key;
    uint64_t generation;
    size_t length;
    char *data;                  /* stripe_bytes, in the ring's memory */
} rt_entry;

struct sw_remote_tier {
    sw_remote *r;
    uint32_t stripe_bytes;
    int32_t wait_ms, close_ms, write_back;
    int32_t batch_max;
    sw_remote_tier_install_fn install; /* the store's write-back */
    void *store;

    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full, drained;
    pthread_t worker;
    int worker_started;
    int stop;                    /* close: drain what is queued, then exit */
    int abort_rest;              /* close timed out: drop what is queued */

    rt_entry *ring;
    char *mem;
    uint32_t cap, head, count;   /* entries [head, head + count) mod cap */
    uint32_t inflight;           /* the first `inflight` of them are being sent */

    /* worker scratch (batch_max each) */
    sw_store_key *bk;
    const void **bsrc;
    size_t *blen;
    uint64_t *bgen;
    sw_status *bst;

    /* counters under mu */
    uint64_t puts_queued, puts, put_errors, put_drops, put_replaced, wait_us;
    uint64_t gets, hits, not_found, corruptions, errors, bytes_read, write_backs;
};

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void abs_deadline(struct timespec *ts, int32_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *worker_main(void *arg)
{
    sw_remote_tier *t = (sw_remote_tier *)arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (t->count == 0 && !t->stop)
            pthread_cond_wait(&t->not_empty, &t->mu);
        if (t->abort_rest && t->count) {
            t->put_drops += t->count;
            t->head = (t->head + t->count) % t->cap;
            t->count = 0;
            pthread_cond_broadcast(&t->not_full);
        }
        if (t->count == 0) {
            pthread_cond_broadcast(&t->drained);
            if (t->stop)
                break;
            continue;
        }
        uint32_t n = t->count < (uint32_t)t->batch_max ? t->count : (uint32_t)t->batch_max;
        for (uint32_t i = 0; i < n; i++) {
            const rt_entry *e = &t->ring[(t->head + i) % t->cap];
            t->bk[i] = e->key;
            t->bsrc[i] = e->data;
            t->blen[i] = e->length;
            t->bgen[i] = e->generation;
        }
        t->inflight = n; /* writers leave these entries alone */
        pthread_mutex_unlock(&t->mu);
        (void)sw_remote_put_batch(t->r, n, t->bk, t->bsrc, t->blen, t->bgen, t->bst);
        pthread_mutex_lock(&t->mu);
        for (uint32_t i = 0; i < n; i++) {
            if (t->bst[i] == SW_OK)
                t->puts++;
            else
                t->put_errors++;
        }
        t->inflight = 0;
        t->head = (t->head + n) % t->cap;
        t->count -= n;
        pthread_cond_broadcast(&t->not_full);
        if (t->count == 0)
            pthread_cond_broadcast(&t->drained);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void rt_free(sw_remote_tier *t)
{
    if (!t)
        return;
    sw_remote_close(t->r);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->not_empty);
    pthread_cond_destroy(&t->not_full);
    pthread_cond_destroy(&t->drained);
    free(t->ring);
    free(t->mem);
    free(t->bk);
    free(t->bsrc);
    free(t->blen);
    free(t->bgen);
    free(t->bst);
    free(t);
}

sw_status sw_remote_tier_open(const sw_store_config *c, uint32_t stripe_bytes, int read_only,
                              sw_remote_tier_install_fn install, void *store,
                              sw_remote_tier **out)
{
    *out = NULL;
    if (c->struct_size < offsetof(sw_store_config, remote) + sizeof(c->remote) || !c->remote)
        return SW_OK;
    int32_t qmax = c->struct_size >= offsetof(sw_store_config, remote_queue_entries) + 4
                       ? (int32_t)c->remote_queue_entries : 0;
    int32_t wait = c->struct_size >= offsetof(sw_store_config, remote_queue_wait_ms) + 4
                       ? c->remote_queue_wait_ms : 0;
    int32_t closew = c->struct_size >= offsetof(sw_store_config, remote_close_wait_ms) + 4
                         ? c->remote_close_wait_ms : 0;
    int32_t wb = c->struct_size >= offsetof(sw_store_config, remote_write_back) + 4
                     ? c->remote_write_back : 0;
    uint32_t cap = qmax ? (uint32_t)qmax : RT_DEF_QUEUE;
    if (cap > RT_MAX_QUEUE)
        return sw_fail(SW_STATUS_INVALID, "remote_queue_entries %u > %u", cap, RT_MAX_QUEUE);
    if (wb != 0 && wb != 1)
        return sw_fail(SW_STATUS_INVALID, "remote_write_back %d (want 0 or 1)", wb);

    sw_remote_tier *t = (sw_remote_tier *)calloc(1, sizeof *t);
    if (!t)
        return sw_fail(SW_STATUS_NO_MEMORY, "remote tier");
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->not_empty, &ca);
    pthread_cond_init(&t->not_full, &ca);
    pthread_cond_init(&t->drained, &ca);
    pthread_condattr_destroy(&ca);
    t->stripe_bytes = stripe_bytes;
    t->wait_ms = wait == 0 ? RT_DEF_WAIT_MS : wait;
    t->close_ms = closew == 0 ? RT_DEF_CLOSE_MS : closew;
    /* A read-only store never writes back (sw_store_config.read_only). */
    t->write_back = wb && !read_only && install;
    t->install = install;
    t->store = store;
    t->cap = cap;
    int32_t mp = c->remote->struct_size >= offsetof(sw_remote_config, max_pipeline) + 4
                     ? c->remote->max_pipeline : 0;
    t->batch_max = mp > 0 ? mp : 64;
    sw_status st = sw_remote_open(c->remote, &t->r);
    if (st != SW_OK) {
        rt_free(t);
        return st;
    }
    size_t sb = t->stripe_bytes ? t->stripe_bytes : 1;
    t->ring = (rt_entry *)calloc(cap, sizeof *t->ring);
    t->mem = (char *)malloc((size_t)cap * sb);
    t->bk = (sw_store_key *)calloc((size_t)t->batch_max, sizeof *t->bk);
    t->bsrc = (const void **)calloc((size_t)t->batch_max, sizeof *t->bsrc);
    t->blen = (size_t *)calloc((size_t)t->batch_max, sizeof *t->blen);
    t->bgen = (uint64_t *)calloc((size_t)t->batch_max, sizeof *t->bgen);
    t->bst = (sw_status *)calloc((size_t)t->batch_max, sizeof *t->bst);
    if (!t->ring || !t->mem || !t->bk || !t->bsrc || !t->blen || !t->bgen || !t->bst) {
        rt_free(t);
        return sw_fail(SW_STATUS_NO_MEMORY, "remote write-through queue of %u stripes", cap);
    }
    for (uint32_t i = 0; i < cap; i++)
        t->ring[i].data = t->mem + (size_t)i * sb;
    if (pthread_create(&t->worker, NULL, worker_main, t) != 0) {
        rt_free(t);
        return sw_fail(SW_STATUS_NO_MEMORY, "remote write-through thread");
    }
    t->worker_started = 1;
    *out = t;
    return SW_OK;
}

void sw_remote_tier_close(sw_remote_tier *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_broadcast(&t->not_empty);
    if (t->close_ms < 0) {
        t->abort_rest = 1;
    } else {
        struct timespec dl;
        abs_deadline(&dl, t->close_ms);
        while (t->count) {
            if (pthread_cond_timedwait(&t->drained, &t->mu, &dl) == ETIMEDOUT)
                break;
        }
        t->abort_rest = 1; /* what is left (beyond the batch in flight) is dropped */
    }
    pthread_cond_broadcast(&t->not_empty);
    pthread_mutex_unlock(&t->mu);
    if (t->worker_started)
        pthread_join(t->worker, NULL);
    rt_free(t);
}

void sw_remote_tier_enqueue(sw_remote_tier *t, const sw_store_key *key, const void *src,
                            size_t bytes, uint64_t generation)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    /* A queued, not yet sent stripe of the same key is replaced. */
    for (uint32_t i = t->inflight; i < t->count; i++) {
        rt_entry *e = &t->ring[(t->head + i) % t->cap];
        if (sw_store_key_eq(&e->key, key)) {
            if (e->generation <= generation) {
                memcpy(e->data, src, bytes);
                e->length = bytes;
                e->generation = generation;
            }
            t->put_replaced++;
            t->puts_queued++;
            pthread_mutex_unlock(&t->mu);
            return;
        }
    }
    if (t->count == t->cap && t->wait_ms > 0) {
        uint64_t t0 = mono_us();
        struct timespec dl;
        abs_deadline(&dl, t->wait_ms);
        while (t->count == t->cap && !t->stop) {
            if (pthread_cond_timedwait(&t->not_full, &t->mu, &dl) == ETIMEDOUT)
                break;
        }
        t->wait_us += mono_us() - t0;
    }
    if (t->count == t->cap || t->stop) {
        t->put_drops++;
        pthread_mutex_unlock(&t->mu);
        return;
    }
    rt_entry *e = &t->ring[(t->head + t->count) % t->cap];
    e->key = *key;
    e->key.reserved = 0;
    e->generation = generation;
    e->length = bytes;
    if (bytes)
        memcpy(e->data, src, bytes);
    t->count++;
    t->puts_queued++;
    pthread_cond_signal(&t->not_empty);
    pthread_mutex_unlock(&t->mu);
}

/* Fetches every key whose status is SW_STATUS_NOT_FOUND from the remote
 * into a scratch buffer, checks it and delivers it (memcpy, or a device copy
 * on `stream`), then writes back what was delivered. */
sw_status sw_remote_tier_fetch(sw_remote_tier *t, size_t n, const sw_store_key *keys,
                               void *const *dst, int device, void *stream, size_t dst_bytes,
                               size_t *lengths, uint64_t *generations, sw_status *statuses)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += statuses[i] == SW_STATUS_NOT_FOUND;
    if (!t || m == 0)
        return SW_OK;
    const size_t sb = t->stripe_bytes ? t->stripe_bytes : 1;
    size_t *idx = (size_t *)malloc(m * sizeof *idx);
    sw_store_key *rk = (sw_store_key *)malloc(m * sizeof *rk);
    void **rd = (void **)malloc(m * sizeof *rd);
    size_t *rl = (size_t *)malloc(m * sizeof *rl);
    uint64_t *rg = (uint64_t *)malloc(m * sizeof *rg);
    sw_status *rs = (sw_status *)malloc(m * sizeof *rs);
    char *buf = (char *)malloc(m * sb);
    sw_status ret = SW_OK;
    if (!idx || !rk || !rd || !rl || !rg || !rs || !buf) {
        ret = sw_fail(SW_STATUS_NO_MEMORY, "remote fetch of %zu keys", m);
        goto out;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (statuses[i] == SW_STATUS_NOT_FOUND) {
            idx[j] = i;
            rk[j] = keys[i];
            rd[j] = buf + j * sb;
            j++;
        }
    /* dst_bytes = stripe_bytes: a value longer than this store's stripes
     * comes back INVALID, never copied. */
    (void)sw_remote_get_batch(t->r, m, rk, rd, t->stripe_bytes, rl, rg, rs);

    uint64_t hits = 0, nf = 0, corrupt = 0, errs = 0, bytes = 0, wbs = 0;
    sw_status dev_err = SW_OK;
    for (j = 0; j < m; j++) {
        size_t i = idx[j];
        switch (rs[j]) {
        case SW_OK:
            if (rl[j] > t->stripe_bytes || rg[j] == 0) {
                corrupt++;
                statuses[i] = SW_STATUS_CORRUPT;
                break;
            }
            if (rl[j] > dst_bytes) {
                statuses[i] = SW_STATUS_INVALID;
                break;
            }
            if (device) {
                if (dev_err == SW_OK && rl[j])
                    dev_err = sw_cuda_memcpy_h2d_async(dst[i], rd[j], rl[j], stream);
            } else if (rl[j]) {
                memcpy(dst[i], rd[j], rl[j]);
            }
            statuses[i] = SW_OK;
            if (lengths)
                lengths[i] = rl[j];
            if (generations)
                generations[i] = rg[j];
            hits++;
            bytes += rl[j];
            break;
        case SW_STATUS_NOT_FOUND:
            nf++;
            break;
        case SW_STATUS_CORRUPT:
        case SW_STATUS_INVALID: /* longer than a stripe of this store */
            corrupt++;
            statuses[i] = SW_STATUS_CORRUPT;
            break;
        default: /* down, timeout, error reply: a miss */
            errs++;
            break;
        }
    }
    if (device) {
        if (dev_err == SW_OK)
            dev_err = sw_cuda_stream_sync(stream);
        if (dev_err != SW_OK) {
            for (j = 0; j < m; j++)
                if (statuses[idx[j]] == SW_OK) {
                    statuses[idx[j]] = dev_err;
                    if (lengths)
                        lengths[idx[j]] = 0;
                    if (generations)
                        generations[idx[j]] = 0;
                }
            ret = dev_err;
        }
    }
    /* Write-back of what was delivered (keys that came back OK). Only
     * NOT_FOUND keys were fetched: an unprovable key reads CORRUPT and is
     * neither fetched nor installed -- a remote copy may be older than the
     * version the journal lost (write-through can lag), and installing it
     * would clear the mark; the store's install checks again under its lock
     * (a key that became unprovable or was written since is left alone). */
    if (t->write_back) {
        size_t k = 0;
        for (j = 0; j < m; j++) {
            size_t i = idx[j];
            if (statuses[i] != SW_OK || rs[j] != SW_OK)
                continue;
            rk[k] = keys[i];
            rd[k] = rd[j];
            rl[k] = rl[j];
            k++;
        }
        if (k)
            wbs = t->install(t->store, k, rk, (const void *const *)rd, rl);
    }
    pthread_mutex_lock(&t->mu);
    t->gets += m;
    t->hits += hits;
    t->not_found += nf;
    t->corruptions += corrupt;
    t->errors += errs;
    t->bytes_read += bytes;
    t->write_backs += wbs;
    pthread_mutex_unlock(&t->mu);
out:
    free(idx);
    free(rk);
    free(rd);
    free(rl);
    free(rg);
    free(rs);
    free(buf);
    return ret;
}

void sw_remote_tier_stats(sw_remote_tier *t, sw_store_stats *st)
{
    if (!t)
        return;
    st->remote_enabled = 1;
    pthread_mutex_lock(&t->mu);
    st->remote_gets = t->gets;
    st->remote_hits = t->hits;
    st->remote_not_found = t->not_found;
    st->remote_corruptions = t->corruptions;
    st->remote_errors = t->errors;
    st->remote_bytes_read = t->bytes_read;
    st->remote_write_backs = t->write_backs;
    st->remote_puts_queued = t->puts_queued;
    st->remote_puts = t->puts;
    st->remote_put_errors = t->put_errors;
    st->remote_put_drops = t->put_drops;
    st->remote_put_replaced = t->put_replaced;
    st->remote_queue_len = t->count;
    st->remote_queue_entries = t->cap;
    st->remote_queue_wait_us = t->wait_us;
    pthread_mutex_unlock(&t->mu);
    sw_remote_stats rs;
    memset(&rs, 0, sizeof rs);
    rs.struct_size = sizeof rs;
    if (sw_remote_get_stats(t->r, &rs) == SW_OK) {
        st->remote_reconnects = rs.reconnects;
        st->remote_timeouts = rs.timeouts;
        st->remote_connect_failures = rs.connect_failures;
        st->remote_get_p99_us = rs.get_p99_us;
        st->remote_put_p99_us = rs.put_p99_us;
    }
}
