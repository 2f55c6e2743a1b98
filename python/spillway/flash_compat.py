"""FlashAttention-compatible entry: flash_attn_varlen_func with the exact
signature and positional order of flash_attn.flash_attn_varlen_func
(flash-attn 2.x), so code written for FlashAttention's varlen op runs on
Spillway by changing the import.

Spillway computes the forward pass only, without dropout, sliding window,
soft-capping, ALiBi, attention probabilities or a paged KV cache: each of
those options, given a value other than its default, raises SpillwayError
(SW_STATUS_UNSUPPORTED) naming the option, instead of being ignored.
"""

import math

from . import _lib
from .attention import _torch_mod, varlen_attention


def _as_float(x):
    """float(x), or NaN (which is never 0.0) for what is not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _unsupported(detail):
    _lib.fail(_lib.SW_STATUS_UNSUPPORTED, detail)


def _check_options(q, k, v, dropout_p, window_size, softcap, alibi_slopes, return_attn_probs,
                   block_table):
    if _as_float(dropout_p) != 0.0:
        _unsupported(f"dropout_p={dropout_p!r}: Spillway has no dropout (inference only); "
                     "pass dropout_p=0.0")
    try:
        left, right = (int(w) for w in window_size)
    except (TypeError, ValueError):
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"window_size={window_size!r} must be a pair (left, right)")
    if (left, right) != (-1, -1):
        _unsupported(f"window_size={tuple(window_size)!r}: sliding-window attention is not "
                     "supported; pass (-1, -1)")
    if _as_float(softcap) != 0.0:
        _unsupported(f"softcap={softcap!r}: soft-capping is not supported; pass softcap=0.0")
    if alibi_slopes is not None:
        _unsupported("alibi_slopes: ALiBi biases are not supported; pass None")
    if return_attn_probs:
        _unsupported("return_attn_probs=True: attention probabilities are not returned "
                     "(use spillway.varlen_attention(..., return_lse=True) for the LSE)")
    if block_table is not None:
        _unsupported("block_table: a paged KV cache is not supported by this entry; pass "
                     "packed k, v with cu_seqlens_k")
    torch = _torch_mod()
    if torch is not None and torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in (q, k, v)):
        _unsupported("q, k or v requires grad: Spillway computes the forward pass only "
                     "(no backward); call it under torch.no_grad() or torch.inference_mode()")


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn.flash_attn_varlen_func, computed by Spillway.

    Args (FlashAttention's, in its order):
        q: [total_q, Hq, d]; k, v: [total_k, Hkv, d], Hkv dividing Hq (GQA).
            torch CUDA tensors (bf16/fp16) run on the current stream; torch CPU
            tensors and numpy arrays run on the CPU (spillway.varlen_attention
            lists the dtypes and layouts).
        cu_seqlens_q, cu_seqlens_k: int prefix sums [batch+1]. Host copies
            keep a CUDA call asynchronous (CUDA tensors are copied to the host
            for planning, which synchronises).
        max_seqlen_q, max_seqlen_k: checked to be at least the real maxima.
        dropout_p: must be 0.0.
        softmax_scale: default 1/sqrt(d).
        causal: bottom-right aligned, as FlashAttention's: query i of a
            request sees keys j <= i + (k_len - q_len); a row that sees no
            key is zero.
        window_size: must be (-1, -1).
        softcap: must be 0.0.
        alibi_slopes: must be None.
        deterministic: accepted; it selects FlashAttention's backward pass,
            and Spillway's forward pass gives the same result on every run.
        return_attn_probs: must be False.
        block_table: must be None.

    Returns:
        out: [total_q, Hq, d], q's dtype and device.

    Raises:
        SpillwayError: SW_STATUS_UNSUPPORTED for an option above that is not
        at its default, or for inputs that require grad while autograd is
        on (forward only); otherwise as spillway.varlen_attention.
    """
    _check_options(q, k, v, dropout_p, window_size, softcap, alibi_slopes, return_attn_probs,
                   block_table)
    return varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            causal=bool(causal), softmax_scale=softmax_scale)
