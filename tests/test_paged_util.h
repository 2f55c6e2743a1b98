/* Paged K/V test helpers shared by test_paged (CPU) and test_paged_cuda: a
 * case's keys and values laid out in a shuffled page pool, and queries cut
 * to decode lengths. */
#ifndef SW_TEST_PAGED_UTIL_H
#define SW_TEST_PAGED_UTIL_H

#include "core/sw_core.h"
#include "core/sw_half.h"
#include "sw_test.h"

#include <stdlib.h>
#include <string.h>

typedef struct pool {
    sw_paged_kv kv;
    int32_t *indptr, *indices, *last, *table, *lens;
    void *k, *v;
    int64_t tok, head, page; /* strides, elements */
    size_t bytes;
} pool;

static inline void pool_free(pool *p)
{
    free(p->indptr);
    free(p->indices);
    free(p->last);
    free(p->table);
    free(p->lens);
    sw_aligned_free(p->k);
    sw_aligned_free(p->v);
    memset(p, 0, sizeof *p);
}

static inline void put(sw_dtype t, void *base, int64_t i, float x)
{
    if (t == SW_DTYPE_F16)
        ((uint16_t *)base)[i] = sw_f32_to_f16(x);
    else if (t == SW_DTYPE_BF16)
        ((uint16_t *)base)[i] = sw_f32_to_bf16(x);
    else
        ((float *)base)[i] = x;
}

/* Lays c's K/V out in pages: `spare` extra pages, shuffled, the table in the
 * convention `fa` (block_table) or not (FlashInfer). When `scatter` is 0 the
 * pages are left filled with 1e4 for the append to write. */
static inline void pool_make(pool *p, const sw_case *c, sw_rng *r, int32_t ps, sw_kv_layout layout,
                      int fa, int padded, int scatter)
{
    memset(p, 0, sizeof *p);
    const int32_t B = c->batch, H = c->params.num_kv_heads, d = c->params.head_dim;
    const size_t es = sw_dtype_size(c->params.dtype);
    int32_t need = 0, maxp = 0;
    for (int32_t b = 0; b < B; b++) {
        const int32_t np = (c->kv_indptr[b + 1] - c->kv_indptr[b] + ps - 1) / ps;
        need += np;
        maxp = np > maxp ? np : maxp;
    }
    const int32_t npages = need + sw_rng_int(r, 0, 3);
    int32_t *perm = malloc(sizeof(int32_t) * ((size_t)npages + 1));
    for (int32_t i = 0; i < npages; i++)
        perm[i] = i;
    for (int32_t i = npages - 1; i > 0; i--) {
        const int32_t j = sw_rng_int(r, 0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    const int64_t pad = padded ? 8 : 0;
    if (layout == SW_KV_NHD) {
        p->head = d + (padded ? pad : 0);
        p->tok = H * p->head + pad;
        p->page = ps * p->tok + pad;
    } else {
        p->tok = d + pad;
        p->head = ps * p->tok + pad;
        p->page = H * p->head + pad;
    }
    if (!padded && layout == SW_KV_NHD)
        p->tok = p->head = p->page = 0; /* the defaults */
    const int64_t tok = p->tok ? p->tok : (layout == SW_KV_NHD ? (int64_t)H * d : d);
    const int64_t head = p->head ? p->head : (layout == SW_KV_NHD ? d : (int64_t)ps * d);
    const int64_t page = p->page ? p->page : (int64_t)ps * H * d;
    const int64_t elems = page * (npages > 0 ? npages : 1);
    p->bytes = (size_t)elems * es;
    p->k = sw_aligned_alloc(64, p->bytes + 64);
    p->v = sw_aligned_alloc(64, p->bytes + 64);
    for (int64_t i = 0; i < elems; i++) {
        put(c->params.dtype, p->k, i, 1e4f);
        put(c->params.dtype, p->v, i, 1e4f);
    }
    sw_paged_kv_init(&p->kv);
    p->kv.page_size = ps;
    p->kv.layout = layout;
    p->kv.num_pages = npages;
    p->indptr = calloc((size_t)B + 1, sizeof(int32_t));
    p->indices = calloc((size_t)need + 1, sizeof(int32_t));
    p->last = calloc((size_t)B + 1, sizeof(int32_t));
    p->lens = calloc((size_t)B + 1, sizeof(int32_t));
    const int32_t stride = maxp + sw_rng_int(r, 0, 2);
    p->table = malloc(sizeof(int32_t) * ((size_t)B * (size_t)stride + 1));
    for (int64_t i = 0; i < (int64_t)B * stride; i++)
        p->table[i] = -7; /* entries past a row's need are not read */
    int32_t next = 0;
    for (int32_t b = 0; b < B; b++) {
        const int32_t len = c->kv_indptr[b + 1] - c->kv_indptr[b];
        const int32_t np = (len + ps - 1) / ps;
        p->indptr[b + 1] = p->indptr[b] + np;
        p->last[b] = np ? len - (np - 1) * ps : 0;
        p->lens[b] = len;
        for (int32_t i = 0; i < np; i++) {
            p->indices[p->indptr[b] + i] = perm[next];
            p->table[(int64_t)b * stride + i] = perm[next++];
        }
        for (int32_t j = 0; scatter && j < len; j++) {
            const int32_t pg = p->indices[p->indptr[b] + j / ps];
            for (int32_t h = 0; h < H; h++) {
                const int64_t dst = pg * page + (j % ps) * tok + h * head;
                const int64_t src = (int64_t)(c->kv_indptr[b] + j) * c->k_stride + h * d;
                memcpy((char *)p->k + dst * es, (const char *)c->k + src * es, (size_t)d * es);
                memcpy((char *)p->v + dst * es, (const char *)c->v + src * es, (size_t)d * es);
            }
        }
    }
    if (fa) {
        p->kv.block_table = p->table;
        p->kv.block_table_stride = stride;
        p->kv.seq_lens = p->lens;
    } else {
        p->kv.page_indptr = p->indptr;
        p->kv.page_indices = p->indices;
        p->kv.last_page_len = p->last;
    }
    free(perm);
}

/* Keeps at most `keep` query tokens per request (the last ones: decode and
 * small speculative steps continue the cache). */
static inline void shorten_queries(sw_case *c, int32_t keep)
{
    const size_t es = sw_dtype_size(c->params.dtype);
    int32_t *ni = calloc((size_t)c->batch + 1, sizeof(int32_t));
    for (int32_t b = 0; b < c->batch; b++) {
        const int32_t ql = c->qo_indptr[b + 1] - c->qo_indptr[b];
        const int32_t n = ql < keep ? ql : keep;
        memmove((char *)c->q + (size_t)ni[b] * (size_t)c->q_stride * es,
                (char *)c->q + (size_t)(c->qo_indptr[b + 1] - n) * (size_t)c->q_stride * es,
                (size_t)n * (size_t)c->q_stride * es);
        ni[b + 1] = ni[b] + n;
    }
    memcpy(c->qo_indptr, ni, sizeof(int32_t) * ((size_t)c->batch + 1));
    c->total_q = ni[c->batch];
    free(ni);
}

static const int32_t page_sizes[] = {1, 16, 64, 256};

#endif
