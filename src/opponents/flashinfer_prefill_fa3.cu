/* FlashInfer's FA3 ragged and paged prefill (its sm90 kernels, the ones its
 * Python `fa3` backend and, on Hopper, its `auto` backend run) behind
 * Spillway's plan/run contract, for measurement only (opponent.h,
 * docs/opponents.md). Compiled only
 * with -DSPILLWAY_OPPONENT_FLASHINFER and sm_90a in SPILLWAY_CUDA_ARCHS; the
 * FA2 file (flashinfer_prefill.cu) hands SW_BACKEND_OPPONENT_FLASHINFER_FA3
 * plans here.
 *
 * What is FlashInfer's and what is ours:
 *  - the kernel is FlashInfer's BatchPrefillWithRaggedKVCacheDispatched
 *    (hopper/prefill_sm90.cuh: TMA loads, wgmma, a persistent grid of one CTA
 *    per SM walking a per-CTA work list), instantiated here for bf16/f16 x
 *    head_dim 64/128/256 x causal/not with the variant its Python passes
 *    without soft-cap (DefaultAttention<false>) and no sliding window;
 *  - the work list is what its host planner PrefillSM90Plan computes for a
 *    ragged batch (page size 1, kv lengths from kv_indptr, no CUDA graph),
 *    built from its own cost model, heap and causal bound (scheduler.cuh:
 *    cost_function, MinHeap, packed_causal_kv_end). PrefillSM90Plan itself
 *    cannot be called from a host-only plan: it copies the list into a device
 *    buffer it must be given at plan time, and our workspace arrives with
 *    run(). So build_schedule() below walks the same loop into a pinned blob,
 *    and sw_opp_fi3_schedule_check() (GPU test) runs PrefillSM90Plan on the
 *    same batch and compares the two lists entry by entry;
 *  - run() uploads the blob into the caller's workspace with one async copy
 *    and launches on the caller's stream (as the FA2 opponent and our own CUDA
 *    backend do); FlashInfer's Python uploads at plan time instead, so it pays
 *    that copy once per plan where this pays it once per run;
 *  - the LSE: FlashInfer's is base 2; a small kernel rescales it to the
 *    natural log of our contract (only when the caller asks for LSE);
 *  - paged K/V: its BatchPrefillWithPagedKVCacheDispatched (the same
 *    persistent CTAs, K and V rows fetched per page with cp.async), BF16
 *    only; the work list is PrefillSM90Plan's for pages (each item's key
 *    start is its request's first page, its length in tokens), the blob
 *    also holds our page indices.
 * Its launcher ignores PDL for the ragged sm90 kernel, so there is no launch
 * option to follow. */
#include "opponents/flashinfer_common.cuh"

#include <flashinfer/attention/hopper/default_params.cuh>
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/cutlass_utils.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <tuple>
#include <vector>

