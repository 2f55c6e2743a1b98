"""Tests of the Python binding (python/spillway) against an independent float64
numpy reference (sw_ref.py).

CPU tests use numpy arrays (and torch CPU tensors where torch is installed).
Tests marked `gpu` need torch with CUDA and are skipped otherwise.

Every random input is drawn from a seeded generator; the seed is in the test
id or printed in the assertion message.
"""

import re

import numpy as np
import pytest

import spillway
from spillway import SpillwayError
from sw_ref import expect_error, make_case, ref_attention, rel_l2


TOL = {np.float16: 1e-3, np.float32: 1e-5}  # f16 measures <= ~2.1e-4 on the CPU backends
LSE_TOL = {np.float16: 2e-3, np.float32: 1e-4}


def check_against_ref(out, lse, q, k, v, cu_q, cu_k, causal, tol, lse_tol, scale=None, what=""):
    ref_o, ref_lse = ref_attention(q, k, v, cu_q, cu_k, causal, scale)
    out = np.asarray(out, dtype=np.float64)
    assert out.shape == ref_o.shape, what
    assert np.all(np.isfinite(out)), f"non-finite output {what}"
    err = rel_l2(out, ref_o)
    assert err <= tol, f"rel L2 {err:.3g} > {tol:g} {what}"
    # Rows that see no key must be exactly zero.
    empty = np.isneginf(ref_lse)
    assert np.all(out[empty] == 0.0), f"rows with no visible key are not zero {what}"
    if lse is not None:
        lse = np.asarray(lse, dtype=np.float64)
        assert lse.shape == ref_lse.shape, what
        assert np.array_equal(np.isneginf(lse), empty), f"LSE -inf pattern differs {what}"
        assert not np.any(np.isnan(lse)), f"NaN in LSE {what}"
        if np.any(~empty):
            lerr = np.max(np.abs(lse[~empty] - ref_lse[~empty]))
            assert lerr <= lse_tol, f"LSE max abs err {lerr:.3g} > {lse_tol:g} {what}"
    return err


# ---------------------------------------------------------- CPU / numpy --

HEADS = [(4, 4), (8, 2), (4, 1)]
RAGGED_LENS = [0, 1, 17, 64, 3]


@pytest.mark.parametrize("backend", ["cpu", "cpu_ref"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["f16", "f32"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("heads", HEADS, ids=lambda h: f"h{h[0]}-{h[1]}")
def test_ragged_numpy(heads, d, causal, dtype, backend):
    hq, hkv = heads
    seed = 1000 + hq * 31 + hkv * 7 + d + causal
    q, k, v, cu_q, cu_k = make_case(RAGGED_LENS, RAGGED_LENS, hq, hkv, d, dtype, seed)
    out, lse = spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=causal, return_lse=True,
                                         backend=backend)
    assert out.dtype == q.dtype and out.shape == q.shape
    assert lse.dtype == np.float32 and lse.shape == (q.shape[0], hq)
    check_against_ref(out, lse, q, k, v, cu_q, cu_k, causal, TOL[dtype], LSE_TOL[dtype],
                      what=f"seed={seed}")


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["f16", "f32"])
@pytest.mark.parametrize("heads", HEADS, ids=lambda h: f"h{h[0]}-{h[1]}")
def test_causal_q_shorter_than_kv(heads, dtype):
    # Prompts continuing a cached prefix (q_len < kv_len, bottom-right aligned),
    # plus q_len > kv_len (leading rows see nothing), kv_len = 0 and q_len = 0.
    hq, hkv = heads
    q_lens = [1, 17, 5, 0, 30, 10, 3, 33]
    kv_lens = [40, 17, 100, 8, 30, 4, 0, 97]
    seed = 77 + hq
    q, k, v, cu_q, cu_k = make_case(q_lens, kv_lens, hq, hkv, 128, dtype, seed)
    for causal in (True, False):
        out, lse = spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=causal,
                                             return_lse=True)
        check_against_ref(out, lse, q, k, v, cu_q, cu_k, causal, TOL[dtype], LSE_TOL[dtype],
                          what=f"seed={seed} causal={causal}")


