/* Paged K/V on the CPU backends against the fp64 reference over the same
 * keys laid out contiguously: page sizes 1, 16, 64 and 256, both layouts
 * (with padded strides sometimes), shuffled pages in a pool whose unused
 * pages hold 1e4 (a read of a wrong page shows), both table conventions,
 * empty and one-token requests, decode (q_len 1 and 3), causal
 * continuation of a cached prefix, LSE; the append; every refusal of a bad
 * table or stride, with the entry named in the detail. */
#include "attn/attn_internal.h"
#include "core/sw_core.h"
#include "core/sw_half.h"
#include "sw_test.h"
#include "test_paged_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void tensors_of(sw_prefill_tensors *t, const sw_case *c, const pool *p)
{
    sw_prefill_tensors_init(t);
    t->q = c->q;
    t->o = c->o;
    t->lse = c->lse;
    t->k = p->k;
    t->v = p->v;
    t->q_rows = c->total_q;
    t->q_row_stride = c->q_stride;
    t->o_row_stride = c->o_stride;
    t->k_row_stride = t->v_row_stride = p->tok;
    t->k_head_stride = t->v_head_stride = p->head;
    t->k_page_stride = t->v_page_stride = p->page;
}

static int run_on_pool(sw_case *cp, sw_rng *r, int32_t ps, sw_kv_layout layout, int fa,
                       int padded, sw_backend backend, int row_sample);

static int run_case(int index, sw_backend backend)
{
    sw_case c;
    sw_case_make(&c, 20261202, index,
                 index % 3 == 2 ? SW_DTYPE_F16 : index % 6 == 0 ? SW_DTYPE_F32 : SW_DTYPE_BF16,
                 200);
    sw_rng r = {9000 + (uint64_t)index};
    const int mode = index % 4; /* 0, 1 prefill; 2 decode q_len 1; 3 q_len <= 3 */
    if (mode >= 2)
        shorten_queries(&c, mode == 2 ? 1 : 3);
    const int32_t ps = page_sizes[(index / 4) % 4];
    const sw_kv_layout layout = (index / 2) % 2 ? SW_KV_HND : SW_KV_NHD;
    const int fa = (index / 3) % 2, padded = (index / 5) % 2;
    return run_on_pool(&c, &r, ps, layout, fa, padded, backend, 1);
}

/* Case c (freed here) over a pool of its keys (page size ps, shuffled
 * pages) on `backend`, checked against the fp64 reference (every
 * row_sample-th row and head, the first and last of each request): 0 when
 * right. */
static int run_on_pool(sw_case *cp, sw_rng *r, int32_t ps, sw_kv_layout layout, int fa,
                       int padded, sw_backend backend, int row_sample)
{
    sw_case c = *cp;
    pool p;
    pool_make(&p, &c, r, ps, layout, fa, padded, 1);
    sw_case_poison(&c);
    c.params.backend = backend;
    sw_prefill_plan *pl = NULL;
    sw_prefill_tensors t;
    tensors_of(&t, &c, &p);
    sw_status s = sw_prefill_plan_create_paged(&c.params, c.batch, c.qo_indptr, &p.kv, &pl);
    if (s == SW_OK) {
        CHECK(sw_prefill_plan_total_kv(pl) == c.total_kv);
        s = sw_prefill_run(pl, &t, NULL);
    }
    sw_prefill_plan_destroy(pl);
    int bad = 0;
    if (s != SW_OK) {
        fprintf(stderr, "FAIL %s page %d %s %s: %s %s\n", c.name, ps,
                layout == SW_KV_NHD ? "NHD" : "HND", fa ? "block_table" : "indptr",
                sw_status_str(s), sw_last_error());
        bad = 1;
    } else {
        const sw_check ck = sw_case_check(&c, row_sample);
        /* the CPU path's bound for the dtype (bf16: 1.2e-2 as before); the fp64
         * reference path rounds only its output, so 4e-3 at most */
        double tol = c.params.dtype == SW_DTYPE_BF16 ? 1.2e-2 : sw_cpu_tol(c.params.dtype);
        if (backend == SW_BACKEND_CPU_REF && tol > 4e-3)
            tol = 4e-3;
        bad = ck.rel_l2 > tol || ck.unwritten || ck.lse_bad || ck.lse_max_abs > 1e-2;
        if (bad || getenv("SW_TEST_VERBOSE"))
            fprintf(stderr, "%s %s page %d %s %s%s [%s]: rel_l2=%.3g unwritten=%lld "
                    "lse_bad=%lld lse_err=%.3g\n", bad ? "FAIL" : "ok", c.name, ps,
                    layout == SW_KV_NHD ? "NHD" : "HND", fa ? "block_table" : "indptr",
                    padded ? " padded" : "", sw_backend_name(backend), ck.rel_l2,
                    (long long)ck.unwritten, (long long)ck.lse_bad, ck.lse_max_abs);
    }
    pool_free(&p);
    sw_case_free(&c);
    return bad;
}

