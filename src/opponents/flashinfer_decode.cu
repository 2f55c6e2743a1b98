/* FlashInfer's batch decode over paged K/V (its BatchDecodeWithPagedKVCache,
 * the CUDA-core kernel its Python wrapper runs by default) behind Spillway's
 * paged plan/run contract, for measurement only (opponent.h,
 * docs/opponents.md). Compiled only with -DSPILLWAY_OPPONENT_FLASHINFER.
 *
 * What is FlashInfer's and what is ours:
 *  - the schedule is FlashInfer's: its work estimation (occupancy of its
 *    kernel, the split into KV chunks when the batch does not fill the
 *    device) and DecodeSplitKVIndptr, called with the arguments its
 *    DecodePlan passes (no CUDA graph), the layout of its int and float
 *    buffers from its own planner in counting mode;
 *  - the workspace is ours: the schedule and the page table go into a
 *    pinned blob at plan time, uploaded by run() with one async copy, as
 *    for our own kernels and the prefill opponent;
 *  - the LSE: FlashInfer's is base 2, rescaled to the natural log when asked.
 * Only q_len 1 per request (what the kernel computes); K and V pools with
 * the same strides (its kernel addresses both with K's); O dense. */
#include "opponents/flashinfer_common.cuh"

#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <exception>
#include <new>

namespace {

namespace fi = flashinfer;

constexpr size_t kAlignD = 256;

using VariantD = fi::DefaultAttention<false, false, false, false>;

template <typename T> using DecodeParams = fi::BatchDecodeParams<T, T, T, int32_t>;

bool group_dispatched(int32_t g)
{
    return g == 1 || g == 2 || g == 3 || g == 4 || g == 6 || g == 8 || g == 16;
}

} // namespace

struct sw_opp_fid_plan {
    sw_prefill_params p;
    int32_t batch;
    fi::DecodePlanInfo info;
    size_t int_bytes, float_bytes, table_off, total;
    size_t pi_off, px_off, last_off; /* the page table in the blob */
    void *blob;                      /* pinned, table_off + table bytes */
    size_t blob_bytes;
    int32_t page_size;
    sw_kv_layout layout;
    bool pdl;
};

/* FlashInfer's plan for group size G, head_dim D and element type T: its
 * work estimation and split (host), its buffer layout in counting mode. */
template <typename T, uint32_t D, size_t G>
static sw_status schedule_g(sw_opp_fid_plan *pl, const sw_paged_table *pt)
{
    using P = DecodeParams<T>;
    const uint32_t hq = (uint32_t)pl->p.num_qo_heads;
    int32_t *indptr = pt->page_indptr;
    auto est = fi::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<
        G, D, fi::PosEncodingMode::kNone, VariantD, P>;
    size_t fbytes = 0, ibytes = 0;
    cudaError_t e = fi::DecodePlanImpl<false, D, fi::PosEncodingMode::kNone, VariantD, P>(
        fbytes, ibytes, nullptr, 0, nullptr, nullptr, 0, pl->info, indptr, (uint32_t)pl->batch,
        hq, (uint32_t)pt->page_size, /*enable_cuda_graph=*/false, /*stream=*/nullptr, est);
    if (e != cudaSuccess)
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer decode: its planner: %s",
                       cudaGetErrorString(e));
    bool split = false;
    uint32_t max_grid = 0, chunk_pages = 0, new_batch = 0, gdy = 0;
    e = est(split, max_grid, chunk_pages, new_batch, gdy, (uint32_t)pl->batch, indptr, hq,
            (uint32_t)pt->page_size, false, nullptr);
    if (e != cudaSuccess)
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer decode: its work estimation: %s",
                       cudaGetErrorString(e));
    auto [req, tile, oind] = fi::DecodeSplitKVIndptr<int32_t>(indptr, (uint32_t)pl->batch,
                                                              chunk_pages);
    pl->int_bytes = sw_align_up(ibytes, kAlignD);
    pl->float_bytes = sw_align_up(fbytes, kAlignD);
    /* the blob: FlashInfer's int buffer, then our copy of the table */
    size_t off = pl->int_bytes;
    const size_t b1 = sizeof(int32_t) * ((size_t)pl->batch + 1);
    pl->pi_off = off;
    off = sw_align_up(off + b1, 16);
    pl->px_off = off;
    off = sw_align_up(off + sizeof(int32_t) * ((size_t)pt->page_indptr[pl->batch] + 1), 16);
    pl->last_off = off;
    off = sw_align_up(off + b1, kAlignD);
    pl->blob_bytes = off;
    pl->total = off + pl->float_bytes;
    const size_t pad = (size_t)pl->info.padded_batch_size;
    if (req.size() > pad)
        return sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer decode: %zu work items for a "
                       "padded batch of %zu", req.size(), pad);
    SW_TRY(sw_cuda_host_alloc(&pl->blob, pl->blob_bytes));
    char *b = (char *)pl->blob;
    memset(b, 0, pl->blob_bytes);
    std::copy(req.begin(), req.end(), (int32_t *)(b + pl->info.request_indices_offset));
    std::copy(tile.begin(), tile.end(), (int32_t *)(b + pl->info.kv_tile_indices_offset));
    std::copy(oind.begin(), oind.end(), (int32_t *)(b + pl->info.o_indptr_offset));
    *(int32_t *)(b + pl->info.kv_chunk_size_ptr_offset) =
        (int32_t)(chunk_pages * (uint32_t)pt->page_size);
    if (pl->info.split_kv)
        for (size_t i = 0; i < pad; i++)
            ((bool *)(b + pl->info.block_valid_mask_offset))[i] = i < new_batch;
    memcpy(b + pl->pi_off, pt->page_indptr, b1);
    memcpy(b + pl->px_off, pt->page_indices, sizeof(int32_t) * (size_t)pt->page_indptr[pl->batch]);
    int32_t *last = (int32_t *)(b + pl->last_off);
    for (int32_t r = 0; r < pl->batch; r++) {
        const int32_t np = pt->page_indptr[r + 1] - pt->page_indptr[r];
        const int32_t len = pt->kv_indptr[r + 1] - pt->kv_indptr[r];
        last[r] = np ? len - (np - 1) * pt->page_size : 0;
    }
    return SW_OK;
}

