/* Leases of host-tier entries (host_lease.h). Everything runs under the
 * handle's lock. A lease changes nothing in the index but the LRU/CLOCK
 * touch a read makes, so it needs no drain of the read tickets in flight
 * (like the lookups of sw_store_read_submit); the tickets' own host-tier
 * fills (sw_store_host_put) never pick a leased entry. */
#include "store/host_lease.h"
#include "store/store_internal.h"

#include <string.h>

int sw_store_host_mapped(sw_store *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    int m = s->host_n > 0 && s->host_pinned;
    pthread_mutex_unlock(&s->lock);
    return m;
}

size_t sw_store_host_entries(sw_store *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    const size_t n = s->host_n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static void lease_none(sw_store_lease *l)
{
    memset(l, 0, sizeof *l);
    l->entry = SW_NIL;
}

sw_status sw_store_host_lease(sw_store *s, size_t n, const sw_store_key *keys,
                              uint32_t len_multiple, sw_store_lease *out, size_t *nleased)
{
    if (nleased)
        *nleased = 0;
    if (!s || (n && (!keys || !out)))
        return sw_fail(SW_STATUS_INVALID, "sw_store_host_lease: null store, keys or out");
    for (size_t i = 0; i < n; i++)
        lease_none(&out[i]);
    pthread_mutex_lock(&s->lock);
    if (s->failed) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_FAILED, "the store handle hit an unrecoverable error before");
    }
    size_t got = 0;
    if (s->host_used == 0) {
        pthread_mutex_unlock(&s->lock);
        return SW_OK;
    }
    /* Windows of keys, each in stages whose cache misses overlap: hash and
     * prefetch every bucket; prefetch the slot each bucket's first entry
     * names (its key, usually the one); probe, then prefetch the host
     * entry and the LRU neighbours the touch rewrites; then lease. (One
     * stage, the buckets only: ~55 ns a stripe in the H200 host's prelease
     * thread, docs/perf/swap.md.) */
    enum { WINDOW = 32 };
    uint64_t hs[WINDOW];
    uint32_t vs[WINDOW];
    for (size_t w0 = 0; w0 < n; w0 += WINDOW) {
        const size_t w1 = n - w0 < WINDOW ? n : w0 + WINDOW;
        for (size_t i = w0; i < w1; i++) {
            hs[i - w0] = sw_store_key_hash(&keys[i]);
            __builtin_prefetch(sw_store_index_bucket(s, hs[i - w0]));
        }
        for (size_t i = w0; i < w1; i++) {
            const uint32_t v0 = *sw_store_index_bucket(s, hs[i - w0]);
            if (v0 != SW_NIL)
                __builtin_prefetch(&s->slots[v0]);
        }
        for (size_t i = w0; i < w1; i++) {
            const sw_store_key *k = &keys[i];
            uint32_t v = SW_NIL;
            if (k->kind <= SW_STORE_KIND_V && k->reserved == 0) /* else the read reports it */
                v = sw_store_index_find_h(s, k, hs[i - w0]);
            vs[i - w0] = v;
            if (v == SW_NIL)
                continue;
            const sw_slot *e = &s->slots[v];
            if (e->host != SW_NIL)
                __builtin_prefetch(&s->host[e->host], 1);
            if (e->lru_prev != SW_NIL)
                __builtin_prefetch(&s->slots[e->lru_prev], 1);
            if (e->lru_next != SW_NIL)
                __builtin_prefetch(&s->slots[e->lru_next], 1);
        }
        for (size_t i = w0; i < w1; i++) {
            const uint32_t v = vs[i - w0];
            if (v == SW_NIL)
                continue;
            const sw_slot *e = &s->slots[v];
            const uint32_t h = e->host;
            if (h == SW_NIL || (len_multiple > 1 && e->length % len_multiple != 0))
                continue;
            if (s->host[h].lease == UINT32_MAX)
                continue; /* cannot count another: read it instead */
            if (s->host[h].lease++ == 0)
                s->host_leased++;
            sw_store_lru_touch(s, v);
            sw_store_host_touch(s, h);
            s->st.host_hits++;
            s->st.host_bytes_read += e->length;
            out[i].ptr = sw_store_host_ptr(s, h);
            out[i].generation = e->generation;
            out[i].length = e->length;
            out[i].crc = e->crc;
            out[i].entry = h;
            got++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (nleased)
        *nleased = got;
    return SW_OK;
}

uint64_t sw_store_host_unmaps(sw_store *s, size_t *leased)
{
    if (leased)
        *leased = 0;
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    const uint64_t u = s->host_lease_unmaps;
    if (leased)
        *leased = s->host_leased;
    pthread_mutex_unlock(&s->lock);
    return u;
}

int sw_store_host_retouch(sw_store *s, uint64_t unmaps, size_t n, const uint32_t *entries)
{
    if (!s || (n && !entries))
        return 0;
    pthread_mutex_lock(&s->lock);
    int ok = !s->failed && s->host_lease_unmaps == unmaps;
    for (size_t i = 0; ok && i < n; i++) {
        const uint32_t h = entries[i];
        ok = h < s->host_n && s->host[h].lease > 0 && !s->host[h].zombie &&
             s->host[h].slot != SW_NIL && s->slots[s->host[h].slot].host == h;
    }
    for (size_t i = 0; ok && i < n; i++) {
        const uint32_t h = entries[i], v = s->host[h].slot;
        sw_store_lru_touch(s, v);
        sw_store_host_touch(s, h);
        s->st.host_hits++;
        s->st.host_bytes_read += s->slots[v].length;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static void release_one(sw_store *s, uint32_t h)
{
    if (h >= s->host_n || s->host[h].lease == 0)
        return; /* not leased: a caller's bug, never a count below zero */
    if (--s->host[h].lease == 0) {
        s->host_leased--;
        if (s->host[h].zombie)
            sw_store_host_free(s, h); /* unmapped while leased: free only now */
    }
}

void sw_store_host_release(sw_store *s, size_t n, const sw_store_lease *leases)
{
    if (!s || !leases)
        return;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < n; i++)
        if (leases[i].ptr)
            release_one(s, leases[i].entry);
    pthread_mutex_unlock(&s->lock);
}

void sw_store_host_release_entries(sw_store *s, size_t n, const uint32_t *entries)
{
    if (!s || !entries)
        return;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < n; i++)
        release_one(s, entries[i]);
    pthread_mutex_unlock(&s->lock);
}

int sw_store_host_invalidate(sw_store *s, uint32_t entry, uint64_t generation)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    int dropped = 0;
    if (entry < s->host_n && !s->host[entry].zombie) {
        const uint32_t v = s->host[entry].slot;
        if (v != SW_NIL && s->slots[v].host == entry && s->slots[v].generation == generation) {
            sw_store_host_drop(s, v);
            s->st.corruptions++;
            dropped = 1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return dropped;
}

sw_status sw_store_test_host_poke(sw_store *s, const sw_store_key *key, size_t off,
                                  uint8_t mask)
{
    if (!s || !key)
        return sw_fail(SW_STATUS_INVALID, "sw_store_test_host_poke: null argument");
    pthread_mutex_lock(&s->lock);
    const uint32_t v = s->host_n ? sw_store_index_find(s, key) : SW_NIL;
    const uint32_t h = v != SW_NIL ? s->slots[v].host : SW_NIL;
    sw_status st = SW_OK;
    if (h == SW_NIL)
        st = sw_fail(SW_STATUS_NOT_FOUND, "sw_store_test_host_poke: no host-tier copy");
    else if (off >= s->slots[v].length)
        st = sw_fail(SW_STATUS_INVALID, "sw_store_test_host_poke: offset %zu >= length %u", off,
                     s->slots[v].length);
    else
        sw_store_host_ptr(s, h)[off] ^= (char)mask;
    pthread_mutex_unlock(&s->lock);
    return st;
}
