/*
 * spillway.h - the one public header of Spillway.
 *
 * Spillway is a C library (with CUDA C kernels) for the attention side of LLM
 * inference: batched ragged prefill attention, and exact attention over KV
 * caches larger than GPU memory.
 *
 * Conventions
 *  - Every fallible call returns sw_status: SW_OK (0) or a negative code.
 *    sw_status_str() names a code; sw_last_error() returns a sentence with the
 *    detail of the last failure on the calling thread (valid until the next
 *    failing call on that thread).
 *  - Handles are opaque. Plain config structs carry `struct_size` so that they
 *    can grow; set it to sizeof(the struct) (the *_init helpers do).
 *  - Device pointers and CUDA streams are passed as `void *` so this header
 *    needs no CUDA header. A NULL stream is the legacy default stream.
 *  - The library never prints to stdout, exits or aborts on bad input.
 */
#ifndef SPILLWAY_H
#define SPILLWAY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SPILLWAY_BUILD)
#define SW_API __attribute__((visibility("default")))
#else
#define SW_API
#endif

#define SW_VERSION_MAJOR 0
#define SW_VERSION_MINOR 1
#define SW_VERSION_PATCH 0
/* the first names of the version macros, kept for callers that use them */
#define SPILLWAY_VERSION_MAJOR SW_VERSION_MAJOR
#define SPILLWAY_VERSION_MINOR SW_VERSION_MINOR
#define SPILLWAY_VERSION_PATCH SW_VERSION_PATCH

/* ------------------------------------------------------------------------ */
/* Status codes (append-only).                                              */
/* ------------------------------------------------------------------------ */
typedef enum sw_status {
    SW_OK = 0,
    SW_STATUS_INVALID = -1,        /* a bad argument: null pointer, bad indptr, ... */
    SW_STATUS_UNSUPPORTED = -2,    /* valid, but not supported by this build/backend */
    SW_STATUS_NO_MEMORY = -3,      /* a host or device allocation failed */
    SW_STATUS_WORKSPACE_TOO_SMALL = -4,
    SW_STATUS_MISALIGNED = -5,     /* a pointer or stride breaks an alignment rule */
    SW_STATUS_CUDA = -6,           /* a CUDA runtime error; detail names it */
    SW_STATUS_NO_DEVICE = -7,      /* a GPU backend was asked for but none is usable */
    SW_STATUS_IO = -8,             /* an OS I/O error; detail keeps errno */
    SW_STATUS_CORRUPT = -9,        /* stored bytes failed their checksum or key check */
    SW_STATUS_FULL = -10,          /* a capacity budget would be exceeded */
    SW_STATUS_NOT_FOUND = -11,
    SW_STATUS_FAILED = -12,        /* the handle hit an unrecoverable error earlier */
    SW_STATUS_INTERNAL = -13       /* a bug in Spillway; please report the detail */
} sw_status;

/* Name of a status ("SW_STATUS_INVALID"); never NULL. */
SW_API const char *sw_status_str(sw_status s);
/* Detail of the last failure on this thread; "" when none. Thread-local,
 * overwritten by the next failing call on the same thread. */
SW_API const char *sw_last_error(void);
/* "0.1.0 (cuda archs: sm_80 sm_90a ...)", "0.1.0 (cuda archs: none)" without CUDA;
 * with an opponent compiled in, its name and version after - static string. */
SW_API const char *sw_version_string(void);

/* ------------------------------------------------------------------------ */
/* Element types and backends.                                              */
/* ------------------------------------------------------------------------ */
typedef enum sw_dtype {
    SW_DTYPE_F32 = 0,   /* CPU backends only */
    SW_DTYPE_F16 = 1,
    SW_DTYPE_BF16 = 2
} sw_dtype;

/* Size in bytes of one element; 0 for an unknown dtype. */
SW_API size_t sw_dtype_size(sw_dtype t);

