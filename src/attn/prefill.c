/* Prefill front end: plan (validate, choose backend, build the work list) and
 * run (validate tensors, dispatch). The backend is resolved once, in
 * resolve_backend(), which both plan_create and the CLI's capability report
 * go through, so "supported" and "run" cannot disagree. */
#include "attn_internal.h"
#include "../core/sw_core.h"
#include "../opponents/opponent.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SW_WS_ALIGN 256

struct sw_prefill_plan {
    sw_prefill_params params;   /* sm_scale resolved */
    sw_backend backend;
    int32_t batch;
    int32_t *qo_indptr;         /* host copies, batch+1 */
    int32_t *kv_indptr;
    double flops;
    int failed;                 /* a CUDA error was seen: refuse further work */

    /* CUDA only: one pinned blob [counter | reqs | work] uploaded by run(). */
    void *blob;
    sw_staging *stage;          /* the blob's record (core/sw_cuda.h) */
    size_t blob_bytes;
    size_t reqs_off, work_off;
    int32_t num_work;
    int32_t grid;
    int32_t tile_m;
    int32_t wide_kv;            /* Hopper: sw_plan_wide_kv's choice (or the tuning's) */

    void *opp;                  /* an opponent backend's plan (src/opponents/) */
    void *opp_paged;            /* FlashInfer's paged decode (an opponent build) */

    int paged;                  /* K/V in pages (sw_prefill_plan_create_paged) */
    sw_paged_table pages;       /* the checked table; kv_indptr is its kv_indptr */
    sw_paged_cuda pcuda;        /* paged on a CUDA backend: decode or gather (paged_cuda.c) */
    size_t ws_bytes;            /* CUDA: the workspace a run needs */
    uint64_t serial;            /* unique in the process: the workspace table's owner id */
};

/* Workspaces that hold a plan's blob. A caller that sets workspace_tag
 * vouches that nothing but runs of this library has written the workspace
 * since it last passed that tag with it; the kernels leave the scheduler
 * counter at 0, so a plan run again on the workspace it last uploaded to
 * needs no upload. Each entry is a byte range: a run over any range that
 * overlaps another entry's (a workspace carved from the same buffer at
 * another address) takes that entry's blob away, as does every run that
 * writes other bytes (paged runs, opponents). A run captured into a CUDA
 * graph uploads, and marks its range for good: the graph's replays write
 * it at times the library does not see, so no range overlapping a marked
 * one skips its upload again. A full table drops an entry that is not
 * marked; with every entry marked, no run skips its upload again. */
enum { WS_TABLE = 16 };
typedef struct {
    const char *ws;   /* NULL: a free entry */
    size_t bytes;
    uint64_t tag;
    uint64_t owner;   /* plan serial; 0 = unknown contents */
    int captured;
} ws_entry;
static pthread_mutex_t g_ws_lock = PTHREAD_MUTEX_INITIALIZER;
static ws_entry g_ws[WS_TABLE];
static int g_ws_next, g_ws_overflow;
static uint64_t g_serial;

static uint64_t next_serial(void)
{
    pthread_mutex_lock(&g_ws_lock);
    const uint64_t s = ++g_serial;
    pthread_mutex_unlock(&g_ws_lock);
    return s;
}

static int ws_overlap(const ws_entry *e, const char *ws, size_t bytes)
{
    return e->ws && e->ws < ws + bytes && ws < e->ws + e->bytes;
}

static ws_entry *ws_find(const char *ws)
{
    for (int i = 0; i < WS_TABLE; i++)
        if (g_ws[i].ws && g_ws[i].ws == ws)
            return &g_ws[i];
    return NULL;
}

/* 1 when the workspace [ws, ws + bytes) holds the blob of plan `owner`
 * under `tag` and no marked range overlaps it. */
static int ws_holds(const void *wsp, size_t bytes, uint64_t tag, uint64_t owner)
{
    const char *ws = (const char *)wsp;
    if (!tag || !ws)
        return 0;
    pthread_mutex_lock(&g_ws_lock);
    const ws_entry *e = ws_find(ws);
    int held = !g_ws_overflow && e && e->tag == tag && e->owner == owner && !e->captured &&
               e->bytes >= bytes;
    for (int i = 0; i < WS_TABLE && held; i++)
        held = !(g_ws[i].captured && ws_overlap(&g_ws[i], ws, bytes));
    pthread_mutex_unlock(&g_ws_lock);
    return held;
}

/* Records what a run over [ws, ws + bytes) left there: the blob of `owner`
 * (0: other bytes; always 0 for an untagged run); `captured` marks the range
 * for good. Every other entry overlapping the range loses its blob. Only a
 * new nonzero tag (the caller's new allocation at the same address) clears
 * a mark. */
