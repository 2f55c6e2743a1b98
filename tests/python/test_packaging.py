"""`pip install .` (pyproject.toml, scikit-build-core) builds libspillway and
installs the binding with the library inside the package: a fresh process
that imports the installed package loads that copy (no SPILLWAY_LIB, no
LD_LIBRARY_PATH, no build tree) and computes attention with it.

CPU-only build (SPILLWAY_CUDA=OFF) to keep it short; skipped when
scikit-build-core is not installed (scripts/setup.sh installs it)."""

import os
import subprocess
import sys

import pytest

_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

_CHECK = r"""
import os, sys
import numpy as np
import spillway
site = sys.argv[1]
path = spillway.lib_path()
assert os.path.dirname(path) == os.path.join(site, "spillway"), path
# One query row that sees one key: the output is that key's value row.
rng = np.random.default_rng(7)
q = rng.standard_normal((1, 2, 64)).astype(np.float32)
k = rng.standard_normal((1, 1, 64)).astype(np.float32)
v = rng.standard_normal((1, 1, 64)).astype(np.float32)
out = spillway.varlen_attention(q, k, v, [0, 1], [0, 1], backend="cpu_ref")
assert np.array_equal(out, np.broadcast_to(v, (1, 2, 64))), out
print("ok", path)
"""


def test_pip_install_puts_the_library_in_the_package(tmp_path):
    pytest.importorskip("scikit_build_core", reason="scikit-build-core not installed")
    site = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
           "--no-index", "--target", str(site), "-C", "cmake.define.SPILLWAY_CUDA=OFF", _ROOT]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert (site / "spillway" / "libspillway.so").is_file()
    assert (site / "spillway" / "__init__.py").is_file()
    assert (site / "spillway" / "hf.py").is_file()  # the transformers extra

    env = {k: v for k, v in os.environ.items()
           if k not in ("SPILLWAY_LIB", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", _CHECK, str(site)], capture_output=True,
                       text=True, cwd=str(tmp_path), env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok ")
