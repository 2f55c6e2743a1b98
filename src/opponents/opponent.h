/* Opponent backends: other libraries' prefill kernels behind Spillway's
 * plan/run contract, for measurement only (docs/opponents.md).
 *
 * Two gates keep them dark: an opponent is compiled only when its CMake option
 * names the library's headers (SPILLWAY_OPPONENT_FLASHINFER), and a plan for
 * it is made only while the environment variable SPILLWAY_OPPONENT names it.
 * The gate (gate.c) is in every build, so a build without the opponent refuses
 * the backend with a sentence that says how to get it; the wrappers
 * (flashinfer_prefill.cu, and flashinfer_prefill_fa3.cu where sm_90a is
 * built) exist only in an opponent build. */
#ifndef SW_OPPONENT_H
#define SW_OPPONENT_H

#include "attn/attn_internal.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 for a backend value that names an opponent. */
int sw_opponent_backend(sw_backend b);

/* The gate, called by the prefill front end when params->backend is an
 * opponent: SW_OK when this build has it, SPILLWAY_OPPONENT enables it and
 * the dtype/device can run it; else SW_STATUS_UNSUPPORTED ("not compiled in",
 * "environment variable not set", F32) or SW_STATUS_NO_DEVICE. */
sw_status sw_opponent_gate(const sw_prefill_params *p);

/* 1 when the comma-separated SPILLWAY_OPPONENT names `name` (whole
 * names, not substrings; read on each call). Also the gate of the bench's
 * cuDNN opponent (bench/opp_cudnn.c). */
int sw_opponent_enabled(const char *name);

/* Opponents compiled into this build, e.g. "flashinfer 0.7.4 (fa2)"; "" when
 * none. Static string. */
const char *sw_opponents_built(void);

#ifdef SW_HAVE_OPPONENT_FLASHINFER
/* FlashInfer's ragged prefill (flashinfer_prefill.cu). The plan does
 * FlashInfer's host-side scheduling once, into a pinned blob; run() uploads
 * the blob into the caller's workspace and launches on the caller's stream,
 * allocating nothing. `p` has sm_scale resolved; `backend` is one of the
 * SW_BACKEND_OPPONENT_FLASHINFER* values. Plan refusals: SW_STATUS_UNSUPPORTED
 * (causal with q_len > kv_len, a variant this build did not instantiate). */
typedef struct sw_opp_fi_plan sw_opp_fi_plan;
sw_status sw_opp_fi_plan_create(const sw_prefill_params *p, sw_backend backend, int32_t batch,
                                const int32_t *qo_indptr, const int32_t *kv_indptr,
                                sw_opp_fi_plan **out);
void sw_opp_fi_plan_destroy(sw_opp_fi_plan *plan);
size_t sw_opp_fi_workspace_size(const sw_opp_fi_plan *plan);
/* Run refusals besides the front end's: SW_STATUS_UNSUPPORTED (an output row
 * stride other than num_qo_heads*head_dim: FlashInfer writes O dense),
 * SW_STATUS_MISALIGNED, SW_STATUS_WORKSPACE_TOO_SMALL, SW_STATUS_CUDA. */
sw_status sw_opp_fi_run(sw_opp_fi_plan *plan, const sw_attn_problem *pb, void *workspace,
                        size_t workspace_bytes, void *stream);
/* What is compiled in: "flashinfer <version of its headers> (fa2[, fa3])". */
const char *sw_opp_fi_describe(void);
/* 1 when the FA3 (sm90) path is compiled in (an opponent build whose
 * SPILLWAY_CUDA_ARCHS holds 90a; SW_HAVE_OPPONENT_FLASHINFER_FA3). */
int sw_opp_fi_has_fa3(void);

/* FlashInfer's paged prefill (its FA2 BatchPrefillWithPagedKVCache, in
 * flashinfer_prefill.cu), behind sw_prefill_plan_create_paged with
 * SW_BACKEND_OPPONENT_FLASHINFER when a request has q_len != 1 (the decode
 * below takes the rest); with SW_BACKEND_OPPONENT_FLASHINFER_FA3, its FA3
 * paged prefill for every batch (sw_opp_fi3_plan_create_paged): its PrefillPlan's schedule for the page indptr and
 * page size, our page table in the blob. Plan refusals
 * (SW_STATUS_UNSUPPORTED): a dtype other than BF16 (the only one
 * instantiated), causal with q_len > kv_len. Run refusals: K and V pools with
 * different strides, an output row stride other than num_qo_heads*head_dim,
 * strides or spans past its 32-bit fields. */