static void ws_note(const void *wsp, size_t bytes, uint64_t tag, uint64_t owner, int captured)
{
    const char *ws = (const char *)wsp;
    if (!ws)
        return;
    pthread_mutex_lock(&g_ws_lock);
    for (int i = 0; i < WS_TABLE; i++)
        if (g_ws[i].ws != ws && ws_overlap(&g_ws[i], ws, bytes))
            g_ws[i].owner = 0;
    ws_entry *e = ws_find(ws);
    if (e && tag && e->tag && e->tag != tag)
        e->captured = 0;
    if (!e && (tag || captured)) {
        for (int n = 0; n < WS_TABLE && !e; n++) {
            ws_entry *c = &g_ws[g_ws_next];
            g_ws_next = (g_ws_next + 1) % WS_TABLE;
            if (!c->captured) {
                e = c;
                memset(e, 0, sizeof *e);
                e->ws = ws;
            }
        }
        if (!e)
            g_ws_overflow = 1;
    }
    if (e) {
        if (tag)
            e->tag = tag;
        if (bytes > e->bytes || !e->captured)
            e->bytes = bytes; /* a marked range only grows */
        e->owner = tag ? owner : 0;
        e->captured |= captured;
    }
    pthread_mutex_unlock(&g_ws_lock);
}

static uint64_t tensors_tag(const sw_prefill_tensors *t)
{
    return t->struct_size >= offsetof(sw_prefill_tensors, workspace_tag) + sizeof(uint64_t)
               ? t->workspace_tag
               : 0;
}

/* A run about to write the workspace with bytes other than a blob. */
static void ws_forget(const sw_prefill_tensors *t, void *stream)
{
    ws_note(t->workspace, t->workspace_bytes, tensors_tag(t), 0,
            sw_cuda_stream_capturing(stream));
}

void sw_prefill_params_init(sw_prefill_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->dtype = SW_DTYPE_BF16;
    p->num_qo_heads = 1;
    p->num_kv_heads = 1;
    p->head_dim = 128;
    p->backend = SW_BACKEND_AUTO;
}

void sw_prefill_tensors_init(sw_prefill_tensors *t)
{
    if (!t)
        return;
    memset(t, 0, sizeof *t);
    t->struct_size = sizeof *t;
}

int32_t sw_cuda_device_count(void) { return sw_cuda_devices(); }

const char *sw_prefill_cpu_isa(void) { return sw_cpu_prefill_isa(); }

static sw_status resolve_backend(const sw_prefill_params *p, sw_backend *out)
{
    sw_backend b = p->backend;
    if (sw_opponent_backend(b)) { /* measurement only: never chosen, gated */
        SW_TRY(sw_opponent_gate(p));
        *out = b;
        return SW_OK;
    }
    const int is_cuda = (b == SW_BACKEND_CUDA || b == SW_BACKEND_CUDA_PORTABLE ||
                         b == SW_BACKEND_CUDA_HOPPER);
    if (b == SW_BACKEND_AUTO)
        b = (p->dtype != SW_DTYPE_F32 && sw_cuda_devices() > p->device) ? SW_BACKEND_CUDA
                                                                          : SW_BACKEND_CPU;
    if (is_cuda) {
        if (!sw_cuda_built())
            return sw_fail(SW_STATUS_NO_DEVICE, "backend %s requested but this build has no CUDA",
                           sw_backend_name(b));
        if (sw_cuda_devices() <= p->device)
            return sw_fail(SW_STATUS_NO_DEVICE, "backend %s requested for device %d, but %d CUDA "
                           "device(s) are usable", sw_backend_name(b), p->device,
                           sw_cuda_devices());
    }
    if (is_cuda && p->dtype == SW_DTYPE_F32)
        return sw_fail(SW_STATUS_UNSUPPORTED, "dtype F32 is supported on the CPU backends only");
    /* The best CUDA kernel: the Hopper one where it can run (compute
     * capability 9.0, sm_90a code in this build), else the portable one
     * (SW_BACKEND_CUDA_PORTABLE asks for that one by name). */
    if (b == SW_BACKEND_CUDA) {
        int32_t tm = 0, grid = 0;
        if (sw_cuda_prefill_hopper_config(p->device, p->head_dim, p->dtype, &tm, &grid) == SW_OK)
            b = SW_BACKEND_CUDA_HOPPER;
        else
            b = SW_BACKEND_CUDA_PORTABLE;
    }
    *out = b;
    return SW_OK;
}

void sw_prefill_tuning_default(sw_prefill_tuning *t)
{
    t->pack_max_q = INT32_MAX;
    t->section_bytes = (int64_t)16 << 20; /* a quarter of the H200's 60 MB L2 */
    t->wide_kv = -1;
}