/* The serving benches' head shapes (32/8 and 16/16 heads, d128) over
 * pages of 16, NHD, whole queries, one request continuing a cached prefix
 * (sw_case_make draws at most 2 kv heads). */
static int shape_case(int k)
{
    static const int32_t q_lens[3] = {300, 100, 17}, kv_lens[3] = {300, 260, 17};
    sw_case c;
    sw_case_make_shape(&c, 20261208 + (uint64_t)k, SW_DTYPE_BF16, 128, k ? 16 : 8, k ? 1 : 4, 1,
                       3, q_lens, kv_lens);
    sw_rng r = {9500 + (uint64_t)k};
    return run_on_pool(&c, &r, 16, SW_KV_NHD, k, 0, SW_BACKEND_CPU, 3);
}

/* Strides of a pool of hkv x d rows in pages of ps tokens: NHD with token
 * rows padded by `padded` elements and pages by `page_pad`, or HND. */
static sw_paged_strides bulk_strides(int32_t hkv, int32_t d, int32_t ps, int hnd, int32_t padded,
                                     int32_t page_pad)
{
    sw_paged_strides st;
    if (hnd) {
        st.head = (int64_t)ps * d;
        st.token = d;
        st.page = st.head * hkv;
    } else {
        st.head = d;
        st.token = (int64_t)hkv * d + padded;
        st.page = st.token * ps + page_pad;
    }
    return st;
}

/* The Hopper kernel's gatherers copy by bulk copies only where every
 * piece (4 keys of a kv head row) is one contiguous run in one page, at
 * most 8 KiB, 16-byte aligned, with the plain kernel's tiles -- K and V
 * each (their strides and pointers are separate). */
static void test_bulk_choice(void)
{
    static _Alignas(64) char pool_mem[256];
    sw_attn_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.dtype = SW_DTYPE_BF16;
    sw_paged_table pt;
    memset(&pt, 0, sizeof pt);
    /* v: where V differs from K (0: the same layout; 1: padded token rows;
     * 2: a page stride 8 bytes past 16-byte alignment; 3: HND; 4: its
     * pointer misaligned) */
    struct {
        int32_t hkv, d, ps, padded, hnd, page_pad, wide, misaligned, v, want;
    } cases[] = {
        {8, 128, 16, 0, 0, 0, 0, 0, 0, 1},  /* 4 x 8 x 128 x 2 = 8 KiB: the limit */
        {16, 128, 16, 0, 0, 0, 0, 0, 0, 0}, /* 16 KiB */
        {2, 256, 64, 0, 0, 0, 0, 0, 0, 1},
        {1, 64, 48, 0, 0, 0, 0, 0, 0, 1},   /* a page size that is no power of two */
        {8, 128, 1, 0, 0, 0, 0, 0, 0, 0},   /* pieces straddle pages */
        {8, 128, 18, 0, 0, 0, 0, 0, 0, 0},  /* not a multiple of 4 */
        {8, 128, 16, 8, 0, 0, 0, 0, 0, 0},  /* padded token rows */
        {8, 128, 16, 0, 1, 0, 0, 0, 0, 0},  /* HND: a piece is one run per head */
        {4, 128, 16, 0, 0, 4, 0, 0, 0, 0},  /* a page stride of 8 bytes past 16-byte alignment */
        {8, 128, 16, 0, 0, 0, 1, 0, 0, 0},  /* the wide kernel's tiles */
        {8, 128, 16, 0, 0, 0, 0, 1, 0, 0},  /* the pool itself misaligned */
        {8, 128, 16, 0, 0, 0, 0, 0, 1, 0},  /* K contiguous, V's token rows padded */
        {4, 128, 16, 0, 0, 0, 0, 0, 2, 0},  /* ... V's page stride misaligned */
        {2, 256, 64, 0, 0, 0, 0, 0, 3, 0},  /* ... V in HND */
        {2, 256, 64, 0, 0, 0, 0, 0, 4, 0},  /* ... V's pointer misaligned */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int32_t hkv = cases[i].hkv, d = cases[i].d, ps = cases[i].ps;
        pb.num_kv_heads = hkv;
        pb.head_dim = d;
        pb.k = pool_mem + (cases[i].misaligned ? 8 : 0);
        pb.v = pool_mem + 64 + (cases[i].v == 4 ? 8 : 0);
        pt.page_size = ps;
        const sw_paged_strides ks =
            bulk_strides(hkv, d, ps, cases[i].hnd, cases[i].padded, cases[i].page_pad);
        const sw_paged_strides vs =
            cases[i].v == 0 || cases[i].v == 4 ? ks
            : bulk_strides(hkv, d, ps, cases[i].v == 3, cases[i].v == 1 ? 8 : 0,
                           cases[i].v == 2 ? 4 : 0);
        const int32_t tile = sw_hopper_tile_n(d, cases[i].wide);
        if (cases[i].wide && tile == sw_hopper_tile_n(d, 0))
            continue; /* no wide tiles at this head_dim */
        const int32_t got = sw_paged_gather_bulk_ok(&pb, &pt, &ks, &vs, tile);
        if (got != cases[i].want) {
            fprintf(stderr, "bulk choice case %zu (h%d d%d page %d): %d, want %d\n", i,
                    cases[i].hkv, cases[i].d, cases[i].ps, got, cases[i].want);
            sw_test_failures++;
        }
    }
}

