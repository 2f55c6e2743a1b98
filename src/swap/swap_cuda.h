/* The swap engine's CUDA entry points (the .cu files of src/cuda/swap; stubs in
 * src/core/cuda_stub.c return SW_STATUS_NO_DEVICE in a build without CUDA),
 * so that the engine's C sources never include a CUDA header. Device
 * pointers and streams/events are void *. */
#ifndef SW_SWAP_CUDA_H
#define SW_SWAP_CUDA_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- runtime (swap_rt.cu) ---- */
sw_status sw_cuda_swap_alloc(void **p, size_t bytes);   /* cudaMalloc; *p = NULL on failure */
void sw_cuda_swap_free(void *p);
sw_status sw_cuda_swap_stream_create(void **stream);    /* non-blocking stream */
void sw_cuda_swap_stream_destroy(void *stream);
sw_status sw_cuda_swap_event_create(void **ev, int timing);
void sw_cuda_swap_event_destroy(void *ev);
sw_status sw_cuda_swap_event_record(void *ev, void *stream);
sw_status sw_cuda_swap_stream_wait(void *stream, void *ev); /* GPU-side wait */
sw_status sw_cuda_swap_event_sync(void *ev);
int sw_cuda_swap_event_done(void *ev); /* 1 done, 0 not yet, < 0 a status */
int sw_cuda_swap_capturing(void *stream); /* 1 capturing, 0 not, < 0 a status */
sw_status sw_cuda_swap_event_record_node(void *ev, void *stream); /* in a capture */
sw_status sw_cuda_swap_event_ms(float *ms, void *start, void *stop);
/* cudaMemcpyAsync with cudaMemcpyDefault (unified addressing). */
sw_status sw_cuda_swap_copy(void *dst, const void *src, size_t bytes, void *stream);
/* n such copies in stream order, as one cudaMemcpyBatchAsync where the
 * runtime has it (the copies of a batch in any order among themselves: no
 * two may overlap), else one call each. */
sw_status sw_cuda_swap_copy_batch(void *const *dst, const void *const *src, const size_t *bytes,
                                  size_t n, void *stream);
/* cudaMemsetAsync to 0. */
sw_status sw_cuda_swap_zero(void *dst, size_t bytes, void *stream);
sw_status sw_cuda_swap_sm_count(int32_t device, int32_t *sms);
/* cuda_rt.cu (also declared in store/store_internal.h). */
sw_status sw_cuda_stream_sync(void *stream);
int sw_cuda_is_device_ptr(const void *p);

/* ---- kernels ---- */
/* One block of a tile as the tile kernel sees it (16-byte aligned array in
 * device memory, or in pinned host memory read in place: dev_internal.h's
 * DESC_K). */
typedef struct sw_cuda_swap_blk {
    int32_t slot;      /* pool slot */
    int32_t block;     /* logical block: first token = block * block_size */
    int32_t valid;     /* tokens */
    int32_t dtype;     /* sw_swap_kv_dtype */
    float k_scale, v_scale;
    int32_t pad[2];
} sw_cuda_swap_blk;

/* One missing block of a tile: where its stripes are in the staging buffer
 * and which slot they go to. Staging index of stripe (h, kind) of missing
 * block m: layout 0 (block-major, the store's write order):
 * (m * H + h) * 2 + kind; layout 1 (stream-major, the store's file order):
 * (kind * H + h) * stage_blocks + m; times stage_stride bytes. */
typedef struct sw_cuda_swap_fill {
    int32_t slot, m, valid, dtype;
} sw_cuda_swap_fill;

typedef struct sw_cuda_swap_scatter_args {
    const uint8_t *stage;
    size_t stage_stride;
    int32_t stage_blocks, layout;
    const sw_cuda_swap_fill *fill; /* device [nfill] */
    int32_t nfill;
    uint8_t *pool;
    size_t slot_bytes, v_off;
    int32_t H, B, D;
} sw_cuda_swap_scatter_args;

/* One stripe of a tile's host-tier hits: read straight from the store's
 * pinned host tier (a leased entry, store/host_lease.h; under unified
 * addressing its host address is a device address), written into its
 * slot, and its CRC32C computed on the way and compared with the store's
 * (as a raw register, sw_crc32c_to_raw of store/crc32c_gf2.h). A stripe
 * that does not match adds its id to the mismatch report; its bytes are in
 * the slot all the same (the engine drops the slot after the call). */
typedef struct sw_cuda_swap_gather_item {
    const void *src;       /* pinned host payload, 16-byte aligned */
    uint64_t dst;          /* byte offset of the stripe in the pool */
    uint32_t length;       /* bytes, a multiple of 16 */
    uint32_t crc_raw;      /* the store's CRC32C of them, raw */
    uint32_t id;           /* reported in bad[] on a mismatch */
    uint32_t pad;
} sw_cuda_swap_gather_item;

