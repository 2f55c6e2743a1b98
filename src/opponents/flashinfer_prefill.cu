/* FlashInfer's ragged prefill (its FA2-style kernel, BatchPrefillWithRaggedKVCache)
 * behind Spillway's plan/run contract, for measurement only (opponent.h,
 * docs/opponents.md). Compiled only with -DSPILLWAY_OPPONENT_FLASHINFER; with
 * flashinfer_prefill_fa3.cu (its sm90 path, to which the entry points below
 * hand SW_BACKEND_OPPONENT_FLASHINFER_FA3 plans) the only files that include
 * FlashInfer's headers.
 *
 * What is FlashInfer's and what is ours:
 *  - the schedule is FlashInfer's own host function (PrefillSplitQOKVIndptr,
 *    called with the arguments its PrefillPlan passes for a ragged batch), and
 *    the kernels are FlashInfer's templates, instantiated here for
 *    bf16/f16 x head_dim 64/128/256 x causal/not x the query tile heights its
 *    heuristic can pick (FA2DetermineCtaTileQ);
 *  - the workspace layout is ours: PrefillPlan would copy the schedule into a
 *    device buffer it is given at plan time, but our plan is host-only and the
 *    workspace arrives with run(). So the plan writes the schedule (and the
 *    indptr arrays the kernel reads on the device) into a pinned blob, and run()
 *    uploads it with one async copy before the launch - what our own CUDA
 *    backend does too, so both pay the same small copy per run;
 *  - the LSE: FlashInfer's is base 2; a small kernel rescales it to the natural
 *    log of our contract (only when the caller asks for LSE).
 * Launch options follow FlashInfer's Python defaults: no split-size override,
 * split-KV when its heuristic wants it, PDL on sm_90 and newer.
 *
 * Its paged prefill (BatchPrefillWithPagedKVCache, what its Python
 * BatchPrefillWithPagedKVCacheWrapper runs with the FA2 backend) goes
 * through the same schedule, called as its PrefillPlan calls it for pages
 * (the page indptr and the page size), with our page table in the blob;
 * BF16 only, K and V pools with the same strides. */
#include "opponents/flashinfer_common.cuh"

#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <exception>
#include <new>

#ifndef SW_FLASHINFER_VERSION
#define SW_FLASHINFER_VERSION "unknown"
#endif

