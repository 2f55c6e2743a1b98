/* Offload of blocks in every form the engine takes (sw_swap_offload and
 * sw_swap_offload_batch): token-major (NHD) blocks straight out of a
 * prefill's K/V, padded pages with strides in both layouts, a batch of a
 * whole layer, a caller built against the first sw_swap_block. An engine
 * fed each way attends to the same bytes of O and LSE, with the same
 * predictor scores, as one fed dense blocks (tsw_offload_block), and both
 * match the fp64 reference. Then the failure paths: every item of a batch
 * is checked before anything is written (an invalid last item leaves the
 * sequence untouched), a batch that fails on a block index mid-way keeps
 * the items before it and says how many; short buffers, overlapping
 * strides, bad layouts, on_device blocks in host memory. With a GPU: the
 * same blocks from device memory (a padded NHD page pool and an HND one,
 * one batch on a stream) give the same bytes again, into a host pool and
 * into a device pool. */
#include "sw_test.h"
#include "test_swap_util.h"
#include "core/sw_cuda.h"
#include "swap/swap_cuda.h"

#include <stddef.h>

/* LEN tokens: NB blocks, the last of 7 tokens */
enum { L = 2, H = 2, HQ = 4, D = 64, B = 16, QL = 3, PAD = 8, LEN = 16 * 5 + 7, NB = 6 };

static sw_swap *engine(sw_store *st, sw_swap_pool_kind pool)
{
    return tsw_small_engine(st, L, H, HQ, D, B, pool, 0);
}

/* The raw K/V of layer l, BF16 token-major [LEN][H][D] (as a prefill makes
 * them), and the same values as floats for tsw_offload_block. */
static uint16_t kt[L][LEN * H * D], vt[L][LEN * H * D];
static float kf[L][LEN * H * D], vf[L][LEN * H * D];

static void make_kv(void)
{
    sw_rng r = {11};
    for (int l = 0; l < L; l++)
        for (int64_t e = 0; e < LEN * H * D; e++) {
            kt[l][e] = sw_f32_to_bf16((float)sw_rng_normal(&r));
            vt[l][e] = sw_f32_to_bf16((float)sw_rng_normal(&r));
            kf[l][e] = sw_bf16_to_f32(kt[l][e]);
            vf[l][e] = sw_bf16_to_f32(vt[l][e]);
        }
}

static int32_t valid_of(int32_t b)
{
    return (int32_t)(LEN - (int64_t)b * B < B ? LEN - (int64_t)b * B : B);
}

/* A page pool holding the layer's blocks with padded rows: NHD pages
 * [NB][B][H][D + PAD] or HND pages [NB][H][B + 1][D + PAD] (a spare token
 * row per head), every padding element NaN (never read). */
static size_t pool_elems(sw_kv_layout lay)
{
    return lay == SW_KV_NHD ? (size_t)NB * B * H * (D + PAD)
                            : (size_t)NB * H * (B + 1) * (D + PAD);
}

static void fill_pool(uint16_t *pool, sw_kv_layout lay, const uint16_t *src)
{
    const size_t n = pool_elems(lay);
    for (size_t i = 0; i < n; i++)
        pool[i] = 0x7fc0;
    for (int64_t t = 0; t < LEN; t++)
        for (int32_t h = 0; h < H; h++) {
            const int64_t b = t / B, r = t % B;
            const size_t at = lay == SW_KV_NHD
                                  ? (((size_t)b * B + (size_t)r) * H + (size_t)h) * (D + PAD)
                                  : (((size_t)b * H + (size_t)h) * (B + 1) + (size_t)r) * (D + PAD);
            memcpy(pool + at, src + ((size_t)t * H + (size_t)h) * D, sizeof(uint16_t) * D);
        }
}