static sw_status plan_cuda(sw_prefill_plan *pl, const sw_prefill_tuning *tu)
{
    const sw_prefill_params *p = &pl->params;
    int32_t tile_m = 0, grid = 0;
    if (pl->backend == SW_BACKEND_CUDA_HOPPER)
        SW_TRY(sw_cuda_prefill_hopper_config(p->device, p->head_dim, p->dtype, &tile_m, &grid));
    else
        SW_TRY(sw_cuda_prefill_portable_config(p->device, p->head_dim, p->dtype, &tile_m,
                                               &grid));
    SW_ASSERT_RET(tile_m > 0 && grid > 0);
    /* Pack the GQA group into every tile whose height the group divides: a
     * tile then spans tile_m/group tokens, so the causal diagonal and a
     * request's last partial tile waste a group-th of the rows they waste
     * unpacked, and K/V are loaded once for the group. Measured on the H200
     * (docs/perf/prefill.md, "GQA packing sweep"): +2..7% at d64/d128 on
     * 16x1k and both mixes, neutral at d256 and at 1x16k. */
    const int32_t pack_max = tu->pack_max_q;
    /* L2 sections of the work list (planner.c): the K/V of the groups whose
     * items run together. */
    const int64_t kv_token_bytes = 2 * (int64_t)p->head_dim * 2; /* K + V, 16-bit */
    const int64_t section_bytes = tu->section_bytes > 0 ? tu->section_bytes : 0;
    int64_t n = sw_plan_work(pl->qo_indptr, pl->kv_indptr, pl->batch, p->num_qo_heads,
                             p->num_kv_heads, p->causal, tile_m, pack_max, kv_token_bytes, section_bytes, NULL, 0);
    if (n < 0)
        return sw_fail(SW_STATUS_UNSUPPORTED, "work list exceeds INT32_MAX items");
    pl->reqs_off = SW_WS_ALIGN;
    pl->work_off = sw_align_up(pl->reqs_off + sizeof(sw_req_info) * (size_t)pl->batch, SW_WS_ALIGN);
    pl->blob_bytes = sw_align_up(pl->work_off + sizeof(sw_work_item) * (size_t)n, SW_WS_ALIGN);
    SW_TRY(sw_cuda_set_device(p->device));
    SW_TRY(sw_cuda_staging_alloc(&pl->stage, &pl->blob, pl->blob_bytes));
    memset(pl->blob, 0, pl->blob_bytes); /* the counter at offset 0 starts at zero */
    sw_req_info *reqs = (sw_req_info *)((char *)pl->blob + pl->reqs_off);
    for (int32_t b = 0; b < pl->batch; b++) {
        reqs[b].q_start = pl->qo_indptr[b];
        reqs[b].q_len = pl->qo_indptr[b + 1] - pl->qo_indptr[b];
        reqs[b].kv_start = pl->kv_indptr[b];
        reqs[b].kv_len = pl->kv_indptr[b + 1] - pl->kv_indptr[b];
    }
    sw_work_item *work = (sw_work_item *)((char *)pl->blob + pl->work_off);
    int64_t m = sw_plan_work(pl->qo_indptr, pl->kv_indptr, pl->batch, p->num_qo_heads,
                             p->num_kv_heads, p->causal, tile_m, pack_max, kv_token_bytes, section_bytes, work, n);
    if (m == -2)
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot allocate the planner's sort buffer");
    SW_ASSERT_RET(m == n);
    pl->num_work = (int32_t)n;
    pl->tile_m = tile_m;
    /* Wide K/V tiles (non-causal d128 on Hopper) where the batch is long. */
    if (pl->backend == SW_BACKEND_CUDA_HOPPER && !p->causal && p->head_dim == 128)
        pl->wide_kv = tu->wide_kv >= 0 ? tu->wide_kv != 0
                                       : sw_plan_wide_kv(pl->qo_indptr, pl->kv_indptr, pl->batch);
    pl->grid = grid < (int32_t)n ? grid : (int32_t)(n > 0 ? n : 1);
    return SW_OK;
}

/* Opponent backends lie outside the range params.c accepts; the gate vets
 * them and the other fields are validated as for a CUDA backend. */
static sw_status validate_params(const sw_prefill_params *p)
{
    if (p && p->struct_size >= sizeof *p && sw_opponent_backend(p->backend)) {
        sw_prefill_params q = *p;
        q.backend = SW_BACKEND_CUDA;
        return sw_prefill_validate_params(&q);
    }
    return sw_prefill_validate_params(p);
}

static sw_status plan_make(const sw_prefill_params *params, sw_backend backend, int32_t batch,
                           const int32_t *qo_indptr_host, const int32_t *kv_indptr_host,
                           const sw_prefill_tuning *tuning, int work_list, sw_prefill_plan **out);

sw_status sw_prefill_plan_create(const sw_prefill_params *params, int32_t batch,
                                 const int32_t *qo_indptr_host, const int32_t *kv_indptr_host,
                                 sw_prefill_plan **out)
{
    return sw_prefill_plan_create_tuned(params, batch, qo_indptr_host, kv_indptr_host, NULL, out);
}

