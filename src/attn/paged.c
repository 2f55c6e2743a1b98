/* Paged K/V: the page table's checks and normal form (pure, host), the
 * paged strides, the CPU run (the fast kernels read the pages in place; the
 * reference gets them gathered into contiguous K/V a group of requests at a
 * time) and the host append. */
#include "attn_internal.h"
#include "../core/sw_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pages gathered per step of a CPU run: requests are taken in order until
 * their K and V pass this many bytes (a longer request is a step alone). */
#define SW_PAGED_GATHER_BYTES ((size_t)256 << 20)

void sw_paged_kv_init(sw_paged_kv *kv)
{
    if (!kv)
        return;
    memset(kv, 0, sizeof *kv);
    kv->struct_size = sizeof *kv;
    kv->page_size = 16;
    kv->layout = SW_KV_NHD;
}

void sw_paged_table_free(sw_paged_table *t)
{
    if (!t)
        return;
    free(t->page_indptr);
    free(t->page_indices);
    free(t->kv_indptr);
    memset(t, 0, sizeof *t);
}

static int cmp_u64(const void *x, const void *y)
{
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Whether a bitmap of a pool of num_pages pages is small beside a table of
 * `entries` entries (at most 1 MiB plus 16 bytes an entry): the page
 * checks (repeats, append conflicts) use one then, else a sort / search
 * that grows with the table, not the pool. */
static int page_bitmap_fits(int64_t num_pages, int64_t entries)
{
    return (uint64_t)(num_pages + 63) / 64 * 8 <= ((uint64_t)1 << 20) + 16 * (uint64_t)entries;
}

static sw_status repeat_fail(const int32_t *pages, int32_t first, int32_t second, int32_t b,
                             const char *where, int64_t entry0)
{
    return sw_fail(SW_STATUS_INVALID, "%s[%lld] = %d: request %d holds page %d twice (its pages "
                   "%d and %d); a page may repeat across requests only", where,
                   (long long)(entry0 + second), pages[second], b, pages[second], first, second);
}

/* Request b's pages (np of them, in `pages`, each in [0, num_pages)) hold
 * no page twice, through a bitmap of the pool's pages (all clear on entry
 * and on return): each set as it is met, the earliest second occurrence
 * found set. Two passes over the request's pages. */
static sw_status check_repeats_bitmap(const int32_t *pages, int32_t np, int32_t b, uint64_t *bits,
                                      const char *where, int64_t entry0)
{
    int32_t i = 0;
    for (; i < np; i++) {
        const uint32_t p = (uint32_t)pages[i];
        const uint64_t m = 1ull << (p & 63);
        if (bits[p >> 6] & m)
            break;
        bits[p >> 6] |= m;
    }
    for (int32_t k = 0; k < i; k++) /* (distinct: each clears its own bit) */
        bits[(uint32_t)pages[k] >> 6] &= ~(1ull << ((uint32_t)pages[k] & 63));
    if (i == np)
        return SW_OK;
    int32_t first = 0;
    while (pages[first] != pages[i])
        first++;
    return repeat_fail(pages, first, i, b, where, entry0);
}

/* The same by sorting (page, position) pairs, where the pool is too large
 * for a bitmap beside the table (work and memory grow with the request's
 * pages, not with the pool): equal pages are neighbours; the detail names
 * the earliest second occurrence, as above. */
static sw_status check_repeats(const int32_t *pages, int32_t np, int32_t b, uint64_t *scratch,
                               const char *where, int64_t entry0)
{
    for (int32_t i = 0; i < np; i++)
        scratch[i] = (uint64_t)(uint32_t)pages[i] << 32 | (uint32_t)i;
    qsort(scratch, (size_t)np, sizeof *scratch, cmp_u64);
    int32_t first = -1, second = -1;
    for (int32_t i = 1, start = 0; i < np; i++) {
        if (scratch[i] >> 32 != scratch[start] >> 32) {
            start = i; /* a new page's group */
            continue;
        }
        const int32_t pos = (int32_t)(uint32_t)scratch[i];
        if (i == start + 1 && (second < 0 || pos < second)) { /* its second occurrence */
            second = pos;
            first = (int32_t)(uint32_t)scratch[start];
        }
    }
    if (second < 0)
        return SW_OK;
    return repeat_fail(pages, first, second, b, where, entry0);
}

sw_status sw_paged_table_build(const sw_paged_kv *kv, int32_t batch, sw_paged_table *out)
{
    memset(out, 0, sizeof *out);
    if (!kv)
        return sw_fail(SW_STATUS_INVALID, "kv (the page table) is NULL");
    if (kv->struct_size < offsetof(sw_paged_kv, seq_lens) + sizeof(kv->seq_lens))
        return sw_fail(SW_STATUS_INVALID, "kv->struct_size=%u is too small; call "
                       "sw_paged_kv_init()", kv->struct_size);
    if (batch < 0)
        return sw_fail(SW_STATUS_INVALID, "batch=%d must be >= 0", batch);
    const int32_t ps = kv->page_size;
    if (ps < 1 || ps > 256)
        return sw_fail(SW_STATUS_UNSUPPORTED, "page_size=%d is not in 1..256", ps);
    if (kv->layout != SW_KV_NHD && kv->layout != SW_KV_HND)
        return sw_fail(SW_STATUS_INVALID, "layout=%d is neither SW_KV_NHD nor SW_KV_HND",
                       (int)kv->layout);
    if (kv->num_pages < 0)
        return sw_fail(SW_STATUS_INVALID, "num_pages=%d must be >= 0", kv->num_pages);
    const int fi = kv->page_indptr || kv->page_indices || kv->last_page_len;
    const int fa = kv->block_table || kv->seq_lens;
    if (fi == fa)
        return sw_fail(SW_STATUS_INVALID, "set exactly one page table: page_indptr + "
                       "page_indices + last_page_len, or block_table + seq_lens (%s)",
                       fi ? "both are set" : "neither is set");
    if (fi && (!kv->page_indptr || !kv->last_page_len || (!kv->page_indices && batch > 0)))
        return sw_fail(SW_STATUS_INVALID, "%s is NULL", !kv->page_indptr ? "page_indptr"
                       : !kv->last_page_len ? "last_page_len" : "page_indices");
    if (fa && (!kv->seq_lens || (!kv->block_table && batch > 0)))
        return sw_fail(SW_STATUS_INVALID, "%s is NULL", !kv->seq_lens ? "seq_lens"
                                                                       : "block_table");
    if (fa && kv->block_table_stride < 0)
        return sw_fail(SW_STATUS_INVALID, "block_table_stride=%d must be >= 0",
                       kv->block_table_stride);

    /* Pages per request and their total, checked before anything is read
     * through them. */
    out->page_size = ps;
    out->layout = kv->layout;
    out->num_pages = kv->num_pages;
    out->page_indptr = malloc(sizeof(int32_t) * ((size_t)batch + 1));
    out->kv_indptr = malloc(sizeof(int32_t) * ((size_t)batch + 1));
    if (!out->page_indptr || !out->kv_indptr) {
        sw_paged_table_free(out);
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot copy a page table of %d requests", batch);
    }
    sw_status st = SW_OK;
    out->page_indptr[0] = 0;
    out->kv_indptr[0] = 0;
    if (fi && kv->page_indptr[0] != 0)
        st = sw_fail(SW_STATUS_INVALID, "page_indptr[0]=%d, must be 0", kv->page_indptr[0]);
    for (int32_t b = 0; st == SW_OK && b < batch; b++) {
        int64_t np, len;
        if (fi) {
            np = (int64_t)kv->page_indptr[b + 1] - kv->page_indptr[b];
            const int32_t last = kv->last_page_len[b];
            if (np < 0) {
                st = sw_fail(SW_STATUS_INVALID, "page_indptr[%d]=%d < page_indptr[%d]=%d: "
                             "offsets must not decrease", b + 1, kv->page_indptr[b + 1], b,
                             kv->page_indptr[b]);
                break;
            }
            if (np == 0 ? last != 0 : (last < 1 || last > ps)) {
                st = sw_fail(SW_STATUS_INVALID, "last_page_len[%d]=%d: request %d has %lld "
                             "page(s), so it must be %s (page_size=%d)", b, last, b,
                             (long long)np, np == 0 ? "0" : "in 1..page_size", ps);
                break;
            }
            len = np == 0 ? 0 : (np - 1) * ps + last;
        } else {
            len = kv->seq_lens[b];
            if (len < 0) {
                st = sw_fail(SW_STATUS_INVALID, "seq_lens[%d]=%lld must be >= 0", b,
                             (long long)len);
                break;
            }
            np = (len + ps - 1) / ps;
            if (np > kv->block_table_stride) {
                st = sw_fail(SW_STATUS_INVALID, "block_table row %d: seq_lens[%d]=%lld needs "
                             "%lld pages of %d tokens, the row holds %d", b, b, (long long)len,
                             (long long)np, ps, kv->block_table_stride);
                break;
            }
        }
        const int64_t pages = out->page_indptr[b] + np, kvs = out->kv_indptr[b] + len;
        if (pages > INT32_MAX || kvs > SW_MAX_ROWS) {
            st = sw_fail(SW_STATUS_UNSUPPORTED, "request %d: more than %s in the batch", b,
                         pages > INT32_MAX ? "INT32_MAX pages" : "SW_MAX_ROWS key tokens");
            break;
        }
        out->page_indptr[b + 1] = (int32_t)pages;
        out->kv_indptr[b + 1] = (int32_t)kvs;
    }
    if (st != SW_OK) {
        sw_paged_table_free(out);
        return st;
    }
    const int64_t total = out->page_indptr[batch];
    int32_t maxp = 0;
    for (int32_t b = 0; b < batch; b++)
        if (out->page_indptr[b + 1] - out->page_indptr[b] > maxp)
            maxp = out->page_indptr[b + 1] - out->page_indptr[b];
    out->page_indices = malloc(sizeof(int32_t) * ((size_t)total + 1));
    /* the repeat check: a bitmap of the pool where it fits (a sort of each
     * request's pages took 13 ms for 64 requests x 2048 pages), else the
     * sort */
    const size_t words = ((size_t)kv->num_pages + 63) / 64;
    const int use_bits = page_bitmap_fits(kv->num_pages, total);
    uint64_t *scratch = use_bits ? calloc(words + 1, sizeof(uint64_t))
                                 : malloc(sizeof(uint64_t) * ((size_t)maxp + 1));
    if (!out->page_indices || !scratch) {
        free(scratch);
        sw_paged_table_free(out);
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot copy %lld page indices", (long long)total);
    }
    const char *where = fi ? "page_indices" : "block_table";
    for (int32_t b = 0; st == SW_OK && b < batch; b++) {
        const int32_t np = out->page_indptr[b + 1] - out->page_indptr[b];
        const int64_t entry0 = fi ? kv->page_indptr[b] : (int64_t)b * kv->block_table_stride;
        const int32_t *src = fi ? kv->page_indices : kv->block_table;
        int32_t *dst = out->page_indices + out->page_indptr[b];
        for (int32_t i = 0; i < np; i++) {
            const int32_t page = src[entry0 + i];
            if (page < 0 || page >= kv->num_pages) {
                st = sw_fail(SW_STATUS_INVALID, "%s[%lld] = %d (request %d, its page %d) is out "
                             "of range: num_pages=%d", where, (long long)(entry0 + i), page, b,
                             i, kv->num_pages);
                break;
            }
            dst[i] = page;
        }
        if (st == SW_OK)
            st = use_bits ? check_repeats_bitmap(dst, np, b, scratch, where, entry0)
                          : check_repeats(dst, np, b, scratch, where, entry0);
    }
    free(scratch);
    if (st != SW_OK)
        sw_paged_table_free(out);
    return st;
}

static sw_status stride_or(const char *name, int64_t given, int64_t def, int64_t *out)
{
    if (given < 0)
        return sw_fail(SW_STATUS_INVALID, "%s=%lld must be >= 0 (0: the layout's default)", name,
                       (long long)given);
    *out = given ? given : def;
    return SW_OK;
}

/* One pool's strides, with the layout's defaults, checked so that no two
 * (page, token, head) rows of head_dim elements overlap. */
static sw_status pool_strides(const sw_paged_table *pt, int32_t heads, int32_t d, char which,
                              int64_t row, int64_t head, int64_t page, sw_paged_strides *s)
{
    const int64_t ps = pt->page_size;
    const int nhd = pt->layout == SW_KV_NHD;
    char n1[24], n2[24], n3[24];
    snprintf(n1, sizeof n1, "%c_row_stride", which);
    snprintf(n2, sizeof n2, "%c_head_stride", which);
    snprintf(n3, sizeof n3, "%c_page_stride", which);
    SW_TRY(stride_or(n1, row, nhd ? (int64_t)heads * d : d, &s->token));
    SW_TRY(stride_or(n2, head, nhd ? d : ps * d, &s->head));
    SW_TRY(stride_or(n3, page, ps * heads * d, &s->page));
    /* (strides so large that an element offset wraps int64 would pass the
     * checks below and address memory before the pool: bounded first, in
     * doubles, to 2^60 elements) */
    const double last = (double)(pt->num_pages > 0 ? pt->num_pages - 1 : 0) * (double)s->page +
                        (double)(ps - 1) * (double)s->token + (double)(heads - 1) * (double)s->head +
                        (double)d;
    if (last > 0x1p60)
        return sw_fail(SW_STATUS_INVALID, "%s=%lld, %s=%lld and %s=%lld address %.3g elements "
                       "past the pool's start (at most 2^60)", n1, (long long)s->token, n2,
                       (long long)s->head, n3, (long long)s->page, last);
    /* The rows of a page (d elements at token*t + head*h) do not overlap
     * when the smaller stride spaces its rows at least d apart and the
     * larger one clears a whole run of them; pages then follow one another. */
    const int inner_heads = s->token >= s->head;
    const int64_t inner = inner_heads ? s->head : s->token;
    const int64_t outer = inner_heads ? s->token : s->head;
    const int64_t inner_n = inner_heads ? heads : ps, outer_n = inner_heads ? ps : heads;
    if (inner < d || (outer_n > 1 && outer < inner * (inner_n - 1) + d))
        return sw_fail(SW_STATUS_INVALID, "%s=%lld and %s=%lld make rows of a page overlap "
                       "(%d heads, page_size %d, head_dim %d)", n1, (long long)s->token, n2,
                       (long long)s->head, heads, pt->page_size, d);
    const int64_t extent = outer * (outer_n - 1) + inner * (inner_n - 1) + d;
    if (pt->num_pages > 1 && s->page < extent)
        return sw_fail(SW_STATUS_INVALID, "%s=%lld is smaller than a page's %lld elements", n3,
                       (long long)s->page, (long long)extent);
    return SW_OK;
}

sw_status sw_paged_resolve_strides(const sw_paged_table *pt, int32_t num_kv_heads,
                                   int32_t head_dim, const sw_prefill_tensors *t,
                                   sw_paged_strides *ks, sw_paged_strides *vs)
{
    /* a tensors struct from before the paged fields: the defaults */
    const int has = t->struct_size >= offsetof(sw_prefill_tensors, v_page_stride) +
                                          sizeof(t->v_page_stride);
    SW_TRY(pool_strides(pt, num_kv_heads, head_dim, 'k', t->k_row_stride,
                        has ? t->k_head_stride : 0, has ? t->k_page_stride : 0, ks));
    SW_TRY(pool_strides(pt, num_kv_heads, head_dim, 'v', t->v_row_stride,
                        has ? t->v_head_stride : 0, has ? t->v_page_stride : 0, vs));
    return SW_OK;
}

/* Element offset of request-local key j of kv head h in a pool. */
static inline int64_t key_offset(const sw_paged_table *pt, const sw_paged_strides *s,
                                 int32_t req, int64_t j, int32_t h)
{
    const int32_t page = pt->page_indices[pt->page_indptr[req] + j / pt->page_size];
    return page * s->page + (j % pt->page_size) * s->token + h * s->head;
}

/* Requests [b0, b1)'s keys and values, copied to dense [token][head][d]. */
static void gather(const sw_attn_problem *pb, const sw_paged_table *pt,
                   const sw_paged_strides *ks, const sw_paged_strides *vs, int32_t b0,
                   int32_t b1, char *kd, char *vd)
{
    const size_t es = sw_dtype_size(pb->dtype), rowb = (size_t)pb->head_dim * es;
    const int32_t H = pb->num_kv_heads;
    size_t o = 0;
    for (int32_t b = b0; b < b1; b++) {
        const int32_t len = pt->kv_indptr[b + 1] - pt->kv_indptr[b];
        for (int32_t j = 0; j < len; j++)
            for (int32_t h = 0; h < H; h++, o += rowb) {
                memcpy(kd + o, (const char *)pb->k + (size_t)key_offset(pt, ks, b, j, h) * es,
                       rowb);
                memcpy(vd + o, (const char *)pb->v + (size_t)key_offset(pt, vs, b, j, h) * es,
                       rowb);
            }
    }
}

/* The fast kernels read the pages in place: key rows numbered page by page
 * (request b's from page_indptr[b] x page_size), each located through the
 * table (sw_cpu_kv_row). */
static sw_status prefill_paged_in_place(const sw_attn_problem *pb, const sw_paged_table *pt,
                                        const sw_paged_strides *ks, const sw_paged_strides *vs,
                                        int num_threads)
{
    int64_t *row0 = malloc(sizeof(int64_t) * ((size_t)pb->batch + 1));
    if (!row0)
        return sw_fail(SW_STATUS_NO_MEMORY, "paged K/V on the CPU: %d requests", pb->batch);
    for (int32_t b = 0; b <= pb->batch; b++)
        row0[b] = (int64_t)pt->page_indptr[b] * pt->page_size;
    int32_t shift = -1;
    for (int32_t x = 0; x < 9; x++)
        if (pt->page_size == 1 << x)
            shift = x;
    const sw_cpu_pages pg = {pt->page_indices, pt->page_size, shift, ks->page, ks->token,
                             ks->head,         vs->page,        vs->token, vs->head};
    sw_attn_problem g = *pb;
    g.kv_indptr = pt->kv_indptr;
    g.pages = &pg;
    g.kv_row0 = row0;
    const sw_status st = sw_cpu_prefill_fast(&g, num_threads);
    free(row0);
    return st;
}

sw_status sw_cpu_prefill_paged(const sw_attn_problem *pb, const sw_paged_table *pt,
                               const sw_paged_strides *ks, const sw_paged_strides *vs,
                               int reference, int num_threads)
{
    /* (one pool for K and V read with two strides: the kernels tell K from V
     * by pointer, so those go through the gather below) */
    const int same = pb->k == pb->v && (ks->page != vs->page || ks->token != vs->token ||
                                        ks->head != vs->head);
    if (!reference && !same)
        return prefill_paged_in_place(pb, pt, ks, vs, num_threads);
    const size_t es = sw_dtype_size(pb->dtype);
    const size_t tok_bytes = 2 * (size_t)pb->num_kv_heads * pb->head_dim * es;
    size_t cap = 0;
    for (int32_t b = 0; b < pb->batch; b++) {
        const size_t one = (size_t)(pt->kv_indptr[b + 1] - pt->kv_indptr[b]) * tok_bytes;
        if (one > cap)
            cap = one;
    }
    /* the longest request, or the whole batch up to the step size */
    const size_t all = (size_t)pt->kv_indptr[pb->batch] * tok_bytes;
    const size_t step = all < SW_PAGED_GATHER_BYTES ? all : SW_PAGED_GATHER_BYTES;
    cap = cap > step ? cap : step;
    char *buf = sw_aligned_alloc(64, cap + 128);
    int32_t *qi = malloc(sizeof(int32_t) * ((size_t)pb->batch + 1));
    int32_t *ki = malloc(sizeof(int32_t) * ((size_t)pb->batch + 1));
    if (!buf || !qi || !ki) {
        sw_aligned_free(buf);
        free(qi);
        free(ki);
        return sw_fail(SW_STATUS_NO_MEMORY, "paged K/V on the CPU: cannot allocate %zu bytes to "
                       "gather pages into", cap);
    }
    sw_status st = SW_OK;
    for (int32_t b0 = 0; st == SW_OK && b0 < pb->batch;) {
        /* the group: requests from b0 while their K/V fit the buffer */
        int32_t b1 = b0 + 1;
        size_t bytes = (size_t)(pt->kv_indptr[b1] - pt->kv_indptr[b0]) * tok_bytes;
        while (b1 < pb->batch) {
            const size_t more = (size_t)(pt->kv_indptr[b1 + 1] - pt->kv_indptr[b1]) * tok_bytes;
            if (bytes + more > cap)
                break;
            bytes += more;
            b1++;
        }
        const size_t half = sw_align_up(bytes / 2, 64);
        gather(pb, pt, ks, vs, b0, b1, buf, buf + half);
        sw_attn_problem g = *pb;
        g.batch = b1 - b0;
        for (int32_t b = b0; b <= b1; b++) {
            qi[b - b0] = pb->qo_indptr[b] - pb->qo_indptr[b0];
            ki[b - b0] = pt->kv_indptr[b] - pt->kv_indptr[b0];
        }
        g.qo_indptr = qi;
        g.kv_indptr = ki;
        g.q = (const char *)pb->q + (size_t)pb->qo_indptr[b0] * pb->q_stride * es;
        g.o = (char *)pb->o + (size_t)pb->qo_indptr[b0] * pb->o_stride * es;
        g.lse = pb->lse ? pb->lse + (size_t)pb->qo_indptr[b0] * pb->num_qo_heads : NULL;
        g.k = buf;
        g.v = buf + half;
        g.k_stride = g.v_stride = (int64_t)pb->num_kv_heads * pb->head_dim;
        st = reference ? sw_cpu_prefill_ref(&g) : sw_cpu_prefill_fast(&g, num_threads);
        b0 = b1;
    }
    sw_aligned_free(buf);
    free(qi);
    free(ki);
    return st;
}

/* A write the append makes: the lowest token it writes on a page. */
typedef struct append_write {
    int32_t page, tok, req;
} append_write;

static int append_write_cmp(const void *a, const void *b)
{
    const append_write *x = a, *y = b;
    return x->page != y->page ? (x->page > y->page) - (x->page < y->page)
                              : (x->req > y->req) - (x->req < y->req);
}

/* Whether an append's writes (request b's last n[b] keys) touch a token
 * another request's table holds: a page shared by requests (a common
 * prefix) takes no append at or below a token the others hold, and two
 * requests never write one token. O(pages) with a page bitmap in front of
 * a sorted list of the written pages. */
static sw_status append_conflicts(const sw_paged_table *pt, int32_t batch,
                                  const int32_t *new_indptr)
{
    const int32_t ps = pt->page_size;
    int64_t nw = 0;
    for (int32_t b = 0; b < batch; b++) {
        const int32_t n = new_indptr[b + 1] - new_indptr[b];
        if (n > 0) {
            const int32_t len = pt->kv_indptr[b + 1] - pt->kv_indptr[b];
            nw += (len - 1) / ps - (len - n) / ps + 1;
        }
    }
    if (nw == 0 || batch < 2)
        return SW_OK;
    append_write *w = malloc(sizeof *w * (size_t)nw);
    /* the bitmap only where it is small beside the table; without it
     * every page takes the search */
    const size_t nbytes = (size_t)pt->num_pages / 8 + 1;
    const int use_bits = page_bitmap_fits(pt->num_pages, pt->page_indptr[batch]);
    uint8_t *bits = use_bits ? calloc(nbytes, 1) : NULL;
    if (!w || (use_bits && !bits)) {
        free(w);
        free(bits);
        return sw_fail(SW_STATUS_NO_MEMORY, "append: %lld page writes to check",
                       (long long)nw);
    }
    int64_t k = 0;
    for (int32_t b = 0; b < batch; b++) {
        const int32_t n = new_indptr[b + 1] - new_indptr[b];
        if (n <= 0)
            continue;
        const int32_t len = pt->kv_indptr[b + 1] - pt->kv_indptr[b];
        for (int32_t pi = (len - n) / ps; pi <= (len - 1) / ps; pi++) {
            const int32_t page = pt->page_indices[pt->page_indptr[b] + pi];
            w[k].page = page;
            w[k].tok = pi == (len - n) / ps ? (len - n) % ps : 0;
            w[k].req = b;
            k++;
            if (bits)
                bits[page >> 3] |= (uint8_t)(1u << (page & 7));
        }
    }
    qsort(w, (size_t)nw, sizeof *w, append_write_cmp);
    sw_status st = SW_OK;
    for (int32_t c = 0; c < batch && st == SW_OK; c++) {
        const int32_t len = pt->kv_indptr[c + 1] - pt->kv_indptr[c];
        const int32_t np = pt->page_indptr[c + 1] - pt->page_indptr[c];
        for (int32_t pi = 0; pi < np && st == SW_OK; pi++) {
            const int32_t page = pt->page_indices[pt->page_indptr[c] + pi];
            if (bits && !(bits[page >> 3] & (1u << (page & 7))))
                continue;
            const int32_t held = pi < np - 1 ? ps : len - pi * ps; /* tokens c holds there */
            int64_t lo = 0, hi = nw; /* the first write to the page */
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo) / 2;
                if (w[mid].page < page)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (int64_t x = lo; x < nw && w[x].page == page; x++)
                if (w[x].req != c && w[x].tok < held) {
                    st = sw_fail(SW_STATUS_INVALID, "request %d appends to page %d at token %d, "
                                 "which request %d holds (its page %d): a shared page takes no "
                                 "append (copy it first); nothing written", w[x].req, page,
                                 w[x].tok, c, pi);
                    break;
                }
        }
    }
    free(w);
    free(bits);
    return st;
}

