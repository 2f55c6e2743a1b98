/*
 * spillway_swap.h - the swap engine: exact attention over a KV cache that
 * lives in a block store (included by spillway.h).
 *
 * KV blocks of registered sequences are offloaded to a sw_store as stripes
 * (one kv head's K or V of one block). A pool of `resident_blocks` slots
 * caches blocks; a slot holds one block's K and V for all kv heads of one
 * layer, laid out as
 *     K[num_kv_heads][block_size][head_dim] at byte 0,
 *     V[num_kv_heads][block_size][head_dim] at byte num_kv_heads*block_size*head_dim*2
 * in the block's element type (the V offset is fixed whatever the type), so
 * a GPU pool can mirror it byte for byte.
 * A low-rank predictor (a fixed Gaussian projection of the keys) scores
 * blocks for the current queries; eviction drops the lowest-scored block
 * first (ties: oldest access), the candidates reordered by store run
 * (run-aware eviction, docs/swap.md: over a disk, a block of a mostly
 * missing run first; in an exact pass, the pass's own blocks least recent
 * first, as their scores cannot change its hits). Attention streams over a sequence tile by
 * tile (at most `tile_blocks` blocks each), merging online-softmax states,
 * so the result is exact attention over every offloaded token whatever the
 * pool size; the reads of tile i+1 are in flight while tile i computes.
 *
 * Block buffers (offload input) default to the slot layout above:
 *     k, v : [num_kv_heads][block_size][head_dim]
 * or are token-major ([block_size][num_kv_heads][head_dim]) and strided, in
 * host or GPU memory (sw_swap_block).
 * BF16 (uint16 bit patterns) or FP8 E4M3 (one byte, bias 7, no infinities,
 * 0x7f/0xff NaN) with one fp32 scale per block and kind: value = e4m3 * scale.
 * Rows at or past `valid_tokens` are ignored (and not written to the store).
 *
 * Query/output (attend) are BF16 [total_q_rows][num_qo_heads][head_dim];
 * GQA: query head h reads kv head h / (num_qo_heads / num_kv_heads).
 *
 * Two pools: SW_SWAP_POOL_HOST keeps the slots in host memory and attends
 * on the CPU; SW_SWAP_POOL_DEVICE keeps them in GPU memory and attends with
 * CUDA kernels on the caller's stream (a CUDA build and a usable GPU;
 * SW_STATUS_NO_DEVICE otherwise). Both give the same results up to
 * rounding (docs/swap.md).
 *
 * Thread safety: a sw_swap handle is not thread-safe; the caller serialises
 * every call on one handle (the engine's own threads -- CPU compute workers,
 * and with a device pool over a host tier the prelease and launcher
 * threads -- are internal).
 * Different handles may run concurrently, also on one store (the store
 * serialises its calls), but then the per-tier byte counters in
 * sw_swap_stats include the other handles' reads made during ours.
 */
#ifndef SPILLWAY_SWAP_H
#define SPILLWAY_SWAP_H

#include "spillway.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sw_swap sw_swap;

/* Element type of an offloaded KV block (append-only). */
typedef enum sw_swap_kv_dtype {
    SW_SWAP_KV_BF16 = 0,      /* 2 bytes; updates the predictor */
    SW_SWAP_KV_FP8_E4M3 = 1   /* 1 byte + per-block scale; no predictor: its
                               * blocks are scored -inf (recency only) */
} sw_swap_kv_dtype;

/* Eviction policy of the resident pool (append-only). */
typedef enum sw_swap_policy {
    /* Lowest predictor score first, ties (and unscored FP8 blocks) by
     * oldest access; the candidates reordered by store run (see above). */
    SW_SWAP_POLICY_SCORE = 0,
    /* Plain least-recently-used, scores ignored (for comparison). */
    SW_SWAP_POLICY_LRU = 1
} sw_swap_policy;

/* Where the resident pool lives (append-only). */
typedef enum sw_swap_pool_kind {
    SW_SWAP_POOL_HOST = 0,    /* host memory; CPU attention */
    SW_SWAP_POOL_DEVICE = 1   /* GPU memory; CUDA tile kernels (see top) */
} sw_swap_pool_kind;

