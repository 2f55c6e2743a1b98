#!/usr/bin/env python3
"""Issue 24's lines from a `spillway bench swap` results file, as a Markdown table.

    python3 bench/swap_table.py RESULTS.json [--md OUT.md]

One column per shape of the run (--shapes), one row per line: the figure, the
limit it is held against (measured in the same run) and their ratio, marked
met or missed against the line's target (the GPU's default cases: one
sequence of 512k tokens, a batch of 16 x 32k). Rows whose records the run
lacks (a case not run, an opponent not named) are left out. Exit status 0,
or 1 when the file holds no device-pool swap run."""

import argparse
import json
import sys

# (case, metric, row label, target on value / limit: > 0 at least, < 0 at most)
LINES = [
    ("disk-bound", "step_ms_vs_1.10x_disk_ms", "disk: step ms vs 1.10 x raw time", -1.0),
    ("host-tier-bound", "host_tier_read_GBps", "host tier: GB/s vs pinned H2D", 0.90),
    ("all-resident", "loop_read_GBps", "all-resident, one sequence: GB/s vs D2D", 0.80),
    ("all-resident", "host_us_per_attend_call", "all-resident, one sequence: host us a call vs 20", -1.0),
    ("all-resident", "step_ms_flashinfer_decode", "all-resident, one sequence: FlashInfer ms vs ours", 0.95),
    ("all-resident", "step_ms_cudnn_sdpa_decode", "all-resident, one sequence: cuDNN ms vs ours", 0.95),
    ("resident-batch", "loop_read_GBps", "all-resident, a batch: GB/s vs D2D", 0.80),
    ("resident-batch", "host_us_per_attend_call", "all-resident, a batch: host us a call vs 20", -1.0),
    ("resident-batch", "step_ms_flashinfer_decode", "all-resident, a batch: FlashInfer ms vs ours", 0.95),
    ("resident-batch", "step_ms_cudnn_sdpa_decode", "all-resident, a batch: cuDNN ms vs ours", 0.95),
]
CASES = ["disk-bound", "host-tier-bound", "all-resident", "resident-batch"]


def cell(rec, target):
    v, lim = rec["value"], rec["limit"]
    if lim in (None, 0):
        return "%.4g" % v, None
    r = v / lim
    met = r >= target if target > 0 else r <= -target
    return "%.4g / %.4g = %.1f%%%s" % (v, lim, 100 * r, "" if met else " (missed)"), met


def table(doc):
    recs = doc.get("records", [])
    shapes = []
    for r in recs:
        s = r.get("shape")
        if s and s not in shapes:
            shapes.append(s)
    if not shapes:
        shapes = [None]
    by = {(r.get("shape"), r["case"], r["metric"]): r for r in recs}
    out = ["| line | %s |" % " | ".join(s or "run" for s in shapes),
           "|---|" + "---|" * len(shapes)]
    missed = 0
    for case, metric, label, target in LINES:
        cells = []
        for s in shapes:
            rec = by.get((s, case, metric))
            if rec is None:
                cells.append("")
                continue
            text, met = cell(rec, target)
            missed += met is False
            cells.append(text)
        if any(cells):
            out.append("| %s | %s |" % (label, " | ".join(cells)))
    checks = []
    for s in shapes:
        worst = [by[(s, c, "max_rel_l2")]["value"] for c in CASES if (s, c, "max_rel_l2") in by]
        checks.append("%.2g" % max(worst) if worst else "")
    if any(checks):
        out.append("| every checked row: max rel L2 vs fp64 (bound 1e-2) | %s |" % " | ".join(checks))
    return "\n".join(out) + "\n", missed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--md", help="write the table here too")
    a = ap.parse_args()
    with open(a.results) as f:
        doc = json.load(f)
    if doc.get("component") != "swap" or not doc.get("records"):
        print("swap_table: %s holds no swap records" % a.results, file=sys.stderr)
        return 1
    if not any(r["metric"] == "h2d_pinned_GBps" for r in doc["records"]):
        print("swap_table: %s is a host-pool run: the lines are the device pool's" % a.results,
              file=sys.stderr)
        return 1
    text, missed = table(doc)
    head = "`%s`, commit %s, %s\n\n" % (doc.get("command", "?"), doc.get("commit", "?")[:7],
                                        doc.get("utc", "?"))
    sys.stdout.write(head + text)
    print("\n%d line(s) missed" % missed)
    if a.md:
        with open(a.md, "w") as f:
            f.write(head + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