typedef struct sw_cuda_swap_gather_args {
    const sw_cuda_swap_gather_item *g;  /* device [n] */
    int32_t n;
    uint8_t *pool;
    uint32_t *bad;                 /* device: [0] = mismatches, [1..bad_cap] their ids */
    uint32_t bad_cap;
    int32_t ctas;                  /* CTAs of the launch, each looping over the
                                    * stripes (0 or >= n: one CTA per stripe) */
} sw_cuda_swap_gather_args;

/* Attention of one sequence's query rows over one tile's blocks: CTA (c,
 * kv head h, row group y) writes the (max, sum, acc) state of RG=8 (row,
 * group head) pairs over its block range into part; the merge kernel folds
 * the partial states into the running state (m, l, acc; m in the log2
 * domain). */
typedef struct sw_cuda_swap_tile_args {
    const uint8_t *pool;
    size_t slot_bytes, v_off;
    const sw_cuda_swap_blk *blk;   /* device [nblk] */
    int32_t nblk;
    const uint16_t *q;             /* device BF16, row 0 of this sequence */
    int32_t ql, Hq, H, G, D, B;
    int64_t len;                   /* tokens of the sequence */
    int32_t causal;
    float qscale;                  /* sm_scale * log2(e) */
    int32_t nchunks, nrg;          /* grid: nchunks x H x nrg */
    float *part;                   /* [nchunks][H][nrg][8][D + 2] */
    /* merge */
    int32_t row0;                  /* first query row of the sequence */
    float *m, *l, *acc;            /* running state [rows][Hq] (acc x D) */
} sw_cuda_swap_tile_args;

/* Rows of one tile-kernel CTA (query rows x group heads), every kernel. */
#define SW_CUDA_SWAP_RG 8

#ifdef __CUDACC__
#define SW_SWAP_HD static inline __host__ __device__
#else
#define SW_SWAP_HD static inline
#endif

/* Floats of one chunk's partial states in sw_cuda_swap_tile_args.part: H kv
 * heads x nrg row groups x SW_CUDA_SWAP_RG rows of (max, sum, acc[D]). */
SW_SWAP_HD size_t sw_cuda_swap_chunk_floats(int32_t H, int32_t nrg, int32_t D)
{
    return (size_t)H * (size_t)nrg * SW_CUDA_SWAP_RG * (size_t)(D + 2);
}

/* 1 when the tile kernel has an instance for head_dim d. */
int sw_cuda_swap_head_dim_ok(int32_t d);
sw_status sw_cuda_swap_scatter(const sw_cuda_swap_scatter_args *a, void *stream);
/* swap_gather.cu: `ctas` CTAs walking the n stripes (n = 0: nothing). */
sw_status sw_cuda_swap_gather(const sw_cuda_swap_gather_args *a, void *stream);
/* The tile kernel: bulk copies into an mbarrier ring (swap_tile_bulk.cu) on
 * sm_90 and later, else the streaming tensor-core kernel
 * (swap_tile_stream.cu); SW_STATUS_UNSUPPORTED where neither has an
 * instance (head_dim, shared memory). */
sw_status sw_cuda_swap_tile(const sw_cuda_swap_tile_args *a, void *stream);
/* Loads every swap kernel for head_dim D on the current device (CUDA loads a
 * kernel lazily at its first launch: ~0.7 ms inside the first call that uses
 * it, e.g. the first all-resident tile). Best effort. */
void sw_cuda_swap_preload(int32_t D);
sw_status sw_cuda_swap_merge(const sw_cuda_swap_tile_args *a, void *stream);
/* The same fold with the chunks read in parallel (identical results to
 * sw_cuda_swap_merge; the engine's direct mode merges with it, through
 * sw_cuda_swap_merge_split). */
sw_status sw_cuda_swap_merge_wide(const sw_cuda_swap_tile_args *a, void *stream);
/* The same fold in two steps for many chunks: parts of the chunks (about two
 * CTAs an SM over rows, kv heads and parts, at most as many parts as
 * part2_floats holds in a.part's layout) folded in parallel into part2, then
 * those; one launch (merge_wide) for few chunks or no room. Results equal up
 * to the order of the float sums (which depends on the SM count). */
sw_status sw_cuda_swap_merge_split(const sw_cuda_swap_tile_args *a, float *part2,
                                   size_t part2_floats, int32_t sms, void *stream);
/* n ranges of a.nchunks chunks each, range r's partials at a.part + r x
 * a.nchunks chunks, folded in range order, each exactly as one
 * sw_cuda_swap_merge_split of it alone folds it (identical results), in one
 * launch pair where part2 holds the parts of every range (else of as many as
 * it holds a pair; one call a range where the split would not be used). */
sw_status sw_cuda_swap_merge_ranges(const sw_cuda_swap_tile_args *a, int32_t n, float *part2,
                                    size_t part2_floats, int32_t sms, void *stream);
/* The split merge's parts for `rows` (query rows x group heads x kv heads) on
 * `sms` SMs: about two CTAs an SM, at most 64 (below 2: no split; the
 * merge also keeps 16 chunks a part at least). Its room is sized by this. */