/* Shape of the model whose KV cache is swapped. */
typedef struct sw_swap_model {
    uint32_t struct_size;   /* sizeof(sw_swap_model) */
    int32_t num_layers;     /* >= 1 */
    int32_t num_kv_heads;   /* 1..65535 */
    int32_t num_qo_heads;   /* >= 1, a multiple of num_kv_heads */
    int32_t head_dim;       /* 1..1024 */
    int32_t block_size;     /* tokens per block, 1..65536 */
} sw_swap_model;

typedef struct sw_swap_config {
    uint32_t struct_size;     /* sizeof(sw_swap_config) */
    int32_t resident_blocks;  /* pool slots, >= 1 (default 64) */
    int32_t tile_blocks;      /* blocks per attention tile; 0 = default:
                               * min(cap, max(1, resident_blocks / 8)), cap =
                               * the store's run_blocks (64) for a host pool
                               * whose store has no host tier, else 16;
                               * clamped to resident_blocks */
    int32_t predictor_rank;   /* 1..128 (default 32) */
    uint64_t projection_seed; /* seed of the projection (default 0x5157) */
    int32_t prefetch_depth;   /* tiles whose store reads are in flight while
                               * a tile computes: 0 = none, default 4, at
                               * most 32 (staging of depth + 1 tiles). Needs
                               * resident_blocks >= 2 * tile_blocks, else the
                               * engine runs without read-ahead. Hits,
                               * evictions and results do not depend on it
                               * (for any depth >= 1). */
    sw_swap_policy policy;    /* default SW_SWAP_POLICY_SCORE */
    sw_swap_pool_kind pool;   /* default SW_SWAP_POOL_HOST */
    int32_t device;           /* CUDA ordinal for a device pool (default 0) */
    /* ---- appended (a caller built with the struct up to `device` still
     * works: struct_size says which fields it has; the rest take their
     * defaults) ---- */
    int32_t kernel_timing;    /* device pool: time the tile kernels with CUDA
                               * events into stats.kernel_seconds (each
                               * attend then waits for its kernels: for
                               * benchmarks; default 0) */
    int32_t thread_spin_us;   /* device pool over a host tier: how long the
                               * engine's prelease and launcher threads poll
                               * for their next job before they sleep, in
                               * microseconds (0: sleep at once; at most
                               * 10000000). Polling keeps a step's start off
                               * a thread's wake-up (40-280 us on a VM) at
                               * the cost of a CPU busy between steps.
                               * Default -1: the library's choice, 2000
                               * with at least 8 CPUs in the process's
                               * affinity mask, else 0. */
    int32_t persist_manifests; /* 1: sw_swap_offload also writes each block's
                               * manifest, so that a later engine can adopt
                               * the sequence (sw_swap_seq_attach). It costs
                               * one more store write, extent and host-tier
                               * entry per block (a fifth of the host tier
                               * with 2 kv heads: the host-tier-bound bench
                               * fell from 84% to 18% of pinned H2D with it
                               * on). Default 0. */
} sw_swap_config;

/* Fills the defaults documented above. */
SW_API void sw_swap_config_init(sw_swap_config *c);
/* Sets struct_size and zeroes the shape (the caller fills it). */
SW_API void sw_swap_model_init(sw_swap_model *m);

/*
 * Creates an engine bound to `store` (not owned: it must outlive the
 * engine; the engine only writes, reads and deletes keys of the namespaces
 * of its sequences). Generates the projection P[head_dim, rank] from the
 * seed (docs/swap.md gives the generator: splitmix64 + Box-Muller, N(0,
 * 1/head_dim)) and allocates the pool and its scratch.
 * Returns SW_OK; SW_STATUS_INVALID (null argument, bad struct_size, a shape
 * or config field out of range, e.g. predictor_rank outside 1..128 -- the
 * detail names the field); SW_STATUS_NO_DEVICE (pool = DEVICE without a
 * usable GPU in this build or machine, or a device ordinal out of range);
 * SW_STATUS_UNSUPPORTED (pool = DEVICE with a head_dim that has no tile
 * kernel: 64, 128 and 256 do); SW_STATUS_NO_MEMORY (pool or thread);
 * SW_STATUS_CUDA (a CUDA call failed setting up the device pool). On failure *out is NULL.
 * The handle is owned by the caller until sw_swap_destroy().
 */
