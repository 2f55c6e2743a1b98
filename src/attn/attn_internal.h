/* Internal contract between the prefill front end (prefill.c), the planner,
 * and the backends (CPU reference, CPU fast path, CUDA kernels). */
#ifndef SW_ATTN_INTERNAL_H
#define SW_ATTN_INTERNAL_H

#include "core/sw_cuda.h"
#include "spillway.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A fully validated problem, strides resolved (elements per row). */
/* K/V in pages, read in place by the CPU fast path: key row r (request b's
 * key j is row kv_row0[b] + j) lies on page page_indices[r / page_size] at
 * token r % page_size; the pools' strides in elements. */
typedef struct sw_cpu_pages {
    const int32_t *page_indices;
    int32_t page_size;
    int32_t shift;            /* log2(page_size) when a power of two, else -1 */
    int64_t k_page, k_token, k_head;
    int64_t v_page, v_token, v_head;
} sw_cpu_pages;

typedef struct sw_attn_problem {
    sw_dtype dtype;
    int32_t batch;
    int32_t num_qo_heads;
    int32_t num_kv_heads;
    int32_t head_dim;
    int32_t causal;
    float sm_scale;            /* resolved: never 0 */
    const int32_t *qo_indptr;  /* host, batch+1 */
    const int32_t *kv_indptr;  /* host, batch+1 */
    const void *q, *k, *v;
    void *o;
    float *lse;                /* may be NULL */
    int64_t q_stride, k_stride, v_stride, o_stride;
    /* CPU fast path only: K/V in pages (k, v the pools; k_stride, v_stride
     * unused) with request b's keys from row kv_row0[b]; NULL: contiguous */
    const sw_cpu_pages *pages;
    const int64_t *kv_row0;
} sw_attn_problem;

/* Per-request table uploaded with the work list (device side reads it). */
typedef struct sw_req_info {
    int32_t q_start;   /* first query row */
    int32_t q_len;
    int32_t kv_start;  /* first key row */
    int32_t kv_len;
} sw_req_info;

/* One tile of work: rows r in [0, tile_m) of the tile map to
 *   token = q_tok0 + r / pack, qo head = head0 + r % pack
 * within request `req` (token index relative to the request's q_start).
 * pack = 1: one query head (head0), tile_m consecutive tokens.
 * pack = G (group size): the G query heads of kv head head0/G share the tile,
 * so K/V are loaded once for all of them (short queries, GQA). */
typedef struct sw_work_item {
    int32_t req;
    int32_t q_tok0;
    int32_t head0;
    int32_t pack;
} sw_work_item;

/* Planner (pure host function, unit-tested without a GPU).
 * Counts (items == NULL) or fills (up to `capacity`) the work list for tile
 * height `tile_m`. A request is packed (pack = group size) when the group has
 * more than one query head, the group size divides tile_m and
 * q_len <= pack_max_q_len; otherwise pack = 1.
 * Order: the (request, kv head) groups, longest item first, are cut into
 * sections whose K/V (kv_len * kv_token_bytes per group) fit in
 * section_bytes (a group larger than that is a section of its own); the
 * list is section by section, and within a section by descending cost
 * (visible keys of the tile's last token; ties by request, head, token).
 * So a persistent grid that takes items in list order starts the longest
 * tiles first within a section while the section's K/V stay in L2.
 * section_bytes <= 0: one section, plain longest-first order. Requests with q_len = 0 yield
 * no items; requests with kv_len = 0 yield items (the kernel writes zeros and
 * LSE = -inf). Returns the number of items, -1 if it exceeds INT32_MAX, -2
 * if a temporary allocation failed. */
int64_t sw_plan_work(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch,
                     int32_t num_qo_heads, int32_t num_kv_heads, int32_t causal,
                     int32_t tile_m, int32_t pack_max_q_len, int64_t kv_token_bytes,
                     int64_t section_bytes, sw_work_item *items, int64_t capacity);

