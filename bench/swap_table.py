#!/usr/bin/env python3
"""Issue 24's lines from `spillway bench swap` results files, as a Markdown table.

    python3 bench/swap_table.py RESULTS.json [RESULTS2.json ...] [--md OUT.md]

Each file is one run (what `--json` writes) or a record of several (an object
with "runs", as bench/results keeps them). One column per shape of a run
(--shapes) and per run, one row per line: the figure, the limit it is held
against (measured in the same run) and their ratio, marked met or missed
against the line's target (the GPU's default cases: one sequence of 512k
tokens, a batch of 16 x 32k). Rows whose records no run has (a case not run,
an opponent not named) are left out. Exit status 0, or 1 when a run is not a
device-pool swap run."""

import sys

from results_runs import emit, tool_args

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


def table(docs):
    """The lines of runs `docs` (each with "records"): a column per shape and run."""
    shapes = []
    for doc in docs:
        for r in doc.get("records", []):
            s = r.get("shape")
            if s and s not in shapes:
                shapes.append(s)
    if not shapes:
        shapes = [None]
    cols = [(s, i) for s in shapes for i in range(len(docs))]
    by = {(r.get("shape"), i, r["case"], r["metric"]): r
          for i, doc in enumerate(docs) for r in doc.get("records", [])}

    def name(s, i):
        if len(docs) == 1:
            return s or "run"
        return "%s, run %d" % (s, i + 1) if s else "run %d" % (i + 1)

    out = ["| line | %s |" % " | ".join(name(s, i) for s, i in cols),
           "|---|" + "---|" * len(cols)]
    missed = 0
    for case, metric, label, target in LINES:
        cells = []
        for s, i in cols:
            rec = by.get((s, i, case, metric))
            if rec is None:
                cells.append("")
                continue
            text, met = cell(rec, target)
            missed += met is False
            cells.append(text)
        if any(cells):
            out.append("| %s | %s |" % (label, " | ".join(cells)))
    checks = []
    for s, i in cols:
        worst = [by[(s, i, c, "max_rel_l2")]["value"] for c in CASES
                 if (s, i, c, "max_rel_l2") in by]
        checks.append("%.2g" % max(worst) if worst else "")
    if any(checks):
        out.append("| every checked row: max rel L2 vs fp64 (bound 1e-2) | %s |" % " | ".join(checks))
    return "\n".join(out) + "\n", missed


def main():
    a, runs = tool_args(__doc__, "swap", "table")
    if runs is None:
        return 1
    for r in runs:
        if not any(x.get("metric") == "h2d_pinned_GBps" for x in r["records"]):
            print("swap_table: %s is a host-pool run: the lines are the device pool's"
                  % r.get("command", "a run"), file=sys.stderr)
            return 1
    text, missed = table(runs)
    emit(a, runs, text, "%d line(s) missed" % missed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