namespace {

namespace fi = flashinfer;

constexpr size_t kWsAlign = 256; /* the workspace base, as for the other backends */
constexpr size_t kArrAlign = 16; /* each array in the blob (PrefillSM90Plan's alignment) */

/* Its planner shares one schedule among all heads above this many query tiles
 * per head (a grid of SMs x heads, BatchPrefillTileScheduler). That scheduler
 * is not instantiated here (it would double the compile time for batches of
 * more than half a million query rows), so such a plan is refused. */
constexpr int kMaxWorksPerHead = 4096;

using Variant = fi::DefaultAttention</*use_logits_soft_cap=*/false>;

template <typename T>
using RaggedParams = fi::BatchPrefillRaggedParams<T, T, T, int32_t>;
template <typename T>
using PagedParams = fi::BatchPrefillPagedParams<T, T, T, int32_t>;

/* The query tile height of the kernel for a head_dim (getCTATileSize in
 * prefill_sm90.cuh); the planner uses the same rule. */
int tile_q_rows(int head_dim) { return head_dim == 64 ? 192 : 128; }

/* The per-CTA work list, flattened: entry i of each array describes one
 * (query tile, qo head, request) item; CTA c runs items
 * [work_indptr[c], work_indptr[c+1]). */
struct Schedule {
    std::vector<int32_t> qo_tile, qo_start, kv_start, qo_len, kv_len, head, batch, work_indptr;
    bool same_for_all_heads = false;
};

/* Byte offsets of the arrays in the blob / the workspace. */
struct Layout {
    size_t qo_tile = 0, qo_start = 0, kv_start = 0, qo_len = 0, kv_len = 0, head = 0;
    size_t work_indptr = 0, batch = 0;
    size_t pages = 0; /* paged: the page indices */
    size_t total = 0;
};

size_t take(size_t *off, size_t bytes)
{
    const size_t at = sw_align_up(*off, kArrAlign);
    *off = at + bytes;
    return at;
}

template <typename T>
T *at(void *base, size_t off)
{
    return reinterpret_cast<T *>(static_cast<char *>(base) + off);
}

/* PrefillSM90Plan's assignment: requests by decreasing kv_len, each
 * request's query tiles from the last to the first, every item to the CTA
 * with the least accumulated cost (its heap; cost 2*tile + visible keys, the
 * causal bound of the tile for causal), one pass per qo head unless the heads
 * share one schedule. kv: the keys' token offsets (their lengths); kv_start:
 * where each request's keys start as the kernel counts them (the token
 * offsets for ragged K/V, the page indptr for pages). */
void build_schedule(const int32_t *qo, const int32_t *kv, const int32_t *kv_start, int32_t batch,
                    int num_qo_heads, int head_dim, bool causal, int num_ctas, Schedule *s)
{
    const int tile = tile_q_rows(head_dim);
    /* The same element type and comparator as its planner, so std::sort
     * leaves ties in the same order. */
    std::vector<std::tuple<int, int, int>> reqs;
    reqs.reserve((size_t)batch);
    for (int32_t i = 0; i < batch; i++)
        reqs.push_back({(int)i, qo[i + 1] - qo[i], kv[i + 1] - kv[i]});
    std::sort(reqs.begin(), reqs.end(),
              [](const auto &a, const auto &b) { return std::get<2>(a) > std::get<2>(b); });

    const int64_t works_per_head = fi::ceil_div((int64_t)qo[batch], (int64_t)tile) + batch - 1;
    s->same_for_all_heads = works_per_head > kMaxWorksPerHead;
    const int heads = s->same_for_all_heads ? 1 : num_qo_heads;

    fi::MinHeap heap(num_ctas);
    std::vector<std::vector<int32_t>> items((size_t)num_ctas); /* (head, request, tile) triples */
    for (int h = 0; h < heads; h++) {
        for (const auto &[i, ql, kl] : reqs) {
            const int tiles = fi::ceil_div(ql, tile);
            for (int t = tiles - 1; t >= 0; t--) {
                auto [cta, cost] = heap.pop();
                const int kv_eff = causal ? fi::packed_causal_kv_end(ql, kl, t, tile, tiles,
                                                                     /*group_size=*/1)
                                          : kl;
                heap.insert({cta, cost + fi::cost_function(tile, kv_eff)});
                std::vector<int32_t> &v = items[(size_t)cta];
                v.push_back(h);
                v.push_back(i);
                v.push_back(t);
            }
        }
    }
    s->work_indptr.assign((size_t)num_ctas + 1, 0);
    for (int c = 0; c < num_ctas; c++)
        s->work_indptr[(size_t)c + 1] = s->work_indptr[(size_t)c] +
                                        (int32_t)(items[(size_t)c].size() / 3);
    for (const std::vector<int32_t> &v : items) {
        for (size_t j = 0; j < v.size(); j += 3) {
            const int32_t h = v[j], i = v[j + 1], t = v[j + 2];
            s->qo_tile.push_back(t);
            s->qo_start.push_back(qo[i]);
            s->kv_start.push_back(kv_start[i]);
            s->qo_len.push_back(qo[i + 1] - qo[i]);
            s->kv_len.push_back(kv[i + 1] - kv[i]);
            s->head.push_back(h);
            s->batch.push_back(i);
        }
    }
}

template <typename T, uint32_t D, fi::MaskMode M>
cudaError_t launch_dim(RaggedParams<T> &p, cudaStream_t st)
{
    return fi::BatchPrefillWithRaggedKVCacheDispatched<D, D, M, /*LEFT_SLIDING_WINDOW=*/false,
                                                       /*SAME_SCHEDULE_FOR_ALL_HEADS=*/false,
                                                       Variant>(p, /*enable_pdl=*/false, st);
}

template <typename T, uint32_t D>
cudaError_t launch_mask(int causal, RaggedParams<T> &p, cudaStream_t st)
{
    if (causal)
        return launch_dim<T, D, fi::MaskMode::kCausal>(p, st);
    return launch_dim<T, D, fi::MaskMode::kNone>(p, st);
}

} // namespace