/* Whether the Hopper kernel's wide K/V tiles (non-causal d128: 144 keys
 * instead of 128) pay for this batch: they gain 3-4.5% on long requests
 * (1x16k, mix-a) but pad every request's last tile further and leave the
 * K ring one stage shallower, which costs short requests (16x1k: -27%; 4x4k
 * about even; docs/perf/prefill.md, v10). 1 when requests of >= 8192 keys
 * hold >= 75% of the batch's non-causal work (q_len x kv_len). */
int32_t sw_plan_wide_kv(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch);

/* What the plan decides beyond the user's parameters: the library's
 * defaults (sw_prefill_tuning_default), open to tests and bench/dev variants
 * through sw_prefill_plan_create_tuned. Not a user option and not read from
 * the environment. */
typedef struct sw_prefill_tuning {
    /* GQA packing: only requests of at most this many query tokens are
     * packed (INT32_MAX: every request whose group divides the tile; packing
     * all measured +2..7% at d64/d128 on the H200, neutral at d256). */
    int32_t pack_max_q;
    /* L2 sections of the work list (sw_plan_work): K/V bytes per section;
     * 0 = one section, plain longest-first order. */
    int64_t section_bytes;
    /* Hopper, non-causal d128: -1 = sw_plan_wide_kv decides, 0 / 1 = the
     * 128- / 144-key K/V tiles. */
    int32_t wide_kv;
} sw_prefill_tuning;

void sw_prefill_tuning_default(sw_prefill_tuning *t);

/* sw_prefill_plan_create with a tuning other than the default (NULL = the
 * default). */
sw_status sw_prefill_plan_create_tuned(const sw_prefill_params *params, int32_t batch,
                                       const int32_t *qo_indptr_host,
                                       const int32_t *kv_indptr_host,
                                       const sw_prefill_tuning *tuning, sw_prefill_plan **out);

/* Whether `rows` rows `stride` elements apart, `width` elements each, reach
 * past 2^60 elements from the first (an offset that wraps int64 would
 * address memory before the tensor): in doubles, which do not wrap. */
static inline int sw_rows_too_far(int64_t rows, int64_t stride, int64_t width)
{
    return rows > 1 && (double)(rows - 1) * (double)stride + (double)width > 0x1p60;
}

/* Visible keys of query token t (0-based) of a request: causal bottom-right
 * alignment; clamped to [0, kv_len]. */
static inline int32_t sw_visible_keys(int32_t t, int32_t q_len, int32_t kv_len, int32_t causal)
{
    if (!causal)
        return kv_len;
    int64_t v = (int64_t)t + 1 + ((int64_t)kv_len - q_len);
    if (v < 0)
        v = 0;
    if (v > kv_len)
        v = kv_len;
    return (int32_t)v;
}

/* FLOPs by the reporting convention. */
double sw_attn_flops(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch,
                     int32_t num_qo_heads, int32_t head_dim, int32_t causal);

/* Validation of params + indptr (host). Fills sw_last_error on failure. */
sw_status sw_prefill_validate_params(const sw_prefill_params *p);
sw_status sw_prefill_validate_indptr(int32_t batch, const int32_t *qo_indptr,
                                     const int32_t *kv_indptr);

/* A checked page table in one normal form (paged.c): request b's pages are
 * page_indices[page_indptr[b] .. page_indptr[b+1]), its keys
 * kv_indptr[b] .. kv_indptr[b+1] counted as if contiguous. */
typedef struct sw_paged_table {
    int32_t page_size;
    sw_kv_layout layout;
    int32_t num_pages;
    int32_t *page_indptr;   /* batch+1 */
    int32_t *page_indices;  /* every entry in [0, num_pages), none twice within a request */
    int32_t *kv_indptr;     /* batch+1 */
} sw_paged_table;

/* Checks `kv` for `batch` requests (every entry that a run reads; the
 * detail names a bad one: lengths first, then each request's indices) and builds its normal form. Pure host
 * work; on failure *out is empty. */
