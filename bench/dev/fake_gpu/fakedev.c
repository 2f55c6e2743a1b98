/* A "GPU" whose kernels do nothing (bench/dev/fake_gpu/build.sh): the
 * device pool's host logic on a machine without a GPU, for CPU profiles of
 * its host side only. Not part of the library; results are garbage. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/sw_core.h"
#include "attn/attn_internal.h"
#include "swap/swap_cuda.h"
int sw_cuda_built(void) { return 1; }
const char *sw_cuda_archs(void) { return "fake"; }
int32_t sw_cuda_devices(void) { return 1; }
sw_status sw_cuda_set_device(int32_t d) { (void)d; return SW_OK; }
sw_status sw_cuda_memcpy_h2d_async(void *d, const void *s, size_t b, void *st) { (void)st; if (b < 65536) memcpy(d, s, b); return SW_OK; }
sw_status sw_cuda_memset_async(void *d, int v, size_t b, void *st) { (void)st; memset(d, v, b); return SW_OK; }
sw_status sw_cuda_host_alloc(void **p, size_t b) { *p = calloc(1, b); return *p ? SW_OK : SW_STATUS_NO_MEMORY; }
void sw_cuda_host_free(void *p) { free(p); }
sw_status sw_cuda_host_register(void *p, size_t b) { (void)p; (void)b; return SW_OK; }
void sw_cuda_host_unregister(void *p) { (void)p; }
sw_status sw_cuda_stream_sync(void *s) { (void)s; return SW_OK; }
static struct { const char *p; size_t b; } reg[4096]; static int nreg;
void fake_register(void *p, size_t b) { if (p && nreg < 4096) { reg[nreg].p = p; reg[nreg].b = b; nreg++; } }
void fake_unregister(void *p) { for (int i = 0; i < nreg; i++) if (reg[i].p == p) { reg[i] = reg[--nreg]; return; } }
int sw_cuda_is_device_ptr(const void *p) { for (int i = 0; i < nreg; i++) if ((const char *)p >= reg[i].p && (const char *)p < reg[i].p + reg[i].b) return 1; return 0; }
sw_status sw_cuda_prefill_portable_config(int32_t d, int32_t h, sw_dtype t, int32_t *a, int32_t *b) { (void)d;(void)h;(void)t;(void)a;(void)b; return SW_STATUS_NO_DEVICE; }
sw_status sw_cuda_prefill_portable_launch(const sw_cuda_prefill_args *a, void *s) { (void)a;(void)s; return SW_STATUS_NO_DEVICE; }
sw_status sw_cuda_prefill_hopper_config(int32_t d, int32_t h, sw_dtype t, int32_t *a, int32_t *b) { (void)d;(void)h;(void)t;(void)a;(void)b; return SW_STATUS_NO_DEVICE; }
sw_status sw_cuda_prefill_hopper_launch(const sw_cuda_prefill_args *a, void *s) { (void)a;(void)s; return SW_STATUS_NO_DEVICE; }
sw_status sw_cuda_swap_alloc(void **p, size_t b) { *p = calloc(1, b); fake_register(*p, b); return *p ? SW_OK : SW_STATUS_NO_MEMORY; }
void sw_cuda_swap_free(void *p) { fake_unregister(p); free(p); }
static int dummy;
sw_status sw_cuda_swap_stream_create(void **s) { *s = &dummy; return SW_OK; }
void sw_cuda_swap_stream_destroy(void *s) { (void)s; }
sw_status sw_cuda_swap_event_create(void **e, int t) { (void)t; *e = &dummy; return SW_OK; }
void sw_cuda_swap_event_destroy(void *e) { (void)e; }
sw_status sw_cuda_swap_event_record(void *e, void *s) { (void)e; (void)s; return SW_OK; }
sw_status sw_cuda_swap_stream_wait(void *s, void *e) { (void)e; (void)s; return SW_OK; }
sw_status sw_cuda_swap_event_sync(void *e) { (void)e; return SW_OK; }
sw_status sw_cuda_swap_event_ms(float *ms, void *a, void *b) { (void)a; (void)b; *ms = 0.001f; return SW_OK; }
sw_status sw_cuda_swap_copy(void *d, const void *s, size_t b, void *st) { (void)st; if (b < 65536) memcpy(d, s, b); return SW_OK; }
sw_status sw_cuda_swap_copy_batch(void *const *d, const void *const *s, const size_t *b, size_t n, void *st) { for (size_t i = 0; i < n; i++) sw_cuda_swap_copy(d[i], s[i], b[i], st); return SW_OK; }
sw_status sw_cuda_swap_zero(void *d, size_t b, void *st) { (void)st; memset(d, 0, b); return SW_OK; }
sw_status sw_cuda_swap_sm_count(int32_t d, int32_t *n) { (void)d; *n = 132; return SW_OK; }
int sw_cuda_swap_head_dim_ok(int32_t d) { return d == 64 || d == 128 || d == 256; }
sw_status sw_cuda_swap_scatter(const sw_cuda_swap_scatter_args *a, void *s) { (void)a; (void)s; return SW_OK; }
sw_status sw_cuda_swap_gather(const sw_cuda_swap_gather_args *a, void *s) { (void)a; (void)s; return SW_OK; }
sw_status sw_cuda_swap_tile(const sw_cuda_swap_tile_args *a, void *s) { (void)a; (void)s; return SW_OK; }
sw_status sw_cuda_swap_merge(const sw_cuda_swap_tile_args *a, void *s) { (void)a; (void)s; return SW_OK; }
int sw_cuda_swap_fused_merge(void) { return 0; }
sw_status sw_cuda_swap_state_init(float *m, float *l, float *acc, int64_t n, int32_t D, void *s) { (void)m;(void)l;(void)acc;(void)n;(void)D;(void)s; return SW_OK; }
sw_status sw_cuda_swap_finalize(const float *m, const float *l, const float *acc, int64_t n, int32_t D, uint16_t *o, float *lse, float *of32, void *s) { (void)m;(void)l;(void)acc;(void)n;(void)D;(void)o;(void)lse;(void)of32;(void)s; return SW_OK; }
sw_status sw_cuda_swap_project(const float *P, int32_t D, int32_t R, const uint16_t *x, int64_t rows, float *out, void *s) { (void)P;(void)D;(void)R;(void)x;(void)rows;(void)out;(void)s; return SW_OK; }
sw_status sw_cuda_swap_score(const float *qp, const float *arena, const sw_cuda_swap_sblk *blk, int32_t nblk, int32_t H, int32_t G, int32_t B, int32_t R, float *sc, void *s)
{ (void)qp;(void)arena;(void)H;(void)G;(void)B;(void)R;(void)s; for (int32_t i = 0; i < nblk; i++) sc[i] = (float)((blk[i].entry * 2654435761u) % 1000u); return SW_OK; }
int sw_cuda_swap_direct_ok(int32_t D, int32_t B, int32_t nrg) { return (D == 64 || D == 128 || D == 256) && B * D * 2 <= 8192 && nrg == 1; }
sw_status sw_cuda_swap_tile_direct(const sw_cuda_swap_direct_args *a, void *s) { (void)a; (void)s; return SW_OK; }
sw_status sw_cuda_swap_merge_wide(const sw_cuda_swap_tile_args *a, void *s) { (void)a; (void)s; return SW_OK; }
void sw_cuda_swap_preload(int32_t D) { (void)D; }
sw_status sw_cuda_swap_merge_split(const sw_cuda_swap_tile_args *a, float *p2, size_t n2, int32_t sms, void *s) { (void)a; (void)p2; (void)n2; (void)sms; (void)s; return SW_OK; }
sw_status sw_cuda_swap_merge_ranges(const sw_cuda_swap_tile_args *a, int32_t n, float *p2, size_t n2, int32_t sms, void *s) { (void)a; (void)n; (void)p2; (void)n2; (void)sms; (void)s; return SW_OK; }
/* (the resident path, graphs, write-through: nothing runs; the decode kernel
 * reports no device so that calls take the tile loop -- with -DFAKE_RESIDENT
 * it reports an H200's 132 SMs x 3 CTAs and its launches do nothing, for
 * the resident path's host time) */