SW_API sw_status sw_swap_create(const sw_swap_model *model, const sw_swap_config *config,
                                sw_store *store, sw_swap **out);

/* Stops the engine's threads and frees the engine, its registry, projected
 * keys and pool. Stripes stay in the store. NULL is a no-op. */
SW_API void sw_swap_destroy(sw_swap *s);

/*
 * Registers sequence `seq_id` (caller's id, unique in the engine). Its
 * blocks are stored under namespace `ns` with store block numbers
 * block_base .. block_base + max_blocks - 1 (logical block b -> store block
 * block_base + b), so sequences may share a namespace as long as their
 * ranges do not overlap. Length starts at 0 tokens in every layer.
 * Returns SW_OK; SW_STATUS_INVALID (seq_id already registered, max_blocks <
 * 1, range past UINT32_MAX, a range overlapping another sequence's in the
 * same namespace); SW_STATUS_NO_MEMORY; SW_STATUS_FAILED (failed handle).
 */
SW_API sw_status sw_swap_seq_add(sw_swap *s, uint64_t seq_id, uint64_t ns, uint32_t block_base,
                                 uint32_t max_blocks);

/*
 * Adopts a sequence whose blocks were offloaded to the store before -- by
 * this engine or by another one, in this process or an earlier one, with
 * config.persist_manifests set -- under namespace `ns` and store blocks
 * block_base .. block_base + max_blocks - 1: registers it as
 * sw_swap_seq_add does, then per layer reads the manifest that
 * sw_swap_offload writes beside each block's stripes (its valid
 * tokens, dtype, FP8 scales and the stripes' generations; one small stripe
 * per block, kv_head 0xFFFF of the block's K key), from block 0 up to the
 * first block without one, and recomputes the predictor's projected keys of
 * the BF16 blocks from their K stripes. Attention over the sequence is then
 * what it was in the engine that offloaded it (the same blocks, tokens and
 * values; the same output for the same engine configuration and pool
 * state). The store's stripes are not changed.
 * The engine's model must have the shape the blocks were written with
 * (block_size, num_kv_heads, head_dim; any number of layers: a layer
 * without blocks has length 0); the projection seed may differ.
 * Returns SW_OK (also when the store holds no manifest of the sequence --
 * nothing offloaded, or offloaded without persist_manifests --: length 0);
 * sw_swap_seq_add's statuses; SW_STATUS_INVALID (a manifest of another
 * model shape); SW_STATUS_CORRUPT (a damaged manifest, a K stripe whose
 * generation or length is not its manifest's -- a stripe rewritten after
 * its manifest --, a partial block followed by another); SW_STATUS_NOT_FOUND
 * (a block's K stripe is missing, or a block's manifest is missing while a
 * later block of its group of 64 has one); a store read status. The detail
 * names the layer, block and kv head. On failure the sequence is not
 * registered. V stripes are not read here: a missing or rewritten V stripe
 * shows when attend reads it (SW_STATUS_NOT_FOUND / SW_STATUS_CORRUPT).
 */
SW_API sw_status sw_swap_seq_attach(sw_swap *s, uint64_t seq_id, uint64_t ns,
                                    uint32_t block_base, uint32_t max_blocks);

/*
 * Forgets a sequence: drops its resident copies and projected keys. With
 * delete_stripes = 1 its stripes are deleted from the store too (a stripe
 * that is already gone is not an error).
 * Returns SW_OK; SW_STATUS_NOT_FOUND (unknown sequence); SW_STATUS_INVALID
 * (null handle); with delete_stripes, a store delete error (the sequence is
 * forgotten anyway).
 */
SW_API sw_status sw_swap_seq_remove(sw_swap *s, uint64_t seq_id, int32_t delete_stripes);

/* Length in tokens of a sequence in one layer, and its number of blocks.
 * Either out pointer may be NULL. Returns SW_OK, SW_STATUS_NOT_FOUND,
 * SW_STATUS_INVALID (null handle, layer out of range). */
SW_API sw_status sw_swap_seq_length(const sw_swap *s, uint64_t seq_id, int32_t layer,
                                    int64_t *tokens, int32_t *blocks);