sw_status sw_paged_table_build(const sw_paged_kv *kv, int32_t batch, sw_paged_table *out);
void sw_paged_table_free(sw_paged_table *t);

/* A pool's strides in elements, the layout's defaults resolved. */
typedef struct sw_paged_strides {
    int64_t token, head, page;
} sw_paged_strides;

/* The K and V pools' strides from the tensors (0: the layout's default),
 * refused when rows of a page or pages would overlap. */
sw_status sw_paged_resolve_strides(const sw_paged_table *pt, int32_t num_kv_heads,
                                   int32_t head_dim, const sw_prefill_tensors *t,
                                   sw_paged_strides *ks, sw_paged_strides *vs);

/* Paged K/V on the CPU: pb's k and v are the pools (its kv_indptr and K/V
 * strides are not used). Requests are taken a group at a time, their pages
 * gathered into dense K/V, and the group run by the reference (reference =
 * 1) or the fast path. */
sw_status sw_cpu_prefill_paged(const sw_attn_problem *pb, const sw_paged_table *pt,
                               const sw_paged_strides *ks, const sw_paged_strides *vs,
                               int reference, int num_threads);

/* CPU backends. Run to completion. */
sw_status sw_cpu_prefill_ref(const sw_attn_problem *pb);
sw_status sw_cpu_prefill_fast(const sw_attn_problem *pb, int num_threads);
/* Name of the instruction set the fast path picked at run time ("amx", "avx512bf16",
 * "avx512", "avx2", "scalar"). */
const char *sw_cpu_prefill_isa(void);

/* ---------------------------------------------------------------- CUDA -- */
/* Implemented in src/cuda/attn/ when built with CUDA; prefill_cuda_stub.c
 * otherwise. The runtime wrappers they use are core/sw_cuda.h. */

/* Paged K/V gathered into dense rows by the Hopper prefill kernel itself
 * (sw_paged_cuda_plan; the pool fields as in sw_cuda_paged_args). The
 * gather is cut into tiles of tile_keys keys, the prefill kernel's K/V
 * tile, listed in the order the work list first reads them (a request's
 * tiles last first, as the kernel visits them); a tile into pieces of
 * piece_keys keys. Two otherwise idle warps of every CTA claim pieces in
 * list order, copy them and count them into tile_done; the producer loads
 * a K/V tile once its count is tile_keys / piece_keys. num_tiles = 0: K/V
 * are dense already. */
typedef struct sw_gather_tile {
    int32_t row0;   /* dense row (kv_indptr) of the tile's first key */
    int32_t tok0;   /* its index within the request */
    int32_t keys;   /* keys in the tile, 1 .. tile_keys */
    int32_t pbase;  /* the request's first entry of page_indices */
} sw_gather_tile;

typedef struct sw_cuda_gather_args {
    const void *k_pool, *v_pool;
    int64_t k_tok, k_head, k_page;      /* pool strides, elements */
    int64_t v_tok, v_head, v_page;
    int32_t page_size, ps_log2;         /* ps_log2 = log2(page_size), -1 if not a power of 2 */
    const int32_t *page_indices;        /* device */
    void *k_dense, *v_dense;            /* [total_kv][num_kv_heads][head_dim] */
    const sw_gather_tile *tiles;        /* device, num_tiles */
    int32_t num_tiles, tile_keys, piece_keys;
    const int32_t *tile_base;           /* device [batch]: the counter of the request's
                                         * last tile; its tile j has tile_base + (n - 1 - j) */
    int32_t *tile_done;                 /* device [num_tiles + 2], 0 on entry: pieces copied
                                         * a tile, then the gatherers done and their claims */
    int32_t bulk;                       /* 1: a piece's K rows (and its V rows) lie in one
                                         * page, contiguous, at most SW_GATHER_BULK_BYTES,
                                         * 16-byte aligned: the Hopper kernel's gatherers copy
                                         * them by bulk copies through shared memory */
} sw_cuda_gather_args;

