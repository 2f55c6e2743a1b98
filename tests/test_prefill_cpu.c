/* The CPU fast path against the fp64 reference over seeded random ragged
 * cases (one line per failing case, with its parameters and seed).
 * SW_TEST_SEED and SW_TEST_CASES override the family. */
#include "sw_test.h"

#include "attn/cpu_fast_kernels.h"
#include "core/sw_core.h"

#include <math.h>
#include <string.h>

static int run_case(sw_case *c, double tol)
{
    sw_case_poison(c);
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = c->q; t.k = c->k; t.v = c->v; t.o = c->o; t.lse = c->lse;
    t.q_rows = c->total_q; t.kv_rows = c->total_kv;
    t.q_row_stride = c->q_stride; t.k_row_stride = c->k_stride;
    t.v_row_stride = c->v_stride; t.o_row_stride = c->o_stride;
    c->params.backend = SW_BACKEND_CPU;
    sw_prefill_plan *pl = NULL;
    sw_status s = sw_prefill_plan_create(&c->params, c->batch, c->qo_indptr, c->kv_indptr, &pl);
    if (s == SW_OK)
        s = sw_prefill_run(pl, &t, NULL);
    sw_prefill_plan_destroy(pl);
    if (s != SW_OK) {
        fprintf(stderr, "FAIL %s: %s %s\n", c->name, sw_status_str(s), sw_last_error());
        return 1;
    }
    sw_check ck = sw_case_check(c, 3);
    int bad = ck.rel_l2 > tol || ck.unwritten || ck.lse_bad || ck.lse_max_abs > 1e-2;
    if (bad)
        fprintf(stderr, "FAIL %s: rel_l2=%.3g (tol %.g) unwritten=%lld lse_bad=%lld lse_err=%.3g\n",
                c->name, ck.rel_l2, tol, (long long)ck.unwritten, (long long)ck.lse_bad,
                ck.lse_max_abs);
    return bad;
}

/* Every instruction set the CPU has (the dispatcher only ever runs the
 * chosen one), on a subset of the family, called below the public API. Under
 * amx, bf16 runs the AMX kernel (head_dims 64/128/256 here) and f16/f32 the
 * avx512 kernel. */
/* row_sample: every n-th (row, head) against the reference, plus each
 * request's first and last rows; every element is checked for having been
 * written (sw_case_check). */
static int run_case_isa(sw_case *c, sw_cpu_isa isa, double tol, int row_sample)
{
    sw_case_poison(c);
    sw_attn_problem pb = sw_case_problem(c);
    sw_status s = sw_cpu_prefill_fast_isa(&pb, 0, isa);
    if (s != SW_OK) {
        fprintf(stderr, "FAIL isa=%d %s: %s %s\n", (int)isa, c->name, sw_status_str(s),
                sw_last_error());
        return 1;
    }
    sw_check ck = sw_case_check(c, row_sample);
    int bad = ck.rel_l2 > tol || ck.unwritten || ck.lse_bad || ck.lse_max_abs > 1e-2;
    if (bad)
        fprintf(stderr, "FAIL isa=%d %s: rel_l2=%.3g unwritten=%lld lse_bad=%lld\n", (int)isa,
                c->name, ck.rel_l2, (long long)ck.unwritten, (long long)ck.lse_bad);
    return bad;
}

/* A NaN in one key's K makes NaN exactly the output rows (and their LSE)
 * that see it (query heads of its kv head, rows whose causal window
 * reaches it), as in the fp64 reference and PyTorch; every other row stays
 * finite (zeros and -inf where it sees no key). The key in the middle, the
 * first (rows that see it alone: every score NaN) or the last; or a NaN in
 * one query row (every score of that row). A clamp inside a vector 2^x once
 * took the NaN score to a weight of 0 (a masked key), and the LSE of a NaN
 * row read -inf ("no key"). (A NaN in V also reaches rows whose mask hides
 * its key within a 64-key tile: 0 x NaN in P.V, as in a dense P.V.) */
