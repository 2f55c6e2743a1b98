"""Ragged (varlen) prefill attention over libspillway: numpy arrays, torch CPU
tensors and torch CUDA tensors.

Where the work happens:
  - torch CUDA tensors: the CUDA backend, enqueued on
    torch.cuda.current_stream(device); nothing waits for it. The workspace is
    one uint8 tensor per device, allocated on first use and grown only when a
    plan needs more (cached in this module).
  - numpy arrays and torch CPU tensors: the CPU backend (SW_BACKEND_CPU, never
    AUTO: AUTO would pick CUDA on a GPU machine and hand device kernels host
    pointers), run to completion on the calling thread plus the library's
    workers. ctypes releases the GIL for the call.

Plans (validation + work list) are cached in a small LRU keyed by the indptr
bytes, shapes, dtype, causal flag, scale, backend and device, so the layers of
one forward pass plan once.
"""

import collections
import itertools
import math
import sys
import threading

import ctypes

import numpy as np

from . import _lib
from ._lib import SpillwayError  # noqa: F401  (re-exported)

_PLAN_CACHE_SIZE = 64
# Appended to library errors: the C names of the Python arguments.
_HINT = ("qo_indptr = cu_seqlens_q, kv_indptr = cu_seqlens_k, q_rows = q.shape[0], "
         "kv_rows = k.shape[0]")
_WORKSPACE_ROUND = 1 << 20  # grow the workspace in whole MiB

_NP_DTYPES = {
    np.dtype(np.float32): _lib.SW_DTYPE_F32,
    np.dtype(np.float16): _lib.SW_DTYPE_F16,
}
_DTYPE_NAMES = {
    _lib.SW_DTYPE_F32: "float32",
    _lib.SW_DTYPE_F16: "float16",
    _lib.SW_DTYPE_BF16: "bfloat16",
}
_DTYPE_BY_NAME = {
    "f32": _lib.SW_DTYPE_F32, "float32": _lib.SW_DTYPE_F32, "fp32": _lib.SW_DTYPE_F32,
    "f16": _lib.SW_DTYPE_F16, "float16": _lib.SW_DTYPE_F16, "fp16": _lib.SW_DTYPE_F16,
    "half": _lib.SW_DTYPE_F16,
    "bf16": _lib.SW_DTYPE_BF16, "bfloat16": _lib.SW_DTYPE_BF16,
}


def _torch_mod():
    """torch if the caller has imported it; we never import it ourselves."""
    return sys.modules.get("torch")


def _is_torch(x):
    t = _torch_mod()
    return t is not None and isinstance(x, t.Tensor)


# ------------------------------------------------------------------ plans --

def _params(dtype, num_qo_heads, num_kv_heads, head_dim, causal, sm_scale, backend, device,
            num_threads):
    """A filled sw_prefill_params."""
    p = _lib.new_struct(_lib.sw_prefill_params, "sw_prefill_params_init")
    p.dtype = dtype
    p.num_qo_heads = num_qo_heads
    p.num_kv_heads = num_kv_heads
    p.head_dim = head_dim
    p.causal = 1 if causal else 0
    p.sm_scale = sm_scale
    p.backend = backend
    p.device = device
    p.num_threads = num_threads
    return p


class PrefillPlan:
    """A libspillway prefill plan (sw_prefill_plan). Immutable; reusable for
    every layer with the same lengths and shapes. Destroyed when garbage
    collected (after the last CUDA run that used it has finished)."""

    def __init__(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim,
                 dtype, causal, sm_scale, backend, device, num_threads):
        L = _lib.lib()
        self._handle = None
        p = _params(dtype, num_qo_heads, num_kv_heads, head_dim, causal, sm_scale, backend,
                    device, num_threads)
        self.params = p
        self.batch = len(qo_indptr) - 1
        self.qo_indptr = qo_indptr
        self.kv_indptr = kv_indptr
        h = _lib._PLAN_P()
        st = L.sw_prefill_plan_create(
            ctypes.byref(p), self.batch,
            qo_indptr.ctypes.data_as(_lib._I32_P),
            kv_indptr.ctypes.data_as(_lib._I32_P),
            ctypes.byref(h))
        _lib.check(st, _HINT)
        self._handle = h
        self._lib = L
        self.backend_code = L.sw_prefill_plan_backend(h)
        self.workspace_size = int(L.sw_prefill_plan_workspace_size(h))
        self.total_q = int(L.sw_prefill_plan_total_q(h))
        self.total_kv = int(L.sw_prefill_plan_total_kv(h))
        self.flops = float(L.sw_prefill_plan_flops(h))
        self._maxlens = None
        self._t = None  # the run's sw_prefill_tensors, reused under the workspace lock
        self._tref = None  # ... and ctypes.byref of it

    def _max_lens(self):
        """(longest query, longest key length), computed once."""
        if self._maxlens is None:
            qo, kv = self.qo_indptr, self.kv_indptr
            self._maxlens = (int(np.max(np.diff(qo))) if qo.shape[0] > 1 else 0,
                             int(np.max(np.diff(kv))) if kv.shape[0] > 1 else 0)
        return self._maxlens

    @property
    def backend(self):
        s = self._lib.sw_backend_name(self.backend_code)
        return s.decode() if s else str(self.backend_code)

    @property
    def is_cuda(self):
        return self.backend_code not in _lib.CPU_BACKENDS

    def _destroy(self):
        h, self._handle = self._handle, None
        if h is not None and h.value:
            self._lib.sw_prefill_plan_destroy(h)

    def __del__(self):
        try:
            self._destroy()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __repr__(self):
        return (f"PrefillPlan(batch={self.batch}, heads={self.params.num_qo_heads}/"
                f"{self.params.num_kv_heads}, d={self.params.head_dim}, "
                f"dtype={_DTYPE_NAMES.get(self.params.dtype)}, causal={bool(self.params.causal)}, "
                f"backend={self.backend}, workspace={self.workspace_size}, flops={self.flops:.4g})")