def test_long_rows_cross_tiles():
    # Lengths that are not multiples of any tile size, long enough to span
    # several K/V tiles.
    q_lens = [129, 257, 1, 300]
    kv_lens = [129, 300, 250, 300]
    q, k, v, cu_q, cu_k = make_case(q_lens, kv_lens, 8, 2, 64, np.float16, 5)
    out, lse = spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=True, return_lse=True)
    check_against_ref(out, lse, q, k, v, cu_q, cu_k, True, 1e-2, 2e-3, what="seed=5")


def test_softmax_scale_and_return_types():
    q, k, v, cu_q, cu_k = make_case([5, 9], [7, 9], 4, 2, 64, np.float32, 11)
    out = spillway.varlen_attention(q, k, v, cu_q, cu_k, softmax_scale=0.3)
    assert isinstance(out, np.ndarray)
    check_against_ref(out, None, q, k, v, cu_q, cu_k, False, 1e-5, 0, scale=0.3)
    out2 = spillway.varlen_attention(q, k, v, cu_q, cu_k, max_seqlen_q=9, max_seqlen_k=9)
    check_against_ref(out2, None, q, k, v, cu_q, cu_k, False, 1e-5, 0)


def test_cu_seqlens_forms():
    q, k, v, cu_q, cu_k = make_case([3, 0, 8], [4, 2, 8], 4, 4, 64, np.float32, 12)
    a = spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=True)
    b = spillway.varlen_attention(q, k, v, list(map(int, cu_q)), tuple(map(int, cu_k)),
                                  causal=True)
    c = spillway.varlen_attention(q, k, v, cu_q.astype(np.int64), cu_k.astype(np.uint32),
                                  causal=True)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    check_against_ref(a, None, q, k, v, cu_q, cu_k, True, TOL[np.float32], 0,
                      what="seed=12")


def test_strided_views():
    rng = np.random.default_rng(21)
    q_lens, kv_lens = [17, 1, 40], [30, 1, 40]
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    tq, tk, hq, hkv, d = int(cu_q[-1]), int(cu_k[-1]), 8, 2, 64
    # Q: a view with a larger row stride (extra heads around it), used in place.
    qbuf = rng.standard_normal((tq, hq + 3, d)).astype(np.float16)
    q = qbuf[:, 1:1 + hq, :]
    # K/V: halves of one packed buffer [rows, 2, Hkv, d] (row stride 2*Hkv*d).
    kvbuf = rng.standard_normal((tk, 2, hkv, d)).astype(np.float16)
    k, v = kvbuf[:, 0], kvbuf[:, 1]
    assert not q.flags.c_contiguous and not k.flags.c_contiguous
    # white box: these views are passed in place (row stride), not copied
    assert spillway.attention._np_prepare(q)[0] is q
    assert spillway.attention._np_prepare(k)[0] is k
    out, lse = spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=True, return_lse=True)
    check_against_ref(out, lse, q, k, v, cu_q, cu_k, True, 1e-2, 2e-3, what="row-stride views")
    dense = spillway.varlen_attention(np.ascontiguousarray(q), np.ascontiguousarray(k),
                                      np.ascontiguousarray(v), cu_q, cu_k, causal=True)
    np.testing.assert_array_equal(out, dense)

    # Layouts the library cannot take (head_dim not contiguous, heads not
    # adjacent, negative row stride) are copied; the result is the same.
    q_t = np.ascontiguousarray(q.transpose(0, 2, 1)).transpose(0, 2, 1)  # d stride = hq
    k_h = np.ascontiguousarray(k.transpose(1, 0, 2)).transpose(1, 0, 2)  # head stride = tk*d
    v_r = np.ascontiguousarray(v[::-1])[::-1]  # negative row stride
    assert q_t.strides[2] != q_t.itemsize and k_h.strides[1] != d * k_h.itemsize
    assert v_r.strides[0] < 0
    out2 = spillway.varlen_attention(q_t, k_h, v_r, cu_q, cu_k, causal=True)
    np.testing.assert_array_equal(out2, dense)


