/* Reattach (sw_swap_seq_attach): a child process offloads two sequences
 * (two layers, BF16 and FP8 blocks, a partial last block) to a store,
 * attends over them (checked against the fp64 reference), writes the
 * outputs to a file and exits; the parent opens the store again, attaches
 * both sequences in a new engine and attends: the same bytes of O and LSE.
 * Then every failure path on purpose: a K stripe rewritten after its
 * manifest (CORRUPT), a V stripe deleted (attach succeeds, attend
 * NOT_FOUND), a missing K stripe and a hole in the manifests (NOT_FOUND), a
 * damaged manifest (CORRUPT), another model shape (INVALID), an id already
 * registered; a sequence with nothing stored attaches with length 0; a
 * failed attach leaves nothing registered and the store unchanged. */
#include "sw_test.h"
#include "test_swap_util.h"

#include <sys/wait.h>
#include <unistd.h>

enum { L = 2, H = 2, HQ = 8, D = 64, B = 16, NS = 42, QL = 3 };
static const int64_t lens[2] = {16 * 7 + 5, 16 * 3};

static sw_swap *engine_pool(sw_store *st, int32_t head_dim, sw_swap_pool_kind pool,
                            int32_t persist)
{
    return tsw_small_engine(st, L, H, HQ, head_dim, B, pool, persist);
}

static sw_swap *engine(sw_store *st, int32_t head_dim)
{
    return engine_pool(st, head_dim, SW_SWAP_POOL_HOST, 1);
}

/* The predictor's scores of every block of both sequences in both layers
 * for the queries of attend_all, appended at out; bytes written. */
static size_t score_all(sw_swap *s, const uint16_t *q, uint8_t *out)
{
    size_t at = 0;
    for (int32_t l = 0; l < L; l++)
        for (int i = 0; i < 2; i++) {
            int32_t nb = 0;
            const uint16_t *qi = q + ((size_t)l * 2 + i) * QL * HQ * D;
            CHECK_STATUS(sw_swap_score_blocks(s, (uint64_t)i + 1, l, qi, QL, (float *)(out + at),
                                              64, &nb), SW_OK);
            at += sizeof(float) * (size_t)nb;
        }
    return at;
}

/* Attends both sequences in both layers: O then LSE, layer by layer. */
static size_t attend_all(sw_swap *s, const uint16_t *q, uint8_t *out, sw_status *status)
{
    const uint64_t ids[2] = {1, 2};
    const int32_t qind[3] = {0, QL, 2 * QL};
    const size_t ob = sizeof(uint16_t) * 2 * QL * HQ * D, lb = sizeof(float) * 2 * QL * HQ;
    size_t at = 0;
    *status = SW_OK;
    for (int32_t l = 0; l < L; l++) {
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.layer = l;
        p.batch = 2;
        p.seq_ids = ids;
        p.q_indptr = qind;
        p.q = q + (size_t)l * 2 * QL * HQ * D;
        p.o = out + at;
        p.lse = (float *)(out + at + ob);
        sw_status st = sw_swap_attend(s, &p, NULL, NULL);
        if (st != SW_OK && *status == SW_OK)
            *status = st;
        at += ob + lb;
    }
    return at;
}

static void make_queries(uint16_t *q)
{
    sw_rng r = {99};
    for (size_t e = 0; e < (size_t)L * 2 * QL * HQ * D; e++)
        q[e] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(&r)));
}

/* A failed attach: status `want`, nothing registered and the store
 * unchanged (no write, delete or eviction, the same stripes, journal and
 * generation). Returns the attach's error message. */
static const char *attach_fails(sw_swap *s, sw_store *st, uint64_t id, uint32_t base,
                                sw_status want)
{
    static char why[512];
    const sw_store_stats a = ts_stats(st);
    CHECK_STATUS(sw_swap_seq_attach(s, id, NS, base, 100), want);
    snprintf(why, sizeof why, "%s", sw_last_error());
    const sw_store_stats b = ts_stats(st);
    CHECK(a.writes == b.writes && a.deletes == b.deletes && a.evictions == b.evictions &&
          a.extents_used == b.extents_used && a.payload_bytes == b.payload_bytes &&
          a.journal_records == b.journal_records && a.generation == b.generation);
    CHECK_STATUS(sw_swap_seq_length(s, id, 0, NULL, NULL), SW_STATUS_NOT_FOUND);
    return why;
}

