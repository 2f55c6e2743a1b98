"""Spillway's attention as torch custom operators, so that torch.compile and
CUDA-graph capture see one operator instead of Python they cannot trace.

    import spillway.torch_ops  # registers the operators (imports torch)
    out, lse = torch.ops.spillway.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k,
                                                   True, None)

torch.ops.spillway.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k,
causal, softmax_scale) -> (out, lse) is spillway.varlen_attention with
return_lse=True: q [total_q, Hq, d], k and v [total_k, Hkv, d], cu_seqlens_*
int tensors [batch+1] (keep them on the CPU: a CUDA tensor is copied to the
host, which synchronises), softmax_scale None for 1/sqrt(d). out has q's
shape, dtype and device; lse is [total_q, Hq] float32. Its fake (meta)
implementation gives those shapes, so torch.compile traces through it with
fullgraph=True. Before capturing a CUDA graph, run each shape once outside
the capture: the plan (pinned host memory) and the workspace are made then
and reused by the captured call.

torch.ops.spillway.swap_attend(engine, layer, seq_ids, q, q_indptr, causal,
softmax_scale) -> (out, lse) is SwapEngine.attend with return_lse=True:
engine is engine_id(eng), seq_ids an int64 tensor [batch] and q_indptr an
int32 tensor [batch+1] on the CPU, q [rows, Hq, d] (bfloat16 on the engine's
device for a device pool, CPU data for a host pool); out is bfloat16 [rows,
Hq, d], lse float32 [rows, Hq].

The rest of the package never imports torch; this module does.
"""

import weakref

import torch

from . import _lib
from .attention import varlen_attention as _varlen_attention

__all__ = ["varlen_attention", "swap_attend", "engine_id"]


# Defined and implemented through torch.library.Library (the dispatcher calls
# the Python kernel directly): torch.library.custom_op's wrapper cost ~16 us
# more per call on the host, more than the kernel of a decode step.
_LIB = torch.library.Library("spillway", "DEF")
_LIB.define("varlen_attention(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, "
            "Tensor cu_seqlens_k, bool causal, float? softmax_scale) -> (Tensor, Tensor)")


def _varlen_attention_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, causal, softmax_scale):
    return _varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=causal,
                             softmax_scale=softmax_scale, return_lse=True)


_LIB.impl("varlen_attention", _varlen_attention_impl, "CPU")
_LIB.impl("varlen_attention", _varlen_attention_impl, "CUDA")


@torch.library.register_fake("spillway::varlen_attention", lib=_LIB)
def _varlen_attention_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, causal, softmax_scale):
    total_q, hq, _ = q.shape
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty((total_q, hq), dtype=torch.float32))


varlen_attention = torch.ops.spillway.varlen_attention


# ------------------------------------------------------------ swap attend --
# An operator takes tensors and numbers, not a SwapEngine: engine_id(eng)
# gives an engine a number (kept as a weak reference: a closed or collected
# engine's number fails with SW_STATUS_NOT_FOUND).
_ENGINES = {}
_NEXT_ID = [1]


def engine_id(engine):
    """The number torch.ops.spillway.swap_attend knows `engine` by."""
    eid = getattr(engine, "_op_id", None)
    if eid is None:
        eid = _NEXT_ID[0]
        _NEXT_ID[0] += 1
        _ENGINES[eid] = weakref.ref(engine)
        engine._op_id = eid
    return eid


def _engine(eid):
    ref = _ENGINES.get(int(eid))
    eng = ref() if ref is not None else None
    if eng is None or eng.closed:
        _lib.fail(_lib.SW_STATUS_NOT_FOUND, f"no open swap engine has operator id {eid}")
    return eng


_LIB.define("swap_attend(int engine, int layer, Tensor seq_ids, Tensor q, Tensor q_indptr, "
            "bool causal, float? softmax_scale) -> (Tensor, Tensor)")


def _swap_attend_impl(engine, layer, seq_ids, q, q_indptr, causal, softmax_scale):
    eng = _engine(engine)
    ids = [int(x) for x in seq_ids.tolist()]
    return eng.attend(layer, ids, q, q_indptr, causal=causal, softmax_scale=softmax_scale,
                      return_lse=True)


_LIB.impl("swap_attend", _swap_attend_impl, "CPU")
_LIB.impl("swap_attend", _swap_attend_impl, "CUDA")


@torch.library.register_fake("spillway::swap_attend", lib=_LIB)
def _swap_attend_fake(engine, layer, seq_ids, q, q_indptr, causal, softmax_scale):
    rows, hq, _ = q.shape
    return (q.new_empty(q.shape, dtype=torch.bfloat16),
            q.new_empty((rows, hq), dtype=torch.float32))


swap_attend = torch.ops.spillway.swap_attend
