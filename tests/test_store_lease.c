/* Leases of host-tier entries (store/host_lease.h), on the CPU: a lease
 * hands out the payload the store holds (its bytes, length, generation and
 * CRC32C), counts exactly one host-tier hit per leased key and nothing for
 * the others (not cached, missing, bad key, length filter); and a leased
 * entry's bytes survive everything that would reuse them -- CLOCK eviction
 * under a stream of new writes, an overwrite and a delete of its key --
 * until released, after which every entry is usable again. With every
 * entry leased, writes still succeed (not cached). The test hook flips a
 * byte that the lease's CRC then no longer matches; a copy its reader found
 * corrupt leaves the tier (sw_store_host_invalidate: counted, freed after
 * the last release, the key then read from the file; a stale generation or
 * a reused entry is left alone). Leases kept across calls: the count of
 * leased entries unmapped, and their retouch. Seeded (SW_TEST_SEED). */
#include "test_store_util.h"
#include "store/host_lease.h"

#define STRIPE 8192u
#define HOST_N 16u /* host-tier entries */

static uint64_t seed;

static sw_status put(sw_store *s, const sw_store_key *k, uint64_t tag, uint64_t *gen)
{
    uint8_t buf[STRIPE];
    ts_fill(buf, STRIPE, k, tag);
    return sw_store_write(s, k, buf, STRIPE, gen);
}

static void test_lease_basic(sw_store *s)
{
    const uint64_t ns = 11;
    sw_store_key keys[HOST_N + 4];
    uint64_t gens[HOST_N + 4];
    /* HOST_N - 2 keys written: all cached (writes fill the host tier) */
    for (uint32_t i = 0; i < HOST_N - 2; i++) {
        keys[i] = ts_key(ns, 0, i, 0, SW_STORE_KIND_K);
        CHECK_STATUS(put(s, &keys[i], 1, &gens[i]), SW_OK);
    }
    keys[HOST_N - 2] = ts_key(ns, 0, 999, 0, SW_STORE_KIND_V); /* never written */
    keys[HOST_N - 1] = ts_key(ns, 0, 1, 0, SW_STORE_KIND_K);
    keys[HOST_N - 1].reserved = 3; /* bad key */
    sw_store_lease l[HOST_N];
    const sw_store_stats a = ts_stats(s);
    size_t got = 99;
    CHECK_STATUS(sw_store_host_lease(s, HOST_N, keys, 16, l, &got), SW_OK);
    const sw_store_stats b = ts_stats(s);
    CHECK(got == HOST_N - 2);
    CHECK(b.host_hits - a.host_hits == HOST_N - 2);
    CHECK(b.host_bytes_read - a.host_bytes_read == (uint64_t)(HOST_N - 2) * STRIPE);
    CHECK(b.host_misses == a.host_misses && b.not_found == a.not_found);
    for (uint32_t i = 0; i < HOST_N - 2; i++) {
        CHECK(l[i].ptr != NULL);
        if (!l[i].ptr)
            continue;
        CHECK(((uintptr_t)l[i].ptr & 4095) == 0);
        CHECK(l[i].length == STRIPE && l[i].generation == gens[i]);
        CHECK(ts_check(l[i].ptr, STRIPE, &keys[i], 1));
        CHECK(l[i].crc == sw_crc32c(l[i].ptr, STRIPE));
    }
    CHECK(l[HOST_N - 2].ptr == NULL && l[HOST_N - 1].ptr == NULL);
    /* a length filter the stripes do not meet: nothing leased or counted */
    sw_store_lease l2[2];
    CHECK_STATUS(sw_store_host_lease(s, 2, keys, 3000, l2, &got), SW_OK);
    CHECK(got == 0 && l2[0].ptr == NULL && l2[1].ptr == NULL);
    CHECK(ts_stats(s).host_hits == b.host_hits);
    /* the same key twice: two leases of one entry */
    sw_store_key twice[2] = {keys[0], keys[0]};
    CHECK_STATUS(sw_store_host_lease(s, 2, twice, 0, l2, &got), SW_OK);
    CHECK(got == 2 && l2[0].ptr == l2[1].ptr && l2[0].entry == l2[1].entry);
    sw_store_host_release(s, 2, l2);
    sw_store_host_release(s, HOST_N, l);
    /* bad arguments */
    CHECK_STATUS(sw_store_host_lease(NULL, 1, keys, 0, l, &got), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_host_lease(s, 1, NULL, 0, l, &got), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_host_lease(s, 0, NULL, 0, NULL, &got), SW_OK);
    CHECK(got == 0);
    sw_store_host_release(s, 1, NULL);
    for (uint32_t i = 0; i < HOST_N - 2; i++)
        CHECK_STATUS(sw_store_delete(s, &keys[i]), SW_OK);
}

