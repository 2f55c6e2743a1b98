/* Swap engine, device pool (GPU): attention through GPU-resident slots
 * equals the fp64 reference over every offloaded token (relative L2 <=
 * 1e-2, LSE within 1e-2, every output element written) for pool sizes from
 * one tile to all blocks, with and without read-ahead, ragged last blocks,
 * several sequences per call, decode rows and prefill chunks (causal and
 * not), BF16, FP8 E4M3 and mixed blocks, reads from the data file and from
 * the host tier, cold and warm pools, both eviction policies, a sequence
 * that grows between calls (its overwritten last block must not be served
 * from the pool), and large tiles (many CTAs per kv head, many row groups).
 * The device predictor (projection + scoring kernels) is compared with the
 * host engine's CPU reference on the same blocks and queries, and the
 * needle test runs on the device path. Error paths: bad device ordinal,
 * head_dim without a kernel, unknown sequence, a stripe deleted or
 * rewritten behind the engine's back. Host-tier hits gathered by the GPU
 * (store/host_lease.h, swap_gather.cu): results equal the reference and the
 * ticket path's, every stripe served from the host tier (no file read); a
 * host tier smaller than a call's stripes (leases held while the call's
 * file reads fill the tier: mixed tiles, entries pinned under eviction
 * pressure); whole blocks' leases kept from call to call (still host-tier
 * hits, exact, none kept where a row releases them; a sequence at rest
 * gives its kept leases back); a byte flipped in a
 * host-tier entry (under a kept lease) gives SW_STATUS_CORRUPT naming its
 * block, and its slot is not used again.
 * Every case of every row is a job of one pool of threads (one engine pair,
 * its own sequences and namespaces; the host-gather checks own their
 * stores), so engines run side by side on the GPU as in a server.
 * Exit 77 (skipped) without CUDA or a GPU. Seeded; SW_TEST_SEED overrides.
 * Every failing case prints its parameters and the seed. */
#include "test_swap_util.h"

#include "core/sw_core.h"
#include "swap/swap_cuda.h"

#include <stdatomic.h>
#include <time.h>

#if defined(SW_HAVE_CUDA)
#include <cuda_runtime.h>

#define CU(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
                    cudaGetErrorString(e_));                                              \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

typedef struct shape {
    int32_t H, Hq, D, B;
} shape;

/* The engine's settings under test (the rows of this program): the
 * defaults, and the paths that the machine or the store can still select
 * (a host tier CUDA cannot map, a landing buffer smaller than a call or
 * none, threads that sleep between jobs). Each row runs every test below
 * with engines made under its tuning and thread_spin_us. */
typedef struct variant {
    const char *name, *what;
    int nrand; /* random cases: 48 and the 6 large ones for the default row;
                * the first 16 (8 of them over the host tier, which is
                * where the other rows differ) for the others */
    int32_t spin_us; /* sw_swap_config.thread_spin_us */
    /* tuning overrides (SW_SWAP_TUNE_DEFAULT: the library's) */
    int32_t host_gather, landing_mb, land_groups, land_first, merge_chunks;
    int32_t resident_fast;
    int32_t landing_max_mb; /* (the landing's growth) */
    int32_t kept_pct;       /* (leases kept from call to call) */
    int32_t land_ahead_mb;  /* (the next call's first blocks landed at a call's end) */
} variant;

#define TD SW_SWAP_TUNE_DEFAULT
static const variant variants[] = {
    {"default", "prelease, copy-engine landing, direct tiles by landing launch, descriptors in "
     "place, run-aware eviction, split merges, whole blocks' leases kept from call to call, "
     "the rest released by the thread, the next call's first blocks landed at a call's end", 48,
     -1, TD, TD, TD, TD, TD, TD, TD, TD, TD},
    {"tickets", "host-tier hits read through the store's tickets (a tier CUDA cannot map): "
     "staged tiles, no prelease", 16, -1, 0, TD, TD, TD, TD, TD, TD, TD, TD},
    {"landing_small", "a 1 MiB landing that never grows (blocks past it read from the host "
     "tier by the direct tiles), one launch a tile, no caller's first blocks", 16, -1, TD, 1, 1,
     0, TD, TD, 1, TD, TD},
    {"landing_grow", "a 1 MiB landing grown at a call's first job to what the calls ask for",
     16, -1, TD, 1, TD, TD, TD, TD, TD, TD, TD},
    {"no_landing", "the prelease thread beside the direct tiles, no landing buffer", 16, -1,
     TD, 0, TD, TD, TD, TD, TD, TD, TD},
    {"sleep", "threads sleep between jobs; a direct tile merged once", 16, 0, TD, TD, TD, TD, 0,
     TD, TD, TD, TD},
    {"poll", "threads poll 2 ms between jobs whatever the CPU count", 16, 2000, TD, TD, TD, TD,
     TD, TD, TD, TD, TD},
    {"tile_loop", "no resident path: all-resident decode calls through the tile loop too", 16,
     -1, TD, TD, TD, TD, TD, 0, TD, TD, TD},
    {"released", "every host-tier lease released at its call's end (none kept, none taken for "
     "the next call)", 16, -1, TD, TD, TD, TD, TD, TD, TD, 0, 0},
    {"no_ahead", "no landing ahead: the next call's blocks only from its own job", 16, -1, TD,
     TD, TD, TD, TD, TD, TD, TD, 0},
};
#undef TD

/* A row under test: its settings and its stores. */
typedef struct row {
    const variant *v;
    sw_swap_tuning tune; /* the row's */
    int32_t spin_us;     /* the row's thread_spin_us */
    ts_dir d, dh, dt, ds, dg;
    /* file: the data file only; tier: with a 512 MiB host tier; hst: the
     * host-pool engines' (compared scores); small, gather: the host-gather
     * checks' own (they count the store's hits) */
    sw_store *file, *tier, *hst, *small, *gather;
    int ncases, nrand;
    atomic_int nfail, checks;
    double t0;
} row;

static sw_swap *make_engine_t(const row *R, const sw_swap_tuning *tune, sw_store *store,
                              const shape *sh, int32_t L, int32_t pool, int32_t tile,
                              int prefetch, sw_swap_policy pol, sw_swap_pool_kind k)
{
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = L;
    m.num_kv_heads = sh->H;
    m.num_qo_heads = sh->Hq;
    m.head_dim = sh->D;
    m.block_size = sh->B;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = pool;
    c.tile_blocks = tile;
    c.predictor_rank = 16;
    c.prefetch_depth = prefetch;
    c.policy = pol;
    c.pool = k;
    c.device = 0;
    c.thread_spin_us = R->spin_us;
    sw_swap *s = NULL;
    sw_status st = sw_swap_create_tuned(&m, &c, store, tune, &s);
    if (st != SW_OK)
        fprintf(stderr, "sw_swap_create(%s pool): %s: %s\n",
                k == SW_SWAP_POOL_DEVICE ? "device" : "host", sw_status_str(st), sw_last_error());
    CHECK_STATUS(st, SW_OK);
    return s;
}

static sw_swap *make_engine(const row *R, sw_store *store, const shape *sh, int32_t L,
                            int32_t pool, int32_t tile, int prefetch, sw_swap_policy pol,
                            sw_swap_pool_kind k)
{
    return make_engine_t(R, &R->tune, store, sh, L, pool, tile, prefetch, pol, k);
}

