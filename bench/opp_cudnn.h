/* cuDNN's fused attention over paged KV, as an opponent beside our decode
 * (measurement only, docs/opponents.md): its SDPA forward operation
 * (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, the operation cuDNN's own
 * frontend builds for a decode over page tables) through the backend API.
 *
 * Nothing of cuDNN is linked: libcudnn.so.9 is opened at run time, only
 * when SPILLWAY_OPPONENT names "cudnn", and only in a build that found
 * cuDNN's headers (CMake reports it). Needs cuDNN 9.15 or newer (page
 * tables in that operation). */
#ifndef SW_BENCH_OPP_CUDNN_H
#define SW_BENCH_OPP_CUDNN_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_cudnn_decode bench_cudnn_decode;

/* One decode row a sequence over a pool of [page][kv head][token][d] pages
 * (our SW_KV_HND layout); Q and O rows [batch][qo heads][d]. */
typedef struct bench_cudnn_decode_shape {
    int32_t batch, qo_heads, kv_heads, head_dim;
    int32_t page_size;
    int64_t num_pages;          /* pages in the pool */
    int32_t pages_per_seq;      /* the page table's width */
    const int32_t *page_table;  /* host, [batch][pages_per_seq]; entries a sequence's
                                 * kv_len reaches in 0..num_pages-1 */
    const int32_t *kv_len;      /* host, [batch]; >= 1 and <= pages_per_seq * page_size */
    int f16;                    /* 0: BF16 */
    float sm_scale;             /* > 0 */
} bench_cudnn_decode_shape;

/* Checks the gate and the shape (in every build, in that order), opens
 * cuDNN (once), builds the graph, picks the first engine cuDNN's
 * heuristics offer that finalises, allocates its workspace and the device
 * copies of the tables. NULL with the reason in `why` (the gate is closed,
 * a bad shape or page index, no cuDNN headers in this build, no libcudnn,
 * too old, or it refuses the shape: cuDNN's own message). */
bench_cudnn_decode *bench_cudnn_decode_create(const bench_cudnn_decode_shape *s, char *why,
                                              size_t n);
/* One launch on `stream` (a cudaStream_t), no sync; its variant pack is
 * built on each call (host work, as a caller of the backend API pays it).
 * 0, or -1 with cuDNN's message in `why`. */
int bench_cudnn_decode_run(bench_cudnn_decode *d, const void *q, const void *k_pool,
                           const void *v_pool, void *o, void *stream, char *why, size_t n);
void bench_cudnn_decode_destroy(bench_cudnn_decode *d); /* NULL: nothing */

/* The version of the libcudnn opened (e.g. 91900); 0 before a successful
 * open. */
int bench_cudnn_version(void);

#endif
