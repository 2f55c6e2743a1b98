"""ctypes loading of libspillway and mirrors of the public structs of spillway.h.

Everything here is a one-to-one image of include/spillway.h: enum values,
struct layouts (field order and C types, so ctypes reproduces the C padding),
and function prototypes. Keep it in step with the header; the header is the
source of truth and `struct_size` is always ctypes.sizeof(the mirror).
"""

import ctypes
import ctypes.util
import os
import threading

# --------------------------------------------------------------- status ---
SW_OK = 0
SW_STATUS_INVALID = -1
SW_STATUS_UNSUPPORTED = -2
SW_STATUS_NO_MEMORY = -3
SW_STATUS_WORKSPACE_TOO_SMALL = -4
SW_STATUS_MISALIGNED = -5
SW_STATUS_CUDA = -6
SW_STATUS_NO_DEVICE = -7
SW_STATUS_IO = -8
SW_STATUS_CORRUPT = -9
SW_STATUS_FULL = -10
SW_STATUS_NOT_FOUND = -11
SW_STATUS_FAILED = -12
SW_STATUS_INTERNAL = -13

# Names for codes raised from Python before the library is reached (and a
# fallback should the library be unloadable); the library's sw_status_str()
# is used whenever it is loaded.
_STATUS_NAMES = {
    SW_OK: "SW_OK",
    SW_STATUS_INVALID: "SW_STATUS_INVALID",
    SW_STATUS_UNSUPPORTED: "SW_STATUS_UNSUPPORTED",
    SW_STATUS_NO_MEMORY: "SW_STATUS_NO_MEMORY",
    SW_STATUS_WORKSPACE_TOO_SMALL: "SW_STATUS_WORKSPACE_TOO_SMALL",
    SW_STATUS_MISALIGNED: "SW_STATUS_MISALIGNED",
    SW_STATUS_CUDA: "SW_STATUS_CUDA",
    SW_STATUS_NO_DEVICE: "SW_STATUS_NO_DEVICE",
    SW_STATUS_IO: "SW_STATUS_IO",
    SW_STATUS_CORRUPT: "SW_STATUS_CORRUPT",
    SW_STATUS_FULL: "SW_STATUS_FULL",
    SW_STATUS_NOT_FOUND: "SW_STATUS_NOT_FOUND",
    SW_STATUS_FAILED: "SW_STATUS_FAILED",
    SW_STATUS_INTERNAL: "SW_STATUS_INTERNAL",
}

# ---------------------------------------------------------------- dtype ---
SW_DTYPE_F32 = 0
SW_DTYPE_F16 = 1
SW_DTYPE_BF16 = 2

# -------------------------------------------------------------- backend ---
SW_BACKEND_AUTO = 0
SW_BACKEND_CPU_REF = 1
SW_BACKEND_CPU = 2
SW_BACKEND_CUDA = 3
SW_BACKEND_CUDA_PORTABLE = 4
SW_BACKEND_CUDA_HOPPER = 5
# Opponents, for measurement only (docs/opponents.md): the library refuses them
# unless it was built with the opponent and SPILLWAY_OPPONENT=flashinfer is set
# when the plan is made.
SW_BACKEND_OPPONENT_FLASHINFER = 100
SW_BACKEND_OPPONENT_FLASHINFER_FA3 = 101

BACKENDS = {
    "auto": SW_BACKEND_AUTO,
    "cpu_ref": SW_BACKEND_CPU_REF,
    "cpu": SW_BACKEND_CPU,
    "cuda": SW_BACKEND_CUDA,
    "cuda_portable": SW_BACKEND_CUDA_PORTABLE,
    "cuda_hopper": SW_BACKEND_CUDA_HOPPER,
    "flashinfer": SW_BACKEND_OPPONENT_FLASHINFER,
    "flashinfer_fa3": SW_BACKEND_OPPONENT_FLASHINFER_FA3,
}
CPU_BACKENDS = (SW_BACKEND_CPU_REF, SW_BACKEND_CPU)


class SpillwayError(RuntimeError):
    """A failure reported by libspillway (or caught by the binding first).

    Attributes:
        status: the status name, e.g. "SW_STATUS_INVALID" (sw_status_str).
        detail: the sentence from sw_last_error() (or from the binding).
        code:   the integer sw_status, when known.
    """

    def __init__(self, status, detail, code=None):
        super().__init__(f"{status}: {detail}" if detail else status)
        self.status = status
        self.detail = detail
        self.code = code


# -------------------------------------------------------------- structs ---
# C enums are `int` on every ABI this library targets (x86-64/aarch64 SysV).
_c_enum = ctypes.c_int


class sw_prefill_params(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dtype", _c_enum),
        ("num_qo_heads", ctypes.c_int32),
        ("num_kv_heads", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("sm_scale", ctypes.c_float),
        ("backend", _c_enum),
        ("device", ctypes.c_int32),
        ("num_threads", ctypes.c_int32),
    ]


class sw_prefill_tensors(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.POINTER(ctypes.c_float)),
        ("q_rows", ctypes.c_int64),
        ("kv_rows", ctypes.c_int64),
        ("q_row_stride", ctypes.c_int64),
        ("k_row_stride", ctypes.c_int64),
        ("v_row_stride", ctypes.c_int64),
        ("o_row_stride", ctypes.c_int64),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        # paged K/V (sw_prefill_plan_create_paged); 0 = the layout's default
        ("k_head_stride", ctypes.c_int64),
        ("v_head_stride", ctypes.c_int64),
        ("k_page_stride", ctypes.c_int64),
        ("v_page_stride", ctypes.c_int64),
    ]


