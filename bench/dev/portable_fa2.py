"""bench/dev/portable_fa2.py - times PyTorch's FlashAttention-2 varlen forward
(torch.ops.aten._flash_attention_forward) on the shapes that portable_check.cu
benchmarked, on the same machine right after it, and prints the ratio ours / FA2.

Usage: python3 bench/dev/portable_fa2.py OURS.jsonl [MORE.jsonl ...]
Each .jsonl is written by `portable_check --bench --json FILE` (one per kernel
variant); shapes come from the first, FLOPs use the same convention
(4 * q_len * kv_eff * d * Hq) and are taken from it. One column per file.
"""
import json
import math
import sys

import torch


def time_ms(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    files = sys.argv[1:]
    runs = [{json.loads(l)["name"]: json.loads(l) for l in open(f) if l.strip()} for f in files]
    rows = list(runs[0].values())
    reps = 25
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    print("columns: " + ", ".join(f"[{i}] {f}" for i, f in enumerate(files)))
    head = " ".join(f"{'TF[%d]' % i:>7s} {'x[%d]' % i:>5s}" for i in range(len(files)))
    print(f"{'shape':24s} {'FA2 ms':>8s} {'FA2 TF':>7s} {head}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for r in rows:
        lens, hq, hkv, d = r["lens"], r["hq"], r["hkv"], r["d"]
        total = sum(lens)
        q = torch.randn(total, hq, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        k = torch.randn(total, hkv, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        v = torch.randn(total, hkv, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        cu = torch.zeros(len(lens) + 1, dtype=torch.int32, device="cuda")
        cu[1:] = torch.cumsum(torch.tensor(lens, dtype=torch.int32, device="cuda"), 0)
        mx = max(lens)
        note = ""

        def fa2(kk=k, vv=v):
            return torch.ops.aten._flash_attention_forward(
                q, kk, vv, cu, cu, mx, mx, 0.0, bool(r["causal"]), False,
                scale=1.0 / math.sqrt(d))

        try:
            fa2()
            fn = fa2
        except RuntimeError as e:  # GQA not accepted: expand K/V (costs FA2 nothing in compute)
            note = " (kv expanded: " + str(e).splitlines()[0][:60] + ")"
            ke = k.repeat_interleave(hq // hkv, dim=1)
            ve = v.repeat_interleave(hq // hkv, dim=1)
            fn = lambda: fa2(ke, ve)
        ms = time_ms(fn, reps)
        tf = r["flops"] / (ms * 1e-3) / 1e12
        cols = " ".join(f"{run[r['name']]['tflops']:7.1f} {run[r['name']]['tflops'] / tf:5.2f}"
                        for run in runs)
        print(f"{r['name']:24s} {ms:8.3f} {tf:7.1f} {cols}{note}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
