/* The swap engine's heuristics (sw_swap_heuristics, a pure function of the
 * machine and the store): each decision against the figures it was set
 * from (swap_internal.h), for device and host pools, with and without a
 * host tier and store runs, over SM and CPU counts; the override rules of
 * a tuning (sw_swap_tuning_default / _apply); and what sw_swap_create does
 * with them on a host-pool engine (run-aware eviction, the configured
 * thread_spin_us and its range). No GPU needed. */
#include "test_swap_util.h"

#include <string.h>

static sw_swap_tuning decide(int dev, int tier, int aligned, int32_t sms, int32_t cpus)
{
    sw_swap_facts f;
    memset(&f, 0, sizeof f);
    f.device_pool = dev;
    f.host_tier = tier;
    f.aligned = aligned;
    f.sms = sms;
    f.cpus = cpus;
    sw_swap_tuning t;
    memset(&t, 0x5a, sizeof t); /* every field must be written */
    sw_swap_heuristics(&f, &t);
    int32_t w[sizeof t / sizeof(int32_t)]; /* (every field an int32_t) */
    memcpy(w, &t, sizeof w);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        CHECK(w[i] != 0x5a5a5a5a);
    return t;
}

static void test_decisions(void)
{
    /* run-aware eviction: 8 tiles for a device pool, 4 for a host pool
     * without a host tier, none over one; none without store runs */
    CHECK(decide(1, 0, 1, 132, 16).run_evict == 8);
    CHECK(decide(1, 1, 1, 132, 16).run_evict == 8);
    CHECK(decide(0, 0, 1, 0, 2).run_evict == 4);
    CHECK(decide(0, 1, 1, 0, 2).run_evict == 0);
    for (int dev = 0; dev < 2; dev++)
        for (int tier = 0; tier < 2; tier++)
            CHECK(decide(dev, tier, 0, 132, 16).run_evict == 0);
    /* one tile CTA an SM; gathers on half the SMs (rounded up) */
    const int32_t sms[] = {1, 2, 66, 132, 133};
    for (int i = 0; i < 5; i++) {
        const sw_swap_tuning t = decide(1, 1, 1, sms[i], 16);
        CHECK(t.tile_ctas == sms[i]);
        CHECK(t.gather_ctas == (sms[i] + 1) / 2);
        CHECK(t.gather_ctas >= 1 && t.gather_ctas <= t.tile_ctas);
    }
    /* a host pool (no SMs) still gets sizes a device would accept */
    CHECK(decide(0, 0, 1, 0, 2).tile_ctas >= 1);
    /* threads poll 2 ms with >= 8 CPUs, never with fewer */
    CHECK(decide(1, 1, 1, 132, 8).spin_us == 2000);
    CHECK(decide(1, 1, 1, 132, 192).spin_us == 2000);
    CHECK(decide(1, 1, 1, 132, 7).spin_us == 0);
    CHECK(decide(1, 1, 1, 132, 1).spin_us == 0);
    /* landing: 64 MiB; launches grow from 64 to 256 blocks; the caller's
     * first 320 blocks (whole store calls of 16); 4 launch groups; merges
     * of 64 chunks */
    const sw_swap_tuning t = decide(1, 1, 1, 132, 16);
    CHECK(t.landing_mb == 64 && t.landing_max_mb >= t.landing_mb);
    CHECK(t.land_start == 64 && t.land_blocks == 256 && t.land_start <= t.land_blocks);
    CHECK(t.land_first == 320 && t.land_first % 16 == 0);
    CHECK(t.land_groups == 4);
    CHECK(t.merge_chunks == 64);
    CHECK(t.landing_max_mb == 512 && t.land_gap_kb == 128);
    CHECK(t.keep_window == 1 && t.kept_pct == 75 && t.kept_idle_ms == 1000);
    CHECK(t.land_ahead_mb == 16);
    /* production paths on, the diagnostic off */
    CHECK(t.timeline == 0 && t.host_gather == 1 && t.align_tiles == 1 && t.resident_fast == 1 &&
          t.resident_inline == 1);
    /* pure: the same facts, the same decisions */
    const sw_swap_tuning u = decide(1, 1, 1, 132, 16);
    CHECK(memcmp(&t, &u, sizeof t) == 0);
}

