"""spillway.flash_attn_varlen_func: FlashAttention's varlen signature and
positional order, every unsupported option refused (block_table: see
test_paged_compat.py), results against the
float64 reference; varlen_attention's options are keyword-only."""

import inspect

import numpy as np
import pytest

import spillway
from spillway import SpillwayError
from sw_ref import make_case, ref_attention, rel_l2

# flash_attn.flash_attn_varlen_func (flash-attn 2.x): names, order, defaults.
FA_SIGNATURE = [
    ("q", inspect.Parameter.empty), ("k", inspect.Parameter.empty),
    ("v", inspect.Parameter.empty), ("cu_seqlens_q", inspect.Parameter.empty),
    ("cu_seqlens_k", inspect.Parameter.empty), ("max_seqlen_q", inspect.Parameter.empty),
    ("max_seqlen_k", inspect.Parameter.empty), ("dropout_p", 0.0), ("softmax_scale", None),
    ("causal", False), ("window_size", (-1, -1)), ("softcap", 0.0), ("alibi_slopes", None),
    ("deterministic", False), ("return_attn_probs", False), ("block_table", None),
]


def _case(seed, causal_lens=False, dtype=np.float32):
    q_lens = [5, 1, 33, 0, 17]
    kv_lens = [9, 1, 40, 4, 17] if causal_lens else [7, 3, 40, 4, 2]
    return make_case(q_lens, kv_lens, 8, 2, 64, dtype, seed)


def _maxes(cu_q, cu_k):
    return int(np.max(np.diff(cu_q))), int(np.max(np.diff(cu_k)))


def test_signature_is_flash_attentions():
    sig = inspect.signature(spillway.flash_attn_varlen_func)
    got = [(p.name, p.default) for p in sig.parameters.values()]
    assert got == FA_SIGNATURE
    assert all(p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_positional_order(causal):
    # FlashAttention's order: ..., dropout_p, softmax_scale, causal. The same
    # positional call must mean causal here (issue: varlen_attention's 8th
    # parameter was causal, so this call silently ran non-causal attention).
    q, k, v, cu_q, cu_k = _case(11 + causal, causal_lens=True)
    mq, mk = _maxes(cu_q, cu_k)
    out = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, 0.0, None, causal)
    assert isinstance(out, np.ndarray) and out.shape == q.shape  # one array, not a tuple
    ref, _ = ref_attention(q, k, v, cu_q, cu_k, causal)
    assert rel_l2(out, ref) <= 1e-5
    other, _ = ref_attention(q, k, v, cu_q, cu_k, not causal)
    assert rel_l2(out, other) > 1e-2  # the mask matters for this case


def test_softmax_scale_positional_and_keyword():
    q, k, v, cu_q, cu_k = _case(21)
    mq, mk = _maxes(cu_q, cu_k)
    a = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, 0.0, 0.3)
    b = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, softmax_scale=0.3,
                                        causal=False)
    ref, _ = ref_attention(q, k, v, cu_q, cu_k, False, scale=0.3)
    assert rel_l2(a, ref) <= 1e-5
    assert np.array_equal(a, b)


def test_defaults_and_deterministic():
    q, k, v, cu_q, cu_k = _case(31, dtype=np.float16)
    mq, mk = _maxes(cu_q, cu_k)
    a = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk)
    b = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, deterministic=True,
                                        window_size=[-1, -1], dropout_p=0)
    ref, _ = ref_attention(q, k, v, cu_q, cu_k, False)
    assert a.dtype == np.float16
    assert rel_l2(a, ref) <= 1e-2
    assert np.array_equal(a, b)


def _unsupported(match, **kw):
    q, k, v, cu_q, cu_k = _case(41)
    mq, mk = _maxes(cu_q, cu_k)
    with pytest.raises(SpillwayError) as ei:
        spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, **kw)
    e = ei.value
    assert e.status == "SW_STATUS_UNSUPPORTED", e
    assert match in e.detail, e.detail
    return e


@pytest.mark.parametrize("p", [0.1, 1.0, -0.5, float("nan")])
def test_dropout_refused(p):
    _unsupported("dropout_p", dropout_p=p)


@pytest.mark.parametrize("w", [(0, -1), (8, 0), (-1, 8), (16, 16), (39, 0)])
def test_window_refused(w):
    # (the case's longest key length is 40: these windows are real)
    _unsupported("window_size", window_size=w)


@pytest.mark.parametrize("w, causal, means", [((-1, 0), False, True), ((128, 0), False, True),
                                              ((40, -1), False, False), ((64, 64), False, False),
                                              ((64, 64), True, True), ((-1, -1), True, True)])
def test_window_as_flash_attention_reads_it(w, causal, means):
    # a side of at least max_seqlen_k keys is no limit; causal sets the right
    # side to 0; (-1, 0) is causal
    q, k, v, cu_q, cu_k = _case(44, causal_lens=True)
    mq, mk = _maxes(cu_q, cu_k)
    out = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=causal,
                                          window_size=w)
    ref, _ = ref_attention(q, k, v, cu_q, cu_k, means)
    assert rel_l2(out, ref) <= 1e-5


def test_window_not_a_pair():
    q, k, v, cu_q, cu_k = _case(42)
    with pytest.raises(SpillwayError) as ei:
        spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 40, 40, window_size=5)
    assert ei.value.status == "SW_STATUS_INVALID" and "window_size" in ei.value.detail