sw_status sw_prefill_plan_create_tuned(const sw_prefill_params *params, int32_t batch,
                                       const int32_t *qo_indptr_host,
                                       const int32_t *kv_indptr_host,
                                       const sw_prefill_tuning *tuning, sw_prefill_plan **out)
{
    if (!out)
        return sw_fail(SW_STATUS_INVALID, "out (plan pointer) is NULL");
    *out = NULL;
    SW_TRY(validate_params(params));
    SW_TRY(sw_prefill_validate_indptr(batch, qo_indptr_host, kv_indptr_host));
    sw_backend backend = SW_BACKEND_AUTO;
    SW_TRY(resolve_backend(params, &backend));
    return plan_make(params, backend, batch, qo_indptr_host, kv_indptr_host, tuning, 1, out);
}

sw_status sw_prefill_plan_create_paged(const sw_prefill_params *params, int32_t batch,
                                       const int32_t *qo_indptr_host, const sw_paged_kv *kv,
                                       sw_prefill_plan **out)
{
    if (!out)
        return sw_fail(SW_STATUS_INVALID, "out (plan pointer) is NULL");
    *out = NULL;
    SW_TRY(validate_params(params));
    sw_backend backend = SW_BACKEND_AUTO;
    SW_TRY(resolve_backend(params, &backend));
    if (sw_opponent_backend(backend) && backend != SW_BACKEND_OPPONENT_FLASHINFER &&
        backend != SW_BACKEND_OPPONENT_FLASHINFER_FA3)
        return sw_fail(SW_STATUS_UNSUPPORTED, "paged K/V: backend %s takes contiguous K/V "
                       "(sw_prefill_plan_create)", sw_backend_name(backend));
    sw_paged_table pt;
    SW_TRY(sw_paged_table_build(kv, batch, &pt));
    sw_status s = sw_prefill_validate_indptr(batch, qo_indptr_host, pt.kv_indptr);
    const int cuda = backend == SW_BACKEND_CUDA_PORTABLE || backend == SW_BACKEND_CUDA_HOPPER;
    const int opp = sw_opponent_backend(backend);
    /* Decode batches run the paged decode kernel and need no prefill work
     * list; the others gather pages for the prefill kernel. The opponent
     * runs its own decode. */
    const int decode = cuda && s == SW_OK &&
                       sw_paged_decode_fits(qo_indptr_host, batch,
                                            params->num_qo_heads / params->num_kv_heads);
    if (s == SW_OK)
        s = plan_make(params, backend, batch, qo_indptr_host, pt.kv_indptr, NULL,
                      !decode && !opp, out);
    if (s == SW_OK && cuda) {
        /* the Hopper kernel gathers the pages itself, in its work list's
         * order; the portable one runs after a gather kernel */
        const sw_prefill_plan *pl = *out;
        const int own = backend == SW_BACKEND_CUDA_HOPPER && !decode;
        s = sw_paged_cuda_plan(&(*out)->pcuda, &(*out)->params, batch, qo_indptr_host, &pt,
                               decode, own ? (const sw_work_item *)((const char *)pl->blob +
                                                                    pl->work_off) : NULL,
                               own ? pl->num_work : 0,
                               own ? sw_hopper_tile_n(params->head_dim, pl->wide_kv) : 0,
                               (*out)->blob_bytes);
        if (s == SW_OK)
            (*out)->ws_bytes = (*out)->pcuda.ws_end;
    }
#ifdef SW_HAVE_OPPONENT_FLASHINFER
    if (s == SW_OK && opp) {
        /* one query token per request: its batch decode; else (and always
         * with its FA3 backend) its paged prefill */
        int ones = backend == SW_BACKEND_OPPONENT_FLASHINFER;
        for (int32_t b = 0; b < batch && ones; b++)
            ones = qo_indptr_host[b + 1] - qo_indptr_host[b] == 1;
        if (ones) {
            sw_opp_fid_plan *op = NULL;
            s = sw_opp_fid_plan_create(&(*out)->params, batch, qo_indptr_host, &pt, &op);
            (*out)->opp_paged = op;
            (*out)->ws_bytes = sw_opp_fid_workspace_size(op);
        } else {
            sw_opp_fi_plan *op = NULL;
            s = sw_opp_fi_plan_create_paged(&(*out)->params, backend, batch, qo_indptr_host, &pt,
                                            &op);
            (*out)->opp = op;
            (*out)->ws_bytes = sw_opp_fi_workspace_size(op);
        }
    }
#endif
    if (s != SW_OK) {
        sw_prefill_plan_destroy(*out);
        *out = NULL;
        sw_paged_table_free(&pt);
        return s;
    }
    (*out)->paged = 1;
    (*out)->pages = pt;
    return SW_OK;
}

/* The plan for validated parameters, offsets and a resolved backend;
 * work_list = 0 skips the CUDA prefill work list (a paged decode plan). */