def test_plan_cache_reuses_plans():
    spillway.clear_caches()
    q, k, v, cu_q, cu_k = make_case([9, 4], [9, 12], 4, 2, 64, np.float16, 31)
    spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=True)
    info0 = spillway.plan_cache_info()
    for _ in range(3):
        spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=True)
    info1 = spillway.plan_cache_info()
    assert info1["misses"] == info0["misses"]
    assert info1["hits"] == info0["hits"] + 3
    spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=False)  # a new key
    assert spillway.plan_cache_info()["misses"] == info0["misses"] + 1
    for i in range(info1["capacity"] + 5):  # the LRU stays bounded
        spillway.get_plan([0, i + 1], [0, i + 1], 4, 2, 64, "f16", causal=True)
    assert spillway.plan_cache_info()["size"] <= info1["capacity"]


def test_fast_path_follows_cu_seqlens_contents():
    """The fast path's plan index is keyed by what cu_seqlens hold, not by the
    tensor: one tensor changed in place between calls gets the plan of its
    new lengths each time (checked against the reference), and
    clear_caches() empties the index."""
    torch = _torch_or_skip()
    spillway.clear_caches()
    q, k, v, _, _ = make_case([5, 7], [5, 7], 4, 2, 64, np.float32, 41)
    qt, kt, vt = (torch.from_numpy(x) for x in (q, k, v))
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    for first in (5, 9, 5, 2):
        cu[1] = first  # in place: same tensor, other lengths
        for _ in range(2):  # the second call through the index
            out = spillway.varlen_attention(qt, kt, vt, cu, cu, causal=True)
            ref, _ = ref_attention(q, k, v, cu.numpy(), cu.numpy(), True)
            assert rel_l2(out.numpy(), ref) < 1e-4, first
    assert spillway.attention._fast_plans
    spillway.clear_caches()
    assert not spillway.attention._fast_plans


def test_get_plan_and_flops():
    cu_q = [0, 100, 100, 130]
    cu_k = [0, 100, 150, 250]
    plan = spillway.get_plan(cu_q, cu_k, 8, 2, 128, "f16", causal=True)
    assert plan.backend == "cpu", plan.backend
    assert plan.workspace_size == 0
    assert plan.total_q == 130 and plan.total_kv == 250
    py = spillway.prefill_flops(cu_q, cu_k, 8, 128, True)
    # square causal 100: sum 1..100 = 5050 visible; 30 q over 100 keys: sum 71..100 = 2565
    assert py == pytest.approx(4.0 * (5050 + 2565) * 128 * 8)
    assert plan.flops == pytest.approx(py, rel=1e-12)
    full = spillway.get_plan(cu_q, cu_k, 8, 2, 128, "f16", causal=False)
    assert full.flops == pytest.approx(4.0 * (100 * 100 + 30 * 100) * 128 * 8)


def test_struct_mirrors_match_library():
    # The *_init helpers set struct_size = sizeof(the C struct): a field added
    # to spillway.h without its mirror in _lib.py shows up here.
    import ctypes
    from spillway import _lib
    L = _lib.lib()
    p = _lib.sw_prefill_params()
    L.sw_prefill_params_init(ctypes.byref(p))
    assert p.struct_size == ctypes.sizeof(_lib.sw_prefill_params)
    assert p.dtype == _lib.SW_DTYPE_BF16 and p.backend == _lib.SW_BACKEND_AUTO
    t = _lib.sw_prefill_tensors()
    L.sw_prefill_tensors_init(ctypes.byref(t))
    assert t.struct_size == ctypes.sizeof(_lib.sw_prefill_tensors)
    for code, name in _lib._STATUS_NAMES.items():
        assert _lib.status_name(code) == name


