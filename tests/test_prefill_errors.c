/* Bad input on purpose: every rejection returns its status and a detail that
 * names the problem, nothing crashes, and a refused run leaves O untouched. */
#include "sw_test.h"

#include <math.h>
#include <string.h>

#define EXPECT_FAIL(expr, want, needle)                                                 \
    do {                                                                                \
        CHECK_STATUS(expr, want);                                                       \
        if (!strstr(sw_last_error(), needle)) {                                         \
            fprintf(stderr, "%s:%d: detail \"%s\" does not mention \"%s\"\n", __FILE__, \
                    __LINE__, sw_last_error(), needle);                                 \
            sw_test_failures++;                                                         \
        }                                                                               \
    } while (0)

static sw_prefill_params good_params(void)
{
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_BF16;
    p.num_qo_heads = 4;
    p.num_kv_heads = 2;
    p.head_dim = 64;
    p.causal = 1;
    p.backend = SW_BACKEND_CPU;
    return p;
}

int main(void)
{
    int32_t qo[3] = {0, 5, 12}, kv[3] = {0, 7, 20};
    sw_prefill_plan *pl = (sw_prefill_plan *)0x1;
    sw_prefill_params p = good_params();

    /* --- plan_create --- */
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, NULL), SW_STATUS_INVALID, "out");
    EXPECT_FAIL(sw_prefill_plan_create(NULL, 2, qo, kv, &pl), SW_STATUS_INVALID, "params");
    CHECK(pl == NULL); /* cleared on failure */
    p.struct_size = 8;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID, "struct_size");
    p = good_params();
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, NULL, kv, &pl), SW_STATUS_INVALID, "qo_indptr is NULL");
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, NULL, &pl), SW_STATUS_INVALID, "kv_indptr is NULL");
    EXPECT_FAIL(sw_prefill_plan_create(&p, -1, qo, kv, &pl), SW_STATUS_INVALID, "batch=-1");
    {
        int32_t bad[3] = {1, 5, 12};
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, bad, kv, &pl), SW_STATUS_INVALID, "qo_indptr[0]=1");
        int32_t dec[3] = {0, 9, 8};
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, dec, &pl), SW_STATUS_INVALID,
                    "kv_indptr[2]=8 < kv_indptr[1]=9");
    }
    p.num_qo_heads = 6;
    p.num_kv_heads = 4;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID, "not divisible");
    p = good_params();
    p.num_kv_heads = 0;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID, "num_kv_heads=0");
    p = good_params();
    p.head_dim = 96;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_UNSUPPORTED, "head_dim=96");
    p = good_params();
    p.dtype = (sw_dtype)7;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_UNSUPPORTED, "dtype=7");
    p = good_params();
    p.causal = 2;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID, "causal=2");
    p = good_params();
    p.sm_scale = NAN;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID, "sm_scale");
    p = good_params();
    p.backend = (sw_backend)42;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID, "backend=42");
    p = good_params();
    p.num_threads = -3;
    EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_INVALID, "num_threads=-3");
    p = good_params();
    p.dtype = SW_DTYPE_F32;
    p.backend = SW_BACKEND_CUDA;
    if (sw_cuda_device_count() == 0)
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_NO_DEVICE, "cuda");
    else
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_UNSUPPORTED, "F32");
    if (sw_cuda_device_count() == 0) {
        p = good_params();
        p.backend = SW_BACKEND_CUDA_PORTABLE;
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_NO_DEVICE, "cuda");
        p.backend = SW_BACKEND_CUDA_HOPPER;
        EXPECT_FAIL(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_STATUS_NO_DEVICE, "cuda-hopper");
    }

    /* --- run --- */
    p = good_params();
    pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create(&p, 2, qo, kv, &pl), SW_OK);
    CHECK(pl != NULL);
    CHECK(sw_prefill_plan_backend(pl) == SW_BACKEND_CPU);
    CHECK(sw_prefill_plan_total_q(pl) == 12 && sw_prefill_plan_total_kv(pl) == 20);
    const int64_t dq = 4 * 64, dk = 2 * 64;
    uint16_t *q = calloc((size_t)(12 * dq + 8), 2), *o = malloc((size_t)(12 * dq + 8) * 2);
    uint16_t *k = calloc((size_t)(20 * dk + 8), 2), *v = calloc((size_t)(20 * dk + 8), 2);
    memset(o, 0xab, (size_t)(12 * dq) * 2);
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = q; t.k = k; t.v = v; t.o = o;
    t.q_rows = 12; t.kv_rows = 20;

    EXPECT_FAIL(sw_prefill_run(NULL, &t, NULL), SW_STATUS_INVALID, "plan is NULL");
    EXPECT_FAIL(sw_prefill_run(pl, NULL, NULL), SW_STATUS_INVALID, "tensors is NULL");
    sw_prefill_tensors bad = t;
    bad.struct_size = 4;
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "struct_size");
    bad = t; bad.q = NULL;
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "q is NULL");
    bad = t; bad.v = NULL;
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "v is NULL");
    bad = t; bad.o = NULL;
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "o is NULL");
    bad = t; bad.q_rows = 13; /* offsets do not end at the row count */
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "qo_indptr[2]=12");
    bad = t; bad.kv_rows = 19;
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "kv_indptr[2]=20");
    bad = t; bad.k_row_stride = 64; /* < heads*head_dim: rows would overlap */
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "k_row_stride=64");
    /* strides whose last row's offset wraps int64 (o's wrote before o) */
    bad = t; bad.o_row_stride = ((int64_t)1 << 62) - 32;
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "o_row_stride=");
    bad = t; bad.k_row_stride = INT64_MAX;
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_INVALID, "2^60");
    bad = t; bad.q = (const char *)q + 1;
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_MISALIGNED, "q=");
    bad = t; bad.lse = (float *)((char *)o + 2);
    EXPECT_FAIL(sw_prefill_run(pl, &bad, NULL), SW_STATUS_MISALIGNED, "lse=");
    /* No refused run wrote anything. */
    int untouched = 1;
    for (int64_t i = 0; i < 12 * dq; i++)
        untouched &= o[i] == 0xabab;
    CHECK(untouched);
    /* And the good call works after all the refusals. */
    CHECK_STATUS(sw_prefill_run(pl, &t, NULL), SW_OK);
    CHECK(o[0] == 0); /* zero Q, K, V -> uniform softmax over zero V -> 0 */
    sw_prefill_plan_destroy(pl);
    sw_prefill_plan_destroy(NULL); /* a no-op */

    /* sw_prefill_host refuses a GPU backend instead of running it on host memory. */
    p = good_params();
    p.backend = SW_BACKEND_CUDA;
    EXPECT_FAIL(sw_prefill_host(&p, 2, qo, kv, &t), SW_STATUS_INVALID, "CPU");
    {
        /* A caller's struct shorter than this library's is refused before any
         * field past struct_size is read (an exact-size allocation: a
         * sanitizer build sees any read beyond it). */
        void *shortp = calloc(1, 8);
        const uint32_t eight = 8;
        CHECK(shortp != NULL);
        if (shortp) {
            memcpy(shortp, &eight, sizeof eight); /* struct_size, the first field */
            EXPECT_FAIL(sw_prefill_host((const sw_prefill_params *)shortp, 2, qo, kv, &t),
                        SW_STATUS_INVALID, "struct_size=8");
            free(shortp);
        }
    }
    /* More rows in all than SW_MAX_ROWS: refused at plan time, on either side
     * (the kernels step int32 row indices a tile at a time). */
    p = good_params();
    {
        int32_t big[2] = {0, SW_MAX_ROWS + 1}, small[2] = {0, 4};
        EXPECT_FAIL(sw_prefill_plan_create(&p, 1, big, small, &pl), SW_STATUS_UNSUPPORTED,
                    "qo_indptr[1]=2147418113: more than SW_MAX_ROWS");
        EXPECT_FAIL(sw_prefill_plan_create(&p, 1, small, big, &pl), SW_STATUS_UNSUPPORTED,
                    "kv_indptr[1]");
    }
    /* No keys at all: K and V may be NULL on every CPU backend (each row gets
     * zeros and LSE = -inf, as for a row that sees no key). */
    for (int be = SW_BACKEND_CPU_REF; be <= SW_BACKEND_CPU; be++) {
        int32_t q3[2] = {0, 3}, k0[2] = {0, 0};
        p = good_params();
        p.backend = (sw_backend)be;
        sw_prefill_plan *pe = NULL;
        CHECK_STATUS(sw_prefill_plan_create(&p, 1, q3, k0, &pe), SW_OK);
        sw_prefill_tensors te;
        sw_prefill_tensors_init(&te);
        float lse[3 * 4];
        for (int i = 0; i < 3 * 4; i++)
            lse[i] = 1.0f;
        for (int64_t i = 0; i < 3 * 4 * 64; i++)
            o[i] = 0xabab;
        te.q = q;
        te.o = o;
        te.lse = lse;
        te.q_rows = 3;
        te.kv_rows = 0;
        CHECK_STATUS(sw_prefill_run(pe, &te, NULL), SW_OK);
        int zeros = 1, neginf = 1;
        for (int64_t i = 0; i < 3 * 4 * 64; i++)
            zeros &= o[i] == 0;
        for (int i = 0; i < 3 * 4; i++)
            neginf &= isinf(lse[i]) && lse[i] < 0;
        CHECK(zeros);
        CHECK(neginf);
        sw_prefill_plan_destroy(pe);
    }
    free(q); free(k); free(v); free(o);

    if (sw_test_failures) {
        fprintf(stderr, "test_prefill_errors: %d failure(s)\n", sw_test_failures);
        return 1;
    }
    printf("test_prefill_errors: ok\n");
    return 0;
}
