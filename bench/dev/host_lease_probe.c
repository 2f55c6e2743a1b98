/* host_lease_probe.c - the store's cost a stripe for host-tier leases, alone (no GPU, no
 * engine): the swap engine's host-tier case at d128 leases 24.6k 4 KiB stripes a call, at about
 * the copy engine's pace on the H200's host (docs/perf/swap.md, host tier). A store of 2050
 * blocks x 8 kv heads x K/V (32,800 stripes of 4 KiB, all in a 160 MiB host tier), leased in
 * store calls of 16 blocks' stripes (the prelease thread's PL_CH) in block order, then
 * released in one call; ns a stripe for each, 10 rounds after 2.
 * On the 2-core VM: lease 20.6-24.9 ns a stripe, release 1.8-2.4.
 * Build here (a no-CUDA build's static library):
 *   gcc -O2 -std=c11 -Iinclude -Isrc bench/dev/host_lease_probe.c build-nocuda/libspillway.a \
 *     -luring -lhiredis -lm -lpthread -o host_lease_probe
 * Usage: host_lease_probe [store dir = /var/tmp/host_lease_probe] (created; remove it after) */
#define _GNU_SOURCE
#include "spillway.h"
#include "store/host_lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv)
{
    enum { H = 8, NB = 2050, CH = 16, STRIPE = 4096 };
    const size_t spb = 2 * H, n = (size_t)NB * spb;
    sw_store_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.dir = argc > 1 ? argv[1] : "/var/tmp/host_lease_probe";
    c.capacity_bytes = 512ull << 20;
    c.stripe_bytes = STRIPE;
    c.run_blocks = 64;
    c.queue_depth = 64;
    c.host_tier_bytes = 160ull << 20;
    c.create = 1;
    sw_store *s = NULL;
    if (sw_store_open(&c, &s) != SW_OK) {
        fprintf(stderr, "open: %s\n", sw_last_error());
        return 1;
    }
    char *buf = aligned_alloc(4096, STRIPE);
    sw_store_key *keys = calloc(n, sizeof *keys);
    sw_store_lease *l = calloc(n, sizeof *l);
    if (!buf || !keys || !l)
        return 1;
    memset(buf, 7, STRIPE);
    size_t k = 0;
    for (int b = 0; b < NB; b++)
        for (int h = 0; h < H; h++)
            for (int kind = 0; kind < 2; kind++) {
                sw_store_key *x = &keys[k++];
                x->ns = 5;
                x->block = (uint32_t)b;
                x->kv_head = (uint16_t)h;
                x->kind = (uint8_t)kind;
                if (sw_store_write(s, x, buf, STRIPE, NULL) != SW_OK) {
                    fprintf(stderr, "write: %s\n", sw_last_error());
                    return 1;
                }
            }
    for (int r = 0; r < 12; r++) {
        const double t0 = now();
        size_t tot = 0;
        for (size_t i = 0; i < n; i += CH * spb) {
            const size_t m = n - i < CH * spb ? n - i : CH * spb;
            size_t got = 0;
            if (sw_store_host_lease(s, m, keys + i, 16, l + i, &got) != SW_OK)
                return 1;
            tot += got;
        }
        const double t1 = now();
        sw_store_host_release(s, n, l);
        const double t2 = now();
        if (r >= 2)
            printf("lease %.1f ns/stripe (%zu of %zu leased), release %.1f ns/stripe\n",
                   1e9 * (t1 - t0) / (double)n, tot, n, 1e9 * (t2 - t1) / (double)n);
    }
    sw_store_close(s);
    free(l);
    free(keys);
    free(buf);
    return 0;
}
