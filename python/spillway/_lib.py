"""ctypes loading of libspillway and mirrors of the public structs of spillway.h.

Everything here is a one-to-one image of include/spillway.h (with
spillway_store.h and spillway_swap.h): enum values,
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
        # the workspace allocation's name: a plan run again on it skips its upload
        ("workspace_tag", ctypes.c_uint64),
    ]


SW_KV_NHD = 0  # [page][token][kv head][head_dim]
SW_KV_HND = 1  # [page][kv head][token][head_dim]


class sw_paged_kv(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("page_size", ctypes.c_int32),
        ("layout", _c_enum),
        ("num_pages", ctypes.c_int32),
        ("page_indptr", ctypes.POINTER(ctypes.c_int32)),
        ("page_indices", ctypes.POINTER(ctypes.c_int32)),
        ("last_page_len", ctypes.POINTER(ctypes.c_int32)),
        ("block_table", ctypes.POINTER(ctypes.c_int32)),
        ("block_table_stride", ctypes.c_int32),
        ("seq_lens", ctypes.POINTER(ctypes.c_int32)),
    ]


# ------------------------------------------- spillway_store.h structs --
SW_STORE_KIND_K = 0
SW_STORE_KIND_V = 1
SW_STORE_DURABILITY_PROCESS = 0
SW_STORE_DURABILITY_SYNC = 1
SW_STORE_FULL_EVICT_LRU = 0
SW_STORE_FULL_REFUSE = 1
SW_STORE_IO_AUTO = 0
SW_STORE_IO_URING = 1
SW_STORE_IO_PREAD = 2

_u8, _u16, _u32, _u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64
_i32, _i64 = ctypes.c_int32, ctypes.c_int64


class sw_store_config(ctypes.Structure):
    _fields_ = [
        ("struct_size", _u32),
        ("dir", ctypes.c_char_p),
        ("capacity_bytes", _u64),
        ("stripe_bytes", _u32),
        ("run_blocks", _u32),
        ("queue_depth", _u32),
        ("host_tier_bytes", _u64),
        ("io_buffer_bytes", _u64),
        ("durability", _c_enum),
        ("full_policy", _c_enum),
        ("create", _i32),
        ("remote", ctypes.c_void_p),  # const struct sw_remote_config *: not mirrored
        ("remote_queue_entries", _u32),
        ("remote_queue_wait_ms", _i32),
        ("remote_close_wait_ms", _i32),
        ("remote_write_back", _i32),
        ("zero_fill", _i32),
        ("read_only", _i32),
        ("io_backend", _c_enum),
        ("buffered_io", _i32),
        ("lock_wait_ms", _i32),
        ("read_inflight_bytes", _u64),
    ]


class sw_store_key(ctypes.Structure):
    _fields_ = [
        ("ns", _u64),
        ("layer", _u32),
        ("block", _u32),
        ("kv_head", _u16),
        ("kind", _u8),
        ("reserved", _u8),
    ]


def _u64s(*names):
    return [(n, _u64) for n in names]


class sw_store_stats(ctypes.Structure):
    _fields_ = ([("struct_size", _u32), ("io_backend", _c_enum), ("direct_io", _i32),
                 ("failed", _i32)]
                + _u64s("stripe_bytes", "extent_bytes", "run_blocks", "capacity_bytes",
                        "used_bytes", "payload_bytes", "extents_total", "extents_used",
                        "file_bytes", "host_capacity_bytes", "host_used_bytes", "host_entries",
                        "writes", "deletes", "evictions", "host_evictions", "host_hits",
                        "host_misses", "file_hits", "not_found", "bytes_written",
                        "host_bytes_read", "file_bytes_read", "read_requests", "io_errors",
                        "corruptions", "journal_records", "journal_dropped", "generation",
                        "runs_total", "runs_used", "run_header_bytes", "store_id",
                        "queue_depth", "io_buffer_bytes", "read_ios", "remote_enabled",
                        "remote_gets", "remote_hits", "remote_not_found",
                        "remote_corruptions", "remote_errors", "remote_bytes_read",
                        "remote_write_backs", "remote_puts_queued", "remote_puts",
                        "remote_put_errors", "remote_put_drops", "remote_put_replaced",
                        "remote_queue_len", "remote_queue_entries", "remote_queue_wait_us",
                        "remote_reconnects", "remote_timeouts", "remote_connect_failures",
                        "remote_get_p99_us", "remote_put_p99_us", "read_only",
                        "journal_damaged", "keys_unprovable", "journal_recovered",
                        "extents_discarded", "headers_bad", "header_pages_read",
                        "host_leased", "host_lease_unmaps"))


class sw_store_verify_result(ctypes.Structure):
    _fields_ = ([("struct_size", _u32), ("reserved", _u32)]
                + _u64s("extents_checked", "extents_ok", "extents_corrupt", "extents_io_error",
                        "host_checked", "host_corrupt", "bytes_read", "read_requests",
                        "journal_dropped", "journal_damaged", "keys_unprovable",
                        "journal_missing", "extents_torn", "headers_bad", "voids_pending",
                        "in_flight"))


# -------------------------------------------- spillway_swap.h structs --
SW_SWAP_KV_BF16 = 0
SW_SWAP_KV_FP8_E4M3 = 1
SW_SWAP_POLICY_SCORE = 0
SW_SWAP_POLICY_LRU = 1
SW_SWAP_POOL_HOST = 0
SW_SWAP_POOL_DEVICE = 1


class sw_swap_model(ctypes.Structure):
    _fields_ = [
        ("struct_size", _u32),
        ("num_layers", _i32),
        ("num_kv_heads", _i32),
        ("num_qo_heads", _i32),
        ("head_dim", _i32),
        ("block_size", _i32),
    ]


class sw_swap_config(ctypes.Structure):
    _fields_ = [
        ("struct_size", _u32),
        ("resident_blocks", _i32),
        ("tile_blocks", _i32),
        ("predictor_rank", _i32),
        ("projection_seed", _u64),
        ("prefetch_depth", _i32),
        ("policy", _c_enum),
        ("pool", _c_enum),
        ("device", _i32),
        ("kernel_timing", _i32),
        ("thread_spin_us", _i32),  # -1: the library decides
        ("persist_manifests", _i32),  # 1: blocks' manifests for sw_swap_seq_attach
    ]


class sw_swap_block(ctypes.Structure):
    _fields_ = [
        ("struct_size", _u32),
        ("dtype", _c_enum),
        ("valid_tokens", _i32),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("k_bytes", ctypes.c_size_t),
        ("v_bytes", ctypes.c_size_t),
        ("k_scale", ctypes.c_float),
        ("v_scale", ctypes.c_float),
        ("layout", _c_enum),
        ("token_stride", _i64),
        ("head_stride", _i64),
        ("on_device", _i32),
    ]


class sw_swap_attend_params(ctypes.Structure):
    _fields_ = [
        ("struct_size", _u32),
        ("layer", _i32),
        ("batch", _i32),
        ("seq_ids", ctypes.POINTER(_u64)),
        ("q_indptr", ctypes.POINTER(_i32)),
        ("q", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.POINTER(ctypes.c_float)),
        ("sm_scale", ctypes.c_float),
        ("causal", _i32),
        ("sparse_top_k", _i32),
        ("sparse_recent_blocks", _i32),
        ("sparse_check", _i32),
    ]


class sw_swap_attend_result(ctypes.Structure):
    _fields_ = [
        ("struct_size", _u32),
        ("reserved", _u32),
        ("blocks_total", _i64),
        ("blocks_attended", _i64),
        ("hits", _i64),
        ("misses", _i64),
        ("tiles", _i64),
        ("sparse_rel_l2", ctypes.c_double),
    ]


class sw_swap_pool_view(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", _i32), ("num_slots", _i32),
                ("reserved", _i32), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("page_stride", ctypes.c_int64), ("head_stride", ctypes.c_int64),
                ("token_stride", ctypes.c_int64)]


class sw_swap_stats(ctypes.Structure):
    _fields_ = ([("struct_size", _u32), ("policy", _c_enum), ("resident_blocks", _i32),
                 ("tile_blocks", _i32), ("predictor_rank", _i32), ("prefetch", _i32),
                 ("failed", _i32), ("reserved", _i32)]
                + _u64s("sequences", "resident_used", "offloads", "offload_bytes", "attends",
                        "tiles", "hits", "misses", "evictions", "invalidations", "read_calls",
                        "stripes_read", "bytes_read", "host_bytes_read", "file_bytes_read",
                        "prefetched_tiles")
                + [("read_wait_seconds", ctypes.c_double), ("compute_seconds", ctypes.c_double),
                   ("kernel_kv_bytes", _u64), ("kernel_seconds", ctypes.c_double),
                   ("plan_seconds", ctypes.c_double), ("submit_seconds", ctypes.c_double),
                   ("score_seconds", ctypes.c_double), ("finish_seconds", ctypes.c_double)]
                + _u64s("resident_attends", "offload_resident", "kept_visits", "ahead_blocks",
                       "ahead_used"))


def struct_dict(st, skip=("struct_size", "reserved")):
    """A ctypes mirror as a plain dict of its fields (ints and floats)."""
    return {name: getattr(st, name) for name, _ in st._fields_ if name not in skip}


_PLAN_P = ctypes.c_void_p  # sw_prefill_plan * (opaque)
_HANDLE_P = ctypes.c_void_p  # sw_store *, sw_swap * (opaque)
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
    ("sw_paged_kv_init", None, [ctypes.POINTER(sw_paged_kv)]),
    ("sw_prefill_plan_create_paged", _c_enum,
     [ctypes.POINTER(sw_prefill_params), ctypes.c_int32, _I32_P, ctypes.POINTER(sw_paged_kv),
      ctypes.POINTER(_PLAN_P)]),
    # spillway_store.h
    ("sw_store_config_init", None, [ctypes.POINTER(sw_store_config)]),
    ("sw_store_open", _c_enum, [ctypes.POINTER(sw_store_config), ctypes.POINTER(_HANDLE_P)]),
    ("sw_store_close", _c_enum, [_HANDLE_P]),
    ("sw_store_write", _c_enum,
     [_HANDLE_P, ctypes.POINTER(sw_store_key), ctypes.c_void_p, ctypes.c_size_t,
      ctypes.POINTER(_u64)]),
    ("sw_store_read", _c_enum,
     [_HANDLE_P, ctypes.c_size_t, ctypes.POINTER(sw_store_key),
      ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
      ctypes.POINTER(_u64), ctypes.POINTER(_c_enum)]),
    ("sw_store_delete", _c_enum, [_HANDLE_P, ctypes.POINTER(sw_store_key)]),
    ("sw_store_delete_batch", _c_enum,
     [_HANDLE_P, ctypes.c_size_t, ctypes.POINTER(sw_store_key), ctypes.POINTER(ctypes.c_uint8),
      ctypes.POINTER(ctypes.c_size_t)]),
    ("sw_store_get_stats", _c_enum, [_HANDLE_P, ctypes.POINTER(sw_store_stats)]),
    ("sw_store_verify", _c_enum,
     [_HANDLE_P, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(sw_store_verify_result)]),
    ("sw_store_io_backend_name", ctypes.c_char_p, [_c_enum]),
    # spillway_swap.h
    ("sw_swap_config_init", None, [ctypes.POINTER(sw_swap_config)]),
    ("sw_swap_model_init", None, [ctypes.POINTER(sw_swap_model)]),
    ("sw_swap_create", _c_enum,
     [ctypes.POINTER(sw_swap_model), ctypes.POINTER(sw_swap_config), _HANDLE_P,
      ctypes.POINTER(_HANDLE_P)]),
    ("sw_swap_destroy", None, [_HANDLE_P]),
    ("sw_swap_seq_add", _c_enum, [_HANDLE_P, _u64, _u64, _u32, _u32]),
    ("sw_swap_seq_remove", _c_enum, [_HANDLE_P, _u64, _i32]),
    ("sw_swap_seq_attach", _c_enum, [_HANDLE_P, _u64, _u64, _u32, _u32]),
    ("sw_swap_seq_length", _c_enum,
     [_HANDLE_P, _u64, _i32, ctypes.POINTER(_i64), ctypes.POINTER(_i32)]),
    ("sw_swap_block_init", None, [ctypes.POINTER(sw_swap_block)]),
    ("sw_swap_offload", _c_enum, [_HANDLE_P, _u64, _i32, _i32, ctypes.POINTER(sw_swap_block)]),
    ("sw_swap_offload_batch", _c_enum,
     [_HANDLE_P, _i32, ctypes.POINTER(_u64), ctypes.POINTER(_i32), ctypes.POINTER(_i32),
      ctypes.POINTER(ctypes.POINTER(sw_swap_block)), ctypes.c_void_p, ctypes.POINTER(_i32)]),
    ("sw_swap_attend_params_init", None, [ctypes.POINTER(sw_swap_attend_params)]),
    ("sw_swap_attend", _c_enum,
     [_HANDLE_P, ctypes.POINTER(sw_swap_attend_params), ctypes.POINTER(sw_swap_attend_result),
      ctypes.c_void_p]),
    ("sw_swap_score_blocks", _c_enum,
     [_HANDLE_P, _u64, _i32, ctypes.c_void_p, _i32, ctypes.POINTER(ctypes.c_float), _i32,
      ctypes.POINTER(_i32)]),
    ("sw_swap_get_stats", _c_enum, [_HANDLE_P, ctypes.POINTER(sw_swap_stats)]),
    ("sw_swap_get_pool_view", _c_enum,
     [_HANDLE_P, ctypes.c_void_p, ctypes.POINTER(sw_swap_pool_view)]),
    ("sw_swap_graph_create", _c_enum,
     [_HANDLE_P, _i32, _i32, ctypes.POINTER(_u64), _i32, _i32, ctypes.POINTER(_HANDLE_P)]),
    ("sw_swap_graph_prepare", _c_enum, [_HANDLE_P, ctypes.c_void_p]),
    ("sw_swap_graph_attend", _c_enum,
     [_HANDLE_P, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, _i32, ctypes.c_float,
      ctypes.c_void_p]),
    ("sw_swap_graph_destroy", None, [_HANDLE_P]),
    ("sw_swap_resident_slots", _c_enum,
     [_HANDLE_P, _u64, _i32, ctypes.POINTER(_i32), _i32, ctypes.POINTER(_i32)]),
    ("sw_swap_reset_stats", None, [_HANDLE_P]),
    ("sw_swap_policy_name", ctypes.c_char_p, [_c_enum]),
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


_INIT_SCRATCH = 4096
_init_images = {}


def new_struct(cls, init):
    """A fresh `cls` filled by the library's `init` call (e.g.
    "sw_swap_config_init"), with struct_size = sizeof(cls).

    The init call writes the library's sizeof, which is larger than the
    mirror when the header has appended fields this binding does not know:
    it writes into a 4 KiB scratch buffer and the mirror takes its prefix,
    an older struct in the library's eyes (struct_size versioning). The
    image is made once per struct; later calls copy it."""
    img = _init_images.get(cls)
    if img is None:
        buf = ctypes.create_string_buffer(_INIT_SCRATCH)
        getattr(lib(), init)(ctypes.cast(buf, ctypes.POINTER(cls)))
        st = cls.from_buffer_copy(buf.raw[:ctypes.sizeof(cls)])
        st.struct_size = ctypes.sizeof(cls)
        img = _init_images[cls] = bytes(st)
    return cls.from_buffer_copy(img)


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
