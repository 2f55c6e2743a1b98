/* Swap engine, device pool: the resident path (src/swap/dev_fast.c) and
 * offload's write-through. Blocks offloaded from GPU memory go into the
 * pool as well; a decode call whose blocks are all resident runs the paged
 * decode kernel over the pool's slots. Checked against the fp64 reference
 * (relative L2 <= 1e-2, LSE within 1e-2) and against an engine with the
 * path turned off (tuning resident_fast 0, every call through the tile
 * loop); an engine whose plans are uploaded (tuning resident_inline 0)
 * gives the bits of the default one, whose plans go in the launch's
 * parameters: decode rows, two- and three-row chunks (GQA 4: 8 and 12 rows a
 * kv head), causal and not, a five-row chunk (20 rows: the tile loop takes
 * it), two sequences of different lengths in one call, a sequence
 * that grows by one token between calls (its last block rewritten: still
 * resident, still exact), a long sequence whose keys the decode split
 * spreads over many CTAs (its partial states folded by the fused merge,
 * its counters reused call after call; then read through the pool view,
 * sw_swap_get_pool_view + sw_swap_resident_slots, bit for bit), a pool
 * too small for the blocks (the tile loop
 * takes the call, same result), and the stats that say which path ran
 * (and, for the default engine, that a settled layer's plan went in the
 * launch).
 * Error path: host memory for q with a device pool. Exit 77 (skipped)
 * without CUDA or a GPU. */
#include "test_swap_util.h"

#include "core/sw_core.h"

#ifdef SW_HAVE_CUDA
#include "swap/dev_internal.h"

#include <cuda_runtime.h>

enum { L = 2, H = 2, HQ = 8, D = 128, B = 16, LEN0 = 16 * 7 + 5, SHORT = 40, LONG = 16 * 75 + 9,
       MAXLEN = 16 * 80 };

/* The raw K/V of each layer, BF16 token-major [MAXLEN][H][D], on the host
 * and on the device. */
static uint16_t kt[L][MAXLEN * H * D], vt[L][MAXLEN * H * D];
static void *dk[L], *dv[L];

/* fast: 0 every call through the tile loop, 1 the resident path, 2 the
 * resident path with its plans uploaded from the pinned ring */
static sw_swap *engine(sw_store *st, int32_t slots, int fast)
{
    sw_swap_tuning tu;
    sw_swap_tuning_default(&tu);
    tu.resident_fast = fast != 0;
    if (fast == 2)
        tu.resident_inline = 0;
    return tsw_engine(st, L, H, HQ, D, B, SW_SWAP_POOL_DEVICE, 0, slots, &tu);
}

/* Blocks first..last of every layer of sequence `id` from the device K/V,
 * tokens [0, len): NHD blocks read in place, one batch. */
static void offload(sw_swap *s, uint64_t id, int32_t first, int64_t len)
{
    const int32_t last = (int32_t)((len - 1) / B);
    sw_swap_block items[L * 16];
    const sw_swap_block *kv[L * 16];
    uint64_t ids[L * 16];
    int32_t layers[L * 16], blocks[L * 16], n = 0;
    for (int32_t l = 0; l < L; l++)
        for (int32_t b = first; b <= last; b++, n++) {
            sw_swap_block *x = &items[n];
            sw_swap_block_init(x);
            const size_t off = (size_t)b * B * H * D;
            x->valid_tokens = (int32_t)(len - (int64_t)b * B < B ? len - (int64_t)b * B : B);
            x->layout = SW_KV_NHD;
            x->k = (uint16_t *)dk[l] + off;
            x->v = (uint16_t *)dv[l] + off;
            x->k_bytes = x->v_bytes = sizeof(uint16_t) * ((size_t)MAXLEN * H * D - off);
            x->on_device = 1;
            kv[n] = x;
            ids[n] = id;
            layers[n] = l;
            blocks[n] = b;
        }
    int32_t done = -1;
    CHECK_STATUS(sw_swap_offload_batch(s, n, ids, layers, blocks, kv, NULL, &done), SW_OK);
    CHECK(done == n);
}

/* The fp64 reference of layer l over tokens [0, len) for `ql` query rows. */
static void reference(int32_t l, int64_t len, const uint16_t *q, int32_t ql, int causal,
                      double *o, double *lse)
{
    tsw_seq ref;
    tsw_seq_init(&ref, 0, L, H, D, B);
    tsw_layer *y = &ref.layers[l];
    tsw_reserve(&ref, y, len);
    for (int64_t i = 0; i < len * H * D; i++) {
        y->k[i] = sw_bf16_to_f32(kt[l][i]);
        y->v[i] = sw_bf16_to_f32(vt[l][i]);
    }
    y->len = len;
    tsw_reference(&ref, l, HQ, q, ql, causal, 1.0 / sqrt((double)D), o, lse);
    tsw_seq_free(&ref);
}