struct sw_opp_fi3_plan {
    sw_prefill_params p; /* sm_scale resolved */
    int32_t batch;
    int64_t total_q, total_kv;
    int num_ctas;        /* SMs of the device at plan time: the persistent grid */
    int32_t num_works;   /* 0 = nothing to launch */
    void *blob;          /* pinned, layout.total bytes */
    Layout layout;
    int32_t page_size;   /* paged: the pages' tokens; 0 = ragged K/V */
};

extern "C" void sw_opp_fi3_plan_destroy(sw_opp_fi3_plan *plan)
{
    if (!plan)
        return;
    if (plan->blob)
        sw_cuda_host_free(plan->blob);
    delete plan;
}

extern "C" size_t sw_opp_fi3_workspace_size(const sw_opp_fi3_plan *plan)
{
    return plan && plan->num_works > 0 ? plan->layout.total : 0;
}

static sw_status fill_blob(sw_opp_fi3_plan *pl, const Schedule &s, const sw_paged_table *pt)
{
    Layout &l = pl->layout;
    const size_t n = s.qo_tile.size() * sizeof(int32_t);
    const size_t np = pt ? (size_t)pt->page_indptr[pl->batch] : 0;
    size_t off = 0;
    l.qo_tile = take(&off, n);
    l.qo_start = take(&off, n);
    l.kv_start = take(&off, n);
    l.qo_len = take(&off, n);
    l.kv_len = take(&off, n);
    l.head = take(&off, n);
    l.work_indptr = take(&off, s.work_indptr.size() * sizeof(int32_t));
    l.batch = take(&off, n);
    if (pt)
        l.pages = take(&off, sizeof(int32_t) * (np + 1));
    l.total = sw_align_up(off, kArrAlign);
    SW_TRY(sw_cuda_host_alloc(&pl->blob, l.total));
    std::memset(pl->blob, 0, l.total);
    std::memcpy(at<int32_t>(pl->blob, l.qo_tile), s.qo_tile.data(), n);
    std::memcpy(at<int32_t>(pl->blob, l.qo_start), s.qo_start.data(), n);
    std::memcpy(at<int32_t>(pl->blob, l.kv_start), s.kv_start.data(), n);
    std::memcpy(at<int32_t>(pl->blob, l.qo_len), s.qo_len.data(), n);
    std::memcpy(at<int32_t>(pl->blob, l.kv_len), s.kv_len.data(), n);
    std::memcpy(at<int32_t>(pl->blob, l.head), s.head.data(), n);
    std::memcpy(at<int32_t>(pl->blob, l.work_indptr), s.work_indptr.data(),
                s.work_indptr.size() * sizeof(int32_t));
    std::memcpy(at<int32_t>(pl->blob, l.batch), s.batch.data(), n);
    if (pt && np)
        std::memcpy(at<int32_t>(pl->blob, l.pages), pt->page_indices, sizeof(int32_t) * np);
    return SW_OK;
}