/* Device attend of `rows` query rows; returns the host copies of o/lse. */
static sw_status dev_attend(sw_swap *s, const sw_swap_attend_params *hp, const shape *sh,
                            int32_t rows, uint16_t *o, float *lse, sw_swap_attend_result *res,
                            cudaStream_t stream)
{
    const size_t qn = (size_t)rows * sh->Hq * sh->D;
    void *dq = NULL, *dout = NULL, *dl = NULL;
    CU(cudaMalloc(&dq, qn * 2 + 16));
    CU(cudaMalloc(&dout, qn * 2 + 16));
    CU(cudaMalloc(&dl, (size_t)rows * sh->Hq * 4 + 16));
    /* On `stream`, where the attend runs: a plain cudaMemcpy / cudaMemset runs
     * on the legacy default stream, which a non-blocking stream does not wait
     * for, and may return before the bytes land (sw_test_cuda.h). */
    CU(cudaMemcpyAsync(dq, hp->q, qn * 2, cudaMemcpyHostToDevice, stream));
    /* poison: 0xffff is a BF16 NaN, 0xffffffff a float NaN */
    CU(cudaMemsetAsync(dout, 0xff, qn * 2, stream));
    CU(cudaMemsetAsync(dl, 0xff, (size_t)rows * sh->Hq * 4, stream));
    sw_swap_attend_params p = *hp;
    p.q = dq;
    p.o = dout;
    p.lse = dl;
    sw_status st = sw_swap_attend(s, &p, res, stream);
    CU(cudaStreamSynchronize(stream));
    CU(cudaMemcpy(o, dout, qn * 2, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(lse, dl, (size_t)rows * sh->Hq * 4, cudaMemcpyDeviceToHost));
    CU(cudaFree(dq));
    CU(cudaFree(dout));
    CU(cudaFree(dl));
    return st;
}

/* Device vs host predictor over every block of (seq, layer): the kernels
 * follow the CPU reference's order and roundings. */
static void compare_scores(sw_swap *sd, sw_swap *sh_, uint64_t id_d, uint64_t id_h, int32_t layer,
                           const uint16_t *q, int32_t ql, const char *name)
{
    float a[4096], b[4096];
    int32_t na = 0, nb = 0;
    CHECK_STATUS(sw_swap_score_blocks(sd, id_d, layer, q, ql, a, 4096, &na), SW_OK);
    CHECK_STATUS(sw_swap_score_blocks(sh_, id_h, layer, q, ql, b, 4096, &nb), SW_OK);
    CHECK(na == nb);
    int32_t exact = 0, worst_i = -1;
    double worst = 0, mag = 0;
    for (int32_t i = 0; i < na && i < nb; i++) {
        if (a[i] == b[i] || (isinf(a[i]) && isinf(b[i]) && a[i] == b[i])) {
            exact++;
            continue;
        }
        const double d = isfinite(a[i]) && isfinite(b[i]) ? fabs((double)a[i] - b[i]) : INFINITY;
        if (!(d <= worst)) {
            worst = d;
            worst_i = i;
        }
    }
    for (int32_t i = 0; i < nb; i++)
        if (isfinite(b[i]) && fabs(b[i]) > mag)
            mag = fabs(b[i]);
    const int ok = worst <= 1e-5 * (mag > 1 ? mag : 1);
    if (!ok || exact != na)
        printf("  scores %s: %d of %d bit-exact; worst |dev - host| %.3g at block %d (dev %.9g "
               "host %.9g), max |score| %.3g %s\n", name, exact, na, worst, worst_i,
               worst_i >= 0 ? a[worst_i] : 0.0, worst_i >= 0 ? b[worst_i] : 0.0, mag,
               ok ? "ok" : "FAIL");
    CHECK(ok);
}

typedef struct ccase {
    shape sh;
    int32_t nseq, maxlen, tile, pool_kind; /* pool_kind: 0 one tile, 1 few, 2 all */
    int dtmode, prefetch, lru, host_tier, chunk_max;
} ccase;

/* One case: a device-pool engine over `store` against the reference; a
 * host-pool engine over `hstore` given sequence 0 only, whose predictor
 * scores the device's are compared with. Returns 1 when a check failed. */
static int run_case(const row *R, sw_store *store, sw_store *hstore, uint64_t seed, int idx,
                    const ccase *cc, uint64_t ns)
{
    sw_rng r = {seed * 7919u + (uint64_t)idx};
    const shape sh = cc->sh;
    const int32_t L = 2, nseq = cc->nseq;
    tsw_seq seqs[3], hseqs[3];
    float *raw_k[3][2], *raw_v[3][2];
    int64_t lens[3];
    int32_t total_blocks = 0;
    for (int32_t i = 0; i < nseq; i++) {
        lens[i] = sw_rng_int(&r, 1, cc->maxlen);
        total_blocks += (int32_t)((lens[i] + sh.B - 1) / sh.B);
    }
    /* round 0's layer, whose scores are compared: the host engine gets
     * that layer of sequence 0 only */
    const int32_t layer0 = sw_rng_int(&r, 0, L - 1);
    const int32_t tile = cc->tile;
    const int32_t pools[3] = {tile, 3 * tile + sw_rng_int(&r, 0, 2), total_blocks + 2 + sh.B};
    const int32_t pool = pools[cc->pool_kind];
    char name[320];
    snprintf(name, sizeof name,
             "seed=%llu#%d H%d/%d D%d B%d nseq=%d len<=%d %s pool=%d tile=%d pf=%d %s %s",
             (unsigned long long)seed, idx, sh.H, sh.Hq, sh.D, sh.B, nseq, cc->maxlen,
             cc->dtmode == 0 ? "bf16" : cc->dtmode == 1 ? "fp8" : "mixed", pool, tile,
             cc->prefetch, cc->lru ? "lru" : "score", cc->host_tier ? "host-tier" : "file");
    const sw_swap_policy pol = cc->lru ? SW_SWAP_POLICY_LRU : SW_SWAP_POLICY_SCORE;
    sw_swap *s = make_engine(R, store, &sh, L, pool, tile, cc->prefetch, pol,
                             SW_SWAP_POOL_DEVICE);
    sw_swap *h = make_engine(R, hstore, &sh, L, pool, tile, cc->prefetch, pol, SW_SWAP_POOL_HOST);
    if (!s || !h) {
        sw_swap_destroy(s);
        sw_swap_destroy(h);
        printf("%s: engine creation failed\n", name);
        return 1;
    }
    const int before = sw_test_thread_failures;
    const size_t rowe = (size_t)sh.H * sh.D;
    for (int32_t i = 0; i < nseq; i++) {
        tsw_seq_init(&seqs[i], 100 + (uint64_t)i, L, sh.H, sh.D, sh.B);
        tsw_seq_init(&hseqs[i], 100 + (uint64_t)i, L, sh.H, sh.D, sh.B);
        CHECK_STATUS(sw_swap_seq_add(s, seqs[i].id, ns, (uint32_t)i * 10000u, 10000), SW_OK);
        if (i == 0)
            CHECK_STATUS(sw_swap_seq_add(h, seqs[i].id, ns, 0, 10000), SW_OK);
        /* round 2 grows sequence 0 by up to B + 3 tokens (B = 1: more than 3 B) */
        const int64_t cap = lens[i] + 2 * sh.B + 3;
        for (int32_t l = 0; l < L; l++) {
            raw_k[i][l] = malloc(sizeof(float) * rowe * (size_t)cap);
            raw_v[i][l] = malloc(sizeof(float) * rowe * (size_t)cap);
            for (size_t e = 0; e < rowe * (size_t)cap; e++) {
                raw_k[i][l][e] = (float)sw_rng_normal(&r);
                raw_v[i][l][e] = (float)sw_rng_normal(&r);
            }
            const int32_t nb = (int32_t)((lens[i] + sh.B - 1) / sh.B);
            for (int32_t b = 0; b < nb; b++) {
                sw_swap_kv_dtype dt = cc->dtmode == 0   ? SW_SWAP_KV_BF16
                                      : cc->dtmode == 1 ? SW_SWAP_KV_FP8_E4M3
                                      : (b % 2 ? SW_SWAP_KV_FP8_E4M3 : SW_SWAP_KV_BF16);
                CHECK_STATUS(tsw_offload_block(s, &seqs[i], l, b, raw_k[i][l], raw_v[i][l],
                                               lens[i], dt), SW_OK);
                if (i == 0 && l == layer0)
                    CHECK_STATUS(tsw_offload_block(h, &hseqs[i], l, b, raw_k[i][l],
                                                   raw_v[i][l], lens[i], dt), SW_OK);
            }
        }
    }
    cudaStream_t stream = NULL;
    if (idx % 2)
        CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    /* rounds: cold decode, warm prefill chunk (causal), grow seq 0 then
     * decode, non-causal chunk */
    for (int round = 0; round < 4; round++) {
        const int32_t layer = round == 0 ? layer0 : sw_rng_int(&r, 0, L - 1);
        if (round == 2) {
            const int64_t grow = sw_rng_int(&r, 1, sh.B + 3);
            const int64_t nl = lens[0] + grow;
            const int32_t b0 = (int32_t)(lens[0] / sh.B);
            const int32_t b1 = (int32_t)((nl - 1) / sh.B);
            for (int32_t b = b0; b <= b1; b++) {
                const sw_swap_kv_dtype dt =
                    cc->dtmode == 1 ? SW_SWAP_KV_FP8_E4M3 : SW_SWAP_KV_BF16;
                CHECK_STATUS(tsw_offload_block(s, &seqs[0], layer, b, raw_k[0][layer],
                                               raw_v[0][layer], nl, dt), SW_OK);
            }
            lens[0] = nl;
        }
        const int causal = round != 3;
        int32_t qind[4] = {0};
        for (int32_t i = 0; i < nseq; i++) {
            int32_t ql = 1;
            if (round == 1 || round == 3) {
                const int64_t len = seqs[i].layers[layer].len;
                ql = sw_rng_int(&r, 1, (int32_t)(len < cc->chunk_max ? len : cc->chunk_max));
            }
            qind[i + 1] = qind[i] + ql;
        }
        const int32_t rows = qind[nseq];
        const size_t qn = (size_t)rows * sh.Hq * sh.D;
        uint16_t *q = malloc(sizeof(uint16_t) * qn);
        uint16_t *o = malloc(sizeof(uint16_t) * qn);
        float *lse = malloc(sizeof(float) * (size_t)rows * sh.Hq);
        for (size_t e = 0; e < qn; e++)
            q[e] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(&r)));
        uint64_t ids[3];
        for (int32_t i = 0; i < nseq; i++)
            ids[i] = seqs[i].id;
        if (round == 0)
            compare_scores(s, h, ids[0], ids[0], layer, q, qind[1], name);
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.layer = layer;
        p.batch = nseq;
        p.seq_ids = ids;
        p.q_indptr = qind;
        p.q = q;
        p.causal = causal;
        sw_swap_attend_result res;
        memset(&res, 0, sizeof res);
        res.struct_size = sizeof res;
        sw_status st = dev_attend(s, &p, &sh, rows, o, lse, &res, stream);
        if (st != SW_OK)
            printf("%s round %d: attend: %s: %s\n", name, round, sw_status_str(st),
                   sw_last_error());
        CHECK_STATUS(st, SW_OK);
        CHECK(res.blocks_attended == res.blocks_total);
        CHECK(res.hits + res.misses == res.blocks_total);
        double num = 0, den = 0, lse_err = 0;
        int64_t bad = 0, first_bad = -1, worst_seq = -1;
        double worst_seq_rel = 0;
        for (int32_t i = 0; i < nseq; i++) {
            const int32_t ql = qind[i + 1] - qind[i];
            double *ref = malloc(sizeof(double) * (size_t)ql * sh.Hq * sh.D);
            double *rl = malloc(sizeof(double) * (size_t)ql * sh.Hq);
            tsw_reference(&seqs[i], layer, sh.Hq, q + (size_t)qind[i] * sh.Hq * sh.D, ql, causal,
                          1.0 / sqrt((double)sh.D), ref, rl);
            double sn = 0, sd = 0;
            for (size_t e = 0; e < (size_t)ql * sh.Hq * sh.D; e++) {
                const double g = sw_bf16_to_f32(o[(size_t)qind[i] * sh.Hq * sh.D + e]);
                if (!isfinite(g)) {
                    if (first_bad < 0)
                        first_bad = (int64_t)((size_t)qind[i] * sh.Hq * sh.D + e);
                    bad++;
                    continue;
                }
                sn += (g - ref[e]) * (g - ref[e]);
                sd += ref[e] * ref[e];
            }
            num += sn;
            den += sd;
            const double sr = sqrt(sn / (sd > 0 ? sd : 1));
            if (sr > worst_seq_rel) {
                worst_seq_rel = sr;
                worst_seq = i;
            }
            for (size_t e = 0; e < (size_t)ql * sh.Hq; e++) {
                const double g = lse[(size_t)qind[i] * sh.Hq + e];
                if (isinf(rl[e]))
                    bad += !(isinf(g) && g < 0);
                else if (!isfinite(g))
                    bad++;
                else if (fabs(g - rl[e]) > lse_err)
                    lse_err = fabs(g - rl[e]);
            }
            free(ref);
            free(rl);
        }
        const double rel = sqrt(num / (den > 0 ? den : 1));
        const int ok = st == SW_OK && rel <= 1e-2 && lse_err <= 1e-2 && bad == 0;
        printf("%-100s r%d %s rows %3d: rel_l2 %.2e lse %.1e hits %lld misses %lld tiles %lld %s\n",
               name, round, causal ? "causal" : "full", rows, rel, lse_err, (long long)res.hits,
               (long long)res.misses, (long long)res.tiles, ok ? "ok" : "FAIL");
        if (!ok)
            printf("    detail: %lld non-finite outputs/LSE (first output index %lld = row %lld "
                   "head %lld dim %lld), worst sequence %lld at rel %.2e, q_indptr {%d,%d,%d,%d}\n",
                   (long long)bad, (long long)first_bad,
                   first_bad >= 0 ? (long long)(first_bad / ((int64_t)sh.Hq * sh.D)) : -1LL,
                   first_bad >= 0 ? (long long)(first_bad / sh.D % sh.Hq) : -1LL,
                   first_bad >= 0 ? (long long)(first_bad % sh.D) : -1LL, (long long)worst_seq,
                   worst_seq_rel, qind[0], qind[1], qind[2], qind[3]);
        CHECK(ok);
        free(q);
        free(o);
        free(lse);
    }
    sw_swap_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_STATUS(sw_swap_get_stats(s, &st), SW_OK);
    CHECK(st.resident_used <= (uint64_t)pool);
    CHECK(st.bytes_read == st.host_bytes_read + st.file_bytes_read);
    CHECK(st.kernel_kv_bytes > 0);
    if (cc->prefetch && pool >= 2 * tile && st.read_calls > 1)
        CHECK(st.prefetched_tiles > 0);
    for (int32_t i = 0; i < nseq; i++) {
        /* the large cases leave their stripes to the row's store, removed
         * whole at the end: deleting tens of thousands of stripes one by
         * one was most of their time, and the small cases delete theirs */
        const int32_t del = cc->maxlen < 1000;
        CHECK_STATUS(sw_swap_seq_remove(s, seqs[i].id, del), SW_OK);
        if (i == 0)
            CHECK_STATUS(sw_swap_seq_remove(h, seqs[i].id, del), SW_OK);
        for (int32_t l = 0; l < L; l++) {
            free(raw_k[i][l]);
            free(raw_v[i][l]);
        }
        tsw_seq_free(&seqs[i]);
        tsw_seq_free(&hseqs[i]);
    }
    if (stream)
        CU(cudaStreamDestroy(stream));
    sw_swap_destroy(s);
    sw_swap_destroy(h);
    if (sw_test_thread_failures != before)
        fprintf(stderr, "FAILED: %s\n", name);
    return sw_test_thread_failures != before;
}