#ifdef FAKE_RESIDENT
sw_status sw_cuda_paged_decode_config(int32_t d, int32_t h, sw_dtype t, int32_t *s, int32_t *c) { (void)d;(void)h;(void)t; *s = 132; *c = 3; return SW_OK; }
sw_status sw_cuda_paged_decode_launch(const sw_cuda_paged_args *a, void *s)
{
    (void)s;
    if (a->inl && sw_decode_inline_words(a->batch, a->num_items, a->num_merges) > SW_DECODE_INLINE_WORDS)
        return sw_fail(SW_STATUS_INVALID, "fake decode: the plan's words do not fit");
    return SW_OK;
}
#else
sw_status sw_cuda_paged_decode_config(int32_t d, int32_t h, sw_dtype t, int32_t *s, int32_t *c) { (void)d;(void)h;(void)t;(void)s;(void)c; return SW_STATUS_NO_DEVICE; }
sw_status sw_cuda_paged_decode_launch(const sw_cuda_paged_args *a, void *s) { (void)a;(void)s; return SW_STATUS_NO_DEVICE; }
#endif
sw_status sw_cuda_paged_gather_launch(const sw_cuda_paged_args *a, void *s) { (void)a;(void)s; return SW_STATUS_NO_DEVICE; }
int sw_cuda_stream_capturing(void *s) { (void)s; return 0; }
int sw_cuda_swap_capturing(void *s) { (void)s; return 0; }
sw_status sw_cuda_swap_copy_tables(int32_t *d, int32_t p, const int32_t *s, const int32_t *o, const int32_t *k, int32_t b, int32_t n, void *st) { (void)d;(void)p;(void)s;(void)o;(void)k;(void)b;(void)n;(void)st; return SW_OK; }
int sw_cuda_swap_event_done(void *e) { (void)e; return 1; }
sw_status sw_cuda_swap_event_record_node(void *e, void *s) { (void)e;(void)s; return SW_OK; }
sw_status sw_cuda_swap_pack(const sw_cuda_swap_pack_item *i, int32_t n, uint8_t *d, int32_t *t, void *s) { (void)i;(void)n;(void)d;(void)t;(void)s; return SW_OK; }
/* the plans' staging pool (core/sw_cuda.cu): plain host memory */
struct sw_staging { void *p; };
sw_status sw_cuda_staging_alloc(sw_staging **s, void **p, size_t b) { *s = calloc(1, sizeof **s); if (!*s) return SW_STATUS_NO_MEMORY; (*s)->p = calloc(1, b ? b : 1); if (!(*s)->p) { free(*s); *s = NULL; return SW_STATUS_NO_MEMORY; } *p = (*s)->p; return SW_OK; }
void sw_cuda_staging_copied(sw_staging *s, void *st) { (void)s; (void)st; }
void sw_cuda_staging_free(sw_staging *s) { if (s) { free(s->p); free(s); } }
void sw_cuda_staging_get_stats(sw_cuda_staging_stats *st) { memset(st, 0, sizeof *st); }
