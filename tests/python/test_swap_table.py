"""bench/swap_table.py: issue 24's lines from a swap results file, on a
hand-made file of two shapes (each figure against its limit, met or missed
by the line's target), and its refusals."""

import json
import os
import subprocess
import sys

_TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                     "swap_table.py")


def _rec(shape, case, metric, value, limit=None):
    r = {"case": case, "metric": metric, "value": value, "limit": limit}
    if shape:
        r["shape"] = shape
    return r


def _run(tmp_path, doc, *extra):
    path = tmp_path / "swap.json"
    path.write_text(json.dumps(doc))
    return subprocess.run([sys.executable, _TOOL, str(path), *extra], capture_output=True,
                          text=True)


def _doc(records):
    return {"component": "swap", "command": "spillway-bench-swap --shapes a,b",
            "commit": "0123456789ab", "utc": "2026-12-05T00:00:00Z", "records": records}


def test_two_shapes(tmp_path):
    recs = [_rec(None, "reference", "h2d_pinned_GBps", 55.0),
            _rec(None, "reference", "d2d_copy_GBps", 4200.0)]
    # max rel L2 per case (host tier, all-resident, batch): other per shape, the
    # worst in the middle, neither first nor last
    for s, host, res, us, cudnn, l2 in (("h32-8/d128", 50.0, 4100.0, 12.0, 0.49,
                                         (1e-3, 4e-3, 2e-3)),
                                        ("h16-2/d256", 49.0, 3000.0, 25.0, 0.30,
                                         (3e-3, 6e-3, 5e-3))):
        recs += [_rec(s, "host-tier-bound", "host_tier_read_GBps", host, 55.0),
                 _rec(s, "all-resident", "loop_read_GBps", res, 4200.0),
                 _rec(s, "all-resident", "host_us_per_attend_call", us, 20),
                 _rec(s, "resident-batch", "step_ms_cudnn_sdpa_decode", cudnn, 0.5),
                 _rec(s, "host-tier-bound", "max_rel_l2", l2[0], 1e-2),
                 _rec(s, "all-resident", "max_rel_l2", l2[1], 1e-2),
                 _rec(s, "resident-batch", "max_rel_l2", l2[2], 1e-2)]
    md = tmp_path / "t.md"
    p = _run(tmp_path, _doc(recs), "--md", str(md))
    assert p.returncode == 0, p.stderr
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md.read_text().splitlines()
            if line.startswith("| ")}
    assert rows["line"] == "| line | h32-8/d128 | h16-2/d256 |"
    # 50 / 55 = 90.9% >= 90%: met; 49 / 55 = 89.1%: missed
    assert "50 / 55 = 90.9% |" in rows["host tier: GB/s vs pinned H2D"]
    assert "49 / 55 = 89.1% (missed)" in rows["host tier: GB/s vs pinned H2D"]
    assert "3000 / 4200 = 71.4% (missed)" in rows["all-resident, one sequence: GB/s vs D2D"]
    # at most 20 us: 12 met, 25 missed
    assert "12 / 20 = 60.0% |" in rows["all-resident, one sequence: host us a call vs 20"]
    assert "25 / 20 = 125.0% (missed)" in rows["all-resident, one sequence: host us a call vs 20"]
    # the opponent's time over ours: 0.49 / 0.5 = 98% >= 95% met, 60% missed
    assert "0.49 / 0.5 = 98.0% |" in rows["all-resident, a batch: cuDNN ms vs ours"]
    assert "0.3 / 0.5 = 60.0% (missed)" in rows["all-resident, a batch: cuDNN ms vs ours"]
    # each shape's worst case, in its own column
    assert rows["every checked row: max rel L2 vs fp64 (bound 1e-2)"] == \
        "| every checked row: max rel L2 vs fp64 (bound 1e-2) | 0.004 | 0.006 |"
    # lines without records (disk case, FlashInfer) are left out
    assert not any(k.startswith("disk") or "FlashInfer" in k for k in rows)
    assert "4 line(s) missed" in p.stdout


def test_refusals(tmp_path):
    host_pool = _doc([_rec("h16-2/d256", "host-tier-bound", "host_tier_read_GBps", 5.0, 20.0)])
    p = _run(tmp_path, host_pool)
    assert p.returncode == 1 and "host-pool run" in p.stderr
    p = _run(tmp_path, {"component": "paged", "records": []})
    assert p.returncode == 1 and "no swap records" in p.stderr


def test_runs_side_by_side(tmp_path):
    """Two runs (a record holding both, and the same two as files): a column per shape and run."""
    def run(host, utc):
        d = _doc([_rec(None, "reference", "h2d_pinned_GBps", 55.0),
                  _rec("h32-8/d128", "host-tier-bound", "host_tier_read_GBps", host, 55.0),
                  _rec("h16-2/d256", "host-tier-bound", "host_tier_read_GBps", host - 1, 55.0)])
        d["utc"] = utc
        return d
    r1, r2 = run(52.0, "2026-12-06T00:00:01Z"), run(48.0, "2026-12-06T00:00:02Z")
    record = {"component": "swap", "machine": "x", "runs": [r1, r2]}
    p = _run(tmp_path, record)
    assert p.returncode == 0, p.stderr
    head = [l for l in p.stdout.splitlines() if l.startswith("| line")]
    assert head == ["| line | h32-8/d128, run 1 | h32-8/d128, run 2 | h16-2/d256, run 1 "
                    "| h16-2/d256, run 2 |"]
    row = [l for l in p.stdout.splitlines() if l.startswith("| host tier")][0]
    # 52/55 94.5% met, 48/55 87.3% missed, 51/55 92.7% met, 47/55 85.5% missed: in column order
    cells = [c.strip() for c in row.strip("|").split("|")[1:]]
    assert cells == ["52 / 55 = 94.5%", "48 / 55 = 87.3% (missed)", "51 / 55 = 92.7%",
                     "47 / 55 = 85.5% (missed)"]
    assert "2 line(s) missed" in p.stdout
    assert "run 1: `" in p.stdout and "2026-12-06T00:00:02Z" in p.stdout
    # the same runs as two files give the same table
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(r1))
    b.write_text(json.dumps(r2))
    q = subprocess.run([sys.executable, _TOOL, str(a), str(b)], capture_output=True, text=True)
    assert q.returncode == 0 and q.stdout == p.stdout


def test_unreadable_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = subprocess.run([sys.executable, _TOOL, str(bad)], capture_output=True, text=True)
    assert p.returncode == 1 and "bad.json" in p.stderr
    p = subprocess.run([sys.executable, _TOOL, str(tmp_path / "none.json")], capture_output=True,
                       text=True)
    assert p.returncode == 1 and "none.json" in p.stderr