template <typename T, uint32_t D>
static sw_status schedule(sw_opp_fid_plan *pl, const sw_paged_table *pt)
{
    const uint32_t group = (uint32_t)(pl->p.num_qo_heads / pl->p.num_kv_heads);
    sw_status st = SW_OK;
    DISPATCH_GQA_GROUP_SIZE(group, GROUP_SIZE, { st = schedule_g<T, D, GROUP_SIZE>(pl, pt); });
    return st;
}

extern "C" sw_status sw_opp_fid_plan_create(const sw_prefill_params *p, int32_t batch,
                                            const int32_t *qo_indptr, const sw_paged_table *pt,
                                            sw_opp_fid_plan **out)
{
    *out = nullptr;
    for (int32_t b = 0; b < batch; b++)
        if (qo_indptr[b + 1] - qo_indptr[b] != 1)
            return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer decode: request %d has "
                           "q_len=%d; its batch decode takes one query token per request", b,
                           qo_indptr[b + 1] - qo_indptr[b]);
    const int32_t g = p->num_qo_heads / p->num_kv_heads;
    if (!group_dispatched(g))
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer decode: group size %d is not "
                       "one its kernel dispatches (1, 2, 3, 4, 6, 8, 16)", g);
    if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer decode: head_dim %d",
                       p->head_dim);
    sw_opp_fid_plan *pl = new (std::nothrow) sw_opp_fid_plan();
    if (!pl)
        return sw_fail(SW_STATUS_NO_MEMORY, "cannot allocate an opponent plan");
    pl->p = *p;
    pl->batch = batch;
    pl->page_size = pt->page_size;
    pl->layout = pt->layout;
    int major = 0, dev = 0;
    sw_status st = SW_OK;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        st = sw_fail(SW_STATUS_CUDA, "opponent flashinfer decode: no device");
    pl->pdl = major >= 9;
    try {
        if (st == SW_OK) {
            const bool bf = p->dtype == SW_DTYPE_BF16;
            switch (p->head_dim) {
            case 64: st = bf ? schedule<nv_bfloat16, 64>(pl, pt) : schedule<half, 64>(pl, pt); break;
            case 128: st = bf ? schedule<nv_bfloat16, 128>(pl, pt) : schedule<half, 128>(pl, pt); break;
            default: st = bf ? schedule<nv_bfloat16, 256>(pl, pt) : schedule<half, 256>(pl, pt); break;
            }
        }
    } catch (const std::exception &ex) {
        st = sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer decode: its planner threw: %s",
                     ex.what());
    }
    if (st != SW_OK) {
        sw_opp_fid_plan_destroy(pl);
        return st;
    }
    *out = pl;
    return SW_OK;
}

extern "C" void sw_opp_fid_plan_destroy(sw_opp_fid_plan *plan)
{
    if (!plan)
        return;
    if (plan->blob)
        sw_cuda_host_free(plan->blob);
    delete plan;
}

extern "C" size_t sw_opp_fid_workspace_size(const sw_opp_fid_plan *plan)
{
    return plan ? plan->total : 0;
}