def test_version_and_devices():
    s = spillway.version()
    assert isinstance(s, str) and re.match(r"^\d+\.\d+\.\d+", s), s
    n = spillway.cuda_device_count()
    assert isinstance(n, int) and n >= 0
    isa = spillway.cpu_isa()
    assert isinstance(isa, str) and isa


# ------------------------------------------------------------ the errors --

def test_error_indptr_decreasing():
    q, k, v, _, _ = make_case([4, 4, 4], [4, 4, 4], 4, 4, 64, np.float32, 41)
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, [0, 8, 4, 12], [0, 4, 8, 12]))
    assert e.status == "SW_STATUS_INVALID"
    assert "[2]=4" in e.detail and "8" in e.detail, e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, [0, 4, 8, 12], [0, 4, 2, 12]))
    assert e.status == "SW_STATUS_INVALID" and "kv_indptr[2]" in e.detail, e.detail


def test_error_indptr_not_starting_at_zero():
    q, k, v, _, _ = make_case([4, 4, 4], [4, 4, 4], 4, 4, 64, np.float32, 42)
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, [1, 4, 8, 12], [0, 4, 8, 12]))
    assert e.status == "SW_STATUS_INVALID" and "[0]=1" in e.detail, e.detail


def test_error_indptr_wrong_end():
    q, k, v, _, _ = make_case([4, 4, 4], [4, 4, 4], 4, 4, 64, np.float32, 43)
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, [0, 4, 8, 11], [0, 4, 8, 12]))
    assert e.status == "SW_STATUS_INVALID" and "11" in e.detail and "12" in e.detail, e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, [0, 4, 8, 12], [0, 4, 8, 13]))
    assert e.status == "SW_STATUS_INVALID" and "13" in e.detail, e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, [0, 4, 8, 12], [0, 4, 8]))
    assert e.status == "SW_STATUS_INVALID" and "cu_seqlens_k" in e.detail, e.detail


@pytest.mark.parametrize("d", [32, 96, 512])
def test_error_unsupported_head_dim(d):
    q, k, v, cu_q, cu_k = make_case([4], [4], 4, 4, d, np.float32, 44)
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, cu_q, cu_k))
    assert e.status == "SW_STATUS_UNSUPPORTED" and "head_dim" in e.detail, e.detail
    assert str(d) in e.detail


def test_error_heads_not_divisible():
    q, k, v, cu_q, cu_k = make_case([4], [4], 6, 4, 64, np.float32, 45)
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, cu_q, cu_k))
    assert e.status == "SW_STATUS_INVALID"
    assert "6" in e.detail and "4" in e.detail and "divisible" in e.detail, e.detail


def test_error_python_side_checks():
    q, k, v, cu_q, cu_k = make_case([4], [4], 4, 4, 64, np.float32, 46)
    # dtypes the library has no code for
    e = expect_error(lambda: spillway.varlen_attention(q.astype(np.float64), k.astype(np.float64),
                                                       v.astype(np.float64), cu_q, cu_k))
    assert e.status == "SW_STATUS_UNSUPPORTED" and "float64" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k.astype(np.float16), v, cu_q, cu_k))
    assert "dtype" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(q[0], k, v, cu_q, cu_k))
    assert "3-D" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v[:, :, :32], cu_q, cu_k))
    assert "same shape" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, cu_q, cu_k, max_seqlen_q=3))
    assert "max_seqlen_q" in e.detail
    e = expect_error(
        lambda: spillway.varlen_attention(q, k, v, cu_q, cu_k, softmax_scale=float("nan")))
    assert "softmax_scale" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, [[0, 4]], cu_k))
    assert "1-D" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, [0.0, 4.0], cu_k))
    assert "integers" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, cu_q, cu_k, backend="cuda"))
    assert "host" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(q, k, v, cu_q, cu_k, backend="fast"))
    assert "unknown backend" in e.detail