namespace {

namespace fi = flashinfer;

constexpr size_t kAlign = 256;

using Variant = fi::DefaultAttention</*custom_mask=*/false, /*sliding_window=*/false,
                                     /*logits_soft_cap=*/false, /*alibi=*/false>;

template <typename T>
using RaggedParams = fi::BatchPrefillRaggedParams<T, T, T, int32_t>;
template <typename T>
using PagedParams = fi::BatchPrefillPagedParams<T, T, T, int32_t>;

/* Byte offsets into the workspace. [0, int_bytes) is the uploaded blob. */
struct Layout {
    size_t request = 0, qo_tile = 0, kv_tile = 0, o_indptr = 0, chunk = 0, merge = 0;
    size_t q_indptr = 0, kv_indptr = 0;
    size_t page_indices = 0, last_page = 0; /* paged: kv_indptr holds the page indptr */
    size_t int_bytes = 0;
    size_t tmp_v = 0, tmp_s = 0; /* split-KV partial outputs (not uploaded) */
    size_t total = 0;
};

size_t take(size_t *off, size_t bytes)
{
    const size_t at = *off;
    *off = sw_align_up(at + bytes, kAlign);
    return at;
}

template <typename T>
T *at(void *base, size_t off)
{
    return reinterpret_cast<T *>(static_cast<char *>(base) + off);
}

/* The query tile heights FlashInfer's heuristic can choose for head_dim <= 256
 * (FA2DetermineCtaTileQ: 128 only below head_dim 256). */
bool tile_instantiated(int32_t head_dim, uint32_t cta_tile_q)
{
    if (cta_tile_q == 16 || cta_tile_q == 64)
        return true;
    return cta_tile_q == 128 && head_dim < 256;
}

template <typename T, uint32_t D, fi::MaskMode M>
cudaError_t launch_tile(uint32_t cta_tile_q, const RaggedParams<T> &p, T *tmp_v, float *tmp_s,
                        bool pdl, cudaStream_t st)
{
    constexpr auto kPos = fi::PosEncodingMode::kNone;
    switch (cta_tile_q) {
    case 16:
        return fi::BatchPrefillWithRaggedKVCacheDispatched<16, D, D, kPos, false, M, false, Variant>(
            p, tmp_v, tmp_s, pdl, st);
    case 64:
        return fi::BatchPrefillWithRaggedKVCacheDispatched<64, D, D, kPos, false, M, false, Variant>(
            p, tmp_v, tmp_s, pdl, st);
    case 128:
        if constexpr (D < 256)
            return fi::BatchPrefillWithRaggedKVCacheDispatched<128, D, D, kPos, false, M, false,
                                                               Variant>(p, tmp_v, tmp_s, pdl, st);
        break;
    default:
        break;
    }
    return cudaErrorInvalidConfiguration; /* refused at plan time; not reached */
}

template <typename T, uint32_t D>
cudaError_t launch_mask(int causal, uint32_t cta_tile_q, const RaggedParams<T> &p, T *tmp_v,
                        float *tmp_s, bool pdl, cudaStream_t st)
{
    if (causal)
        return launch_tile<T, D, fi::MaskMode::kCausal>(cta_tile_q, p, tmp_v, tmp_s, pdl, st);
    return launch_tile<T, D, fi::MaskMode::kNone>(cta_tile_q, p, tmp_v, tmp_s, pdl, st);
}

/* The paged kernels: SAME_KV_STRIDES (run() refuses other pools), no
 * token-head scale factors. */
template <typename T, uint32_t D, fi::MaskMode M>
cudaError_t launch_tile_paged(uint32_t cta_tile_q, const PagedParams<T> &p, T *tmp_v,
                              float *tmp_s, bool pdl, cudaStream_t st)
{
    constexpr auto kPos = fi::PosEncodingMode::kNone;
    switch (cta_tile_q) {
    case 16:
        return fi::BatchPrefillWithPagedKVCacheDispatched<true, 16, D, D, kPos, false, M, false,
                                                          Variant>(p, tmp_v, tmp_s, pdl, st);
    case 64:
        return fi::BatchPrefillWithPagedKVCacheDispatched<true, 64, D, D, kPos, false, M, false,
                                                          Variant>(p, tmp_v, tmp_s, pdl, st);
    case 128:
        if constexpr (D < 256)
            return fi::BatchPrefillWithPagedKVCacheDispatched<true, 128, D, D, kPos, false, M,
                                                              false, Variant>(p, tmp_v, tmp_s,
                                                                              pdl, st);
        break;
    default:
        break;
    }
    return cudaErrorInvalidConfiguration; /* refused at plan time; not reached */
}

template <typename T, uint32_t D>
cudaError_t launch_mask_paged(int causal, uint32_t cta_tile_q, const PagedParams<T> &p,
                              T *tmp_v, float *tmp_s, bool pdl, cudaStream_t st)
{
    if (causal)
        return launch_tile_paged<T, D, fi::MaskMode::kCausal>(cta_tile_q, p, tmp_v, tmp_s, pdl,
                                                               st);
    return launch_tile_paged<T, D, fi::MaskMode::kNone>(cta_tile_q, p, tmp_v, tmp_s, pdl, st);
}

} // namespace

struct sw_opp_fi_plan {
    sw_prefill_params p;      /* sm_scale resolved */
    int32_t batch;
    int64_t total_q;
    uint32_t cta_tile_q;
    uint32_t padded_batch_size;  /* CTAs along x; 0 = nothing to launch */
    bool split_kv;
    bool pdl;
    void *blob;               /* pinned, layout.int_bytes */
    Layout layout;
    int32_t page_size;        /* 0: ragged K/V; else pages of this many tokens */
    sw_kv_layout kv_layout;
    sw_opp_fi3_plan *fa3;     /* an FA3 plan (flashinfer_prefill_fa3.cu); the rest unused */
};

