"""Host time per call: what one call costs the calling thread when the GPU is
not waited for -- the figure that sets a decode step's speed when kernels
take 10-50 us.

Each implementation runs `--calls` calls back to back (timed with
perf_counter_ns around the loop, no sync inside), then the GPU is
synchronised outside the timing; implementations are interleaved round by
round and the median over `--rounds` rounds is reported, in microseconds per
call. The tiny case is one causal request of `--tokens` tokens (CASE: 8/8
heads, d128, BF16); the GPU work per call is a few microseconds, so the
queue never fills and the loop measures the host.

Implementations (those that cannot run here are reported as such):
  spillway-varlen   spillway.varlen_attention (the Python entry)
  spillway-op       torch.ops.spillway.varlen_attention (the custom op)
  fa2-varlen        torch.ops.aten._flash_attention_forward
  sdpa-flash        F.scaled_dot_product_attention, flash backend
  sdpa-cudnn        F.scaled_dot_product_attention, cuDNN backend
  swap-attend       SwapEngine.attend, device pool, every block resident,
                    one decode row over the request's tokens

    python bench/host_overhead.py [--json out.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import spillway  # noqa: E402
import spillway.torch_ops  # noqa: E402,F401  (registers torch.ops.spillway)

CASE = dict(hq=8, hkv=8, d=128, dtype=torch.bfloat16)


def setups(tokens, tmp):
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(3)
    hq, hkv, d = CASE["hq"], CASE["hkv"], CASE["d"]
    q = torch.randn(tokens, hq, d, device=dev, dtype=CASE["dtype"], generator=g)
    k = torch.randn(tokens, hkv, d, device=dev, dtype=CASE["dtype"], generator=g)
    v = torch.randn(tokens, hkv, d, device=dev, dtype=CASE["dtype"], generator=g)
    cu_host = torch.tensor([0, tokens], dtype=torch.int32)
    cu_dev = cu_host.to(dev)
    out = {}

    def sw():
        return spillway.varlen_attention(q, k, v, cu_host, cu_host, tokens, tokens, causal=True)
    out["spillway-varlen"] = sw

    def op():
        return torch.ops.spillway.varlen_attention(q, k, v, cu_host, cu_host, True, None)
    out["spillway-op"] = op

    fa = torch.ops.aten._flash_attention_forward

    def fa2():
        return fa(q, k, v, cu_dev, cu_dev, tokens, tokens, 0.0, True, False)
    out["fa2-varlen"] = fa2
    qt, kt, vt = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for name, be in (("sdpa-flash", SDPBackend.FLASH_ATTENTION),
                     ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)):
        def sd(be=be):
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        out[name] = sd
    st = spillway.Store(os.path.join(tmp, "kv"), capacity_bytes=64 << 20)
    bs = 16
    eng = spillway.SwapEngine(st, num_layers=1, num_kv_heads=hkv, num_qo_heads=hq, head_dim=d,
                              block_size=bs, resident_blocks=(tokens + bs - 1) // bs + 4,
                              pool="device")
    eng.seq_add(1, ns=1, max_blocks=1024)
    eng.offload_tokens(1, 0, k, v)
    q1 = q[-1:].contiguous()

    def swap():
        return eng.attend(0, 1, q1)
    out["swap-attend"] = swap
    return out, (st, eng)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--impls", default="spillway-varlen,spillway-op,fa2-varlen,sdpa-flash,"
                                       "sdpa-cudnn,swap-attend")
    ap.add_argument("--json")
    ap.add_argument("--commit", help="the commit of the library and binding measured, when git "
                                     "here cannot tell (a copied tree)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device")
    with tempfile.TemporaryDirectory() as tmp:
        fns, keep = setups(a.tokens, tmp)
        names = a.impls.split(",")
        bad = [n for n in names if n not in fns]
        if bad:
            print(f"unknown implementation(s): {', '.join(bad)}", file=sys.stderr)
            sys.exit(2)
        errors = {}
        for n in names:
            try:
                for _ in range(20):
                    fns[n]()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 (reported, not fatal)
                errors[n] = f"{type(e).__name__}: {e}"
        live = [n for n in names if n not in errors]
        times = {n: [] for n in live}
        for r in range(a.rounds):
            order = live[r % len(live):] + live[:r % len(live)]
            for n in order:
                fn = fns[n]
                t0 = time.perf_counter_ns()
                for _ in range(a.calls):
                    fn()
                t1 = time.perf_counter_ns()
                torch.cuda.synchronize()
                times[n].append((t1 - t0) / a.calls / 1e3)
        keep[1].close()
        keep[0].close()
    res = {n: statistics.median(t) for n, t in times.items()}
    print(f"host us per call, median of {a.rounds} rounds of {a.calls} calls "
          f"(1 x {a.tokens} tokens, {CASE['hq']}/{CASE['hkv']} heads, d{CASE['d']}, bf16)")
    for n in names:
        if n in res:
            print(f"  {n:16s} {res[n]:8.1f}  (min {min(times[n]):.1f}, max {max(times[n]):.1f})")
        else:
            print(f"  {n:16s} failed: {errors[n]}")
    if a.json:
        commit = a.commit or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        with open(a.json, "w") as f:
            json.dump({"component": "host-overhead", "command": " ".join(sys.argv),
                       "commit": commit, "gpu": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "case": {**CASE, "dtype": "bf16",
                                                            "tokens": a.tokens},
                       "us_per_call_median": res, "us_per_call_rounds": times,
                       "errors": errors}, f, indent=1)


if __name__ == "__main__":
    main()