_PLAN_P = ctypes.c_void_p  # sw_prefill_plan * (opaque)
_I32_P = ctypes.POINTER(ctypes.c_int32)

# (name, restype, argtypes)
_PROTOTYPES = [
    ("sw_status_str", ctypes.c_char_p, [_c_enum]),
    ("sw_last_error", ctypes.c_char_p, []),
    ("sw_version_string", ctypes.c_char_p, []),
    ("sw_dtype_size", ctypes.c_size_t, [_c_enum]),
    ("sw_backend_name", ctypes.c_char_p, [_c_enum]),
    ("sw_cuda_device_count", ctypes.c_int32, []),
    ("sw_prefill_params_init", None, [ctypes.POINTER(sw_prefill_params)]),
    ("sw_prefill_plan_create", _c_enum,
     [ctypes.POINTER(sw_prefill_params), ctypes.c_int32, _I32_P, _I32_P,
      ctypes.POINTER(_PLAN_P)]),
    ("sw_prefill_plan_destroy", None, [_PLAN_P]),
    ("sw_prefill_plan_workspace_size", ctypes.c_size_t, [_PLAN_P]),
    ("sw_prefill_plan_backend", _c_enum, [_PLAN_P]),
    ("sw_prefill_plan_total_q", ctypes.c_int64, [_PLAN_P]),
    ("sw_prefill_plan_total_kv", ctypes.c_int64, [_PLAN_P]),
    ("sw_prefill_plan_flops", ctypes.c_double, [_PLAN_P]),
    ("sw_prefill_tensors_init", None, [ctypes.POINTER(sw_prefill_tensors)]),
    ("sw_prefill_run", _c_enum,
     [_PLAN_P, ctypes.POINTER(sw_prefill_tensors), ctypes.c_void_p]),
    ("sw_prefill_host", _c_enum,
     [ctypes.POINTER(sw_prefill_params), ctypes.c_int32, _I32_P, _I32_P,
      ctypes.POINTER(sw_prefill_tensors)]),
    ("sw_prefill_cpu_isa", ctypes.c_char_p, []),
]
# Newer calls: a library built before them still loads; has() tells.
_OPTIONAL = {"sw_prefill_cpu_isa"}

_lib = None
_lib_path = None
_lib_lock = threading.Lock()


def _candidates():
    """Library lookup order: $SPILLWAY_LIB, the copy inside this package (put
    there by `pip install .`), the CMake build tree next to this package
    (../../build/libspillway.so), the installed tree (../../lib/), then the
    system search (ctypes.util.find_library)."""
    env = os.environ.get("SPILLWAY_LIB")
    if env:
        # An explicit path is final: silently loading some other copy would
        # hide a typo.
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", ".."))
    out = [os.path.join(here, "libspillway.so"),
           os.path.join(root, "build", "libspillway.so"),
           os.path.join(root, "lib", "libspillway.so")]
    found = ctypes.util.find_library("spillway")
    if found:
        out.append(found)
    return out


def lib():
    """The loaded CDLL (loaded on first use, so `import spillway` never fails
    for a missing library; the first call that needs it raises instead)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            explicit = os.environ.get("SPILLWAY_LIB")
            if not explicit and os.path.sep in path and not os.path.exists(path):
                tried.append(f"{path} (absent)")
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            for name, res, args in _PROTOTYPES:
                try:
                    fn = getattr(handle, name)
                except AttributeError:
                    if name in _OPTIONAL:
                        continue
                    raise SpillwayError(
                        "SW_STATUS_NOT_FOUND",
                        f"{path} does not export {name}: a library older than this binding?",
                        SW_STATUS_NOT_FOUND)
                fn.restype = res
                fn.argtypes = args
            _lib_path = path
            _lib = handle
            return _lib
        raise SpillwayError(
            "SW_STATUS_NOT_FOUND",
            "cannot load libspillway; set SPILLWAY_LIB to its full path or build it "
            "(cmake -S . -B build && cmake --build build). Tried: " + "; ".join(tried),
            SW_STATUS_NOT_FOUND)


def has(name):
    """Whether the loaded library exports `name` (for the optional calls)."""
    try:
        getattr(lib(), name)
        return True
    except AttributeError:
        return False


def lib_path():
    """Path of the loaded library (loads it if needed)."""
    lib()
    return _lib_path


def status_name(code):
    if _lib is not None:
        s = _lib.sw_status_str(code)
        if s:
            return s.decode("utf-8", "replace")
    return _STATUS_NAMES.get(code, f"sw_status({code})")


def check(code, context=""):
    """Raise SpillwayError for a non-OK status, with sw_last_error()'s detail."""
    if code == SW_OK:
        return
    detail = lib().sw_last_error()
    detail = detail.decode("utf-8", "replace") if detail else ""
    if context:
        detail = f"{detail} [{context}]" if detail else context
    raise SpillwayError(status_name(code), detail, code)


def fail(code, detail):
    """Raise a SpillwayError found by the binding (what the C side cannot see)."""
    raise SpillwayError(_STATUS_NAMES.get(code, str(code)), detail, code)