/* A needle key aligned with one head's query ranks its block first on the
 * device predictor too (tsw_plant_needle: the gain comes from the engine's
 * projection, so the ranking is guaranteed, not likely; the engine's rank
 * here is 16); sparse top-1 + recent-1 on the device path. */
static void test_needle(const row *R, sw_store *store, uint64_t seed)
{
    const shape sh = {2, 8, 128, 16};
    const int32_t G = 4, nb = 64;
    int firsts = 0;
    const int trials = 6;
    for (int tr = 0; tr < trials; tr++) {
        sw_rng r = {seed * 977 + (uint64_t)tr};
        sw_swap *s = make_engine(R, store, &sh, 1, 8, 2, 1, SW_SWAP_POLICY_SCORE,
                                 SW_SWAP_POOL_DEVICE);
        if (!s)
            return;
        tsw_seq q;
        tsw_seq_init(&q, 9, 1, sh.H, sh.D, sh.B);
        CHECK_STATUS(sw_swap_seq_add(s, 9, 900 + (uint64_t)tr, 0, nb), SW_OK);
        const int64_t len = (int64_t)nb * sh.B - sw_rng_int(&r, 0, sh.B - 1);
        float *rk = malloc(sizeof(float) * (size_t)len * sh.H * sh.D);
        float *rv = malloc(sizeof(float) * (size_t)len * sh.H * sh.D);
        for (int64_t i = 0; i < len * sh.H * sh.D; i++) {
            rk[i] = (float)sw_rng_normal(&r);
            rv[i] = (float)sw_rng_normal(&r);
        }
        uint16_t *qb = malloc(sizeof(uint16_t) * sh.Hq * sh.D);
        for (int i = 0; i < sh.Hq * sh.D; i++)
            qb[i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
        const int32_t hq = sw_rng_int(&r, 0, sh.Hq - 1), hk = hq / G;
        const int32_t nblk = sw_rng_int(&r, 0, nb - 2);
        const int64_t tok = (int64_t)nblk * sh.B + sw_rng_int(&r, 0, sh.B - 1);
        (void)hk;
        const double gain = tsw_plant_needle(s, qb, sh.Hq, hq, rk, len, sh.H, sh.D, tok);
        CHECK(gain > 0);
        for (int32_t b = 0; b < nb; b++)
            CHECK_STATUS(tsw_offload_block(s, &q, 0, b, rk, rv, len, SW_SWAP_KV_BF16), SW_OK);
        float sc[64];
        int32_t n = 0;
        CHECK_STATUS(sw_swap_score_blocks(s, 9, 0, qb, 1, sc, nb, &n), SW_OK);
        int32_t best = 0;
        for (int32_t b = 1; b < n; b++)
            if (sc[b] > sc[best])
                best = b;
        firsts += best == nblk;
        if (best != nblk)
            printf("needle trial %d: planted in block %d, block %d ranks first (%.2f vs %.2f)\n",
                   tr, nblk, best, sc[best], sc[nblk]);
        CHECK(best == nblk);
        uint16_t *o = malloc(sizeof(uint16_t) * sh.Hq * sh.D);
        float *lse = malloc(sizeof(float) * sh.Hq);
        uint64_t id = 9;
        int32_t qi[2] = {0, 1};
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.batch = 1;
        p.seq_ids = &id;
        p.q_indptr = qi;
        p.q = qb;
        p.sparse_top_k = 1;
        p.sparse_recent_blocks = 1;
        p.sparse_check = 1;
        sw_swap_attend_result res;
        memset(&res, 0, sizeof res);
        res.struct_size = sizeof res;
        CHECK_STATUS(dev_attend(s, &p, &sh, 1, o, lse, &res, NULL), SW_OK);
        CHECK(res.blocks_attended == 2 || (nblk == nb - 1 && res.blocks_attended == 1));
        /* the reported error: against the exact attention over every block */
        CHECK(tsw_sparse_rel_ok(&q, 0, sh.Hq, qb, nb, o, res.sparse_rel_l2,
                                "needle trial (device)"));
        /* the sparse output: attention over the kept blocks' keys alone */
        const int32_t kb[2] = {nblk, nb - 1};
        const double kept_rel = tsw_rel_l2_over_blocks(&q, 0, sh.Hq, qb, kb, 2, o);
        if (!(kept_rel <= 1e-2))
            printf("needle trial %d (device): sparse output %.3g rel L2 from the kept blocks' "
                   "attention\n", tr, kept_rel);
        CHECK(kept_rel <= 1e-2);
        if (tr < 2)
            printf("needle trial %d (device): sparse top-1 + recent-1 = %lld of %lld blocks, rel "
                   "L2 vs exact %.3f\n", tr, (long long)res.blocks_attended,
                   (long long)res.blocks_total, res.sparse_rel_l2);
        free(o); free(lse); free(qb); free(rk); free(rv);
        tsw_seq_free(&q);
        sw_swap_destroy(s);
    }
    printf("needle ranks first on the device predictor in %d of %d trials\n", firsts, trials);
}

/* One sequence (id, ns) of nb blocks offloaded through engine s, in block
 * order or the reverse (every third block FP8); raw K/V returned (caller
 * frees). */
/* Sequence `id` of nb blocks offloaded in order (offload appends), then its
 * first `rewrite` blocks offloaded again, last to first (same bytes): the
 * newest writes, so the host tier holds those. */
static void gather_seq_id(sw_swap *s, tsw_seq *q, uint64_t id, const shape *sh, uint64_t ns,
                          int32_t nb, int64_t len, int32_t rewrite, sw_rng *r, float **rk,
                          float **rv)
{
    tsw_seq_init(q, id, 1, sh->H, sh->D, sh->B);
    CHECK_STATUS(sw_swap_seq_add(s, id, ns, 0, (uint32_t)nb + 8), SW_OK);
    *rk = malloc(sizeof(float) * (size_t)len * sh->H * sh->D);
    *rv = malloc(sizeof(float) * (size_t)len * sh->H * sh->D);
    for (int64_t i = 0; i < len * sh->H * sh->D; i++) {
        (*rk)[i] = (float)sw_rng_normal(r);
        (*rv)[i] = (float)sw_rng_normal(r);
    }
    for (int32_t i = 0; i < nb + rewrite; i++) {
        const int32_t b = i < nb ? i : nb + rewrite - 1 - i;
        CHECK_STATUS(tsw_offload_block(s, q, 0, b, *rk, *rv, len,
                                       b % 3 == 2 ? SW_SWAP_KV_FP8_E4M3 : SW_SWAP_KV_BF16),
                     SW_OK);
    }
}

static void gather_seq(sw_swap *s, tsw_seq *q, const shape *sh, uint64_t ns, int32_t nb,
                       int64_t len, sw_rng *r, float **rk, float **rv)
{
    gather_seq_id(s, q, 5, sh, ns, nb, len, 0, r, rk, rv);
}

/* Attend of ql rows over sequence 5 of s; rel L2 against the reference
 * (-1 when the call failed); o (host, ql x Hq x D) filled. */
/* Causal attend of ql rows over sequence `id` of s: o (host, ql x Hq x D)
 * and lse (ql x Hq) filled. */
static sw_status gather_run_id(sw_swap *s, uint64_t id, const shape *sh, const uint16_t *qb,
                               int32_t ql, uint16_t *o, float *lse)
{
    int32_t qi[2] = {0, ql};
    sw_swap_attend_params p;
    sw_swap_attend_params_init(&p);
    p.batch = 1;
    p.seq_ids = &id;
    p.q_indptr = qi;
    p.q = qb;
    p.causal = 1;
    return dev_attend(s, &p, sh, ql, o, lse, NULL, NULL);
}

static double gather_attend_id(sw_swap *s, uint64_t id, const tsw_seq *q, const shape *sh,
                               const uint16_t *qb, int32_t ql, uint16_t *o, sw_status *st_out)
{
    float *lse = malloc(sizeof(float) * (size_t)ql * sh->Hq);
    const sw_status st = gather_run_id(s, id, sh, qb, ql, o, lse);
    *st_out = st;
    double rel = -1;
    if (st == SW_OK) {
        const size_t n = (size_t)ql * sh->Hq * sh->D;
        double *ref = malloc(sizeof(double) * n), *rl = malloc(sizeof(double) * (size_t)ql * sh->Hq);
        tsw_reference(q, 0, sh->Hq, qb, ql, 1, 1.0 / sqrt((double)sh->D), ref, rl);
        double num = 0, den = 0;
        for (size_t e = 0; e < n; e++) {
            const double g = sw_bf16_to_f32(o[e]);
            num += isfinite(g) ? (g - ref[e]) * (g - ref[e]) : INFINITY;
            den += ref[e] * ref[e];
        }
        rel = sqrt(num / (den > 0 ? den : 1));
        free(ref);
        free(rl);
    }
    free(lse);
    return rel;
}

static double gather_attend(sw_swap *s, const tsw_seq *q, const shape *sh, const uint16_t *qb,
                            int32_t ql, uint16_t *o, sw_status *st_out)
{
    return gather_attend_id(s, 5, q, sh, qb, ql, o, st_out);
}

static sw_store_stats store_stats(sw_store *st)
{
    sw_store_stats x;
    memset(&x, 0, sizeof x);
    x.struct_size = sizeof x;
    CHECK_STATUS(sw_store_get_stats(st, &x), SW_OK);
    return x;
}

/* 1 when a row's engines keep host-tier leases from call to call. */
static int keeps_of(const row *R)
{
    return R->tune.kept_pct != 0 && R->tune.host_gather != 0;
}

/* 1 when a row's engines surely hold kept leases after a host-tier call:
 * the caller leases a job's first blocks itself when it posts (land_first,
 * with a landing), so its whole blocks are kept whatever the thread's
 * timing. Elsewhere a tile may lease every block before the thread reaches
 * it (those leases are released as before): the landing_small row did on
 * the H200. */
static int keeps_sure(const row *R)
{
    return keeps_of(R) && R->tune.landing_mb != 0 && R->tune.land_first != 0;
}

/* 1 when a row's engines land the next call's first blocks at a call's end
 * (the host-tier gather with a landing buffer). */
static int aheads_of(const row *R)
{
    sw_swap_facts f;
    memset(&f, 0, sizeof f);
    sw_swap_tuning lib;
    sw_swap_heuristics(&f, &lib); /* (the field's default depends on no fact) */
    const int32_t mb =
        R->tune.land_ahead_mb == SW_SWAP_TUNE_DEFAULT ? lib.land_ahead_mb : R->tune.land_ahead_mb;
    return mb != 0 && R->tune.host_gather != 0 && R->tune.landing_mb != 0;
}

static void test_host_gather(const row *R, sw_store *tier, sw_store *small, uint64_t seed)
{
    const shape sh = {2, 8, 128, 16}; /* 4 KiB BF16 stripes, 2 KiB FP8 */
    sw_rng r = {seed ^ 0x9a7e5u};
    if (!sw_store_host_mapped(tier)) {
        printf("host gather: the host tier is not pinned: nothing to test\n");
        CHECK(0);
        return;
    }
    const int32_t ql = 3;
    uint16_t qb[3 * 8 * 128], o1[3 * 8 * 128], o2[3 * 8 * 128];
    for (int i = 0; i < ql * sh.Hq * sh.D; i++)
        qb[i] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(&r)));
    /* 1. every stripe in the host tier: all gathered, none from the file;
     * the same result as the ticket path (tuning host_gather 0) */
    {
        const int32_t nb = 40;
        const int64_t len = (int64_t)nb * sh.B - 5;
        sw_swap *s = make_engine(R, tier, &sh, 1, 8, 3, 2, SW_SWAP_POLICY_SCORE,
                                 SW_SWAP_POOL_DEVICE);
        sw_swap_tuning tickets = R->tune;
        tickets.host_gather = 0;
        sw_swap *t = make_engine_t(R, &tickets, tier, &sh, 1, 8, 3, 2, SW_SWAP_POLICY_SCORE,
                                   SW_SWAP_POOL_DEVICE);
        if (!s || !t) {
            sw_swap_destroy(s);
            sw_swap_destroy(t);
            return;
        }
        tsw_seq q, q2;
        float *rk, *rv, *rk2, *rv2;
        sw_rng r2 = r;
        gather_seq(s, &q, &sh, 81001, nb, len, &r, &rk, &rv);
        gather_seq(t, &q2, &sh, 81002, nb, len, &r2, &rk2, &rv2); /* same values */
        const sw_store_stats a = store_stats(tier);
        sw_status st1, st2;
        const double rel1 = gather_attend(s, &q, &sh, qb, ql, o1, &st1);
        const sw_store_stats b = store_stats(tier);
        const double rel2 = gather_attend(t, &q2, &sh, qb, ql, o2, &st2);
        CHECK_STATUS(st1, SW_OK);
        CHECK_STATUS(st2, SW_OK);
        int differ = 0;
        for (int i = 0; i < ql * sh.Hq * sh.D; i++)
            differ += o1[i] != o2[i];
        sw_swap_stats ss;
        memset(&ss, 0, sizeof ss);
        ss.struct_size = sizeof ss;
        CHECK_STATUS(sw_swap_get_stats(s, &ss), SW_OK);
        printf("host gather: %d blocks all in the host tier: rel_l2 %.2e (ticket path %.2e, %d "
               "of %d outputs differ), store host hits +%llu file hits +%llu, engine host "
               "bytes %llu\n", nb, rel1, rel2, differ, ql * sh.Hq * sh.D,
               (unsigned long long)(b.host_hits - a.host_hits),
               (unsigned long long)(b.file_hits - a.file_hits),
               (unsigned long long)ss.host_bytes_read);
        CHECK(rel1 >= 0 && rel1 <= 1e-2 && rel2 >= 0 && rel2 <= 1e-2);
        CHECK(differ == 0); /* same bytes in the slots, same kernels */
        CHECK(b.host_hits - a.host_hits == (uint64_t)nb * 2 * sh.H);
        CHECK(b.file_hits == a.file_hits);
        CHECK(ss.host_bytes_read > 0 && ss.bytes_read == ss.host_bytes_read);
        /* 1b. kept leases: after the call the engine still holds its whole
         * blocks' (39 of 40: the last is partial) where the row keeps them,
         * none where it releases every lease or reads through tickets; the
         * next calls reuse them (still host-tier hits, no file read) and
         * stay exact */
        {
            const int keeps = keeps_of(R), sure = keeps_sure(R);
            /* (a block its tile leased before the thread came to it is
             * released as before; the release runs on the engine's thread
             * after the call: waited for before the counts are read) */
            const uint64_t whole = (uint64_t)(nb - 1) * 2 * sh.H;
            sw_swap_dev_quiesce(s);
            const uint64_t held = store_stats(tier).host_leased;
            CHECK(keeps ? (held > 0 || !sure) && held <= whole : held == 0);
            for (int call = 0; call < 2; call++) {
                const sw_store_stats k0 = store_stats(tier);
                sw_swap_stats e0;
                memset(&e0, 0, sizeof e0);
                e0.struct_size = sizeof e0;
                CHECK_STATUS(sw_swap_get_stats(s, &e0), SW_OK);
                sw_status stk;
                const double relk = gather_attend(s, &q, &sh, qb, ql, o1, &stk);
                sw_swap_dev_quiesce(s);
                const sw_store_stats k1 = store_stats(tier);
                sw_swap_stats e1 = e0;
                CHECK_STATUS(sw_swap_get_stats(s, &e1), SW_OK);
                CHECK_STATUS(stk, SW_OK);
                CHECK(relk >= 0 && relk <= 1e-2);
                CHECK(k1.host_hits > k0.host_hits && k1.file_hits == k0.file_hits);
                CHECK(keeps ? k1.host_leased >= k0.host_leased && k1.host_leased <= whole
                            : k1.host_leased == 0);
                CHECK(k1.host_lease_unmaps == k0.host_lease_unmaps);
                /* the blocks kept after the call before are visited through
                 * their kept leases (every kept block misses the 8-slot
                 * pool but those it holds) */
                const uint64_t visits = e1.kept_visits - e0.kept_visits;
                CHECK(keeps ? (visits > 0 || !sure) && visits * 2 * sh.H <= k0.host_leased
                            : visits == 0);
                printf("host gather, call %d again: rel_l2 %.2e, host hits +%llu, %llu block "
                       "visits through kept leases, %llu entries leased after it\n", call + 2,
                       relk, (unsigned long long)(k1.host_hits - k0.host_hits),
                       (unsigned long long)visits, (unsigned long long)k1.host_leased);
            }
        }
        /* 1c. a sequence at rest gives its kept leases back: two more
         * sequences attended once each on an engine whose kept leases go
         * after 200 ms idle, then only the first, 500 ms later */
        if (keeps_of(R)) {
            sw_swap_tuning idle = R->tune;
            idle.kept_idle_ms = 200;
            sw_swap *u = make_engine_t(R, &idle, tier, &sh, 1, 8, 3, 2, SW_SWAP_POLICY_SCORE,
                                       SW_SWAP_POOL_DEVICE);
            if (u) {
                tsw_seq qa, qz;
                float *ka, *va, *kz, *vz;
                sw_rng r4 = r;
                gather_seq_id(u, &qa, 11, &sh, 81011, 12, 12 * sh.B, 0, &r4, &ka, &va);
                gather_seq_id(u, &qz, 12, &sh, 81012, 12, 12 * sh.B, 0, &r4, &kz, &vz);
                const uint64_t l0 = store_stats(tier).host_leased;
                sw_status sa, sz;
                const double ra = gather_attend_id(u, 11, &qa, &sh, qb, ql, o1, &sa);
                const double rz = gather_attend_id(u, 12, &qz, &sh, qb, ql, o1, &sz);
                sw_swap_dev_quiesce(u);
                const uint64_t l1 = store_stats(tier).host_leased;
                struct timespec nap = {0, 500 * 1000 * 1000};
                nanosleep(&nap, NULL);
                const double ra2 = gather_attend_id(u, 11, &qa, &sh, qb, ql, o1, &sa);
                sw_swap_dev_quiesce(u);
                const uint64_t l2 = store_stats(tier).host_leased;
                CHECK_STATUS(sa, SW_OK);
                CHECK_STATUS(sz, SW_OK);
                CHECK(ra >= 0 && ra <= 1e-2 && rz >= 0 && rz <= 1e-2 && ra2 >= 0 && ra2 <= 1e-2);
                /* both keep their 12 whole blocks (4 stripes each) at most;
                 * after the rest, only the first's are left */
                CHECK((l1 > l0 || !keeps_sure(R)) && l1 >= l0 &&
                      l1 - l0 <= 2 * 12 * 2 * (uint64_t)sh.H);
                CHECK(l2 >= l0 && l2 - l0 <= 12 * 2 * (uint64_t)sh.H &&
                      (keeps_sure(R) ? l2 < l1 : l2 <= l1));
                printf("host gather, idle release: %llu entries kept by two sequences, %llu "
                       "after one rested 500 ms\n", (unsigned long long)(l1 - l0),
                       (unsigned long long)(l2 - l0));
                sw_swap_destroy(u);
                CHECK(store_stats(tier).host_leased == l0); /* destroy released the rest */
                tsw_seq_free(&qa);
                tsw_seq_free(&qz);
                free(ka);
                free(va);
                free(kz);
                free(vz);
            }
        }
        /* 1d. landing ahead: a decode loop over one sequence of 40 blocks
         * (8-slot pool): from the second call on, each call's end lands
         * the next call's first missing blocks, which that call reads
         * (stats); the outputs equal an engine's without it bit for bit. A
         * whole block written again between two calls is not taken over
         * (its generation moved: the call stays exact); calls alternating
         * between two sequences take nothing over; removing a sequence
         * whose blocks are held ahead gives their leases back. */
        {
            sw_swap_tuning off = R->tune;
            off.land_ahead_mb = 0;
            const uint64_t l0 = store_stats(tier).host_leased;
            sw_swap *ea = make_engine(R, tier, &sh, 1, 8, 3, 2, SW_SWAP_POLICY_SCORE,
                                     SW_SWAP_POOL_DEVICE);
            sw_swap *z = make_engine_t(R, &off, tier, &sh, 1, 8, 3, 2, SW_SWAP_POLICY_SCORE,
                                       SW_SWAP_POOL_DEVICE);
            if (ea && z) {
                const int ahead = aheads_of(R);
                tsw_seq qa, qz, qb6;
                float *ka, *va, *kz, *vz, *k6, *v6;
                sw_rng ra = r, rz = r, r6 = r;
                gather_seq_id(ea, &qa, 5, &sh, 81021, nb, len, 0, &ra, &ka, &va);
                gather_seq_id(z, &qz, 5, &sh, 81022, nb, len, 0, &rz, &kz, &vz);
                uint64_t used = 0, landed = 0;
                for (int call = 0; call < 6; call++) {
                    if (call == 4) {
                        /* block 6 (BF16, whole) rewritten in both */
                        const int64_t rowv = (int64_t)sh.H * sh.D;
                        for (int64_t i = 6 * sh.B * rowv; i < 7 * sh.B * rowv; i++) {
                            ka[i] = kz[i] = -2.0f * ka[i];
                            va[i] = vz[i] = 0.5f - va[i];
                        }
                        CHECK_STATUS(tsw_offload_block(ea, &qa, 0, 6, ka, va, len,
                                                       SW_SWAP_KV_BF16), SW_OK);
                        CHECK_STATUS(tsw_offload_block(z, &qz, 0, 6, kz, vz, len,
                                                       SW_SWAP_KV_BF16), SW_OK);
                    }
                    sw_swap_stats e0;
                    memset(&e0, 0, sizeof e0);
                    e0.struct_size = sizeof e0;
                    CHECK_STATUS(sw_swap_get_stats(ea, &e0), SW_OK);
                    sw_status sa, sz;
                    const double rela = gather_attend(ea, &qa, &sh, qb, ql, o1, &sa);
                    const double relz = gather_attend(z, &qz, &sh, qb, ql, o2, &sz);
                    sw_swap_stats e1 = e0;
                    CHECK_STATUS(sw_swap_get_stats(ea, &e1), SW_OK);
                    CHECK_STATUS(sa, SW_OK);
                    CHECK_STATUS(sz, SW_OK);
                    CHECK(rela >= 0 && rela <= 1e-2 && relz >= 0 && relz <= 1e-2);
                    int ndiff = 0;
                    for (int i = 0; i < ql * sh.Hq * sh.D; i++)
                        ndiff += o1[i] != o2[i];
                    CHECK(ndiff == 0);
                    /* the first call has no layer history (nothing landed
                     * at its end); from the third on each reads what the
                     * call before landed */
                    if (call != 4) /* (after the rewrite: the ahead may be dropped whole,
                                    * when block 6's entries were leased by it) */
                        CHECK(ahead && call >= 2 ? e1.ahead_used > e0.ahead_used
                                                 : e1.ahead_used == e0.ahead_used);
                    CHECK(e1.ahead_used <= e0.ahead_blocks); /* landed before the call */
                    CHECK(ahead && call >= 1 ? e1.ahead_blocks > e0.ahead_blocks
                                             : e1.ahead_blocks == e0.ahead_blocks);
                    used = e1.ahead_used;
                    landed = e1.ahead_blocks;
                    printf("host gather, landing ahead, call %d: rel_l2 %.2e, %d outputs differ "
                           "from no landing ahead; %llu blocks landed ahead, %llu read\n",
                           call, rela, ndiff, (unsigned long long)landed,
                           (unsigned long long)used);
                }
                CHECK(used <= landed);
                /* alternating sequences: the next call is the other one */
                gather_seq_id(ea, &qb6, 6, &sh, 81023, 12, 12 * sh.B, 0, &r6, &k6, &v6);
                for (int call = 0; call < 5; call++) {
                    sw_swap_stats e0;
                    memset(&e0, 0, sizeof e0);
                    e0.struct_size = sizeof e0;
                    CHECK_STATUS(sw_swap_get_stats(ea, &e0), SW_OK);
                    sw_status st5;
                    const double rel5 = call % 2
                                            ? gather_attend_id(ea, 6, &qb6, &sh, qb, ql, o1, &st5)
                                            : gather_attend(ea, &qa, &sh, qb, ql, o1, &st5);
                    CHECK_STATUS(st5, SW_OK);
                    CHECK(rel5 >= 0 && rel5 <= 1e-2);
                    sw_swap_stats e1 = e0;
                    CHECK_STATUS(sw_swap_get_stats(ea, &e1), SW_OK);
                    /* the first may take over what the loop's last call
                     * landed for sequence 5; each later one finds what its
                     * predecessor landed for the other sequence */
                    if (call > 0)
                        CHECK(e1.ahead_used == e0.ahead_used);
                }
                /* the last call (sequence 5) landed ahead for sequence 5:
                 * removing both sequences leaves the engine no lease at all
                 * (those landed ahead, the kept ones, the calls' own) */
                sw_swap_destroy(z);
                z = NULL;
                CHECK_STATUS(sw_swap_seq_remove(ea, 5, 0), SW_OK);
                CHECK_STATUS(sw_swap_seq_remove(ea, 6, 0), SW_OK);
                sw_swap_dev_quiesce(ea);
                CHECK(store_stats(tier).host_leased == l0);
                sw_swap_destroy(ea);
                ea = NULL;
                tsw_seq_free(&qa);
                tsw_seq_free(&qz);
                tsw_seq_free(&qb6);
                free(ka);
                free(va);
                free(kz);
                free(vz);
                free(k6);
                free(v6);
            }
            sw_swap_destroy(ea);
            sw_swap_destroy(z);
        }
        /* 1e. NaN on the tile path (8-slot pool, 41 blocks: direct tiles
         * over the host tier, the pool's tiles over the rest): a NaN in
         * the newest key, alone in its block, makes NaN exactly the last
         * query row of that kv head's query heads (the only row that sees
         * it); a NaN in one query row's head makes exactly that row NaN;
         * every other row finite with a finite LSE. A part whose visible
         * keys all scored NaN once had max -inf and the merges dropped it:
         * the NaN was lost. */
        {
            sw_swap *e = make_engine(R, tier, &sh, 1, 8, 3, 2, SW_SWAP_POLICY_SCORE,
                                     SW_SWAP_POOL_DEVICE);
            if (e) {
                tsw_seq qn;
                float *kn, *vn;
                sw_rng rn = r;
                const int64_t lenn = (int64_t)nb * sh.B + 1;
                gather_seq_id(e, &qn, 5, &sh, 81031, nb + 1, lenn, 0, &rn, &kn, &vn);
                /* the newest token's K, kv head 1, component 3 */
                kn[((lenn - 1) * sh.H + 1) * sh.D + 3] = NAN;
                CHECK_STATUS(tsw_offload_block(e, &qn, 0, nb, kn, vn, lenn,
                                               nb % 3 == 2 ? SW_SWAP_KV_FP8_E4M3
                                                           : SW_SWAP_KV_BF16), SW_OK);
                uint16_t qq[3 * 8 * 128];
                memcpy(qq, qb, sizeof qq);
                const int G = sh.Hq / sh.H;
                for (int which = 0; which < 2; which++) {
                    if (which == 1) /* query row 1, head 2 (kv head 0) */
                        qq[(1 * sh.Hq + 2) * sh.D + 7] = 0x7fc0;
                    float lse[3 * 8];
                    CHECK_STATUS(gather_run_id(e, 5, &sh, qq, ql, o1, lse), SW_OK);
                    int wrong = 0;
                    for (int tr = 0; tr < ql; tr++)
                        for (int h = 0; h < sh.Hq; h++) {
                            /* row ql - 1 alone sees the newest key */
                            const int sees = (tr == ql - 1 && h / G == 1) ||
                                             (which == 1 && tr == 1 && h == 2);
                            int nan = 0;
                            for (int x = 0; x < sh.D; x++)
                                nan += isnan(sw_bf16_to_f32(o1[(tr * sh.Hq + h) * sh.D + x]));
                            const float l = lse[tr * sh.Hq + h];
                            if (sees ? nan != sh.D || !isnan(l) : nan != 0 || !isfinite(l)) {
                                if (!wrong++)
                                    fprintf(stderr, "FAIL nan (%s): row %d head %d: %d of %d NaN, "
                                            "LSE %g\n", which ? "query" : "newest key", tr, h,
                                            nan, sh.D, (double)l);
                            }
                        }
                    CHECK(wrong == 0);
                    printf("host gather, NaN in the %s: %d rows wrong\n",
                           which ? "newest key and a query row" : "newest key", wrong);
                }
                tsw_seq_free(&qn);
                free(kn);
                free(vn);
                sw_swap_destroy(e);
            }
        }
        /* 2. a byte flipped in a host-tier entry: CORRUPT naming the block;
         * the copy leaves the host tier (the store counts a corruption) and
         * its slot is not used again: the next call reads the file and is
         * exact */
        const uint32_t bad_block = 7;
        sw_store_key k = ts_key(81001, 0, bad_block, 1, SW_STORE_KIND_V);
        CHECK_STATUS(sw_store_test_host_poke(tier, &k, 100, 0x10), SW_OK);
        /* (the blocks the last call landed ahead for this one hold the
         * bytes as they were: dropped, so that the call reads the tier) */
        sw_swap_dev_ahead_drop(s);
        const sw_store_stats c0 = store_stats(tier);
        sw_status st;
        (void)gather_attend(s, &q, &sh, qb, ql, o1, &st);
        CHECK_STATUS(st, SW_STATUS_CORRUPT);
        printf("host gather, flipped byte: %s (%s)\n", sw_status_str(st), sw_last_error());
        CHECK(strstr(sw_last_error(), "block 7,") != NULL);
        CHECK(strstr(sw_last_error(), "kv head 1, V") != NULL);
        const sw_store_stats c1 = store_stats(tier);
        CHECK(c1.corruptions == c0.corruptions + 1);
        CHECK_STATUS(sw_store_test_host_poke(tier, &k, 100, 0x10), SW_STATUS_NOT_FOUND);
        const double rel3 = gather_attend(s, &q, &sh, qb, ql, o1, &st);
        CHECK_STATUS(st, SW_OK);
        CHECK(rel3 >= 0 && rel3 <= 1e-2);
        const sw_store_stats c2 = store_stats(tier);
        CHECK(c2.file_hits > c1.file_hits); /* the bad key came from the file */
        printf("host gather, after the flip: rel_l2 %.2e, file hits +%llu\n", rel3,
               (unsigned long long)(c2.file_hits - c1.file_hits));
        /* pool larger than the sequence: after a flip, the resident slots
         * stay good and the bad block's slot is dropped */
        sw_swap_destroy(s);
        s = make_engine(R, tier, &sh, 1, nb + 4, 3, 2, SW_SWAP_POLICY_SCORE,
                        SW_SWAP_POOL_DEVICE);
        if (s) {
            tsw_seq q3;
            float *rk3, *rv3;
            sw_rng r3 = r2;
            gather_seq(s, &q3, &sh, 81003, nb, len, &r3, &rk3, &rv3);
            /* block 10 is BF16: byte 65 is the high byte of V element 32,
             * 0x40 its top exponent bit (a slot kept after the flip would
             * put the next result far off the reference) */
            sw_store_key k3 = ts_key(81003, 0, 10, 0, SW_STORE_KIND_V);
            CHECK_STATUS(sw_store_test_host_poke(tier, &k3, 65, 0x40), SW_OK);
            (void)gather_attend(s, &q3, &sh, qb, ql, o1, &st);
            CHECK_STATUS(st, SW_STATUS_CORRUPT);
            CHECK_STATUS(sw_store_test_host_poke(tier, &k3, 65, 0x40), SW_STATUS_NOT_FOUND);
            const double rel4 = gather_attend(s, &q3, &sh, qb, ql, o1, &st);
            CHECK_STATUS(st, SW_OK);
            CHECK(rel4 >= 0 && rel4 <= 1e-2);
            printf("host gather, resident pool after a flip: rel_l2 %.2e\n", rel4);
            tsw_seq_free(&q3);
            free(rk3);
            free(rv3);
        }
        tsw_seq_free(&q);
        tsw_seq_free(&q2);
        free(rk);
        free(rv);
        free(rk2);
        free(rv2);
        sw_swap_destroy(s);
        sw_swap_destroy(t);
    }
    /* 3. a host tier (62 entries) smaller than the call's stripes (48 x 4).
     * Sequence 5 offloaded in order with blocks 12..0 written again (the
     * newest), then sequence 6 (3 blocks):
     * the tier holds blocks 0..11 of sequence 5, the last two stripes of
     * block 12 (kv head 1, K and V) and sequence 6. The call leases blocks
     * 0..12 as their tiles' reads are submitted, before any file read; the
     * file reads of blocks 12..47 then fill the tier around the leased
     * entries (CLOCK evicts sequence 6's, then finds no victim). Block 12
     * is half gathered, half read (scattered whole, then overwritten). */
    {
        const int32_t nb = 48;
        const int64_t len = (int64_t)nb * sh.B - 9;
        sw_swap *s = make_engine(R, small, &sh, 1, 8, 3, 2, SW_SWAP_POLICY_LRU,
                                 SW_SWAP_POOL_DEVICE);
        if (!s)
            return;
        tsw_seq q, q6;
        float *rk, *rv, *rk6, *rv6;
        gather_seq_id(s, &q, 5, &sh, 82001, nb, len, 13, &r, &rk, &rv);
        gather_seq_id(s, &q6, 6, &sh, 82002, 3, 3 * sh.B, 0, &r, &rk6, &rv6);
        for (int call = 0; call < 3; call++) {
            const sw_store_stats a = store_stats(small);
            sw_status st;
            const double rel = gather_attend(s, &q, &sh, qb, ql, o1, &st);
            const sw_store_stats b = store_stats(small);
            printf("host gather, small host tier, call %d: %s rel_l2 %.2e, host hits +%llu, "
                   "file hits +%llu, host evictions +%llu\n", call, sw_status_str(st), rel,
                   (unsigned long long)(b.host_hits - a.host_hits),
                   (unsigned long long)(b.file_hits - a.file_hits),
                   (unsigned long long)(b.host_evictions - a.host_evictions));
            CHECK_STATUS(st, SW_OK);
            CHECK(rel >= 0 && rel <= 1e-2);
            /* every call mixes gathered and read stripes: the leases keep
             * blocks 0..12 in the tier while the file reads fill it. Read
             * through tickets (host_gather 0) nothing is leased: the first
             * call's file reads evict the tier, so only it mixes. */
            if (R->tune.host_gather != 0 || call == 0)
                CHECK(b.host_hits > a.host_hits && b.file_hits > a.file_hits);
            if (call == 0)
                CHECK(b.host_evictions > a.host_evictions);
        }
        tsw_seq_free(&q);
        tsw_seq_free(&q6);
        free(rk);
        free(rv);
        free(rk6);
        free(rv6);
        sw_swap_destroy(s);
    }
}