/* The child: offload, attend, check, write the outputs; exit status 0 when
 * all went well. */
static int child(const char *store_dir, const char *out_path)
{
    sw_store *st = tsw_store_open(store_dir, 4096, 4096, 0);
    if (!st)
        return 1;
    sw_swap *s = engine(st, D);
    sw_rng r = {7};
    tsw_seq seqs[2];
    for (int i = 0; i < 2; i++) {
        tsw_seq_init(&seqs[i], (uint64_t)i + 1, L, H, D, B);
        CHECK_STATUS(sw_swap_seq_add(s, seqs[i].id, NS, (uint32_t)i * 100, 100), SW_OK);
        for (int32_t l = 0; l < L; l++) {
            const size_t n = (size_t)lens[i] * H * D;
            float *rk = malloc(sizeof(float) * n), *rv = malloc(sizeof(float) * n);
            for (size_t e = 0; e < n; e++) {
                rk[e] = (float)sw_rng_normal(&r);
                rv[e] = (float)sw_rng_normal(&r);
            }
            for (int32_t b = 0; b < (int32_t)((lens[i] + B - 1) / B); b++)
                CHECK_STATUS(tsw_offload_block(s, &seqs[i], l, b, rk, rv, lens[i],
                                               b % 3 == 2 ? SW_SWAP_KV_FP8_E4M3 : SW_SWAP_KV_BF16),
                             SW_OK);
            free(rk);
            free(rv);
        }
    }
    uint16_t q[L * 2 * QL * HQ * D];
    make_queries(q);
    static uint8_t out[1 << 20];
    memset(out, 0xff, sizeof out); /* NaN: every O and LSE must be written */
    sw_status ast;
    const size_t na = attend_all(s, q, out, &ast);
    CHECK_STATUS(ast, SW_OK);
    const size_t n = na + score_all(s, q, out + na);
    /* against the reference */
    double *ref = malloc(sizeof(double) * QL * HQ * D), lse[QL * HQ];
    double worst = 0, worst_lse = 0;
    for (int32_t l = 0; l < L; l++)
        for (int i = 0; i < 2; i++) {
            const uint16_t *qi = q + ((size_t)l * 2 + i) * QL * HQ * D;
            tsw_reference(&seqs[i], l, HQ, qi, QL, 1, 1.0 / sqrt((double)D), ref, lse);
            const uint8_t *at = out + (size_t)l * na / L;
            const uint16_t *o = (const uint16_t *)at + (size_t)i * QL * HQ * D;
            double e2 = 0, r2 = 0;
            for (int j = 0; j < QL * HQ * D; j++) {
                const double x = sw_bf16_to_f32(o[j]);
                e2 += (x - ref[j]) * (x - ref[j]);
                r2 += ref[j] * ref[j];
            }
            worst = fmax(worst, sqrt(e2 / r2));
            /* (fmax would drop a NaN: an unwritten LSE counts as infinite) */
            const float *lo = (const float *)(at + sizeof(uint16_t) * 2 * QL * HQ * D) +
                              (size_t)i * QL * HQ;
            for (int j = 0; j < QL * HQ; j++)
                worst_lse = fmax(worst_lse, isfinite(lo[j]) ? fabs(lo[j] - lse[j]) : INFINITY);
        }
    CHECK(worst < 1e-2 && worst_lse < 1e-2);
    free(ref);
    FILE *f = fopen(out_path, "wb");
    CHECK(f && fwrite(out, 1, n, f) == n);
    if (f)
        fclose(f);
    sw_swap_destroy(s);
    CHECK_STATUS(sw_store_close(st), SW_OK);
    for (int i = 0; i < 2; i++)
        tsw_seq_free(&seqs[i]);
    printf("child: offloaded and attended, rel_l2 %.2g against fp64\n", worst);
    fflush(stdout);
    return sw_test_failures ? 1 : 0;
}