/* One call: `n` sequences, ql[i] rows each (q rows packed), layer l; O and
 * LSE copied back. */
static sw_status attend(sw_swap *s, int32_t n, const uint64_t *ids, const int32_t *ql, int32_t l,
                        int causal, const uint16_t *q, float *o, float *lse)
{
    int32_t ind[4] = {0};
    for (int32_t i = 0; i < n; i++)
        ind[i + 1] = ind[i] + ql[i];
    const size_t rows = (size_t)ind[n], qb = sizeof(uint16_t) * rows * HQ * D;
    void *d_q = NULL, *d_o = NULL, *d_l = NULL;
    CHECK(cudaMalloc(&d_q, qb) == cudaSuccess && cudaMalloc(&d_o, qb) == cudaSuccess &&
          cudaMalloc(&d_l, sizeof(float) * rows * HQ) == cudaSuccess);
    cudaMemcpy(d_q, q, qb, cudaMemcpyHostToDevice);
    cudaMemset(d_o, 0xff, qb); /* NaN: every element must be written */
    cudaMemset(d_l, 0xff, sizeof(float) * rows * HQ); /* and every LSE */
    sw_swap_attend_params p;
    sw_swap_attend_params_init(&p);
    p.layer = l;
    p.batch = n;
    p.seq_ids = ids;
    p.q_indptr = ind;
    p.q = d_q;
    p.o = d_o;
    p.lse = (float *)d_l;
    p.causal = causal;
    sw_status st = sw_swap_attend(s, &p, NULL, NULL);
    static uint16_t ob[4 * 16 * HQ * D];
    cudaMemcpy(ob, d_o, qb, cudaMemcpyDeviceToHost);
    cudaMemcpy(lse, d_l, sizeof(float) * rows * HQ, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < rows * HQ * D; i++)
        o[i] = sw_bf16_to_f32(ob[i]);
    cudaFree(d_q);
    cudaFree(d_o);
    cudaFree(d_l);
    return st;
}

static double rel_l2(const float *o, const double *ref, size_t n)
{
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        e += (o[i] - ref[i]) * (o[i] - ref[i]);
        r += ref[i] * ref[i];
    }
    return sqrt(e / (r > 0 ? r : 1));
}

/* The largest LSE error; infinite for a value not written (NaN) or an
 * infinity of the wrong sign or where the reference is finite. */
static double lse_err(const float *a, const double *ref, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d;
        if (isnan(a[i]))
            d = INFINITY;
        else if (isinf(ref[i]) || isinf(a[i]))
            d = isinf(ref[i]) && isinf(a[i]) && (ref[i] < 0) == (a[i] < 0) ? 0 : INFINITY;
        else
            d = fabs(a[i] - ref[i]);
        w = d > w ? d : w;
    }
    return w;
}

static uint64_t resident_attends(const sw_swap *s)
{
    sw_swap_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    sw_swap_get_stats(s, &st);
    return st.resident_attends;
}

/* Resident calls whose plan went in the decode launch's parameters. */
static uint64_t inline_calls(const sw_swap *s)
{
    return s->dev ? s->dev->fast.inline_calls : 0;
}

/* Whether layer l of sequence id is settled (its device page table kept
 * by write-through: the resident call reads none of its blocks). */
static int settled(sw_swap *s, uint64_t id, int32_t l)
{
    const sw_swap_seq *q = sw_swap_find_seq(s, id);
    return q && q->layers[l].res_ok;
}

static double worst_rel, worst_lse;

enum { NE = 4 }; /* engines: fast, slow, small pool, fast with plans uploaded */

/* Sequence id of each engine, one call of ql rows over `len` tokens of
 * layer l: each against the reference; fast against the slow engine's
 * output, the uploaded plans' engine bit for bit against fast. want_fast:
 * whether engines 0 and 3 must take the resident path. */