static void test_errors(sw_store *store, uint64_t seed)
{
    const shape sh = {2, 4, 64, 8};
    sw_swap_model m;
    sw_swap_model_init(&m);
    m.num_layers = 1;
    m.num_kv_heads = sh.H;
    m.num_qo_heads = sh.Hq;
    m.head_dim = sh.D;
    m.block_size = sh.B;
    sw_swap_config c;
    sw_swap_config_init(&c);
    c.resident_blocks = 8;
    c.pool = SW_SWAP_POOL_DEVICE;
    sw_swap *s = NULL;
    c.device = sw_cuda_device_count();
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_NO_DEVICE);
    CHECK(s == NULL);
    CHECK(strstr(sw_last_error(), "device") != NULL);
    printf("device %d: %s\n", c.device, sw_last_error());
    c.device = -1;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_NO_DEVICE);
    c.device = 0;
    m.head_dim = 32;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_STATUS_UNSUPPORTED);
    CHECK(strstr(sw_last_error(), "head_dim") != NULL);
    printf("head_dim 32: %s\n", sw_last_error());
    m.head_dim = sh.D;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_OK);
    if (!s)
        return;
    sw_rng r = {seed ^ 0xe77u};
    tsw_seq q;
    tsw_seq_init(&q, 5, 1, sh.H, sh.D, sh.B);
    const uint64_t ns = 77001;
    CHECK_STATUS(sw_swap_seq_add(s, 5, ns, 0, 64), SW_OK);
    const int64_t len = 5 * sh.B + 3;
    float *rk = malloc(sizeof(float) * (size_t)len * sh.H * sh.D);
    float *rv = malloc(sizeof(float) * (size_t)len * sh.H * sh.D);
    for (int64_t i = 0; i < len * sh.H * sh.D; i++) {
        rk[i] = (float)sw_rng_normal(&r);
        rv[i] = (float)sw_rng_normal(&r);
    }
    for (int32_t b = 0; b < 6; b++)
        CHECK_STATUS(tsw_offload_block(s, &q, 0, b, rk, rv, len, SW_SWAP_KV_BF16), SW_OK);
    uint16_t qb[4 * 64], o[4 * 64];
    float lse[4];
    for (int i = 0; i < sh.Hq * sh.D; i++)
        qb[i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
    uint64_t id = 5, bad_id = 6;
    int32_t qi[2] = {0, 1};
    sw_swap_attend_params p;
    sw_swap_attend_params_init(&p);
    p.batch = 1;
    p.seq_ids = &bad_id;
    p.q_indptr = qi;
    p.q = qb;
    CHECK_STATUS(dev_attend(s, &p, &sh, 1, o, lse, NULL, NULL), SW_STATUS_NOT_FOUND);
    /* host buffers handed to a device pool: INVALID, nothing launched */
    {
        sw_swap_attend_params hp = p;
        hp.seq_ids = &id;
        hp.o = o;
        hp.lse = lse;
        sw_status hs = sw_swap_attend(s, &hp, NULL, NULL);
        CHECK_STATUS(hs, SW_STATUS_INVALID);
        printf("host q/o: %s (%s)\n", sw_status_str(hs), sw_last_error());
    }
    float sc[2];
    int32_t n = 0;
    CHECK_STATUS(sw_swap_score_blocks(s, 5, 0, qb, 1, sc, 2, &n), SW_STATUS_WORKSPACE_TOO_SMALL);
    CHECK(n == 6);
    /* a stripe deleted behind the engine's back: NOT_FOUND, engine usable */
    p.seq_ids = &id;
    sw_store_key k = ts_key(ns, 0, 2, 1, SW_STORE_KIND_V);
    CHECK_STATUS(sw_store_delete(store, &k), SW_OK);
    sw_status st = dev_attend(s, &p, &sh, 1, o, lse, NULL, NULL);
    CHECK_STATUS(st, SW_STATUS_NOT_FOUND);
    printf("deleted stripe: %s (%s)\n", sw_status_str(st), sw_last_error());
    CHECK_STATUS(tsw_offload_block(s, &q, 0, 2, rk, rv, len, SW_SWAP_KV_BF16), SW_OK);
    CHECK_STATUS(dev_attend(s, &p, &sh, 1, o, lse, NULL, NULL), SW_OK);
    /* a stripe rewritten behind the engine's back (another generation):
     * CORRUPT, never its bytes (a fresh engine: nothing resident). */
    sw_swap_destroy(s);
    s = NULL;
    c.resident_blocks = 2;
    c.tile_blocks = 1;
    CHECK_STATUS(sw_swap_create(&m, &c, store, &s), SW_OK);
    if (s) {
        tsw_seq q2;
        tsw_seq_init(&q2, 5, 1, sh.H, sh.D, sh.B);
        CHECK_STATUS(sw_swap_seq_add(s, 5, ns + 1, 0, 64), SW_OK);
        for (int32_t b = 0; b < 6; b++)
            CHECK_STATUS(tsw_offload_block(s, &q2, 0, b, rk, rv, len, SW_SWAP_KV_BF16), SW_OK);
        uint8_t junk[8 * 64 * 2];
        memset(junk, 0x11, sizeof junk);
        sw_store_key k2 = ts_key(ns + 1, 0, 1, 0, SW_STORE_KIND_K);
        CHECK_STATUS(sw_store_write(store, &k2, junk, sizeof junk, NULL), SW_OK);
        st = dev_attend(s, &p, &sh, 1, o, lse, NULL, NULL);
        CHECK_STATUS(st, SW_STATUS_CORRUPT);
        printf("rewritten stripe: %s (%s)\n", sw_status_str(st), sw_last_error());
        tsw_seq_free(&q2);
        sw_swap_destroy(s);
    }
    free(rk);
    free(rv);
    tsw_seq_free(&q);
}