_plan_lock = threading.Lock()
_plans = collections.OrderedDict()
_plan_stats = {"hits": 0, "misses": 0}
# The fast path's index into _plans: (cu_seqlens as tuples of ints, the rest
# of the plan key) -> plan, for short cu_seqlens (a tuple of a few ints costs
# a third of numpy's bytes). Filled on the fast path's first hit through the
# bytes key; an entry whose plan was evicted is dropped on sight.
_fast_plans = {}
_FAST_MAX_ENTRIES = 33  # cu_seqlens entries (batch 32) up to which the index is used


def _get_plan(qo, kv, hq, hkv, d, dtype, causal, scale, backend, device, num_threads):
    key = (qo.tobytes(), kv.tobytes(), hq, hkv, d, dtype, bool(causal), float(scale),
           backend, device, num_threads)
    with _plan_lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            _plan_stats["hits"] += 1
            return plan
    plan = PrefillPlan(qo.copy(), kv.copy(), hq, hkv, d, dtype, causal, scale, backend,
                       device, num_threads)
    plan._key = key
    with _plan_lock:
        _plan_stats["misses"] += 1
        other = _plans.get(key)
        if other is not None:  # another thread planned the same problem meanwhile
            _plans.move_to_end(key)
            plan._destroy()
            return other
        _plans[key] = plan
        # an evicted plan is destroyed when its last user lets it go (__del__;
        # a CUDA plan's tables then go back to the library's staging pool
        # without waiting for its runs)
        while len(_plans) > _PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return plan


def _evict(plan):
    """Drop a plan that hit a CUDA error (the library marks it failed), so the
    next call plans afresh instead of failing with SW_STATUS_FAILED forever."""
    with _plan_lock:
        key = getattr(plan, "_key", None)
        if key is not None and _plans.get(key) is plan:
            del _plans[key]


def plan_cache_info():
    """{"size", "capacity", "hits", "misses"} of the plan LRU."""
    with _plan_lock:
        return {"size": len(_plans), "capacity": _PLAN_CACHE_SIZE, **_plan_stats}


def clear_caches():
    """Drop every cached plan and CUDA workspace. Synchronises the devices whose
    workspaces are dropped (so nothing in flight still uses them)."""
    torch = _torch_mod()
    with _plan_lock:
        _plans.clear()
        _fast_plans.clear()
        _plan_stats["hits"] = _plan_stats["misses"] = 0
    with _ws_lock:
        devs = list(_workspaces)
        if torch is not None:
            for dev in devs:
                torch.cuda.synchronize(dev)
        _workspaces.clear()


# -------------------------------------------------------------- workspace --

_ws_tags = itertools.count(1)


class _Workspace:
    __slots__ = ("buf", "ptr", "nbytes", "tag", "last_stream", "last_raw", "recorded", "lock")

    def __init__(self):
        self.buf = None
        self.ptr = None  # buf.data_ptr()
        self.nbytes = 0
        # sw_prefill_tensors.workspace_tag: a new one for each allocation (only
        # sw_prefill_run writes the buffer, so the library may trust it)
        self.tag = 0
        self.last_stream = None  # the torch stream of the last run ...
        self.last_raw = None     # ... and its cudaStream_t
        self.recorded = set()    # raw streams the buffer is recorded on
        self.lock = threading.Lock()


_torch_getters = []  # [raw stream of device i, current device], found once


def _getters(torch):
    if not _torch_getters:
        f = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        g = getattr(torch._C, "_cuda_getDevice", None)
        _torch_getters[:] = [f or (lambda i: torch.cuda.current_stream(i).cuda_stream),
                             g or torch.cuda.current_device]
    return _torch_getters


def _raw_stream(torch, index):
    """The current stream's cudaStream_t on device `index`, without making a
    torch.cuda.Stream object (torch's own kernels launch the same way)."""
    return (_torch_getters or _getters(torch))[0](index)


def _current_device(torch):
    return (_torch_getters or _getters(torch))[1]()


_ws_lock = threading.Lock()
_workspaces = {}  # device index -> _Workspace


def _device_workspace(device_index):
    with _ws_lock:
        ws = _workspaces.get(device_index)
        if ws is None:
            ws = _workspaces[device_index] = _Workspace()
        return ws


def _acquire_workspace(torch, ws, nbytes, device, raw):
    """Called with ws.lock held, for a run on the raw stream `raw` of
    `device`. Orders this run after the previous run that used the workspace
    on another stream, and grows the buffer if needed. Returns (pointer,
    bytes, the torch stream). The same stream as the last run costs no torch
    call."""
    if raw != ws.last_raw:
        stream = torch.cuda.current_stream(device)
        if ws.last_stream is not None:
            ev = torch.cuda.Event()
            ev.record(ws.last_stream)
            stream.wait_event(ev)
        ws.last_stream, ws.last_raw = stream, raw
    if nbytes > ws.nbytes:
        # The old buffer is freed through torch's caching allocator, which
        # knows (record_stream below) every stream that used it.
        size = (nbytes + _WORKSPACE_ROUND - 1) // _WORKSPACE_ROUND * _WORKSPACE_ROUND
        ws.buf = torch.empty(size, dtype=torch.uint8, device=device)
        ws.ptr = ws.buf.data_ptr()
        ws.nbytes = size
        ws.tag = next(_ws_tags)
        ws.recorded = set()
    # The allocator keeps each stream recorded on a block and waits for all
    # of them when the block is freed: once per stream is enough.
    if ws.buf is not None and raw not in ws.recorded:
        ws.buf.record_stream(ws.last_stream)
        ws.recorded.add(raw)
    return ws.ptr, ws.nbytes, ws.last_stream