sw_status sw_opp_fi_plan_create_paged(const sw_prefill_params *p, sw_backend backend,
                                      int32_t batch, const int32_t *qo_indptr,
                                      const sw_paged_table *pt, sw_opp_fi_plan **out);
sw_status sw_opp_fi_run_paged(sw_opp_fi_plan *plan, const sw_attn_problem *pb,
                              const sw_paged_strides *ks, const sw_paged_strides *vs,
                              void *workspace, size_t workspace_bytes, void *stream);

/* FlashInfer's batch decode over paged K/V (flashinfer_decode.cu): the
 * kernel its Python BatchDecodeWithPagedKVCacheWrapper runs by default,
 * behind sw_prefill_plan_create_paged with SW_BACKEND_OPPONENT_FLASHINFER.
 * Plan refusals (SW_STATUS_UNSUPPORTED): a q_len other than 1, a group size
 * its kernel does not dispatch. Run refusals: K and V pools with different
 * strides, an output row stride other than num_qo_heads*head_dim. */
typedef struct sw_opp_fid_plan sw_opp_fid_plan;
sw_status sw_opp_fid_plan_create(const sw_prefill_params *p, int32_t batch,
                                 const int32_t *qo_indptr, const sw_paged_table *pt,
                                 sw_opp_fid_plan **out);
void sw_opp_fid_plan_destroy(sw_opp_fid_plan *plan);
size_t sw_opp_fid_workspace_size(const sw_opp_fid_plan *plan);
sw_status sw_opp_fid_run(sw_opp_fid_plan *plan, const sw_attn_problem *pb,
                         const sw_paged_strides *ks, const sw_paged_strides *vs, void *workspace,
                         size_t workspace_bytes, void *stream);

/* FlashInfer's FA3 ragged prefill (flashinfer_prefill_fa3.cu, sm_90a only),
 * reached through the calls above for SW_BACKEND_OPPONENT_FLASHINFER_FA3: the
 * same contract, with FlashInfer's sm90 work list (PrefillSM90Plan's) in the
 * blob. Plan refusals (SW_STATUS_UNSUPPORTED): causal with q_len > kv_len, a
 * device other than compute capability 9.0, a batch so large that FlashInfer
 * would share one schedule among all heads (not instantiated). It writes O
 * with its row stride, so unlike the FA2 path it takes any o_row_stride that
 * is a multiple of 8 elements. */
typedef struct sw_opp_fi3_plan sw_opp_fi3_plan;
sw_status sw_opp_fi3_plan_create(const sw_prefill_params *p, int32_t batch,
                                 const int32_t *qo_indptr, const int32_t *kv_indptr,
                                 sw_opp_fi3_plan **out);
void sw_opp_fi3_plan_destroy(sw_opp_fi3_plan *plan);
size_t sw_opp_fi3_workspace_size(const sw_opp_fi3_plan *plan);
sw_status sw_opp_fi3_run(sw_opp_fi3_plan *plan, const sw_attn_problem *pb, void *workspace,
                         size_t workspace_bytes, void *stream);
/* Its FA3 paged prefill (BatchPrefillWithPagedKVCacheDispatched): the same
 * work list for the page indptr and the keys' lengths, our page indices in
 * the blob. Plan refusals as above, and a dtype other than BF16 (the only one
 * instantiated). Run refusals: pool strides or pointers not 16-byte
 * aligned; K and V may have different strides, O any row stride that is a
 * multiple of 8 elements. */
sw_status sw_opp_fi3_plan_create_paged(const sw_prefill_params *p, int32_t batch,
                                       const int32_t *qo_indptr, const sw_paged_table *pt,
                                       sw_opp_fi3_plan **out);
sw_status sw_opp_fi3_run_paged(sw_opp_fi3_plan *plan, const sw_attn_problem *pb,
                               const sw_paged_strides *ks, const sw_paged_strides *vs,
                               void *workspace, size_t workspace_bytes, void *stream);
/* Test hook (GPU): makes a plan for the batch and runs FlashInfer's own
 * PrefillSM90Plan on it (into a scratch device buffer it allocates and frees);
 * SW_OK when the two work lists agree entry by entry, else SW_STATUS_INTERNAL
 * naming the first difference, or the plan's refusal. */
sw_status sw_opp_fi3_schedule_check(const sw_prefill_params *p, int32_t batch,
                                    const int32_t *qo_indptr, const int32_t *kv_indptr);
#endif

#ifdef __cplusplus
}
#endif
#endif