typedef enum sw_backend {
    SW_BACKEND_AUTO = 0,        /* CUDA when a device is usable, else CPU */
    SW_BACKEND_CPU_REF = 1,     /* fp64-accumulating reference (the oracle); slow */
    SW_BACKEND_CPU = 2,         /* tiled, vectorised, all cores */
    SW_BACKEND_CUDA = 3,        /* best CUDA kernel for the device */
    SW_BACKEND_CUDA_PORTABLE = 4, /* the mma.sync kernel (sm_80+), forced */
    SW_BACKEND_CUDA_HOPPER = 5,   /* the wgmma/TMA kernel (compute capability 9.0 with an
                                   * sm_90a build), forced */
    /* Opponents, for measurement only (docs/opponents.md): another library's
     * kernel behind the same plan/run contract, for what it supports. Only
     * selectable explicitly, never by AUTO; plan_create refuses them with
     * SW_STATUS_UNSUPPORTED unless the build has the opponent
     * (-DSPILLWAY_OPPONENT_FLASHINFER=<include dir>) and the environment
     * variable SPILLWAY_OPPONENT=flashinfer is set when the plan is made. */
    SW_BACKEND_OPPONENT_FLASHINFER = 100,    /* FlashInfer's FA2 ragged prefill */
    SW_BACKEND_OPPONENT_FLASHINFER_FA3 = 101 /* FlashInfer's sm90 FA3 ragged prefill */
} sw_backend;

SW_API const char *sw_backend_name(sw_backend b);

/* Number of CUDA devices usable by this build (0 without CUDA or GPU). */
SW_API int32_t sw_cuda_device_count(void);
/* Instruction set the CPU fast path uses on this machine ("amx",
 * "avx512bf16", "avx512", "avx2", "scalar"); chosen once at run time. */
SW_API const char *sw_prefill_cpu_isa(void);

/* ------------------------------------------------------------------------ */
/* Ragged batched prefill attention.                                        */
/*                                                                          */
/* Layout (row = token):                                                    */
/*   Q, O : [total_q_rows,  num_qo_heads, head_dim]                         */
/*   K, V : [total_kv_rows, num_kv_heads, head_dim]                         */
/*   head_dim contiguous; heads of a row contiguous; a row stride (elements)*/
/*   may be larger than heads*head_dim (a view into a bigger buffer).      */
/* Request b owns query rows [qo_indptr[b], qo_indptr[b+1]) and key rows   */
/* [kv_indptr[b], kv_indptr[b+1]). GQA: query head h reads kv head          */
/* h / (num_qo_heads / num_kv_heads). Causal with q_len < kv_len is bottom- */
/* right aligned: query i sees keys j <= i + (kv_len - q_len). A query row  */
/* that sees no key gets zeros and LSE = -inf; one that sees a NaN score  */
/* (a NaN in its Q or a visible key's K) gets NaN output and LSE, as the    */
/* fp64 reference and PyTorch do.                                           */
/* Rows in all, of each side: at most SW_MAX_ROWS (else UNSUPPORTED).      */
/* ------------------------------------------------------------------------ */
#define SW_MAX_ROWS (INT32_MAX - 65535) /* the kernels step int32 rows in tiles */

typedef struct sw_prefill_params {
    uint32_t struct_size;   /* sizeof(sw_prefill_params) */
    sw_dtype dtype;         /* of Q, K, V and O */
    int32_t num_qo_heads;   /* >= 1 */
    int32_t num_kv_heads;   /* >= 1, divides num_qo_heads */
    int32_t head_dim;       /* 64, 128 or 256 */
    int32_t causal;         /* 0 or 1 */
    float sm_scale;         /* softmax scale; 0 means 1/sqrt(head_dim) */
    sw_backend backend;     /* SW_BACKEND_AUTO unless you need a specific one */
    int32_t device;         /* CUDA device ordinal for CUDA backends */
    int32_t num_threads;    /* CPU backends: 0 = all cores */
} sw_prefill_params;

/* Fills defaults: BF16, causal off, sm_scale 0, AUTO backend, device 0. */
SW_API void sw_prefill_params_init(sw_prefill_params *p);

typedef struct sw_prefill_plan sw_prefill_plan;