/* One KV block handed to sw_swap_offload (and sw_swap_offload_batch). */
typedef struct sw_swap_block {
    uint32_t struct_size;     /* sizeof(sw_swap_block) */
    sw_swap_kv_dtype dtype;
    int32_t valid_tokens;     /* 1..block_size; < block_size only for the
                               * sequence's last block */
    const void *k;            /* host, [num_kv_heads][block_size][head_dim] */
    const void *v;
    size_t k_bytes, v_bytes;  /* bytes readable from k and v: at least what
                               * the layout addresses (sw_swap_offload); with
                               * the struct as first published, exactly
                               * num_kv_heads * block_size * head_dim *
                               * element size (2 or 1) */
    float k_scale, v_scale;   /* FP8 only: finite, > 0 */
    /* ---- appended (a caller built with the struct up to v_scale still
     * works: host memory, SW_KV_HND, dense) ---- */
    sw_kv_layout layout;      /* SW_KV_HND (sw_swap_block_init's default):
                               * [num_kv_heads][block_size][head_dim];
                               * SW_KV_NHD: [block_size][num_kv_heads][head_dim],
                               * a page of a FlashInfer NHD or vLLM cache, or
                               * block_size rows of a prefill's K */
    int64_t token_stride;     /* elements from a token to the next of one kv
                               * head; 0 = dense (head_dim for HND,
                               * num_kv_heads * head_dim for NHD) */
    int64_t head_stride;      /* elements from a kv head to the next; 0 = dense
                               * (block_size * head_dim for HND, head_dim for
                               * NHD) */
    int32_t on_device;        /* 1: k and v are CUDA device pointers (a CUDA
                               * build): packed by a kernel and copied to
                               * pinned staging on the call's stream; 0
                               * (default): host memory */
} sw_swap_block;

/* Zeroes the struct, sets struct_size, scales 1 and layout SW_KV_HND. */
SW_API void sw_swap_block_init(sw_swap_block *b);

/*
 * Offloads block `block` (logical, 0-based) of a sequence's layer: writes
 * its 2 * num_kv_heads stripes (valid rows only) to the store, invalidates
 * any resident copy and, for BF16, stores its keys projected (K*P, fp32,
 * per token) for the predictor. `block` may be an existing block
 * (overwrite, e.g. the last block growing during decode) or the next one
 * (append). Only the last block may hold fewer than block_size tokens: an
 * append after a partial block, or a partial overwrite of a block that is
 * not the last, is refused. Buffers are not retained. With
 * config.persist_manifests, a small manifest of the block is written after
 * its stripes (sw_swap_seq_attach reads it).
 * The block may be strided and in either layout (sw_swap_block's layout,
 * token_stride, head_stride): k_bytes and v_bytes cover what the layout
 * addresses, ((num_kv_heads - 1) * head_stride + (valid_tokens - 1) *
 * token_stride + head_dim) elements at least (a partial last block needs
 * no padding rows). Device
 * pointers (on_device) are read on the legacy default stream here; use
 * sw_swap_offload_batch to give a stream.
 * Returns SW_OK; SW_STATUS_INVALID (null argument, bad struct_size, layer
 * out of range, k_bytes/v_bytes short of what the block addresses -- the
 * detail gives both --, bad layout or strides (a stride below a row, heads or tokens
 * that overlap), k or v in host memory when on_device says device or the
 * other way round, valid_tokens out of range, block past the end or past
 * max_blocks, a partial block that would not be the last, bad FP8 scale, a
 * store whose stripe_bytes is smaller than one stripe);
 * SW_STATUS_UNSUPPORTED (on_device in a build without CUDA);
 * SW_STATUS_CUDA (the staging copy failed; nothing was written);
 * SW_STATUS_NOT_FOUND (unknown
 * sequence); a store write status (SW_STATUS_FULL, SW_STATUS_IO, ...): then
 * the block is marked absent (length unchanged for an append; for an
 * overwrite the sequence is cut before this block) since its stripes may be
 * half old, half new; SW_STATUS_NO_MEMORY; SW_STATUS_FAILED.
 */
SW_API sw_status sw_swap_offload(sw_swap *s, uint64_t seq_id, int32_t layer, int32_t block,
                                 const sw_swap_block *b);

