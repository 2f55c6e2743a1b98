"""Smoke test of bench/prefill.py in its CPU mode (tiny lengths), so the
driver keeps working between GPU runs. Needs torch (CPU is enough)."""

import json
import os
import sys

import pytest

_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def test_bench_prefill_cpu_smoke(tmp_path):
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(_ROOT, "bench"))
    try:
        import prefill
    finally:
        sys.path.pop(0)
    out = tmp_path / "r.json"
    md = tmp_path / "p.md"
    md.write_text("# kept\n\nhand-written text\n")
    argv = ["--cpu", "--cpu-scale", "0.01", "--threads", "1", "--reps", "10", "--warmup", "0",
            "--cases", "16x1k/h32-8/d64,mix-b/h16-2/d256", "--out", str(out), "--md", str(md)]
    assert prefill.main(argv) == 0
    recs = json.loads(out.read_text())
    assert {r["impl"] for r in recs} == {"spillway-cpu", "torch-cpu-sdpa"}
    assert {r["case"] for r in recs} == {"16x1k@0.01/h32-8/d64/causal",
                                        "mix-b@0.01/h16-2/d256/causal"}
    for r in recs:
        assert "error" not in r, r
        assert r["ms"] > 0 and r["tflops"] > 0 and r["gflops"] == pytest.approx(r["tflops"] * 1e3)
        assert r["max_rel_err"] < 1e-2, r
    text = md.read_text()
    assert text.startswith("# kept") and "hand-written text" in text
    assert text.count("<!-- BEGIN prefill-cpu-") == 1
    # A second run replaces its own section instead of appending another.
    assert prefill.main(argv) == 0
    assert md.read_text().count("<!-- BEGIN prefill-cpu-") == 1


def test_bench_prefill_mixes_and_flops():
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(_ROOT, "bench"))
    try:
        import prefill
    finally:
        sys.path.pop(0)
    # The driver and `spillway bench prefill` must time the same batches.
    import re
    with open(os.path.join(_ROOT, "bench", "prefill_run.c")) as f:
        csrc = f.read()
    for name in ("16x1k", "4x4k", "1x16k", "mix-a", "mix-b"):
        lens = prefill.SHAPES[name]
        m = re.search(r'\{"%s", (\d+), \{([^}]*)\}\}' % re.escape(name), csrc)
        assert m, name
        c_lens = [int(x) for x in m.group(2).replace("\n", " ").split(",") if x.strip()]
        assert int(m.group(1)) == len(c_lens) and c_lens == lens, name
        if name.startswith("mix"):
            assert all(prefill.MIN_LEN <= x <= prefill.MAX_LEN for x in lens)
    c = prefill.Case("x", [3, 0, 5], 4, 2, 64)
    # square causal: sum over rows of visible keys = L(L+1)/2
    assert c.flops == 4.0 * (6 + 15) * 64 * 4
    names = [c.name for c in prefill.all_cases()]
    assert len(names) == 15 and "mix-a/h32-8/d128/causal" in names
