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

The rest of the package never imports torch; this module does.
"""

from typing import Optional, Tuple

import torch

from .attention import varlen_attention as _varlen_attention

__all__ = ["varlen_attention"]


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