sw_status sw_paged_kv_append_host(const sw_prefill_params *params, int32_t batch,
                                  const sw_paged_kv *kv, const int32_t *new_indptr,
                                  const void *k_new, const void *v_new, int64_t new_row_stride,
                                  const sw_prefill_tensors *t)
{
    SW_TRY(sw_prefill_validate_params(params));
    if (!t)
        return sw_fail(SW_STATUS_INVALID, "tensors is NULL");
    if (t->struct_size < offsetof(sw_prefill_tensors, workspace_bytes) + sizeof(t->workspace_bytes))
        return sw_fail(SW_STATUS_INVALID, "tensors->struct_size=%u is too small; call "
                       "sw_prefill_tensors_init()", t->struct_size);
    if (!new_indptr)
        return sw_fail(SW_STATUS_INVALID, "new_indptr is NULL");
    sw_paged_table pt;
    SW_TRY(sw_paged_table_build(kv, batch, &pt));
    sw_status st = SW_OK;
    const int32_t H = params->num_kv_heads, d = params->head_dim;
    if (new_indptr[0] != 0)
        st = sw_fail(SW_STATUS_INVALID, "new_indptr[0]=%d, must be 0", new_indptr[0]);
    for (int32_t b = 0; st == SW_OK && b < batch; b++) {
        const int64_t n = (int64_t)new_indptr[b + 1] - new_indptr[b];
        const int32_t len = pt.kv_indptr[b + 1] - pt.kv_indptr[b];
        if (n < 0)
            st = sw_fail(SW_STATUS_INVALID, "new_indptr[%d]=%d < new_indptr[%d]=%d: offsets "
                         "must not decrease", b + 1, new_indptr[b + 1], b, new_indptr[b]);
        else if (n > len)
            st = sw_fail(SW_STATUS_INVALID, "request %d appends %lld tokens but its table "
                         "holds %d: the table must already count the new tokens", b,
                         (long long)n, len);
    }
    const int64_t rows = batch > 0 && st == SW_OK ? new_indptr[batch] : 0;
    int64_t rs = new_row_stride ? new_row_stride : (int64_t)H * d;
    if (st == SW_OK && rs < (int64_t)H * d)
        st = sw_fail(SW_STATUS_INVALID, "new_row_stride=%lld is smaller than heads*head_dim=%d",
                     (long long)new_row_stride, H * d);
    if (st == SW_OK && sw_rows_too_far(rows, rs, (int64_t)H * d))
        st = sw_fail(SW_STATUS_INVALID, "new_row_stride=%lld over %lld rows addresses more "
                     "than 2^60 elements", (long long)rs, (long long)rows);
    if (st == SW_OK && rows > 0 && (!k_new || !v_new || !t->k || !t->v))
        st = sw_fail(SW_STATUS_INVALID, "%s is NULL", !k_new ? "k_new" : !v_new ? "v_new"
                                                      : !t->k ? "tensors->k" : "tensors->v");
    sw_paged_strides ks, vs;
    if (st == SW_OK)
        st = sw_paged_resolve_strides(&pt, H, d, t, &ks, &vs);
    if (st == SW_OK)
        st = append_conflicts(&pt, batch, new_indptr);
    if (st == SW_OK) {
        const size_t es = sw_dtype_size(params->dtype), rowb = (size_t)d * es;
        for (int32_t b = 0; b < batch; b++) {
            const int32_t len = pt.kv_indptr[b + 1] - pt.kv_indptr[b];
            const int32_t n = new_indptr[b + 1] - new_indptr[b];
            for (int32_t i = 0; i < n; i++) {
                const int64_t j = (int64_t)len - n + i, r = new_indptr[b] + i;
                for (int32_t h = 0; h < H; h++) {
                    const size_t src = ((size_t)r * rs + (size_t)h * d) * es;
                    memcpy((char *)t->k + (size_t)key_offset(&pt, &ks, b, j, h) * es,
                           (const char *)k_new + src, rowb);
                    memcpy((char *)t->v + (size_t)key_offset(&pt, &vs, b, j, h) * es,
                           (const char *)v_new + src, rowb);
                }
            }
        }
    }
    sw_paged_table_free(&pt);
    return st;
}
