/* The swap benchmark's machinery, shared by spillway-bench-swap (swap.c)
 * and part 2 of `spillway demo` (tools/demo.c): swap_run.c runs a case
 * (synthetic KV, store, engine, decode steps, fp64 check, raw reference
 * loops), swap_iostat.c reads the disk-side counters, swap_report.c holds
 * the options, the cases, the scratch directory and the report. */
#ifndef SW_BENCH_SWAP_RUN_H
#define SW_BENCH_SWAP_RUN_H

#include "common.h"

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
    uint64_t io_buffer_bytes;   /* store bounce buffer; 0 = the store's default */
    const char *raw_path;       /* raw O_DIRECT file for interleaved passes (NULL = none) */
    uint64_t raw_file_bytes;    /* its size */
    uint64_t raw_slice_bytes;   /* bytes per interleaved pass and shape */
    int32_t raw_every;          /* a raw pass before the timed steps and after every
                                 * raw_every of them (and the last); 0 = none */
    int check_after;            /* 1: the checked rows kept and checked after
                                 * the steps, so that they run back to back
                                 * (bench swap); 0: each step checked before
                                 * the next (demo) */
    const struct sw_swap_tuning *tune; /* engine tuning overrides (bench swap
                                 * --tune, parsed by sw_swap_tuning_parse;
                                 * NULL = none): A/B runs, never a recorded one */
    int32_t kernel_reps;        /* device pool: attends of the last queries
                                 * repeated back to back after the steps (the
                                 * steady state), then rounds of calls timed
                                 * on the host; 0 = none */
} swt_case;

/* Disk-side counters (swap_iostat.c). Totals, or deltas summed over the
 * timed steps (swt_iostat_add). */
typedef struct swt_iostat {
    int ok_dev, ok_proc;        /* the fields below were read */
    int bad_dev, bad_proc;      /* sums: some step could not be read (figures not shown) */
    uint64_t reads, read_sectors; /* device: reads completed, 512-byte sectors */
    uint64_t read_ms;           /* device: ms spent by reads (summed over reads) */
    uint64_t busy_ms;           /* device: ms with any request in flight */
    uint64_t proc_read_bytes;   /* this process: bytes read from storage */
} swt_iostat;
typedef struct swt_iosrc {
    int have_dev, have_proc;
    char sys_stat[128], name[64];
} swt_iosrc;
/* Finds the block device under `path` (none for tmpfs, overlay and the like). */
void swt_iosrc_open(swt_iosrc *src, const char *path);
void swt_iostat_read(const swt_iosrc *src, swt_iostat *out);
/* acc += b - a */
void swt_iostat_add(swt_iostat *acc, const swt_iostat *a, const swt_iostat *b);

/* The store's profile of its read tickets' device queue over the timed
 * steps (sw_store_read_profile_get, when this build has it; ok = 0
 * otherwise): summed per step, the mean bytes weighted by time. */
#define SWT_QPROF_SIZES 12
typedef struct swt_qprof {
    int ok;
    uint64_t cap_bytes, peak_bytes;
    double elapsed_ns, busy_ns, below_cap_ns, below_cap_queued_ns, below_cap_processing_ns;
    double below_cap_waiting_ns, byte_ns, process_ns, wait_ns;
    uint64_t requests, request_bytes;
    uint64_t sizes[SWT_QPROF_SIZES]; /* requests of <= 4 KiB << i bytes; [11]: larger */
} swt_qprof;
/* Starts the profile of a step (a reset) / adds the step's profile. */
void swt_qprof_begin(sw_store *s);
void swt_qprof_add(sw_store *s, swt_qprof *acc);