def test_errors_do_not_poison_later_calls():
    q, k, v, cu_q, cu_k = make_case([5, 3], [5, 3], 4, 2, 64, np.float32, 47)
    with pytest.raises(SpillwayError):
        spillway.varlen_attention(q, k, v, [0, 5, 2], cu_k)
    out = spillway.varlen_attention(q, k, v, cu_q, cu_k)
    check_against_ref(out, None, q, k, v, cu_q, cu_k, False, 1e-5, 0)


# ---------------------------------------------------------- torch (CPU) --

def _torch_or_skip():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    return torch


@pytest.mark.parametrize("tdtype", ["bfloat16", "float16", "float32"])
def test_torch_cpu_tensors(tdtype):
    torch = _torch_or_skip()
    dt = getattr(torch, tdtype)
    q, k, v, cu_q, cu_k = make_case([0, 1, 17, 40], [5, 1, 17, 60], 8, 2, 128, np.float32, 51)
    tq, tk, tv = (torch.from_numpy(x).to(dt) for x in (q, k, v))
    out, lse = spillway.varlen_attention(tq, tk, tv, torch.from_numpy(cu_q), torch.from_numpy(cu_k),
                                         causal=True, return_lse=True)
    assert isinstance(out, torch.Tensor) and out.dtype == dt and out.device.type == "cpu"
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (q.shape[0], 8)
    # reference on the rounded inputs
    qr, kr, vr = (x.float().numpy() for x in (tq, tk, tv))
    tol = 1e-5 if tdtype == "float32" else 1e-2
    check_against_ref(out.float().numpy(), lse.numpy(), qr, kr, vr, cu_q, cu_k, True, tol,
                      2e-3, what=tdtype)


def test_torch_repeated_calls_take_the_cached_plan():
    """The second call with the same lengths takes the short path (a plan
    cache hit, no new plan): the same output and LSE; its checks still hold
    (a max_seqlen below the real one, a float cu_seqlens, a view)."""
    torch = _torch_or_skip()
    q, k, v, cu_q, cu_k = make_case([0, 9, 33], [4, 9, 40], 8, 2, 64, np.float32, 53)
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
    cq, ck = torch.from_numpy(cu_q), torch.from_numpy(cu_k)
    assert cq.dtype == torch.int32
    out1, lse1 = spillway.varlen_attention(tq, tk, tv, cq, ck, causal=True, return_lse=True)
    before = spillway.plan_cache_info()
    out2, lse2 = spillway.varlen_attention(tq, tk, tv, cq.clone(), ck.clone(), 33, 40,
                                           causal=True, return_lse=True)
    after = spillway.plan_cache_info()
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]
    assert torch.equal(out1, out2) and torch.equal(lse1, lse2)
    e = expect_error(lambda: spillway.varlen_attention(tq, tk, tv, cq, ck, 32, 40, causal=True))
    assert "max_seqlen_q" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(tq, tk, tv, cq.float(), ck, causal=True))
    assert e.status == "SW_STATUS_INVALID", e
    assert "cu_seqlens_q must hold integers" in e.detail and "float32" in e.detail, e.detail
    out3 = spillway.varlen_attention(tq, tk[:, :, :], tv, cq, ck, causal=True,
                                     softmax_scale=1 / 8)
    assert torch.equal(out3, out1)  # 1/sqrt(64): the default scale, the same plan's output


