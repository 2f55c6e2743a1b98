"""pytest setup for the Python binding: import path, the `gpu` and `slow`
markers, no model hub (HF_HUB_OFFLINE=1).

The library is found by the package itself: $SPILLWAY_LIB, else
<repo>/build/libspillway.so (see python/spillway/_lib.py).
"""

import os
import sys

_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
_PY = os.path.join(_ROOT, "python")
if _PY not in sys.path:
    sys.path.insert(0, _PY)

# The transformers tests load models from local files only; huggingface_hub
# reads this when first imported, so it is set before any test module runs.
os.environ["HF_HUB_OFFLINE"] = "1"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu: needs torch with a CUDA device; skipped (reported as skipped) otherwise",
    )
    config.addinivalue_line(
        "markers",
        "slow: minutes of CPU (a real model end to end); the test command runs it, "
        "-m 'not slow' leaves it out",
    )


def pytest_report_header(config):
    lib = os.environ.get("SPILLWAY_LIB") or os.path.join(_ROOT, "build", "libspillway.so")
    return f"spillway library: {lib}"