/* Launch-time arguments of the portable kernel. All pointers are device
 * pointers; `work` and `reqs` live in the workspace (uploaded by run()). */
typedef struct sw_cuda_prefill_args {
    sw_dtype dtype;
    int32_t num_qo_heads, num_kv_heads, head_dim, causal;
    float sm_scale;
    const void *q, *k, *v;
    void *o;
    float *lse;                 /* may be NULL */
    int64_t q_stride, k_stride, v_stride, o_stride;
    const sw_work_item *work;   /* device, num_work items, longest first */
    int32_t num_work;
    const sw_req_info *reqs;    /* device, batch entries */
    int32_t batch;
    int32_t *counter;           /* device int, 0 on entry; the kernel leaves it 0 */
    int32_t grid;               /* persistent grid size chosen at plan time */
    int32_t total_q, total_kv;  /* rows of Q/O and of K/V (last indptr entries) */
    int32_t wide_kv;            /* Hopper, non-causal d128: the wide K/V tile kernel */
    sw_cuda_gather_args gather; /* Hopper over pages: K/V gathered in the kernel */
} sw_cuda_prefill_args;

/* Paged K/V on a CUDA backend (paged_cuda.c; src/cuda/attn/paged_decode.cu).
 * A batch whose requests all have q_len x group <= SW_DECODE_ROWS runs the
 * split-KV decode kernel over the pages; any other batch has its pages
 * gathered into dense K/V in the workspace and runs the ragged prefill
 * kernel over them. */
#define SW_DECODE_ROWS 16        /* query rows of one (request, kv head) item */
#define SW_DECODE_MAX_SPLITS 128 /* items of one (request, kv head) at most */

typedef struct sw_decode_item {
    int32_t req, kvh;
    int32_t k0, k1;  /* the request's keys [k0, k1) */
    int32_t part;    /* < 0: writes O and LSE; else its partial-state slot */
    int32_t merge;   /* the merge that folds it (< 0 when part < 0) */
} sw_decode_item;

typedef struct sw_decode_merge {
    int32_t req, kvh;
    int32_t part0, parts; /* slots part0 .. part0 + parts - 1 */
} sw_decode_merge;

/* The decode split (pure, host). `slots` is how many items the device
 * runs at once (SMs x resident CTAs). Each (request, kv head) of a request
 * with q_len > 0 gets n = ceil(kv_len / chunk) items of near-equal key
 * ranges (n >= 1, so a request without keys still has its rows written;
 * n <= SW_DECODE_MAX_SPLITS). The chunk is the one whose estimated time,
 * waves x (longest item + a fixed cost per item) + a fixed cost of any
 * split (the merge), is least over 1..8 waves of `slots` items: a batch
 * whose pairs fill the device is not split, nor a short one (a few hundred
 * keys), one long request is cut into about `slots` pieces. Items come longest first;
 * the items of a pair split in n > 1 write partial slots that one merge
 * folds. With items == NULL only counts. Returns the number of items;
 * *num_merges and *num_parts are counts too. The items are at most the
 * pairs of requests with rows, or 8 x slots, whichever is more (callers
 * size buffers by it: a plan past it returns -3 and writes nothing); -2:
 * no memory. */
int64_t sw_plan_decode(const int32_t *qo_indptr, const int32_t *kv_indptr, int32_t batch,
                       int32_t num_kv_heads, int64_t slots, sw_decode_item *items,
                       sw_decode_merge *merges, int64_t *num_merges, int64_t *num_parts);

/* A decode plan's small arrays carried in the decode launch's own
 * parameters instead of uploaded before it (the swap engine's resident
 * path): a copy-engine upload between two calls' kernels holds the second
 * until the first is done and the copy has crossed. Word offsets into w of
 * qo_indptr, kv_indptr and page_indptr (batch + 1 words each), the items
 * (6 words each) and the merges (4 words each); at most
 * SW_DECODE_INLINE_WORDS words in all (sw_decode_inline_words). */