/*
 * Offloads n blocks in one call (e.g. every layer's new block of a decode
 * step, or the blocks of a prefill): item i is block blocks[i] of sequence
 * seq_ids[i]'s layer layers[i], described by kv[i] as for sw_swap_offload.
 * Items are applied in order, so a batch may append several blocks of one
 * layer. Every item is checked before anything is written (pointers,
 * sizes, layout, strides, dtype, layer, sequence); the blocks' device
 * pointers are then packed by one kernel on `stream` (a cudaStream_t, NULL
 * = the legacy default stream: the producer of k and v must be ordered
 * before it on that stream) into device staging, copied to pinned host
 * staging on that stream in one copy, and the call waits for that copy (an
 * event, not a device sync) before the stores are written. Host items need
 * no stream. The stripes of all items go to the store in one
 * sw_store_write_batch (grouped I/O; then the manifests in a second), so a
 * batch costs far less than n single offloads.
 * *n_done (optional) receives the number of items offloaded: all of them
 * on SW_OK; on a failure the items before the failing one stay offloaded
 * (exactly as if the batch had held only them), and the failing item and
 * every item after it are handled as sw_swap_offload handles a failure
 * (each block absent, its layer cut before it; the detail names the
 * failing item) -- re-offload items n_done..n-1.
 * Returns sw_swap_offload's statuses; SW_STATUS_INVALID also for n < 0 or a
 * null array with n > 0 (n = 0 is a no-op).
 */
SW_API sw_status sw_swap_offload_batch(sw_swap *s, int32_t n, const uint64_t *seq_ids,
                                       const int32_t *layers, const int32_t *blocks,
                                       const sw_swap_block *const *kv, void *stream,
                                       int32_t *n_done);

typedef struct sw_swap_attend_params {
    uint32_t struct_size;     /* sizeof(sw_swap_attend_params) */
    int32_t layer;
    int32_t batch;            /* sequences in this call, >= 1 */
    const uint64_t *seq_ids;  /* [batch], distinct */
    const int32_t *q_indptr;  /* [batch+1] prefix sums of query rows (host):
                               * 1 row = decode, more = a prefill chunk */
    const void *q;            /* BF16 [q_indptr[batch]][num_qo_heads][head_dim]
                               * (host for a host pool, device for a device pool) */
    void *o;                  /* BF16, same shape; every element written */
    float *lse;               /* optional [rows][num_qo_heads], natural log;
                               * -inf for a row that sees no key */
    float sm_scale;           /* 0 = 1/sqrt(head_dim) */
    int32_t causal;           /* default 1: the chunk's rows are the LAST
                               * q_len positions of the sequence (bottom-right):
                               * row i sees keys j <= i + len - q_len */
    int32_t sparse_top_k;     /* 0 (default) = exact; k > 0: attend only the k
                               * best-scored blocks + the recent window (+ every
                               * unscored FP8 block) */
    int32_t sparse_recent_blocks; /* recent window of sparse mode (last blocks) */
    int32_t sparse_check;     /* sparse mode: 1 = also compute exact attention
                               * and report the error (costs a full pass) */
} sw_swap_attend_params;

SW_API void sw_swap_attend_params_init(sw_swap_attend_params *p);

typedef struct sw_swap_attend_result {
    uint32_t struct_size;     /* sizeof(sw_swap_attend_result), set by the caller */
    uint32_t reserved;
    int64_t blocks_total;     /* blocks of the batch's sequences in the layer */
    int64_t blocks_attended;  /* blocks that went through the tile loop */
    int64_t hits, misses;     /* of this call (both passes with sparse_check) */
    int64_t tiles;            /* of this call (both passes with sparse_check) */
    double sparse_rel_l2;     /* sparse_check: ||O_sparse - O_exact|| /
                               * ||O_exact|| over the batch (fp32 outputs);
                               * -1 when not measured */
} sw_swap_attend_result;

