/* Predictor, host side: the fixed Gaussian (Johnson-Lindenstrauss)
 * projection, projected keys and queries, block scores. A block's score is a
 * max (over its tokens and the query heads of its group), so a single
 * "needle" token keeps its block. */
#include "swap_internal.h"
#include "core/sw_half.h"

#include <math.h>

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

void sw_swap_score_layer(const sw_swap *s, const sw_swap_layer *L, const float *qp,
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