static inline int64_t sw_cuda_swap_merge_parts(int64_t rows, int32_t sms)
{
    const int64_t n = rows > 0 ? (2 * (int64_t)sms + rows - 1) / rows : 0;
    return n > 64 ? 64 : n;
}
/* Direct tile kernel (swap_tile_direct.cu): a tile whose missing blocks are
 * all leased from the host tier (BF16, one row group, stripes of one 8 KiB
 * segment) in one launch: each missing stripe read straight from the host
 * tier, CRC-checked like a gather, written into its slot and attended over
 * with the resident ones. One block of such a tile: */
typedef struct sw_cuda_swap_dblk {
    int32_t slot;      /* pool slot (a missing block's victim: written here) */
    int32_t block;     /* logical block */
    int32_t valid;     /* tokens */
    int32_t item;      /* first of its 2H gather items (x = h * 2 + kind); -1: resident */
} sw_cuda_swap_dblk;
typedef struct sw_cuda_swap_direct_args {
    sw_cuda_swap_tile_args t;               /* blk unused; part, nchunks, nrg = 1 */
    const sw_cuda_swap_dblk *blk;           /* device [t.nblk] */
    const sw_cuda_swap_gather_item *items;  /* device; dst = the stripe's offset in pool */
    uint8_t *pool;                          /* = t.pool, written */
    uint32_t *bad;                          /* the gathers' mismatch report */
    uint32_t bad_cap;
    int32_t c0, nch;                        /* this launch: chunks [c0, c0 + nch) of
                                             * t.nchunks (nch 0: every chunk) */
} sw_cuda_swap_direct_args;
/* 1 when the direct kernel takes a tile of this shape. */
int sw_cuda_swap_direct_ok(int32_t D, int32_t B, int32_t nrg);
sw_status sw_cuda_swap_tile_direct(const sw_cuda_swap_direct_args *a, void *stream);
/* m = -inf, l = 0, acc = 0 for n (row, head) pairs. */
sw_status sw_cuda_swap_state_init(float *m, float *l, float *acc, int64_t n, int32_t D,
                                  void *stream);
/* o = acc / l as BF16 (0 where l = 0), lse = ln 2 * (m + log2 l) (-inf where
 * l = 0; lse may be NULL); of32 (optional) = the normalised fp32 output. */
sw_status sw_cuda_swap_finalize(const float *m, const float *l, const float *acc, int64_t n,
                                int32_t D, uint16_t *o, float *lse, float *of32, void *stream);

/* Predictor. out[r][j] = sum_c x[r][c] * P[c][j] (BF16 x, fp32, the CPU
 * reference's order and roundings: no contraction, so results match it
 * bit for bit). */
sw_status sw_cuda_swap_project(const float *P, int32_t D, int32_t R, const uint16_t *x,
                               int64_t rows, float *out, void *stream);
/* One scored block: projected keys at arena + entry * H * B * R (entry < 0:
 * no predictor, score -inf), its valid tokens, and the projected query rows
 * it is scored against (qp + row0 * Hq * R, ql rows). */
typedef struct sw_cuda_swap_sblk {
    int32_t entry, valid, row0, ql;
} sw_cuda_swap_sblk;
sw_status sw_cuda_swap_score(const float *qp, const float *arena, const sw_cuda_swap_sblk *blk,
                             int32_t nblk, int32_t H, int32_t G, int32_t B, int32_t R,
                             float *scores, void *stream);

/* Offload of device blocks (swap_pack.cu): item i copies `rows` rows of
 * row_bytes from src (device; rows src_pitch bytes apart) to dst + dst_off,
 * densely. `vec` (16, 8, 4, 2 or 1) divides src, src_pitch, row_bytes and
 * dst + dst_off: the copy's unit. tab1 > 0: the item also sets
 * tab[tab1 - 1] = tab_val (a write-through's page table entry; tab then
 * not NULL). items is a device array. */
typedef struct sw_cuda_swap_pack_item {
    const uint8_t *src;
    uint64_t dst_off;
    int64_t src_pitch;
    int32_t rows, row_bytes, vec, tab_val;
    int64_t tab1;
} sw_cuda_swap_pack_item;
sw_status sw_cuda_swap_pack(const sw_cuda_swap_pack_item *items, int32_t n, uint8_t *dst,
                            int32_t *tab, void *stream);

/* Page tables copied in device memory (swap_table.cu): for each b < batch,
 * dst[b * pitch + i] = src[src_off[b] + i] for the sequence's pages, i <
 * ceil((kv_indptr[b + 1] - kv_indptr[b]) / block). src_off and kv_indptr
 * are device arrays: one launch, nothing read on the host. */
sw_status sw_cuda_swap_copy_tables(int32_t *dst, int32_t pitch, const int32_t *src,
                                   const int32_t *src_off, const int32_t *kv_indptr,
                                   int32_t block, int32_t batch, void *stream);

#ifdef __cplusplus
}
#endif
#endif