#define SWT_RAW_PASSES 66
typedef struct swt_result {
    int ok;                     /* every checked head within 1e-2 */
    double max_rel_l2;
    int64_t heads_checked;
    int checked_after;          /* the rows were checked after the steps (check_after) */
    uint64_t kv_bytes;          /* K+V of every block at the end */
    int64_t total_blocks, context_end;
    int32_t steps;
    double offload_seconds, warmup_seconds, step_seconds; /* step: sum of timed */
    double step_ms[64];         /* the first 64 timed steps, each */
    double attend_ms[64];       /* their attend calls (and the stream's wait), each */
    int32_t nstep_ms;
    uint64_t hits, misses;      /* block visits of the timed steps */
    uint64_t bytes_read, host_bytes_read, file_bytes_read;
    uint64_t host_stripes, file_stripes;
    uint64_t tiles, prefetched_tiles, evictions;
    uint64_t kept_visits; /* block visits through host-tier leases kept from a call before */
    uint64_t ahead_blocks, ahead_used; /* host-tier blocks landed ahead of their call; read by it */
    uint64_t read_calls;        /* timed steps: store read tickets */
    uint64_t store_ranges, store_ios; /* timed steps: merged ranges, device requests */
    swt_iostat io;              /* timed steps: disk-side counters */
    swt_qprof qp;               /* timed steps: the store's ticket queue */
    char io_dev[64];            /* the device they come from ("" = none) */
    double read_wait_seconds, compute_seconds, plan_seconds, submit_seconds, score_seconds;
    double finish_seconds;
    double attend_seconds;      /* timed steps: the attend calls alone */
    int32_t loop_reps;          /* the kernel loop (kernel_reps), if run */
    double loop_attend_seconds; /* first call to last result on the stream */
    /* host time of a sw_swap_attend call, to its return: rounds of 8 calls
     * after a stream sync (the GPU's queue short, as between a decode
     * loop's samplings) */
    double loop_host_us_mean, loop_host_us_median, loop_host_us_max;
    uint64_t loop_kernel_kv_bytes, loop_bytes_read;
    /* beside the kernel loop, the same KV as pages (the GPU copy the blocks
     * were offloaded from; HND pages of block_size), one decode row a
     * sequence, every layer a step, interleaved (ms a step, medians; < 0:
     * not measured): the swap attend, Spillway's paged decode through
     * sw_prefill (the same kernel without the engine), FlashInfer's batch
     * decode (an opponent build with SPILLWAY_OPPONENT=flashinfer), cuDNN's
     * paged SDPA (bench/opp_cudnn.h, SPILLWAY_OPPONENT=cudnn); and the
     * relative L2 between each one's output and the swap attend's */
    double beside_swap_ms, beside_paged_ms, beside_fi_ms, beside_cudnn_ms;
    double beside_paged_rel, beside_fi_rel, beside_cudnn_rel; /* O against the swap attend's */
    int beside_cudnn_version;   /* the libcudnn measured (e.g. 91900); 0: none */
    char beside_note[160];
    int32_t raw_passes;         /* interleaved raw passes run (raw_every) */
    double raw_bytes[2], raw_secs[2]; /* their sums per shape (4 MiB x 1, 1 MiB x 4), every pass */
    double raw_pass_gbps[SWT_RAW_PASSES]; /* the first SWT_RAW_PASSES passes: the better
                                 * shape (<= 0: both failed) */
    int32_t raw_pass_after[SWT_RAW_PASSES]; /* timed steps done before that pass */
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

/* The disk path's counters over the timed steps (issue 4), per step: what
 * the engine asked (tickets), what the store issued (requests), what the
 * device saw (swap_iostat.c). */
typedef struct swt_diskpath {
    int has_store, has_dev, has_proc;
    double tickets, ticket_kib;        /* per step; payload per ticket */
    double ios, io_kib, ranges;        /* store requests per step, payload per request */
    double dev_reads, dev_kib, dev_mib; /* device reads per step, mean size, MiB per step */
    double busy, in_flight, read_ms;   /* fraction of the step time; reads; ms per read */
    double proc_mib, through;          /* this process' bytes read per step; / payload */
} swt_diskpath;
swt_diskpath swt_disk_path(const swt_result *r);
/* Its lines of the bench report (nothing for a case without disk reads). */
void swt_print_disk_path(const swt_result *r);
void swt_progress_start(swt_progress *p, const char *what, int64_t total);
void swt_progress_update(swt_progress *p, int64_t done, const char *extra);
void swt_rmtree(const char *dir);
const char *swt_fs_name(const char *path, int *is_tmpfs);
/* 0 or -errno. */
int swt_raw_write(const char *path, uint64_t bytes);
/* GB/s of the better sequential configuration; < 0 when O_DIRECT reads fail. */
double swt_raw_read(const char *path, uint64_t bytes);
/* The interleaved passes' raw rate: per shape their bytes over their time,
 * the better shape; < 0 when none ran. */
double swt_raw_interleaved_gbps(const swt_result *r);
double swt_memcpy_pieces(uint64_t set, size_t piece, size_t ring_pieces);
/* GPU references (GB/s, best of 5 timed with CUDA events; < 0 without a
 * GPU): pinned host-to-device copy of `bytes`, and a device-to-device
 * cudaMemcpy of `bytes` counted as 2 * bytes (read + write, as CUDA's
 * bandwidthTest does). */
double swt_h2d_pinned(uint64_t bytes);
double swt_d2d_copy(uint64_t bytes);
void *swt_xalloc(size_t n, int aligned);

/* ------------------------------------------------ swap_report.c -- */
/* The options the demo's part 2 and the bench share. */
typedef struct swt_opts {
    int64_t context;
    int32_t batch, layers, steps, warmup, check_heads;
    double pool_pct, host_pct;
    uint64_t raw_mb;
    const char *dir, *json, *cases;
    int keep, quick;
    int host_pool;  /* --host-pool: the CPU engine even with a GPU */
    int32_t prefetch_depth; /* --prefetch-depth; -1 = the engine's default */
    int32_t tile;           /* --tile: blocks per tile; 0 = the case's / engine's */
    int32_t io_buffer_mb;   /* --io-buffer-mb: the store's bounce buffer; 0 = its default */
    int32_t qo_heads, kv_heads, head_dim; /* --shape hQ-K/dD (default h16-2/d256) */
} swt_opts;
/* Their lines of a usage text (no defaults: each program states its own). */
extern const char swt_opts_help[];
/* The demo's defaults (the bench changes some). */
void swt_opts_default(swt_opts *o);
/* Parses one option at argv[*i] (advancing *i past its value): 1 = taken,
 * 0 = not one of these options, -1 = bad or missing value (message on
 * stderr). */
int swt_opt_parse(int argc, char **argv, int *i, swt_opts *o);
/* 0, or BENCH_USAGE with the valid ranges on stderr. */
int swt_opts_check(const swt_opts *o);
/* 1 when the engine runs its device pool (GPU 0). */
int swt_use_device(const swt_opts *o);
/* A case of the options' model shape (--shape, default h16-2/d256; block
 * 16): pool and host tier as a share of the KV, `dev_tile` blocks per tile
 * with a device pool (0 = every block of a sequence). */
swt_case swt_make_case(const char *name, const swt_opts *o, double pool_pct, double host_pct,
                       int32_t dev_tile);

/* A scratch directory (mkdtemp under --dir) with the raw O_DIRECT file
 * and the raw passes before / after the cases. */
typedef struct swt_scratch {
    char work[4096], raw[4200];
    const char *fs;
    int tmpfs, keep;
    uint64_t raw_bytes;
    double raw_gbps[2];
    int raw_n;
} swt_scratch;
int swt_scratch_open(swt_scratch *s, const char *dir, int keep, const char *tag); /* 0 or 1 */
void swt_scratch_close(swt_scratch *s); /* removed unless keep */
void swt_scratch_raw_write(swt_scratch *s, uint64_t bytes);
void swt_scratch_raw_pass(swt_scratch *s);     /* at most two passes are kept */
double swt_scratch_raw_best(const swt_scratch *s); /* GB/s; -1 = none */

/* The figures of a case derived from its result. */
typedef struct swt_derived {
    double step_s, tokens_per_s, read_per_step, gbps, disk_gbps, host_gbps;
    double visits_per_step, pool_rate, host_share, disk_share, host_tier_rate;
    double kv_gbps; /* KV bytes attended per second */
} swt_derived;

swt_derived swt_derive(const swt_case *c, const swt_result *r);
/* The value at rank q (0 = min, 0.5 = median, 1 = max) of the first 64 of
 * `ms`; 0 when none. */
double swt_ms_rank(const double *ms, int32_t nms, double q);
double swt_step_ms_rank(const swt_result *r, double q);

/* Report lines. */
void swt_print_engine(const swt_opts *o);     /* which pool the engine runs */
void swt_print_setup(const swt_case *c);      /* model, KV, pool, host tier */
void swt_print_raw(const swt_scratch *s);
void swt_print_raw_interleaved(const swt_result *r, double before_after);
void swt_print_case(const swt_case *c, const swt_result *r, double raw);

#endif