#ifdef SW_HAVE_OPPONENT_FLASHINFER_FA3
extern "C" const char *sw_opp_fi_describe(void)
{
    return "flashinfer " SW_FLASHINFER_VERSION " (fa2, fa3)";
}

extern "C" int sw_opp_fi_has_fa3(void) { return 1; }
#else
extern "C" const char *sw_opp_fi_describe(void)
{
    return "flashinfer " SW_FLASHINFER_VERSION " (fa2)";
}

extern "C" int sw_opp_fi_has_fa3(void) { return 0; }
#endif

extern "C" void sw_opp_fi_plan_destroy(sw_opp_fi_plan *plan)
{
    if (!plan)
        return;
#ifdef SW_HAVE_OPPONENT_FLASHINFER_FA3
    sw_opp_fi3_plan_destroy(plan->fa3);
#endif
    if (plan->blob)
        sw_cuda_host_free(plan->blob);
    delete plan;
}

extern "C" size_t sw_opp_fi_workspace_size(const sw_opp_fi_plan *plan)
{
#ifdef SW_HAVE_OPPONENT_FLASHINFER_FA3
    if (plan && plan->fa3)
        return sw_opp_fi3_workspace_size(plan->fa3);
#endif
    return plan ? plan->layout.total : 0;
}

/* FlashInfer's schedule into the plan's pinned blob. Host code that throws
 * flashinfer::Error on bad input (a bug here: the front end validated it). */