static void one_call(sw_swap *const *e, const uint64_t *ids, int32_t l, int64_t len, int32_t ql,
                     int causal, sw_rng *r, int want_fast)
{
    static uint16_t q[16 * HQ * D];
    for (size_t i = 0; i < (size_t)ql * HQ * D; i++)
        q[i] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(r)));
    static double ro[16 * HQ * D], rl[16 * HQ];
    reference(l, len, q, ql, causal, ro, rl);
    static float o[NE][16 * HQ * D], lse[NE][16 * HQ];
    const size_t no = (size_t)ql * HQ * D, nl = (size_t)ql * HQ;
    const uint64_t before = resident_attends(e[0]), before3 = resident_attends(e[3]);
    /* a settled layer's plan goes in the launch (an unsettled one's slots
     * go up from the ring with it); never with resident_inline 0 */
    const uint64_t inl0 = inline_calls(e[0]);
    const int want_inline = want_fast && settled(e[0], ids[0], l);
    for (int k = 0; k < NE; k++) {
        CHECK_STATUS(attend(e[k], 1, &ids[k], &ql, l, causal, q, o[k], lse[k]), SW_OK);
        const double rel = rel_l2(o[k], ro, no), le = lse_err(lse[k], rl, nl);
        worst_rel = rel > worst_rel ? rel : worst_rel;
        worst_lse = le > worst_lse ? le : worst_lse;
        if (!(rel <= 1e-2 && le <= 1e-2))
            fprintf(stderr, "engine %d layer %d len %lld ql %d causal %d: rel_l2 %.3g lse %.3g\n",
                    k, l, (long long)len, ql, causal, rel, le);
        CHECK(rel <= 1e-2 && le <= 1e-2);
    }
    double e2 = 0, r2 = 0; /* the resident path against the tile loop */
    for (size_t i = 0; i < no; i++) {
        e2 += ((double)o[0][i] - o[1][i]) * ((double)o[0][i] - o[1][i]);
        r2 += (double)o[1][i] * o[1][i];
    }
    CHECK(sqrt(e2 / (r2 > 0 ? r2 : 1)) <= 1e-2);
    CHECK(resident_attends(e[0]) == before + (uint64_t)want_fast);
    CHECK(resident_attends(e[3]) == before3 + (uint64_t)want_fast);
    CHECK(inline_calls(e[0]) == inl0 + (uint64_t)want_inline && inline_calls(e[3]) == 0);
    CHECK(resident_attends(e[1]) == 0 && resident_attends(e[2]) == 0);
    CHECK(!memcmp(o[3], o[0], sizeof(float) * no) && !memcmp(lse[3], lse[0], sizeof(float) * nl));
}

/* One decode row of sequence id over `len` tokens of layer l against the
 * fp64 reference; want_fast: whether the resident path must take it. */
static void check_call(sw_swap *s, uint64_t id, int32_t l, int64_t len, int want_fast,
                       sw_rng *r)
{
    static uint16_t q[HQ * D];
    for (size_t i = 0; i < (size_t)HQ * D; i++)
        q[i] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(r)));
    static double ro[HQ * D], rl[HQ];
    static float o[HQ * D], lse[HQ];
    reference(l, len, q, 1, 1, ro, rl);
    const int32_t one = 1;
    const uint64_t before = resident_attends(s);
    CHECK_STATUS(attend(s, 1, &id, &one, l, 1, q, o, lse), SW_OK);
    const double rel = rel_l2(o, ro, (size_t)HQ * D), le = lse_err(lse, rl, HQ);
    worst_rel = rel > worst_rel ? rel : worst_rel;
    worst_lse = le > worst_lse ? le : worst_lse;
    if (!(rel <= 1e-2 && le <= 1e-2))
        fprintf(stderr, "sequence %llu layer %d len %lld: rel_l2 %.3g lse %.3g\n",
                (unsigned long long)id, l, (long long)len, rel, le);
    CHECK(rel <= 1e-2 && le <= 1e-2);
    CHECK(resident_attends(s) == before + (uint64_t)want_fast);
}

/* Blocks first..last of every layer of sequence id from HOST memory
 * (not written through: the blocks are not resident). */
static void offload_host(sw_swap *s, uint64_t id, int32_t first, int32_t last)
{
    for (int32_t l = 0; l < L; l++)
        for (int32_t b = first; b <= last; b++) {
            sw_swap_block x;
            sw_swap_block_init(&x);
            const size_t off = (size_t)b * B * H * D;
            x.valid_tokens = B;
            x.layout = SW_KV_NHD;
            x.k = kt[l] + off;
            x.v = vt[l] + off;
            x.k_bytes = x.v_bytes = sizeof(uint16_t) * (size_t)B * H * D;
            CHECK_STATUS(sw_swap_offload(s, id, l, b, &x), SW_OK);
        }
}

/* Settled layers: a layer all resident keeps its device page table across
 * its decode appends (written through: still settled, no rebuild); an
 * eviction unsettles it, the tile loop takes the next call and the
 * resident call after that rebuilds the table; a layer that outgrows its
 * table's region and an arena that fills (sequences added and removed)
 * are rebuilt too. Every call against the fp64 reference. */