/* The append writes exactly the requests' rows: an empty pool filled by one
 * append from strided rows equals the pool the test scattered itself, byte
 * for byte (spare pages and padding untouched). */
static void test_append(int index)
{
    sw_case c;
    sw_case_make(&c, 20261203, index, SW_DTYPE_BF16, 120);
    sw_rng r = {777 + (uint64_t)index}, r2 = r;
    const int32_t ps = page_sizes[index % 4];
    const sw_kv_layout layout = index % 2 ? SW_KV_HND : SW_KV_NHD;
    pool whole, step;
    pool_make(&whole, &c, &r, ps, layout, index % 3 == 0, index % 5 == 0, 1);
    pool_make(&step, &c, &r2, ps, layout, index % 3 == 0, index % 5 == 0, 0);
    /* the new tokens: the last n of each request, the rest appended first */
    const int32_t B = c.batch, H = c.params.num_kv_heads, d = c.params.head_dim;
    int32_t *all = calloc((size_t)B + 1, sizeof(int32_t));
    for (int32_t b = 0; b < B; b++)
        all[b + 1] = c.kv_indptr[b + 1];
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.k = step.k;
    t.v = step.v;
    t.k_row_stride = t.v_row_stride = step.tok;
    t.k_head_stride = t.v_head_stride = step.head;
    t.k_page_stride = t.v_page_stride = step.page;
    /* one append of every token (rows = c's K/V rows), strided source */
    sw_status s = sw_paged_kv_append_host(&c.params, B, &step.kv, all, c.k, c.v, c.k_stride, &t);
    CHECK_STATUS(s, SW_OK);
    CHECK(memcmp(whole.k, step.k, whole.bytes) == 0);
    CHECK(memcmp(whole.v, step.v, whole.bytes) == 0);
    /* a request appending more tokens than its table holds is refused */
    if (B > 0 && c.kv_indptr[1] > 0) {
        int32_t *more = calloc((size_t)B + 1, sizeof(int32_t));
        for (int32_t b = 0; b < B; b++)
            more[b + 1] = more[b] + (c.kv_indptr[b + 1] - c.kv_indptr[b]) + (b == 0);
        void *big = calloc((size_t)(more[B] + 1) * (size_t)H * (size_t)d, 2);
        CHECK_STATUS(sw_paged_kv_append_host(&c.params, B, &step.kv, more, big, big, 0, &t),
                     SW_STATUS_INVALID);
        CHECK(strstr(sw_last_error(), "request 0 appends") != NULL);
        free(big);
        free(more);
    }
    free(all);
    pool_free(&whole);
    pool_free(&step);
    sw_case_free(&c);
}

/* Appends around a page shared by two requests (page size 4, one kv head,
 * FlashInfer's table): a request may write past the tokens the other holds
 * there; a write at or below them, or two requests writing one token, is
 * refused naming both, and nothing is written. */
