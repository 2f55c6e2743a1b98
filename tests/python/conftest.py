"""pytest setup for the Python binding: import path, the `gpu` and `slow`
markers, no model hub (HF_HUB_OFFLINE=1), the cuda_torch fixture.

The library is found by the package itself: $SPILLWAY_LIB, else
<repo>/build/libspillway.so (see python/spillway/_lib.py).
"""

import os
import sys

import pytest

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


@pytest.fixture
def cuda_torch():
    """torch, where torch sees a CUDA device and libspillway has CUDA; else skip."""
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    import spillway
    if spillway.cuda_device_count() < 1:
        pytest.skip("libspillway was built without CUDA or sees no device")
    return torch
