/* What the FlashInfer opponents (flashinfer_prefill.cu: its FA2 path,
 * flashinfer_prefill_fa3.cu: its sm90 path) share: the refusal of causal
 * requests with q_len > kv_len, the workspace checks of run(), and the LSE
 * conversion from FlashInfer's base 2 to the natural log of our contract.
 * Included by those two files only (opponent builds). */
#ifndef SW_OPPONENTS_FLASHINFER_COMMON_CUH
#define SW_OPPONENTS_FLASHINFER_COMMON_CUH

#include "opponents/opponent.h"
#include "core/sw_core.h"
#include "core/sw_cuda_check.h"

#include <cuda_runtime.h>

namespace {

/* Both kernels need kv_len >= q_len in causal requests (their tile bounds
 * compute kv_len - q_len unsigned; FlashInfer's single-request entry refuses
 * the case itself). `who`: the opponent's name for the message. */
sw_status fi_check_causal_lengths(const char *who, const sw_prefill_params *p, int32_t batch,
                                  const int32_t *qo, const int32_t *kv)
{
    for (int32_t b = 0; p->causal && b < batch; b++) {
        const int32_t ql = qo[b + 1] - qo[b], kl = kv[b + 1] - kv[b];
        if (ql > kl)
            return sw_fail(SW_STATUS_UNSUPPORTED, "opponent %s: request %d has q_len=%d > "
                           "kv_len=%d with causal; FlashInfer's kernel needs kv_len >= q_len there",
                           who, b, ql, kl);
    }
    return SW_OK;
}

sw_status fi_check_workspace(const void *ws, size_t ws_bytes, size_t need, size_t align)
{
    if (!ws)
        return sw_fail(SW_STATUS_WORKSPACE_TOO_SMALL, "workspace is NULL; the plan needs %zu bytes",
                       need);
    if (ws_bytes < need)
        return sw_fail(SW_STATUS_WORKSPACE_TOO_SMALL, "workspace_bytes=%zu but the plan needs %zu",
                       ws_bytes, need);
    if (((uintptr_t)ws) % align != 0)
        return sw_fail(SW_STATUS_MISALIGNED, "workspace=%p is not %zu-byte aligned", ws, align);
    return SW_OK;
}

/* FlashInfer's LSE is log2 of the softmax denominator; ours is the natural
 * log. -inf (a row that sees no key) stays -inf. */
__global__ void fi_lse_log2_to_ln(float *lse, int64_t n)
{
    const float ln2 = 0.6931471805599453f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        lse[i] *= ln2;
}

/* Rescales n LSE values on the stream (after the kernel that wrote them). */
sw_status fi_lse_to_ln(float *lse, int64_t n, cudaStream_t st)
{
    const int threads = 256;
    const int64_t want = (n + threads - 1) / threads;
    fi_lse_log2_to_ln<<<(int)(want < 1024 ? want : 1024), threads, 0, st>>>(lse, n);
    SW_CUDA_CHECK(cudaGetLastError());
    return SW_OK;
}

} // namespace

#endif
