/* 200-step decode trace, pool = 25% of the sequence's blocks (2 layers),
 * score eviction vs plain LRU on the same trace. The trace (docs/swap.md):
 * per layer a fixed "topic" direction u; 30% of the blocks are heavy (4
 * tokens per kv head with key strength s_b * u, s_b fixed per block in
 * [4, 12]); every other key is N(0, 0.5^2) noise; the query of step t is
 * 2u + w_t + N(0, 0.3^2) where w_t rotates slowly (period 400 steps); each
 * decoded token's key is 4 w_t + noise, so recent blocks match the current
 * query. Each step offloads the new token (overwriting the last block) and
 * attends every layer exactly. Asserts the score policy's hit rate >=
 * 0.9 x 0.25, prints both, checks exactness on the first and last step. */
#include "test_swap_util.h"

#define L 2
#define H 2
#define G 4
#define D 64
#define B 16
#define LEN0 3000
#define STEPS 200

typedef struct trace {
    float *rk[L], *rv[L];
    float u[L][D], w1[L][D], w2[L][D];
    int64_t len;
} trace;

static void unit(sw_rng *r, float *v)
{
    double n = 0;
    for (int c = 0; c < D; c++) {
        v[c] = (float)sw_rng_normal(r);
        n += (double)v[c] * v[c];
    }
    for (int c = 0; c < D; c++)
        v[c] = (float)(v[c] / sqrt(n));
}

static void trace_make(trace *t, uint64_t seed)
{
    sw_rng r = {seed};
    const int64_t cap = LEN0 + STEPS + B;
    for (int l = 0; l < L; l++) {
        unit(&r, t->u[l]);
        unit(&r, t->w1[l]);
        unit(&r, t->w2[l]);
        t->rk[l] = malloc(sizeof(float) * (size_t)cap * H * D);
        t->rv[l] = malloc(sizeof(float) * (size_t)cap * H * D);
        for (int64_t i = 0; i < cap * H * D; i++) {
            t->rk[l][i] = (float)(0.5 * sw_rng_normal(&r));
            t->rv[l][i] = (float)sw_rng_normal(&r);
        }
        const int32_t nb = LEN0 / B;
        for (int32_t b = 0; b < nb; b++) {
            if (sw_rng_uniform(&r) >= 0.3)
                continue;
            const float sb = (float)(4.0 + 8.0 * sw_rng_uniform(&r));
            for (int h = 0; h < H; h++)
                for (int j = 0; j < 4; j++) {
                    int64_t tok = (int64_t)b * B + sw_rng_int(&r, 0, B - 1);
                    for (int c = 0; c < D; c++)
                        t->rk[l][(tok * H + h) * D + c] += sb * t->u[l][c];
                }
        }
    }
    t->len = LEN0;
}

static void drift(const trace *t, int l, int step, float *w)
{
    const double a = 6.283185307179586 * step / 400.0;
    for (int c = 0; c < D; c++)
        w[c] = (float)(cos(a) * t->w1[l][c] + sin(a) * t->w2[l][c]);
}