static void test_append_shared(void)
{
    enum { PS = 4, NP = 4, D = 64 };
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_BF16;
    p.num_qo_heads = p.num_kv_heads = 1;
    p.head_dim = D;
    static uint16_t kpool[NP * PS * D], vpool[NP * PS * D], before[NP * PS * D];
    uint16_t knew[2 * D], vnew[2 * D];
    for (int i = 0; i < 2 * D; i++) {
        knew[i] = (uint16_t)(0x3f80 + i);
        vnew[i] = (uint16_t)(0x4000 + i);
    }
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.k = kpool;
    t.v = vpool;
    struct {
        int32_t indptr[3], idx[4], last[2], nw[3];
        const char *refusal; /* NULL: accepted */
    } cases[] = {
        /* page 0 a full shared prefix; each writes its own next page */
        {{0, 2, 4}, {0, 1, 0, 2}, {1, 2}, {0, 1, 2}, NULL},
        /* page 0 shared, request 1 holds 2 tokens: request 0 writes token 2 */
        {{0, 1, 2}, {0, 0}, {3, 2}, {0, 1, 1}, NULL},
        /* both write token 2 of the shared page */
        {{0, 1, 2}, {0, 0}, {3, 3}, {0, 1, 2},
         "request 1 appends to page 0 at token 2, which request 0 holds (its page 0)"},
        /* request 0 writes token 2, which request 1 holds */
        {{0, 1, 2}, {0, 0}, {3, 4}, {0, 1, 1},
         "request 0 appends to page 0 at token 2, which request 1 holds (its page 0)"},
        /* the shared page is request 1's second: request 0 writes token 1 */
        {{0, 1, 3}, {3, 2, 3}, {2, 4}, {0, 1, 1},
         "request 0 appends to page 3 at token 1, which request 1 holds (its page 1)"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        sw_paged_kv kv;
        sw_paged_kv_init(&kv);
        kv.page_size = PS;
        kv.num_pages = NP;
        kv.page_indptr = cases[ci].indptr;
        kv.page_indices = cases[ci].idx;
        kv.last_page_len = cases[ci].last;
        memset(kpool, 0, sizeof kpool);
        memset(vpool, 0, sizeof vpool);
        memcpy(before, kpool, sizeof kpool);
        sw_status s = sw_paged_kv_append_host(&p, 2, &kv, cases[ci].nw, knew, vnew, 0, &t);
        if (cases[ci].refusal) {
            /* the same refusal from a pool too large for the page bitmap
             * (every page searched); nothing is written */
            sw_paged_kv big = kv;
            big.num_pages = 1 << 30;
            CHECK_STATUS(sw_paged_kv_append_host(&p, 2, &big, cases[ci].nw, knew, vnew, 0, &t),
                         SW_STATUS_INVALID);
            CHECK(strstr(sw_last_error(), cases[ci].refusal) != NULL);
            s = sw_paged_kv_append_host(&p, 2, &kv, cases[ci].nw, knew, vnew, 0, &t);
        }
        if (!cases[ci].refusal) {
            CHECK_STATUS(s, SW_OK);
            /* each new row at its request's last position */
            for (int32_t b = 0, row = 0; b < 2; b++)
                for (int32_t i = 0; i < cases[ci].nw[b + 1] - cases[ci].nw[b]; i++, row++) {
                    const int32_t np = cases[ci].indptr[b + 1] - cases[ci].indptr[b];
                    const int32_t len = (np - 1) * PS + cases[ci].last[b];
                    const int32_t j = len - (cases[ci].nw[b + 1] - cases[ci].nw[b]) + i;
                    const int32_t page = cases[ci].idx[cases[ci].indptr[b] + j / PS];
                    const size_t at = ((size_t)page * PS + (size_t)(j % PS)) * D;
                    CHECK(memcmp(kpool + at, knew + (size_t)row * D, D * 2) == 0);
                    CHECK(memcmp(vpool + at, vnew + (size_t)row * D, D * 2) == 0);
                }
        } else {
            CHECK_STATUS(s, SW_STATUS_INVALID);
            if (!strstr(sw_last_error(), cases[ci].refusal)) {
                fprintf(stderr, "append case %zu: detail \"%s\" lacks \"%s\"\n", ci,
                        sw_last_error(), cases[ci].refusal);
                sw_test_failures++;
            }
            CHECK(memcmp(kpool, before, sizeof kpool) == 0);
            CHECK(memcmp(vpool, before, sizeof vpool) == 0);
        }
    }
}

/* Each bad table is refused at plan time with INVALID (or UNSUPPORTED for a
 * page size out of range) and a detail naming the entry. */
static void expect_refusal(const sw_prefill_params *pp, int32_t batch, const int32_t *qo,
                           const sw_paged_kv *kv, sw_status want, const char *needle)
{
    sw_prefill_plan *pl = (sw_prefill_plan *)1;
    const sw_status s = sw_prefill_plan_create_paged(pp, batch, qo, kv, &pl);
    CHECK(s == want);
    CHECK(pl == NULL);
    if (!strstr(sw_last_error(), needle)) {
        fprintf(stderr, "FAIL refusal: wanted \"%s\" in \"%s\"\n", needle, sw_last_error());
        sw_test_failures++;
    }
}

static void test_refusals(void)
{
    sw_prefill_params pp;
    sw_prefill_params_init(&pp);
    pp.num_qo_heads = 2;
    pp.num_kv_heads = 1;
    pp.head_dim = 64;
    pp.backend = SW_BACKEND_CPU;
    const int32_t qo[3] = {0, 1, 2};
    int32_t indptr[3] = {0, 2, 3}, idx[3] = {4, 1, 2}, last[2] = {16, 5};
    sw_paged_kv kv;
    sw_paged_kv_init(&kv);
    kv.num_pages = 5;
    kv.page_indptr = indptr;
    kv.page_indices = idx;
    kv.last_page_len = last;
    sw_prefill_plan *pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create_paged(&pp, 2, qo, &kv, &pl), SW_OK);
    CHECK(pl && sw_prefill_plan_total_kv(pl) == 32 + 5);
    sw_prefill_plan_destroy(pl);

    idx[1] = 5;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "page_indices[1] = 5 (request 0, its page 1)");
    idx[1] = -1;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "page_indices[1] = -1");
    idx[1] = 4;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "request 0 holds page 4 twice");
    {
        /* the earliest second occurrence is named, by the pool's bitmap
         * and by the sort a pool too large for one takes */
        int32_t ip1[2] = {0, 5}, ix1[5] = {7, 3, 9, 3, 7}, la1[1] = {1};
        sw_paged_kv k1 = kv;
        k1.page_indptr = ip1;
        k1.page_indices = ix1;
        k1.last_page_len = la1;
        const int32_t pools[2] = {10, 1 << 30};
        for (int i = 0; i < 2; i++) {
            k1.num_pages = pools[i];
            expect_refusal(&pp, 1, qo, &k1, SW_STATUS_INVALID,
                           "page_indices[3] = 3: request 0 holds page 3 twice (its pages 1 and 3)");
            ix1[3] = 4; /* and without the repeat, both accept */
            ix1[4] = 8;
            CHECK_STATUS(sw_prefill_plan_create_paged(&pp, 1, qo, &k1, &pl), SW_OK);
            sw_prefill_plan_destroy(pl);
            pl = NULL;
            ix1[3] = 3;
            ix1[4] = 7;
        }
    }
    idx[1] = 1;
    idx[2] = 4; /* shared across requests: allowed (a common prefix) */
    CHECK_STATUS(sw_prefill_plan_create_paged(&pp, 2, qo, &kv, &pl), SW_OK);
    sw_prefill_plan_destroy(pl);
    pl = NULL;
    idx[2] = 2;
    last[1] = 0;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "last_page_len[1]=0");
    last[1] = 17;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "last_page_len[1]=17");
    last[1] = 5;
    indptr[1] = 4;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "page_indptr[2]=3 < page_indptr[1]=4");
    indptr[1] = 2;
    indptr[0] = 1;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "page_indptr[0]=1");
    indptr[0] = 0;
    kv.page_size = 0;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_UNSUPPORTED, "page_size=0");
    kv.page_size = 512;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_UNSUPPORTED, "page_size=512");
    kv.page_size = 16;
    /* a query longer than nothing is fine; the table must be one of two */
    int32_t table[2 * 2] = {0, 3, 2, -1}, lens[2] = {20, 16};
    kv.block_table = table;
    kv.block_table_stride = 2;
    kv.seq_lens = lens;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "both are set");
    kv.page_indptr = NULL;
    kv.page_indices = NULL;
    kv.last_page_len = NULL;
    CHECK_STATUS(sw_prefill_plan_create_paged(&pp, 2, qo, &kv, &pl), SW_OK);
    CHECK(pl && sw_prefill_plan_total_kv(pl) == 36);
    sw_prefill_plan_destroy(pl);
    pl = NULL;
    lens[1] = 17; /* needs the row's second entry, -1 */
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "block_table[3] = -1 (request 1, its page 1)");
    lens[1] = 33;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID,
                   "block_table row 1: seq_lens[1]=33 needs 3 pages of 16 tokens, the row holds 2");
    lens[1] = -1;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "seq_lens[1]=-1");
    lens[1] = 16;
    table[1] = 0;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "block_table[1] = 0: request 0 holds page 0 twice");
    table[1] = 3;
    kv.seq_lens = NULL;
    kv.block_table = NULL;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "neither is set");
    kv.block_table = table;
    kv.seq_lens = lens;
    /* the queries' offsets are checked as for contiguous K/V */
    const int32_t bad_qo[3] = {0, 2, 1};
    expect_refusal(&pp, 2, bad_qo, &kv, SW_STATUS_INVALID, "must not decrease");
    /* a CUDA backend without a device: as for contiguous K/V */
    if (sw_cuda_device_count() == 0) {
        pp.backend = SW_BACKEND_CUDA;
#ifdef SW_HAVE_CUDA
        expect_refusal(&pp, 2, qo, &kv, SW_STATUS_NO_DEVICE, "CUDA device(s) are usable");
#else
        expect_refusal(&pp, 2, qo, &kv, SW_STATUS_NO_DEVICE, "this build has no CUDA");
#endif
        pp.backend = SW_BACKEND_CPU;
    }
    kv.struct_size = 8;
    expect_refusal(&pp, 2, qo, &kv, SW_STATUS_INVALID, "struct_size=8");
    kv.struct_size = sizeof kv;
    expect_refusal(&pp, 2, qo, NULL, SW_STATUS_INVALID, "kv (the page table) is NULL");

    /* strides that make rows of a page, or pages, overlap; kv_rows */
    CHECK_STATUS(sw_prefill_plan_create_paged(&pp, 2, qo, &kv, &pl), SW_OK);
    uint16_t qb[2 * 2 * 64] = {0}, ob[2 * 2 * 64];
    uint16_t *pool_k = calloc(5 * 16 * 64 + 64, 2), *pool_v = calloc(5 * 16 * 64 + 64, 2);
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = qb;
    t.o = ob;
    t.k = pool_k;
    t.v = pool_v;
    t.q_rows = 2;
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_OK);
    t.k_row_stride = 32;
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "k_row_stride=32") != NULL);
    t.k_row_stride = 0;
    t.v_page_stride = 100;
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "v_page_stride=100 is smaller than a page's 1024") != NULL);
    t.v_page_stride = -2;
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_STATUS_INVALID);
    /* page strides whose offsets wrap int64: page 1 at page 0, or before
     * the pool (a run read there and returned SW_OK) */
    t.v_page_stride = INT64_MAX;
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "2^60") != NULL);
    t.v_page_stride = 0;
    t.k_page_stride = (int64_t)1 << 62;
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_STATUS_INVALID);
    t.k_page_stride = 0;
    t.v_page_stride = 0;
    t.kv_rows = 79;
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_STATUS_INVALID);
    CHECK(strstr(sw_last_error(), "kv_rows=79") != NULL);
    t.kv_rows = 80;
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_OK);
    sw_prefill_plan_destroy(pl);
    free(pool_k);
    free(pool_v);
}

int main(void)
{
    test_refusals();
    test_bulk_choice();
    int failed = 0, n = 0;
    const double t0 = sw_now_seconds();
    for (int i = 0; i < 64; i++, n++)
        failed += run_case(i, SW_BACKEND_CPU);
    for (int i = 0; i < 16; i++, n++)
        failed += run_case(i, SW_BACKEND_CPU_REF);
    for (int k = 0; k < 2; k++, n++)
        failed += shape_case(k);
    for (int i = 0; i < 24; i++)
        test_append(i);
    test_append_shared();
    printf("test_paged: %d cases (CPU isa %s), %d failed, %d failed checks, %.1f s\n", n,
           sw_prefill_cpu_isa(), failed, sw_test_failures, sw_now_seconds() - t0);
    return failed || sw_test_failures ? 1 : 0;
}