/* The block descriptor of page b of such a pool (k and v: the pools' bases). */
static sw_swap_block page_block(const uint16_t *kp, const uint16_t *vp, sw_kv_layout lay,
                                int32_t b, int on_device)
{
    sw_swap_block x;
    sw_swap_block_init(&x);
    x.valid_tokens = valid_of(b);
    x.layout = lay;
    const size_t page = lay == SW_KV_NHD ? (size_t)B * H * (D + PAD) : (size_t)H * (B + 1) * (D + PAD);
    x.k = kp + (size_t)b * page;
    x.v = vp + (size_t)b * page;
    x.k_bytes = x.v_bytes = sizeof(uint16_t) * (pool_elems(lay) - (size_t)b * page);
    x.token_stride = lay == SW_KV_NHD ? (int64_t)H * (D + PAD) : D + PAD;
    x.head_stride = lay == SW_KV_NHD ? D + PAD : (int64_t)(B + 1) * (D + PAD);
    x.on_device = on_device;
    return x;
}

/* Block b of layer l straight out of the token-major K/V: NHD, dense
 * strides (0), k_bytes what is left of the arrays. */
static sw_swap_block nhd_block(int32_t l, int32_t b)
{
    sw_swap_block x;
    sw_swap_block_init(&x);
    x.valid_tokens = valid_of(b);
    x.layout = SW_KV_NHD;
    const size_t off = (size_t)b * B * H * D;
    x.k = kt[l] + off;
    x.v = vt[l] + off;
    x.k_bytes = x.v_bytes = sizeof(uint16_t) * ((size_t)LEN * H * D - off);
    return x;
}

static void make_queries(uint16_t *q)
{
    sw_rng r = {5};
    for (size_t e = 0; e < (size_t)L * QL * HQ * D; e++)
        q[e] = sw_f32_to_bf16((float)(2.0 * sw_rng_normal(&r)));
}

/* O, LSE and the predictor scores of sequence `id` in both layers, host
 * queries (a device pool: copied to the device and back). */
static size_t attend_both(sw_swap *s, uint64_t id, const uint16_t *q, uint8_t *out, int dev)
{
    const size_t ob = sizeof(uint16_t) * QL * HQ * D, lb = sizeof(float) * QL * HQ;
    size_t at = 0;
    for (int32_t l = 0; l < L; l++) {
        const int32_t qind[2] = {0, QL};
        sw_swap_attend_params p;
        sw_swap_attend_params_init(&p);
        p.layer = l;
        p.batch = 1;
        p.seq_ids = &id;
        p.q_indptr = qind;
        const uint16_t *ql = q + (size_t)l * QL * HQ * D;
#ifdef SW_HAVE_CUDA
        void *dq = NULL, *dout = NULL;
        if (dev) {
            CHECK(sw_cuda_swap_alloc(&dq, ob) == SW_OK && sw_cuda_swap_alloc(&dout, ob + lb) == SW_OK);
            CHECK_STATUS(sw_cuda_swap_copy(dq, ql, ob, NULL), SW_OK);
            p.q = dq;
            p.o = dout;
            p.lse = (float *)((uint8_t *)dout + ob);
        }
#endif
        if (!dev) {
            p.q = ql;
            p.o = out + at;
            p.lse = (float *)(out + at + ob);
        }
        CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_OK);
#ifdef SW_HAVE_CUDA
        if (dev) {
            CHECK_STATUS(sw_cuda_swap_copy(out + at, dout, ob + lb, NULL), SW_OK);
            CHECK_STATUS(sw_cuda_stream_sync(NULL), SW_OK);
            sw_cuda_swap_free(dq);
            sw_cuda_swap_free(dout);
        }
#endif
        at += ob + lb;
        if (!dev) { /* the device pool's scores are BF16-rounded: compared apart */
            int32_t nb = 0;
            CHECK_STATUS(sw_swap_score_blocks(s, id, l, ql, QL, (float *)(out + at), 64, &nb),
                         SW_OK);
            CHECK(nb == NB);
            at += sizeof(float) * (size_t)nb;
        }
    }
    return at;
}