#define SW_DECODE_INLINE_WORDS 4096
typedef struct sw_decode_inline {
    int32_t qo, kv, pi, items, merges, unused;
    int32_t w[SW_DECODE_INLINE_WORDS];
} sw_decode_inline;

static inline int64_t sw_decode_inline_words(int32_t batch, int64_t items, int64_t merges)
{
    return 3 * ((int64_t)batch + 1) + (int64_t)(sizeof(sw_decode_item) / sizeof(int32_t)) * items +
           (int64_t)(sizeof(sw_decode_merge) / sizeof(int32_t)) * merges;
}

typedef struct sw_cuda_paged_args {
    sw_dtype dtype;
    int32_t num_qo_heads, num_kv_heads, head_dim, causal;
    float sm_scale;
    const void *q, *k_pool, *v_pool;
    void *o;
    float *lse;                      /* may be NULL */
    int64_t q_stride, o_stride;      /* elements */
    int64_t k_tok, k_head, k_page;   /* pool strides, elements */
    int64_t v_tok, v_head, v_page;
    int32_t page_size, ps_log2;      /* ps_log2 = log2(page_size), -1 if not a power of 2 */
    int32_t batch, total_kv;
    /* device copies (workspace) of the plan's offsets and table */
    const int32_t *qo_indptr, *kv_indptr, *page_indptr, *page_indices;
    const sw_decode_item *items;
    int32_t num_items;
    const sw_decode_merge *merges;
    int32_t num_merges;
    float *part_o;                   /* [slots][SW_DECODE_ROWS][head_dim] */
    float *part_lse;                 /* [slots][SW_DECODE_ROWS] */
    /* NULL: a merge kernel folds the partial states after the decode
     * kernel; else [num_merges] counters, zero on entry: the last item of a
     * merge to finish folds it and sets its counter back to 0 (one launch) */
    int32_t *merge_count;
    /* NULL: num_items CTAs run; else the launch has num_items CTAs (a
     * fixed grid, captured in a CUDA graph) and those from *num_items_dev
     * on return at once */
    const int32_t *num_items_dev;
    void *k_dense, *v_dense;         /* gather: [total_kv][num_kv_heads][head_dim] */
    /* host memory, NULL: the plan's offsets, items and merges are the
     * device pointers above; else they are these words, passed by value
     * in the decode launch (page_indices stays a device pointer); needs
     * merge_count when there are merges */
    const sw_decode_inline *inl;
} sw_cuda_paged_args;

/* 1 when every request's rows (q_len x group) fit one decode item. */
int sw_paged_decode_fits(const int32_t *qo_indptr, int32_t batch, int32_t group);

/* The CUDA part of a paged plan. Its region of the workspace starts at
 * ws_off: a pinned blob [qo_indptr | kv_indptr | page_indptr |
 * page_indices | items | merges] uploaded by each run, then the partial
 * states (decode) or the dense K and V (gather). */
typedef struct sw_paged_cuda {
    int decode;              /* 1: the decode kernel; 0: gather + prefill kernel */
    void *blob;
    struct sw_staging *stage; /* the blob's record (core/sw_cuda.h) */
    size_t blob_bytes, ws_off, ws_end;
    size_t qo_off, kv_off, pi_off, px_off, items_off, merges_off; /* in the blob */
    size_t tiles_off, tbase_off, tdone_off;                       /* in the blob */
    size_t part_o_off, part_lse_off, kd_off, vd_off;              /* in the workspace */
    int32_t num_items, num_merges;
    int32_t num_tiles, tile_keys; /* > 0: the prefill kernel gathers (sw_cuda_gather_args) */
} sw_paged_cuda;

/* Keys per K/V tile of the Hopper prefill kernel (hopper_kernel.cuh,
 * traits::BN; its launch refuses a gather planned for another). */
static inline int32_t sw_hopper_tile_n(int32_t head_dim, int32_t wide)
{
    return head_dim == 256 ? 64 : head_dim == 64 ? 96 : wide ? 144 : 128;
}