template <typename T, uint32_t D>
static cudaError_t launch(const sw_opp_fid_plan *pl, const sw_attn_problem *pb,
                          const sw_paged_strides *ks, char *ws, cudaStream_t st)
{
    using P = DecodeParams<T>;
    const int64_t kstr[3] = {ks->page, pl->layout == SW_KV_HND ? ks->head : ks->token,
                             pl->layout == SW_KV_HND ? ks->token : ks->head};
    fi::paged_kv_t<T, int32_t> kv((uint32_t)pb->num_kv_heads, (uint32_t)pl->page_size, D,
                                  (uint32_t)pb->batch,
                                  pl->layout == SW_KV_HND ? fi::QKVLayout::kHND : fi::QKVLayout::kNHD,
                                  (T *)pb->k, (T *)pb->v, kstr, (int32_t *)(ws + pl->px_off),
                                  (int32_t *)(ws + pl->pi_off), (int32_t *)(ws + pl->last_off));
    P params;
    params.q = (T *)pb->q;
    params.paged_kv = kv;
    params.o = (T *)pb->o;
    params.lse = pb->lse;
    params.num_qo_heads = (uint32_t)pb->num_qo_heads;
    params.q_stride_n = (int32_t)pb->q_stride;
    params.q_stride_h = (int32_t)D;
    params.window_left = -1;
    params.logits_soft_cap = 0.f;
    params.sm_scale = pb->sm_scale;
    params.rope_rcp_scale = 1.f;
    params.rope_rcp_theta = 1.f / 1e4f;
    params.request_indices = (int32_t *)(ws + pl->info.request_indices_offset);
    params.kv_tile_indices = (int32_t *)(ws + pl->info.kv_tile_indices_offset);
    params.o_indptr = (int32_t *)(ws + pl->info.o_indptr_offset);
    params.kv_chunk_size_ptr = (int32_t *)(ws + pl->info.kv_chunk_size_ptr_offset);
    params.padded_batch_size = (uint32_t)pl->info.padded_batch_size;
    T *tmp_v = nullptr;
    float *tmp_s = nullptr;
    if (pl->info.split_kv) {
        tmp_v = (T *)(ws + pl->blob_bytes + pl->info.v_offset);
        tmp_s = (float *)(ws + pl->blob_bytes + pl->info.s_offset);
    }
    return fi::BatchDecodeWithPagedKVCacheDispatched<D, fi::PosEncodingMode::kNone, VariantD>(
        params, tmp_v, tmp_s, pl->pdl, st);
}

extern "C" sw_status sw_opp_fid_run(sw_opp_fid_plan *pl, const sw_attn_problem *pb,
                                    const sw_paged_strides *ks, const sw_paged_strides *vs,
                                    void *workspace, size_t workspace_bytes, void *stream)
{
    if (ks->token != vs->token || ks->head != vs->head || ks->page != vs->page)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer decode: K and V pools need the "
                       "same strides (its kernel addresses both with K's)");
    if (pb->o_stride != (int64_t)pb->num_qo_heads * pb->head_dim)
        return sw_fail(SW_STATUS_UNSUPPORTED, "opponent flashinfer decode: o_row_stride must be "
                       "num_qo_heads * head_dim (it writes O dense)");
    if (pb->batch == 0)
        return SW_OK;
    SW_TRY(fi_check_workspace(workspace, workspace_bytes, pl->total, kAlignD));
    cudaStream_t st = (cudaStream_t)stream;
    SW_CUDA_CHECK(cudaMemcpyAsync(workspace, pl->blob, pl->blob_bytes, cudaMemcpyHostToDevice, st));
    char *ws = (char *)workspace;
    const bool bf = pb->dtype == SW_DTYPE_BF16;
    cudaError_t e;
    try {
        switch (pb->head_dim) {
        case 64: e = bf ? launch<nv_bfloat16, 64>(pl, pb, ks, ws, st) : launch<half, 64>(pl, pb, ks, ws, st); break;
        case 128: e = bf ? launch<nv_bfloat16, 128>(pl, pb, ks, ws, st) : launch<half, 128>(pl, pb, ks, ws, st); break;
        default: e = bf ? launch<nv_bfloat16, 256>(pl, pb, ks, ws, st) : launch<half, 256>(pl, pb, ks, ws, st); break;
        }
    } catch (const std::exception &ex) {
        return sw_fail(SW_STATUS_INTERNAL, "opponent flashinfer decode threw: %s", ex.what());
    }
    if (e != cudaSuccess)
        return sw_fail(SW_STATUS_CUDA, "opponent flashinfer decode: %s", cudaGetErrorString(e));
    if (pb->lse)
        SW_TRY(fi_lse_to_ln(pb->lse, (int64_t)pb->batch * pb->num_qo_heads, st));
    return SW_OK;
}
