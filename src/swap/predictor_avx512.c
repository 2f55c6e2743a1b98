/* Block scores, AVX-512 (predictor.c has the contract and the SSE2 form).
 * A register holds the running sums of two tokens x 8 query rows (lanes
 * 0-7 the first token, 8-15 the second); four such pairs advance together
 * over the rank j, each lane adding q[j] * k[j] in turn from 0.0f -- a
 * multiply, then an add: this file is built with -ffp-contract=off
 * (CMakeLists.txt), so the sums are the scalar form's bit for bit. */
#include "swap_internal.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

enum { PAIRS = 4, TOK = 2 * PAIRS, ROWS = 8 };

void sw_swap_score_blocks_avx512(const sw_swap_blk *blk, int32_t b0, int32_t b1, int32_t H,
                                 int32_t B, int32_t R, const float *qT, size_t M, size_t Mp,
                                 float *scores)
{
    for (int32_t b = b0; b < b1; b++) {
        const sw_swap_blk *e = &blk[b];
        if (!e->proj || e->valid == 0) {
            scores[b] = -INFINITY;
            continue;
        }
        __m512 best = _mm512_set1_ps(-INFINITY);
        for (int32_t h = 0; h < H; h++) {
            const float *kp = e->proj + (size_t)h * B * R;
            const float *qh = qT + (size_t)h * R * Mp;
            for (size_t m0 = 0; m0 < M; m0 += ROWS) {
                const size_t nm = M - m0 < ROWS ? M - m0 : ROWS;
                const __mmask16 rows = (__mmask16)(((1u << nm) - 1) | (((1u << nm) - 1) << 8));
                for (int32_t t0 = 0; t0 < e->valid; t0 += TOK) {
                    const int32_t nt = e->valid - t0 < TOK ? e->valid - t0 : TOK;
                    const float *kt[TOK];
                    for (int32_t u = 0; u < TOK; u++) /* past the block's tokens: its last */
                        kt[u] = kp + (size_t)(t0 + (u < nt ? u : nt - 1)) * R;
                    __m512 acc[PAIRS];
                    for (int p = 0; p < PAIRS; p++)
                        acc[p] = _mm512_setzero_ps();
                    for (int32_t j = 0; j < R; j++) {
                        const __m512 q = _mm512_broadcast_f32x8(
                            _mm256_loadu_ps(qh + (size_t)j * Mp + m0));
                        for (int p = 0; p < PAIRS; p++) {
                            const __m512 k = _mm512_mask_broadcastss_ps(
                                _mm512_set1_ps(kt[2 * p][j]), 0xFF00,
                                _mm_load_ss(&kt[2 * p + 1][j]));
                            acc[p] = _mm512_add_ps(acc[p], _mm512_mul_ps(q, k));
                        }
                    }
                    for (int p = 0; p < PAIRS; p++) {
                        const __mmask16 toks = (__mmask16)((2 * p < nt ? 0x00FFu : 0u) |
                                                           (2 * p + 1 < nt ? 0xFF00u : 0u));
                        /* (acc first: a NaN sum leaves best as it was, as in
                         * the scalar form's a > best) */
                        best = _mm512_mask_max_ps(best, rows & toks, acc[p], best);
                    }
                }
            }
        }
        scores[b] = _mm512_reduce_max_ps(best);
    }
}

/* Projection: four rows x up to 64 outputs of running sums in registers,
 * each output summed over c in order from 0.0f, a multiply then an add --
 * sw_swap_project_bf16's sums (rank a multiple of 16). */
enum { PR = 4, PV = 4 };

void sw_swap_project_bf16_avx512(const float *P, int32_t d, int32_t rank, const uint16_t *x,
                                 int64_t rows, float *out)
{
    for (int64_t r0 = 0; r0 < rows; r0 += PR) {
        const int nr = rows - r0 < PR ? (int)(rows - r0) : PR;
        const uint16_t *xr[PR];
        for (int u = 0; u < PR; u++) /* past the rows: the last again (not stored) */
            xr[u] = x + (r0 + (u < nr ? u : nr - 1)) * (int64_t)d;
        for (int32_t j0 = 0; j0 < rank; j0 += 16 * PV) {
            const int nv = (rank - j0) / 16 < PV ? (rank - j0) / 16 : PV;
            __m512 acc[PR][PV];
            for (int u = 0; u < PR; u++)
                for (int v = 0; v < PV; v++)
                    acc[u][v] = _mm512_setzero_ps();
            for (int32_t c = 0; c < d; c++) {
                const float *pc = P + (size_t)c * rank + j0;
                __m512 p[PV];
                for (int v = 0; v < PV; v++)
                    p[v] = v < nv ? _mm512_loadu_ps(pc + 16 * v) : _mm512_setzero_ps();
                for (int u = 0; u < PR; u++) {
                    uint32_t bits = (uint32_t)xr[u][c] << 16;
                    float xf;
                    memcpy(&xf, &bits, sizeof xf);
                    const __m512 xv = _mm512_set1_ps(xf);
                    for (int v = 0; v < PV; v++)
                        acc[u][v] = _mm512_add_ps(acc[u][v], _mm512_mul_ps(xv, p[v]));
                }
            }
            for (int u = 0; u < nr; u++)
                for (int v = 0; v < nv; v++)
                    _mm512_storeu_ps(out + (r0 + u) * (int64_t)rank + j0 + 16 * v, acc[u][v]);
        }
    }
}
#endif
