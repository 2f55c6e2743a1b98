/* Predictor, host side: the fixed Gaussian (Johnson-Lindenstrauss)
 * projection, projected keys and queries, block scores. A block's score is a
 * max (over its tokens and the query heads of its group), so a single
 * "needle" token keeps its block. */
#include "swap_internal.h"
#include "attn/cpu_fast_kernels.h"
#include "core/sw_half.h"

#include <math.h>
#include <stdlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sw_swap_projection_fill(uint64_t seed, int32_t d, int32_t rank, double *out)
{
    /* Box-Muller on pairs of 53-bit uniforms; u1 is taken in (0, 1] so the
     * log is finite. Both outputs of a pair are used, in order. */
    const size_t n = (size_t)d * (size_t)rank;
    const double sigma = 1.0 / sqrt((double)d);
    uint64_t x = seed;
    for (size_t i = 0; i < n; i += 2) {
        double u1 = 1.0 - (double)(splitmix64(&x) >> 11) * 0x1.0p-53;
        double u2 = (double)(splitmix64(&x) >> 11) * 0x1.0p-53;
        double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586476925 * u2;
        out[i] = sigma * rad * cos(th);
        if (i + 1 < n)
            out[i + 1] = sigma * rad * sin(th);
    }
}

void sw_swap_project_bf16(const float *P, int32_t d, int32_t rank, const uint16_t *x,
                          int64_t rows, float *out)
{
    for (int64_t r = 0; r < rows; r++) {
        float *o = out + r * rank;
        for (int32_t j = 0; j < rank; j++)
            o[j] = 0.0f;
        const uint16_t *xr = x + r * d;
        for (int32_t c = 0; c < d; c++) {
            const float xv = sw_bf16_to_f32(xr[c]);
            const float *pc = P + (size_t)c * rank;
            for (int32_t j = 0; j < rank; j++)
                o[j] += xv * pc[j];
        }
    }
}

void sw_swap_project(const sw_swap *s, const uint16_t *x, int64_t rows, float *out)
{
    const int32_t D = s->m.head_dim, R = s->c.predictor_rank;
#if defined(__x86_64__)
    if (s->tile_isa >= SW_CPU_ISA_AVX512 && R % 16 == 0) {
        sw_swap_project_bf16_avx512(s->proj, D, R, x, rows, out);
        return;
    }
#endif
    sw_swap_project_bf16(s->proj, D, R, x, rows, out);
}

/* The scalar form: every (token, query row) dot product summed over j in
 * order from 0.0f (the order the device kernels follow). */
void sw_swap_score_layer_scalar(const sw_swap *s, const sw_swap_layer *L, const float *qp,
                                int32_t q_len, float *scores)
{
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t B = s->m.block_size, R = s->c.predictor_rank;
    for (int32_t b = 0; b < L->nblocks; b++) {
        const sw_swap_blk *e = &L->blk[b];
        if (!e->proj || e->valid == 0) {
            scores[b] = -INFINITY;
            continue;
        }
        float best = -INFINITY;
        for (int32_t h = 0; h < H; h++) {
            const float *kp = e->proj + (size_t)h * B * R;
            for (int32_t t = 0; t < e->valid; t++) {
                const float *kt = kp + (size_t)t * R;
                for (int32_t i = 0; i < q_len; i++)
                    for (int32_t g = 0; g < G; g++) {
                        const float *qv = qp + ((size_t)i * Hq + (size_t)h * G + g) * R;
                        float acc = 0.0f;
                        for (int32_t j = 0; j < R; j++)
                            acc += qv[j] * kt[j];
                        if (acc > best)
                            best = acc;
                    }
            }
        }
        scores[b] = best;
    }
}

/* The same sums in the same order, vectorised: the projected queries of a
 * kv head transposed to [j][m] (M = q_len x G rows, padded to 8 with
 * zeros), and 4 tokens x 8 rows of running sums advanced together over j.
 * Each sum still adds q[j] * k[j] for j = 0, 1, ... in turn from 0.0f, so
 * the scores are bit-identical to the scalar form's (this file is built
 * with -ffp-contract=off: CMakeLists.txt); the 8 independent vector sums
 * are what the scalar form's one-at-a-time dependency chains lacked. */
enum { SC_T = 4, SC_M = 8 };

/* a[u][x] = sum over j of q[j * stride + x] * k[u][j], each sum from 0.0f
 * in j order: a multiply, then an add (no fused multiply-add). */