#ifdef SW_HAVE_CUDA
#include <cuda_runtime_api.h>

/* With a GPU: a device pool attaches the same sequences (its projected keys
 * made on the device and kept in BF16): its scores match the host engine's
 * within that rounding (all zeros would not) and so does its attention. */
static void device_attach(sw_store *st, const uint16_t *q, const uint8_t *want, size_t na)
{
    if (sw_cuda_device_count() == 0) {
        printf("device pool: no usable GPU, not run\n");
        return;
    }
    sw_swap *s = engine_pool(st, D, SW_SWAP_POOL_DEVICE, 1);
    if (!s)
        return;
    CHECK_STATUS(sw_swap_seq_attach(s, 1, NS, 0, 100), SW_OK);
    CHECK_STATUS(sw_swap_seq_attach(s, 2, NS, 100, 100), SW_OK);
    static uint8_t got[1 << 20];
    const size_t sb = score_all(s, q, got + na);
    const float *ws = (const float *)(want + na), *gs = (const float *)(got + na);
    /* FP8 blocks score -inf on both pools (a difference of two -inf is NaN:
     * compared for equality); every other score within BF16 rounding of the
     * host pool's, score by score. */
    int finite = 0;
    float apart = 0;
    for (size_t i = 0; i < sb / sizeof(float); i++) {
        if (!isfinite(ws[i])) {
            CHECK(ws[i] == gs[i]);
            continue;
        }
        finite++;
        CHECK(fabsf(ws[i] - gs[i]) <= 3e-2f * (1.0f + fabsf(ws[i])));
        apart = fmaxf(apart, fabsf(ws[i] - gs[i]));
    }
    CHECK(finite > 0);
    printf("device pool: %d finite scores, at most %.3g apart from the host pool's\n", finite,
           apart);
    const uint64_t ids[2] = {1, 2};
    const int32_t qind[3] = {0, QL, 2 * QL};
    const size_t qb = sizeof(uint16_t) * 2 * QL * HQ * D, lb = sizeof(float) * 2 * QL * HQ;
    void *dq = NULL, *dout = NULL;
    CHECK(cudaMalloc(&dq, qb) == cudaSuccess && cudaMalloc(&dout, qb + lb) == cudaSuccess);
    double worst = 0;
    for (int32_t l = 0; l < L && dq && dout; l++) {
        CHECK(cudaMemcpy(dq, q + (size_t)l * 2 * QL * HQ * D, qb, cudaMemcpyHostToDevice) ==
              cudaSuccess);
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.layer = l;
        p.batch = 2;
        p.seq_ids = ids;
        p.q_indptr = qind;
        p.q = dq;
        p.o = dout;
        p.lse = (float *)((char *)dout + qb);
        CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_OK);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        CHECK(cudaMemcpy(got, dout, qb + lb, cudaMemcpyDeviceToHost) == cudaSuccess);
        const uint16_t *wo = (const uint16_t *)(want + (size_t)l * (qb + lb));
        const uint16_t *go = (const uint16_t *)got;
        double e2 = 0, r2 = 0;
        for (size_t i = 0; i < qb / 2; i++) {
            const double a = sw_bf16_to_f32(wo[i]), b = sw_bf16_to_f32(go[i]);
            e2 += (a - b) * (a - b);
            r2 += a * a;
        }
        worst = fmax(worst, sqrt(e2 / r2));
    }
    CHECK(worst < 1e-2);
    printf("device pool: attached, rel_l2 %.2g against the host "
           "pool\n", worst);
    cudaFree(dq);
    cudaFree(dout);
    sw_swap_destroy(s);
}
#endif

