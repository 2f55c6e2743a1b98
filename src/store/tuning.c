/* The store's own decisions (sw_store_tuning, store_internal.h): one pure
 * function from the config and the facts of a handle, and the NAME=VALUE
 * parser that tests and benchmarks use to override single fields. */
#include "store/store_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define KIB ((int64_t)1 << 10)
#define MIB ((int64_t)1 << 20)

void sw_store_tuning_auto(sw_store_tuning *t)
{
    t->read_chunk_bytes = SW_STORE_TUNE_AUTO;
    t->ticket_chunk_bytes = SW_STORE_TUNE_AUTO;
    t->read_merge_bytes = SW_STORE_TUNE_AUTO;
    t->read_gap_bytes = SW_STORE_TUNE_AUTO;
    t->read_inflight_bytes = SW_STORE_TUNE_AUTO;
    t->read_window_bytes = SW_STORE_TUNE_AUTO;
    t->compact_min_records = SW_STORE_TUNE_AUTO;
    t->io_mem_register = SW_STORE_TUNE_AUTO;
    t->write_group_puts = SW_STORE_TUNE_AUTO;
}

static int64_t pick(int64_t want, int64_t def) { return want >= 0 ? want : def; }

/* A cut below one extent would split a stripe: at least one extent. */
static int64_t chunk_at_least_slot(int64_t c, uint64_t slot_bytes)
{
    return c > 0 && (uint64_t)c < slot_bytes ? (int64_t)slot_bytes : c;
}

void sw_store_tuning_decide(const sw_store_config *c, const sw_store_facts *f,
                            const sw_store_tuning *want, sw_store_tuning *out)
{
    sw_store_tuning w;
    if (want)
        w = *want;
    else
        sw_store_tuning_auto(&w);
    const int pread = f->backend == SW_STORE_IO_PREAD;

    out->read_chunk_bytes =
        chunk_at_least_slot(pick(w.read_chunk_bytes, pread ? 0 : 128 * KIB), f->slot_bytes);
    out->ticket_chunk_bytes = chunk_at_least_slot(pick(w.ticket_chunk_bytes, 0), f->slot_bytes);

    int64_t m = pick(w.read_merge_bytes, 4 * MIB);
    if (m > (int64_t)1 << 30)
        m = (int64_t)1 << 30; /* a request's length is 32-bit */
    out->read_merge_bytes = (uint64_t)m > f->run_bytes ? m : 0;

    out->read_gap_bytes = pick(w.read_gap_bytes, 64 * KIB);

    uint64_t cfg_cap = c && c->struct_size >= offsetof(sw_store_config, read_inflight_bytes) +
                                                   sizeof c->read_inflight_bytes
                           ? c->read_inflight_bytes
                           : 0;
    if (cfg_cap > (uint64_t)INT64_MAX)
        cfg_cap = (uint64_t)INT64_MAX;
    const int64_t cap = pick(w.read_inflight_bytes, cfg_cap ? (int64_t)cfg_cap : 4 * MIB);
    out->read_inflight_bytes = cap;

    const int64_t bounce = (int64_t)f->bounce_bytes;
    if (w.read_window_bytes >= 0)
        out->read_window_bytes = w.read_window_bytes < bounce ? w.read_window_bytes : 0;
    else
        out->read_window_bytes = cap && cap <= bounce / 2 ? 2 * cap : 0;

    out->compact_min_records = pick(w.compact_min_records, 4096);
    out->io_mem_register = w.io_mem_register >= 0 ? w.io_mem_register != 0 : 1;

    int64_t room = (int64_t)(f->bounce_bytes / (SW_STORE_ALIGN + f->slot_bytes));
    if (room < 1)
        room = 1;
    const int64_t g = pick(w.write_group_puts, room < 4096 ? room : 4096);
    out->write_group_puts = g < 1 ? 1 : g > room ? room : g;
}

static const struct {
    const char *name;
    size_t off;
} fields[] = {
    {"read_chunk_bytes", offsetof(sw_store_tuning, read_chunk_bytes)},
    {"ticket_chunk_bytes", offsetof(sw_store_tuning, ticket_chunk_bytes)},
    {"read_merge_bytes", offsetof(sw_store_tuning, read_merge_bytes)},
    {"read_gap_bytes", offsetof(sw_store_tuning, read_gap_bytes)},
    {"read_inflight_bytes", offsetof(sw_store_tuning, read_inflight_bytes)},
    {"read_window_bytes", offsetof(sw_store_tuning, read_window_bytes)},
    {"compact_min_records", offsetof(sw_store_tuning, compact_min_records)},
    {"io_mem_register", offsetof(sw_store_tuning, io_mem_register)},
    {"write_group_puts", offsetof(sw_store_tuning, write_group_puts)},
};

sw_status sw_store_tuning_parse(sw_store_tuning *t, const char *spec)
{
    if (!t || !spec)
        return sw_fail(SW_STATUS_INVALID, "store tuning: null argument");
    sw_store_tuning r = *t;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t nlen = eq ? (size_t)(eq - p) : len;
        size_t i = 0;
        for (; i < sizeof fields / sizeof fields[0]; i++)
            if (strlen(fields[i].name) == nlen && !strncmp(fields[i].name, p, nlen))
                break;
        if (i == sizeof fields / sizeof fields[0])
            return sw_fail(SW_STATUS_INVALID, "store tuning: unknown field '%.*s' (read_chunk_"
                           "bytes, ticket_chunk_bytes, read_merge_bytes, read_gap_bytes, "
                           "read_inflight_bytes, read_window_bytes, compact_min_records, "
                           "io_mem_register, write_group_puts)", (int)nlen, p);
        if (!eq)
            return sw_fail(SW_STATUS_INVALID, "store tuning: '%.*s' has no =VALUE", (int)len, p);
        char num[32];
        size_t vlen = len - nlen - 1;
        if (vlen == 0 || vlen >= sizeof num)
            return sw_fail(SW_STATUS_INVALID, "store tuning: bad value for %s", fields[i].name);
        memcpy(num, eq + 1, vlen);
        num[vlen] = '\0';
        char *e = NULL;
        errno = 0;
        long long v = strtoll(num, &e, 10);
        if (errno || *e || v < SW_STORE_TUNE_AUTO)
            return sw_fail(SW_STATUS_INVALID, "store tuning: %s=%s (want an integer >= -1, "
                           "-1 = the library's choice)", fields[i].name, num);
        *(int64_t *)((char *)&r + fields[i].off) = (int64_t)v;
        p = end ? end + 1 : p + len;
    }
    *t = r;
    return SW_OK;
}
