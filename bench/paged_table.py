#!/usr/bin/env python3
"""Issue 25's lines from `spillway bench paged` results files, as Markdown tables.

    python3 bench/paged_table.py RESULTS.json [RESULTS2.json ...] [--md OUT.md]

Each file is one run (what `--json` writes) or a record of several (an object
with "runs", as bench/results keeps them). Two tables, a row per case and
shape, each cell the runs' figures side by side (run 1 / run 2 ...):
  decode   Spillway's time, its rate against the device copy rate over the
           KV bytes (line: >= 85%), FlashInfer's batch decode time over ours
           (line: >= 1.0x) and FlashInfer's FA3 prefill with one query row
           over ours (not a line);
  prefill  Spillway's paged time and TFLOP/s, against its own ragged prefill
           on the same keys (line: >= 95%), FlashInfer's FA2 and FA3 paged
           prefill over ours (line: >= 1.0x).
An opponent's ratio uses our time measured beside it. A figure that misses its
line is marked "(missed)", a case whose check failed "(check failed)"; the
worst relative L2 against fp64 closes the output. Exit status 0, or 1 when a
file is unreadable or holds no paged run."""

import sys

from results_runs import emit, tool_args

DECODE_COPY, OPP, PREFILL_RAGGED = 0.85, 1.0, 0.95


def _opp(rec, name):
    """Opponent `name`'s time over ours beside it, or None when it did not run."""
    t, ours = rec.get(name + "_ms"), rec.get("ms_beside_" + name)
    if not t or not ours or t <= 0 or ours <= 0:
        return None
    return t / ours


class Cells:
    """A column's figures over the runs, with the count of missed lines."""

    def __init__(self):
        self.missed = 0

    def join(self, recs, fmt, value, target=None):
        parts = []
        for r in recs:
            v = value(r) if r is not None else None
            if v is None:
                parts.append("-")
                continue
            text = fmt % v
            if target is not None and v < target:
                text += " (missed)"
                self.missed += 1
            parts.append(text)
        return " / ".join(parts) if any(p != "-" for p in parts) else ""


def tables(runs):
    keys = []
    for doc in runs:
        for r in doc["records"]:
            k = (r.get("kind"), r["case"], r["shape"])
            if k not in keys:
                keys.append(k)
    by = [{(r.get("kind"), r["case"], r["shape"]): r for r in doc["records"]} for doc in runs]
    c = Cells()
    out = ["## Decode", "",
           "| case | shape | Spillway, paged | of copy | FlashInfer batch decode / ours "
           "| FlashInfer FA3, one query row / ours |", "|---|---|---|---|---|---|"]
    failed = 0
    for kind in ("decode", "prefill"):
        if kind == "prefill":
            out += ["", "## Prefill (causal)", "",
                    "| case | shape | Spillway, paged | of ragged | FlashInfer FA2 paged prefill "
                    "/ ours | FlashInfer FA3 paged prefill / ours |", "|---|---|---|---|---|---|"]
        for k in keys:
            if k[0] != kind:
                continue
            recs = [b.get(k) for b in by]
            bad = [r for r in recs if r is not None and not r.get("ok", False)]
            failed += len(bad)
            ms = c.join(recs, "%.3f", lambda r: r.get("ms")) + " ms"
            if kind == "prefill":
                ms += ", " + c.join(recs, "%.0f", lambda r: r.get("tflops")) + " TFLOP/s"
            ratio = c.join(recs, "%.1f%%", lambda r: 100 * r["ratio"] if "ratio" in r else None,
                           100 * (DECODE_COPY if kind == "decode" else PREFILL_RAGGED))
            fi = c.join(recs, "%.2fx", lambda r: _opp(r, "flashinfer"), OPP)
            fa3 = c.join(recs, "%.2fx", lambda r: _opp(r, "flashinfer_fa3"),
                         OPP if kind == "prefill" else None)
            if bad:
                ms += " (check failed)"
            out.append("| %s | %s | %s | %s | %s | %s |" % (k[1], k[2], ms, ratio, fi, fa3))
    worst = max((max(r.get("max_rel_l2", 0), r.get("flashinfer_max_rel_l2", 0),
                     r.get("flashinfer_fa3_max_rel_l2", 0))
                 for doc in runs for r in doc["records"]), default=0)
    out += ["", "Worst sampled row of any implementation: %.2g relative L2 against fp64." % worst]
    return "\n".join(out) + "\n", c.missed, failed


def main():
    a, runs = tool_args(__doc__, "paged", "tables")
    if runs is None:
        return 1
    text, missed, failed = tables(runs)
    emit(a, runs, text, "%d figure(s) missed their line, %d check(s) failed" % (missed, failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
