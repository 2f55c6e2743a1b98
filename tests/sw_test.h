/* Shared helpers of the C tests: checks, seeded random numbers, prefill case
 * generation, the comparison against the fp64 reference. */
#ifndef SW_TEST_H
#define SW_TEST_H

#include "spillway.h"
#include "attn/attn_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SW_TEST_SKIP 77

/* Failed checks: the program's (atomic: tests may check from several
 * threads) and the calling thread's (to name what failed in a threaded
 * test). */
extern _Atomic int sw_test_failures;
extern _Thread_local int sw_test_thread_failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);\
            sw_test_failures++;                                                     \
            sw_test_thread_failures++;                                              \
        }                                                                           \
    } while (0)

#define CHECK_STATUS(expr, want)                                                    \
    do {                                                                            \
        sw_status got_ = (expr);                                                    \
        if (got_ != (want)) {                                                       \
            fprintf(stderr, "%s:%d: %s returned %s (%s), want %s\n", __FILE__,      \
                    __LINE__, #expr, sw_status_str(got_), sw_last_error(),          \
                    sw_status_str(want));                                           \
            sw_test_failures++;                                                     \
            sw_test_thread_failures++;                                              \
        }                                                                           \
    } while (0)

/* splitmix64: small, seedable, identical on every platform. */
typedef struct { uint64_t s; } sw_rng;
uint64_t sw_rng_next(sw_rng *r);
double sw_rng_uniform(sw_rng *r);             /* [0, 1) */
int32_t sw_rng_int(sw_rng *r, int32_t lo, int32_t hi); /* [lo, hi] */
double sw_rng_normal(sw_rng *r);

/* A random ragged prefill case in host memory. */
typedef struct sw_case {
    char name[200];
    uint64_t seed;
    sw_prefill_params params;
    int32_t batch;
    int32_t *qo_indptr, *kv_indptr;
    int64_t q_stride, k_stride, v_stride, o_stride; /* elements; may exceed dense */
    void *q, *k, *v, *o;
    float *lse;
    int64_t total_q, total_kv;
} sw_case;

/* Draws case number `index` of a seeded family: ragged lengths including 0, 1,
 * 17 and non-multiples of every tile size, head_dim 64/128/256, GQA 1/2/4/8,
 * causal or not, q_len < kv_len (prefix) or not, strided rows sometimes.
 * max_len bounds each length (CPU reference cost). */
void sw_case_make(sw_case *c, uint64_t seed, int index, sw_dtype dtype, int32_t max_len);
/* A case of a fixed shape: batch requests of q_lens[b] query rows over
 * kv_lens[b] keys (a causal request with more keys continues a cached
 * prefix), dense rows, random Q/K/V from `seed`. */
void sw_case_make_shape(sw_case *c, uint64_t seed, sw_dtype dtype, int32_t head_dim,
                        int32_t num_kv_heads, int32_t group, int causal, int32_t batch,
                        const int32_t *q_lens, const int32_t *kv_lens);
void sw_case_free(sw_case *c);
/* Adds slope x ((kv_len - 1 - j) mod period) to the scores of key j of each
 * request (natural-log units, after the softmax scale): key component 0
 * carries the ramp and query component 0 becomes 1 -- or, with `mix`, 1, 0
 * or -1 by (token / 16) mod 3, so rows of one warp see a rising, a flat or
 * a falling ramp. Kernels that visit key tiles from the last towards the
 * first then see each tile's maximum rise by slope x tile width (0.1 x 64
 * keys = 6.4, x 1.44 = 9.2 in log2 units) on rising rows. Period 2^30: one
 * steady ramp; 300: a saw, whose drops let running maxima stand for a
 * while. With random data the rescale paths of an online softmax almost
 * never run; with this they run on most tiles. */
void sw_case_ramp(sw_case *c, int32_t period, double slope, int mix);
/* Element idx of an F32 / F16 / BF16 array, as a double. */
double sw_test_elem(sw_dtype t, const void *base, int64_t idx);
/* Fills O with NaN and LSE with NaN so that unwritten elements are caught. */
void sw_case_poison(sw_case *c);
sw_attn_problem sw_case_problem(const sw_case *c);

typedef struct sw_check {
    double rel_l2;       /* ||out - ref|| / ||ref|| over all valid rows */
    double lse_max_abs;  /* max |lse - ref| over rows that see keys */
    int64_t unwritten;   /* NaN/inf elements (poison survived) */
    int64_t lse_bad;     /* LSE not -inf for an empty row, or NaN */
} sw_check;

/* A NaN put into a case (sw_case_nan_put): mode 0 in component 1 of key
 * kv_len / 2 of request b at the last kv head (hkv), 1 of its key 0 (rows
 * that see that key alone: every score NaN), 2 of its last key; 3 in
 * component 1 of its query row t at the last query head h (every score of
 * that row NaN). b: the first request with >= 2 keys and a query row. */
typedef struct sw_nan_at {
    int mode;
    int32_t b, j, hkv, t, h;
} sw_nan_at;
/* 0 when no request qualifies (nothing changed). */
int sw_case_nan_put(sw_case *c, int mode, sw_nan_at *at);
/* After a run over that input: the rows that see the NaN (mode 0-2: query
 * heads of kv head hkv whose window reaches key j; 3: row t, head h if it
 * sees any key) all NaN with a NaN LSE, as in the fp64 reference and
 * PyTorch; a row that sees no key zeros with LSE -inf; every other row
 * finite with a finite LSE (not `lse_poison`, the LSE's poison: O's must be
 * finite). 0 when so, else 1 with the first wrong row on stderr (tagged
 * `what`). */
int sw_case_nan_check(const sw_case *c, const sw_nan_at *at, float lse_poison, const char *what);
/* O filled with a finite pattern (bytes 0x3c) and LSE with lse_poison, for
 * the NaN checks (NaN poison would pass for a NaN row never written). */
void sw_case_poison_finite(sw_case *c, float lse_poison);

/* The bound on a CPU path's rel L2 against the fp64 reference for output of
 * dtype t (the CPU computes in fp32, so only the output's rounding shows):
 * DESIGN.md's 1e-2 for bf16, 1e-3 for fp16 (~2e-4 measured), 1e-4 for fp32
 * (~1e-6 measured) -- so an fp16 or fp32 result rounded through bf16 fails. */
double sw_cpu_tol(sw_dtype t);

/* Compares c->o / c->lse against the fp64 reference (every row when
 * row_stride_sample <= 1, else every n-th (row, head) plus the first and last
 * row of each request). */
sw_check sw_case_check(const sw_case *c, int row_sample);

double sw_now_seconds(void);

/* Runs fn(job, worker, ctx) for job = 0 .. njobs - 1 on `workers` threads
 * (worker = 0 .. workers - 1; each job exactly once, in no set order);
 * returns once all have run. workers <= 1 runs them in order on the caller. */
void sw_test_pool_run(int workers, int njobs, void (*fn)(int job, int worker, void *ctx), void *ctx);

#endif