static void test_overrides(void)
{
    sw_swap_tuning t = decide(1, 1, 1, 132, 16), o;
    const sw_swap_tuning before = t;
    sw_swap_tuning_default(&o);
    sw_swap_tuning_apply(&t, &o); /* nothing set: nothing changes */
    CHECK(memcmp(&t, &before, sizeof t) == 0);
    o.landing_mb = 0;
    o.run_evict = 3;
    o.timeline = 1;
    sw_swap_tuning_apply(&t, &o);
    CHECK(t.landing_mb == 0 && t.run_evict == 3 && t.timeline == 1);
    CHECK(t.gather_ctas == before.gather_ctas && t.spin_us == before.spin_us);
    CHECK(t.land_blocks == before.land_blocks && t.host_gather == before.host_gather);
    /* the same overrides from text (bench --tune): fields by name, all or
     * nothing on an error that names the bad part */
    sw_swap_tuning_default(&o);
    CHECK_STATUS(sw_swap_tuning_parse(&o, "keep_window=0,land_start=16,timeline=1"), SW_OK);
    CHECK(o.keep_window == 0 && o.land_start == 16 && o.timeline == 1);
    CHECK(o.land_blocks == SW_SWAP_TUNE_DEFAULT && o.merge_chunks == SW_SWAP_TUNE_DEFAULT);
    CHECK_STATUS(sw_swap_tuning_parse(&o, ""), SW_OK);
    const sw_swap_tuning kept = o;
    CHECK_STATUS(sw_swap_tuning_parse(&o, "land_start=8,no_such=1"), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "no_such") != NULL && strstr(sw_last_error(), "keep_window"));
    CHECK_STATUS(sw_swap_tuning_parse(&o, "land_start"), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_tuning_parse(&o, "land_start="), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_tuning_parse(&o, "land_start=1x"), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_tuning_parse(&o, "land_start=99999999999"), SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_tuning_parse(&o, "land_st=1"), SW_STATUS_INVALID);
    CHECK(memcmp(&o, &kept, sizeof o) == 0);
    CHECK_STATUS(sw_swap_tuning_parse(&o, "land_start=-3"), SW_OK); /* the engine checks ranges */
    CHECK(o.land_start == -3);
    CHECK_STATUS(sw_swap_tuning_parse(NULL, "x=1"), SW_STATUS_INVALID);
}

static void test_engine(const char *dir)
{
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = 1;
    m.num_kv_heads = 2;
    m.num_qo_heads = 4;
    m.head_dim = 64;
    m.block_size = 16;
    sw_swap_config c;
    sw_swap_config_init(&c);
    CHECK(c.thread_spin_us == -1); /* the library's choice */
    c.resident_blocks = 64;
    sw_store *store = tsw_store_open(dir, 2048, 4000, 0); /* runs of 64, no host tier */
    if (!store) {
        CHECK(0);
        return;
    }
    sw_swap *s = NULL;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_OK);
    if (s) {
        CHECK(s->run_evict == 4); /* a host pool over runs, no host tier */
        CHECK(s->align_blocks == 64);
        sw_swap_destroy(s);
        s = NULL;
    }
    sw_swap_tuning o;
    sw_swap_tuning_default(&o);
    o.align_tiles = 0; /* no runs to go by: no run-aware eviction either */
    CHECK_STATUS(sw_swap_create_tuned(&m, &c, store, &o, &s), SW_OK);
    if (s) {
        CHECK(s->align_blocks == 0 && s->run_evict == 0);
        sw_swap_destroy(s);
        s = NULL;
    }
    c.thread_spin_us = 500;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_OK);
    if (s) {
        CHECK(s->tune.spin_us == 500);
        sw_swap_destroy(s);
        s = NULL;
    }
    c.thread_spin_us = -2;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    CHECK(s == NULL);
    CHECK(strstr(sw_last_error(), "thread_spin_us -2 not in [-1, 10000000]") != NULL);
    c.thread_spin_us = 10000001;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "thread_spin_us 10000001 not in") != NULL);
    /* a caller built before thread_spin_us: the library's choice */
    sw_swap_config old;
    sw_swap_config_init(&old);
    old.thread_spin_us = -7; /* past its struct_size: never read */
    old.struct_size = (uint32_t)offsetof(sw_swap_config, thread_spin_us);
    CHECK_STATUS(sw_swap_create(&m, &old, store, &s), SW_OK);
    if (s) {
        CHECK(s->c.thread_spin_us == -1);
        sw_swap_destroy(s);
    }
    sw_store_close(store);
}

int main(void)
{
    test_decisions();
    test_overrides();
    ts_dir d;
    ts_dir_make(&d, "swap_heuristics");
    test_engine(d.store);
    ts_rm_rf(d.base);
    return sw_test_failures ? 1 : 0;
}
