/* The host side of `spillway bench swap`'s host-tier case, on a machine
 * without a GPU: the device pool cannot be created
 * here, so this times the parts of its per-call host work that do not need
 * CUDA, with the bench's shape (h16-2/d256, block 16, 1 sequence x 2049
 * blocks, pool 512 slots, tile 128, read-ahead 4, host tier holding all of
 * the KV):
 *  - the tile planning (plan_tile: block order, victim ranking, keys),
 *    through the CPU engine (host pool, same attend.c planning code; its
 *    submit/compute figures are the host pool's, not the device path's);
 *  - the tile's victim ranking alone, on the engine's pool after the steps
 *    with 128 slots pinned (tile j-1): sw_swap_pool_rank (full qsort)
 *    against sw_swap_victims_first (the first tile_blocks entries), and that
 *    both give the same prefix;
 *  - the device path's lease of a tile's keys (sw_store_host_lease of 512
 *    keys, the call the device pool makes per tile) and the release.
 * Not a test: figures only. Build (after a CUDA-less build in build-cpu):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/dev/swap_host_plan.c \
 *      build-cpu/libspillway.a -o /tmp/swap_host_plan -luring -lhiredis -lpthread -lm
 *   /tmp/swap_host_plan /var/tmp
 */
#include "spillway.h"
#include "spillway_store.h"
#include "spillway_swap.h"
#include "store/host_lease.h"
#include "swap/swap_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define CHECK(x)                                                                              \
    do {                                                                                      \
        sw_status st_ = (x);                                                                  \
        if (st_ != SW_OK) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #x,                  \
                    sw_status_str(st_), sw_last_error());                                     \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/var/tmp";
    const int steps = argc > 2 ? atoi(argv[2]) : 5;
    const int32_t Hq = 16, H = 2, D = 256, B = 16, nblk = 2049, pool = 512, tile = 128;
    char path[4096];
    snprintf(path, sizeof path, "%s/h9-plan-XXXXXX", dir);
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        return 1;
    }
    const size_t stripe = (size_t)B * D * 2, blk_bytes = 2 * (size_t)H * stripe;
    sw_store_config sc;
    sw_store_config_init(&sc);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/store");
    sc.dir = path;
    sc.capacity_bytes = (uint64_t)nblk * blk_bytes * 3 / 2;
    sc.host_tier_bytes = (uint64_t)nblk * blk_bytes * 5 / 4;
    sw_store *store = NULL;
    CHECK(sw_store_open(&sc, &store));
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = 1;
    m.num_qo_heads = Hq;
    m.num_kv_heads = H;
    m.head_dim = D;
    m.block_size = B;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = pool;
    c.tile_blocks = tile;
    sw_swap *s = NULL;
    CHECK(sw_swap_create(&m, &c, store, &s));
    CHECK(sw_swap_seq_add(s, 1, 77, 0, (uint32_t)nblk + 64));
    uint16_t *k = malloc(blk_bytes / 2), *v = malloc(blk_bytes / 2);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int32_t b = 0; b < nblk; b++) {
        for (size_t i = 0; i < blk_bytes / 4; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            k[i] = (uint16_t)(0x3c00u + (r & 0x1ffu)); /* small positive BF16 */
            v[i] = (uint16_t)(0x3c00u + ((r >> 20) & 0x1ffu));
        }
        sw_swap_block bl;
        sw_swap_block_init(&bl);
        bl.dtype = SW_SWAP_KV_BF16;
        bl.valid_tokens = b == nblk - 1 ? 1 : B;
        bl.k = k;
        bl.v = v;
        bl.k_bytes = bl.v_bytes = blk_bytes / 2;
        CHECK(sw_swap_offload(s, 1, 0, b, &bl));
    }
    uint16_t *q = calloc((size_t)Hq * D, 2), *o = calloc((size_t)Hq * D, 2);
    for (int32_t i = 0; i < Hq * D; i++)
        q[i] = (uint16_t)(0x3c00u + (i & 0xff));
    const uint64_t ids[1] = {1};
    const int32_t ind[2] = {0, 1};
    sw_swap_attend_params p;
    sw_swap_attend_params_init(&p);
    p.batch = 1;
    p.seq_ids = ids;
    p.q_indptr = ind;
    p.q = q;
    p.o = o;
    CHECK(sw_swap_attend(s, &p, NULL, NULL)); /* warm-up */
    /* the engine's steps (the ranking's own A/B is below: the full
     * ranking per tile lost, dee11e9) */
    double plan[1] = {0}, step[1] = {0}, sub[1] = {0};
    uint64_t ev[1] = {0};
    for (int i = 0; i < steps; i++) {
        const int mode = 0;
        sw_swap_stats s0, s1;
        memset(&s0, 0, sizeof s0);
        s0.struct_size = sizeof s0;
        s1 = s0;
        CHECK(sw_swap_get_stats(s, &s0));
        const double t0 = now_s();
        CHECK(sw_swap_attend(s, &p, NULL, NULL));
        step[mode] += now_s() - t0;
        CHECK(sw_swap_get_stats(s, &s1));
        plan[mode] += s1.plan_seconds - s0.plan_seconds;
        sub[mode] += s1.submit_seconds - s0.submit_seconds;
        ev[mode] += s1.evictions - s0.evictions;
    }
    const double n = steps;
    printf("CPU engine (host pool), tile %d, pool %d: %.2f ms per attend, planning %.3f ms "
           "per step, submitting %.3f ms, %.0f evictions\n",
           tile, pool, step[0] / n * 1e3, plan[0] / n * 1e3, sub[0] / n * 1e3,
           (double)ev[0] / n);
    {
        /* victim ranking: 128 slots pinned, as while tile j is planned */
        const int reps = 2000;
        int32_t *full = malloc(sizeof(int32_t) * pool), *first = malloc(sizeof(int32_t) * pool);
        void *scr = malloc(sw_swap_pool_rank_scratch(s));
        for (int32_t i = 0; i < pool; i++)
            s->slots[i].pin = (i * 7) % 4 == 1 ? 99 : 0;
        int32_t nf = 0, n1 = 0;
        double a = now_s();
        for (int i = 0; i < reps; i++)
            nf = sw_swap_pool_rank(s, full, scr);
        const double tf = (now_s() - a) / reps;
        a = now_s();
        for (int i = 0; i < reps; i++)
            n1 = sw_swap_victims_first(s, tile, first, scr);
        const double t1 = (now_s() - a) / reps;
        int same = n1 == (nf < tile ? nf : tile);
        for (int32_t i = 0; same && i < n1; i++)
            same = full[i] == first[i];
        printf("victim ranking, %d of %d slots unpinned: sw_swap_pool_rank %.1f us, "
               "sw_swap_victims_first(%d) %.1f us; same first %d: %s\n",
               nf, pool, tf * 1e6, tile, t1 * 1e6, n1, same ? "yes" : "NO");
        for (int32_t i = 0; i < pool; i++)
            s->slots[i].pin = 0;
        free(full);
        free(first);
        free(scr);
    }
    /* The device path's lease per tile: 96-128 missing blocks x 4 keys in
     * the store's write order, leased then released at the call's end. */
    const size_t nk = (size_t)tile * 2 * H;
    sw_store_key *keys = calloc(nk, sizeof *keys);
    sw_store_lease *ls = calloc(nk, sizeof *ls);
    uint32_t *ent = malloc(sizeof(uint32_t) * (size_t)nblk * 2 * H);
    double tl = 0, trel = 0;
    size_t leased = 0, calls = 0;
    for (int rep = 0; rep < steps; rep++) {
        size_t ne = 0;
        for (int32_t b0 = 512; b0 < nblk; b0 += tile) {
            size_t kk = 0;
            for (int32_t b = b0; b < b0 + tile && b < nblk; b++)
                for (int32_t h = 0; h < H; h++)
                    for (int kind = 0; kind < 2; kind++) {
                        memset(&keys[kk], 0, sizeof keys[kk]);
                        keys[kk].ns = 77;
                        keys[kk].block = (uint32_t)b;
                        keys[kk].kv_head = (uint16_t)h;
                        keys[kk].kind = (uint8_t)kind;
                        kk++;
                    }
            size_t got = 0;
            const double a = now_s();
            CHECK(sw_store_host_lease(store, kk, keys, 16, ls, &got));
            tl += now_s() - a;
            for (size_t i = 0; i < kk; i++)
                if (ls[i].ptr)
                    ent[ne++] = ls[i].entry;
            leased += got;
            calls++;
        }
        const double a = now_s();
        sw_store_host_release_entries(store, ne, ent);
        trel += now_s() - a;
    }
    printf("sw_store_host_lease: %zu calls of <= %zu keys, %.1f us per call (%.1f ns per key), "
           "%zu leased; release of a call's entries %.1f us\n",
           calls, nk, tl / (double)calls * 1e6, tl / (double)(calls * nk) * 1e9, leased,
           trel / n * 1e6);
    sw_swap_destroy(s);
    CHECK(sw_store_close(store));
    free(keys);
    free(ls);
    free(ent);
    free(k);
    free(v);
    free(q);
    free(o);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%.*s'", (int)(strlen(path) - 6), path);
    return system(cmd) != 0;
}