static sw_status schedule(sw_opp_fi_plan *pl, const int32_t *qo, const int32_t *kv, int num_sm,
                          const sw_paged_table *pt)
{
    const sw_prefill_params &p = pl->p;
    /* PrefillPlan's own arguments: two CTAs per SM, no CUDA graph, no
     * sliding window, no split-size override; for a ragged batch page size
     * 1, for pages the page indptr and the page size. */
    const uint32_t page_size = pt ? (uint32_t)pt->page_size : 1u;
    if (pt)
        kv = pt->page_indptr;
    const uint32_t max_grid = 2u * (uint32_t)num_sm;
    const uint32_t max_batch_if_split = max_grid / (uint32_t)p.num_kv_heads;
    auto [split_kv, new_batch, padded_batch, cta_tile_q, kv_chunk_size, request_idx, qo_tile_idx,
          kv_tile_idx, merge_indptr, o_indptr] =
        fi::PrefillSplitQOKVIndptr<int32_t>(
            const_cast<int32_t *>(qo), const_cast<int32_t *>(kv), (uint32_t)pl->total_q,
            (uint32_t)pl->batch, (uint32_t)p.num_qo_heads, (uint32_t)p.num_kv_heads,
            (uint32_t)p.head_dim, page_size, max_batch_if_split,
            /*enable_cuda_graph=*/false, /*window_left=*/-1, /*fixed_split_size=*/-1,
            /*disable_split_kv=*/false, /*uniform_q_len=*/0, /*fixed_uniform_q_len=*/false,
            /*head_dim_qk=*/(uint32_t)p.head_dim, /*kv_dtype_bytes=*/2);
    (void)new_batch;
    if (!tile_instantiated(p.head_dim, cta_tile_q))
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer: its heuristic chose a query "
                       "tile of %u rows at head_dim %d, which this build did not instantiate",
                       cta_tile_q, p.head_dim);
    pl->split_kv = split_kv;
    pl->cta_tile_q = cta_tile_q;
    pl->padded_batch_size = (uint32_t)padded_batch;

    Layout &l = pl->layout;
    size_t off = 0;
    const size_t b1 = sizeof(int32_t) * ((size_t)pl->batch + 1);
    l.request = take(&off, sizeof(int32_t) * padded_batch);
    l.qo_tile = take(&off, sizeof(int32_t) * padded_batch);
    l.kv_tile = take(&off, sizeof(int32_t) * padded_batch);
    l.o_indptr = take(&off, b1);
    l.chunk = take(&off, sizeof(int32_t));
    if (split_kv)
        l.merge = take(&off, sizeof(int32_t) * ((size_t)pl->total_q + 1));
    l.q_indptr = take(&off, b1);
    l.kv_indptr = take(&off, b1);
    if (pt) {
        l.page_indices = take(&off, sizeof(int32_t) * ((size_t)pt->page_indptr[pl->batch] + 1));
        l.last_page = take(&off, b1);
    }
    l.int_bytes = off;
    if (split_kv) {
        /* PrefillPlan's sizes: one partial row per (query row, kv chunk),
         * bounded through the padded batch; fp32-sized as FlashInfer does. */
        const size_t group = (size_t)(p.num_qo_heads / p.num_kv_heads);
        const size_t rows = ((size_t)padded_batch * cta_tile_q + group - 1) / group;
        if ((size_t)o_indptr.back() > rows)
            return sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer: %d partial rows exceed the "
                           "bound %zu", (int)o_indptr.back(), rows);
        l.tmp_v = take(&off, (size_t)p.num_qo_heads * rows * (size_t)p.head_dim * sizeof(float));
        l.tmp_s = take(&off, (size_t)p.num_qo_heads * rows * sizeof(float));
    }
    l.total = off;

    SW_TRY(sw_cuda_host_alloc(&pl->blob, l.int_bytes));
    std::memset(pl->blob, 0, l.int_bytes);
    std::memcpy(at<int32_t>(pl->blob, l.request), request_idx.data(), 4 * request_idx.size());
    std::memcpy(at<int32_t>(pl->blob, l.qo_tile), qo_tile_idx.data(), 4 * qo_tile_idx.size());
    std::memcpy(at<int32_t>(pl->blob, l.kv_tile), kv_tile_idx.data(), 4 * kv_tile_idx.size());
    std::memcpy(at<int32_t>(pl->blob, l.o_indptr), o_indptr.data(), 4 * o_indptr.size());
    *at<int32_t>(pl->blob, l.chunk) = (int32_t)kv_chunk_size;
    if (split_kv)
        std::memcpy(at<int32_t>(pl->blob, l.merge), merge_indptr.data(), 4 * merge_indptr.size());
    std::memcpy(at<int32_t>(pl->blob, l.q_indptr), qo, b1);
    std::memcpy(at<int32_t>(pl->blob, l.kv_indptr), kv, b1);
    if (pt) {
        std::memcpy(at<int32_t>(pl->blob, l.page_indices), pt->page_indices,
                    sizeof(int32_t) * (size_t)pt->page_indptr[pl->batch]);
        int32_t *last = at<int32_t>(pl->blob, l.last_page);
        for (int32_t r = 0; r < pl->batch; r++) {
            const int32_t np = pt->page_indptr[r + 1] - pt->page_indptr[r];
            const int32_t len = pt->kv_indptr[r + 1] - pt->kv_indptr[r];
            last[r] = np ? len - (np - 1) * pt->page_size : 0;
        }
    }
    return SW_OK;
}

/* The plan for validated offsets (kv: token offsets; pt: the page table,
 * NULL for ragged K/V). */