/* The plan for validated offsets (kv: the keys' token offsets; pt: the page
 * table, NULL for ragged K/V). */
static sw_status make_plan(const sw_prefill_params *p, int32_t batch, const int32_t *qo_indptr,
                           const int32_t *kv_indptr, const sw_paged_table *pt,
                           sw_opp_fi3_plan **out)
{
    *out = nullptr;
    /* Its causal bounds (the planner's packed_causal_kv_end, the kernel's
     * number of key tiles) assume kv_len >= q_len, as the FA2 path does. */
    SW_TRY(fi_check_causal_lengths("flashinfer-fa3", p, batch, qo_indptr, kv_indptr));
    SW_CUDA_CHECK(cudaSetDevice(p->device));
    int num_sm = 0, major = 0, minor = 0;
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&num_sm, cudaDevAttrMultiProcessorCount, p->device));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, p->device));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, p->device));
    /* sm_90a code (wgmma, setmaxnreg) runs on compute capability 9.0 only. */
    if (major != 9 || minor != 0)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer-fa3 runs on sm_90 (H100/H200) "
                       "only; device %d is sm_%d%d (use backend flashinfer, its FA2 path)",
                       p->device, major, minor);

    sw_opp_fi3_plan *pl = new (std::nothrow) sw_opp_fi3_plan();
    if (!pl)
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot allocate an opponent plan");
    pl->p = *p;
    pl->batch = batch;
    pl->total_q = batch > 0 ? qo_indptr[batch] : 0;
    pl->total_kv = batch > 0 ? kv_indptr[batch] : 0;
    pl->num_ctas = num_sm;
    pl->page_size = pt ? pt->page_size : 0;
    sw_status s = SW_OK;
    if (pl->total_q > 0) {
        try {
            Schedule sch;
            build_schedule(qo_indptr, kv_indptr, pt ? pt->page_indptr : kv_indptr, batch,
                           p->num_qo_heads, p->head_dim, p->causal != 0, num_sm, &sch);
            if (sch.same_for_all_heads)
                s = sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer-fa3: %lld query rows in "
                            "%d requests make FlashInfer share one schedule among all heads (more "
                            "than %d tiles per head), a scheduler this build did not instantiate",
                            (long long)pl->total_q, batch, kMaxWorksPerHead);
            else {
                pl->num_works = (int32_t)sch.qo_tile.size();
                s = fill_blob(pl, sch, pt);
            }
        } catch (const std::bad_alloc &) {
            s = sw_fail(SW_STATUS_NO_MEMORY, "opponent flashinfer-fa3: out of memory planning");
        } catch (const std::exception &e) {
            s = sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer-fa3: planning failed: %s",
                        e.what());
        }
    }
    if (s != SW_OK) {
        sw_opp_fi3_plan_destroy(pl);
        return s;
    }
    *out = pl;
    return SW_OK;
}

extern "C" sw_status sw_opp_fi3_plan_create(const sw_prefill_params *p, int32_t batch,
                                            const int32_t *qo_indptr, const int32_t *kv_indptr,
                                            sw_opp_fi3_plan **out)
{
    return make_plan(p, batch, qo_indptr, kv_indptr, nullptr, out);
}

extern "C" sw_status sw_opp_fi3_plan_create_paged(const sw_prefill_params *p, int32_t batch,
                                                  const int32_t *qo_indptr,
                                                  const sw_paged_table *pt,
                                                  sw_opp_fi3_plan **out)
{
    *out = nullptr;
    if (p->dtype != SW_DTYPE_BF16)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer-fa3 paged prefill: this build "
                       "instantiates BF16 only");
    return make_plan(p, batch, qo_indptr, pt->kv_indptr, pt, out);
}

/* The fields its ragged and paged params share: Q, O, LSE, the work list's
 * arrays in the uploaded blob, the scale, the heads, the mask. */