static int nan_key_case(sw_cpu_isa isa, sw_dtype dt, int index)
{
    sw_case c;
    sw_case_make(&c, 4242 + (uint64_t)dt, index, dt, 150);
    sw_nan_at at;
    int bad = 0;
    if (sw_case_nan_put(&c, index % 4, &at)) {
        sw_case_poison_finite(&c, 12345.0f);
        sw_attn_problem pb = sw_case_problem(&c);
        char what[32];
        snprintf(what, sizeof what, "isa=%d", (int)isa);
        if (sw_cpu_prefill_fast_isa(&pb, 0, isa) != SW_OK) {
            fprintf(stderr, "FAIL nan %s %s: %s\n", what, c.name, sw_last_error());
            bad = 1;
        } else {
            bad = sw_case_nan_check(&c, &at, 12345.0f, what);
        }
    }
    sw_case_free(&c);
    return bad;
}

#if defined(__x86_64__)
/* The AVX-512 epilogue against the scalar one, bit for bit (NaN payloads of
 * fp16 aside): random fp32 bit patterns (NaN, inf, denormals included) and
 * ordinary values, rows with l == 0, every dtype, head_dim 80 and 40 (a
 * scalar tail after 16-element steps). */
static int check_store_avx512(void)
{
    enum { ROWS = 8, DMAX = 80 };
    static float o[SW_CPU_MROWS * DMAX], m[SW_CPU_MROWS], l[SW_CPU_MROWS];
    static uint32_t a[ROWS * DMAX], b[ROWS * DMAX];
    float la[ROWS], lb[ROWS];
    int32_t ind[2] = {0, 4};
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        const int d = it % 2 ? 40 : 80;
        for (int i = 0; i < ROWS * d; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t w = (uint32_t)(x >> 11);
            float f;
            if (it % 3 == 0)
                memcpy(&f, &w, 4);
            else
                f = (float)((int)(w % 20001) - 10000) * ldexpf(1.0f, (int)(w >> 26) - 40);
            o[i] = f;
        }
        for (int r = 0; r < ROWS; r++) {
            m[r] = 0.25f * (float)r;
            l[r] = r % 5 == 4 ? 0.0f : 1.0f + 0.37f * (float)(r + it % 7);
        }
        sw_attn_problem pb;
        memset(&pb, 0, sizeof pb);
        pb.batch = 1, pb.num_qo_heads = 2, pb.num_kv_heads = 1, pb.head_dim = d;
        pb.qo_indptr = ind, pb.kv_indptr = ind, pb.q_stride = pb.o_stride = 2 * d;
        sw_cpu_unit u;
        memset(&u, 0, sizeof u);
        u.ntok = 4, u.nh = 2;
        const sw_dtype dts[3] = {SW_DTYPE_BF16, SW_DTYPE_F16, SW_DTYPE_F32};
        for (int di = 0; di < 3; di++) {
            pb.dtype = dts[di];
            const size_t es = dts[di] == SW_DTYPE_F32 ? 4 : 2;
            pb.o = a, pb.lse = la;
            sw_cpu_store_o(&pb, &u, o, m, l);
            pb.o = b, pb.lse = lb;
            sw_cpu_store_o_avx512(&pb, &u, o, m, l);
            for (int i = 0; i < ROWS * d; i++) {
                uint32_t va = 0, vb = 0;
                memcpy(&va, (const char *)a + (size_t)i * es, es);
                memcpy(&vb, (const char *)b + (size_t)i * es, es);
                int nan16 = es == 2 && dts[di] == SW_DTYPE_F16 && (va & 0x7c00) == 0x7c00 &&
                            (va & 0x3ff) && (vb & 0x7c00) == 0x7c00 && (vb & 0x3ff);
                if (va != vb && !nan16 && bad++ < 5)
                    fprintf(stderr, "FAIL store_o_avx512 dtype %d d %d elem %d: %#x vs %#x\n",
                            (int)dts[di], d, i, va, vb);
            }
            if (memcmp(la, lb, sizeof la) != 0 && bad++ < 5)
                fprintf(stderr, "FAIL store_o_avx512 dtype %d: LSE differs\n", (int)dts[di]);
        }
    }
    return bad != 0;
}
#endif