static sw_status make_plan(const sw_prefill_params *p, int32_t batch, const int32_t *qo_indptr,
                           const int32_t *kv_indptr, const sw_paged_table *pt,
                           sw_opp_fi_plan **out)
{
    /* Its causal mask is bottom-right aligned like ours, but not for q_len > kv_len. */
    SW_TRY(fi_check_causal_lengths("flashinfer", p, batch, qo_indptr, kv_indptr));
    SW_CUDA_CHECK(cudaSetDevice(p->device));
    int num_sm = 0, major = 0;
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&num_sm, cudaDevAttrMultiProcessorCount, p->device));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, p->device));

    sw_opp_fi_plan *pl = new (std::nothrow) sw_opp_fi_plan();
    if (!pl)
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot allocate an opponent plan");
    pl->p = *p;
    pl->batch = batch;
    pl->total_q = batch > 0 ? qo_indptr[batch] : 0;
    pl->pdl = major >= 9;
    pl->page_size = pt ? pt->page_size : 0;
    pl->kv_layout = pt ? pt->layout : SW_KV_NHD;
    sw_status s = SW_OK;
    if (pl->total_q > 0) { /* else nothing to launch (FlashInfer divides by the batch) */
        try {
            s = schedule(pl, qo_indptr, kv_indptr, num_sm, pt);
        } catch (const std::exception &e) {
            s = sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer: its planner failed: %s",
                        e.what());
        } catch (...) {
            s = sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer: its planner threw");
        }
    }
    if (s != SW_OK) {
        sw_opp_fi_plan_destroy(pl);
        return s;
    }
    *out = pl;
    return SW_OK;
}

/* Either plan for its backend (pt: the page table, NULL for ragged K/V). */
static sw_status create(const sw_prefill_params *p, sw_backend backend, int32_t batch,
                        const int32_t *qo_indptr, const int32_t *kv_indptr,
                        const sw_paged_table *pt, sw_opp_fi_plan **out)
{
    *out = nullptr;
#ifdef SW_HAVE_OPPONENT_FLASHINFER_FA3
    if (backend == SW_BACKEND_OPPONENT_FLASHINFER_FA3) {
        sw_opp_fi3_plan *fa3 = nullptr;
        SW_TRY(pt ? sw_opp_fi3_plan_create_paged(p, batch, qo_indptr, pt, &fa3)
                  : sw_opp_fi3_plan_create(p, batch, qo_indptr, kv_indptr, &fa3));
        sw_opp_fi_plan *pl = new (std::nothrow) sw_opp_fi_plan();
        if (!pl) {
            sw_opp_fi3_plan_destroy(fa3);
            return sw_fail(SW_STATUS_NO_MEMORY, "cannot allocate an opponent plan");
        }
        pl->fa3 = fa3;
        *out = pl;
        return SW_OK;
    }
#endif
    if (backend != SW_BACKEND_OPPONENT_FLASHINFER)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent backend %s is not compiled into this "
                       "build", sw_backend_name(backend));
    if (pt && p->dtype != SW_DTYPE_BF16)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer paged prefill: this build "
                       "instantiates BF16 only");
    return make_plan(p, batch, qo_indptr, kv_indptr, pt, out);
}

extern "C" sw_status sw_opp_fi_plan_create(const sw_prefill_params *p, sw_backend backend,
                                           int32_t batch, const int32_t *qo_indptr,
                                           const int32_t *kv_indptr, sw_opp_fi_plan **out)
{
    return create(p, backend, batch, qo_indptr, kv_indptr, nullptr, out);
}

extern "C" sw_status sw_opp_fi_plan_create_paged(const sw_prefill_params *p, sw_backend backend,
                                                 int32_t batch, const int32_t *qo_indptr,
                                                 const sw_paged_table *pt, sw_opp_fi_plan **out)
{
    return create(p, backend, batch, qo_indptr, pt->kv_indptr, pt, out);
}

/* The fields the ragged and the paged params share: the outputs, the
 * heads, the scale, and the schedule's arrays in the uploaded blob; the
 * split-KV partials' buffers when the schedule splits. */
