#!/usr/bin/env python3
"""Batch decode over a paged KV cache: Spillway against PyTorch SDPA.

One query token per request over every key of the request, BF16, on the GPU:
  spillway     spillway.paged_attention's plan (pages of --page tokens in a
               shuffled pool, NHD), planned once, run() timed: the split-KV
               decode kernel over the pages.
  sdpa-flash   torch SDPA under sdpa_kernel(FLASH_ATTENTION),
  sdpa-cudnn   ... CUDNN_ATTENTION,
  sdpa-mem     ... EFFICIENT_ATTENTION: the same keys gathered densely into
               [B, Hkv, S, d] before timing (all requests of a case have one
               length), q [B, Hq, 1, d], enable_gqa=True; a backend that
               refuses the call is reported as failed.
What is timed: CUDA events around --batch calls (default 10) enqueued back
to back on the current stream, divided by --batch -- the time a serving
loop whose host runs ahead sees; --batch 1 times single calls, host
overhead included. The implementations are interleaved rep by rep after
--warmup untimed calls each; the median of --reps. Rates are the KV bytes a call must read (K and V of
every key) over its time, beside the device's copy rate over the same bytes
(a device-to-device copy, read + write counted). Every output is compared
with a float32 reference on the sampled requests.

  python bench/paged.py [--cases 16x32k,64x4k,1x512k] [--shapes h32-8/d128,h16-2/d256]
                        [--page 16] [--reps 20] [--warmup 3] [--batch 10] [--json PATH]
The JSON records name the command and the library; without --json nothing is
written.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

CASES = {"16x32k": (16, 32768), "64x4k": (64, 4096), "1x512k": (1, 524288)}
SHAPES = {"h32-8/d128": (32, 8, 128), "h16-2/d256": (16, 2, 256)}
IMPLS = ("spillway", "sdpa-flash", "sdpa-cudnn", "sdpa-mem")


def copy_rate(torch, nbytes):
    """The device's copy rate over nbytes (a device-to-device copy of half
    of them, read + write counted), the best of 5, GB/s."""
    dev = torch.device("cuda")
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    best = None
    for _ in range(5):
        s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s0.record()
        dst.copy_(src)
        e0.record()
        e0.synchronize()
        t = s0.elapsed_time(e0)
        best = t if best is None or t < best else best
    return 2 * src.numel() / (best * 1e6)


def warm_up(torch, fns, warmup):
    """`warmup` untimed calls of each; an implementation that raises is
    dropped from fns. Returns {name: why} of those."""
    failed = {}
    for i in list(fns):
        try:
            for _ in range(warmup):
                fns[i]()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (a backend that refuses the shape)
            failed[i] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            del fns[i]
    return failed


def interleaved(torch, fns, reps, batch):
    """CUDA events around `batch` calls enqueued back to back, divided by
    batch, the implementations interleaved rep by rep. Returns ({name: [ms
    per call]}, {name: [host us per call]}): the host's time of the same
    loops, no sync inside."""
    times = {i: [] for i in fns}
    host = {i: [] for i in fns}
    order = list(fns)
    for r in range(reps):
        for j in range(len(order)):
            i = order[(r + j) % len(order)]
            s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s0.record()
            h0 = time.perf_counter()
            for _ in range(batch):
                fns[i]()
            h1 = time.perf_counter()
            e0.record()
            e0.synchronize()
            times[i].append(s0.elapsed_time(e0) / batch)
            host[i].append((h1 - h0) / batch * 1e6)
    return times, host


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    for name, known, what in ((a.cases, CASES, "case"), (a.shapes, SHAPES, "shape"),
                              (a.impls, IMPLS, "impl")):
        for x in name.split(","):
            if x not in known:
                ap.error(f"unknown {what} {x!r} (known: {', '.join(known)})")

    import warnings

    import torch
    import torch.nn.functional as F
    warnings.filterwarnings("ignore", message="For dense input, both fused kernels")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import spillway
    from spillway.attention import _PagedRun

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    records = []
    backends = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
                "sdpa-mem": SDPBackend.EFFICIENT_ATTENTION}
    impls = a.impls.split(",")
    for cname in a.cases.split(","):
        B, S = CASES[cname]
        for sname in a.shapes.split(","):
            hq, hkv, d = SHAPES[sname]
            ps = a.page
            npp = (S + ps - 1) // ps
            npages = B * npp
            kp = torch.randn((npages, ps, hkv, d), generator=g, device=dev, dtype=torch.bfloat16)
            vp = torch.randn((npages, ps, hkv, d), generator=g, device=dev, dtype=torch.bfloat16)
            perm = torch.randperm(npages, generator=g, device=dev)
            table = perm.view(B, npp).to(torch.int32)
            q = torch.randn((B, hq, d), generator=g, device=dev, dtype=torch.bfloat16)
            lens = np.full(B, S, dtype=np.int32)
            cu_q = np.arange(B + 1, dtype=np.int32)
            kv_bytes = 2 * B * S * hkv * d * 2
            fns, outs = {}, {}
            if "spillway" in impls:
                run = _PagedRun(q, kp, vp, cu_q, lens, table.cpu(), False, None, "NHD", None, 0)
                fns["spillway"] = lambda run=run: outs.__setitem__("spillway", run.run(False))
            if any(i.startswith("sdpa") for i in impls):
                # dense [B, Hkv, S, d]: request b's pages in order
                kd = kp[table.long()].reshape(B, npp * ps, hkv, d)[:, :S].transpose(1, 2).contiguous()
                vd = vp[table.long()].reshape(B, npp * ps, hkv, d)[:, :S].transpose(1, 2).contiguous()
                qd = q.view(B, hq, 1, d)
                for i in impls:
                    if i.startswith("sdpa"):
                        def f(i=i):
                            with sdpa_kernel(backends[i]):
                                outs[i] = F.scaled_dot_product_attention(
                                    qd, kd, vd, enable_gqa=True).view(B, hq, d)
                        fns[i] = f
            copy_gbps = copy_rate(torch, kv_bytes)
            failed = warm_up(torch, fns, a.warmup)  # (and drop whoever fails)
            times, _ = interleaved(torch, fns, a.reps, a.batch)
            # reference on requests 0 and B-1
            errs = {}
            for i in fns:
                worst = 0.0
                for b in sorted({0, B - 1}):
                    kb = kp[table[b].long()].reshape(-1, hkv, d)[:S].float()
                    vb = vp[table[b].long()].reshape(-1, hkv, d)[:S].float()
                    G = hq // hkv
                    qb = q[b].float().view(hkv, G, d)
                    s = torch.einsum("hgd,shd->hgs", qb, kb) / d ** 0.5
                    ref = torch.einsum("hgs,shd->hgd", s.softmax(-1), vb).reshape(hq, d)
                    o = outs[i][b].float()
                    worst = max(worst, float((o - ref).norm() / ref.norm()))
                errs[i] = worst
            med = {i: float(np.median(times[i])) for i in times}
            line = f"{cname:7s} {sname:11s} copy {copy_gbps:7.1f} GB/s |"
            for i in impls:
                if i in med:
                    gbps = kv_bytes / (med[i] * 1e6)
                    line += f" {i} {med[i]:.3f} ms {gbps:7.1f} GB/s ({100 * gbps / copy_gbps:5.1f}%)"
                else:
                    line += f" {i} failed"
            if "spillway" in med:
                for i in med:
                    if i != "spillway":
                        line += f" | {i} time / ours {med[i] / med['spillway']:.2f}x"
            print(line, flush=True)
            records.append({"case": cname, "shape": sname, "page_size": ps, "kv_bytes": kv_bytes,
                            "copy_GBps": copy_gbps, "calls_per_timing": a.batch, "ms": med,
                            "times_ms": times,
                            "max_rel_err": errs, "failed": failed})
            del fns, outs, kp, vp
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"component": "paged-decode", "command": " ".join(["python"] + sys.argv),
                       "library": spillway.version(), "torch": torch.__version__,
                       "gpu": torch.cuda.get_device_name(), "utc": time.strftime(
                           "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
