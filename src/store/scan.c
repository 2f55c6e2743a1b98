/* Whole-store walks for tools: sw_store_iterate (index only) and
 * sw_store_verify (every live extent read back and checked). */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

static sw_status scan_enter(sw_store *s, const char *what)
{
    if (!s)
        return sw_fail(SW_STATUS_INVALID, "%s: store is NULL", what);
    pthread_mutex_lock(&s->lock);
    if (s->failed) {
        pthread_mutex_unlock(&s->lock);
        return sw_fail(SW_STATUS_FAILED, "the store handle hit an unrecoverable error before");
    }
    /* verify reads through the bounce buffer: read tickets first */
    sw_store_reads_drain(s);
    return SW_OK;
}

static sw_store_entry entry_of(const sw_store *s, uint32_t v, sw_status st)
{
    const sw_slot *e = &s->slots[v];
    sw_store_entry out;
    memset(&out, 0, sizeof out);
    out.key = e->key;
    out.generation = e->generation;
    out.length = e->length;
    out.in_host = e->host != SW_NIL;
    out.extent = v;
    out.status = st;
    return out;
}

sw_status sw_store_iterate(sw_store *s, sw_store_visit_fn fn, void *ctx)
{
    if (!fn)
        return sw_fail(SW_STATUS_INVALID, "sw_store_iterate: fn is NULL");
    SW_TRY(scan_enter(s, "sw_store_iterate"));
    for (uint32_t v = 0; v < s->nslots; v++) {
        if (!s->slots[v].used)
            continue;
        sw_store_entry e = entry_of(s, v, SW_OK);
        if (fn(ctx, &e))
            break;
    }
    pthread_mutex_unlock(&s->lock);
    return SW_OK;
}

/* Checks extent v whose header is at hdr and payload at pay. */
static sw_status check_extent(const sw_store *s, uint32_t v, const char *hdr, const char *pay)
{
    const sw_slot *e = &s->slots[v];
    sw_store_extent_hdr h;
    if (sw_store_decode_extent_hdr((const uint8_t *)hdr, SW_STORE_HDR_BYTES, &h) != SW_OK ||
        !sw_store_key_eq(&h.key, &e->key) || h.generation != e->generation ||
        h.length != e->length || h.payload_crc != e->crc || h.slot != v ||
        sw_crc32c(pay, h.length) != h.payload_crc)
        return SW_STATUS_CORRUPT;
    return SW_OK;
}

typedef struct verify_state {
    sw_store_verify_result r;
    sw_store_visit_fn fn;
    void *ctx;
    int stop;
} verify_state;

static void report(sw_store *s, verify_state *vs, uint32_t v, sw_status st)
{
    vs->r.extents_checked++;
    if (st == SW_OK) {
        vs->r.extents_ok++;
    } else if (st == SW_STATUS_CORRUPT) {
        vs->r.extents_corrupt++;
        s->st.corruptions++;
    } else {
        vs->r.extents_io_error++;
    }
    if (vs->fn && !vs->stop) {
        sw_store_entry e = entry_of(s, v, st);
        vs->stop = vs->fn(vs->ctx, &e) != 0;
    }
}

static sw_status verify_locked(sw_store *s, verify_state *vs)
{
    const uint32_t R = s->g.run_blocks;
    const uint64_t sb = s->g.slot_bytes, hb = s->g.run_header_bytes;
    size_t qd = s->queue_depth ? s->queue_depth : 1;
    uint32_t *batch = (uint32_t *)malloc(sizeof(uint32_t) * qd);
    if (!batch)
        return sw_fail(SW_STATUS_NO_MEMORY, "verify plan");
    uint64_t run = 0;
    while (run < s->g.nruns && !vs->stop) {
        /* A batch of runs in use, each read as [header | slots 0..last used]. */
        size_t nb = 0, used = 0;
        for (; run < s->g.nruns && nb < qd; run++) {
            if (!s->runs[run].used)
                continue;
            uint32_t last = 0;
            for (uint32_t p = 0; p < R; p++)
                if (s->slots[run * R + p].used)
                    last = p;
            size_t need = (size_t)(hb + (uint64_t)(last + 1) * sb);
            if (used + need > s->bounce_bytes)
                break; /* next batch; a whole run always fits (bounce >= 2 runs) */
            s->ops[nb] = (sw_io_op){s->data_fd, 0, s->bounce + used, need,
                                    sw_store_run_off(s, (uint32_t)run), 0};
            batch[nb++] = (uint32_t)run;
            used += need;
        }
        if (!nb)
            continue;
        sw_io_run(s->io, s->ops, nb);
        vs->r.read_requests += nb;
        for (size_t k = 0; k < nb; k++) {
            const sw_io_op *op = &s->ops[k];
            int ok = op->res == (int64_t)op->len;
            if (ok)
                vs->r.bytes_read += op->len;
            else
                s->st.io_errors++;
            const char *base = (const char *)op->buf;
            uint64_t r0 = (uint64_t)batch[k] * R;
            for (uint64_t p = 0; p < R; p++) {
                uint32_t v = (uint32_t)(r0 + p);
                if (!s->slots[v].used)
                    continue;
                sw_status st = ok ? check_extent(s, v, base + p * SW_STORE_HDR_BYTES,
                                                 base + hb + p * sb)
                                  : SW_STATUS_IO;
                report(s, vs, v, st);
            }
        }
    }
    free(batch);
    /* Host-tier copies: the bytes a hit would return. */
    for (uint32_t h = 0; h < s->host_n && !vs->stop; h++) {
        uint32_t v = s->host[h].slot;
        if (v == SW_NIL)
            continue;
        vs->r.host_checked++;
        if (sw_crc32c(sw_store_host_ptr(s, h), s->slots[v].length) != s->slots[v].crc) {
            vs->r.host_corrupt++;
            s->st.corruptions++;
        }
    }
    return SW_OK;
}

sw_status sw_store_verify(sw_store *s, sw_store_visit_fn fn, void *ctx,
                          sw_store_verify_result *res)
{
    if (res && res->struct_size < 8)
        return sw_fail(SW_STATUS_INVALID, "sw_store_verify: res->struct_size < 8");
    SW_TRY(scan_enter(s, "sw_store_verify"));
    verify_state vs;
    memset(&vs, 0, sizeof vs);
    vs.fn = fn;
    vs.ctx = ctx;
    sw_status st = verify_locked(s, &vs);
    pthread_mutex_unlock(&s->lock);
    if (res) {
        uint32_t want = res->struct_size;
        vs.r.struct_size = want;
        memcpy(res, &vs.r, want < sizeof vs.r ? want : sizeof vs.r);
    }
    if (st != SW_OK)
        return st;
    if (vs.r.extents_corrupt || vs.r.host_corrupt)
        return sw_fail(SW_STATUS_CORRUPT, "verify: %llu corrupt extent(s), %llu corrupt host "
                       "cop(ies) of %llu stripes",
                       (unsigned long long)vs.r.extents_corrupt,
                       (unsigned long long)vs.r.host_corrupt,
                       (unsigned long long)vs.r.extents_checked);
    if (vs.r.extents_io_error)
        return sw_fail(SW_STATUS_IO, "verify: %llu stripe(s) could not be read",
                       (unsigned long long)vs.r.extents_io_error);
    return SW_OK;
}