/*
 * Attention of one layer for a batch of sequences over all of their
 * offloaded tokens (or the sparse selection). Per sequence: scores its
 * blocks with the predictor, attends the blocks already resident first,
 * then the missing ones in block order, in tiles of at most
 * tile_blocks blocks; a tile's missing blocks are read with ONE batched
 * store read ticket (K and V stripes of every kv head), submitted up to
 * prefetch_depth tiles ahead of the tile being computed. fp32 running
 * (max, sum, acc) per query row and head, merged across tiles, finalised
 * to BF16 (and LSE).
 * `stream` is for a device pool; ignored for a host pool. With a device
 * pool, q is read and o / lse are written in `stream`'s order: produce q on
 * that stream (cudaMemcpyAsync, not a plain cudaMemcpy, which runs on the
 * legacy stream and may return before its bytes land) or order it with an
 * event.
 * res (optional; res->struct_size set by the caller) receives counters.
 * Returns SW_OK; SW_STATUS_INVALID (null argument, bad struct_size, layer
 * out of range, batch < 1, bad or non-monotonic q_indptr, a sequence listed
 * twice, negative sparse fields); SW_STATUS_NOT_FOUND (unknown sequence);
 * SW_STATUS_CORRUPT (a stripe failed its check, has the wrong length, or a
 * generation other than the one the engine wrote); a store read status
 * (SW_STATUS_NOT_FOUND when a stripe was deleted or evicted from the store,
 * SW_STATUS_IO); SW_STATUS_NO_MEMORY. On failure the contents of o and lse
 * are unspecified; the pool stays consistent.
 */
SW_API sw_status sw_swap_attend(sw_swap *s, const sw_swap_attend_params *p,
                                sw_swap_attend_result *res, void *stream);

/*
 * Predictor scores of every block of a sequence's layer for the query rows
 * q (BF16 [q_len][num_qo_heads][head_dim], host): score(b) = max over the
 * block's valid tokens t, query rows and query heads h of
 * (q_h P) . (k_{t,kvh(h)} P), the same value attend uses. FP8 blocks score
 * -INFINITY. `scores` has room for `capacity` floats; *nblocks (required)
 * receives the block count (scores are written only when it fits; NULL
 * with capacity 0 asks for the count).
 * Returns SW_OK; SW_STATUS_INVALID (null argument, scores NULL with
 * capacity > 0, q_len < 1, layer out of range); SW_STATUS_NOT_FOUND; SW_STATUS_WORKSPACE_TOO_SMALL (capacity <
 * blocks); SW_STATUS_NO_MEMORY; SW_STATUS_FAILED (failed handle); with a
 * device pool, SW_STATUS_CUDA.
 */
SW_API sw_status sw_swap_score_blocks(sw_swap *s, uint64_t seq_id, int32_t layer, const void *q,
                                      int32_t q_len, float *scores, int32_t capacity,
                                      int32_t *nblocks);

/*
 * The device pool as a paged KV cache, for the caller's own kernels over
 * resident blocks (and for measuring others' against the engine on the
 * same memory): slot i holds one block, BF16, K at k + i * page_stride
 * elements and V at v + i * page_stride, each [num_kv_heads][block_size]
 * [head_dim] with head_stride = block_size * head_dim and token_stride =
 * head_dim elements (a FlashInfer "HND" page). Which slot holds which
 * block: sw_swap_resident_slots. Work enqueued on `stream` (a
 * cudaStream_t, NULL = the legacy default stream) after this call sees the
 * pool as the engine's calls so far left it (their pool writes are
 * ordered before it); the view holds until the next call that can change
 * the pool (attend, offload, seq_remove), which the caller orders after
 * its readers. Read-only: writing into the pool is outside the contract.
 * Returns SW_OK; SW_STATUS_INVALID (null argument, bad struct_size);
 * SW_STATUS_UNSUPPORTED (a host pool: its slots move); SW_STATUS_CUDA;
 * SW_STATUS_FAILED.
 */
typedef struct sw_swap_pool_view {
    uint32_t struct_size;     /* sizeof(sw_swap_pool_view), set by the caller */
    int32_t device;           /* the CUDA device of the pool */
    int32_t num_slots;        /* config.resident_blocks */
    int32_t reserved;
    const void *k, *v;        /* slot 0's K and V (device memory) */
    int64_t page_stride;      /* elements from a slot to the next */
    int64_t head_stride;      /* elements from a kv head to the next */
    int64_t token_stride;     /* elements from a token to the next */
} sw_swap_pool_view;
SW_API sw_status sw_swap_get_pool_view(sw_swap *s, void *stream, sw_swap_pool_view *view);