static const shape shapes[] = {{1, 1, 64, 16}, {2, 8, 64, 16},  {2, 4, 128, 8},
                               {2, 16, 256, 16}, {4, 8, 128, 4}, {1, 8, 256, 32},
                               {8, 8, 64, 1},   {2, 2, 128, 5}};
/* Large tiles: many block ranges per kv head, several token chunks per CTA,
 * many row groups (64-row chunks x 8 group heads). */
static const shape big[] = {{2, 16, 256, 16}, {8, 64, 128, 16}, {4, 32, 64, 32}};

static ccase random_case(uint64_t seed, int i)
{
    sw_rng r = {seed * 31 + (uint64_t)i};
    ccase cc;
    memset(&cc, 0, sizeof cc);
    cc.sh = shapes[i % 8];
    cc.nseq = sw_rng_int(&r, 1, 3);
    cc.maxlen = cc.sh.B * 12 + 5;
    cc.tile = sw_rng_int(&r, 1, 4);
    cc.pool_kind = (i / 8) % 3;
    cc.dtmode = i % 3;
    cc.prefetch = (i / 2) % 2;
    cc.lru = (i / 5) % 2;
    cc.host_tier = (i / 3) % 2;
    cc.chunk_max = 40;
    return cc;
}

static ccase large_case(int i)
{
    ccase cc;
    memset(&cc, 0, sizeof cc);
    cc.sh = big[i % 3];
    cc.nseq = 1 + i % 2;
    cc.maxlen = 6000;
    cc.tile = i < 3 ? 400 : 96;
    cc.pool_kind = i < 3 ? 2 : 1;
    cc.dtmode = i % 3;
    cc.prefetch = 1;
    cc.host_tier = i % 2;
    cc.chunk_max = 48;
    return cc;
}