template <typename P>
static void set_common(P &prm, const sw_opp_fi3_plan *pl, const sw_attn_problem *pb, void *ws)
{
    using T = typename P::DTypeQ;
    const Layout &l = pl->layout;
    std::memset(&prm, 0, sizeof prm); /* a plain struct: every optional pointer NULL */
    prm.q_ptr = static_cast<T *>(const_cast<void *>(pb->q));
    prm.o_ptr = static_cast<T *>(pb->o);
    prm.lse_ptr = pb->lse;
    prm.qo_tile_indices = at<int32_t>(ws, l.qo_tile);
    prm.qo_indptr = at<int32_t>(ws, l.qo_start);
    prm.kv_indptr = at<int32_t>(ws, l.kv_start);
    prm.qo_lens = at<int32_t>(ws, l.qo_len);
    prm.kv_lens = at<int32_t>(ws, l.kv_len);
    prm.head_indices = at<int32_t>(ws, l.head);
    prm.work_indptr = at<int32_t>(ws, l.work_indptr);
    prm.batch_indices = at<int32_t>(ws, l.batch);
    prm.additional_params.logits_soft_cap = 0.0f;
    prm.additional_params.sm_scale = pb->sm_scale;
    prm.q_stride_n = pb->q_stride;
    prm.o_stride_n = pb->o_stride;
    prm.q_stride_h = pb->head_dim;
    prm.o_stride_h = pb->head_dim;
    prm.nnz_qo = pl->total_q;
    prm.num_qo_heads = pb->num_qo_heads;
    prm.num_kv_heads = pb->num_kv_heads;
    prm.group_size = pb->num_qo_heads / pb->num_kv_heads;
    prm.window_left = -1;
    prm.causal = pb->causal != 0;
}

template <typename T>
static cudaError_t run_typed(const sw_opp_fi3_plan *pl, const sw_attn_problem *pb, void *ws,
                             cudaStream_t st)
{
    RaggedParams<T> prm;
    set_common(prm, pl, pb, ws);
    prm.k_ptr = static_cast<T *>(const_cast<void *>(pb->k));
    prm.v_ptr = static_cast<T *>(const_cast<void *>(pb->v));
    if (pl->total_kv == 0) {
        /* K and V may be NULL then, which a TMA descriptor cannot encode; no
         * tile reads a key (every one is written as zeros, LSE -inf), so the
         * descriptors may point at Q. */
        prm.k_ptr = prm.v_ptr = prm.q_ptr;
    }
    prm.k_stride_n = pl->total_kv > 0 ? pb->k_stride : pb->q_stride;
    prm.v_stride_n = pl->total_kv > 0 ? pb->v_stride : pb->q_stride;
    prm.k_stride_h = pb->head_dim;
    prm.v_stride_h = pb->head_dim;
    /* The rows its K/V TMA descriptors span; a descriptor of 0 rows cannot be
     * encoded, and with no key at all no tile reads one. */
    prm.nnz_kv = pl->total_kv > 0 ? pl->total_kv : 1;
    switch (pb->head_dim) {
    case 64: return launch_mask<T, 64>(pb->causal, prm, st);
    case 128: return launch_mask<T, 128>(pb->causal, prm, st);
    case 256: return launch_mask<T, 256>(pb->causal, prm, st);
    default: break;
    }
    return cudaErrorInvalidValue; /* validated by the front end; not reached */
}

/* What its TMA descriptors need (cuTensorMapEncodeTiled): the launcher
 * asserts on a descriptor it cannot encode, which a release build skips, so a
 * bad one would only show as a fault in the kernel. */
static sw_status check_tensor(const char *name, const void *ptr, int64_t stride)
{
    if (((uintptr_t)ptr) % 16 != 0)
        return sw_fail(SW_STATUS_MISALIGNED, "%s=%p is not 16-byte aligned", name, ptr);
    if (stride % 8 != 0)
        return sw_fail(SW_STATUS_MISALIGNED, "%s row stride %lld is not a multiple of 8 elements "
                       "(16 bytes)", name, (long long)stride);
    if (stride >= ((int64_t)1 << 39)) /* 2^40 bytes of 2-byte elements */
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer-fa3: %s row stride %lld "
                       "exceeds what a TMA descriptor encodes", name, (long long)stride);
    return SW_OK;
}

