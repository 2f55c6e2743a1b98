"""spillway.torch_ops: the varlen attention as a torch custom operator --
the same result as spillway.varlen_attention, checked by torch's own
opcheck (schema, fake implementation, autograd registration), and traced
by torch.compile with fullgraph=True on the CPU (and on a GPU when there
is one)."""

import numpy as np
import pytest

import spillway
from sw_ref import ref_attention, rel_l2

torch = pytest.importorskip("torch")
import spillway.torch_ops  # noqa: E402  registers torch.ops.spillway.*


def _case(device, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(3)
    q_lens, k_lens = [5, 0, 17, 1], [9, 3, 17, 40]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(q_lens)]), dtype=torch.int32)
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(k_lens)]), dtype=torch.int32)
    q = torch.randn(sum(q_lens), 8, 64, generator=g).to(dtype).to(device)
    k = torch.randn(sum(k_lens), 2, 64, generator=g).to(dtype).to(device)
    v = torch.randn(sum(k_lens), 2, 64, generator=g).to(dtype).to(device)
    return q, k, v, cu_q, cu_k


def _devices():
    devs = ["cpu"]
    if torch.cuda.is_available() and spillway.cuda_device_count() > 0:
        devs.append("cuda")
    return devs


@pytest.mark.parametrize("device", _devices())
def test_op_equals_the_function(device):
    q, k, v, cu_q, cu_k = _case(device)
    out, lse = torch.ops.spillway.varlen_attention(q, k, v, cu_q, cu_k, True, None)
    ref, rlse = spillway.varlen_attention(q, k, v, cu_q, cu_k, causal=True, return_lse=True)
    assert torch.equal(out, ref) and torch.equal(lse, rlse)
    assert out.device == q.device and out.dtype == q.dtype and lse.dtype == torch.float32
    # and both are attention: against the fp64 reference
    f = [x.float().cpu().numpy() for x in (q, k, v)]
    want, want_lse = ref_attention(*f, cu_q.numpy(), cu_k.numpy(), True)
    assert rel_l2(out.float().cpu().numpy(), want) <= 1e-2
    fin = np.isfinite(want_lse)
    assert np.max(np.abs(lse.cpu().numpy()[fin] - want_lse[fin])) <= 1e-2


def test_opcheck():
    q, k, v, cu_q, cu_k = _case("cpu")
    torch.library.opcheck(torch.ops.spillway.varlen_attention.default,
                          (q, k, v, cu_q, cu_k, True, 0.125),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("device", _devices())
def test_compile_fullgraph(device):
    q, k, v, cu_q, cu_k = _case(device)

    def f(q, k, v):
        out, _ = torch.ops.spillway.varlen_attention(q, k, v, cu_q, cu_k, False, None)
        return out * 2

    eager = f(q, k, v)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    assert torch.equal(eager, compiled)
    fl = [x.float().cpu().numpy() for x in (q, k, v)]
    want, _ = ref_attention(*fl, cu_q.numpy(), cu_k.numpy(), False)
    assert rel_l2(compiled.float().cpu().numpy() / 2, want) <= 1e-2


def _swap_case(tmp_path, pool="host"):
    from spillway.swap import bf16_bits_to_f32, f32_to_bf16_bits
    rng = np.random.default_rng(17)
    st = spillway.Store(tmp_path / "kv", capacity_bytes=16 << 20)
    eng = spillway.SwapEngine(st, num_layers=1, num_kv_heads=2, num_qo_heads=8, head_dim=64,
                              block_size=16, resident_blocks=8, pool=pool)
    for sid, n in ((1, 70), (2, 33)):
        eng.seq_add(sid, ns=sid, max_blocks=64)
        k = bf16_bits_to_f32(f32_to_bf16_bits(rng.standard_normal((n, 2, 64)).astype(np.float32)))
        v = bf16_bits_to_f32(f32_to_bf16_bits(rng.standard_normal((n, 2, 64)).astype(np.float32)))
        eng.offload_tokens(sid, 0, k, v)
    q = torch.from_numpy(rng.standard_normal((3, 8, 64)).astype(np.float32)).to(torch.bfloat16)
    return st, eng, q


def test_swap_attend_op_equals_the_method(tmp_path):
    """torch.ops.spillway.swap_attend is SwapEngine.attend: the same bytes; its
    fake implementation passes opcheck's schema and fake-tensor tests; a
    closed engine's id fails with the library's NOT_FOUND."""
    import spillway.torch_ops as ops
    st, eng, q = _swap_case(tmp_path)
    ids = torch.tensor([1, 2], dtype=torch.int64)
    ind = torch.tensor([0, 2, 3], dtype=torch.int32)
    eid = ops.engine_id(eng)
    assert ops.engine_id(eng) == eid
    out, lse = torch.ops.spillway.swap_attend(eid, 0, ids, q, ind, True, None)
    ref, rlse = eng.attend(0, [1, 2], q, [0, 2, 3], return_lse=True)
    assert torch.equal(out, ref) and torch.equal(lse, rlse)
    assert out.dtype == torch.bfloat16 and tuple(lse.shape) == (3, 8)
    torch.library.opcheck(torch.ops.spillway.swap_attend.default,
                          (eid, 0, ids, q, ind, True, 0.125),
                          test_utils=("test_schema", "test_faketensor"))

    def f(q):
        o, _ = torch.ops.spillway.swap_attend(eid, 0, ids, q, ind, True, None)
        return o.float() * 2
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q)
    assert torch.equal(compiled, f(q))
    eng.close()
    st.close()
    with pytest.raises(spillway.SpillwayError) as ei:
        torch.ops.spillway.swap_attend(eid, 0, ids, q, ind, True, None)
    assert ei.value.status == "SW_STATUS_NOT_FOUND"


@pytest.mark.gpu
def test_swap_attend_op_on_a_device_pool(tmp_path):
    if "cuda" not in _devices():
        pytest.skip("needs torch with CUDA and a CUDA build of libspillway")
    import spillway.torch_ops as ops
    st, eng, q = _swap_case(tmp_path, pool="device")
    try:
        qd = q.cuda()
        ids = torch.tensor([1, 2], dtype=torch.int64)
        ind = torch.tensor([0, 2, 3], dtype=torch.int32)
        out, lse = torch.ops.spillway.swap_attend(ops.engine_id(eng), 0, ids, qd, ind, True, None)
        ref, rlse = eng.attend(0, [1, 2], qd, [0, 2, 3], return_lse=True)
        torch.cuda.synchronize()
        # the second call finds the first call's blocks resident: other tiles,
        # the same attention up to BF16 rounding
        assert out.device == qd.device and out.dtype == torch.bfloat16
        err = (out.float() - ref.float()).norm() / ref.float().norm()
        assert err < 1e-2 and torch.allclose(lse, rlse, atol=1e-3)
    finally:
        eng.close()
        st.close()