static int row_open(row *R, const variant *v, int nrand)
{
    memset(R, 0, sizeof *R);
    R->v = v;
    sw_swap_tuning_default(&R->tune);
    R->tune.host_gather = v->host_gather;
    R->tune.landing_mb = v->landing_mb;
    R->tune.landing_max_mb = v->landing_max_mb;
    R->tune.land_groups = v->land_groups;
    R->tune.land_first = v->land_first;
    R->tune.merge_chunks = v->merge_chunks;
    R->tune.resident_fast = v->resident_fast;
    R->tune.kept_pct = v->kept_pct;
    R->tune.land_ahead_mb = v->land_ahead_mb;
    R->spin_us = v->spin_us;
    R->nrand = nrand;
    ts_dir_make(&R->d, "swap_cuda");
    ts_dir_make(&R->dh, "swap_cuda_host");
    ts_dir_make(&R->dt, "swap_cuda_tier");
    ts_dir_make(&R->ds, "swap_cuda_small");
    ts_dir_make(&R->dg, "swap_cuda_gather");
    /* stripes up to 32 tokens x 256 dims x BF16 = 16 KiB; the large cases
     * (two sequences of up to 6,000 tokens, 8 kv heads) run side by side */
    const uint64_t n = nrand >= 48 ? 80000 : 20000;
    R->file = tsw_store_open(R->d.store, 16384, n, 0);
    R->tier = tsw_store_open(R->dt.store, 16384, n, 512ull << 20);
    R->hst = tsw_store_open(R->dh.store, 16384, n, 0);
    /* 62 host-tier entries: fewer than one call's 48 x 4 stripes */
    R->small = tsw_store_open(R->ds.store, 16384, 4000, 62ull * 16384);
    R->gather = tsw_store_open(R->dg.store, 16384, 4000, 64ull << 20);
    return R->file && R->tier && R->hst && R->small && R->gather;
}

