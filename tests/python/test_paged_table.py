"""bench/paged_table.py: issue 25's lines from paged results files, on hand-made
runs (each figure against its line, met or missed; opponents over our time
beside them; failed checks counted), and its refusals."""

import json
import os
import subprocess
import sys

_TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                     "paged_table.py")


def _decode(ratio, fi_ms, ok=True, fa3_ms=None):
    r = {"kind": "decode", "case": "16x32k", "shape": "h32-8/d128", "ms": 0.5, "ratio": ratio,
         "ok": ok, "max_rel_l2": 2e-3, "flashinfer_ms": fi_ms, "ms_beside_flashinfer": 0.5}
    if fa3_ms is not None:
        r.update(flashinfer_fa3_ms=fa3_ms, ms_beside_flashinfer_fa3=0.5)
    return r


def _prefill(ratio, fa3_ms):
    return {"kind": "prefill", "case": "pmix-b", "shape": "h16-2/d256", "ms": 1.0, "tflops": 600.0,
            "ratio": ratio, "ok": True, "max_rel_l2": 2.5e-3, "flashinfer_ms": 2.0,
            "ms_beside_flashinfer": 1.0, "flashinfer_fa3_ms": fa3_ms,
            "ms_beside_flashinfer_fa3": 1.0, "flashinfer_fa3_max_rel_l2": 4e-3}


def _run_doc(records, utc):
    return {"component": "paged", "command": "spillway-bench-paged", "commit": "0123456789ab",
            "utc": utc, "records": records}


def _tool(*args):
    return subprocess.run([sys.executable, _TOOL, *map(str, args)], capture_output=True, text=True)


def _row(text, start):
    return [c.strip() for c in
            next(l for l in text.splitlines() if l.startswith(start)).strip("|").split("|")]


def test_two_runs(tmp_path):
    r1 = _run_doc([_decode(0.90, 0.55), _prefill(0.96, 1.2)], "2026-12-06T00:00:01Z")
    r2 = _run_doc([_decode(0.80, 0.45, ok=False), _prefill(0.93, 0.9)], "2026-12-06T00:00:02Z")
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps({"component": "paged", "machine": "x", "runs": [r1, r2]}))
    md = tmp_path / "t.md"
    p = _tool(rec, "--md", md)
    assert p.returncode == 0, p.stderr
    d = _row(p.stdout, "| 16x32k")
    # decode: 90% met, 80% missed (>= 85%); FlashInfer 0.55/0.5 = 1.10x met, 0.9x missed
    assert d[2] == "0.500 / 0.500 ms (check failed)"
    assert d[3] == "90.0% / 80.0% (missed)"
    assert d[4] == "1.10x / 0.90x (missed)"
    assert d[5] == ""  # no FA3 figures in these decode rows
    pf = _row(p.stdout, "| pmix-b")
    assert pf[2] == "1.000 / 1.000 ms, 600 / 600 TFLOP/s"
    assert pf[3] == "96.0% / 93.0% (missed)"  # >= 95%
    assert pf[4] == "2.00x / 2.00x"
    assert pf[5] == "1.20x / 0.90x (missed)"  # >= 1.0x
    assert "4 figure(s) missed their line, 1 check(s) failed" in p.stdout
    assert "0.004 relative L2" in p.stdout
    assert md.read_text() in p.stdout
    # the runs as two files: the same tables
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(r1))
    b.write_text(json.dumps(r2))
    assert _tool(a, b).stdout == p.stdout


def test_decode_fa3_is_no_line_and_a_case_one_run_lacks(tmp_path):
    """Decode's FA3 column is shown but is not a line: below 1.0x it is not
    marked missed nor counted. A case one run lacks shows "-" in that run's
    place, the other run's figures beside it."""
    r1 = _run_doc([_decode(0.90, 0.55, fa3_ms=0.30), _prefill(0.96, 1.2)],
                  "2026-12-06T00:00:01Z")
    r2 = _run_doc([_decode(0.90, 0.55, fa3_ms=0.70)], "2026-12-06T00:00:02Z")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(r1))
    b.write_text(json.dumps(r2))
    p = _tool(a, b)
    assert p.returncode == 0, p.stderr
    d = _row(p.stdout, "| 16x32k")
    assert d[5] == "0.60x / 1.40x"  # 0.3 / 0.5 and 0.7 / 0.5; no "(missed)"
    pf = _row(p.stdout, "| pmix-b")
    assert pf[2:] == ["1.000 / - ms, 600 / - TFLOP/s", "96.0% / -", "2.00x / -", "1.20x / -"]
    # every line met; FA3 decode at 0.60x is not counted
    assert "0 figure(s) missed their line, 0 check(s) failed" in p.stdout


def test_refusals(tmp_path):
    swap = tmp_path / "swap.json"
    swap.write_text(json.dumps({"component": "swap", "records": [{"case": "x"}]}))
    p = _tool(swap)
    assert p.returncode == 1 and "no paged records" in p.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("[")
    p = _tool(bad)
    assert p.returncode == 1 and "bad.json" in p.stderr