static void test_lease_pressure(sw_store *s, sw_rng *r)
{
    const uint64_t ns = 22;
    enum { NL = 6 };
    sw_store_key keys[NL];
    for (uint32_t i = 0; i < NL; i++) {
        keys[i] = ts_key(ns, 1, i, (uint16_t)(i % 3), (uint8_t)(i % 2));
        CHECK_STATUS(put(s, &keys[i], 7, NULL), SW_OK);
    }
    sw_store_lease l[NL];
    size_t got = 0;
    CHECK_STATUS(sw_store_host_lease(s, NL, keys, 16, l, &got), SW_OK);
    CHECK(got == NL);
    /* snapshot of what a GPU would be reading */
    uint8_t *snap = malloc((size_t)NL * STRIPE);
    for (uint32_t i = 0; i < NL; i++)
        if (l[i].ptr)
            memcpy(snap + (size_t)i * STRIPE, l[i].ptr, STRIPE);
    /* pressure: many new stripes through a 16-entry host tier (CLOCK
     * evictions), an overwrite of key 0 and a delete of key 1 */
    const sw_store_stats a = ts_stats(s);
    CHECK_STATUS(put(s, &keys[0], 8, NULL), SW_OK);
    CHECK_STATUS(sw_store_delete(s, &keys[1]), SW_OK);
    const int nw = 5 * (int)HOST_N + sw_rng_int(r, 0, 7);
    for (int i = 0; i < nw; i++) {
        sw_store_key k = ts_key(ns, 2, (uint32_t)i, 0, SW_STORE_KIND_K);
        CHECK_STATUS(put(s, &k, 9, NULL), SW_OK);
    }
    const sw_store_stats b = ts_stats(s);
    CHECK(b.host_evictions > a.host_evictions);
    CHECK(b.host_entries <= HOST_N - 2); /* two zombies (keys 0, 1) hold entries */
    for (uint32_t i = 0; i < NL; i++) {
        if (!l[i].ptr)
            continue;
        const int same = memcmp(l[i].ptr, snap + (size_t)i * STRIPE, STRIPE) == 0;
        if (!same)
            printf("lease %u: bytes changed under the lease (seed %llu)\n", i,
                   (unsigned long long)seed);
        CHECK(same);
        CHECK(sw_crc32c(l[i].ptr, STRIPE) == l[i].crc);
    }
    /* the unmapped keys read what the store holds now */
    uint8_t buf[STRIPE];
    size_t len = 0;
    CHECK_STATUS(ts_read1(s, &keys[0], buf, STRIPE, &len, NULL), SW_OK);
    CHECK(len == STRIPE && ts_check(buf, STRIPE, &keys[0], 8));
    CHECK_STATUS(ts_read1(s, &keys[1], buf, STRIPE, &len, NULL), SW_STATUS_NOT_FOUND);
    sw_store_host_release(s, NL, l);
    /* released: every entry is usable again */
    for (int i = 0; i < 2 * (int)HOST_N; i++) {
        sw_store_key k = ts_key(ns, 3, (uint32_t)i, 0, SW_STORE_KIND_V);
        CHECK_STATUS(put(s, &k, 10, NULL), SW_OK);
    }
    CHECK(ts_stats(s).host_entries == HOST_N);
    free(snap);
}

static void test_all_leased(sw_store *s)
{
    const uint64_t ns = 33;
    sw_store_key keys[HOST_N];
    sw_store_lease l[HOST_N];
    /* each key leased as soon as it is written (and so cached): a leased
     * entry is never a victim, so the 16 leases end up on all 16 entries */
    for (uint32_t i = 0; i < HOST_N; i++) {
        keys[i] = ts_key(ns, 0, i, 0, SW_STORE_KIND_K);
        CHECK_STATUS(put(s, &keys[i], 1, NULL), SW_OK);
        size_t got = 0;
        CHECK_STATUS(sw_store_host_lease(s, 1, &keys[i], 16, &l[i], &got), SW_OK);
        CHECK(got == 1);
    }
    const sw_store_stats a = ts_stats(s);
    sw_store_key k = ts_key(ns, 1, 0, 0, SW_STORE_KIND_K);
    CHECK_STATUS(put(s, &k, 2, NULL), SW_OK); /* no victim: not cached */
    const sw_store_stats b = ts_stats(s);
    CHECK(b.host_evictions == a.host_evictions && b.host_entries == HOST_N);
    uint8_t buf[STRIPE];
    CHECK_STATUS(ts_read1(s, &k, buf, STRIPE, NULL, NULL), SW_OK);
    CHECK(ts_check(buf, STRIPE, &k, 2));
    CHECK(ts_stats(s).file_hits == b.file_hits + 1);
    /* the test hook: a flipped byte the store's CRC no longer matches */
    CHECK_STATUS(sw_store_test_host_poke(s, &keys[3], 100, 0x40), SW_OK);
    CHECK(sw_crc32c(l[3].ptr, STRIPE) != l[3].crc);
    CHECK_STATUS(sw_store_test_host_poke(s, &keys[3], STRIPE, 1), SW_STATUS_INVALID);
    CHECK_STATUS(sw_store_test_host_poke(s, &k, 0, 1), SW_STATUS_NOT_FOUND);
    sw_store_host_release(s, HOST_N, l);
}