static int64_t length(sw_swap *s, uint64_t id, int32_t l)
{
    int64_t t = -1;
    CHECK_STATUS(sw_swap_seq_length(s, id, l, &t, NULL), SW_OK);
    return t;
}

/* The failure paths, on sequence 9 of s (registered, empty). */
static void failures(sw_swap *s)
{
    CHECK_STATUS(sw_swap_seq_add(s, 9, 9, 0, 64), SW_OK);
    sw_swap_block x = nhd_block(0, 0), y = nhd_block(0, 1), bad;
    const uint64_t ids[3] = {9, 9, 9};
    const int32_t layers[3] = {0, 0, 0}, blocks[3] = {0, 1, 2};
    const sw_swap_block *kv[3] = {&x, &y, &bad};
    int32_t done = -1;

    /* an invalid last item: nothing written */
    bad = nhd_block(0, 2);
    bad.layout = (sw_kv_layout)7;
    CHECK_STATUS(sw_swap_offload_batch(s, 3, ids, layers, blocks, kv, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK(done == 0 && strstr(sw_last_error(), "item 2: block layout 7") != NULL);
    CHECK(length(s, 9, 0) == 0);
    /* short buffers, overlapping strides, negative strides */
    bad = nhd_block(0, 2);
    bad.k_bytes = sizeof(uint16_t) * ((size_t)(B - 1) * H * D + (size_t)(H - 1) * D + D) - 2;
    CHECK_STATUS(sw_swap_offload_batch(s, 3, ids, layers, blocks, kv, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK(done == 0 && strstr(sw_last_error(), "item 2: block buffers hold k") != NULL);
    bad.k_bytes += 2; /* exactly the span: accepted below */
    bad.token_stride = D - 1;
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "token_stride 63 is below head_dim") != NULL);
    bad.token_stride = 0;
    bad.head_stride = 8;
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "kv heads would overlap") != NULL);
    /* each stride a row apart, but head 1's row 0 is head 0's row 1 (and
     * in HND token 1's row 0 head 1's): refused as overlapping */
    for (int hnd = 0; hnd < 2; hnd++) {
        bad.layout = hnd ? SW_KV_HND : SW_KV_NHD;
        bad.token_stride = D;
        bad.head_stride = D;
        CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
        CHECK(strstr(sw_last_error(), "token_stride 64 and head_stride 64 make rows overlap") !=
              NULL);
        bad.head_stride = (int64_t)(valid_of(2) - 1) * D; /* one row short of clearing them */
        CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
    }
    bad.layout = SW_KV_NHD;
    bad.token_stride = 0;
    bad.head_stride = -1;
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
    /* strides whose span wraps size_t (it passed the size check and the
     * copy read wild memory): refused with the span they address */
    bad.head_stride = 0;
    bad.token_stride = 1229782938247303442LL; /* x (valid - 1) wraps to a few bytes */
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "addresses") != NULL);
    bad.token_stride = 0;
    bad.head_stride = INT64_MAX;
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "addresses") != NULL);
    bad.head_stride = 0;
    bad.struct_size = 12;
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "struct_size 12") != NULL);
    bad.struct_size = sizeof bad;
    bad.on_device = 2;
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad), SW_STATUS_INVALID);
    /* host memory said to be on the device */
    bad.on_device = 1;
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &bad),
                 sw_cuda_built() ? SW_STATUS_INVALID : SW_STATUS_UNSUPPORTED);
    CHECK(strstr(sw_last_error(), sw_cuda_built() ? "is not device memory" : "CUDA build"));
    CHECK(length(s, 9, 0) == 0);
    /* the first sw_swap_block: exactly the block (a larger buffer is
     * refused there, and fine with the whole struct) */
    sw_swap_block d;
    sw_swap_block_init(&d);
    static uint16_t big[2 * H * B * D];
    d.valid_tokens = B;
    d.k = d.v = big;
    d.k_bytes = d.v_bytes = sizeof big;
    d.struct_size = (uint32_t)offsetof(sw_swap_block, layout);
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &d), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "needs 4096 each") != NULL);
    d.struct_size = sizeof d;
    CHECK_STATUS(sw_swap_offload(s, 9, 0, 0, &d), SW_OK);
    CHECK(length(s, 9, 0) == B);
    CHECK_STATUS(sw_swap_seq_remove(s, 9, 1), SW_OK);
    CHECK_STATUS(sw_swap_seq_add(s, 9, 9, 0, 64), SW_OK);
    /* arrays */
    CHECK_STATUS(sw_swap_offload_batch(s, -1, ids, layers, blocks, kv, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_offload_batch(s, 2, ids, NULL, blocks, kv, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK_STATUS(sw_swap_offload_batch(s, 0, NULL, NULL, NULL, NULL, NULL, &done), SW_OK);
    CHECK(done == 0);
    /* a block index that fails mid-way: the items before it stay */
    bad = nhd_block(0, 2);
    const int32_t gap[3] = {0, 1, 3};
    CHECK_STATUS(sw_swap_offload_batch(s, 3, ids, layers, gap, kv, NULL, &done),
                 SW_STATUS_INVALID);
    CHECK(done == 2 && strstr(sw_last_error(), "item 2: block 3") != NULL);
    CHECK(length(s, 9, 0) == 2 * B);
    CHECK_STATUS(sw_swap_seq_remove(s, 9, 1), SW_OK);
}

/* O and LSE of sequence `id`'s layer 0 for the first QL queries of q. */
static size_t attend_layer0(sw_swap *s, uint64_t id, const uint16_t *q, uint8_t *out)
{
    const size_t ob = sizeof(uint16_t) * QL * HQ * D;
    const int32_t qind[2] = {0, QL};
    sw_swap_attend_params p;
    sw_swap_attend_params_init(&p);
    p.layer = 0;
    p.batch = 1;
    p.seq_ids = &id;
    p.q_indptr = qind;
    p.q = q;
    p.o = out;
    p.lse = (float *)(out + ob);
    CHECK_STATUS(sw_swap_attend(s, &p, NULL, NULL), SW_OK);
    return ob + sizeof(float) * QL * HQ;
}

/* A store that refuses writes when full, filling up in the middle of a
 * batch: the items before the failing one are offloaded exactly as if the
 * batch had held only them (same attention, bit for bit, as an engine given
 * just those blocks); the failing item and every one after it -- here also
 * a block of the other layer -- are absent; the detail names the item. */
static void store_full_mid_batch(const char *dir, sw_store *big, const uint16_t *q)
{
    sw_store_config c = ts_config(dir, 4096, 16, 1);
    c.full_policy = SW_STORE_FULL_REFUSE;
    sw_store *small = NULL;
    CHECK_STATUS(sw_store_open(&c, &small), SW_OK);
    if (!small)
        return;
    sw_swap *s = engine(small, SW_SWAP_POOL_HOST);
    CHECK_STATUS(sw_swap_seq_add(s, 7, 7, 0, 64), SW_OK);
    sw_swap_block items[NB + 1];
    const sw_swap_block *kv[NB + 1];
    uint64_t ids[NB + 1];
    int32_t layers[NB + 1], blocks[NB + 1];
    for (int32_t i = 0; i <= NB; i++) {
        items[i] = nhd_block(i < NB ? 0 : 1, i < NB ? i : 0);
        kv[i] = &items[i];
        ids[i] = 7;
        layers[i] = i < NB ? 0 : 1;
        blocks[i] = i < NB ? i : 0;
    }
    int32_t done = -1;
    CHECK_STATUS(sw_swap_offload_batch(s, NB + 1, ids, layers, blocks, kv, NULL, &done),
                 SW_STATUS_FULL);
    char want_item[32];
    snprintf(want_item, sizeof want_item, "item %d: ", done);
    CHECK(done > 0 && done < NB && strstr(sw_last_error(), want_item) != NULL);
    CHECK(length(s, 7, 0) == (int64_t)done * B && length(s, 7, 1) == 0);
    /* the same blocks, alone, on a store with room */
    sw_swap *r = engine(big, SW_SWAP_POOL_HOST);
    CHECK_STATUS(sw_swap_seq_add(r, 8, 8, 0, 64), SW_OK);
    uint64_t rids[NB + 1];
    for (int32_t i = 0; i <= NB; i++)
        rids[i] = 8;
    int32_t rdone = -1;
    CHECK_STATUS(sw_swap_offload_batch(r, done, rids, layers, blocks, kv, NULL, &rdone), SW_OK);
    static uint8_t a[1 << 14], b[1 << 14];
    const size_t n = attend_layer0(s, 7, q, a);
    CHECK(attend_layer0(r, 8, q, b) == n && memcmp(a, b, n) == 0);
    printf("store full in the middle of a batch: %d of %d items offloaded, the rest absent; "
           "attention equal to the %d blocks alone\n", done, NB + 1, done);
    sw_swap_destroy(r);
    sw_swap_destroy(s);
    CHECK_STATUS(sw_store_close(small), SW_OK);
}

int main(void)
{
    ts_dir d;
    ts_dir_make(&d, "offload");
    sw_store *st = tsw_store_open(d.store, 4096, 4096, 0);
    CHECK(st != NULL);
    if (!st)
        return 1;
    make_kv();
    static uint16_t q[L * QL * HQ * D];
    make_queries(q);

    /* the reference engine: dense blocks, one call each */
    sw_swap *a = engine(st, SW_SWAP_POOL_HOST);
    tsw_seq ref;
    tsw_seq_init(&ref, 1, L, H, D, B);
    CHECK_STATUS(sw_swap_seq_add(a, 1, 1, 0, 64), SW_OK);
    for (int32_t l = 0; l < L; l++)
        for (int32_t b = 0; b < NB; b++)
            CHECK_STATUS(tsw_offload_block(a, &ref, l, b, kf[l], vf[l], LEN, SW_SWAP_KV_BF16),
                         SW_OK);
    static uint8_t want[1 << 16], got[1 << 16];
    memset(want, 0xff, sizeof want); /* NaN: every O and LSE must be written */
    memset(got, 0xff, sizeof got);
    const size_t n = attend_both(a, 1, q, want, 0);
    double worst = 0, worst_lse = 0;
    {
        static double o[QL * HQ * D];
        double lse[QL * HQ];
        const size_t ob = sizeof(uint16_t) * QL * HQ * D, lb = sizeof(float) * QL * HQ;
        for (int32_t l = 0; l < L; l++) {
            tsw_reference(&ref, l, HQ, q + (size_t)l * QL * HQ * D, QL, 1, 1.0 / sqrt((double)D),
                          o, lse);
            const uint8_t *at = want + (size_t)l * (ob + lb + sizeof(float) * NB);
            const uint16_t *x = (const uint16_t *)at;
            double e2 = 0, r2 = 0;
            for (int j = 0; j < QL * HQ * D; j++) {
                const double y = sw_bf16_to_f32(x[j]);
                e2 += (y - o[j]) * (y - o[j]);
                r2 += o[j] * o[j];
            }
            worst = fmax(worst, sqrt(e2 / r2));
            /* (fmax would drop a NaN: an unwritten LSE counts as infinite) */
            const float *xl = (const float *)(at + ob);
            for (int j = 0; j < QL * HQ; j++)
                worst_lse = fmax(worst_lse, isfinite(xl[j]) ? fabs(xl[j] - lse[j]) : INFINITY);
        }
    }
    CHECK(worst < 1e-2 && worst_lse < 1e-2);

    /* layer 0 block by block from the token-major K/V (NHD, dense), layer 1
     * in one batch out of padded page pools: NHD pages, HND pages (odd
     * blocks), and one block from a caller of the first sw_swap_block */
    sw_swap *b = engine(st, SW_SWAP_POOL_HOST);
    CHECK_STATUS(sw_swap_seq_add(b, 2, 2, 0, 64), SW_OK);
    for (int32_t i = 0; i < NB; i++) {
        sw_swap_block x = nhd_block(0, i);
        CHECK_STATUS(sw_swap_offload(b, 2, 0, i, &x), SW_OK);
    }
    static uint16_t kn[NB * B * H * (D + PAD)], vn[NB * B * H * (D + PAD)];
    static uint16_t kh[NB * H * (B + 1) * (D + PAD)], vh[NB * H * (B + 1) * (D + PAD)];
    fill_pool(kn, SW_KV_NHD, kt[1]);
    fill_pool(vn, SW_KV_NHD, vt[1]);
    fill_pool(kh, SW_KV_HND, kt[1]);
    fill_pool(vh, SW_KV_HND, vt[1]);
    sw_swap_block items[NB];
    const sw_swap_block *kv[NB];
    uint64_t ids[NB];
    int32_t layers[NB], blocks[NB];
    static uint16_t v1k[H * B * D], v1v[H * B * D];
    for (int32_t i = 0; i < NB; i++) {
        items[i] = i % 2 ? page_block(kh, vh, SW_KV_HND, i, 0) : page_block(kn, vn, SW_KV_NHD, i, 0);
        if (i == 2) { /* first-version struct: dense HND, the rest of the struct unread */
            for (int32_t h = 0; h < H; h++)
                for (int32_t t = 0; t < B; t++) {
                    const size_t src = (((size_t)i * B + (size_t)t) * H + (size_t)h) * D;
                    memcpy(v1k + ((size_t)h * B + (size_t)t) * D, kt[1] + src, 2 * D);
                    memcpy(v1v + ((size_t)h * B + (size_t)t) * D, vt[1] + src, 2 * D);
                }
            items[i].struct_size = (uint32_t)offsetof(sw_swap_block, layout);
            items[i].k = v1k;
            items[i].v = v1v;
            items[i].k_bytes = items[i].v_bytes = sizeof v1k;
            items[i].layout = (sw_kv_layout)99; /* past struct_size: ignored */
        }
        kv[i] = &items[i];
        ids[i] = 2;
        layers[i] = 1;
        blocks[i] = i;
    }
    int32_t done = -1;
    CHECK_STATUS(sw_swap_offload_batch(b, NB, ids, layers, blocks, kv, NULL, &done), SW_OK);
    CHECK(done == NB);
    CHECK(length(b, 2, 0) == LEN && length(b, 2, 1) == LEN);
    CHECK(attend_both(b, 2, q, got, 0) == n);
    CHECK(memcmp(want, got, n) == 0);
    failures(b);
    sw_swap_destroy(b);
    {
        char full_dir[300];
        snprintf(full_dir, sizeof full_dir, "%s/full", d.base);
        store_full_mid_batch(full_dir, st, q);
    }

#ifdef SW_HAVE_CUDA
    if (sw_cuda_device_count() > 0) {
        /* both layers from device page pools in one batch on a stream */
        void *dk[2] = {0}, *dv[2] = {0}, *stream = NULL;
        CHECK_STATUS(sw_cuda_swap_alloc(&dk[0], sizeof kn), SW_OK);
        CHECK_STATUS(sw_cuda_swap_alloc(&dv[0], sizeof vn), SW_OK);
        CHECK_STATUS(sw_cuda_swap_alloc(&dk[1], sizeof kh), SW_OK);
        CHECK_STATUS(sw_cuda_swap_alloc(&dv[1], sizeof vh), SW_OK);
        CHECK_STATUS(sw_cuda_swap_stream_create(&stream), SW_OK);
        static uint16_t kn0[sizeof kn / 2], vn0[sizeof vn / 2];
        fill_pool(kn0, SW_KV_NHD, kt[0]);
        fill_pool(vn0, SW_KV_NHD, vt[0]);
        CHECK_STATUS(sw_cuda_swap_copy(dk[0], kn0, sizeof kn, stream), SW_OK);
        CHECK_STATUS(sw_cuda_swap_copy(dv[0], vn0, sizeof vn, stream), SW_OK);
        CHECK_STATUS(sw_cuda_swap_copy(dk[1], kh, sizeof kh, stream), SW_OK);
        CHECK_STATUS(sw_cuda_swap_copy(dv[1], vh, sizeof vh, stream), SW_OK);
        sw_swap_block di[2 * NB];
        const sw_swap_block *dkv[2 * NB];
        uint64_t dids[2 * NB];
        int32_t dl[2 * NB], db[2 * NB];
        for (int pool = 0; pool < 2; pool++) {
            sw_swap *c = engine(st, pool ? SW_SWAP_POOL_DEVICE : SW_SWAP_POOL_HOST);
            const uint64_t id = 3 + (uint64_t)pool;
            CHECK_STATUS(sw_swap_seq_add(c, id, id, 0, 64), SW_OK);
            for (int32_t l = 0; l < L; l++)
                for (int32_t i = 0; i < NB; i++) {
                    const int32_t k = l * NB + i;
                    di[k] = l ? page_block(dk[1], dv[1], SW_KV_HND, i, 1)
                              : page_block(dk[0], dv[0], SW_KV_NHD, i, 1);
                    dkv[k] = &di[k];
                    dids[k] = id;
                    dl[k] = l;
                    db[k] = i;
                }
            /* a host buffer said to be on the device: refused before anything */
            di[3].k = kn;
            CHECK_STATUS(sw_swap_offload_batch(c, 2 * NB, dids, dl, db, dkv, stream, &done),
                         SW_STATUS_INVALID);
            CHECK(done == 0 && length(c, id, 0) == 0);
            di[3] = page_block(dk[0], dv[0], SW_KV_NHD, 3, 1);
            CHECK_STATUS(sw_swap_offload_batch(c, 2 * NB, dids, dl, db, dkv, stream, &done),
                         SW_OK);
            CHECK(done == 2 * NB);
            if (!pool) {
                CHECK(attend_both(c, id, q, got, 0) == n);
                CHECK(memcmp(want, got, n) == 0);
                printf("device blocks into a host pool: the same %zu bytes\n", n);
            } else {
                /* the device pool: against the host pool's outputs */
                const size_t m = attend_both(c, id, q, got, 1);
                const size_t ob = sizeof(uint16_t) * QL * HQ * D, lb = sizeof(float) * QL * HQ;
                CHECK(m == L * (ob + lb));
                double e2 = 0, r2 = 0;
                for (int32_t l = 0; l < L; l++) {
                    const uint16_t *w =
                        (const uint16_t *)(want + (size_t)l * (ob + lb + sizeof(float) * NB));
                    const uint16_t *g = (const uint16_t *)(got + (size_t)l * (ob + lb));
                    for (size_t j = 0; j < ob / 2; j++) {
                        const double x = sw_bf16_to_f32(w[j]), y = sw_bf16_to_f32(g[j]);
                        e2 += (x - y) * (x - y);
                        r2 += x * x;
                    }
                }
                CHECK(sqrt(e2 / r2) < 1e-2);
                printf("device blocks into a device pool: rel_l2 %.2g against the host pool\n",
                       sqrt(e2 / r2));
            }
            sw_swap_destroy(c);
        }
        for (int i = 0; i < 2; i++) {
            sw_cuda_swap_free(dk[i]);
            sw_cuda_swap_free(dv[i]);
        }
        sw_cuda_swap_stream_destroy(stream);
    } else {
        printf("device blocks: no usable GPU, not run\n");
    }
#endif
    sw_swap_destroy(a);
    tsw_seq_free(&ref);
    CHECK_STATUS(sw_store_close(st), SW_OK);
    ts_rm_rf(d.base);
    printf("test_swap_offload: %s (rel_l2 %.2g against fp64)\n", sw_test_failures ? "FAILED" : "ok",
           worst);
    return sw_test_failures ? 1 : 0;
}