/*
 * The pool slots of a sequence's layer, block by block: slots[b] is the
 * slot holding block b as BF16, or -1 when the block is not resident (or
 * is FP8). `slots` has room for `capacity` entries; *nblocks (required)
 * receives the block count (slots are written only when they fit; NULL with
 * capacity 0 asks for the count). Valid until the next call that can
 * change the pool. Any pool kind.
 * Returns SW_OK; SW_STATUS_INVALID (null handle or nblocks, slots NULL with
 * capacity > 0, layer out of range); SW_STATUS_NOT_FOUND; SW_STATUS_WORKSPACE_TOO_SMALL (capacity <
 * blocks, *nblocks set).
 */
SW_API sw_status sw_swap_resident_slots(const sw_swap *s, uint64_t seq_id, int32_t layer,
                                        int32_t *slots, int32_t capacity, int32_t *nblocks);

/*
 * CUDA graphs: a resident decode step with a fixed workspace. A graph
 * object attends one layer for a fixed batch of sequences (seq_ids, q_len
 * query rows each, q_len x group <= 16) whose blocks are all resident BF16
 * in the device pool, with tables of fixed size in device memory (room
 * for max_blocks blocks per sequence):
 *   sw_swap_graph_prepare (outside the graph, before each replay) checks
 *     that every block is resident and writes the tables of the
 *     sequences' current lengths (a copy on `stream`, ordered after the
 *     engine's pending pool writes);
 *   sw_swap_graph_attend is the kernel launch alone, no host work that
 *     depends on the lengths, no allocation, no sync: capturable in a CUDA
 *     graph (call it once uncaptured first, as any kernel's first launch
 *     sets its attributes); q, o, lse and the options are those of the
 *     capture at every replay.
 * A decode loop: offload the step's new tokens, prepare, replay. Between
 * prepare and the replay no call that can change the pool (an attend
 * through the tile loop, an offload, seq_remove); the replay reads what
 * prepare wrote, so the next prepare goes after it in stream order (the
 * same stream, or an event). When prepare finds a block not resident it
 * returns SW_STATUS_NOT_FOUND naming it and leaves the graph's tables as
 * they were: the step then runs through sw_swap_attend (the tile loop
 * brings the blocks back), and a later prepare can succeed again.
 * create: SW_STATUS_INVALID (null argument, layer out of range, batch,
 * q_len or max_blocks < 1, a sequence listed twice), SW_STATUS_NOT_FOUND
 * (a sequence not registered), SW_STATUS_UNSUPPORTED (a host pool; too
 * many query rows per kv head; a head_dim or device the decode kernel
 * lacks), SW_STATUS_NO_MEMORY, SW_STATUS_CUDA. prepare: SW_STATUS_NOT_FOUND
 * (above; or a sequence removed), SW_STATUS_WORKSPACE_TOO_SMALL (a
 * sequence longer than max_blocks blocks), SW_STATUS_CUDA, SW_STATUS_FAILED.
 * attend: SW_STATUS_INVALID, SW_STATUS_MISALIGNED (q and o 16-byte, lse
 * 4-byte aligned), SW_STATUS_CUDA, SW_STATUS_FAILED. In a capture, attend
 * adds a record of the engine's "last call" event to the graph, so that
 * the engine's later calls wait for each replay; uncaptured, it waits for
 * the engine's last resident call as sw_swap_attend does. Stats: each
 * prepare counts one resident attend (and its blocks as hits). Destroy the
 * graph objects before the engine (destroy waits for the engine's last
 * recorded call, replays included).
 */
typedef struct sw_swap_graph sw_swap_graph;
SW_API sw_status sw_swap_graph_create(sw_swap *s, int32_t layer, int32_t batch,
                                      const uint64_t *seq_ids, int32_t q_len, int32_t max_blocks,
                                      sw_swap_graph **out);
SW_API sw_status sw_swap_graph_prepare(sw_swap_graph *g, void *stream);
SW_API sw_status sw_swap_graph_attend(sw_swap_graph *g, const void *q, void *o, float *lse,
                                      int32_t causal, float sm_scale, void *stream);
SW_API void sw_swap_graph_destroy(sw_swap_graph *g);