static sw_status plan_make(const sw_prefill_params *params, sw_backend backend, int32_t batch,
                           const int32_t *qo_indptr_host, const int32_t *kv_indptr_host,
                           const sw_prefill_tuning *tuning, int work_list, sw_prefill_plan **out)
{
    sw_prefill_tuning tu;
    sw_prefill_tuning_default(&tu);
    if (tuning)
        tu = *tuning;
    sw_prefill_plan *pl = calloc(1, sizeof *pl);
    if (!pl)
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot allocate a plan");
    pl->serial = next_serial();
    pl->params = *params;
    pl->params.struct_size = sizeof pl->params;
    if (pl->params.sm_scale == 0.0f)
        pl->params.sm_scale = (float)(1.0 / sqrt((double)params->head_dim));
    pl->backend = backend;
    pl->batch = batch;
    pl->qo_indptr = malloc(sizeof(int32_t) * ((size_t)batch + 1));
    pl->kv_indptr = malloc(sizeof(int32_t) * ((size_t)batch + 1));
    if (!pl->qo_indptr || !pl->kv_indptr) {
        sw_prefill_plan_destroy(pl);
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot copy %d offsets", batch + 1);
    }
    memcpy(pl->qo_indptr, qo_indptr_host, sizeof(int32_t) * ((size_t)batch + 1));
    memcpy(pl->kv_indptr, kv_indptr_host, sizeof(int32_t) * ((size_t)batch + 1));
    pl->flops = sw_attn_flops(pl->qo_indptr, pl->kv_indptr, batch, params->num_qo_heads,
                              params->head_dim, params->causal);
    if ((backend == SW_BACKEND_CUDA_PORTABLE || backend == SW_BACKEND_CUDA_HOPPER) &&
        work_list) {
        sw_status s = plan_cuda(pl, &tu);
        if (s != SW_OK) {
            sw_prefill_plan_destroy(pl);
            return s;
        }
    }
    pl->ws_bytes = pl->blob_bytes;
#ifdef SW_HAVE_OPPONENT_FLASHINFER
    if (sw_opponent_backend(backend) && work_list) {
        sw_opp_fi_plan *op = NULL;
        sw_status s = sw_opp_fi_plan_create(&pl->params, backend, batch, pl->qo_indptr,
                                            pl->kv_indptr, &op);
        pl->opp = op;
        if (s != SW_OK) {
            sw_prefill_plan_destroy(pl);
            return s;
        }
    }
#endif
    *out = pl;
    return SW_OK;
}

void sw_prefill_plan_destroy(sw_prefill_plan *plan)
{
    if (!plan)
        return;
    /* The blob goes back to the staging pool, which hands it out again only
     * once its last upload is done: a plan may be destroyed right after an
     * enqueued run, without waiting for the device. */
    sw_cuda_staging_free(plan->stage);
#ifdef SW_HAVE_OPPONENT_FLASHINFER
    sw_opp_fi_plan_destroy(plan->opp);
    sw_opp_fid_plan_destroy(plan->opp_paged);
#endif
    free(plan->qo_indptr);
    free(plan->kv_indptr);
    sw_paged_table_free(&plan->pages);
    sw_paged_cuda_free(&plan->pcuda);
    free(plan);
}

size_t sw_prefill_plan_workspace_size(const sw_prefill_plan *plan)
{
#ifdef SW_HAVE_OPPONENT_FLASHINFER
    if (plan && plan->opp)
        return sw_opp_fi_workspace_size(plan->opp);
#endif
    return plan ? plan->ws_bytes : 0;
}

sw_backend sw_prefill_plan_backend(const sw_prefill_plan *plan)
{
    return plan ? plan->backend : SW_BACKEND_AUTO;
}

int64_t sw_prefill_plan_total_q(const sw_prefill_plan *plan)
{
    return plan ? plan->qo_indptr[plan->batch] : 0;
}

int64_t sw_prefill_plan_total_kv(const sw_prefill_plan *plan)
{
    return plan ? plan->kv_indptr[plan->batch] : 0;
}

double sw_prefill_plan_flops(const sw_prefill_plan *plan) { return plan ? plan->flops : 0.0; }

static sw_status check_stride(const char *name, int64_t *stride, int64_t given, int64_t min_elems,
                              int64_t rows)
{
    if (given == 0) {
        *stride = min_elems;
        return SW_OK;
    }
    if (given < min_elems)
        return sw_fail(SW_STATUS_INVALID, "%s=%lld is smaller than heads*head_dim=%lld",
                       name, (long long)given, (long long)min_elems);
    if (sw_rows_too_far(rows, given, min_elems))
        return sw_fail(SW_STATUS_INVALID, "%s=%lld over %lld rows addresses more than 2^60 "
                       "elements", name, (long long)given, (long long)rows);
    *stride = given;
    return SW_OK;
}

static sw_status check_align(const char *name, const void *ptr, size_t align)
{
    if (((uintptr_t)ptr) % align != 0)
        return sw_fail(SW_STATUS_MISALIGNED, "%s=%p is not %zu-byte aligned", name, ptr, align);
    return SW_OK;
}

