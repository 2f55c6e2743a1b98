#!/usr/bin/env python3
"""Decode over the swap engine's resident pool against the best decode kernels
on the same KV.

One query token per sequence over every key of the sequence, BF16, one layer,
every block resident in a device pool (offloaded from GPU tensors, written
through into the pool):
  swap-attend     SwapEngine.attend(layer, ids, q): the engine's call, end to
                  end (its resident path: the page table from the pool's
                  slots, the decode split, one launch)
  swap-graph      the same call captured in a CUDA graph (SwapEngine.graph:
                  its prepare() -- the step's tables -- then the graph's
                  replay, what a captured decode loop does each step)
  spillway-paged  spillway's paged decode over the pool itself
                  (SwapEngine.pool_view(), HND pages, the slots of
                  resident_slots() as the block table), planned once: the
                  same kernel without the engine around it
  flashinfer      FlashInfer's batch decode over the same pool and table
                  (the opponent build, SPILLWAY_OPPONENT=flashinfer; else
                  reported failed): its CUDA-core kernel, what its Python
                  wrapper runs by default
  flashinfer-tc, flashinfer-fa3
                  FlashInfer's tensor-core kernels, what its wrapper runs with
                  use_tensor_cores=True (recommended for GQA groups >= 4):
                  its FA2 and its sm90 (FA3) prefill with one query row per
                  sequence, here its ragged form over the keys gathered
                  densely (spillway.varlen_attention with backend
                  "flashinfer" / "flashinfer_fa3", the opponent build; the
                  paged form adds a page lookup per key tile)
  sdpa-flash, sdpa-cudnn
                  torch SDPA on the same keys gathered densely into
                  [B, Hkv, S, d] before timing (enable_gqa)
What is timed: CUDA events around --batch calls enqueued back to back on the
current stream, divided by --batch (the time a decode loop whose host runs
ahead sees; when the host is slower than the kernel, the host's); the
implementations interleaved rep by rep after --warmup untimed calls each;
the median of --reps. Host time per call of swap-attend: perf_counter around
the same loops, no sync inside. Rates are the KV bytes a call reads over its
time, beside the device's copy rate over the same bytes (read + write). Every
output is compared with a float32 reference on the first and last sequence.

  python bench/swap_decode.py [--cases 1x512k,16x32k] [--shapes h32-8/d128,h16-2/d256]
                              [--reps 20] [--warmup 3] [--batch 10] [--dir /var/tmp]
                              [--json PATH] [--commit C]
  python bench/swap_decode.py --step 8x32k/h32-8/d128/32 [--reps N] [--json PATH]
      a model's decode step instead: one SwapEngine.attend per layer, all
      resident, against the HBM floor of the step's KV bytes
Without --json nothing is written.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from paged import copy_rate, interleaved, warm_up  # noqa: E402  (bench/paged.py: shared timing)

CASES = {"1x512k": (1, 524288), "16x32k": (16, 32768), "64x4k": (64, 4096)}
SHAPES = {"h32-8/d128": (32, 8, 128), "h16-2/d256": (16, 2, 256)}
IMPLS = ("swap-attend", "swap-graph", "spillway-paged", "flashinfer", "flashinfer-tc", "flashinfer-fa3",
         "sdpa-flash", "sdpa-cudnn")
DENSE = ("flashinfer-tc", "flashinfer-fa3", "sdpa-flash", "sdpa-cudnn")  # over gathered keys
BS = 16  # block (page) size


def one_case(a, torch, spillway, B, S, hq, hkv, d, impls, tmp):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from spillway.attention import _PagedRun

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(7)
    npp = (S + BS - 1) // BS
    stripe = BS * d * 2
    extent = -(-stripe // 4096) * 4096
    blocks = B * npp
    st = spillway.Store(os.path.join(tmp, "kv"), capacity_bytes=blocks * (2 * hkv + 1) * extent
                        * 5 // 4 + (256 << 20), stripe_bytes=stripe)
    eng = spillway.SwapEngine(st, num_layers=1, num_kv_heads=hkv, num_qo_heads=hq,
                              head_dim=d, block_size=BS, resident_blocks=blocks + 8,
                              pool="device")
    keep = {}
    ids = list(range(1, B + 1))
    t0 = time.perf_counter()
    for b in range(B):
        kb = torch.randn((S, hkv, d), generator=g, device=dev, dtype=torch.bfloat16)
        vb = torch.randn((S, hkv, d), generator=g, device=dev, dtype=torch.bfloat16)
        eng.seq_add(ids[b], ns=ids[b], max_blocks=npp)
        eng.offload_tokens(ids[b], 0, kb, vb)
        if b in (0, B - 1):
            keep[b] = (kb, vb)
    torch.cuda.synchronize()
    offload_s = time.perf_counter() - t0
    q = torch.randn((B, hq, d), generator=g, device=dev, dtype=torch.bfloat16)
    kv_bytes = 2 * B * S * hkv * d * 2
    fns, outs, failed = {}, {}, {}
    if "swap-attend" in impls:
        fns["swap-attend"] = lambda: outs.__setitem__("swap-attend", eng.attend(0, ids, q))
    graph = None
    if "swap-graph" in impls:
        try:
            graph = eng.graph(0, ids, max_blocks=npp)
            gout = torch.empty_like(q)
            graph.prepare()
            graph.attend(q, gout)
            cg = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cg):
                graph.attend(q, gout)

            def replay(graph=graph, cg=cg, gout=gout):
                graph.prepare()
                cg.replay()
                outs["swap-graph"] = gout
            fns["swap-graph"] = replay
        except Exception as e:  # noqa: BLE001 (reported, the others still run)
            failed["swap-graph"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    table = None
    if any(i in impls for i in ("spillway-paged", "flashinfer") + DENSE):
        kp, vp = eng.pool_view()
        table = torch.from_numpy(np.stack([eng.resident_slots(i, 0) for i in ids]))
        if (table < 0).any():
            sys.exit("a block is not resident: the pool does not hold the KV")
        lens = np.full(B, S, dtype=np.int32)
        cu_q = np.arange(B + 1, dtype=np.int32)
        for i, be in (("spillway-paged", None), ("flashinfer", "flashinfer")):
            if i not in impls:
                continue
            try:
                run = _PagedRun(q, kp, vp, cu_q, lens, table, False, None, "HND", be, 0)
                fns[i] = lambda run=run, i=i: outs.__setitem__(i, run.run(False))
            except Exception as e:  # noqa: BLE001 (an opponent not built in)
                failed[i] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        if any(i in DENSE for i in impls):
            tl = table.to(dev).long()
            kd = kp[tl].permute(0, 2, 1, 3, 4).reshape(B, hkv, npp * BS, d)[:, :, :S].contiguous()
            vd = vp[tl].permute(0, 2, 1, 3, 4).reshape(B, hkv, npp * BS, d)[:, :, :S].contiguous()
            qd = q.view(B, hq, 1, d)
            backends = {"sdpa-flash": SDPBackend.FLASH_ATTENTION,
                        "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION}
            # one query row per sequence over all of its keys, [B*S, Hkv, d] rows
            cu_q = torch.arange(B + 1, dtype=torch.int32)
            cu_k = torch.arange(B + 1, dtype=torch.int32) * S
            kr = vr = None
            for i, be in (("flashinfer-tc", "flashinfer"), ("flashinfer-fa3", "flashinfer_fa3")):
                if i not in impls:
                    continue
                if kr is None:
                    kr = kd.permute(0, 2, 1, 3).reshape(B * S, hkv, d).contiguous()
                    vr = vd.permute(0, 2, 1, 3).reshape(B * S, hkv, d).contiguous()
                try:
                    spillway.varlen_attention(q, kr, vr, cu_q, cu_k, causal=False, backend=be)
                    fns[i] = lambda kr=kr, vr=vr, be=be, i=i: outs.__setitem__(
                        i, spillway.varlen_attention(q, kr, vr, cu_q, cu_k, causal=False,
                                                     backend=be))
                except Exception as e:  # noqa: BLE001 (an opponent not built in)
                    failed[i] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            for i in ("sdpa-flash", "sdpa-cudnn"):
                if i in impls:
                    def f(i=i):
                        with sdpa_kernel(backends[i]):
                            outs[i] = F.scaled_dot_product_attention(
                                qd, kd, vd, enable_gqa=True).view(B, hq, d)
                    fns[i] = f
    copy_gbps = copy_rate(torch, kv_bytes)
    failed.update(warm_up(torch, fns, a.warmup))
    times, host = interleaved(torch, fns, a.reps, a.batch)
    errs = {}
    for i in fns:
        worst = 0.0
        for b, (kb, vb) in keep.items():
            G = hq // hkv
            qb = q[b].float().view(hkv, G, d)
            s = torch.einsum("hgd,shd->hgs", qb, kb.float()) / d ** 0.5
            ref = torch.einsum("hgs,shd->hgd", s.softmax(-1), vb.float()).reshape(hq, d)
            o = outs[i][b].float()
            worst = max(worst, float((o - ref).norm() / ref.norm()))
        errs[i] = worst
    stats = eng.get_stats()
    if graph is not None:
        graph.close()
    eng.close()
    st.close()
    med = {i: float(np.median(times[i])) for i in times}
    med_host = {i: float(np.median(host[i])) for i in host}
    return {"kv_bytes": kv_bytes, "copy_GBps": copy_gbps, "offload_s": offload_s,
            "calls_per_timing": a.batch, "ms": med, "host_us": med_host, "times_ms": times,
            "max_rel_err": errs, "failed": failed,
            "resident_attends": stats.get("resident_attends")}


def step_case(a, torch, spillway, B, S, hq, hkv, d, layers, tmp):
    """A decode step of a model: one SwapEngine.attend per layer over the
    batch, every block resident, --reps steps timed one by one (CUDA events
    around the step's calls); the step against the HBM floor of its KV
    bytes (those bytes at the device's copy rate)."""
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(11)
    npp = (S + BS - 1) // BS
    stripe = BS * d * 2
    extent = -(-stripe // 4096) * 4096
    blocks = B * npp * layers
    st = spillway.Store(os.path.join(tmp, "kv"), capacity_bytes=blocks * (2 * hkv + 1) * extent
                        * 5 // 4 + (256 << 20), stripe_bytes=stripe)
    eng = spillway.SwapEngine(st, num_layers=layers, num_kv_heads=hkv, num_qo_heads=hq,
                              head_dim=d, block_size=BS, resident_blocks=blocks + 8 * layers,
                              pool="device")
    ids = list(range(1, B + 1))
    for b in range(B):
        eng.seq_add(ids[b], ns=ids[b], max_blocks=npp)
    keep = None
    t0 = time.perf_counter()
    for layer in range(layers):
        for b in range(B):
            kb = torch.randn((S, hkv, d), generator=g, device=dev, dtype=torch.bfloat16)
            vb = torch.randn((S, hkv, d), generator=g, device=dev, dtype=torch.bfloat16)
            eng.offload_tokens(ids[b], layer, kb, vb)
            if layer == 0 and b == 0:
                keep = (kb, vb)
    torch.cuda.synchronize()
    offload_s = time.perf_counter() - t0
    qs = [torch.randn((B, hq, d), generator=g, device=dev, dtype=torch.bfloat16)
          for _ in range(layers)]
    outs = [None] * layers

    def step():
        for layer in range(layers):
            outs[layer] = eng.attend(layer, ids, qs[layer])

    for _ in range(max(1, a.warmup)):
        step()
    torch.cuda.synchronize()
    times, host = [], []
    for _ in range(a.reps):
        s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s0.record()
        h0 = time.perf_counter()
        step()
        h1 = time.perf_counter()
        e0.record()
        e0.synchronize()
        times.append(s0.elapsed_time(e0))
        host.append((h1 - h0) / layers * 1e6)
    kv_bytes = 2 * B * S * hkv * d * 2 * layers
    rate = copy_rate(torch, min(kv_bytes, 4 << 30))
    floor_ms = kv_bytes / (rate * 1e9) * 1e3
    G = hq // hkv
    qb = qs[0][0].float().view(hkv, G, d)
    sc = torch.einsum("hgd,shd->hgs", qb, keep[0].float()) / d ** 0.5
    ref = torch.einsum("hgs,shd->hgd", sc.softmax(-1), keep[1].float()).reshape(hq, d)
    err = float((outs[0][0].float() - ref).norm() / ref.norm())
    stats = eng.get_stats()
    eng.close()
    st.close()
    return {"layers": layers, "kv_bytes": kv_bytes, "copy_GBps": rate, "offload_s": offload_s,
            "step_ms": float(np.median(times)), "steps_ms": times,
            "floor_ms": floor_ms, "host_us_per_layer": float(np.median(host)),
            "max_rel_err": err, "resident_attends": stats.get("resident_attends"),
            "attends": stats.get("attends")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="1x512k,16x32k")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--step", help="a model's decode step instead of the cases: BxS/hQ-K/dD/L "
                    "(e.g. 8x32k/h32-8/d128/32: 8 sequences of 32k tokens, 32 layers)")
    ap.add_argument("--json")
    ap.add_argument("--commit", help="the commit of the library and binding measured, when git "
                    "here cannot tell (a copied tree)")
    a = ap.parse_args()
    for name, known, what in ((a.cases, CASES, "case"), (a.shapes, SHAPES, "shape"),
                              (a.impls, IMPLS, "impl")):
        for x in name.split(","):
            if x not in known:
                ap.error(f"unknown {what} {x!r} (known: {', '.join(known)})")
    import warnings

    import torch
    warnings.filterwarnings("ignore", message="For dense input, both fused kernels")
    import spillway
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device")
    impls = a.impls.split(",")
    records = []
    if a.step:
        try:
            bs, shp, dd, nl = a.step.split("/")
            nb, ctx = bs.split("x")
            S = int(ctx[:-1]) * 1024 if ctx.endswith("k") else int(ctx)
            hq, hkv, d = SHAPES[f"{shp}/{dd}"]
            B, L = int(nb), int(nl)
        except (ValueError, KeyError):
            ap.error(f"--step {a.step!r}: want BxS/hQ-K/dD/L with a known shape "
                     f"({', '.join(SHAPES)}), e.g. 8x32k/h32-8/d128/32")
        tmp = tempfile.mkdtemp(dir=a.dir, prefix="sw_swap_decode_")
        try:
            rec = step_case(a, torch, spillway, B, S, hq, hkv, d, L, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"step {a.step}: {rec['step_ms']:.3f} ms, HBM floor {rec['floor_ms']:.3f} ms "
              f"({rec['kv_bytes'] / 1e9:.1f} GB at {rec['copy_GBps']:.0f} GB/s): "
              f"{rec['step_ms'] / rec['floor_ms']:.3f}x; host {rec['host_us_per_layer']:.1f} us a "
              f"layer; {rec['resident_attends']} of {rec['attends']} attends resident; rel. err "
              f"{rec['max_rel_err']:.1e}", flush=True)
        records.append({"step": a.step, "page_size": BS, **rec})
    for cname in (a.cases.split(",") if not a.step else []):
        B, S = CASES[cname]
        for sname in a.shapes.split(","):
            hq, hkv, d = SHAPES[sname]
            tmp = tempfile.mkdtemp(dir=a.dir, prefix="sw_swap_decode_")
            try:
                rec = one_case(a, torch, spillway, B, S, hq, hkv, d, impls, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
                torch.cuda.empty_cache()
            med, cp = rec["ms"], rec["copy_GBps"]
            line = f"{cname:7s} {sname:11s} copy {cp:7.1f} GB/s |"
            for i in impls:
                if i in med:
                    gbps = rec["kv_bytes"] / (med[i] * 1e6)
                    line += f" {i} {med[i]:.3f} ms ({100 * gbps / cp:5.1f}%)"
                else:
                    line += f" {i} failed"
            if "swap-attend" in med:
                line += f" | host {rec['host_us']['swap-attend']:.1f} us"
                if "spillway-paged" in rec["host_us"]:  # the bare launch, the same loops
                    line += f" (paged run {rec['host_us']['spillway-paged']:.1f})"
                for i in med:
                    if i != "swap-attend":
                        line += f" | swap/{i} {med[i] / med['swap-attend']:.2f}x"
            print(line, flush=True)
            for i, why in rec["failed"].items():
                print(f"  {i}: {why}")
            records.append({"case": cname, "shape": sname, "page_size": BS, **rec})
    if a.json:
        commit = a.commit or subprocess.run(
            ["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short",
             "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
        with open(a.json, "w") as f:
            json.dump({"component": "swap-decode", "command": " ".join(["python3"] + sys.argv),
                       "commit": commit, "library": spillway.version(), "torch": torch.__version__,
                       "gpu": torch.cuda.get_device_name(), "utc": time.strftime(
                           "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