def test_torch_cpu_strided_views():
    torch = _torch_or_skip()
    q, k, v, cu_q, cu_k = make_case([17, 1, 40], [30, 1, 40], 8, 2, 64, np.float32, 53)
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
    rows = max(tq.shape[0], tk.shape[0])
    qkv = torch.zeros((rows, 12, 64), dtype=torch.bfloat16)
    qkv[: tq.shape[0], :8] = tq
    qkv[: tk.shape[0], 8:10] = tk
    qkv[: tk.shape[0], 10:12] = tv
    vq, vk, vv = qkv[: tq.shape[0], :8], qkv[: tk.shape[0], 8:10], qkv[: tk.shape[0], 10:12]
    assert not vq.is_contiguous()
    assert spillway.attention._torch_prepare(vq, False)[0] is vq
    a = spillway.varlen_attention(vq, vk, vv, cu_q, cu_k, causal=True)
    b = spillway.varlen_attention(tq, tk, tv, cu_q, cu_k, causal=True)
    assert torch.equal(a, b)
    # reference on the rounded inputs
    qr, kr, vr = (x.float().numpy() for x in (tq, tk, tv))
    check_against_ref(a.float().numpy(), None, qr, kr, vr, cu_q, cu_k, True, 1e-2, 0,
                      what="bf16 row-stride views")
    c = spillway.varlen_attention(tq.transpose(1, 2).contiguous().transpose(1, 2), tk, tv,
                                  cu_q, cu_k, causal=True)  # head_dim not contiguous: copied
    assert torch.equal(a, c)


def test_torch_cpu_errors():
    torch = _torch_or_skip()
    q, k, v, cu_q, cu_k = make_case([4], [4], 4, 4, 64, np.float32, 52)
    tq = torch.from_numpy(q)
    e = expect_error(lambda: spillway.varlen_attention(tq, k, v, cu_q, cu_k))
    assert "torch" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(tq.double(), torch.from_numpy(k).double(),
                                                       torch.from_numpy(v).double(), cu_q, cu_k))
    assert e.status == "SW_STATUS_UNSUPPORTED"


# ------------------------------------------------------------ torch CUDA --
# (the cuda_torch fixture: conftest.py)


def _to_cuda(torch, arrays, dt):
    return [torch.from_numpy(np.asarray(a, dtype=np.float32)).to("cuda").to(dt) for a in arrays]


GPU_TOL = 1e-2


def _delay_current_stream(torch, sleep_cycles, matmuls):
    """Keep the current stream busy for a while: torch.cuda._sleep where torch
    has it, else a chain of dependent 4096^2 matmuls."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(sleep_cycles)
        return
    x = torch.randn(4096, 4096, device="cuda")
    for _ in range(matmuls):
        x = x @ x
        x = x / x.norm()


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["cuda", "cuda_portable", "cuda_hopper"])
@pytest.mark.parametrize("tdtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("heads", [(8, 8), (16, 2), (32, 8)], ids=lambda h: f"h{h[0]}-{h[1]}")
def test_cuda_ragged(cuda_torch, heads, d, causal, tdtype, backend):
    torch = cuda_torch
    if backend == "cuda_hopper" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Hopper kernel needs compute capability 9.0")
    dt = getattr(torch, tdtype)
    hq, hkv = heads
    q_lens = [0, 1, 17, 300, 64, 129, 5]
    kv_lens = [0, 1, 17, 300, 200, 129, 0] if causal else [3, 1, 17, 300, 200, 129, 0]
    seed = 2000 + hq + d + causal
    q, k, v, cu_q, cu_k = make_case(q_lens, kv_lens, hq, hkv, d, np.float32, seed)
    tq, tk, tv = _to_cuda(torch, (q, k, v), dt)
    out, lse = spillway.varlen_attention(tq, tk, tv, torch.from_numpy(cu_q).cuda(),
                                         torch.from_numpy(cu_k).cuda(), causal=causal,
                                         return_lse=True, backend=backend)
    assert out.device == tq.device and out.dtype == dt and out.shape == tq.shape
    torch.cuda.synchronize()
    qr, kr, vr = (x.float().cpu().numpy() for x in (tq, tk, tv))
    check_against_ref(out.float().cpu().numpy(), lse.cpu().numpy(), qr, kr, vr, cu_q, cu_k,
                      causal, GPU_TOL, 2e-2, what=f"seed={seed}")


@pytest.mark.gpu
def test_cuda_repeated_calls_on_two_streams(cuda_torch):
    """Repeated calls with host int32 cu_seqlens (the short path) alternate
    between two streams, each delayed before its queries are written: every
    output is right, so each run was ordered on its own stream and after the
    other stream's use of the shared workspace."""
    torch = cuda_torch
    q_lens = [300, 37, 500]
    q, k, v, cu_q, cu_k = make_case(q_lens, q_lens, 16, 2, 128, np.float32, 63)
    tq_real, tk, tv = _to_cuda(torch, (q, k, v), torch.bfloat16)
    cq, ck = torch.from_numpy(cu_q), torch.from_numpy(cu_k)
    spillway.varlen_attention(tq_real, tk, tv, cq, ck, causal=True)  # makes the plan
    torch.cuda.synchronize()
    qr, kr, vr = (x.float().cpu().numpy() for x in (tq_real, tk, tv))
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = []
    for i in range(6):
        s = streams[i % 2]
        with torch.cuda.stream(s):
            tq = torch.zeros_like(tq_real)
            _delay_current_stream(torch, 20_000_000, 10)
            tq.copy_(tq_real)
            outs.append(spillway.varlen_attention(tq, tk, tv, cq, ck, causal=True))
    torch.cuda.synchronize()
    for i, out in enumerate(outs):
        check_against_ref(out.float().cpu().numpy(), None, qr, kr, vr, cu_q, cu_k, True,
                          GPU_TOL, 0, what=f"call {i}")


