"""spillway.torch_ops: the varlen attention as a torch custom operator --
the same result as spillway.varlen_attention, checked by torch's own
opcheck (schema, fake implementation, autograd registration), and traced
by torch.compile with fullgraph=True on the CPU (and on a GPU when there
is one)."""

import numpy as np
import pytest

import spillway

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