static double run_policy(const trace *t0, sw_store *store, sw_swap_policy pol, uint64_t ns,
                         int32_t pool, int32_t tile, uint64_t seed, double *bound)
{
    trace t = *t0;
    const int64_t cap = LEN0 + STEPS + B;
    for (int l = 0; l < L; l++) { /* private copy: the trace appends */
        t.rk[l] = malloc(sizeof(float) * (size_t)cap * H * D);
        t.rv[l] = malloc(sizeof(float) * (size_t)cap * H * D);
        memcpy(t.rk[l], t0->rk[l], sizeof(float) * (size_t)cap * H * D);
        memcpy(t.rv[l], t0->rv[l], sizeof(float) * (size_t)cap * H * D);
    }
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = L;
    m.num_kv_heads = H;
    m.num_qo_heads = H * G;
    m.head_dim = D;
    m.block_size = B;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = pool;
    c.tile_blocks = tile;
    c.policy = pol;
    sw_swap *s = NULL;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_OK);
    if (!s)
        return -1;
    tsw_seq q;
    tsw_seq_init(&q, 1, L, H, D, B);
    CHECK_STATUS(sw_swap_seq_add(s, 1, ns, 0, 4096), SW_OK);
    for (int l = 0; l < L; l++)
        for (int32_t b = 0; b < (int32_t)((t.len + B - 1) / B); b++)
            CHECK_STATUS(tsw_offload_block(s, &q, l, b, t.rk[l], t.rv[l], t.len,
                                           SW_SWAP_KV_BF16), SW_OK);
    sw_swap_reset_stats(s);
    sw_rng r = {seed ^ 0x1234};
    uint16_t qb[H * G * D], ob[H * G * D];
    float lse[H * G];
    double worst = 0, bsum = 0;
    for (int step = 0; step < STEPS; step++) {
        const int64_t tok = t.len;
        t.len++;
        for (int l = 0; l < L; l++) {
            float w[D];
            drift(&t, l, step, w);
            for (int h = 0; h < H; h++)
                for (int cc = 0; cc < D; cc++)
                    t.rk[l][(tok * H + h) * D + cc] += 4.0f * w[cc];
            CHECK_STATUS(tsw_offload_block(s, &q, l, (int32_t)(tok / B), t.rk[l], t.rv[l], t.len,
                                           SW_SWAP_KV_BF16), SW_OK);
        }
        bsum += (double)pool / (double)(L * ((t.len + B - 1) / B));
        for (int l = 0; l < L; l++) {
            float w[D];
            drift(&t, l, step, w);
            for (int h = 0; h < H * G; h++)
                for (int cc = 0; cc < D; cc++)
                    qb[h * D + cc] = sw_f32_to_bf16(
                        (float)(2.0 * t.u[l][cc] + w[cc] + 0.3 * sw_rng_normal(&r)));
            uint64_t id = 1;
            int32_t qi[2] = {0, 1};
            sw_swap_attend_params p;
            sw_swap_attend_params_init(&p);
            p.layer = l;
            p.batch = 1;
            p.seq_ids = &id;
            p.q_indptr = qi;
            p.q = qb;
            p.o = ob;
            p.lse = lse;
            CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_OK);
            if (step == 0 || step == STEPS - 1) {
                double ref[H * G * D], rl[H * G], num = 0, den = 0;
                tsw_reference(&q, l, H * G, qb, 1, 1, 1.0 / sqrt((double)D), ref, rl);
                for (int i = 0; i < H * G * D; i++) {
                    double e = sw_bf16_to_f32(ob[i]) - ref[i];
                    num += e * e;
                    den += ref[i] * ref[i];
                }
                if (sqrt(num / den) > worst)
                    worst = sqrt(num / den);
            }
        }
    }
    *bound = bsum / STEPS;
    sw_swap_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    sw_swap_get_stats(s, &st);
    const double hr = (double)st.hits / (double)(st.hits + st.misses);
    printf("policy %-5s pool %d tile %d: hit rate %.4f (hits %llu misses %llu evictions %llu "
           "invalidations %llu), %llu reads, %.1f MiB (host %.1f, file %.1f), prefetched "
           "tiles %llu, read wait %.3f s, compute %.3f s, exact rel_l2 worst %.1e\n",
           sw_swap_policy_name(pol), pool, tile, hr, (unsigned long long)st.hits,
           (unsigned long long)st.misses, (unsigned long long)st.evictions,
           (unsigned long long)st.invalidations, (unsigned long long)st.read_calls,
           st.bytes_read / 1048576.0, st.host_bytes_read / 1048576.0,
           st.file_bytes_read / 1048576.0, (unsigned long long)st.prefetched_tiles,
           st.read_wait_seconds, st.compute_seconds, worst);
    CHECK(worst <= 1e-2);
    CHECK_STATUS(sw_swap_seq_remove(s, 1, 1), SW_OK);
    sw_swap_destroy(s);
    tsw_seq_free(&q);
    for (int l = 0; l < L; l++) {
        free(t.rk[l]);
        free(t.rv[l]);
    }
    return hr;
}

int main(void)
{
    const uint64_t seed = ts_seed(4242);
    ts_dir d;
    ts_dir_make(&d, "swap_trace");
    sw_store *store = tsw_store_open(d.store, B * D * 2, 8000, 64u << 20);
    if (!store) {
        ts_rm_rf(d.base);
        return 1; /* (a fresh directory: a failure is the store's, not the machine's) */
    }
    trace t;
    trace_make(&t, seed);
    /* 25% of the sequence's blocks at the middle of the trace */
    const int64_t mid = LEN0 + STEPS / 2;
    const int32_t pool = (int32_t)((L * ((mid + B - 1) / B)) / 4);
    const int32_t tile = 2;
    double t0 = sw_now_seconds(), bs, bl;
    double hs = run_policy(&t, store, SW_SWAP_POLICY_SCORE, 1, pool, tile, seed, &bs);
    double hl = run_policy(&t, store, SW_SWAP_POLICY_LRU, 2, pool, tile, seed, &bl);
    printf("decode trace %d steps, %d layers, %lld..%lld tokens, pool %d slots (25%% of %lld "
           "blocks at mid-trace; mean pool/blocks %.4f): score %.4f vs lru %.4f "
           "(need score >= %.4f and >= lru + 0.1) in %.2f s (seed %llu)\n", STEPS, L, (long long)LEN0,
           (long long)(LEN0 + STEPS), pool, (long long)(L * ((mid + B - 1) / B)), bs, hs, hl,
           0.9 * 0.25, sw_now_seconds() - t0, (unsigned long long)seed);
    CHECK(hs >= 0.9 * 0.25);
    /* and well above plain LRU, which a cyclic sweep over more blocks than
     * slots defeats (0 hits measured) */
    CHECK(hs >= hl + 0.1);
    for (int l = 0; l < L; l++) {
        free(t.rk[l]);
        free(t.rv[l]);
    }
    sw_store_close(store);
    ts_rm_rf(d.base);
    return sw_test_failures ? 1 : 0;
}