@pytest.mark.gpu
def test_cuda_runs_on_current_stream(cuda_torch):
    torch = cuda_torch
    q_lens = [1000, 37, 500]
    q, k, v, cu_q, cu_k = make_case(q_lens, q_lens, 16, 2, 128, np.float32, 61)
    tq_real, tk, tv = _to_cuda(torch, (q, k, v), torch.bfloat16)
    tq = torch.zeros_like(tq_real)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    assert s.cuda_stream != torch.cuda.default_stream().cuda_stream
    with torch.cuda.stream(s):
        # Delay the stream, then write the real queries on it: a kernel that is
        # not ordered after them (another stream) reads the zeros instead.
        _delay_current_stream(torch, 200_000_000, 50)
        tq.copy_(tq_real)
        out = spillway.varlen_attention(tq, tk, tv, cu_q, cu_k, causal=True)
    s.synchronize()
    qr, kr, vr = (x.float().cpu().numpy() for x in (tq_real, tk, tv))
    check_against_ref(out.float().cpu().numpy(), None, qr, kr, vr, cu_q, cu_k, True, GPU_TOL, 0,
                      what="on a side stream")


@pytest.mark.gpu
def test_cuda_strided_views_and_workspace(cuda_torch):
    torch = cuda_torch
    q_lens, kv_lens = [17, 1, 400], [30, 1, 400]
    q, k, v, cu_q, cu_k = make_case(q_lens, kv_lens, 8, 2, 128, np.float32, 71)
    tq, tk, tv = _to_cuda(torch, (q, k, v), torch.bfloat16)
    # Packed QKV buffer [rows, Hq + 2*Hkv, d]: q/k/v are row-strided views.
    tk_rows = tk.shape[0]
    qkv = torch.zeros((max(tq.shape[0], tk_rows), 12, 128), dtype=torch.bfloat16, device="cuda")
    qkv[: tq.shape[0], :8] = tq
    qkv[:tk_rows, 8:10] = tk
    qkv[:tk_rows, 10:12] = tv
    vq, vk, vv = qkv[: tq.shape[0], :8], qkv[:tk_rows, 8:10], qkv[:tk_rows, 10:12]
    assert vq.stride(0) == 12 * 128 and not vq.is_contiguous()
    out_view = spillway.varlen_attention(vq, vk, vv, cu_q, cu_k, causal=True)
    out_dense = spillway.varlen_attention(tq, tk, tv, cu_q, cu_k, causal=True)
    torch.cuda.synchronize()
    assert torch.equal(out_view, out_dense)
    # The workspace grows only when a plan needs more.
    w1 = spillway.workspace_bytes(0)
    assert w1 > 0  # the CUDA plan uploads its work list into the workspace
    spillway.varlen_attention(tq[:18], tk[:31], tv[:31], cu_q[:3], cu_k[:3], causal=True)
    assert spillway.workspace_bytes(0) == w1