/*
 * Validates the parameters and the host indptr arrays, chooses a backend,
 * builds the work list (longest first) and sizes the workspace. Host-only:
 * it may query the device's properties but launches nothing. A CUDA plan's
 * tables are pinned host memory from a pool the library keeps (at most 8
 * buffers of a size class, up to 4 MiB each); when 8 plans of the class were
 * destroyed with their uploads still queued, creating one waits for the
 * oldest of those uploads.
 * qo_indptr_host / kv_indptr_host: batch+1 int32 prefix sums starting at 0,
 * non-decreasing; they are copied, the caller keeps ownership.
 * A plan can be reused for every layer with the same lengths and shapes.
 * Returns SW_OK, SW_STATUS_INVALID (null pointer, bad indptr, heads not
 * divisible, batch < 0), SW_STATUS_UNSUPPORTED (head_dim, dtype for the
 * backend), SW_STATUS_NO_DEVICE (CUDA backend forced without a device),
 * SW_STATUS_NO_MEMORY, SW_STATUS_CUDA. On failure *out is set to NULL.
 */
SW_API sw_status sw_prefill_plan_create(const sw_prefill_params *params, int32_t batch,
                                        const int32_t *qo_indptr_host,
                                        const int32_t *kv_indptr_host,
                                        sw_prefill_plan **out);
/* Frees the plan; it may be destroyed right after an enqueued run. Its
 * pinned tables go back to the library's pool without waiting for the
 * device, except tables over 4 MiB, tables uploaded inside a stream
 * capture and a size class past its 8 buffers: those are freed with
 * cudaFreeHost, which waits for the device. */
SW_API void sw_prefill_plan_destroy(sw_prefill_plan *plan);

/* Bytes of workspace run() needs (0 for the CPU backends). Device memory for
 * CUDA backends, aligned to 256 bytes. A workspace may be shared by plans
 * that are not run concurrently; allocate the largest once. */
SW_API size_t sw_prefill_plan_workspace_size(const sw_prefill_plan *plan);
/* The backend the plan resolved to (never AUTO). */
SW_API sw_backend sw_prefill_plan_backend(const sw_prefill_plan *plan);
/* Total query rows and key rows the plan was made for. */
SW_API int64_t sw_prefill_plan_total_q(const sw_prefill_plan *plan);
SW_API int64_t sw_prefill_plan_total_kv(const sw_prefill_plan *plan);
/* FLOPs of one run by the reporting convention:
 * sum over requests 4 * q_len * kv_eff * head_dim * num_qo_heads,
 * kv_eff = mean number of visible keys per query row. */
SW_API double sw_prefill_plan_flops(const sw_prefill_plan *plan);

typedef struct sw_prefill_tensors {
    uint32_t struct_size;     /* sizeof(sw_prefill_tensors) */
    const void *q;            /* device memory for CUDA backends, host for CPU */
    const void *k;
    const void *v;
    void *o;
    float *lse;               /* optional [total_q_rows, num_qo_heads] fp32, natural log */
    int64_t q_rows;           /* rows Q and O hold; must equal qo_indptr[batch] */
    int64_t kv_rows;          /* rows K and V hold; must equal kv_indptr[batch] */
    int64_t q_row_stride;     /* elements between rows; 0 = num_qo_heads*head_dim */
    int64_t k_row_stride;     /* 0 = num_kv_heads*head_dim */
    int64_t v_row_stride;     /* 0 = num_kv_heads*head_dim */
    int64_t o_row_stride;     /* 0 = num_qo_heads*head_dim */
    void *workspace;          /* >= sw_prefill_plan_workspace_size() bytes, 256-aligned */
    size_t workspace_bytes;
    /* Paged K/V (plans made by sw_prefill_plan_create_paged), in elements;
     * 0 = the layout's dense default. k and v are then the page pools' first
     * elements, k_row_stride / v_row_stride step from a token to the next
     * within a page, k_head_stride / v_head_stride from a kv head to the
     * next, and k_page_stride / v_page_stride from a page to the next.
     * Defaults: SW_KV_NHD row = heads*head_dim, head = head_dim,
     * page = page_size*heads*head_dim; SW_KV_HND row = head_dim,
     * head = page_size*head_dim, page = heads*page_size*head_dim.
     * Ignored for contiguous plans. */
    int64_t k_head_stride;
    int64_t v_head_stride;
    int64_t k_page_stride;
    int64_t v_page_stride;
    /* 0, or the caller's name for this workspace allocation: a nonzero tag
     * vouches that since the caller last passed it with this workspace,
     * nothing but sw_prefill_run has written the workspace (a new
     * allocation, even at the same address, gets a new tag). A plan run
     * again on the workspace it last ran on then skips uploading its work
     * list (one host-to-device copy less per call). */
    uint64_t workspace_tag;
} sw_prefill_tensors;