/* Copies the projection P[head_dim][rank] (row-major, fp32) into out, which
 * has room for head_dim * rank floats. Returns SW_OK or SW_STATUS_INVALID. */
SW_API sw_status sw_swap_get_projection(const sw_swap *s, float *out, size_t capacity);

typedef struct sw_swap_stats {
    uint32_t struct_size;      /* sizeof(sw_swap_stats), set by the caller */
    sw_swap_policy policy;
    int32_t resident_blocks, tile_blocks, predictor_rank; /* effective */
    int32_t prefetch;          /* effective read-ahead depth in tiles */
    int32_t failed;            /* 1 when the handle refuses further work */
    int32_t reserved;
    uint64_t sequences, resident_used;   /* now */
    uint64_t offloads, offload_bytes;    /* blocks and payload bytes written */
    uint64_t attends, tiles;
    uint64_t hits, misses;               /* block visits served from / not in the pool */
    uint64_t evictions;                  /* a valid slot given to another block */
    uint64_t invalidations;              /* resident copies dropped by an overwrite */
    uint64_t read_calls, stripes_read;   /* batched store reads and their stripes */
    uint64_t bytes_read;                 /* payload bytes read from the store */
    uint64_t host_bytes_read, file_bytes_read; /* of which per tier (this engine's reads) */
    uint64_t prefetched_tiles;           /* tiles whose read overlapped compute */
    double read_wait_seconds;            /* time attend waited on reads */
    double compute_seconds;              /* time in the tile computation (a
                                          * device pool: enqueueing it) */
    /* ---- appended: device pool ---- */
    uint64_t kernel_kv_bytes;            /* K/V bytes of the blocks the tile
                                          * kernel attended (valid rows) */
    double kernel_seconds;               /* GPU time of the tile kernels (not
                                          * the merges), measured with CUDA
                                          * events only with
                                          * sw_swap_config.kernel_timing (each
                                          * attend then waits for its kernels) */
    /* ---- appended: where an attend's host time goes (with
     * read_wait_seconds and compute_seconds above) ---- */
    double plan_seconds;                 /* planning tiles: block order,
                                          * victims, keys */
    double submit_seconds;               /* submitting the tiles' reads (store
                                          * lookups and queueing; may complete
                                          * older reads when the store's
                                          * buffers are full) */
    double score_seconds;                /* projecting the queries and scoring
                                          * every block (a device pool: with
                                          * its one wait for the scores) */
    /* ---- appended ---- */
    double finish_seconds;               /* a device pool: after the last
                                          * tile, merging the partials, the
                                          * host-tier gathers' CRC verdict
                                          * and lease release, the call's
                                          * wait for the GPU, and landing
                                          * the next call's first blocks
                                          * (tuning land_ahead_mb) */
    /* ---- appended: the device pool's resident path ---- */
    uint64_t resident_attends;           /* attends whose blocks were all
                                          * resident (BF16, exact, at most 16
                                          * query rows per kv head and
                                          * sequence): one decode kernel over
                                          * the pool, no scoring, no wait */
    uint64_t offload_resident;           /* blocks offload wrote from GPU
                                          * memory into the pool as well */
    /* ---- appended: the device pool's host tier ---- */
    uint64_t kept_visits;                /* block visits served by host-tier
                                          * leases kept from an earlier call
                                          * (no store lookup) */
    uint64_t ahead_blocks;               /* host-tier blocks whose copies
                                          * were queued at the end of the
                                          * call before theirs (landing
                                          * ahead) */
    uint64_t ahead_used;                 /* of those, blocks their call read
                                          * from the copies (the rest were
                                          * resident by then, rewritten, or
                                          * another call came) */
} sw_swap_stats;

/* Snapshot of the counters; st->struct_size must be set (a smaller, older
 * struct gets its prefix). Returns SW_OK or SW_STATUS_INVALID (null,
 * struct_size < 8). */
SW_API sw_status sw_swap_get_stats(const sw_swap *s, sw_swap_stats *st);

/* Zeroes the traffic counters (not the configuration or occupancy). */
SW_API void sw_swap_reset_stats(sw_swap *s);

/* "score" / "lru"; "unknown" otherwise. Static string. */
SW_API const char *sw_swap_policy_name(sw_swap_policy p);

#ifdef __cplusplus
}
#endif
#endif