@pytest.mark.gpu
def test_cuda_errors(cuda_torch):
    torch = cuda_torch
    q, k, v, cu_q, cu_k = make_case([4], [4], 4, 4, 64, np.float32, 81)
    tq, tk, tv = _to_cuda(torch, (q, k, v), torch.bfloat16)
    e = expect_error(lambda: spillway.varlen_attention(tq, tk.cpu(), tv, cu_q, cu_k))
    assert "one device" in e.detail
    e = expect_error(lambda: spillway.varlen_attention(tq, tk, tv, cu_q, cu_k, backend="cpu"))
    assert "host" in e.detail
    e = expect_error(
        lambda: spillway.varlen_attention(tq.float(), tk.float(), tv.float(), cu_q, cu_k))
    assert e.status == "SW_STATUS_UNSUPPORTED" and "F32" in e.detail


@pytest.mark.gpu
def test_cuda_fast_path_checks_each_calls_rows(cuda_torch):
    """The short path's plan struct is kept between calls: a later call with
    the same cu_seqlens and fewer rows of q or k than they say is refused
    (the rows are this call's, not the first call's), never read past."""
    torch = cuda_torch
    q, k, v, cu_q, cu_k = make_case([5, 9], [7, 12], 4, 2, 64, np.float32, 83)
    tq, tk, tv = _to_cuda(torch, (q, k, v), torch.bfloat16)
    cq, ck = torch.from_numpy(cu_q), torch.from_numpy(cu_k)
    first = spillway.varlen_attention(tq, tk, tv, cq, ck, causal=True)
    again = spillway.varlen_attention(tq, tk, tv, cq, ck, causal=True)  # the short path
    assert torch.equal(first, again)
    # (the library's sentence, not the argument hint appended to every error)
    e = expect_error(lambda: spillway.varlen_attention(tq[:-1].contiguous(), tk, tv, cq, ck,
                                                       causal=True))
    assert e.status == "SW_STATUS_INVALID" and "q_rows=13 but qo_indptr[2]=14" in e.detail, e
    e = expect_error(
        lambda: spillway.varlen_attention(tq, tk[:-1].contiguous(), tv[:-1].contiguous(),
                                          cq, ck, causal=True))
    assert e.status == "SW_STATUS_INVALID" and "kv_rows=18 but kv_indptr[2]=19" in e.detail, e
    assert torch.equal(spillway.varlen_attention(tq, tk, tv, cq, ck, causal=True), first)


def test_torch_fast_path_checks_each_calls_rows():
    """The same on the host: fewer rows than the cached plan's cu_seqlens say
    are refused on the short path too."""
    torch = _torch_or_skip()
    q, k, v, cu_q, cu_k = make_case([5, 9], [7, 12], 4, 2, 64, np.float32, 84)
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
    cq, ck = torch.from_numpy(cu_q), torch.from_numpy(cu_k)
    first = spillway.varlen_attention(tq, tk, tv, cq, ck, causal=True)
    # (the library's sentence, not the argument hint appended to every error)
    e = expect_error(lambda: spillway.varlen_attention(tq[:-1].contiguous(), tk, tv, cq, ck,
                                                       causal=True))
    assert e.status == "SW_STATUS_INVALID" and "q_rows=13 but qo_indptr[2]=14" in e.detail, e
    e = expect_error(
        lambda: spillway.varlen_attention(tq, tk[:-1].contiguous(), tv[:-1].contiguous(),
                                          cq, ck, causal=True))
    assert e.status == "SW_STATUS_INVALID" and "kv_rows=18 but kv_indptr[2]=19" in e.detail, e
    assert torch.equal(spillway.varlen_attention(tq, tk, tv, cq, ck, causal=True), first)
