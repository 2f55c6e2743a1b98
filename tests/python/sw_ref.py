"""Shared by the binding's tests: an independent float64 numpy reference of
ragged attention, seeded random cases, the check of a refusal, and (for the
transformers tests) an attention of the swap engine's precision registered
with transformers."""

import math

import numpy as np
import pytest

from spillway import SpillwayError


def expect_error(fn, status=None):
    """The SpillwayError fn() raises: a RuntimeError whose status (SW_...,
    `status` when given) is in its message, with a detail."""
    with pytest.raises(SpillwayError) as ei:
        fn()
    e = ei.value
    assert isinstance(e, RuntimeError)
    assert e.status.startswith("SW_") and e.detail, e
    assert e.status in str(e), e
    if status is not None:
        assert e.status == status, e
    return e


def ref_attention(q, k, v, cu_q, cu_k, causal, scale=None):
    """float64 attention, bottom-right causal; rows with no visible key get
    zeros and LSE = -inf. Returns (out [Tq, Hq, d], lse [Tq, Hq])."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    tq, hq, d = q.shape
    hkv = k.shape[1]
    group = hq // hkv
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    out = np.zeros((tq, hq, d))
    lse = np.full((tq, hq), -np.inf)
    for b in range(len(cu_q) - 1):
        q0, q1 = int(cu_q[b]), int(cu_q[b + 1])
        k0, k1 = int(cu_k[b]), int(cu_k[b + 1])
        ql, kl = q1 - q0, k1 - k0
        if ql == 0 or kl == 0:
            continue
        kb = np.repeat(k[k0:k1], group, axis=1)  # [kl, hq, d]
        vb = np.repeat(v[k0:k1], group, axis=1)
        s = np.einsum("qhd,khd->hqk", q[q0:q1], kb) * scale  # [hq, ql, kl]
        if causal:
            i = np.arange(ql)[:, None]
            j = np.arange(kl)[None, :]
            visible = j <= i + (kl - ql)
            s = np.where(visible[None], s, -np.inf)
        m = s.max(axis=-1, keepdims=True)  # -inf for rows that see nothing
        has = np.isfinite(m)
        m_safe = np.where(has, m, 0.0)
        p = np.exp(s - m_safe)
        l = p.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", p / np.where(l > 0, l, 1.0), vb)
        out[q0:q1] = o
        lse_b = np.where(has[..., 0], (m_safe + np.log(np.where(l > 0, l, 1.0)))[..., 0], -np.inf)
        lse[q0:q1] = lse_b.T
    return out, lse


def rel_l2(x, ref):
    x = np.asarray(x, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    den = np.linalg.norm(ref)
    num = np.linalg.norm(x - ref)
    return num / den if den > 0 else num


def make_case(q_lens, kv_lens, hq, hkv, d, dtype, seed):
    rng = np.random.default_rng(seed)
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    q = rng.standard_normal((int(cu_q[-1]), hq, d)).astype(dtype)
    k = rng.standard_normal((int(cu_k[-1]), hkv, d)).astype(dtype)
    v = rng.standard_normal((int(cu_k[-1]), hkv, d)).astype(dtype)
    return q, k, v, cu_q, cu_k


BF16_SDPA_REFERENCE = "bf16_sdpa_reference"


def _bf16_sdpa_attention(module, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention in the model's dtype over q, K, V rounded
    to BF16, its output rounded to BF16: the swap engine's precision (BF16
    operands, fp32 math, BF16 output) for an fp32 model."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def bf16(x):
        return x.to(torch.bfloat16).to(x.dtype)

    out, weights = sdpa_attention_forward(module, bf16(query), bf16(key), bf16(value),
                                          attention_mask, **kwargs)
    return bf16(out), weights


def register_bf16_sdpa_reference():
    """Registers _bf16_sdpa_attention (with sdpa's mask) with transformers as
    BF16_SDPA_REFERENCE; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionInterface.register(BF16_SDPA_REFERENCE, _bf16_sdpa_attention)
    AttentionMaskInterface.register(BF16_SDPA_REFERENCE, sdpa_mask)
    return BF16_SDPA_REFERENCE