/* What both runs do once their inputs are checked: the device's SMs against
 * the plan's (its launcher sizes the persistent grid from the current
 * device; the work list was cut for the plan's), the blob's upload, the
 * launch (`launch(stream)`, FlashInfer's launcher, which may throw), the LSE
 * to the natural log. */
template <typename F>
static sw_status upload_and_launch(const sw_opp_fi3_plan *pl, const sw_attn_problem *pb, void *ws,
                                   void *stream, F launch)
{
    int dev_sm = 0;
    SW_CUDA_CHECK(cudaSetDevice(pl->p.device));
    SW_CUDA_CHECK(cudaDeviceGetAttribute(&dev_sm, cudaDevAttrMultiProcessorCount, pl->p.device));
    if (dev_sm != pl->num_ctas)
        return sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer-fa3: device %d has %d SMs, the "
                       "plan was made for %d", pl->p.device, dev_sm, pl->num_ctas);
    cudaStream_t cs = static_cast<cudaStream_t>(stream);
    SW_CUDA_CHECK(cudaMemcpyAsync(ws, pl->blob, pl->layout.total, cudaMemcpyHostToDevice, cs));
    cudaError_t e = cudaSuccess;
    try {
        e = launch(cs);
    } catch (const std::exception &ex) {
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer-fa3: its launcher failed: %s",
                       ex.what());
    } catch (...) {
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer-fa3: its launcher threw");
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer-fa3: launch: %s (%s)",
                       cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (pb->lse)
        SW_TRY(fi_lse_to_ln(pb->lse, pl->total_q * pb->num_qo_heads, cs));
    return SW_OK;
}

extern "C" sw_status sw_opp_fi3_run(sw_opp_fi3_plan *pl, const sw_attn_problem *pb, void *ws,
                                    size_t ws_bytes, void *stream)
{
    if (pl->num_works == 0)
        return SW_OK;
    SW_TRY(fi_check_workspace(ws, ws_bytes, pl->layout.total, kWsAlign));
    SW_TRY(check_tensor("q", pb->q, pb->q_stride));
    SW_TRY(check_tensor("k", pb->k, pb->k_stride));
    SW_TRY(check_tensor("v", pb->v, pb->v_stride));
    SW_TRY(check_tensor("o", pb->o, pb->o_stride));
    return upload_and_launch(pl, pb, ws, stream, [&](cudaStream_t cs) {
        return pb->dtype == SW_DTYPE_BF16 ? run_typed<cutlass::bfloat16_t>(pl, pb, ws, cs)
                                          : run_typed<cutlass::half_t>(pl, pb, ws, cs);
    });
}

template <uint32_t D, fi::MaskMode M>
cudaError_t launch_paged_dim(PagedParams<cutlass::bfloat16_t> &p, cudaStream_t st)
{
    return fi::BatchPrefillWithPagedKVCacheDispatched<D, D, M, /*LEFT_SLIDING_WINDOW=*/false,
                                                      /*SAME_SCHEDULE_FOR_ALL_HEADS=*/false,
                                                      Variant>(p, /*enable_pdl=*/false, st);
}

template <uint32_t D>
cudaError_t launch_paged_mask(int causal, PagedParams<cutlass::bfloat16_t> &p, cudaStream_t st)
{
    if (causal)
        return launch_paged_dim<D, fi::MaskMode::kCausal>(p, st);
    return launch_paged_dim<D, fi::MaskMode::kNone>(p, st);
}