static void sums(const float *q, size_t stride, const float *const k[SC_T], int32_t R,
                 float a[SC_T][SC_M])
{
#if defined(__SSE2__)
    __m128 acc[SC_T][2];
    for (int u = 0; u < SC_T; u++)
        acc[u][0] = acc[u][1] = _mm_setzero_ps();
    for (int32_t j = 0; j < R; j++) {
        const float *qj = q + (size_t)j * stride;
        const __m128 q0 = _mm_loadu_ps(qj), q1 = _mm_loadu_ps(qj + 4);
        for (int u = 0; u < SC_T; u++) {
            const __m128 kj = _mm_set1_ps(k[u][j]);
            acc[u][0] = _mm_add_ps(acc[u][0], _mm_mul_ps(q0, kj));
            acc[u][1] = _mm_add_ps(acc[u][1], _mm_mul_ps(q1, kj));
        }
    }
    for (int u = 0; u < SC_T; u++) {
        _mm_storeu_ps(a[u], acc[u][0]);
        _mm_storeu_ps(a[u] + 4, acc[u][1]);
    }
#else
    for (int u = 0; u < SC_T; u++)
        for (int x = 0; x < SC_M; x++)
            a[u][x] = 0.0f;
    for (int32_t j = 0; j < R; j++)
        for (int u = 0; u < SC_T; u++)
            for (int x = 0; x < SC_M; x++)
                a[u][x] += q[(size_t)j * stride + x] * k[u][j];
#endif
}

/* Blocks [b0, b1) of a layer, the SSE2 (or plain C) form. */
static void score_blocks(const sw_swap_blk *blk, int32_t b0, int32_t b1, int32_t H, int32_t B,
                         int32_t R, const float *qT, size_t M, size_t Mp, float *scores)
{
    for (int32_t b = b0; b < b1; b++) {
        const sw_swap_blk *e = &blk[b];
        if (!e->proj || e->valid == 0) {
            scores[b] = -INFINITY;
            continue;
        }
        float best = -INFINITY;
        for (int32_t h = 0; h < H; h++) {
            const float *kp = e->proj + (size_t)h * B * R;
            const float *qh = qT + (size_t)h * R * Mp;
            for (int32_t t0 = 0; t0 < e->valid; t0 += SC_T) {
                const int32_t nt = e->valid - t0 < SC_T ? e->valid - t0 : SC_T;
                const float *kt[SC_T];
                for (int32_t u = 0; u < SC_T; u++) /* past the block's tokens: its last again */
                    kt[u] = kp + (size_t)(t0 + (u < nt ? u : nt - 1)) * R;
                for (size_t m0 = 0; m0 < M; m0 += SC_M) {
                    float a[SC_T][SC_M];
                    sums(qh + m0, Mp, kt, R, a);
                    const size_t nm = M - m0 < SC_M ? M - m0 : SC_M;
                    for (int32_t u = 0; u < nt; u++)
                        for (size_t x = 0; x < nm; x++)
                            if (a[u][x] > best)
                                best = a[u][x];
                }
            }
        }
        scores[b] = best;
    }
}

/* The layer's blocks in tasks of SCORE_TASK blocks on the compute pool. */
enum { SCORE_TASK = 64 };

typedef struct score_job {
    const sw_swap_layer *L;
    int32_t H, B, R, isa;
    const float *qT;
    size_t M, Mp;
    float *scores;
} score_job;

static void score_task(void *ctx, int task, int tid)
{
    (void)tid;
    const score_job *j = ctx;
    const int32_t b0 = task * SCORE_TASK;
    const int32_t b1 = j->L->nblocks - b0 < SCORE_TASK ? j->L->nblocks : b0 + SCORE_TASK;
#if defined(__x86_64__)
    if (j->isa >= SW_CPU_ISA_AVX512) {
        sw_swap_score_blocks_avx512(j->L->blk, b0, b1, j->H, j->B, j->R, j->qT, j->M, j->Mp,
                                    j->scores);
        return;
    }
#endif
    score_blocks(j->L->blk, b0, b1, j->H, j->B, j->R, j->qT, j->M, j->Mp, j->scores);
}

void sw_swap_score_layer(sw_swap *s, const sw_swap_layer *L, const float *qp, int32_t q_len,
                         float *scores)
{
    const int32_t H = s->m.num_kv_heads, Hq = s->m.num_qo_heads, G = Hq / H;
    const int32_t B = s->m.block_size, R = s->c.predictor_rank;
    const size_t M = (size_t)q_len * (size_t)G;
    const size_t Mp = (M + SC_M - 1) / SC_M * SC_M;
    float *qT = M > 0 ? calloc((size_t)H * R * Mp, sizeof(float)) : NULL;
    if (!qT) {
        sw_swap_score_layer_scalar(s, L, qp, q_len, scores);
        return;
    }
    for (int32_t h = 0; h < H; h++)
        for (int32_t i = 0; i < q_len; i++)
            for (int32_t g = 0; g < G; g++) {
                const float *qv = qp + ((size_t)i * Hq + (size_t)h * G + g) * R;
                const size_t m = (size_t)i * G + (size_t)g;
                for (int32_t j = 0; j < R; j++)
                    qT[((size_t)h * R + (size_t)j) * Mp + m] = qv[j];
            }
    score_job j = {L, H, B, R, s->tile_isa, qT, M, Mp, scores};
    sw_swap_tpool_run(&s->tp, score_task, &j, (L->nblocks + SCORE_TASK - 1) / SCORE_TASK);
    free(qT);
}