static void test_settled(sw_store *st, sw_rng *r)
{
    sw_swap *s = engine(st, 30, 1);
    const uint64_t a = 11, b = 12;
    CHECK_STATUS(sw_swap_seq_add(s, a, a, 0, 80), SW_OK);
    offload(s, a, 0, 160);
    for (int32_t l = 0; l < L; l++) {
        CHECK(!settled(s, a, l)); /* (no table yet) */
        check_call(s, a, l, 160, 1, r);
        CHECK(settled(s, a, l));
    }
    int kept = 1;
    for (int64_t len = 161; len <= 176; len++) {
        offload(s, a, (int32_t)((len - 1) / B), len);
        for (int32_t l = 0; l < L; l++) {
            kept &= settled(s, a, l);
            check_call(s, a, l, len, 1, r);
        }
    }
    CHECK(kept);
    /* 11 + 11 of 30 slots: b's 20 blocks of layer 0 evict a's */
    CHECK_STATUS(sw_swap_seq_add(s, b, b, 0, 40), SW_OK);
    offload_host(s, b, 0, 19);
    CHECK(settled(s, a, 0) && settled(s, a, 1));
    check_call(s, b, 0, 20 * B, 0, r);
    CHECK(!settled(s, a, 0) || !settled(s, a, 1));
    for (int32_t l = 0; l < L; l++) {
        if (!settled(s, a, l))
            check_call(s, a, l, 176, 0, r); /* the tile loop reads its blocks back */
        check_call(s, a, l, 176, 1, r);      /* ... then the table is rebuilt */
        CHECK(settled(s, a, l));
    }
    sw_swap_destroy(s);

    /* outgrowing the region (64 entries for 10 blocks), then a full arena
     * (a pool large enough that write-through's free-slot search, which
     * looks at 64 slots from its cursor, never wraps into c's slots) */
    s = engine(st, 1024, 1);
    const uint64_t c = 13;
    CHECK_STATUS(sw_swap_seq_add(s, c, c, 0, 200), SW_OK);
    offload(s, c, 0, 10 * B);
    check_call(s, c, 1, 10 * B, 1, r);
    for (int32_t first = 10; first < 70; first += 15)
        offload(s, c, first, (int64_t)(first + 15 < 70 ? first + 15 : 70) * B);
    CHECK(!settled(s, c, 1)); /* blocks 64.. had no entry */
    check_call(s, c, 1, 70 * B, 1, r);
    CHECK(settled(s, c, 1));
    check_call(s, c, 0, 70 * B, 1, r);
    for (uint64_t i = 0; i < 40; i++) {
        const uint64_t t = 100 + i;
        CHECK_STATUS(sw_swap_seq_add(s, t, t, 0, 80), SW_OK);
        offload(s, t, 0, 3 * B);
        for (int32_t l = 0; l < L; l++)
            check_call(s, t, l, 3 * B, 1, r);
        CHECK_STATUS(sw_swap_seq_remove(s, t, 1), SW_OK);
    }
    /* 40 x 2 regions of 64 entries: the arena filled and dropped them all */
    CHECK(!settled(s, c, 0) && !settled(s, c, 1));
    for (int32_t l = 0; l < L; l++) {
        check_call(s, c, l, 70 * B, 1, r);
        CHECK(settled(s, c, l));
    }
    sw_swap_destroy(s);
    printf("settled layers: kept through 16 appends, rebuilt after an eviction, a region "
           "outgrown and a full arena\n");
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("test_swap_resident: no usable GPU, skipped\n");
        return SW_TEST_SKIP;
    }
    sw_rng r = {ts_seed(31)};
    for (int l = 0; l < L; l++) {
        for (size_t i = 0; i < (size_t)MAXLEN * H * D; i++) {
            kt[l][i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
            vt[l][i] = sw_f32_to_bf16((float)sw_rng_normal(&r));
        }
        CHECK(cudaMalloc(&dk[l], sizeof kt[l]) == cudaSuccess &&
              cudaMalloc(&dv[l], sizeof vt[l]) == cudaSuccess);
        cudaMemcpy(dk[l], kt[l], sizeof kt[l], cudaMemcpyHostToDevice);
        cudaMemcpy(dv[l], vt[l], sizeof vt[l], cudaMemcpyHostToDevice);
    }
    ts_dir d;
    ts_dir_make(&d, "resident");
    sw_store *st = tsw_store_open(d.store, 8192, 4096, 0);
    CHECK(st != NULL);
    if (!st)
        return 1;
    /* fast, slow (tile loop only), a pool of 4 slots (fast on, never taken) */
    sw_swap *e[NE] = {engine(st, 256, 1), engine(st, 256, 0), engine(st, 4, 1),
                      engine(st, 256, 2)};
    const uint64_t ids[NE] = {1, 2, 3, 21};
    for (int k = 0; k < NE; k++) {
        CHECK_STATUS(sw_swap_seq_add(e[k], ids[k], ids[k], 0, 16), SW_OK);
        offload(e[k], ids[k], 0, LEN0);
    }
    {
        sw_swap_stats s0;
        memset(&s0, 0, sizeof s0);
        s0.struct_size = sizeof s0;
        sw_swap_get_stats(e[0], &s0);
        CHECK(s0.offload_resident == (uint64_t)L * ((LEN0 + B - 1) / B));
    }
    for (int32_t l = 0; l < L; l++) {
        one_call(e, ids, l, LEN0, 1, 1, &r, 1);
        one_call(e, ids, l, LEN0, 2, 1, &r, 1);
        one_call(e, ids, l, LEN0, 2, 0, &r, 1);
        one_call(e, ids, l, LEN0, 3, 1, &r, 1); /* 12 rows a kv head: one decode item */
        one_call(e, ids, l, LEN0, 5, 1, &r, 0); /* 20 rows: the tile loop */
    }
    /* decode growth: one token, the last block rewritten -- still resident */
    for (int64_t len = LEN0 + 1; len <= LEN0 + 12; len++) {
        for (int k = 0; k < NE; k++)
            offload(e[k], ids[k], (int32_t)((len - 1) / B), len);
        for (int32_t l = 0; l < L; l++)
            one_call(e, ids, l, len, 1, 1, &r, 1);
    }
    const int64_t len1 = LEN0 + 12;
    /* a long sequence: the decode split cuts it, the fused merge folds it */
    const uint64_t longs[NE] = {5, 6, 7, 22};
    for (int k = 0; k < NE; k++) {
        CHECK_STATUS(sw_swap_seq_add(e[k], longs[k], longs[k], 0, 128), SW_OK);
        for (int32_t first = 0; first * B < LONG; first += 16)
            offload(e[k], longs[k], first, (first + 16) * B < LONG ? (first + 16) * B : LONG);
    }
    for (int32_t l = 0; l < L; l++) {
        one_call(e, longs, l, LONG, 1, 1, &r, 1);
        one_call(e, longs, l, LONG, 3, 1, &r, 1);
        one_call(e, longs, l, LONG, 2, 0, &r, 1);
    }
    for (int64_t len = LONG + 1; len <= LONG + 3; len++) {
        for (int k = 0; k < NE; k++)
            offload(e[k], longs[k], (int32_t)((len - 1) / B), len);
        for (int32_t l = 0; l < L; l++)
            one_call(e, longs, l, len, 1, 1, &r, 1);
    }
    /* the pool as a paged KV cache: every block of the long sequence in
     * the slot sw_swap_resident_slots names, its K and V bit for bit */
    {
        sw_swap_pool_view pv;
        memset(&pv, 0, sizeof pv);
        pv.struct_size = sizeof pv;
        CHECK_STATUS(sw_swap_get_pool_view(e[0], NULL, &pv), SW_OK);
        CHECK(pv.num_slots == 256 && pv.head_stride == (int64_t)B * D && pv.token_stride == D);
        const int64_t len = LONG + 3, nb = (len + B - 1) / B;
        static int32_t sl[128];
        int32_t n = 0, bad = 0;
        static uint16_t page[H * B * D];
        for (int32_t l = 0; l < L; l++) {
            CHECK_STATUS(sw_swap_resident_slots(e[0], longs[0], l, sl, 128, &n), SW_OK);
            CHECK(n == nb);
            for (int32_t b = 0; b < n; b++) {
                CHECK(sl[b] >= 0 && sl[b] < pv.num_slots);
                for (int kv = 0; kv < 2 && sl[b] >= 0; kv++) {
                    const uint16_t *src = (const uint16_t *)(kv ? pv.v : pv.k) +
                                          (int64_t)sl[b] * pv.page_stride;
                    CHECK(cudaMemcpy(page, src, sizeof page, cudaMemcpyDeviceToHost) ==
                          cudaSuccess);
                    const uint16_t *want = kv ? vt[l] : kt[l];
                    for (int32_t h = 0; h < H; h++)
                        for (int64_t t = 0; t < B && b * B + t < len; t++)
                            bad += memcmp(page + h * pv.head_stride + t * pv.token_stride,
                                          want + ((b * B + t) * H + h) * D,
                                          sizeof(uint16_t) * D) != 0;
                }
            }
        }
        CHECK(bad == 0);
        /* one sequence's slots never another's */
        int32_t other[16] = {0}, no = 0;
        CHECK_STATUS(sw_swap_resident_slots(e[0], ids[0], 0, other, 16, &no), SW_OK);
        CHECK_STATUS(sw_swap_resident_slots(e[0], longs[0], 0, sl, 128, &n), SW_OK);
        for (int32_t i = 0; i < no; i++)
            for (int32_t j = 0; j < n; j++)
                CHECK(other[i] < 0 || other[i] != sl[j]);
    }
    /* two sequences of different lengths in one call (fast engine) */
    CHECK_STATUS(sw_swap_seq_add(e[0], 4, 4, 0, 16), SW_OK);
    offload(e[0], 4, 0, SHORT);
    {
        static uint16_t q[3 * HQ * D];
        for (size_t i = 0; i < (size_t)3 * HQ * D; i++)
            q[i] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(&r)));
        const uint64_t two[2] = {4, 1};
        const int32_t ql[2] = {1, 2};
        static float o[3 * HQ * D], lse[3 * HQ];
        static double ro[3 * HQ * D], rl[3 * HQ];
        const uint64_t before = resident_attends(e[0]);
        CHECK_STATUS(attend(e[0], 2, two, ql, 1, 1, q, o, lse), SW_OK);
        CHECK(resident_attends(e[0]) == before + 1);
        reference(1, SHORT, q, 1, 1, ro, rl);
        reference(1, len1, q + (size_t)HQ * D, 2, 1, ro + (size_t)HQ * D, rl + HQ);
        const double rel = rel_l2(o, ro, (size_t)3 * HQ * D), le = lse_err(lse, rl, 3 * HQ);
        if (!(rel <= 1e-2 && le <= 1e-2))
            fprintf(stderr, "two sequences: rel_l2 %.3g lse %.3g\n", rel, le);
        CHECK(rel <= 1e-2 && le <= 1e-2);
    }
    /* CUDA graphs: a two-sequence decode step captured once and replayed
     * over three appends, each replay after its prepare equal bit for bit
     * to sw_swap_attend on the same q; a sequence whose block is not
     * resident (offloaded from host memory: not written through) makes
     * prepare fail, sw_swap_attend runs it (the tile loop reads the block
     * into the pool), then prepare and the graph's launch work */
    {
        cudaStream_t cs;
        CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess);
        const uint64_t gid[2] = {ids[0], longs[0]};
        sw_swap_graph *g = NULL;
        CHECK_STATUS(sw_swap_graph_create(e[0], 0, 2, gid, 1, 128, &g), SW_OK);
        const size_t qb = sizeof(uint16_t) * 2 * HQ * D;
        static uint16_t hq[2 * HQ * D], o1[2 * HQ * D], o2[2 * HQ * D];
        for (size_t i = 0; i < 2 * HQ * D; i++)
            hq[i] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(&r)));
        void *dq = NULL, *dog = NULL, *doe = NULL, *dlg = NULL, *dle = NULL;
        CHECK(cudaMalloc(&dq, qb) == cudaSuccess && cudaMalloc(&dog, qb) == cudaSuccess &&
              cudaMalloc(&doe, qb) == cudaSuccess &&
              cudaMalloc(&dlg, sizeof(float) * 2 * HQ) == cudaSuccess &&
              cudaMalloc(&dle, sizeof(float) * 2 * HQ) == cudaSuccess);
        cudaMemcpy(dq, hq, qb, cudaMemcpyHostToDevice);
        const int32_t ind[3] = {0, 1, 2};
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.layer = 0;
        p.batch = 2;
        p.seq_ids = gid;
        p.q_indptr = ind;
        p.q = dq;
        p.o = doe;
        p.lse = (float *)dle;
        p.causal = 1;
        /* uncaptured first (the launch's attributes), then captured */
        CHECK_STATUS(sw_swap_graph_prepare(g, cs), SW_OK);
        CHECK_STATUS(sw_swap_graph_attend(g, dq, dog, (float *)dlg, 1, 0.0f, cs), SW_OK);
        cudaGraph_t graph = NULL;
        cudaGraphExec_t ge = NULL;
        CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
        const sw_status cst = sw_swap_graph_attend(g, dq, dog, (float *)dlg, 1, 0.0f, cs);
        CHECK(cudaStreamEndCapture(cs, &graph) == cudaSuccess);
        CHECK_STATUS(cst, SW_OK);
        CHECK(cudaGraphInstantiate(&ge, graph, 0) == cudaSuccess);
        int same = 1, steps = 0;
        for (int64_t n0 = LEN0 + 12, n1 = LONG + 3; steps < 3; steps++) {
            offload(e[0], ids[0], (int32_t)(n0 / B), n0 + 1);
            offload(e[0], longs[0], (int32_t)(n1 / B), n1 + 1);
            n0++;
            n1++;
            CHECK_STATUS(sw_swap_graph_prepare(g, cs), SW_OK);
            CHECK(cudaMemsetAsync(dog, 0xff, qb, cs) == cudaSuccess);
            CHECK(cudaGraphLaunch(ge, cs) == cudaSuccess);
            CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
            cudaMemcpy(o1, dog, qb, cudaMemcpyDeviceToHost);
            CHECK_STATUS(sw_swap_attend(e[0], &p, NULL, cs), SW_OK);
            CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
            cudaMemcpy(o2, doe, qb, cudaMemcpyDeviceToHost);
            same &= memcmp(o1, o2, qb) == 0;
        }
        CHECK(same);
        /* a decode loop that never waits: GS steps of append, prepare and
         * replay back to back (more steps than prepare's ring of pinned
         * buffers), each step's output copied aside on the stream; the
         * layers' tables kept by the offloads and by prepare alone (no
         * sw_swap_attend between); every step against the fp64 reference */
        {
            enum { GS = 9 };
            void *dsteps = NULL;
            CHECK(cudaMalloc(&dsteps, qb * GS) == cudaSuccess);
            const int64_t g0 = LEN0 + 15, g1 = LONG + 6;
            for (int i = 0; i < GS; i++) {
                offload(e[0], ids[0], (int32_t)((g0 + i) / B), g0 + i + 1);
                offload(e[0], longs[0], (int32_t)((g1 + i) / B), g1 + i + 1);
                CHECK_STATUS(sw_swap_graph_prepare(g, cs), SW_OK);
                CHECK(cudaGraphLaunch(ge, cs) == cudaSuccess);
                CHECK(cudaMemcpyAsync((char *)dsteps + qb * i, dog, qb, cudaMemcpyDeviceToDevice,
                                      cs) == cudaSuccess);
            }
            CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
            static uint16_t so[GS][2 * HQ * D];
            cudaMemcpy(so, dsteps, qb * GS, cudaMemcpyDeviceToHost);
            static float fo[2 * HQ * D];
            static double ro[2 * HQ * D], rl[2 * HQ];
            double worst = 0.0;
            for (int i = 0; i < GS; i++) {
                for (size_t j = 0; j < 2 * HQ * D; j++)
                    fo[j] = sw_bf16_to_f32(so[i][j]);
                reference(0, g0 + i + 1, hq, 1, 1, ro, rl);
                reference(0, g1 + i + 1, hq + HQ * D, 1, 1, ro + HQ * D, rl + HQ);
                const double rel = rel_l2(fo, ro, 2 * HQ * D);
                worst = rel > worst ? rel : worst;
            }
            if (!(worst <= 1e-2))
                fprintf(stderr, "graph loop: worst rel_l2 %.3g\n", worst);
            CHECK(worst <= 1e-2);
            printf("CUDA graph: %d steps of append, prepare and replay without a wait, worst "
                   "rel_l2 %.2g against the fp64 reference\n", (int)GS, worst);
            cudaFree(dsteps);
        }
        /* a block not resident: prepare says so, sw_swap_attend runs it */
        const uint64_t hid = 9;
        CHECK_STATUS(sw_swap_seq_add(e[0], hid, hid, 0, 4), SW_OK);
        {
            sw_swap_block x;
            sw_swap_block_init(&x);
            x.valid_tokens = 20 - B;
            x.layout = SW_KV_NHD;
            x.k = kt[0] + (size_t)B * H * D; /* tokens 16..19 as block 1 */
            x.v = vt[0] + (size_t)B * H * D;
            x.k_bytes = x.v_bytes = sizeof(uint16_t) * (size_t)(20 - B) * H * D;
            sw_swap_block y = x;
            y.valid_tokens = B;
            y.k = kt[0];
            y.v = vt[0];
            y.k_bytes = y.v_bytes = sizeof(uint16_t) * (size_t)B * H * D;
            CHECK_STATUS(sw_swap_offload(e[0], hid, 0, 0, &y), SW_OK);
            CHECK_STATUS(sw_swap_offload(e[0], hid, 0, 1, &x), SW_OK);
        }
        sw_swap_graph *g2 = NULL;
        CHECK_STATUS(sw_swap_graph_create(e[0], 0, 1, &hid, 1, 4, &g2), SW_OK);
        CHECK_STATUS(sw_swap_graph_prepare(g2, cs), SW_STATUS_NOT_FOUND);
        CHECK(strstr(sw_last_error(), "not resident") != NULL);
        p.batch = 1;
        p.seq_ids = &hid;
        CHECK_STATUS(sw_swap_attend(e[0], &p, NULL, cs), SW_OK);
        CHECK_STATUS(sw_swap_graph_prepare(g2, cs), SW_OK);
        CHECK_STATUS(sw_swap_graph_attend(g2, dq, dog, (float *)dlg, 1, 0.0f, cs), SW_OK);
        /* the blocks are resident now: the engine's own call takes the
         * resident path, the same kernel and plan */
        const uint64_t ra = resident_attends(e[0]);
        CHECK_STATUS(sw_swap_attend(e[0], &p, NULL, cs), SW_OK);
        CHECK(resident_attends(e[0]) == ra + 1);
        CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
        cudaMemcpy(o1, dog, qb / 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(o2, doe, qb / 2, cudaMemcpyDeviceToHost);
        CHECK(memcmp(o1, o2, qb / 2) == 0);
        /* bad arguments */
        sw_swap_graph *bad = NULL;
        const uint64_t twice[2] = {ids[0], ids[0]};
        CHECK_STATUS(sw_swap_graph_create(e[0], 0, 2, twice, 1, 8, &bad), SW_STATUS_INVALID);
        CHECK_STATUS(sw_swap_graph_create(e[0], 0, 1, gid, 5, 8, &bad), SW_STATUS_UNSUPPORTED);
        CHECK_STATUS(sw_swap_graph_create(e[0], 0, 1, gid, 1, 2, &bad), SW_OK);
        CHECK_STATUS(sw_swap_graph_prepare(bad, cs), SW_STATUS_WORKSPACE_TOO_SMALL);
        sw_swap_graph_destroy(bad);
        printf("CUDA graph: %d replays after their prepares equal to sw_swap_attend bit for bit; "
               "a block not resident refused by prepare, run by attend, then by the graph\n",
               steps);
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(graph);
        sw_swap_graph_destroy(g);
        sw_swap_graph_destroy(g2);
        cudaFree(dq);
        cudaFree(dog);
        cudaFree(doe);
        cudaFree(dlg);
        cudaFree(dle);
        cudaStreamDestroy(cs);
    }
    test_settled(st, &r);
    /* host memory for q with a device pool: refused, nothing run */
    {
        static uint16_t q[HQ * D];
        static uint16_t o[HQ * D];
        const int32_t ind[2] = {0, 1};
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.layer = 0;
        p.batch = 1;
        p.seq_ids = &ids[0];
        p.q_indptr = ind;
        p.q = q;
        p.o = o;
        const uint64_t before = resident_attends(e[0]);
        CHECK_STATUS(sw_swap_attend(e[0], &p, NULL, NULL), SW_STATUS_INVALID);
        CHECK(strstr(sw_last_error(), "must be device memory") != NULL);
        CHECK(resident_attends(e[0]) == before);
    }
    sw_swap_stats s0;
    memset(&s0, 0, sizeof s0);
    s0.struct_size = sizeof s0;
    sw_swap_get_stats(e[0], &s0);
    printf("resident path: %llu of %llu calls, %llu blocks written through, %llu misses; "
           "worst rel_l2 %.3g, LSE %.3g against fp64\n",
           (unsigned long long)s0.resident_attends, (unsigned long long)s0.attends,
           (unsigned long long)s0.offload_resident, (unsigned long long)s0.misses, worst_rel,
           worst_lse);
    /* every block written through: the tile loop read nothing but the two
     * blocks the graph section offloaded from host memory */
    CHECK(s0.misses == 2);
    for (int k = 0; k < NE; k++)
        sw_swap_destroy(e[k]);
    CHECK_STATUS(sw_store_close(st), SW_OK);
    ts_rm_rf(d.base);
    for (int l = 0; l < L; l++) {
        cudaFree(dk[l]);
        cudaFree(dv[l]);
    }
    printf("test_swap_resident: %s\n", sw_test_failures ? "FAILED" : "ok");
    return sw_test_failures ? 1 : 0;
}

#else
int main(void)
{
    printf("test_swap_resident: built without CUDA, skipped\n");
    return SW_TEST_SKIP;
}
#endif