static cudaError_t run_paged_bf16(const sw_opp_fi3_plan *pl, const sw_attn_problem *pb,
                                  const sw_paged_strides *ks, const sw_paged_strides *vs,
                                  void *ws, cudaStream_t st)
{
    using T = cutlass::bfloat16_t;
    PagedParams<T> prm;
    set_common(prm, pl, pb, ws);
    prm.k_ptr = static_cast<T *>(const_cast<void *>(pb->k));
    prm.v_ptr = static_cast<T *>(const_cast<void *>(pb->v));
    if (!prm.k_ptr || !prm.v_ptr) /* no key at all: nothing reads them */
        prm.k_ptr = prm.v_ptr = prm.q_ptr;
    prm.kv_indices = at<int32_t>(ws, pl->layout.pages);
    /* a row of page p, token t, head h at p * page_stride + t * stride_n +
     * h * stride_h: either layout through its strides */
    prm.k_stride_n = ks->token;
    prm.k_stride_h = ks->head;
    prm.k_page_stride = ks->page;
    prm.v_stride_n = vs->token;
    prm.v_stride_h = vs->head;
    prm.v_page_stride = vs->page;
    prm.page_size = pl->page_size;
    switch (pb->head_dim) {
    case 64: return launch_paged_mask<64>(pb->causal, prm, st);
    case 128: return launch_paged_mask<128>(pb->causal, prm, st);
    case 256: return launch_paged_mask<256>(pb->causal, prm, st);
    default: break;
    }
    return cudaErrorInvalidValue; /* validated by the front end; not reached */
}

extern "C" sw_status sw_opp_fi3_run_paged(sw_opp_fi3_plan *pl, const sw_attn_problem *pb,
                                          const sw_paged_strides *ks, const sw_paged_strides *vs,
                                          void *ws, size_t ws_bytes, void *stream)
{
    if (!pl->page_size)
        return sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer-fa3: a ragged plan run over "
                       "pages");
    const int64_t st[6] = {ks->token, ks->head, ks->page, vs->token, vs->head, vs->page};
    for (int i = 0; i < 6; i++)
        if (st[i] % 8 != 0)
            return sw_fail(SW_STATUS_MISALIGNED, "opponent flashinfer-fa3 paged prefill: pool "
                           "strides (K page %lld, token %lld, head %lld; V %lld, %lld, %lld) must "
                           "be multiples of 8 elements (its 16-byte loads)", (long long)st[2],
                           (long long)st[0], (long long)st[1], (long long)st[5],
                           (long long)st[3], (long long)st[4]);
    if (pl->num_works == 0)
        return SW_OK;
    SW_TRY(fi_check_workspace(ws, ws_bytes, pl->layout.total, kWsAlign));
    SW_TRY(check_tensor("q", pb->q, pb->q_stride));
    SW_TRY(check_tensor("o", pb->o, pb->o_stride));
    if ((((uintptr_t)pb->k) | ((uintptr_t)pb->v)) % 16 != 0)
        return sw_fail(SW_STATUS_MISALIGNED, "opponent flashinfer-fa3 paged prefill: the K and "
                       "V pools must be 16-byte aligned");
    return upload_and_launch(pl, pb, ws, stream, [&](cudaStream_t cs) {
        return run_paged_bf16(pl, pb, ks, vs, ws, cs);
    });
}

/* Compares one array of ours with FlashInfer's; 1 when they agree. */
static int same_array(const char *name, const int32_t *ours, const int32_t *theirs, size_t n,
                      sw_status *s)
{
    for (size_t i = 0; i < n; i++) {
        if (ours[i] != theirs[i]) {
            *s = sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer-fa3: schedule differs from "
                         "PrefillSM90Plan's at %s[%zu]: %d, FlashInfer %d", name, i, ours[i],
                         theirs[i]);
            return 0;
        }
    }
    return 1;
}