static void row_close(row *R)
{
    sw_store_close(R->file);
    sw_store_close(R->tier);
    sw_store_close(R->hst);
    sw_store_close(R->small);
    sw_store_close(R->gather);
    ts_rm_rf(R->d.base);
    ts_rm_rf(R->dh.base);
    ts_rm_rf(R->dt.base);
    ts_rm_rf(R->ds.base);
    ts_rm_rf(R->dg.base);
}

/* A job: case `idx` of a row (0..5 the large ones, 6 the needle, errors
 * and host-gather checks, then the random cases). */
typedef struct job {
    row *R;
    int idx;
} job;

typedef struct jobs {
    job *j;
    uint64_t seed;
} jobs;

static void run_job(int n, int worker, void *ctx)
{
    (void)worker;
    const jobs *J = ctx;
    row *R = J->j[n].R;
    const int k = J->j[n].idx;
    const uint64_t seed = J->seed;
    const int before = sw_test_thread_failures;
    const double t0 = sw_now_seconds();
    int bad = 0;
    if (k < 6) {
        const ccase cc = large_case(k);
        bad = run_case(R, cc.host_tier ? R->tier : R->file, R->hst, seed, 100 + k, &cc,
                       200 + (uint64_t)k);
        printf("%s: large case %d: %.1f s\n", R->v->name, k, sw_now_seconds() - t0);
    } else if (k == 6) {
        test_needle(R, R->file, seed);
        test_errors(R->file, seed);
        test_host_gather(R, R->gather, R->small, seed);
        bad = sw_test_thread_failures != before;
        printf("%s: needle, errors and host gather: %.1f s\n", R->v->name,
               sw_now_seconds() - t0);
    } else {
        const int i = k - 7;
        const ccase cc = random_case(seed, i);
        bad = run_case(R, cc.host_tier ? R->tier : R->file, R->hst, seed, i, &cc,
                       1 + (uint64_t)i);
    }
    atomic_fetch_add(&R->nfail, bad);
    atomic_fetch_add(&R->checks, sw_test_thread_failures - before);
}

/* sw_cuda_swap_merge_ranges: n ranges folded in one launch pair give the
 * state (m, l, acc) of one sw_cuda_swap_merge_split a range, bit for bit:
 * decode and several-row shapes, d64/128/256, chunks without a visible key,
 * rows with no state yet, part2 room for every range's parts, for fewer (a
 * pair a batch of ranges) and none (the wide fold), and short ranges (no
 * split). */