static sw_store_key key(uint32_t seq, uint32_t layer, uint32_t block, uint16_t head, uint8_t kind)
{
    return ts_key(NS, layer, seq * 100 + block, head, kind);
}

int main(void)
{
    ts_dir d;
    ts_dir_make(&d, "attach");
    char out_path[400];
    snprintf(out_path, sizeof out_path, "%s/child.bin", d.base);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0)
        _exit(child(d.store, out_path));
    int wst = 0;
    CHECK(waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0);

    static uint8_t want[1 << 20], got[1 << 20];
    FILE *f = fopen(out_path, "rb");
    const size_t n = f ? fread(want, 1, sizeof want, f) : 0;
    if (f)
        fclose(f);
    CHECK(n > 0);
    sw_store *st = tsw_store_open(d.store, 4096, 4096, 0);
    CHECK(st != NULL);
    if (!st || !n)
        return 1;
    uint16_t q[L * 2 * QL * HQ * D];
    make_queries(q);

    /* a new engine adopts both sequences: the same attention, byte for byte */
    sw_swap *s = engine(st, D);
    CHECK_STATUS(sw_swap_seq_attach(s, 1, NS, 0, 100), SW_OK);
    CHECK_STATUS(sw_swap_seq_attach(s, 2, NS, 100, 100), SW_OK);
    for (int32_t l = 0; l < L; l++) {
        int64_t t1 = 0, t2 = 0;
        int32_t nb = 0;
        CHECK_STATUS(sw_swap_seq_length(s, 1, l, &t1, &nb), SW_OK);
        CHECK_STATUS(sw_swap_seq_length(s, 2, l, &t2, NULL), SW_OK);
        CHECK(t1 == lens[0] && nb == 8 && t2 == lens[1]);
    }
    sw_status ast;
    const size_t na = attend_all(s, q, got, &ast);
    CHECK_STATUS(ast, SW_OK);
    /* the predictor too: its projected keys were recomputed from the K stripes */
    CHECK(na + score_all(s, q, got + na) == n);
    CHECK(memcmp(want, got, na) == 0);
    CHECK(memcmp(want + na, got + na, n - na) == 0);
    /* already registered */
    CHECK_STATUS(sw_swap_seq_attach(s, 1, NS, 0, 100), SW_STATUS_INVALID);
    sw_swap_destroy(s);
#ifdef SW_HAVE_CUDA
    device_attach(st, q, want, na);