def _run_cuda(torch, handle, t, dev, ws_bytes, fill=None):
    """sw_prefill_run of plan `handle` on torch's current stream of `dev`,
    with that device's cached workspace (under its lock; `fill(t)`, when
    given, fills the struct there as well, for a struct shared between
    calls). The caller's current device is restored after, in case the
    library switches devices (no switch: no torch call). Returns (status,
    the torch stream)."""
    index = dev.index if dev.index is not None else _current_device(torch)
    prev = _current_device(torch)
    if prev != index:
        torch.cuda.set_device(index)
    try:
        raw = _raw_stream(torch, index)
        ws = _workspaces.get(index) or _device_workspace(index)
        with ws.lock:
            if fill is not None:
                fill(t)
            ptr, nbytes, stream = _acquire_workspace(torch, ws, ws_bytes, dev, raw)
            t.workspace = ptr
            t.workspace_bytes = nbytes
            t.workspace_tag = ws.tag
            return _lib.lib().sw_prefill_run(handle, ctypes.byref(t), raw), stream
    finally:
        if prev != index:
            torch.cuda.set_device(prev)


def workspace_bytes(device=None):
    """Bytes of the cached CUDA workspace of a device (0 when none yet)."""
    if device is None:
        device = 0
    idx = device if isinstance(device, int) else getattr(device, "index", 0) or 0
    with _ws_lock:
        ws = _workspaces.get(idx)
        return ws.nbytes if ws is not None else 0


# ------------------------------------------------------------ input prep --

def _check_max_lens(max_seqlen_q, max_seqlen_k, mq, mk):
    """FlashAttention's max_seqlen_q / max_seqlen_k (None: not given) must
    be at least the longest query and key lengths, mq and mk."""
    if max_seqlen_q is not None and int(max_seqlen_q) < mq:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"max_seqlen_q={int(max_seqlen_q)} < longest query length {mq}")
    if max_seqlen_k is not None and int(max_seqlen_k) < mk:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"max_seqlen_k={int(max_seqlen_k)} < longest key length {mk}")


def _host_indptr(x, name):
    """cu_seqlens -> contiguous int32 numpy (1-D, batch+1). A CUDA tensor is
    copied to the host here, which synchronises with its stream."""
    if _is_torch(x):
        # (integer tensors never require grad: a CPU one converts in place)
        arr = x.numpy() if x.device.type == "cpu" and not x.is_floating_point() else \
            x.detach().to("cpu").numpy()
    else:
        arr = np.asarray(x)
    if arr.ndim != 1 or arr.shape[0] < 1:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"{name} must be 1-D with batch+1 >= 1 entries, got shape {tuple(arr.shape)}")
    if arr.dtype == np.int32:
        return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    if arr.dtype.kind not in "iu":
        _lib.fail(_lib.SW_STATUS_INVALID, f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < -2**31 or int(arr.max()) > 2**31 - 1):
        _lib.fail(_lib.SW_STATUS_INVALID, f"{name} has values outside int32")
    return np.ascontiguousarray(arr, dtype=np.int32)


def _np_dtype_code(dt):
    if dt in _NP_DTYPES:
        return _NP_DTYPES[dt]
    if dt.name == "bfloat16" and dt.itemsize == 2:  # ml_dtypes.bfloat16
        return _lib.SW_DTYPE_BF16
    _lib.fail(_lib.SW_STATUS_UNSUPPORTED,
              f"numpy dtype {dt} is not supported (float16 or float32; numpy has no bfloat16 - "
              "use torch tensors for bf16)")


_TORCH_DTYPES = {}


def _torch_dtype_code(torch, dt):
    m = _TORCH_DTYPES
    if not m:
        m.update({torch.float32: _lib.SW_DTYPE_F32, torch.float16: _lib.SW_DTYPE_F16,
                  torch.bfloat16: _lib.SW_DTYPE_BF16})
    if dt not in m:
        _lib.fail(_lib.SW_STATUS_UNSUPPORTED,
                  f"torch dtype {dt} is not supported (bfloat16, float16, or float32 on the CPU)")
    return m[dt]


def _np_prepare(a):
    """(array, row_stride_elements): a usable layout (head_dim contiguous,
    heads of a row contiguous, row stride >= heads*head_dim) or a copy."""
    n, h, d = a.shape
    it = a.itemsize
    s0, s1, s2 = a.strides
    ok = ((d <= 1 or s2 == it) and (h <= 1 or s1 == d * it)
          and (n <= 1 or (s0 % it == 0 and s0 >= h * d * it)))
    if not ok:
        a = np.ascontiguousarray(a)
        s0 = a.strides[0]
    row = 0 if n <= 1 else s0 // it
    return a, row


def _torch_prepare(t, cuda):
    n, h, d = t.shape
    s0, s1, s2 = t.stride()
    ok = ((d <= 1 or s2 == 1) and (h <= 1 or s1 == d)
          and (n <= 1 or s0 >= h * d))
    # The CUDA kernels want 16-byte aligned rows; a copy is cheaper than an error
    # for the odd view that breaks it.
    if ok and cuda and n > 0 and (t.data_ptr() % 16 != 0 or (n > 1 and s0 % 8 != 0)):
        ok = False
    if not ok:
        t = t.contiguous()
        s0 = t.stride(0)
    row = 0 if n <= 1 else s0
    return t, row


def _check_shapes(q, k, v):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if len(x.shape) != 3:
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"{name} must be 3-D [rows, heads, head_dim], got shape {tuple(x.shape)}")
    if tuple(k.shape) != tuple(v.shape):
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[2] != k.shape[2]:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"q head_dim {q.shape[2]} != k/v head_dim {k.shape[2]}")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")


def _backend_code(backend):
    if backend is None:
        return None
    if isinstance(backend, int):
        return backend
    b = str(backend).lower().replace("-", "_")
    if b not in _lib.BACKENDS:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"unknown backend {backend!r}; one of {sorted(_lib.BACKENDS)}")
    return _lib.BACKENDS[b]


# --------------------------------------------------------------- the op ---

def _scale_of(softmax_scale):
    """The library's sm_scale: 0.0 (its default, 1/sqrt(head_dim)) for None."""
    if softmax_scale is None:
        return 0.0
    scale = float(softmax_scale)
    if scale == 0.0 or not math.isfinite(scale):
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"softmax_scale={softmax_scale} is not supported (must be finite and nonzero)")
    return scale