/* Keys of one piece of the Hopper kernel's own gather: the first tile the
 * items read is copied by tile_n / 4 warps at once. */
#define SW_GATHER_PIECE_KEYS 4
#define SW_GATHER_BULK_BYTES 8192 /* a bulk gatherer's K or V staging slot */

/* 1 when every gather piece's K rows, and its V rows, are one contiguous
 * run of at most SW_GATHER_BULK_BYTES in one page, 16-byte aligned (pools
 * and page strides; the dense rows are checked by the run), and the tiles
 * are the plain kernel's (not the wide one's): the Hopper kernel's bulk
 * gatherers then copy them (sw_cuda_gather_args.bulk). Pure. */
int32_t sw_paged_gather_bulk_ok(const sw_attn_problem *pb, const sw_paged_table *pt,
                                const sw_paged_strides *ks, const sw_paged_strides *vs,
                                int32_t tile_keys);

/* Plans the CUDA run of a checked table (p->device is made current):
 * decode = sw_paged_decode_fits(...) picks the path. Not decode: with
 * tile_keys > 0 (the Hopper kernel's tile_n) the prefill kernel gathers the
 * pages itself, in the order of `work` (the prefill plan's list, num_work
 * items); else a gather kernel runs before it. */
sw_status sw_paged_cuda_plan(sw_paged_cuda *pc, const sw_prefill_params *p, int32_t batch,
                             const int32_t *qo_indptr, const sw_paged_table *pt, int decode,
                             const sw_work_item *work, int32_t num_work, int32_t tile_keys,
                             size_t ws_off);
/* Enqueues the upload and the decode (decode) or the gather (not decode:
 * *k_dense / *v_dense then point at the dense K/V in the workspace for the
 * prefill kernel; with the kernel's own gather planned, nothing is
 * launched and *gather is filled for it). pb holds the validated Q/O/LSE
 * and the pools as k/v. */
sw_status sw_paged_cuda_run(const sw_paged_cuda *pc, const sw_attn_problem *pb,
                            const sw_paged_table *pt, const sw_paged_strides *ks,
                            const sw_paged_strides *vs, void *workspace, void *stream,
                            const void **k_dense, const void **v_dense,
                            sw_cuda_gather_args *gather);
void sw_paged_cuda_free(sw_paged_cuda *pc);

/* SM count and resident decode CTAs per SM on `device`. */
sw_status sw_cuda_paged_decode_config(int32_t device, int32_t head_dim, sw_dtype dtype,
                                      int32_t *sms, int32_t *ctas_per_sm);
/* The decode kernel over a.items, then the merge over a.merges. */
sw_status sw_cuda_paged_decode_launch(const sw_cuda_paged_args *a, void *stream);
/* Pages -> a.k_dense / a.v_dense. */
sw_status sw_cuda_paged_gather_launch(const sw_cuda_paged_args *a, void *stream);

/* Device query for planning: SM count and the tile height the portable kernel
 * uses for this head_dim on this device. Returns SW_STATUS_NO_DEVICE when no
 * usable device. */
sw_status sw_cuda_prefill_portable_config(int32_t device, int32_t head_dim, sw_dtype dtype,
                                          int32_t *tile_m, int32_t *grid_ctas);
sw_status sw_cuda_prefill_portable_launch(const sw_cuda_prefill_args *a, void *stream);
/* The Hopper kernel (wgmma + TMA): the same contract. config returns
 * SW_STATUS_UNSUPPORTED when the device is not compute capability 9.0 or the
 * build has no sm_90a code, so the front end can fall back to the portable
 * kernel. */
sw_status sw_cuda_prefill_hopper_config(int32_t device, int32_t head_dim, sw_dtype dtype,
                                        int32_t *tile_m, int32_t *grid_ctas);
sw_status sw_cuda_prefill_hopper_launch(const sw_cuda_prefill_args *a, void *stream);

#ifdef __cplusplus
}
#endif
#endif