static sw_status build_problem(const sw_prefill_plan *pl, const sw_prefill_tensors *t,
                               sw_attn_problem *pb)
{
    const sw_prefill_params *p = &pl->params;
    if (!t)
        return sw_fail(SW_STATUS_INVALID, "tensors is NULL");
    if (t->struct_size < offsetof(sw_prefill_tensors, workspace_bytes) + sizeof(t->workspace_bytes))
        return sw_fail(SW_STATUS_INVALID, "tensors->struct_size=%u is too small; call "
                       "sw_prefill_tensors_init()", t->struct_size);
    const int64_t total_q = pl->qo_indptr[pl->batch], total_kv = pl->kv_indptr[pl->batch];
    if (t->q_rows != total_q)
        return sw_fail(SW_STATUS_INVALID, "q_rows=%lld but qo_indptr[%d]=%lld: the offsets must "
                       "end at the number of query rows", (long long)t->q_rows, pl->batch,
                       (long long)total_q);
    const int64_t pool_rows = (int64_t)pl->pages.num_pages * pl->pages.page_size;
    if (pl->paged && t->kv_rows != 0 && t->kv_rows != pool_rows)
        return sw_fail(SW_STATUS_INVALID, "kv_rows=%lld but the paged pool holds %d pages of %d "
                       "tokens (%lld rows; 0 skips this check)", (long long)t->kv_rows,
                       pl->pages.num_pages, pl->pages.page_size, (long long)pool_rows);
    if (!pl->paged && t->kv_rows != total_kv)
        return sw_fail(SW_STATUS_INVALID, "kv_rows=%lld but kv_indptr[%d]=%lld: the offsets must "
                       "end at the number of key rows", (long long)t->kv_rows, pl->batch,
                       (long long)total_kv);
    /* Empty sides may pass NULL: nothing is read or written there. */
    if (total_q > 0 && (!t->q || !t->o))
        return sw_fail(SW_STATUS_INVALID, "%s is NULL", !t->q ? "q" : "o");
    if (total_kv > 0 && (!t->k || !t->v))
        return sw_fail(SW_STATUS_INVALID, "%s is NULL", !t->k ? "k" : "v");

    const int64_t dq = (int64_t)p->num_qo_heads * p->head_dim;
    const int64_t dk = (int64_t)p->num_kv_heads * p->head_dim;
    SW_TRY(check_stride("q_row_stride", &pb->q_stride, t->q_row_stride, dq, total_q));
    if (!pl->paged) { /* paged strides: sw_paged_resolve_strides */
        SW_TRY(check_stride("k_row_stride", &pb->k_stride, t->k_row_stride, dk, total_kv));
        SW_TRY(check_stride("v_row_stride", &pb->v_stride, t->v_row_stride, dk, total_kv));
    }
    SW_TRY(check_stride("o_row_stride", &pb->o_stride, t->o_row_stride, dq, total_q));

    const size_t es = sw_dtype_size(p->dtype);
    const int gpu = pl->backend == SW_BACKEND_CUDA_PORTABLE || pl->backend == SW_BACKEND_CUDA_HOPPER;
    const size_t pa = gpu ? 16 : es; /* cp.async and TMA move 16-byte chunks */
    SW_TRY(check_align("q", t->q, pa));
    SW_TRY(check_align("k", t->k, pa));
    SW_TRY(check_align("v", t->v, pa));
    SW_TRY(check_align("o", t->o, pa));
    SW_TRY(check_align("lse", t->lse, 4));
    if (gpu) {
        const int64_t se = 16 / (int64_t)es;
        const int64_t st[4] = {pb->q_stride, pb->k_stride, pb->v_stride, pb->o_stride};
        const char *nm[4] = {"q_row_stride", "k_row_stride", "v_row_stride", "o_row_stride"};
        for (int i = 0; i < 4; i++)
            if (st[i] % se != 0)
                return sw_fail(SW_STATUS_MISALIGNED, "%s=%lld is not a multiple of %lld "
                               "elements (16 bytes)", nm[i], (long long)st[i], (long long)se);
    }
    pb->dtype = p->dtype;
    pb->batch = pl->batch;
    pb->num_qo_heads = p->num_qo_heads;
    pb->num_kv_heads = p->num_kv_heads;
    pb->head_dim = p->head_dim;
    pb->causal = p->causal;
    pb->sm_scale = p->sm_scale;
    pb->qo_indptr = pl->qo_indptr;
    pb->kv_indptr = pl->kv_indptr;
    pb->q = t->q;
    pb->k = t->k;
    pb->v = t->v;
    pb->o = t->o;
    pb->lse = t->lse;
    return SW_OK;
}

/* A run's workspace: at least `need` bytes, aligned. */
static sw_status check_workspace(const sw_prefill_tensors *t, size_t need)
{
    if (!t->workspace)
        return sw_fail(SW_STATUS_WORKSPACE_TOO_SMALL, "workspace is NULL; the plan needs %zu bytes",
                       need);
    if (t->workspace_bytes < need)
        return sw_fail(SW_STATUS_WORKSPACE_TOO_SMALL, "workspace_bytes=%zu but the plan needs %zu",
                       t->workspace_bytes, need);
    return check_align("workspace", t->workspace, SW_WS_ALIGN);
}