static void test_invalidate(sw_store *s)
{
    const uint64_t ns = 44;
    sw_store_key k = ts_key(ns, 0, 0, 0, SW_STORE_KIND_V);
    uint64_t gen = 0;
    CHECK_STATUS(put(s, &k, 5, &gen), SW_OK);
    sw_store_lease l, l2;
    size_t got = 0;
    CHECK_STATUS(sw_store_host_lease(s, 1, &k, 16, &l, &got), SW_OK);
    CHECK(got == 1 && l.ptr != NULL);
    if (!l.ptr)
        return;
    CHECK_STATUS(sw_store_test_host_poke(s, &k, 7, 0x01), SW_OK);
    const sw_store_stats a = ts_stats(s);
    CHECK(sw_store_host_invalidate(s, l.entry, gen + 1) == 0); /* another version */
    CHECK(sw_store_host_invalidate(s, l.entry, gen) == 1);
    CHECK(sw_store_host_invalidate(s, l.entry, gen) == 0);     /* already gone */
    const sw_store_stats b = ts_stats(s);
    CHECK(b.corruptions == a.corruptions + 1);
    CHECK(b.host_entries + 1 == a.host_entries);
    /* leased: the bytes stay put (zombie) until the release */
    CHECK(sw_crc32c(l.ptr, STRIPE) != l.crc);
    CHECK_STATUS(sw_store_test_host_poke(s, &k, 7, 0x01), SW_STATUS_NOT_FOUND);
    CHECK_STATUS(sw_store_host_lease(s, 1, &k, 16, &l2, &got), SW_OK);
    CHECK(got == 0 && l2.ptr == NULL);
    sw_store_host_release(s, 1, &l);
    /* the key reads back from the file, intact */
    uint8_t buf[STRIPE];
    const uint64_t fh = ts_stats(s).file_hits;
    CHECK_STATUS(ts_read1(s, &k, buf, STRIPE, NULL, NULL), SW_OK);
    CHECK(ts_check(buf, STRIPE, &k, 5));
    CHECK(ts_stats(s).file_hits == fh + 1);
    CHECK(sw_store_host_invalidate(s, 1u << 30, gen) == 0); /* out of range */
    CHECK(sw_store_host_invalidate(NULL, 0, 0) == 0);
}

/* Kept leases: the unmap count moves exactly when a leased entry loses
 * its key (an overwrite, a delete, CLOCK never: a leased entry is no
 * victim; an invalidation), not for unleased entries; a retouch at the
 * current count counts hits and bytes as a lease of the keys would and
 * keeps an entry from CLOCK's next sweep; at a stale count, or naming an
 * entry not leased, it touches nothing. */