template <typename P, typename T>
static void set_common(P &prm, const sw_opp_fi_plan *pl, const sw_attn_problem *pb, void *ws,
                       T **tmp_v, float **tmp_s)
{
    const Layout &l = pl->layout;
    prm.q = static_cast<T *>(const_cast<void *>(pb->q));
    prm.o = static_cast<T *>(pb->o);
    prm.lse = pb->lse;
    prm.q_indptr = at<int32_t>(ws, l.q_indptr);
    prm.num_qo_heads = (uint32_t)pb->num_qo_heads;
    prm.group_size = fi::uint_fastdiv((uint32_t)(pb->num_qo_heads / pb->num_kv_heads));
    prm.window_left = -1;
    prm.logits_soft_cap = 0.0f;
    prm.sm_scale = pb->sm_scale;
    prm.rope_rcp_scale = 1.0f;
    prm.rope_rcp_theta = 1.0f / 1e4f;
    prm.request_indices = at<int32_t>(ws, l.request);
    prm.qo_tile_indices = at<int32_t>(ws, l.qo_tile);
    prm.kv_tile_indices = at<int32_t>(ws, l.kv_tile);
    prm.o_indptr = at<int32_t>(ws, l.o_indptr);
    prm.kv_chunk_size_ptr = at<int32_t>(ws, l.chunk);
    prm.padded_batch_size = pl->padded_batch_size;
    prm.max_total_num_rows = (uint32_t)pl->total_q;
    *tmp_v = nullptr;
    *tmp_s = nullptr;
    if (pl->split_kv) {
        prm.merge_indptr = at<int32_t>(ws, l.merge);
        *tmp_v = at<T>(ws, l.tmp_v);
        *tmp_s = at<float>(ws, l.tmp_s);
    }
}

template <typename T>
static cudaError_t run_typed(const sw_opp_fi_plan *pl, const sw_attn_problem *pb, void *ws,
                             cudaStream_t st)
{
    RaggedParams<T> prm; /* its constructor zeroes every optional field */
    T *tmp_v;
    float *tmp_s;
    set_common(prm, pl, pb, ws, &tmp_v, &tmp_s);
    prm.k = static_cast<T *>(const_cast<void *>(pb->k));
    prm.v = static_cast<T *>(const_cast<void *>(pb->v));
    prm.kv_indptr = at<int32_t>(ws, pl->layout.kv_indptr);
    prm.num_kv_heads = (uint32_t)pb->num_kv_heads;
    prm.q_stride_n = (uint32_t)pb->q_stride;
    prm.q_stride_h = (uint32_t)pb->head_dim;
    prm.k_stride_n = (uint32_t)pb->k_stride;
    prm.k_stride_h = (uint32_t)pb->head_dim;
    prm.v_stride_n = (uint32_t)pb->v_stride;
    prm.v_stride_h = (uint32_t)pb->head_dim;
    const uint32_t tq = pl->cta_tile_q;
    switch (pb->head_dim) {
    case 64: return launch_mask<T, 64>(pb->causal, tq, prm, tmp_v, tmp_s, pl->pdl, st);
    case 128: return launch_mask<T, 128>(pb->causal, tq, prm, tmp_v, tmp_s, pl->pdl, st);
    case 256: return launch_mask<T, 256>(pb->causal, tq, prm, tmp_v, tmp_s, pl->pdl, st);
    default: break;
    }
    return cudaErrorInvalidValue; /* validated by the front end; not reached */
}

static sw_status check_align(const char *name, const void *ptr)
{
    if (((uintptr_t)ptr) % 16 != 0)
        return sw_fail(SW_STATUS_MISALIGNED, "%s=%p is not 16-byte aligned", name, ptr);
    return SW_OK;
}

/* What both runs do once their inputs are checked: the blob's upload, the
 * launch (`launch(stream)`, FlashInfer's launcher, which may throw), the
 * LSE to the natural log. */
template <typename F>
static sw_status upload_and_launch(const sw_opp_fi_plan *pl, const sw_attn_problem *pb, void *ws,
                                   void *stream, F launch)
{
    cudaStream_t cs = static_cast<cudaStream_t>(stream);
    SW_CUDA_CHECK(cudaSetDevice(pl->p.device));
    SW_CUDA_CHECK(cudaMemcpyAsync(ws, pl->blob, pl->layout.int_bytes, cudaMemcpyHostToDevice, cs));
    cudaError_t e = cudaSuccess;
    try {
        e = launch(cs);
    } catch (const std::exception &ex) {
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer: its launcher failed: %s", ex.what());
    } catch (...) {
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer: its launcher threw");
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer: launch: %s (%s)", cudaGetErrorName(e),
                       cudaGetErrorString(e));
    }
    if (pb->lse)
        SW_TRY(fi_lse_to_ln(pb->lse, pl->total_q * pb->num_qo_heads, cs));
    return SW_OK;
}