static sw_status run_cuda(sw_prefill_plan *pl, const sw_attn_problem *pb,
                          const sw_prefill_tensors *t, const sw_cuda_gather_args *gather,
                          void *stream)
{
    if (pl->num_work == 0)
        return SW_OK;
    SW_TRY(check_workspace(t, pl->blob_bytes));
    sw_status s = sw_cuda_set_device(pl->params.device);
    /* One async copy resets the scheduler counter and uploads the requests
     * and the work list; the blob is pinned, so this does not block. It is
     * skipped when the workspace still holds this plan's blob (ws_holds),
     * except into a graph being captured, which must hold its own. */
    const uint64_t tag = tensors_tag(t);
    const int capturing = sw_cuda_stream_capturing(stream);
    if (s == SW_OK &&
        (capturing || !ws_holds(t->workspace, t->workspace_bytes, tag, pl->serial))) {
        s = sw_cuda_memcpy_h2d_async(t->workspace, pl->blob, pl->blob_bytes, stream);
        if (s == SW_OK)
            sw_cuda_staging_copied(pl->stage, stream);
    }
    if (s != SW_OK) {
        ws_note(t->workspace, t->workspace_bytes, tag, 0, capturing);
        pl->failed = 1;
        return s;
    }
    sw_cuda_prefill_args a;
    memset(&a, 0, sizeof a);
    a.dtype = pb->dtype;
    a.num_qo_heads = pb->num_qo_heads;
    a.num_kv_heads = pb->num_kv_heads;
    a.head_dim = pb->head_dim;
    a.causal = pb->causal;
    a.sm_scale = pb->sm_scale;
    a.q = pb->q;
    a.k = pb->k;
    a.v = pb->v;
    a.o = pb->o;
    a.lse = pb->lse;
    a.q_stride = pb->q_stride;
    a.k_stride = pb->k_stride;
    a.v_stride = pb->v_stride;
    a.o_stride = pb->o_stride;
    a.counter = (int32_t *)t->workspace;
    a.reqs = (const sw_req_info *)((char *)t->workspace + pl->reqs_off);
    a.work = (const sw_work_item *)((char *)t->workspace + pl->work_off);
    a.num_work = pl->num_work;
    a.batch = pl->batch;
    a.grid = pl->grid;
    a.total_q = pl->qo_indptr[pl->batch];
    a.total_kv = pl->kv_indptr[pl->batch];
    a.wide_kv = pl->wide_kv;
    if (gather)
        a.gather = *gather;
    s = pl->backend == SW_BACKEND_CUDA_HOPPER ? sw_cuda_prefill_hopper_launch(&a, stream)
                                              : sw_cuda_prefill_portable_launch(&a, stream);
    /* a kernel that did not run leaves the counter as the upload set it,
     * one that failed leaves it unknown */
    ws_note(t->workspace, t->workspace_bytes, tag, s == SW_STATUS_CUDA ? 0 : pl->serial,
            capturing);
    if (s == SW_STATUS_CUDA)
        pl->failed = 1;
    return s;
}

/* Paged K/V on a CUDA backend: the decode kernel over the pages, or the
 * pages gathered into the workspace and the prefill kernel over them. */
static sw_status run_paged_cuda(sw_prefill_plan *pl, const sw_attn_problem *pb,
                                const sw_prefill_tensors *t, const sw_paged_strides *ks,
                                const sw_paged_strides *vs, void *stream)
{
    const int64_t se = 16 / (int64_t)sw_dtype_size(pb->dtype);
    const int64_t st[6] = {ks->token, ks->head, ks->page, vs->token, vs->head, vs->page};
    const char *nm[6] = {"k_row_stride", "k_head_stride", "k_page_stride", "v_row_stride",
                         "v_head_stride", "v_page_stride"};
    for (int i = 0; i < 6; i++)
        if (st[i] % se != 0)
            return sw_fail(SW_STATUS_MISALIGNED, "%s=%lld is not a multiple of %lld elements "
                           "(16 bytes)", nm[i], (long long)st[i], (long long)se);
    if (pl->qo_indptr[pl->batch] == 0)
        return SW_OK;
    SW_TRY(check_workspace(t, pl->ws_bytes));
    sw_status s = sw_cuda_set_device(pl->params.device);
    const void *kd = NULL, *vd = NULL;
    sw_cuda_gather_args gather;
    memset(&gather, 0, sizeof gather);
    /* the decode kernel's partials and the gathered pages (past this plan's
     * blob) are written here: what the workspace held is gone */
    ws_forget(t, stream);
    if (s == SW_OK)
        s = sw_paged_cuda_run(&pl->pcuda, pb, &pl->pages, ks, vs, t->workspace, stream, &kd, &vd,
                              &gather);
    if (s == SW_OK && !pl->pcuda.decode) {
        sw_attn_problem dense = *pb;
        dense.k = kd;
        dense.v = vd;
        dense.k_stride = dense.v_stride = (int64_t)pb->num_kv_heads * pb->head_dim;
        return run_cuda(pl, &dense, t, &gather, stream);
    }
    if (s == SW_STATUS_CUDA)
        pl->failed = 1;
    return s;
}