static void test_kept(sw_store *s)
{
    const uint64_t ns = 55;
    enum { N = 4 };
    sw_store_key keys[N];
    uint64_t gens[N];
    for (uint32_t i = 0; i < N; i++) {
        keys[i] = ts_key(ns, 0, i, 0, SW_STORE_KIND_K);
        CHECK_STATUS(put(s, &keys[i], 7, &gens[i]), SW_OK);
    }
    const uint64_t u0 = sw_store_host_unmaps(s, NULL);
    /* an unleased key overwritten, then deleted: no move */
    sw_store_key other = ts_key(ns, 1, 0, 0, SW_STORE_KIND_K);
    CHECK_STATUS(put(s, &other, 1, NULL), SW_OK);
    CHECK_STATUS(put(s, &other, 2, NULL), SW_OK);
    CHECK_STATUS(sw_store_delete(s, &other), SW_OK);
    CHECK(sw_store_host_unmaps(s, NULL) == u0);
    sw_store_lease l[N];
    size_t got = 0;
    CHECK_STATUS(sw_store_host_lease(s, N, keys, 16, l, &got), SW_OK);
    CHECK(got == N);
    if (got != N)
        return;
    uint32_t ent[N];
    for (uint32_t i = 0; i < N; i++)
        ent[i] = l[i].entry;
    CHECK(ts_stats(s).host_leased == N && ts_stats(s).host_lease_unmaps == u0);
    size_t held = 0;
    CHECK(sw_store_host_unmaps(s, &held) == u0 && held == N);
    /* a retouch counts as a lease of the keys did */
    const sw_store_stats a = ts_stats(s);
    CHECK(sw_store_host_retouch(s, u0, N, ent) == 1);
    const sw_store_stats b = ts_stats(s);
    CHECK(b.host_hits == a.host_hits + N);
    CHECK(b.host_bytes_read == a.host_bytes_read + (uint64_t)N * STRIPE);
    /* many new writes: CLOCK passes the leased entries by, the count
     * stays and the kept leases still read their keys' payloads */
    for (uint32_t i = 0; i < 3 * HOST_N; i++) {
        sw_store_key k = ts_key(ns, 2, i, 0, SW_STORE_KIND_V);
        CHECK_STATUS(put(s, &k, 3, NULL), SW_OK);
    }
    CHECK(sw_store_host_unmaps(s, NULL) == u0);
    CHECK(sw_store_host_retouch(s, u0, N, ent) == 1);
    for (uint32_t i = 0; i < N; i++)
        CHECK(ts_check(l[i].ptr, STRIPE, &keys[i], 7));
    /* a stale count, an entry not leased, out of range: nothing touched */
    const sw_store_stats c = ts_stats(s);
    CHECK(sw_store_host_retouch(s, u0 + 1, N, ent) == 0);
    uint32_t bad[2] = {ent[0], 1u << 30};
    CHECK(sw_store_host_retouch(s, u0, 2, bad) == 0);
    sw_store_host_release(s, 1, &l[1]);
    CHECK(sw_store_host_retouch(s, u0, N, ent) == 0); /* entry 1 no longer leased */
    CHECK(ts_stats(s).host_hits == c.host_hits);
    CHECK(sw_store_host_retouch(s, u0, 0, NULL) == 1);
    CHECK(sw_store_host_retouch(NULL, u0, 0, NULL) == 0);
    /* an overwrite of a leased key moves the count; the kept bytes are the
     * old payload until released */
    CHECK_STATUS(put(s, &keys[0], 8, NULL), SW_OK);
    const uint64_t u1 = sw_store_host_unmaps(s, NULL);
    CHECK(u1 == u0 + 1);
    CHECK(ts_check(l[0].ptr, STRIPE, &keys[0], 7));
    CHECK(sw_store_host_retouch(s, u1, 1, &ent[0]) == 0); /* unmapped */
    CHECK(sw_store_host_retouch(s, u1, 2, &ent[2]) == 1);
    /* a delete of a leased key, and an invalidation */
    CHECK_STATUS(sw_store_delete(s, &keys[2]), SW_OK);
    CHECK(sw_store_host_unmaps(s, NULL) == u1 + 1);
    CHECK(sw_store_host_invalidate(s, ent[3], gens[3]) == 1);
    CHECK(sw_store_host_unmaps(s, NULL) == u1 + 2);
    CHECK(ts_stats(s).host_lease_unmaps == u1 + 2);
    CHECK(ts_stats(s).host_leased == 3); /* the three unmapped ones, until released */
    sw_store_host_release(s, 1, &l[0]);
    sw_store_host_release(s, 2, &l[2]);
    CHECK(ts_stats(s).host_leased == 0);
    CHECK(sw_store_host_unmaps(NULL, NULL) == 0);
    for (uint32_t i = 0; i < N; i++)
        (void)sw_store_delete(s, &keys[i]);
}

int main(void)
{
    seed = ts_seed(20250612);
    sw_rng r = {seed};
    ts_dir d;
    ts_dir_make(&d, "store_lease");
    sw_store_config c = ts_config(d.store, STRIPE, 16, 32);
    c.host_tier_bytes = (uint64_t)HOST_N * STRIPE;
    sw_store *s = NULL;
    CHECK_STATUS(sw_store_open(&c, &s), SW_OK);
    if (!s)
        return 1;
    CHECK(ts_stats(s).host_capacity_bytes == (uint64_t)HOST_N * STRIPE);
    printf("host tier %s\n", sw_store_host_mapped(s) ? "pinned (GPU-readable)" : "not pinned");
    test_lease_basic(s);
    test_lease_pressure(s, &r);
    test_all_leased(s);
    test_invalidate(s);
    test_kept(s);
    CHECK_STATUS(sw_store_close(s), SW_OK);
    ts_rm_rf(d.base);
    printf("store leases: %d failed checks (seed %llu)\n", sw_test_failures,
           (unsigned long long)seed);
    return sw_test_failures ? 1 : 0;
}