extern "C" sw_status sw_opp_fi_run(sw_opp_fi_plan *pl, const sw_attn_problem *pb, void *ws,
                                   size_t ws_bytes, void *stream)
{
#ifdef SW_HAVE_OPPONENT_FLASHINFER_FA3
    if (pl->fa3)
        return sw_opp_fi3_run(pl->fa3, pb, ws, ws_bytes, stream);
#endif
    if (pl->padded_batch_size == 0)
        return SW_OK;
    SW_TRY(fi_check_workspace(ws, ws_bytes, pl->layout.total, kAlign));
    SW_TRY(check_align("q", pb->q));
    SW_TRY(check_align("k", pb->k));
    SW_TRY(check_align("v", pb->v));
    SW_TRY(check_align("o", pb->o));
    const int64_t dq = (int64_t)pb->num_qo_heads * pb->head_dim;
    if (pb->o_stride != dq)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer writes O dense: o_row_stride="
                       "%lld must be num_qo_heads*head_dim=%lld", (long long)pb->o_stride,
                       (long long)dq);
    const int64_t st[3] = {pb->q_stride, pb->k_stride, pb->v_stride};
    const char *nm[3] = {"q_row_stride", "k_row_stride", "v_row_stride"};
    for (int i = 0; i < 3; i++) {
        if (st[i] % 8 != 0)
            return sw_fail(SW_STATUS_MISALIGNED, "%s=%lld is not a multiple of 8 elements "
                           "(16 bytes)", nm[i], (long long)st[i]);
        if (st[i] > (int64_t)UINT32_MAX)
            return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer: %s=%lld exceeds its "
                           "32-bit strides", nm[i], (long long)st[i]);
    }
    /* Its kernels form element offsets (row * stride) in 32 bits. */
    const int64_t total_kv = pb->kv_indptr[pb->batch];
    const int64_t span[4] = {pl->total_q * pb->q_stride, total_kv * pb->k_stride,
                             total_kv * pb->v_stride, pl->total_q * dq};
    for (int i = 0; i < 4; i++)
        if (span[i] > (int64_t)UINT32_MAX)
            return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer: %s spans %lld elements, "
                           "more than its 32-bit offsets reach", i == 0 ? "q" : i == 1 ? "k"
                           : i == 2 ? "v" : "o", (long long)span[i]);
    return upload_and_launch(pl, pb, ws, stream, [&](cudaStream_t cs) {
        return pb->dtype == SW_DTYPE_BF16 ? run_typed<nv_bfloat16>(pl, pb, ws, cs)
                                          : run_typed<half>(pl, pb, ws, cs);
    });
}

