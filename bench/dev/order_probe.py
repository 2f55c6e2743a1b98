"""order_probe.py - development probe (docs/perf/NOTES.md, issue 5): does bench/prefill.py's
per-case order (spillway timed first, right after the fp32 reference) bias the first timed
implementation? Runs prefill.run_case itself on the given cases with several implementation
orders, in one process.
  python3 bench/dev/order_probe.py --cases mix-a/h32-8/d128 --orders spillway,flashinfer-c-fa3:flashinfer-c-fa3,spillway
"""
import argparse, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torch
import prefill as P

ap = argparse.ArgumentParser()
ap.add_argument("--cases", default="mix-a/h32-8/d128,mix-a/h32-8/d64")
ap.add_argument("--orders", default="spillway,flashinfer-c-fa3,spillway:flashinfer-c-fa3,spillway")
ap.add_argument("--reps", type=int, default=10)
a = ap.parse_args()
args = argparse.Namespace(spillway_backend="cuda", threads=0, dense_layout="bhsd", cpu_pinned=False,
                          verbose=True, warmup=5, reps=a.reps, seed=1234, no_interleave=False)
dev = torch.device("cuda")
flusher = P._Flusher(dev, True)
info = {"cmd": "order_probe"}
for c in [c for c in P.all_cases() if any(s in c.name for s in a.cases.split(","))]:
    for order in a.orders.split(":"):
        print(f"-- order {order}", flush=True)
        P.run_case(c, order.split(","), args, dev, torch.bfloat16, flusher, info)
