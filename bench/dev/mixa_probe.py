"""mixa_probe.py - development probe for mix-a's bimodal timing (docs/perf/NOTES.md, issue 5).

For each case and implementation, in one process: the host time of one call (enqueue only),
then per-rep GPU times (CUDA events around each call) in three modes: the bench's own (L2 flush
before each rep, reps enqueued without synchronising), no flush, and a synchronise after each
rep (the GPU never waits for the host). Prints every time sorted, so a two-mode distribution is
visible. Uses bench/prefill.py's cases, inputs and setup functions (same calls as the bench).
  python3 bench/dev/mixa_probe.py [--cases mix-a/h32-8/d128,...] [--impls spillway,...] [--reps 40]
"""
import argparse, os, statistics, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torch
import prefill as P

ap = argparse.ArgumentParser()
ap.add_argument("--cases", default="mix-a/h32-8/d128,mix-a/h32-8/d64,4x4k/h32-8/d128")
ap.add_argument("--impls", default="spillway")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--modes", default="bench,noflush,sync")
a = ap.parse_args()
args = argparse.Namespace(spillway_backend="cuda", threads=0, dense_layout="bhsd", cpu_pinned=False,
                          verbose=True, warmup=5, reps=a.reps, seed=0)
dev = torch.device("cuda")
flush = P._Flusher(dev, True)
cases = [c for c in P.all_cases() if any(s in c.name for s in a.cases.split(","))]
for case in cases:
    inp = P.Inputs(case, torch.bfloat16, dev, 0)
    for name in a.impls.split(","):
        run, _, note = P.make_setup(name)(case, inp, args)
        for _ in range(5):
            run()
        torch.cuda.synchronize()
        host = []
        for _ in range(20):
            t0 = time.perf_counter(); run(); host.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
        print(f"== {case.name} {name}: host ms per call (enqueue) median {statistics.median(host):.3f}"
              f" max {max(host):.3f}", flush=True)
        for mode in a.modes.split(","):
            evs = []
            for _ in range(a.reps):
                if mode != "noflush":
                    flush()
                s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
                s.record(); run(); e.record(); evs.append((s, e))
                if mode == "sync":
                    torch.cuda.synchronize()
            torch.cuda.synchronize()
            t = [s.elapsed_time(e) for s, e in evs]
            med = statistics.median(t)
            print(f"  {mode:8s} median {med:.3f} ms = {case.flops / med / 1e9:.0f} TFLOP/s; sorted:",
                  " ".join(f"{x:.3f}" for x in sorted(t)), flush=True)
            print(f"  {mode:8s} in order:", " ".join(f"{x:.3f}" for x in t), flush=True)