extern "C" sw_status sw_opp_fi3_schedule_check(const sw_prefill_params *p, int32_t batch,
                                               const int32_t *qo_indptr, const int32_t *kv_indptr)
{
    sw_opp_fi3_plan *pl = nullptr;
    SW_TRY(sw_opp_fi3_plan_create(p, batch, qo_indptr, kv_indptr, &pl));
    std::vector<int32_t> kv_len((size_t)batch);
    for (int32_t b = 0; b < batch; b++)
        kv_len[(size_t)b] = kv_indptr[b + 1] - kv_indptr[b];
    /* Its planner writes at most 8 arrays of (works + SMs + 1) entries, each
     * aligned to 16 bytes. */
    const size_t bytes = 8 * (sizeof(int32_t) * ((size_t)pl->num_works + pl->num_ctas + 1) + 16);
    void *dev = nullptr, *host = nullptr;
    sw_status s = SW_OK;
    if (cudaMalloc(&dev, bytes) != cudaSuccess || cudaMallocHost(&host, bytes) != cudaSuccess)
        s = sw_fail(SW_STATUS_NO_MEMORY, "schedule check: cannot allocate %zu bytes", bytes);
    fi::PrefillPlanSM90Info info;
    if (s == SW_OK && pl->num_works > 0) {
        try {
            cudaError_t e = fi::PrefillSM90Plan<int32_t>(
                nullptr, 0, dev, host, bytes, info, const_cast<int32_t *>(qo_indptr),
                const_cast<int32_t *>(kv_indptr), kv_len.data(), (uint32_t)pl->total_q,
                (uint32_t)batch, (uint32_t)p->num_qo_heads, (uint32_t)p->num_kv_heads,
                (uint32_t)p->head_dim, (uint32_t)p->head_dim, /*page_size=*/1, p->causal != 0,
                /*enable_cuda_graph=*/false, /*sizeof_dtype_o=*/2, /*stream=*/nullptr);
            if (e == cudaSuccess)
                e = cudaDeviceSynchronize();
            if (e != cudaSuccess)
                s = sw_fail(SW_STATUS_CUDA, "PrefillSM90Plan: %s", cudaGetErrorString(e));
        } catch (const std::exception &ex) {
            s = sw_fail(SW_STATUS_INTERNAL, "PrefillSM90Plan threw: %s", ex.what());
        }
    }
    if (s == SW_OK && pl->num_works > 0) {
        const Layout &l = pl->layout;
        const size_t n = (size_t)pl->num_works;
        auto theirs = [&](int64_t off) { return at<int32_t>(host, (size_t)off); };
        const int32_t *wi = theirs(info.work_indptr_offset);
        if (info.same_schedule_for_all_heads)
            s = sw_fail(SW_STATUS_INTERNAL, "schedule check: PrefillSM90Plan shares the schedule "
                        "among heads, this plan does not");
        else if (wi[pl->num_ctas] != pl->num_works)
            s = sw_fail(SW_STATUS_INTERNAL, "schedule check: PrefillSM90Plan made %d items, this "
                        "plan %d", wi[pl->num_ctas], pl->num_works);
        else if (same_array("work_indptr", at<int32_t>(pl->blob, l.work_indptr), wi,
                            (size_t)pl->num_ctas + 1, &s) &&
                 same_array("qo_tile", at<int32_t>(pl->blob, l.qo_tile),
                            theirs(info.qo_tile_indices_offset), n, &s) &&
                 same_array("qo_start", at<int32_t>(pl->blob, l.qo_start),
                            theirs(info.qo_indptr_offset), n, &s) &&
                 same_array("kv_start", at<int32_t>(pl->blob, l.kv_start),
                            theirs(info.kv_indptr_offset), n, &s) &&
                 same_array("qo_len", at<int32_t>(pl->blob, l.qo_len),
                            theirs(info.qo_len_offset), n, &s) &&
                 same_array("kv_len", at<int32_t>(pl->blob, l.kv_len),
                            theirs(info.kv_len_offset), n, &s) &&
                 same_array("head", at<int32_t>(pl->blob, l.head),
                            theirs(info.head_indices_offset), n, &s))
            (void)same_array("batch", at<int32_t>(pl->blob, l.batch),
                             theirs(info.batch_indices_offset), n, &s);
    }
    if (host)
        cudaFreeHost(host);
    if (dev)
        cudaFree(dev);
    sw_opp_fi3_plan_destroy(pl);
    return s;
}