static cudaError_t run_paged_bf16(const sw_opp_fi_plan *pl, const sw_attn_problem *pb,
                                  const sw_paged_strides *ks, const sw_paged_strides *vs,
                                  void *ws, cudaStream_t st)
{
    using T = nv_bfloat16;
    const Layout &l = pl->layout;
    const bool hnd = pl->kv_layout == SW_KV_HND;
    /* the pools' strides as its paged_kv_t takes them: a 4-D tensor's
     * [page][token][head] (NHD) or [page][head][token] (HND) strides */
    const int64_t kstr[3] = {ks->page, hnd ? ks->head : ks->token, hnd ? ks->token : ks->head};
    const int64_t vstr[3] = {vs->page, hnd ? vs->head : vs->token, hnd ? vs->token : vs->head};
    PagedParams<T> prm; /* its constructor zeroes every optional field */
    T *tmp_v;
    float *tmp_s;
    set_common(prm, pl, pb, ws, &tmp_v, &tmp_s);
    prm.paged_kv = fi::paged_kv_t<T, int32_t>(
        (uint32_t)pb->num_kv_heads, (uint32_t)pl->page_size, (uint32_t)pb->head_dim,
        (uint32_t)pb->batch, hnd ? fi::QKVLayout::kHND : fi::QKVLayout::kNHD,
        static_cast<T *>(const_cast<void *>(pb->k)), static_cast<T *>(const_cast<void *>(pb->v)),
        kstr, vstr, at<int32_t>(ws, l.page_indices), at<int32_t>(ws, l.kv_indptr),
        at<int32_t>(ws, l.last_page));
    prm.q_stride_n = (int32_t)pb->q_stride;
    prm.q_stride_h = (int32_t)pb->head_dim;
    const uint32_t tq = pl->cta_tile_q;
    switch (pb->head_dim) {
    case 64: return launch_mask_paged<T, 64>(pb->causal, tq, prm, tmp_v, tmp_s, pl->pdl, st);
    case 128: return launch_mask_paged<T, 128>(pb->causal, tq, prm, tmp_v, tmp_s, pl->pdl, st);
    case 256: return launch_mask_paged<T, 256>(pb->causal, tq, prm, tmp_v, tmp_s, pl->pdl, st);
    default: break;
    }
    return cudaErrorInvalidValue; /* validated by the front end; not reached */
}

extern "C" sw_status sw_opp_fi_run_paged(sw_opp_fi_plan *pl, const sw_attn_problem *pb,
                                         const sw_paged_strides *ks, const sw_paged_strides *vs,
                                         void *ws, size_t ws_bytes, void *stream)
{
#ifdef SW_HAVE_OPPONENT_FLASHINFER_FA3
    if (pl->fa3)
        return sw_opp_fi3_run_paged(pl->fa3, pb, ks, vs, ws, ws_bytes, stream);
#endif
    if (!pl->page_size)
        return sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer: a ragged plan run over pages");
    if (ks->token != vs->token || ks->head != vs->head || ks->page != vs->page)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer paged prefill: K and V pools "
                       "need the same strides (the kernel instantiated here)");
    if (ks->page % 8 != 0 || ks->token % 8 != 0 || ks->head % 8 != 0)
        return sw_fail(SW_STATUS_MISALIGNED, "opponent flashinfer paged prefill: pool strides "
                       "(page %lld, token %lld, head %lld) must be multiples of 8 elements "
                       "(its 16-byte loads)", (long long)ks->page, (long long)ks->token,
                       (long long)ks->head);
    if (ks->page > (int64_t)UINT32_MAX || ks->token > (int64_t)UINT32_MAX ||
        ks->head > (int64_t)UINT32_MAX)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer paged prefill: a pool stride "
                       "exceeds its 32-bit strides");
    const int64_t dq = (int64_t)pb->num_qo_heads * pb->head_dim;
    if (pb->o_stride != dq)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer writes O dense: o_row_stride="
                       "%lld must be num_qo_heads*head_dim=%lld", (long long)pb->o_stride,
                       (long long)dq);
    if (pb->q_stride % 8 != 0)
        return sw_fail(SW_STATUS_MISALIGNED, "q_row_stride=%lld is not a multiple of 8 elements",
                       (long long)pb->q_stride);
    const int64_t span[2] = {pl->total_q * pb->q_stride, pl->total_q * dq};
    for (int i = 0; i < 2; i++)
        if (span[i] > (int64_t)INT32_MAX)
            return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer: %s spans %lld elements, "
                           "more than its 32-bit offsets reach", i ? "o" : "q",
                           (long long)span[i]);
    if (pl->padded_batch_size == 0)
        return SW_OK;
    SW_TRY(fi_check_workspace(ws, ws_bytes, pl->layout.total, kAlign));
    SW_TRY(check_align("q", pb->q));
    SW_TRY(check_align("k", pb->k));
    SW_TRY(check_align("v", pb->v));
    SW_TRY(check_align("o", pb->o));
    return upload_and_launch(pl, pb, ws, stream, [&](cudaStream_t cs) {
        return run_paged_bf16(pl, pb, ks, vs, ws, cs);
    });
}