int main(void)
{
    const uint64_t seed = (uint64_t)sw_env_int("SW_TEST_SEED", 20261129);
    const int ncases = (int)sw_env_int("SW_TEST_CASES", 64);
    int failed = 0, total = 0;
    double t0 = sw_now_seconds();
    const sw_dtype dts[3] = {SW_DTYPE_BF16, SW_DTYPE_F16, SW_DTYPE_F32};
    for (int di = 0; di < 3; di++) {
        const int n = di == 2 ? ncases / 4 : ncases;
        for (int i = 0; i < n; i++) {
            sw_case c;
            sw_case_make(&c, seed + (uint64_t)di, i, dts[di], 160);
            failed += run_case(&c, sw_cpu_tol(dts[di]));
            total++;
            sw_case_free(&c);
        }
    }
#if defined(__x86_64__)
    if (sw_cpu_isa_best() >= SW_CPU_ISA_AVX512) {
        failed += check_store_avx512();
        total++;
    }
#endif
    /* every ISA up to the best this CPU (and OS) supports, amx included where
     * it is usable; higher ones would only be clamped to the best again */
    const sw_cpu_isa best = sw_cpu_isa_best();
    for (int isa = 0; isa <= (int)best; isa++)
        for (int di = 0; di < 3; di++)
            for (int i = 0; i < ncases / 5; i++) {
                sw_case c;
                sw_case_make(&c, seed + 7 + (uint64_t)di, i, dts[di], 100);
                failed += run_case_isa(&c, (sw_cpu_isa)isa, sw_cpu_tol(dts[di]),
                                       3);
                total++;
                sw_case_free(&c);
            }
    /* longer bf16 requests on the best ISA: several key tiles per unit for
     * the AMX kernel at any sw_cpu_amx_nkeys (32..256), its K/V packs
     * with lengths that are not multiples of 32, and q_len != kv_len */
    for (int i = 0; i < ncases / 5; i++) {
        sw_case c;
        sw_case_make(&c, seed + 11, i, SW_DTYPE_BF16, 700);
        failed += run_case_isa(&c, best, 1e-2, 3);
        total++;
        sw_case_free(&c);
    }
    /* the threads heuristic: one per 2^20 of work, within the units and the
     * threads available */
    CHECK(sw_cpu_threads_for(0, 10, 8) == 1);
    CHECK(sw_cpu_threads_for((1 << 20) - 1, 10, 8) == 1);
    CHECK(sw_cpu_threads_for(1 << 20, 10, 8) == 2);
    CHECK(sw_cpu_threads_for((int64_t)1 << 40, 10, 8) == 8);
    CHECK(sw_cpu_threads_for((int64_t)1 << 40, 3, 8) == 3);
    CHECK(sw_cpu_threads_for((int64_t)1 << 40, 3, 0) == 1);
    /* a NaN key (middle, first, last) or query row, every ISA and dtype */
    for (int isa = 0; isa <= (int)best; isa++)
        for (int di = 0; di < 3; di++)
            for (int i = 0; i < 12; i++) {
                failed += nan_key_case((sw_cpu_isa)isa, dts[di], i);
                total++;
            }
    /* rising / saw-tooth scores (sw_case_ramp): the online softmax's rescale
     * on most key tiles, on every ISA */
    for (int isa = 0; isa <= (int)best; isa++)
        for (int di = 0; di < 3; di++)
            for (int i = 0; i < 4; i++) {
                sw_case c;
                sw_case_make(&c, seed + 13 + (uint64_t)di, i, dts[di], 400);
                sw_case_ramp(&c, i % 2 ? 300 : 1 << 30, i < 2 ? 0.1 : 0.055, i >= 2);
                failed += run_case_isa(&c, (sw_cpu_isa)isa, sw_cpu_tol(dts[di]),
                                       3);
                total++;
                sw_case_free(&c);
            }
    printf("test_prefill_cpu: %d cases (seed %llu, isa %s, ISAs scalar..%s each checked), %d "
           "failed, %.1f s\n", total, (unsigned long long)seed, sw_cpu_prefill_isa(),
           sw_cpu_isa_name(best), failed, sw_now_seconds() - t0);
    return failed || sw_test_failures ? 1 : 0;
}