/* Zeroes all sizeof(sw_prefill_tensors) bytes of this header's struct and
 * sets struct_size: a mirror of the struct in another language must have
 * this size (the library reads only the fields struct_size covers). */
SW_API void sw_prefill_tensors_init(sw_prefill_tensors *t);

/*
 * Runs attention for the plan. CUDA backends enqueue on `stream` (a
 * cudaStream_t, NULL = default stream) and return without synchronising or
 * allocating; errors in the kernel show up at the caller's next sync. The
 * kernel reads Q, K, V and the workspace, and writes O and LSE, in `stream`'s
 * order: work that produces the inputs must be ordered before it on that
 * stream (or through an event). A plain cudaMemcpy / cudaMemset runs on the
 * legacy default stream, which a cudaStreamNonBlocking stream does not wait
 * for, and a cudaMemcpy from pageable memory may return before its bytes
 * have landed: use cudaMemcpyAsync on `stream`. The workspace may not be
 * shared by runs that can overlap. CPU backends run to completion on the
 * calling thread (plus workers) and ignore the stream and workspace.
 * Pointers must be 16-byte aligned and row strides multiples of 8 elements
 * (16 bytes) for the CUDA backends; any alignment of the element type works
 * on the CPU.
 * Row strides smaller than heads*head_dim are refused (rows would overlap).
 * Returns SW_OK, SW_STATUS_INVALID (null tensor or plan, row counts that do
 * not match the plan's offsets, bad stride), SW_STATUS_MISALIGNED,
 * SW_STATUS_WORKSPACE_TOO_SMALL, SW_STATUS_CUDA (launch error),
 * SW_STATUS_FAILED (the plan hit a CUDA error before).
 */
SW_API sw_status sw_prefill_run(sw_prefill_plan *plan, const sw_prefill_tensors *t,
                                void *stream);

/* ------------------------------------------------------------------------ */
/* Paged K/V: keys and values in fixed-size pages of a pool, addressed by a  */
/* page table (prefix caching, chunked prefill, continuous batching).       */
/*                                                                          */
/* Page p holds page_size tokens of every kv head, laid out                  */
/*   SW_KV_NHD: [page][token][kv head][head_dim]  (FlashInfer NHD, vLLM)     */
/*   SW_KV_HND: [page][kv head][token][head_dim]                             */
/* with the strides of sw_prefill_tensors (k_row/head/page_stride). Request */
/* b's key j lives in its (j / page_size)-th page at token j % page_size.   */
/* The table comes in either convention (exactly one of the two is set):    */
/*   FlashInfer: page_indptr [batch+1] (prefix sums from 0), page_indices   */
/*     [page_indptr[batch]], last_page_len [batch] (1..page_size; 0 for a   */
/*     request with no page): kv_len = (pages-1)*page_size + last_page_len; */
/*   FlashAttention: block_table [batch][block_table_stride] and seq_lens   */
/*     [batch]: request b's pages are its row's first                        */
/*     ceil(seq_lens[b]/page_size) entries (the rest is not read).          */
/* A page may be shared by requests (a common prefix) but not appear twice  */
/* within one request. Queries stay ragged (qo_indptr); causal is bottom-   */
/* right aligned as for contiguous K/V, so a chunk of new tokens attends    */
/* over its cached prefix and itself.                                       */
/* ------------------------------------------------------------------------ */
typedef enum sw_kv_layout {
    SW_KV_NHD = 0, /* [page][token][kv head][head_dim] */
    SW_KV_HND = 1  /* [page][kv head][token][head_dim] */
} sw_kv_layout;

