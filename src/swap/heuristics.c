/* The swap engine's own decisions (sw_swap_tuning) from the machine and the
 * store (sw_swap_facts): one pure function, unit-tested in
 * tests/test_swap_heuristics.c. The figures behind each value are in the
 * field comments of swap_internal.h and in docs/perf/swap.md. */
#include "swap_internal.h"
#include "swap_cuda.h"
#include "core/sw_core.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sw_swap_heuristics(const sw_swap_facts *f, sw_swap_tuning *t)
{
    memset(t, 0, sizeof *t);
    if (!f->aligned)
        t->run_evict = 0; /* runs_first reorders by store run: none to go by */
    else if (f->device_pool)
        t->run_evict = 8;
    else
        t->run_evict = f->host_tier ? 0 : 4;
    const int32_t sms = f->sms > 0 ? f->sms : 1;
    t->tile_ctas = sms;
    t->gather_ctas = (sms + 1) / 2;
    /* on a 2-CPU VM two polling threads beside the caller made the faked
     * host-tier step 3x slower; with >= 8 CPUs polling took late wake-ups
     * from 9 of 31 calls to 1 of 31 on the H200 (32e9a00, 60bea02) */
    t->spin_us = f->cpus >= 8 ? 2000 : 0;
    t->landing_mb = 64;
    t->landing_max_mb = 512;
    t->land_start = 64;
    t->land_blocks = 256;
    t->land_first = 320;
    t->land_groups = 4;
    t->land_gap_kb = 128;
    t->merge_chunks = 64;
    t->timeline = 0;
    t->host_gather = 1;
    t->align_tiles = 1;
    t->resident_fast = 1;
    t->keep_window = 1;
    t->kept_pct = 75;
    t->kept_idle_ms = 1000;
    /* the next call's first 16 MiB (0.3 ms of copies) covers a call's
     * start and tail (0.13-0.15 ms at d256) */
    t->land_ahead_mb = 16;
    t->resident_inline = 1;
}

/* (every field an int32_t, in this order) */
#define SW_TUNING_FIELDS(X)                                                                  \
    X(run_evict) X(tile_ctas) X(gather_ctas) X(spin_us) X(landing_mb) X(landing_max_mb) X(land_start) X(land_blocks)      \
    X(land_first) X(land_groups) X(land_gap_kb) X(merge_chunks) X(timeline) X(host_gather) X(align_tiles) \
    X(resident_fast) X(keep_window) X(kept_pct) X(kept_idle_ms) X(land_ahead_mb) X(resident_inline)

void sw_swap_tuning_default(sw_swap_tuning *t)
{
#define SW_TUNING_UNSET(f) t->f = SW_SWAP_TUNE_DEFAULT;
    SW_TUNING_FIELDS(SW_TUNING_UNSET)
#undef SW_TUNING_UNSET
}

sw_status sw_swap_tuning_parse(sw_swap_tuning *t, const char *spec)
{
    if (!t || !spec)
        return sw_fail(SW_STATUS_INVALID, "swap tuning: null argument");
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {
#define SW_TUNING_NAME(f) {#f, offsetof(sw_swap_tuning, f)},
        SW_TUNING_FIELDS(SW_TUNING_NAME)
#undef SW_TUNING_NAME
    };
    enum { NF = sizeof fields / sizeof fields[0] };
    sw_swap_tuning r = *t;
    for (const char *p = spec; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        const size_t nlen = eq ? (size_t)(eq - p) : len;
        size_t i = 0;
        while (i < NF && !(strlen(fields[i].name) == nlen && !strncmp(fields[i].name, p, nlen)))
            i++;
        if (i == NF) {
            char names[512];
            size_t k = 0;
            for (size_t j = 0; j < NF && k < sizeof names; j++)
                k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", j ? ", " : "",
                                      fields[j].name);
            return sw_fail(SW_STATUS_INVALID, "swap tuning: unknown field '%.*s' (%s)", (int)nlen,
                           p, names);
        }
        char num[24];
        const size_t vlen = eq ? len - nlen - 1 : 0;
        if (!eq || vlen == 0 || vlen >= sizeof num)
            return sw_fail(SW_STATUS_INVALID, "swap tuning: '%.*s' wants =INTEGER", (int)len, p);
        memcpy(num, eq + 1, vlen);
        num[vlen] = '\0';
        char *e = NULL;
        errno = 0;
        const long long v = strtoll(num, &e, 10);
        if (errno || *e || v < INT32_MIN + 1 || v > INT32_MAX)
            return sw_fail(SW_STATUS_INVALID, "swap tuning: %s=%s is not a 32-bit integer",
                           fields[i].name, num);
        *(int32_t *)((char *)&r + fields[i].off) = (int32_t)v;
        p = end ? end + 1 : p + len;
    }
    *t = r;
    return SW_OK;
}

void sw_swap_tuning_apply(sw_swap_tuning *t, const sw_swap_tuning *o)
{
#define SW_TUNING_SET(f)                                                                     \
    if (o->f != SW_SWAP_TUNE_DEFAULT)                                                          \
        t->f = o->f;
    SW_TUNING_FIELDS(SW_TUNING_SET)
#undef SW_TUNING_SET
}

/* ---- the device pool's tile sizes (declared in swap_internal.h) ---- */
int32_t sw_swap_dev_chunks(int32_t nblk, int32_t H, int32_t nrg, int32_t ctas)
{
    if (nblk < 1)
        return 1;
    const int64_t per = (int64_t)(H > 0 ? H : 1) * (nrg > 0 ? nrg : 1);
    const int64_t target = ctas > 0 ? ctas : 1;
    int64_t c = (target + per - 1) / per;
    const int64_t most = (nblk + 1) / 2; /* at least two blocks per CTA */
    if (c > most)
        c = most;
    if (c < 1)
        c = 1;
    return (int32_t)c;
}

size_t sw_swap_dev_part_floats(int32_t ql, int32_t nblk, int32_t H, int32_t G, int32_t D,
                               int32_t ctas)
{
    /* Fewer row groups mean more block ranges: the product is what the
     * partials hold, so it is sized per sequence, never from the longest
     * one alone (a short sequence next to a long one needed more). The
     * chunk count never decreases with nblk, so the tile size bounds it. */
    if (ql <= 0)
        return 0;
    const int32_t nrg = (int32_t)(((int64_t)ql * G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG);
    const int32_t nch = sw_swap_dev_chunks(nblk, H, nrg, ctas);
    return (size_t)nch * sw_cuda_swap_chunk_floats(H, nrg, D);
}

int sw_swap_dev_layout(uint64_t host_bytes, uint64_t file_bytes, int prev)
{
    if (host_bytes == 0 && file_bytes == 0)
        return prev;
    return host_bytes >= file_bytes ? 0 : 1;
}
