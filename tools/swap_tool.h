/* Shared by swap_cmds.c (demo part 2, bench swap: options, report, JSON)
 * and swap_run.c (the machinery: synthetic KV, store, engine, decode steps,
 * fp64 check, raw reference loops). */
#ifndef SW_SWAP_TOOL_H
#define SW_SWAP_TOOL_H

#include "tool_common.h"

#include <stddef.h>
#include <stdint.h>

/* One run of the machinery. */
typedef struct swt_case {
    const char *name;
    int32_t qo_heads, kv_heads, head_dim, block_size;
    int32_t layers, batch;
    int64_t context;            /* tokens per sequence before decoding */
    int32_t warmup, steps;      /* decode steps; warm-up ones are not timed */
    int32_t resident_blocks;    /* engine pool slots (all layers share it) */
    uint64_t host_tier_bytes;   /* store host tier; 0 = none */
    int32_t check_heads;        /* query heads checked per (sequence, layer,
                                 * step); 0 = all */
    int device_pool;            /* 1 = SW_SWAP_POOL_DEVICE on GPU 0 (q, o on
                                 * the GPU; a step ends with a stream sync) */
    int32_t tile_blocks;        /* 0 = the engine's default */
    int32_t prefetch_depth;     /* engine read-ahead; -1 = its default */
    int32_t kernel_reps;        /* device pool: attends of the last queries
                                 * repeated back to back after the steps (the
                                 * tile kernels' steady state); 0 = none */
} swt_case;

typedef struct swt_result {
    int ok;                     /* every checked head within 1e-2 */
    double max_rel_l2;
    int64_t heads_checked;
    uint64_t kv_bytes;          /* K+V of every block at the end */
    int64_t total_blocks, context_end;
    int32_t steps;
    double offload_seconds, warmup_seconds, step_seconds; /* step: sum of timed */
    uint64_t hits, misses;      /* block visits of the timed steps */
    uint64_t bytes_read, host_bytes_read, file_bytes_read;
    uint64_t host_stripes, file_stripes;
    uint64_t tiles, prefetched_tiles, evictions;
    double read_wait_seconds, compute_seconds, plan_seconds, submit_seconds, score_seconds;
    double attend_seconds;      /* timed steps: the attend calls alone */
    double kernel_seconds;      /* timed steps: tile kernels (GPU events;
                                 * needs SPILLWAY_SWAP_KERNEL_TIMING=1) */
    uint64_t kernel_kv_bytes;   /* timed steps: K/V bytes the tile kernels read */
    int32_t loop_reps;          /* the kernel loop (kernel_reps), if run */
    double loop_attend_seconds, loop_kernel_seconds;
    uint64_t loop_kernel_kv_bytes, loop_bytes_read;
    sw_swap_stats swap;         /* at the end */
    sw_store_stats store;
} swt_result;

typedef struct swt_progress {
    int tty, shown;
    const char *what;
    int64_t total;
    double t0, last_t;
} swt_progress;

int swt_run_case(const swt_case *c, const char *store_dir, swt_result *res);
void swt_progress_start(swt_progress *p, const char *what, int64_t total);
void swt_progress_update(swt_progress *p, int64_t done, const char *extra);
void swt_rmtree(const char *dir);
const char *swt_fs_name(const char *path, int *is_tmpfs);
/* 0 or -errno. */
int swt_raw_write(const char *path, uint64_t bytes);
/* GB/s of the better sequential configuration; < 0 when O_DIRECT reads fail. */
double swt_raw_read(const char *path, uint64_t bytes);
double swt_memcpy_pieces(uint64_t set, size_t piece, size_t ring_pieces);
/* GPU references (GB/s, best of 5 timed with CUDA events; < 0 without a
 * GPU): pinned host-to-device copy of `bytes`, and a device-to-device
 * cudaMemcpy of `bytes` counted as 2 * bytes (read + write, as CUDA's
 * bandwidthTest does). */
double swt_h2d_pinned(uint64_t bytes);
double swt_d2d_copy(uint64_t bytes);
void *swt_xalloc(size_t n, int aligned);

#endif