@pytest.mark.parametrize("c", [30.0, 1e-3, -1.0])
def test_softcap_refused(c):
    _unsupported("softcap", softcap=c)


def test_alibi_refused():
    _unsupported("alibi_slopes", alibi_slopes=np.ones(8, dtype=np.float32))


def test_return_attn_probs_gives_the_lse():
    # FlashAttention's (out, softmax_lse [Hq, total_q], S_dmask): the LSE in
    # its layout; no probabilities (its third output is a dropout mask)
    q, k, v, cu_q, cu_k = _case(45, causal_lens=True)
    mq, mk = _maxes(cu_q, cu_k)
    out, lse, mask = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True,
                                                     return_attn_probs=True)
    ref, ref_lse = ref_attention(q, k, v, cu_q, cu_k, True)
    assert mask is None and lse.shape == (q.shape[1], q.shape[0]) and lse.flags.c_contiguous
    assert rel_l2(out, ref) <= 1e-5
    fin = np.isfinite(ref_lse.T)
    assert np.array_equal(np.isfinite(lse), fin)
    assert np.max(np.abs(lse[fin] - ref_lse.T[fin])) <= 1e-4


def test_block_table_wants_page_pools():
    # with block_table, k and v are page pools (test_paged_compat.py runs
    # them); packed [total_k, Hkv, d] tensors are refused, not misread
    q, k, v, cu_q, cu_k = _case(41)
    mq, mk = _maxes(cu_q, cu_k)
    with pytest.raises(SpillwayError) as ei:
        spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk,
                                        block_table=np.zeros((5, 4), dtype=np.int32))
    assert ei.value.status == "SW_STATUS_INVALID" and "4 dims" in ei.value.detail


def test_max_seqlen_checked():
    q, k, v, cu_q, cu_k = _case(51)
    mq, mk = _maxes(cu_q, cu_k)
    with pytest.raises(SpillwayError) as ei:
        spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq - 1, mk)
    assert ei.value.status == "SW_STATUS_INVALID" and "max_seqlen_q" in ei.value.detail
    with pytest.raises(SpillwayError) as ei:
        spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk - 1)
    assert "max_seqlen_k" in ei.value.detail


def test_varlen_attention_options_are_keyword_only():
    q, k, v, cu_q, cu_k = _case(61, causal_lens=True)
    mq, mk = _maxes(cu_q, cu_k)
    # FlashAttention's positional call on varlen_attention: refused, not misread.
    with pytest.raises(TypeError):
        spillway.varlen_attention(q, k, v, cu_q, cu_k, mq, mk, 0.0, None, True)
    with pytest.raises(TypeError):
        spillway.varlen_attention(q, k, v, cu_q, cu_k, mq, mk, True)
    sig = inspect.signature(spillway.varlen_attention)
    names = list(sig.parameters)
    for name in names[names.index("max_seqlen_k") + 1:]:
        assert sig.parameters[name].kind == inspect.Parameter.KEYWORD_ONLY, name
    out = spillway.varlen_attention(q, k, v, cu_q, cu_k, mq, mk, causal=True)
    ref, _ = ref_attention(q, k, v, cu_q, cu_k, True)
    assert rel_l2(out, ref) <= 1e-5


# ----------------------------------------------------------------- torch --

def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    return torch


def test_torch_cpu_bf16():
    torch = _torch()
    q, k, v, cu_q, cu_k = _case(71, causal_lens=True)
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
    mq, mk = _maxes(cu_q, cu_k)
    out = spillway.flash_attn_varlen_func(tq, tk, tv, torch.from_numpy(cu_q),
                                          torch.from_numpy(cu_k), mq, mk, 0.0, None, True)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    qr, kr, vr = (x.float().numpy() for x in (tq, tk, tv))
    ref, _ = ref_attention(qr, kr, vr, cu_q, cu_k, True)
    assert rel_l2(out.float().numpy(), ref) <= 1e-2


def test_torch_requires_grad_refused():
    torch = _torch()
    q, k, v, cu_q, cu_k = _case(81)
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    tq.requires_grad_(True)
    mq, mk = _maxes(cu_q, cu_k)
    with pytest.raises(SpillwayError) as ei:
        spillway.flash_attn_varlen_func(tq, tk, tv, cu_q, cu_k, mq, mk)
    assert ei.value.status == "SW_STATUS_UNSUPPORTED" and "grad" in ei.value.detail
    with torch.no_grad():
        out = spillway.flash_attn_varlen_func(tq, tk, tv, cu_q, cu_k, mq, mk)
    ref, _ = ref_attention(q, k, v, cu_q, cu_k, False)
    assert rel_l2(out.numpy(), ref) <= 1e-5


def test_max_seqlen_none_accepted():
    # as varlen_attention accepts it (the offsets give the lengths), with a
    # window read against the longest key length they give
    q, k, v, cu_q, cu_k = _case(46, causal_lens=True)
    a = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, None, None, causal=True)
    b = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, None, None, window_size=(64, 0))
    ref, _ = ref_attention(q, k, v, cu_q, cu_k, True)
    assert rel_l2(a, ref) <= 1e-5 and np.array_equal(a, b)