sw_status sw_prefill_run(sw_prefill_plan *plan, const sw_prefill_tensors *t, void *stream)
{
    if (!plan)
        return sw_fail(SW_STATUS_INVALID, "plan is NULL");
    if (plan->failed)
        return sw_fail(SW_STATUS_FAILED, "this plan hit a CUDA error earlier; create a new one");
    sw_attn_problem pb;
    memset(&pb, 0, sizeof pb);
    SW_TRY(build_problem(plan, t, &pb));
    if (plan->paged) {
        sw_paged_strides ks, vs;
        SW_TRY(sw_paged_resolve_strides(&plan->pages, pb.num_kv_heads, pb.head_dim, t, &ks,
                                        &vs));
        if (plan->backend == SW_BACKEND_CUDA_PORTABLE || plan->backend == SW_BACKEND_CUDA_HOPPER)
            return run_paged_cuda(plan, &pb, t, &ks, &vs, stream);
#ifdef SW_HAVE_OPPONENT_FLASHINFER
        if (plan->opp_paged || plan->opp) {
            ws_forget(t, stream);
            sw_status s = plan->opp_paged
                              ? sw_opp_fid_run(plan->opp_paged, &pb, &ks, &vs, t->workspace,
                                               t->workspace_bytes, stream)
                              : sw_opp_fi_run_paged(plan->opp, &pb, &ks, &vs, t->workspace,
                                                    t->workspace_bytes, stream);
            if (s == SW_STATUS_CUDA)
                plan->failed = 1;
            return s;
        }
#endif
        return sw_cpu_prefill_paged(&pb, &plan->pages, &ks, &vs,
                                    plan->backend == SW_BACKEND_CPU_REF, plan->params.num_threads);
    }
    switch (plan->backend) {
    case SW_BACKEND_CPU_REF: return sw_cpu_prefill_ref(&pb);
    case SW_BACKEND_CPU: return sw_cpu_prefill_fast(&pb, plan->params.num_threads);
    case SW_BACKEND_CUDA_PORTABLE:
    case SW_BACKEND_CUDA_HOPPER: return run_cuda(plan, &pb, t, NULL, stream);
#ifdef SW_HAVE_OPPONENT_FLASHINFER
    case SW_BACKEND_OPPONENT_FLASHINFER:
    case SW_BACKEND_OPPONENT_FLASHINFER_FA3: {
        ws_forget(t, stream);
        sw_status s = sw_opp_fi_run(plan->opp, &pb, t->workspace, t->workspace_bytes, stream);
        if (s == SW_STATUS_CUDA)
            plan->failed = 1;
        return s;
    }
#endif
    default: break;
    }
    return sw_fail(SW_STATUS_INTERNAL, "plan has unresolved backend %d", (int)plan->backend);
}

sw_status sw_prefill_host(const sw_prefill_params *params, int32_t batch,
                          const int32_t *qo_indptr, const int32_t *kv_indptr,
                          const sw_prefill_tensors *t)
{
    if (!params)
        return sw_fail(SW_STATUS_INVALID, "params is NULL");
    if (params->struct_size < sizeof *params) /* refused, and read no further */
        return sw_prefill_validate_params(params);
    sw_prefill_params p = *params;
    if (p.backend == SW_BACKEND_AUTO)
        p.backend = SW_BACKEND_CPU;
    if (p.backend != SW_BACKEND_CPU && p.backend != SW_BACKEND_CPU_REF)
        return sw_fail(SW_STATUS_INVALID, "sw_prefill_host runs on the CPU; backend %s was asked",
                       sw_backend_name(p.backend));
    sw_prefill_plan *pl = NULL;
    SW_TRY(sw_prefill_plan_create(&p, batch, qo_indptr, kv_indptr, &pl));
    sw_status s = sw_prefill_run(pl, t, NULL);
    sw_prefill_plan_destroy(pl);
    return s;
}

const char *sw_version_string(void)
{
    static _Thread_local char buf[160];
    if (!buf[0]) {
        const char *archs = sw_cuda_built() ? sw_cuda_archs() : "none";
        int n = snprintf(buf, sizeof buf, "%d.%d.%d (cuda archs: %s)", SW_VERSION_MAJOR,
                         SW_VERSION_MINOR, SW_VERSION_PATCH, archs);
        if (sw_opponents_built()[0] && n > 0 && (size_t)n < sizeof buf)
            snprintf(buf + n, sizeof buf - (size_t)n, " [opponent: %s]", sw_opponents_built());
    }
    return buf;
}