#endif

    /* offloaded without manifests: nothing to adopt, length 0 */
    {
        sw_swap_config c;
        sw_swap_config_init(&c);
        CHECK(c.persist_manifests == 0);
        sw_swap *w = engine_pool(st, D, SW_SWAP_POOL_HOST, 0);
        CHECK_STATUS(sw_swap_seq_add(w, 11, NS + 2, 0, 8), SW_OK);
        uint16_t kb[H * B * D] = {0};
        sw_swap_block b;
        sw_swap_block_init(&b);
        b.valid_tokens = B;
        b.k = b.v = kb;
        b.k_bytes = b.v_bytes = sizeof kb;
        CHECK_STATUS(sw_swap_offload(w, 11, 0, 0, &b), SW_OK);
        sw_swap_destroy(w);
        sw_swap_model m;
        sw_swap_model_init(&m);
        m.num_layers = L;
        m.num_kv_heads = H;
        m.num_qo_heads = HQ;
        m.head_dim = D;
        m.block_size = B;
        c.persist_manifests = 2;
        w = NULL;
        CHECK_STATUS(sw_swap_create(&m, &c, st, &w), SW_STATUS_INVALID);
        s = engine(st, D);
        CHECK_STATUS(sw_swap_seq_attach(s, 11, NS + 2, 0, 8), SW_OK);
        int64_t t = -1;
        CHECK_STATUS(sw_swap_seq_length(s, 11, 0, &t, NULL), SW_OK);
        CHECK(t == 0);
        sw_swap_destroy(s);
    }
    /* nothing stored: length 0 */
    s = engine(st, D);
    CHECK_STATUS(sw_swap_seq_attach(s, 9, NS + 1, 0, 100), SW_OK);
    int64_t t0 = -1;
    CHECK_STATUS(sw_swap_seq_length(s, 9, 0, &t0, NULL), SW_OK);
    CHECK(t0 == 0);
    sw_swap_destroy(s);

    /* another model shape */
    s = engine(st, 32);
    CHECK(strstr(attach_fails(s, st, 1, 0, SW_STATUS_INVALID), "head_dim 64") != NULL);
    sw_swap_destroy(s);

    /* a K stripe rewritten after its manifest (block 3 of seq 1, layer 1:
     * BF16) -> CORRUPT naming it; nothing registered */
    uint8_t junk[B * D * 2];
    memset(junk, 0x3c, sizeof junk);
    sw_store_key k = key(0, 1, 3, 1, SW_STORE_KIND_K);
    CHECK_STATUS(sw_store_write(st, &k, junk, sizeof junk, NULL), SW_OK);
    s = engine(st, D);
    CHECK(strstr(attach_fails(s, st, 1, 0, SW_STATUS_CORRUPT),
                 "layer 1 block 3: K stripe of kv head 1") != NULL);
    /* the other sequence is untouched by that */
    CHECK_STATUS(sw_swap_seq_attach(s, 2, NS, 100, 100), SW_OK);
    sw_swap_destroy(s);

    /* a V stripe deleted (seq 2, layer 0, block 1): attach succeeds, attend
     * says NOT_FOUND */
    k = key(1, 0, 1, 0, SW_STORE_KIND_V);
    CHECK_STATUS(sw_store_delete(st, &k), SW_OK);
    s = engine(st, D);
    CHECK_STATUS(sw_swap_seq_attach(s, 2, NS, 100, 100), SW_OK);
    {
        const uint64_t id = 2;
        const int32_t qi[2] = {0, QL};
        uint16_t o[QL * HQ * D];
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.layer = 0;
        p.batch = 1;
        p.seq_ids = &id;
        p.q_indptr = qi;
        p.q = q;
        p.o = o;
        CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_STATUS_NOT_FOUND);
    }
    sw_swap_destroy(s);

    /* a missing K stripe (seq 2, layer 1, block 0: BF16) -> NOT_FOUND */
    k = key(1, 1, 0, 0, SW_STORE_KIND_K);
    CHECK_STATUS(sw_store_delete(st, &k), SW_OK);
    s = engine(st, D);
    CHECK(strstr(attach_fails(s, st, 2, 100, SW_STATUS_NOT_FOUND),
                 "layer 1 block 0: K stripe of kv head 0") != NULL);
    sw_swap_destroy(s);

    /* a hole in the manifests (seq 1, layer 0, block 4 of 8) -> NOT_FOUND */
    k = key(0, 0, 4, 0xFFFF, SW_STORE_KIND_K);
    uint8_t man[64];
    size_t mlen = 0;
    CHECK_STATUS(ts_read1(st, &k, man, sizeof man, &mlen, NULL), SW_OK);
    CHECK_STATUS(sw_store_delete(st, &k), SW_OK);
    s = engine(st, D);
    CHECK(strstr(attach_fails(s, st, 1, 0, SW_STATUS_NOT_FOUND),
                 "layer 0 block 4: its manifest is missing") != NULL);
    /* a damaged manifest -> CORRUPT */
    man[8] = 0xff; /* valid tokens */
    CHECK_STATUS(sw_store_write(st, &k, man, mlen, NULL), SW_OK);
    CHECK(strstr(attach_fails(s, st, 1, 0, SW_STATUS_CORRUPT), "layer 0 block 4") != NULL);
    sw_swap_destroy(s);

    CHECK_STATUS(sw_store_close(st), SW_OK);
    ts_rm_rf(d.base);
    printf("test_swap_attach: %s (%zu bytes of attention compared)\n",
           sw_test_failures ? "FAILED" : "ok", n);
    return sw_test_failures ? 1 : 0;
}