static void test_merge_ranges(uint64_t seed)
{
    typedef struct mshape {
        int32_t ql, G, H, D, nchunks, n;
        int room; /* 0: none, 1: every range's parts, 2: three ranges' */
    } mshape;
    static const mshape cases[] = {
        {1, 8, 2, 256, 64, 8, 1}, {1, 4, 8, 128, 64, 8, 1}, {3, 4, 2, 64, 64, 5, 1},
        {1, 8, 2, 256, 64, 8, 2}, {1, 4, 8, 128, 64, 7, 0}, {2, 8, 2, 128, 16, 4, 1},
        {1, 8, 2, 256, 64, 1, 1}, {1, 4, 8, 128, 200, 3, 1},
    };
    const int32_t sms = 132;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const mshape c = cases[ci];
        sw_rng rs = {seed ^ (0x9e3779b97f4a7c15ull * (ci + 1))};
        const int32_t Hq = c.H * c.G, nrg = (c.ql * c.G + SW_CUDA_SWAP_RG - 1) / SW_CUDA_SWAP_RG;
        const size_t stride = sw_cuda_swap_chunk_floats(c.H, nrg, c.D);
        const size_t npart = (size_t)c.n * c.nchunks * stride, nst = (size_t)c.ql * Hq;
        float *hp = malloc(sizeof(float) * npart), *hs = malloc(sizeof(float) * nst * (c.D + 2));
        float *o1 = malloc(sizeof(float) * nst * (c.D + 2)),
              *o2 = malloc(sizeof(float) * nst * (c.D + 2));
        if (!hp || !hs || !o1 || !o2) {
            fprintf(stderr, "FAIL merge ranges: no memory\n");
            sw_test_failures++;
            free(hp), free(hs), free(o1), free(o2);
            return;
        }
        for (size_t i = 0; i < npart; i++)
            hp[i] = (float)(sw_rng_uniform(&rs) * 2.0 - 1.0);
        for (size_t i = 0; i < npart; i += c.D + 2) {
            const double u = sw_rng_uniform(&rs);
            hp[i] = u < 0.1 ? -INFINITY : (float)(u * 10.0 - 5.0); /* max */
            hp[i + 1] = hp[i] == -INFINITY ? 0.0f : (float)(0.5 + sw_rng_uniform(&rs)); /* sum */
        }
        /* state: m (rows), l (rows), acc (rows x D); a third with none yet */
        for (size_t i = 0; i < nst; i++) {
            const int none = sw_rng_uniform(&rs) < 0.33;
            hs[i] = none ? -INFINITY : (float)(sw_rng_uniform(&rs) * 4.0 - 2.0);
            hs[nst + i] = none ? 0.0f : (float)(1.0 + sw_rng_uniform(&rs));
            for (int32_t d = 0; d < c.D; d++)
                hs[2 * nst + i * c.D + d] = none ? 0.0f : (float)(sw_rng_uniform(&rs) - 0.5);
        }
        const int64_t np = sw_cuda_swap_merge_parts((int64_t)c.ql * c.G * c.H, sms);
        const int64_t per = c.nchunks / 16 < np ? c.nchunks / 16 : np;
        const size_t room = c.room == 0 ? 0
                            : c.room == 1 ? (size_t)(c.n * per > np ? c.n * per : np) * stride
                                          : (size_t)(3 * per > np ? 3 * per : np) * stride;
        float *dp, *ds, *d2 = NULL;
        CU(cudaMalloc((void **)&dp, sizeof(float) * npart));
        CU(cudaMalloc((void **)&ds, sizeof(float) * nst * (c.D + 2)));
        if (room)
            CU(cudaMalloc((void **)&d2, sizeof(float) * room));
        CU(cudaMemcpy(dp, hp, sizeof(float) * npart, cudaMemcpyHostToDevice));
        sw_cuda_swap_tile_args a;
        memset(&a, 0, sizeof a);
        a.nblk = 1;
        a.ql = c.ql;
        a.Hq = Hq;
        a.H = c.H;
        a.G = c.G;
        a.D = c.D;
        a.nchunks = c.nchunks;
        a.nrg = nrg;
        a.part = dp;
        a.m = ds;
        a.l = ds + nst;
        a.acc = ds + 2 * nst;
        float *out[2] = {o1, o2};
        for (int way = 0; way < 2; way++) {
            CU(cudaMemcpy(ds, hs, sizeof(float) * nst * (c.D + 2), cudaMemcpyHostToDevice));
            sw_status st = SW_OK;
            if (way == 0) {
                sw_cuda_swap_tile_args b = a;
                for (int32_t r = 0; r < c.n && st == SW_OK; r++, b.part += c.nchunks * stride)
                    st = sw_cuda_swap_merge_split(&b, d2, room, sms, NULL);
            } else {
                st = sw_cuda_swap_merge_ranges(&a, c.n, d2, room, sms, NULL);
            }
            CHECK(st == SW_OK);
            CU(cudaDeviceSynchronize());
            CU(cudaMemcpy(out[way], ds, sizeof(float) * nst * (c.D + 2), cudaMemcpyDeviceToHost));
        }
        size_t diff = 0, moved = 0;
        for (size_t i = 0; i < nst * (c.D + 2); i++) {
            diff += memcmp(&o1[i], &o2[i], sizeof(float)) != 0;
            moved += memcmp(&o1[i], &hs[i], sizeof(float)) != 0;
        }
        if (diff || !moved) {
            fprintf(stderr, "FAIL merge ranges case %zu (ql %d G %d H %d D %d, %d ranges of %d, "
                    "room %d): %zu of %zu values differ from a merge a range, %zu changed\n",
                    ci, c.ql, c.G, c.H, c.D, c.n, c.nchunks, c.room, diff,
                    nst * (size_t)(c.D + 2), moved);
            sw_test_failures++;
        }
        CU(cudaFree(dp));
        CU(cudaFree(ds));
        if (d2)
            CU(cudaFree(d2));
        free(hp), free(hs), free(o1), free(o2);
    }
    printf("merge ranges: %zu shapes, one launch pair equal to a merge a range\n",
           sizeof cases / sizeof cases[0]);
}

/* [--variant NAME]...: those rows only (default: every row). */
int main(int argc, char **argv)
{
    if (sw_cuda_device_count() < 1) {
        printf("SKIPPED: no usable GPU\n");
        return SW_TEST_SKIP;
    }
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    const uint64_t seed = ts_seed(20250301);
    /* each engine brings its own threads: a worker for every 4 CPUs */
    int workers = (int)sw_env_int("SW_TEST_THREADS", (sw_cpu_count() + 3) / 4);
    workers = workers < 1 ? 1 : workers > 16 ? 16 : workers;
    printf("device 0: %s, sm_%d%d, %d SMs; seed %llu; %d workers\n", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, (unsigned long long)seed, workers);
    enum { NV = (int)(sizeof variants / sizeof variants[0]) };
    int want[NV] = {0}, any = 0;
    for (int i = 1; i < argc; i++) {
        int found = 0;
        for (int k = 0; k < NV && i + 1 < argc && !strcmp(argv[i], "--variant"); k++)
            if (!strcmp(argv[i + 1], variants[k].name))
                want[k] = found = any = 1;
        if (!found) {
            fprintf(stderr, "usage: test_swap_cuda [--variant NAME]... (NAME: ");
            for (int k = 0; k < NV; k++)
                fprintf(stderr, "%s%s", k ? ", " : "", variants[k].name);
            fprintf(stderr, ")\n");
            return 2;
        }
        i++;
    }
    test_merge_ranges(seed);
    /* SW_TEST_SWAP_CASES=n: the first n random cases of each row only, and
     * the large ones only with all 48 (a quick run of the other tests) */
    const char *nc_env = getenv("SW_TEST_SWAP_CASES");
    const double t0 = sw_now_seconds();
    static row rows[NV];
    job *list = calloc((size_t)NV * (7 + 48), sizeof *list);
    if (!list) {
        fprintf(stderr, "FAIL: no memory for the job list\n");
        return 1;
    }
    int nrows = 0, nj = 0, bad = 0;
    /* the longest jobs first: the large cases, then each row's fixed
     * checks, then the random cases */
    for (int pass = 0; pass < 3; pass++)
        for (int k = 0; k < NV; k++) {
            if (any && !want[k])
                continue;
            row *R = &rows[k];
            if (pass == 0) {
                const int nrand = nc_env && *nc_env ? atoi(nc_env) : variants[k].nrand;
                printf("== %s: %s\n", variants[k].name, variants[k].what);
                if (!row_open(R, &variants[k], nrand < 48 ? nrand : 48)) {
                    fprintf(stderr, "FAIL row %s: stores did not open\n", variants[k].name);
                    for (int x = 0; x <= k; x++)
                        if (rows[x].v)
                            row_close(&rows[x]); /* (closes what did open) */
                    free(list);
                    return 1;
                }
                nrows++;
                for (int i = 0; i < 6 && R->nrand >= 48; i++)
                    list[nj++] = (job){R, i};
            } else if (pass == 1) {
                list[nj++] = (job){R, 6};
            } else {
                for (int i = 0; i < R->nrand; i++)
                    list[nj++] = (job){R, 7 + i};
            }
            R->ncases = (R->nrand >= 48 ? 6 : 0) + R->nrand;
        }
    jobs J = {list, seed};
    sw_test_pool_run(workers, nj, run_job, &J);
    for (int k = 0; k < NV; k++) {
        row *R = &rows[k];
        if (!R->v)
            continue;
        const int b = atomic_load(&R->nfail) != 0 || atomic_load(&R->checks) != 0;
        printf("%s: %d cases and the fixed checks: %d jobs failed, %d failed checks\n",
               R->v->name, R->ncases, atomic_load(&R->nfail), atomic_load(&R->checks));
        if (b)
            fprintf(stderr, "FAIL row %s (seed %llu)\n", R->v->name, (unsigned long long)seed);
        bad += b;
        row_close(R);
    }
    free(list);
    printf("test_swap_cuda: %d rows, %d jobs on %d workers, %d failed rows, %.1f s (seed %llu)\n",
           nrows, nj, workers, bad, sw_now_seconds() - t0, (unsigned long long)seed);
    return bad || sw_test_failures ? 1 : 0;
}

#else /* no CUDA in this build */
int main(void)
{
    printf("SKIPPED: built without CUDA\n");
    return SW_TEST_SKIP;
}
#endif