typedef struct sw_paged_kv {
    uint32_t struct_size;           /* sizeof(sw_paged_kv) */
    int32_t page_size;              /* tokens per page, 1..256 */
    sw_kv_layout layout;
    int32_t num_pages;              /* pages in the pool; every index is < num_pages */
    /* FlashInfer's convention (host arrays, copied by the plan) */
    const int32_t *page_indptr;
    const int32_t *page_indices;
    const int32_t *last_page_len;
    /* or FlashAttention's (host arrays, copied by the plan) */
    const int32_t *block_table;
    int32_t block_table_stride;     /* entries per block_table row */
    const int32_t *seq_lens;
} sw_paged_kv;

/* Fills defaults: page_size 16, SW_KV_NHD, no table. */
SW_API void sw_paged_kv_init(sw_paged_kv *kv);

/*
 * sw_prefill_plan_create over paged K/V: validates the page table on the
 * host (every entry it will read; the status's detail names a bad entry,
 * the length fields checked before each request's indices: an index out
 * of [0, num_pages), a page repeated within a request, a decreasing
 * page_indptr, a last_page_len of 0 or above page_size, a
 * block_table row shorter than its seq_len needs, a negative seq_len), and
 * copies it, so a run never reads outside the pool or another request's
 * pages. q_len 1 per request is batch decode; any q_len works. run() takes
 * the pools as tensors k and v with the paged strides; kv_rows must be 0 or
 * num_pages * page_size. total_kv() is the sum of the requests' kv_len.
 * Backends: every one but the opponents; AUTO picks as for contiguous K/V.
 * On a CUDA backend a batch whose requests all have q_len x (num_qo_heads /
 * num_kv_heads) <= 16 (decode, small speculative steps) runs the split-KV
 * decode kernel over the pages (the keys of a long request are split across
 * CTAs and merged); any other batch has its pages gathered into dense K/V
 * in the workspace (2 x total_kv x num_kv_heads x head_dim elements) and
 * runs the prefill kernel over them. Run is asynchronous, allocates
 * nothing and can be captured in a CUDA graph, like a contiguous plan. The
 * pools must be 16-byte aligned and their strides multiples of 16 bytes.
 */
SW_API sw_status sw_prefill_plan_create_paged(const sw_prefill_params *params, int32_t batch,
                                              const int32_t *qo_indptr_host,
                                              const sw_paged_kv *kv, sw_prefill_plan **out);

/*
 * Appends new tokens' K/V to a paged cache (host memory, the CPU): request b
 * writes rows [new_indptr[b], new_indptr[b+1]) of k_new / v_new
 * ([rows][num_kv_heads][head_dim], row stride new_row_stride elements, 0 =
 * dense) to its last (new_indptr[b+1] - new_indptr[b]) positions of the
 * table `kv` describes (which already counts them: kv_len after the step).
 * The pools use tensors' paged strides (only k, v and the k_/v_ row, head
 * and page strides of `t` are read). Same table checks as the plan, and
 * one more: a token written must not be one that another request's table
 * holds (a shared page takes no append at or below the other's tokens:
 * copy it first), nor one another request writes. A refused call writes
 * nothing.
 */
SW_API sw_status sw_paged_kv_append_host(const sw_prefill_params *params, int32_t batch,
                                         const sw_paged_kv *kv, const int32_t *new_indptr,
                                         const void *k_new, const void *v_new,
                                         int64_t new_row_stride, const sw_prefill_tensors *t);

/*
 * One-shot convenience for host (CPU) buffers: plan + run + destroy.
 * Same contract as plan_create + run with backend forced to a CPU backend
 * (params->backend must be AUTO, CPU or CPU_REF).
 */
SW_API sw_status sw_prefill_host(const sw_prefill_params *params, int32_t batch,
                                 const int32_t *qo_indptr, const int32_t *kv_indptr,
                                 const sw_prefill_tensors *t);

#ifdef __cplusplus
}
#endif
#include "spillway_store.h" /* the block store API */
#include "spillway_swap.h"  /* the swap engine API */
#include "spillway_remote.h" /* the remote KV tier (Redis/Valkey) */

#endif /* SPILLWAY_H */