def _backend_for(backend, cuda, q, torch):
    """(backend code, CUDA ordinal) for tensors on the GPU (cuda) or the host:
    AUTO picks CUDA or CPU; a backend on the other side is refused."""
    b = _backend_code(backend)
    if b is None or b == _lib.SW_BACKEND_AUTO:
        b = _lib.SW_BACKEND_CUDA if cuda else _lib.SW_BACKEND_CPU
    elif cuda and b in _lib.CPU_BACKENDS:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"backend {backend!r} runs on the host but the tensors are on {q.device}")
    elif not cuda and b not in _lib.CPU_BACKENDS:
        _lib.fail(_lib.SW_STATUS_INVALID, f"backend {backend!r} needs CUDA tensors; got host data")
    if not cuda:
        return b, 0
    return b, q.device.index if q.device.index is not None else torch.cuda.current_device()


def _varlen_fast(q, k, v, cq, ck, mq, mk, causal, softmax_scale, return_lse):
    """varlen_attention's common call in few steps: torch tensors, dense
    rows, int32 cu_seqlens on the host, a plan already made, default
    backend. Returns None for anything else (the general path then checks,
    plans and explains). Same checks, same plan cache, same library call."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    T = torch.Tensor
    if type(q) is not T or type(k) is not T or type(v) is not T or type(cq) is not T or \
            type(ck) is not T:
        return None
    dt = q.dtype
    i32 = torch.int32
    if k.dtype is not dt or v.dtype is not dt or cq.dtype is not i32 or ck.dtype is not i32 \
            or cq.is_cuda or ck.is_cuda or cq.dim() != 1 or ck.dim() != 1:
        return None
    dev = q.device
    cuda = q.is_cuda
    if k.device != dev or v.device != dev or (not cuda and dev.type != "cpu"):
        return None
    qs, ks = q.shape, k.shape
    if len(qs) != 3 or len(ks) != 3 or ks != v.shape or qs[2] != ks[2] or \
            not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        return None
    if cuda and (q.data_ptr() | k.data_ptr() | v.data_ptr()) & 15:
        return None
    if softmax_scale is None:
        scale = 0.0
    else:
        scale = float(softmax_scale)
        if scale == 0.0 or not math.isfinite(scale):
            return None
    code = _TORCH_DTYPES.get(dt)
    index = dev.index if cuda else 0
    if code is None or index is None:
        return None
    rest = (qs[1], ks[1], qs[2], code, bool(causal), scale,
            _lib.SW_BACKEND_CUDA if cuda else _lib.SW_BACKEND_CPU, index, 0)
    fkey = None
    if cq.shape[0] <= _FAST_MAX_ENTRIES and ck.shape[0] <= _FAST_MAX_ENTRIES:
        lq = tuple(cq.tolist())
        fkey = (lq, lq if ck is cq else tuple(ck.tolist())) + rest
        with _plan_lock:
            plan = _fast_plans.get(fkey)
            if plan is not None and plan._handle is not None and \
                    _plans.get(plan._key) is plan:
                _plans.move_to_end(plan._key)
                _plan_stats["hits"] += 1
            else:
                plan = None
                _fast_plans.pop(fkey, None)
    else:
        plan = None
    if plan is None:
        qa = cq.numpy()
        ka = qa if ck is cq else ck.numpy()
        key = (qa.tobytes(), ka.tobytes()) + rest
        with _plan_lock:
            plan = _plans.get(key)
            if plan is None or plan._handle is None:
                return None
            _plans.move_to_end(key)
            _plan_stats["hits"] += 1
            if fkey is not None:
                if len(_fast_plans) >= 2 * _PLAN_CACHE_SIZE:
                    _fast_plans.clear()
                _fast_plans[fkey] = plan
    if mq is not None or mk is not None:
        lq, lk = plan._max_lens()
        if (mq is not None and int(mq) < lq) or (mk is not None and int(mk) < lk):
            return None
    out = torch.empty_like(q)  # (q is contiguous: the same strides)
    lse = torch.empty((qs[0], qs[1]), dtype=torch.float32, device=dev) if return_lse else None
    n, nk = qs[0], ks[0]
    ptrs = (q.data_ptr() if n else 0, k.data_ptr() if nk else 0, v.data_ptr() if nk else 0,
            out.data_ptr() if n else 0, lse.data_ptr() if lse is not None and n else 0)
    if not cuda:
        t = _new_tensors()
        _fill_tensors(t, *ptrs, (0, 0, 0, 0), n, nk)
        _lib.check(_lib.lib().sw_prefill_run(plan._handle, ctypes.byref(t), None), _HINT)
        return (out, lse) if return_lse else out
    if _current_device(torch) != index:
        def fill(t):  # every field a run reads
            _fill_tensors(t, *ptrs, (0, 0, 0, 0), n, nk)
        st, _ = _run_cuda(torch, plan._handle, _new_tensors(), dev, plan.workspace_size, fill)
    else:
        # the plan's own struct: its (dense) strides set once; the pointers
        # and this call's row counts under the workspace lock (the library
        # checks the rows against the plan's cu_seqlens: a shorter q or k
        # with the same cu_seqlens is refused, never read past)
        raw = _raw_stream(torch, index)
        ws = _workspaces.get(index) or _device_workspace(index)
        with ws.lock:
            t = plan._t  # made under the lock: two threads' first calls share one
            if t is None:
                t = _new_tensors()
                _fill_tensors(t, 0, 0, 0, 0, 0, (0, 0, 0, 0), n, nk)
                plan._tref = ctypes.byref(t)
                plan._t = t
            t.q, t.k, t.v, t.o = ptrs[0] or None, ptrs[1] or None, ptrs[2] or None, \
                ptrs[3] or None
            t.q_rows, t.kv_rows = n, nk
            t.lse = ctypes.cast(ptrs[4], ctypes.POINTER(ctypes.c_float)) if ptrs[4] else None
            if raw == ws.last_raw and plan.workspace_size <= ws.nbytes and raw in ws.recorded:
                # _acquire_workspace's case with nothing to do (same stream, big enough)
                if t.workspace_tag != ws.tag:  # another allocation since this plan's last run
                    t.workspace, t.workspace_bytes, t.workspace_tag = ws.ptr, ws.nbytes, ws.tag
            else:
                t.workspace, t.workspace_bytes, _ = _acquire_workspace(
                    torch, ws, plan.workspace_size, dev, raw)
                t.workspace_tag = ws.tag
            st = plan._lib.sw_prefill_run(plan._handle, plan._tref, raw)
    if st:
        if st in (_lib.SW_STATUS_CUDA, _lib.SW_STATUS_FAILED):
            _evict(plan)
        _lib.check(st, _HINT)
    return (out, lse) if return_lse else out


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None,
                     max_seqlen_k=None, *, causal=False, softmax_scale=None, return_lse=False,
                     backend=None, num_threads=0):
    """Ragged batched attention over packed varlen tensors.

    Everything after max_seqlen_k is keyword-only: FlashAttention's varlen
    function has dropout_p, softmax_scale, causal in those places, so a
    positional call written for it must fail here rather than mean something
    else. spillway.flash_attn_varlen_func takes FlashAttention's exact
    signature.

    Args:
        q: [total_q, Hq, d]; k, v: [total_k, Hkv, d]. Hkv must divide Hq (GQA:
            query head h reads kv head h // (Hq // Hkv)). d in {64, 128, 256}.
            torch CUDA tensors (bfloat16/float16), torch CPU tensors
            (bfloat16/float16/float32) or numpy arrays (float16/float32; numpy
            has no bfloat16). The last dim must be contiguous and the head
            stride == d; a larger row stride (a view into a bigger buffer) is
            used in place, any other layout is copied to a contiguous one.
        cu_seqlens_q, cu_seqlens_k: int prefix sums [batch+1] starting at 0
            (torch tensor on any device, numpy array or list).
            cu_seqlens_q[-1] must equal total_q and cu_seqlens_k[-1] must
            equal total_k (the library checks both). Plans are built on the
            host, so cu_seqlens on a GPU are copied to the host on EVERY call,
            which SYNCHRONISES with the current stream; pass host (CPU tensor,
            numpy, list) copies to keep the call asynchronous. (The copy is
            not cached: a GPU tensor can be rewritten by kernels that torch
            does not track.)
        max_seqlen_q, max_seqlen_k: accepted for FlashAttention compatibility;
            the plan computes the maxima itself. If given they are checked to
            be >= the real maxima.
        causal: keyword-only. Bottom-right aligned when q_len < kv_len:
            query i of a request sees keys j <= i + (kv_len - q_len). A query
            row that sees no key gets zeros (and LSE = -inf).
        softmax_scale: keyword-only, default 1/sqrt(d).
        return_lse: keyword-only; also return the log-sum-exp (natural log)
            per row and head.
        backend: keyword-only, "cpu", "cpu_ref" (the fp64 oracle) for host
            data; "cuda", "cuda_portable", "cuda_hopper" for CUDA tensors. Default: "cuda" for
            CUDA tensors, "cpu" for host data (never AUTO). "flashinfer" and
            "flashinfer-fa3" (opponents, FlashInfer's FA2 and sm90 FA3 paths,
            for measurement only: docs/opponents.md) run only in a library
            built with them and with SPILLWAY_OPPONENT=flashinfer set.
        num_threads: keyword-only, CPU backends: 0 = all cores.

    Returns:
        out: [total_q, Hq, d], same dtype and device (or numpy) as q.
        (out, lse) if return_lse: lse is float32 of shape [total_q, Hq]
            (row-major by token, like FlashInfer). NOTE: FlashAttention's
            varlen returns its LSE as [Hq, total_q]; use lse.T (torch:
            lse.t()) to get that layout.

    CUDA tensors run on torch.cuda.current_stream(q.device) and the call
    returns without synchronising; the output is valid in stream order.

    Raises:
        SpillwayError(status, detail): status is the library's status name
        (sw_status_str), detail its sw_last_error() sentence, or a sentence of
        the binding for what only Python can see (shapes, devices, dtypes).
    """
    if backend is None and not num_threads:
        r = _varlen_fast(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         causal, softmax_scale, return_lse)
        if r is not None:
            return r
    torch = None
    if _is_torch(q) or _is_torch(k) or _is_torch(v):
        torch = _torch_mod()
        if not (_is_torch(q) and _is_torch(k) and _is_torch(v)):
            _lib.fail(_lib.SW_STATUS_INVALID,
                      "q, k, v must all be torch tensors or all numpy arrays")
        if not (q.device == k.device == v.device):
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
        cuda = q.device.type == "cuda"
        if not cuda and q.device.type != "cpu":
            _lib.fail(_lib.SW_STATUS_UNSUPPORTED, f"device {q.device} is not supported")
        dtype = _torch_dtype_code(torch, q.dtype)
    else:
        q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
        cuda = False
        dtype = _np_dtype_code(q.dtype)
    _check_shapes(q, k, v)

    hq, d = int(q.shape[1]), int(q.shape[2])
    hkv = int(k.shape[1])

    qo = _host_indptr(cu_seqlens_q, "cu_seqlens_q")
    kv = _host_indptr(cu_seqlens_k, "cu_seqlens_k")
    if qo.shape[0] != kv.shape[0]:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"cu_seqlens_q has {qo.shape[0]} entries but cu_seqlens_k has {kv.shape[0]} "
                  "(both must be batch+1)")

    scale = _scale_of(softmax_scale)
    b, device = _backend_for(backend, cuda, q, torch)

    # The library validates the indptr contents (start at 0, non-decreasing),
    # heads, head_dim and dtype-for-backend.
    plan = _get_plan(qo, kv, hq, hkv, d, dtype, causal, scale, b, device,
                     int(num_threads) if not cuda else 0)

    if max_seqlen_q is not None or max_seqlen_k is not None:
        _check_max_lens(max_seqlen_q, max_seqlen_k, *plan._max_lens())

    if torch is not None:
        return _run_torch(torch, plan, q, k, v, cuda, return_lse)
    return _run_numpy(plan, q, k, v, return_lse)


def _fill_tensors(t, qp, kp, vp, op, lsep, rows, q_rows, kv_rows):
    # A side with no rows may pass NULL (the library reads nothing there).
    t.q = qp or None
    t.k = kp or None
    t.v = vp or None
    t.o = op or None
    t.q_rows = q_rows
    t.kv_rows = kv_rows
    t.lse = ctypes.cast(lsep, ctypes.POINTER(ctypes.c_float)) if lsep else None
    t.q_row_stride, t.k_row_stride, t.v_row_stride, t.o_row_stride = rows


def _new_tensors():
    return _lib.new_struct(_lib.sw_prefill_tensors, "sw_prefill_tensors_init")


def _run_numpy(plan, q, k, v, return_lse):
    total_q, hq, d = q.shape
    q, qr = _np_prepare(q)
    k, kr = _np_prepare(k)
    v, vr = _np_prepare(v)
    out = np.empty((total_q, hq, d), dtype=q.dtype)
    lse = np.empty((total_q, hq), dtype=np.float32) if return_lse else None
    t = _new_tensors()
    _fill_tensors(t, q.ctypes.data if q.size else 0, k.ctypes.data if k.size else 0,
                  v.ctypes.data if v.size else 0, out.ctypes.data if out.size else 0,
                  lse.ctypes.data if lse is not None and lse.size else 0, (qr, kr, vr, 0),
                  q.shape[0], k.shape[0])
    _lib.check(_lib.lib().sw_prefill_run(plan._handle, ctypes.byref(t), None), _HINT)
    return (out, lse) if return_lse else out


def _run_torch(torch, plan, q, k, v, cuda, return_lse):
    total_q, hq, d = (int(s) for s in q.shape)
    q, qr = _torch_prepare(q, cuda)
    k, kr = _torch_prepare(k, cuda)
    v, vr = _torch_prepare(v, cuda)
    out = torch.empty((total_q, hq, d), dtype=q.dtype, device=q.device)
    lse = (torch.empty((total_q, hq), dtype=torch.float32, device=q.device)
           if return_lse else None)
    t = _new_tensors()
    _fill_tensors(t, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                  lse.data_ptr() if lse is not None else 0, (qr, kr, vr, 0),
                  q.shape[0], k.shape[0])
    L = _lib.lib()
    if not cuda:
        _lib.check(L.sw_prefill_run(plan._handle, ctypes.byref(t), None), _HINT)
        return (out, lse) if return_lse else out

    st, _ = _run_cuda(torch, plan._handle, t, q.device, plan.workspace_size)
    if st in (_lib.SW_STATUS_CUDA, _lib.SW_STATUS_FAILED):
        _evict(plan)
    _lib.check(st, _HINT)
    return (out, lse) if return_lse else out


def get_plan(cu_seqlens_q, cu_seqlens_k, num_qo_heads, num_kv_heads, head_dim,
             dtype="bfloat16", causal=False, softmax_scale=None, device="cpu",
             backend=None, num_threads=0):
    """The (cached) PrefillPlan varlen_attention would use for these
    arguments: .backend, .workspace_size, .flops (the library's FLOP count),
    .total_q, .total_kv. device: "cpu", "cuda", "cuda:N", an int or a
    torch.device."""
    if isinstance(dtype, str):
        code = _DTYPE_BY_NAME.get(dtype.lower())
        if code is None:
            _lib.fail(_lib.SW_STATUS_UNSUPPORTED, f"dtype {dtype!r}")
    else:
        torch = _torch_mod()
        if torch is not None and isinstance(dtype, torch.dtype):
            code = _torch_dtype_code(torch, dtype)
        else:
            code = _np_dtype_code(np.dtype(dtype))
    dev = str(device) if not isinstance(device, int) else f"cuda:{device}"
    cuda = dev.startswith("cuda")
    index = int(dev.split(":")[1]) if cuda and ":" in dev else 0
    b = _backend_code(backend)
    if b is None or b == _lib.SW_BACKEND_AUTO:
        b = _lib.SW_BACKEND_CUDA if cuda else _lib.SW_BACKEND_CPU
    qo = _host_indptr(cu_seqlens_q, "cu_seqlens_q")
    kv = _host_indptr(cu_seqlens_k, "cu_seqlens_k")
    if qo.shape[0] != kv.shape[0]:
        _lib.fail(_lib.SW_STATUS_INVALID, "cu_seqlens_q and cu_seqlens_k differ in length")
    scale = 0.0 if softmax_scale is None else float(softmax_scale)
    return _get_plan(qo, kv, int(num_qo_heads), int(num_kv_heads), int(head_dim), code,
                     causal, scale, b, index, int(num_threads) if not cuda else 0)


def prefill_flops(cu_seqlens_q, cu_seqlens_k, num_qo_heads, head_dim, causal):
    """FLOPs by the reporting convention (same formula as sw_prefill_plan_flops):
    sum over requests of 4 * q_len * kv_eff * head_dim * num_qo_heads, where
    kv_eff is the mean number of keys a query row sees (bottom-right causal)."""
    qo = np.asarray(cu_seqlens_q, dtype=np.int64)
    kv = np.asarray(cu_seqlens_k, dtype=np.int64)
    total = 0.0
    for b in range(len(qo) - 1):
        ql = int(qo[b + 1] - qo[b])
        kl = int(kv[b + 1] - kv[b])
        if ql <= 0 or kl <= 0:
            continue
        if causal:
            # visible keys of row i: clamp(i + 1 + kl - ql, 0, kl)
            off = kl - ql
            i = np.arange(ql, dtype=np.int64)
            vis = int(np.clip(i + 1 + off, 0, kl).sum())
        else:
            vis = ql * kl
        total += 4.0 * vis * head_dim * num_qo_heads
    return total


# ------------------------------------------------------------- paged K/V --

def _strides_of(x):
    """Element strides of a torch tensor or numpy array (a numpy stride that
    is not a whole number of elements, as in a field of a record array, is
    refused: the library counts strides in elements)."""
    if _is_torch(x):
        return tuple(int(s) for s in x.stride())
    if any(int(s) % x.itemsize for s in x.strides):
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"an array with byte strides {tuple(x.strides)} that are not whole "
                  f"{x.itemsize}-byte elements; pass a copy (np.ascontiguousarray)")
    return tuple(int(s) // x.itemsize for s in x.strides)


def _ptr_of(x):
    return x.data_ptr() if _is_torch(x) else x.ctypes.data


def paged_attention(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, *, causal=False,
                    softmax_scale=None, return_lse=False, layout="NHD", backend=None,
                    num_threads=0):
    """Ragged queries over a paged KV cache (FlashAttention's block_table
    convention; sw_prefill_plan_create_paged).

    Args:
        q: [total_q, Hq, d], packed by cu_seqlens_q as in varlen_attention.
        k_cache, v_cache: the page pools, [num_pages, page_size, Hkv, d]
            (layout "NHD") or [num_pages, Hkv, page_size, d] ("HND"); any
            strides with head_dim contiguous are used in place. page_size
            1..256.
        cu_seqlens_q: int prefix sums [batch+1].
        seq_lens: [batch] keys of each request (its cached prefix plus any
            new tokens already written into the pages).
        block_table: int [batch, max_pages]: request b's key j is in page
            block_table[b, j // page_size] at token j % page_size; entries
            past what seq_lens[b] needs are not read.
        causal: bottom-right aligned, as varlen_attention (a chunk of new
            queries sees its cached prefix and itself).

    The table is checked on the host before anything runs: an index outside
    the pool, a page repeated within a request or a row shorter than its
    seq_len gives SpillwayError naming the entry. Torch CUDA tensors (all on
    one device) run on torch's current stream: decode batches (q_len x
    Hq/Hkv <= 16 per request) through the split-KV decode kernel over the
    pages, longer queries with their pages gathered into the cached CUDA
    workspace (which then grows to 2 x total keys x Hkv x d elements) for
    the prefill kernel; the pools' strides must be multiples of 16 bytes.
    Torch CPU tensors and numpy arrays run on the CPU.

    Returns out [total_q, Hq, d] (and lse [total_q, Hq] float32 with
    return_lse), like varlen_attention.
    """
    pl = _PagedRun(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, causal,
                   softmax_scale, layout, backend, num_threads)
    try:
        return pl.run(return_lse)
    finally:
        pl.close()


def _refuse_capture(torch):
    """Paged calls plan every call: under CUDA graph capture the graph would
    upload the call's tables from pinned memory given back after it (and reading
    a CUDA page table or lengths to the host is no capturable work).
    Refused before anything is read or written."""
    if torch is not None and torch.cuda.is_available() and \
            torch.cuda.is_current_stream_capturing():
        _lib.fail(_lib.SW_STATUS_UNSUPPORTED,
                  "paged_attention / flash_attn_with_kvcache plan every call and cannot be "
                  "captured in a CUDA graph; capture sw_prefill_run of a plan kept for the "
                  "graph's life (the C API), or use SwapEngine.graph")


class _PagedRun:
    """A checked paged problem: every argument and the page table validated
    and planned (sw_prefill_plan_create_paged) at construction, so that a
    caller can refuse bad input before it writes anything (flash_attn_with_
    kvcache's append); run() then computes, close() frees the plan."""

    def __init__(self, q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, causal,
                 softmax_scale, layout, backend, num_threads):
        torch = None
        cuda = False
        if any(_is_torch(x) for x in (q, k_cache, v_cache)):
            torch = _torch_mod()
            if not all(_is_torch(x) for x in (q, k_cache, v_cache)):
                _lib.fail(_lib.SW_STATUS_INVALID,
                          "q, k_cache, v_cache must all be torch tensors or all numpy arrays")
            devs = {x.device for x in (q, k_cache, v_cache)}
            other = sorted({str(d) for d in devs if d.type not in ("cuda", "cpu")})
            if other:
                _lib.fail(_lib.SW_STATUS_INVALID,
                          f"tensors on {', '.join(other)}: CUDA or CPU tensors only")
            cuda = any(d.type == "cuda" for d in devs)
            if cuda:
                _refuse_capture(torch)
            if cuda and len(devs) != 1:
                _lib.fail(_lib.SW_STATUS_INVALID,
                          "q, k_cache, v_cache must be on one device; got "
                          + ", ".join(sorted(str(d) for d in devs)))
            dtype = _torch_dtype_code(torch, q.dtype)
        else:
            q, k_cache, v_cache = np.asarray(q), np.asarray(k_cache), np.asarray(v_cache)
            dtype = _np_dtype_code(q.dtype)
        if len(q.shape) != 3 or len(k_cache.shape) != 4 or tuple(k_cache.shape) != tuple(v_cache.shape):
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"q must be [total_q, Hq, d] and k_cache, v_cache one shape [num_pages, ...] "
                      f"of 4 dims; got {tuple(q.shape)}, {tuple(k_cache.shape)}, "
                      f"{tuple(v_cache.shape)}")
        if q.dtype != k_cache.dtype or q.dtype != v_cache.dtype:
            _lib.fail(_lib.SW_STATUS_INVALID, "q, k_cache, v_cache must share a dtype")
        lay = str(layout).upper()
        if lay not in ("NHD", "HND"):
            _lib.fail(_lib.SW_STATUS_INVALID, f"layout {layout!r}: 'NHD' or 'HND'")
        num_pages = int(k_cache.shape[0])
        if lay == "NHD":
            page_size, hkv = int(k_cache.shape[1]), int(k_cache.shape[2])
        else:
            hkv, page_size = int(k_cache.shape[1]), int(k_cache.shape[2])
        hq, d = int(q.shape[1]), int(q.shape[2])
        if int(k_cache.shape[3]) != d:
            _lib.fail(_lib.SW_STATUS_INVALID, f"q head_dim {d} != cache head_dim {k_cache.shape[3]}")
        ks, vs = _strides_of(k_cache), _strides_of(v_cache)
        if (d > 1 and (ks[3] != 1 or vs[3] != 1)) or min(ks + vs) < 0:
            _lib.fail(_lib.SW_STATUS_INVALID, "k_cache, v_cache: head_dim must be contiguous")
        # the library reads a stride of 0 as "the layout's default": a
        # broadcast (expanded) pool would be read as a dense one
        shp = tuple(int(x) for x in k_cache.shape)
        if any(n > 1 and (a == 0 or c == 0) for n, a, c in zip(shp[:3], ks[:3], vs[:3])):
            _lib.fail(_lib.SW_STATUS_INVALID,
                      "k_cache, v_cache: a stride of 0 (a broadcast or expanded pool) is not "
                      "supported; pass a materialised pool")
        # element strides: (page, token, head) for NHD; (page, head, token) for HND
        tok = 1 if lay == "NHD" else 2
        head = 2 if lay == "NHD" else 1

        qo = _host_indptr(cu_seqlens_q, "cu_seqlens_q")
        batch = qo.shape[0] - 1
        sl = seq_lens.detach().to("cpu").numpy() if _is_torch(seq_lens) \
            else np.asarray(seq_lens)
        if sl.dtype.kind not in "iu":
            # (a float length would be truncated: another number of keys)
            _lib.fail(_lib.SW_STATUS_INVALID, f"seq_lens must hold integers; got {sl.dtype}")
        sl = np.ascontiguousarray(sl, dtype=np.int64).reshape(-1)
        bt = block_table.detach().to("cpu").numpy() if _is_torch(block_table) \
            else np.asarray(block_table)
        if sl.shape[0] != batch or bt.ndim != 2 or bt.shape[0] != batch:
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"seq_lens must be [batch] and block_table [batch, max_pages] with batch = "
                      f"{batch} (from cu_seqlens_q); got {tuple(sl.shape)} and {tuple(bt.shape)}")
        if bt.dtype.kind not in "iu" or (bt.size and (int(bt.min()) < -2**31
                                                      or int(bt.max()) > 2**31 - 1)):
            _lib.fail(_lib.SW_STATUS_INVALID, "block_table must hold int32 page indices")
        if sl.size and (int(sl.min()) < -2**31 or int(sl.max()) > 2**31 - 1):
            _lib.fail(_lib.SW_STATUS_INVALID, "seq_lens has values outside int32")
        bt = np.ascontiguousarray(bt, dtype=np.int32)
        if bt.shape[1] == 0:
            # no row to point at: a one-column table of nothing to read,
            # when nothing is read (else the refusal the library gives a row
            # too short)
            long = np.nonzero(sl > 0)[0]
            if long.size:
                r = int(long[0])
                _lib.fail(_lib.SW_STATUS_INVALID,
                          f"block_table row {r}: seq_lens[{r}]={int(sl[r])} needs "
                          f"{(int(sl[r]) + page_size - 1) // page_size} pages of {page_size} "
                          f"tokens, the row holds 0")
            bt = np.zeros((batch, 1), dtype=np.int32)
        sl = sl.astype(np.int32)

        scale = _scale_of(softmax_scale)
        b, device = _backend_for(backend, cuda, q, torch)

        L = _lib.lib()
        p = _params(dtype, hq, hkv, d, causal, scale, b, device, 0 if cuda else int(num_threads))
        kv = _lib.new_struct(_lib.sw_paged_kv, "sw_paged_kv_init")
        kv.page_size = page_size
        kv.layout = _lib.SW_KV_NHD if lay == "NHD" else _lib.SW_KV_HND
        kv.num_pages = num_pages
        kv.block_table = bt.ctypes.data_as(_lib._I32_P)
        kv.block_table_stride = bt.shape[1]
        kv.seq_lens = sl.ctypes.data_as(_lib._I32_P)
        h = _lib._PLAN_P()
        _lib.check(L.sw_prefill_plan_create_paged(ctypes.byref(p), batch,
                                                  qo.ctypes.data_as(_lib._I32_P), ctypes.byref(kv),
                                                  ctypes.byref(h)), _HINT)
        self._h, self._lib = h, L
        self._cuda = cuda
        self._ws_bytes = int(L.sw_prefill_plan_workspace_size(h))
        self._torch, self._q, self._k, self._v = torch, q, k_cache, v_cache
        self._dims = (hq, d)
        self._strides = (ks[tok], vs[tok], ks[head], vs[head], ks[0], vs[0])

    def run(self, return_lse):
        torch, q = self._torch, self._q
        hq, d = self._dims
        total_q = int(q.shape[0])
        if torch is not None:
            qc = q.contiguous()
            out = torch.empty((total_q, hq, d), dtype=q.dtype, device=q.device)
            lse = (torch.empty((total_q, hq), dtype=torch.float32, device=q.device)
                   if return_lse else None)
        else:
            qc = np.ascontiguousarray(q)
            out = np.empty((total_q, hq, d), dtype=q.dtype)
            lse = np.empty((total_q, hq), dtype=np.float32) if return_lse else None
        kr, vr, kh, vh, kpg, vpg = self._strides
        t = _new_tensors()
        _fill_tensors(t, _ptr_of(qc) if total_q else 0, _ptr_of(self._k), _ptr_of(self._v),
                      _ptr_of(out) if total_q else 0,
                      _ptr_of(lse) if lse is not None and total_q else 0,
                      (0, kr, vr, 0), total_q, 0)
        t.k_head_stride, t.v_head_stride = kh, vh
        t.k_page_stride, t.v_page_stride = kpg, vpg
        if not self._cuda:
            _lib.check(self._lib.sw_prefill_run(self._h, ctypes.byref(t), None), _HINT)
            return (out, lse) if return_lse else out
        st, _ = _run_cuda(torch, self._h, t, q.device, self._ws_bytes)
        _lib.check(st, _HINT)
        return (out, lse) if return_lse else out

    def close(self):
        # (a CUDA plan's pinned tables go back to the library's staging
        # pool, reused once their upload ran: no wait for the device)
        h, self._h = getattr(self, "_h", None), None
        if h is not None and h.value:
            self._lib.sw_prefill_plan_destroy(h)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass
