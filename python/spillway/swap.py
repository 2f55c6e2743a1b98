"""The swap engine (include/spillway_swap.h) from Python: exact attention over
a KV cache offloaded to a Store, through a pool of resident blocks.

    with spillway.Store(path, capacity_bytes=1 << 30) as st, \\
         spillway.SwapEngine(st, num_layers=2, num_kv_heads=2, num_qo_heads=8,
                             head_dim=64, block_size=16, resident_blocks=32) as eng:
        eng.seq_add(7, ns=1, max_blocks=1024)
        eng.offload_tokens(7, layer, k, v)        # k, v: [tokens, Hkv, d]
        out = eng.attend(layer, 7, q)             # q: [rows, Hq, d], the last rows

Same names and lifecycle as the C API: SwapEngine(...) is sw_swap_create,
close() is sw_swap_destroy (also on leaving a `with` block, or when the
object is collected); the store must stay open while an engine uses it
(Store.close() refuses otherwise). Failures raise SpillwayError with the
library's status and sw_last_error() sentence; counters come as dicts.

Data: K/V blocks and queries are BF16 in the engine. numpy float32/float16
arrays are rounded to BF16 (nearest even) on the way in and outputs come back
as float32; numpy uint16 arrays are taken as BF16 bit patterns (outputs
uint16); an ml_dtypes bfloat16 array is used as it is. torch tensors
(bfloat16, or float32/float16 converted) give bfloat16 outputs.

Pools: pool="host" (default) keeps the resident blocks in host memory and
attends on the CPU; it takes numpy arrays and torch CPU tensors. pool="device"
keeps them in GPU memory and attends with CUDA kernels on torch's current
stream of the engine's device (torch.cuda.current_stream), without waiting
for them; it takes torch CUDA tensors for attend. offload() and
offload_batch() take blocks from host or GPU memory with either pool: CUDA
tensors are packed and copied to the host by the library on torch's current
stream (one kernel and one copy per batch).
"""

import ctypes
import math
import sys as _sys
import threading

import numpy as np

from . import _lib
from .attention import _current_device, _is_torch, _raw_stream
from .attention import _torch_mod as _torch
from .store import Store, _c_int, _choice

_POLICY = {"score": _lib.SW_SWAP_POLICY_SCORE, "lru": _lib.SW_SWAP_POLICY_LRU}
_POOL = {"host": _lib.SW_SWAP_POOL_HOST, "device": _lib.SW_SWAP_POOL_DEVICE}


def _invalid(detail):
    _lib.fail(_lib.SW_STATUS_INVALID, detail)


def _shape(x):
    return tuple(int(s) for s in x.shape)


def _seq_ids(seq_ids):
    """One sequence id or a sequence of them as a list of u64 ints."""
    if isinstance(seq_ids, (int, np.integer)) or np.ndim(seq_ids) == 0:
        return [_c_int(seq_ids, "seq_id", "u64")]
    return [_c_int(s, f"seq_ids[{i}]", "u64") for i, s in enumerate(seq_ids)]


def _on_device(t, device):
    """Whether tensor t is in the memory of CUDA device `device` (an ordinal)."""
    return bool(t.is_cuda) and t.device.index == device


# -------------------------------------------------------- BF16 on numpy --

def f32_to_bf16_bits(a):
    """float array -> uint16 BF16 bit patterns, rounded to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    out = r.astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def bf16_bits_to_f32(b):
    """uint16 BF16 bit patterns -> float32 (exact)."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _np_bf16(a, name):
    """(uint16 contiguous array, kind) for a numpy input; kind says how to
    give outputs back: "f32", "bits" or the ml_dtypes dtype."""
    a = np.asarray(a)
    if a.dtype == np.uint16:
        return np.ascontiguousarray(a), "bits"
    if a.dtype.name == "bfloat16" and a.dtype.itemsize == 2:
        return np.ascontiguousarray(a).view(np.uint16), a.dtype
    if a.dtype.kind == "f":
        return f32_to_bf16_bits(a), "f32"
    _invalid(f"{name}: numpy dtype {a.dtype} is not supported (float32/float16, uint16 "
             "BF16 bit patterns, or ml_dtypes bfloat16)")


def _np_out(bits, kind):
    if kind == "f32":
        return bf16_bits_to_f32(bits)
    if kind == "bits":
        return bits
    return bits.view(kind)


class SwapGraph:
    """A resident decode step with a fixed workspace (sw_swap_graph_*): made
    by SwapEngine.graph(). A decode loop with torch.cuda.graph:

        g = eng.graph(layer, ids, max_blocks=4096)
        g.prepare(); g.attend(q, out)               # once uncaptured
        cg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cg):
            g.attend(q, out)                        # the launch alone
        for step in ...:
            eng.offload_tokens(...)                 # the step's new tokens
            g.prepare()                             # tables of the new lengths
            q.copy_(...); cg.replay()               # out holds the step's output

    prepare() runs outside the graph on torch's current stream (the replay
    after it in stream order); it raises SpillwayError SW_STATUS_NOT_FOUND
    when a block is not resident (then attend through SwapEngine.attend for
    that step). attend() takes static buffers: q [batch x q_len, Hq, d] BF16
    CUDA, out like q, lse [rows, Hq] float32 or None; they, causal and
    softmax_scale are the capture's at every replay. close() frees it (the
    engine's close() does too)."""

    def __init__(self, engine, layer, seq_ids, max_blocks, q_len):
        self._handle = None
        ids = _seq_ids(seq_ids)
        _c_int(len(ids), "len(seq_ids)", "i32")
        self._eng = engine
        self.layer, self.seq_ids = _c_int(layer, "layer", "i32"), tuple(ids)
        self.q_len = _c_int(q_len, "q_len", "i32")
        max_blocks = _c_int(max_blocks, "max_blocks", "i32")
        self.rows = len(ids) * self.q_len
        arr = (_lib._u64 * max(len(ids), 1))(*ids)
        h = _lib._HANDLE_P()
        _lib.check(engine._call(engine._lib.sw_swap_graph_create, self.layer, len(ids), arr,
                                self.q_len, max_blocks, ctypes.byref(h)),
                   f"graph of layer {layer}")
        self._handle = h
        if not hasattr(engine, "_graphs"):
            engine._graphs = set()
        engine._graphs.add(self)

    def _h(self):
        if self._handle is None:
            _invalid("swap graph is closed")
        return self._handle

    def prepare(self):
        """sw_swap_graph_prepare on torch's current stream."""
        torch = _torch()
        eng = self._eng
        with eng._lock:
            st = eng._lib.sw_swap_graph_prepare(self._h(), _raw_stream(torch, eng.device))
        _lib.check(st, f"graph of layer {self.layer}")

    def attend(self, q, out, lse=None, *, causal=True, softmax_scale=None):
        """sw_swap_graph_attend: the launch on torch's current stream."""
        torch = _torch()
        eng = self._eng
        want = (self.rows, eng.num_qo_heads, eng.head_dim)
        dev = f"cuda:{eng.device}"
        for name, t in (("q", q), ("out", out)):
            if type(t) is not torch.Tensor or t.dtype is not torch.bfloat16 or \
                    not _on_device(t, eng.device) or tuple(t.shape) != want or \
                    not t.is_contiguous():
                _invalid(f"{name} must be a contiguous BF16 tensor on the engine's device "
                         f"{dev} of shape {want}, got "
                         f"{getattr(t, 'dtype', type(t).__name__)} on {getattr(t, 'device', '?')}")
        if lse is not None and (type(lse) is not torch.Tensor or lse.dtype is not torch.float32
                                or not _on_device(lse, eng.device)
                                or tuple(lse.shape) != want[:2] or not lse.is_contiguous()):
            _invalid(f"lse must be None or a contiguous float32 tensor on the engine's device "
                     f"{dev} of shape {want[:2]}")
        scale = 0.0 if softmax_scale is None else float(softmax_scale)
        with eng._lock:
            st = eng._lib.sw_swap_graph_attend(
                self._h(), q.data_ptr(), out.data_ptr(),
                lse.data_ptr() if lse is not None else None, 1 if causal else 0, scale,
                _raw_stream(torch, eng.device))
        _lib.check(st, f"graph of layer {self.layer}")

    def close(self):
        """sw_swap_graph_destroy (waits for its last launch). Idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            with self._eng._lock:  # (it waits on the engine's shared state)
                self._eng._lib.sw_swap_graph_destroy(h)
            getattr(self._eng, "_graphs", set()).discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class SwapEngine:
    """A swap engine bound to an open Store (sw_swap_create).

    Args:
        store: the Store (kept open by this engine until close()).
        num_layers, num_kv_heads, num_qo_heads, head_dim, block_size: the
            model shape (sw_swap_model; num_qo_heads a multiple of
            num_kv_heads).
        resident_blocks, tile_blocks, predictor_rank, projection_seed,
        prefetch_depth: sw_swap_config's fields; None = the library's
            default (64, 0 = auto, 32, 0x5157, 4).
        policy: "score" (default) or "lru".
        pool: "host" (default) or "device" (GPU; SW_STATUS_NO_DEVICE
            without a usable GPU in the library's build or machine).
        device: CUDA ordinal of a device pool.
        persist_manifests: offload also writes each block's manifest, so that
            a later engine (another process) can seq_attach the sequence;
            one more store write, extent and host-tier entry per block.
    """

    def __init__(self, store, *, num_layers, num_kv_heads, num_qo_heads, head_dim, block_size,
                 resident_blocks=None, tile_blocks=None, predictor_rank=None,
                 projection_seed=None, prefetch_depth=None, policy="score", pool="host",
                 device=0, persist_manifests=False):
        self._handle = None
        if not isinstance(store, Store):
            _invalid(f"store must be a spillway.Store, got {type(store).__name__}")
        num_layers = _c_int(num_layers, "num_layers", "i32")
        num_kv_heads = _c_int(num_kv_heads, "num_kv_heads", "i32")
        num_qo_heads = _c_int(num_qo_heads, "num_qo_heads", "i32")
        head_dim = _c_int(head_dim, "head_dim", "i32")
        block_size = _c_int(block_size, "block_size", "i32")
        device = _c_int(device, "device", "i32")
        L = _lib.lib()
        m = _lib.new_struct(_lib.sw_swap_model, "sw_swap_model_init")
        m.num_layers, m.num_kv_heads, m.num_qo_heads = num_layers, num_kv_heads, num_qo_heads
        m.head_dim, m.block_size = head_dim, block_size
        c = _lib.new_struct(_lib.sw_swap_config, "sw_swap_config_init")
        for name, val, ctype in (("resident_blocks", resident_blocks, "i32"),
                                 ("tile_blocks", tile_blocks, "i32"),
                                 ("predictor_rank", predictor_rank, "i32"),
                                 ("projection_seed", projection_seed, "u64"),
                                 ("prefetch_depth", prefetch_depth, "i32")):
            if val is not None:
                setattr(c, name, _c_int(val, name, ctype))
        c.policy = _choice(_POLICY, policy, "policy")
        c.pool = _choice(_POOL, pool, "pool")
        c.device = device
        c.persist_manifests = 1 if persist_manifests else 0
        h = _lib._HANDLE_P()
        _lib.check(L.sw_swap_create(ctypes.byref(m), ctypes.byref(c), store._h(),
                                    ctypes.byref(h)))
        self._handle = h
        self._lib = L
        self._lock = threading.Lock()
        self._cuda = None
        self.store = store
        store._engines.add(self)
        self.num_layers, self.num_kv_heads, self.num_qo_heads = num_layers, num_kv_heads, \
            num_qo_heads
        self.head_dim, self.block_size = head_dim, block_size
        self.pool = pool
        self.device = device
        self._last_res = None
        # attend's short path: reused structs, arrays per (ids, rows)
        self._sp = _lib.new_struct(_lib.sw_swap_attend_params, "sw_swap_attend_params_init")
        self._sr = _lib.sw_swap_attend_result()
        self._sr.struct_size = ctypes.sizeof(self._sr)
        self._sp_ref, self._sr_ref = ctypes.byref(self._sp), ctypes.byref(self._sr)
        self._short = {}
        # what _sp holds now (its fields are set only when these change)
        self._sp_arrs, self._sp_mode, self._sp_lse = None, None, False

    # ------------------------------------------------------- lifecycle --
    @property
    def closed(self):
        return self._handle is None

    def _h(self):
        if self._handle is None:
            _invalid("swap engine is closed")
        return self._handle

    def close(self):
        """sw_swap_destroy: frees the engine and its pool (stripes stay in the
        store), its graph objects first. Idempotent."""
        for g in list(getattr(self, "_graphs", ())):
            g.close()
        h, self._handle = self._handle, None
        if h is not None:
            with self._lock:
                self._lib.sw_swap_destroy(h)

    def graph(self, layer, seq_ids, *, max_blocks, q_len=1):
        """sw_swap_graph_create: a resident decode step of `layer` for the
        sequences seq_ids (q_len rows each), whose launch can be captured in
        a CUDA graph (SwapGraph). max_blocks: room for that many blocks per
        sequence. A device pool's."""
        return SwapGraph(self, layer, seq_ids, max_blocks, q_len)

    def __enter__(self):
        self._h()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return (f"SwapEngine(layers={self.num_layers}, heads={self.num_qo_heads}/"
                f"{self.num_kv_heads}, d={self.head_dim}, block={self.block_size}, "
                f"pool={self.pool}{', closed' if self.closed else ''})")

    def _call(self, fn, *args):
        with self._lock:
            return fn(self._h(), *args)

    # ------------------------------------------------------- sequences --
    def seq_add(self, seq_id, ns, block_base=0, max_blocks=1 << 20):
        """sw_swap_seq_add: registers a sequence whose blocks are stored under
        namespace `ns` as store blocks block_base .. block_base+max_blocks-1."""
        _lib.check(self._call(self._lib.sw_swap_seq_add, *self._seq_args(seq_id, ns, block_base,
                                                                          max_blocks)),
                   f"seq {seq_id}")

    @staticmethod
    def _seq_args(seq_id, ns, block_base, max_blocks):
        return (_c_int(seq_id, "seq_id", "u64"), _c_int(ns, "ns", "u64"),
                _c_int(block_base, "block_base", "u32"), _c_int(max_blocks, "max_blocks", "u32"))

    def seq_attach(self, seq_id, ns, block_base=0, max_blocks=1 << 20):
        """sw_swap_seq_attach: registers a sequence and adopts the blocks an
        engine with persist_manifests offloaded to the store before (in this
        process or an earlier one) under namespace `ns` and store blocks block_base ..
        block_base+max_blocks-1; seq_length then gives what was offloaded.
        The engine's shape must be the one the blocks were written with.
        No manifest at all under `ns` (nothing offloaded there, or offloaded
        without persist_manifests) is no error: the sequence attaches with
        length 0 in every layer (check seq_length before attending).
        Raises SpillwayError: SW_STATUS_CORRUPT for a K stripe rewritten
        after its manifest or a damaged manifest, SW_STATUS_NOT_FOUND for a
        missing K stripe or a hole in the blocks, SW_STATUS_INVALID for
        another model shape; the sequence is then not registered."""
        _lib.check(self._call(self._lib.sw_swap_seq_attach,
                              *self._seq_args(seq_id, ns, block_base, max_blocks)),
                   f"seq {seq_id}")

    def seq_remove(self, seq_id, delete_stripes=False):
        """sw_swap_seq_remove: forgets a sequence (and deletes its stripes
        from the store with delete_stripes)."""
        _lib.check(self._call(self._lib.sw_swap_seq_remove, _c_int(seq_id, "seq_id", "u64"),
                              1 if delete_stripes else 0), f"seq {seq_id}")

    def seq_length(self, seq_id, layer):
        """sw_swap_seq_length: (tokens, blocks) of a sequence in one layer."""
        tokens, blocks = _lib._i64(), _lib._i32()
        _lib.check(self._call(self._lib.sw_swap_seq_length, _c_int(seq_id, "seq_id", "u64"),
                              _c_int(layer, "layer", "i32"), ctypes.byref(tokens),
                              ctypes.byref(blocks)), f"seq {seq_id}")
        return int(tokens.value), int(blocks.value)

    # --------------------------------------------------------- offload --
    def _cuda_ok(self):
        if self._cuda is None:
            self._cuda = int(self._lib.sw_cuda_device_count()) > 0
        return self._cuda

    def _block_view(self, x, name, fp8, nhd):
        """One block's K or V as the library reads it, in place where it can
        be: (keepalive, pointer, tokens, token_stride, head_stride, bytes,
        on_device, torch device or None)."""
        hkv, bs, d = self.num_kv_heads, self.block_size, self.head_dim
        shp = _shape(x)
        n = shp[0] if nhd and len(shp) == 3 else (shp[1] if len(shp) == 3 else 0)
        want = (n, hkv, d) if nhd else (hkv, n, d)
        if len(shp) != 3 or shp != want or not 1 <= n <= bs:
            lay = "[1..block_size, num_kv_heads, head_dim]" if nhd else \
                "[num_kv_heads, 1..block_size, head_dim]"
            _invalid(f"{name} has shape {shp}; want {lay} = {'NHD' if nhd else 'HND'} with "
                     f"num_kv_heads={hkv}, block_size={bs}, head_dim={d}")
        tdev = None
        if _is_torch(x):
            torch = _torch()
            x = x.detach()
            if x.device.type == "cuda" and not self._cuda_ok():
                x = x.to("cpu")  # a library without CUDA: waits for x's stream
            if fp8:
                if x.dtype not in (torch.uint8, getattr(torch, "float8_e4m3fn", None)):
                    _invalid(f"{name}: FP8 blocks are uint8 or float8_e4m3fn, got {x.dtype}")
                x = x.view(torch.uint8)
            elif x.dtype != torch.bfloat16:
                x = x.to(torch.bfloat16)
            if x.stride(-1) != 1 or min(x.stride()) < 0:
                x = x.contiguous()
            strides, ptr, es = x.stride(), x.data_ptr(), x.element_size()
            if x.device.type == "cuda":
                tdev = x.device
        else:
            if fp8:
                arr = np.asarray(x)
                if arr.dtype != np.uint8:
                    _invalid(f"{name}: FP8 blocks are uint8 E4M3 bytes, got {arr.dtype}")
            else:
                arr = np.asarray(x)
                if arr.dtype != np.uint16 and not (arr.dtype.name == "bfloat16" and
                                                   arr.dtype.itemsize == 2):
                    arr = _np_bf16(arr, name)[0]
            if arr.strides[-1] != arr.itemsize or min(arr.strides) < 0 or \
                    any(st % arr.itemsize for st in arr.strides):
                arr = np.ascontiguousarray(arr)
            x, es = arr, arr.itemsize
            strides, ptr = tuple(st // es for st in arr.strides), arr.ctypes.data
        ts, hs = (strides[0], strides[1]) if nhd else (strides[1], strides[0])
        span = ((hkv - 1) * hs + (n - 1) * ts + d) * es
        return x, ptr, n, ts, hs, span, tdev

    def offload(self, seq_id, layer, block, k, v, *, valid_tokens=None, k_scale=None,
                v_scale=None, layout="HND"):
        """sw_swap_offload: writes block `block` (logical; the next one, or an
        existing one to overwrite) of a sequence's layer to the store.

        k, v: one block, layout "HND" ([num_kv_heads, n, head_dim], the
            default) or "NHD" ([n, num_kv_heads, head_dim]: a page of a
            vLLM / FlashInfer NHD cache, or n rows of a prefill's K), with
            n <= block_size (n < block_size only for the sequence's last
            block); any strides with a unit last one are read in place.
            numpy arrays and torch tensors, CPU or CUDA: a CUDA tensor is
            packed and copied by the library on torch's current stream (its
            producer needs no sync first). valid_tokens defaults to n.
        k_scale, v_scale: given for FP8 E4M3 blocks (k, v then uint8 bytes or
            torch.float8_e4m3fn): value = e4m3 * scale. Otherwise BF16.
        """
        item = (seq_id, layer, block, k, v)
        if k_scale is not None or v_scale is not None:
            item += (k_scale, v_scale)
        self.offload_batch([item], layout=layout, valid_tokens=valid_tokens)

    def offload_batch(self, items, *, layout="HND", valid_tokens=None):
        """sw_swap_offload_batch: many blocks in one call (every layer's new
        block of a step, the blocks of a prefill), device ones packed by one
        kernel and copied in one copy. items: (seq_id, layer, block, k, v)
        tuples, or (seq_id, layer, block, k, v, k_scale, v_scale) for FP8
        blocks; k and v as for offload(), in `layout`. Applied in order:
        on a failure the items before it stay offloaded and SpillwayError
        says which item failed (nothing is written when an item is
        malformed). Returns the number of items."""
        if layout not in ("HND", "NHD"):
            _invalid(f"layout {layout!r}: 'HND' or 'NHD'")
        nhd = layout == "NHD"
        items = list(items)
        n = len(items)
        if n == 0:
            return 0
        _c_int(n, "len(items)", "i32")
        if valid_tokens is not None:
            valid_tokens = _c_int(valid_tokens, "valid_tokens", "i32")
        blocks = (_lib.sw_swap_block * n)()
        ptrs = (ctypes.POINTER(_lib.sw_swap_block) * n)()
        ids = (_lib._u64 * n)()
        layers, idx = (_lib._i32 * n)(), (_lib._i32 * n)()
        keep, tdev = [], None
        for i, it in enumerate(items):
            if len(it) not in (5, 7):
                _invalid(f"item {i}: (seq_id, layer, block, k, v[, k_scale, v_scale]), got "
                         f"{len(it)} fields")
            at = "" if n == 1 else f"item {i}: "
            sid = _c_int(it[0], at + "seq_id", "u64")
            lay, blk = _c_int(it[1], at + "layer", "i32"), _c_int(it[2], at + "block", "i32")
            fp8 = len(it) == 7
            kx, kp, nk, kts, khs, kbytes, kd = self._block_view(it[3], "k", fp8, nhd)
            vx, vp, nv, vts, vhs, vbytes, vd = self._block_view(it[4], "v", fp8, nhd)
            if nk != nv or (kts, khs) != (vts, vhs):
                if nk != nv:
                    _invalid(f"item {i}: k has {nk} tokens but v has {nv}")
                vx = vx.contiguous() if _is_torch(vx) else np.ascontiguousarray(vx)
                kx = kx.contiguous() if _is_torch(kx) else np.ascontiguousarray(kx)
                kx, kp, nk, kts, khs, kbytes, kd = self._block_view(kx, "k", fp8, nhd)
                vx, vp, nv, vts, vhs, vbytes, vd = self._block_view(vx, "v", fp8, nhd)
            if (kd is None) != (vd is None) or (kd is not None and kd != vd):
                _invalid(f"item {i}: k and v are on different devices")
            if kd is not None:
                if self.pool == "device" and kd.index != self.device:
                    _invalid(f"item {i}: k is on {kd} but the engine's pool is on "
                             f"cuda:{self.device}")
                if tdev is not None and kd != tdev:
                    _invalid(f"item {i}: the batch's CUDA tensors are on {tdev} and {kd}")
                tdev = kd
            keep += [kx, vx]
            b = blocks[i]
            self._lib.sw_swap_block_init(ctypes.byref(b))
            b.dtype = _lib.SW_SWAP_KV_FP8_E4M3 if fp8 else _lib.SW_SWAP_KV_BF16
            b.valid_tokens = nk if valid_tokens is None else valid_tokens
            b.k, b.v, b.k_bytes, b.v_bytes = kp, vp, kbytes, vbytes
            b.layout = _lib.SW_KV_NHD if nhd else _lib.SW_KV_HND
            b.token_stride, b.head_stride = kts, khs
            b.on_device = 1 if kd is not None else 0
            if fp8:
                b.k_scale, b.v_scale = float(it[5]), float(it[6])
            ptrs[i] = ctypes.pointer(b)
            ids[i], layers[i], idx[i] = sid, lay, blk
        done = _lib._i32(0)
        stream = None
        if tdev is not None:
            torch = _torch()
            stream = ctypes.c_void_p(torch.cuda.current_stream(tdev).cuda_stream)
            with torch.cuda.device(tdev):
                st = self._call(self._lib.sw_swap_offload_batch, n, ids, layers, idx, ptrs,
                                stream, ctypes.byref(done))
        else:
            st = self._call(self._lib.sw_swap_offload_batch, n, ids, layers, idx, ptrs, None,
                            ctypes.byref(done))
        what = (f"seq {items[0][0]} layer {items[0][1]} block {items[0][2]}" if n == 1
                else f"batch of {n} blocks, {done.value} offloaded")
        _lib.check(st, what)
        return n

    def offload_tokens(self, seq_id, layer, k, v, first_block=0):
        """Offloads token-major K/V ([tokens, num_kv_heads, head_dim], as a
        prefill produces them; numpy or torch, CPU or CUDA) as blocks
        first_block, first_block+1, ... of a sequence's layer (BF16), read
        in place, in one offload_batch. Returns the number of blocks
        written."""
        seq_id, layer = _c_int(seq_id, "seq_id", "u64"), _c_int(layer, "layer", "i32")
        first_block = _c_int(first_block, "first_block", "i32")
        for name, x in (("k", k), ("v", v)):
            if len(x.shape) != 3 or _shape(x)[1:] != (self.num_kv_heads, self.head_dim):
                _invalid(f"{name} has shape {_shape(x)}; want [tokens, num_kv_heads="
                         f"{self.num_kv_heads}, head_dim={self.head_dim}]")
        if _shape(k) != _shape(v):
            _invalid(f"k and v differ in shape: {_shape(k)} and {_shape(v)}")
        if _is_torch(k):
            torch = _torch()
            k, v = k.detach(), v.detach()
            if k.dtype != torch.bfloat16:
                k, v = k.to(torch.bfloat16), v.to(torch.bfloat16)
        else:
            k, v = _np_bf16(k, "k")[0], _np_bf16(v, "v")[0]
        tokens, bs = _shape(k)[0], self.block_size
        nblocks = (tokens + bs - 1) // bs
        items = [(seq_id, layer, first_block + i, k[i * bs:(i + 1) * bs],
                  v[i * bs:(i + 1) * bs]) for i in range(nblocks)]
        return self.offload_batch(items, layout="NHD")

    # ---------------------------------------------------------- attend --
    def _q_indptr(self, batch, rows, q_indptr):
        _c_int(rows, "rows of q", "i32")
        if q_indptr is None and batch == 1:
            return np.array((0, rows), dtype=np.int32)
        if q_indptr is None:
            if batch == 1:
                q_indptr = [0, rows]
            elif rows == batch:
                q_indptr = range(batch + 1)  # decode: one row per sequence
            else:
                _invalid(f"q has {rows} rows for {batch} sequences: pass q_indptr")
        if _is_torch(q_indptr):
            q_indptr = q_indptr.detach().to("cpu").numpy()
        ind = np.asarray(q_indptr)
        if ind.ndim != 1 or ind.shape[0] != batch + 1 or ind.dtype.kind not in "iuO":
            _invalid(f"q_indptr must be {batch + 1} integers, got {ind.dtype} {ind.shape}")
        if ind.dtype.kind == "O":  # Python ints past int64, or mixed objects
            ind = np.array([_c_int(x, f"q_indptr[{i}]", "i32") for i, x in enumerate(ind)],
                           dtype=np.int32)
        lo, hi = int(ind.min()), int(ind.max())
        if lo < -(1 << 31) or hi >= 1 << 31:
            _invalid(f"q_indptr runs {lo}..{hi}: its values must fit an int32 "
                     f"({-(1 << 31)}..{(1 << 31) - 1})")
        ind = np.ascontiguousarray(ind, dtype=np.int32)
        if int(ind[-1]) != rows or int(ind[0]) != 0:
            _invalid(f"q_indptr runs {int(ind[0])}..{int(ind[-1])} but q has {rows} rows")
        return ind

    def attend(self, layer, seq_ids, q, q_indptr=None, *, causal=True, softmax_scale=None,
               return_lse=False):
        """sw_swap_attend: attention of one layer for a batch of sequences
        over every offloaded token.

        seq_ids: one id or a list (distinct). q: [rows, num_qo_heads,
            head_dim]; sequence i owns rows q_indptr[i]..q_indptr[i+1] (1 =
            decode, more = a prefill chunk). q_indptr may be left out for one
            sequence, or for one row per sequence.
        causal: the chunk's rows are the sequence's last positions
            (bottom-right).
        Returns out [rows, num_qo_heads, head_dim] (and lse [rows,
        num_qo_heads] fp32, natural log, with return_lse). The call's
        counters (sw_swap_attend_result) are left in self.last_attend.
        """
        r = self._attend_short(layer, seq_ids, q, q_indptr, causal, softmax_scale, return_lse)
        if r is not None:
            return r
        layer = _c_int(layer, "layer", "i32")
        ids = _seq_ids(seq_ids)
        batch = _c_int(len(ids), "len(seq_ids)", "i32")
        if batch < 1:
            _invalid("seq_ids is empty")
        if len(q.shape) != 3 or _shape(q)[1:] != (self.num_qo_heads, self.head_dim):
            _invalid(f"q has shape {_shape(q)}; want [rows, num_qo_heads={self.num_qo_heads}, "
                     f"head_dim={self.head_dim}]")
        rows = _shape(q)[0]
        ind = self._q_indptr(batch, rows, q_indptr)
        if softmax_scale is None:
            scale = 0.0
        else:
            scale = float(softmax_scale)
            if scale == 0.0 or not math.isfinite(scale):
                _invalid(f"softmax_scale={softmax_scale!r} must be finite and nonzero")

        p = _lib.new_struct(_lib.sw_swap_attend_params, "sw_swap_attend_params_init")
        ids_arr = (_lib._u64 * batch)(*ids)
        p.layer, p.batch, p.seq_ids = layer, batch, ids_arr
        p.q_indptr = ind.ctypes.data_as(ctypes.POINTER(_lib._i32))
        p.sm_scale, p.causal = scale, 1 if causal else 0
        res = _lib.sw_swap_attend_result()
        res.struct_size = ctypes.sizeof(res)

        cuda = _is_torch(q) and q.device.type == "cuda"
        if self.pool == "device":
            if not cuda:
                _invalid("a device-pool engine attends torch CUDA tensors; got host data "
                         "(use pool='host' for numpy arrays and CPU tensors)")
            out, lse = self._attend_cuda(p, res, q, rows, return_lse)
        else:
            if cuda:
                _invalid(f"a host-pool engine attends host data; q is on {q.device} "
                         "(use pool='device' for CUDA tensors)")
            out, lse = self._attend_host(p, res, q, rows, return_lse)
        self._last_res = res
        return (out, lse) if return_lse else out

    @property
    def last_attend(self):
        """The last attend's counters (sw_swap_attend_result) as a dict, or
        None before the first."""
        return None if self._last_res is None else _lib.struct_dict(self._last_res)

    def _attend_short(self, layer, seq_ids, q, q_indptr, causal, softmax_scale, return_lse):
        """attend's common device-pool call in few steps: a contiguous BF16
        CUDA tensor on the engine's device (the current one), int sequence
        ids and layer, no q_indptr (one sequence, or one row per sequence).
        The arrays for the ids and row offsets are kept per (ids, rows), the
        parameter and result structs per engine. Returns None for anything
        else: the general path then checks and explains."""
        torch = _sys.modules.get("torch")
        if self.pool != "device" or torch is None or type(q) is not torch.Tensor or \
                type(layer) is not int or q_indptr is not None or \
                q.dtype is not torch.bfloat16 or not q.is_cuda or not q.is_contiguous():
            return None
        qs = q.shape
        if len(qs) != 3 or qs[1] != self.num_qo_heads or qs[2] != self.head_dim or \
                q.device.index != self.device or _current_device(torch) != self.device or \
                not -0x80000000 <= layer <= 0x7FFFFFFF or qs[0] > 0x7FFFFFFF:
            return None  # (out of a C field's range: the general path explains)
        scale = 0.0
        if softmax_scale is not None:
            scale = float(softmax_scale)
            if scale == 0.0 or not math.isfinite(scale):
                return None
        rows = qs[0]
        key = (seq_ids, rows) if type(seq_ids) is int else None
        arrs = self._short.get(key) if key is not None else None
        if arrs is None:
            if type(seq_ids) is int:
                ids = (seq_ids,)
            elif type(seq_ids) in (list, tuple) and all(type(i) is int for i in seq_ids):
                ids = tuple(seq_ids)
                key = (ids, rows)
                arrs = self._short.get(key)
            else:
                return None
            if arrs is None:
                n = len(ids)
                if n < 1 or (n > 1 and rows != n) or len(set(ids)) != n or \
                        not all(0 <= i < 1 << 64 for i in ids):
                    return None
                arrs = ((_lib._u64 * n)(*ids),
                        (_lib._i32 * (n + 1))(*(range(n + 1) if n > 1 else (0, rows))), n)
                if len(self._short) >= 64:
                    self._short.clear()
                self._short[key] = arrs
        out = torch.empty_like(q)  # (q is contiguous BF16: the output's strides)
        lse = (torch.empty((rows, qs[1]), dtype=torch.float32, device=q.device)
               if return_lse else None)
        stream = _raw_stream(torch, self.device)
        mode = (1 if causal else 0, scale)
        with self._lock:
            h = self._handle
            if h is None:
                _invalid("swap engine is closed")
            p = self._sp
            if arrs is not self._sp_arrs:
                p.batch, p.seq_ids, p.q_indptr = arrs[2], arrs[0], arrs[1]
                self._sp_arrs = arrs
            if mode != self._sp_mode:
                p.causal, p.sm_scale = mode
                self._sp_mode = mode
            p.layer, p.q, p.o = layer, q.data_ptr(), out.data_ptr()
            if lse is not None or self._sp_lse:
                p.lse = (ctypes.cast(lse.data_ptr(), ctypes.POINTER(ctypes.c_float))
                         if lse is not None else None)
                self._sp_lse = lse is not None
            st = self._lib.sw_swap_attend(h, self._sp_ref, self._sr_ref, stream)
            self._last_res = self._sr
        if st:
            _lib.check(st, f"layer {layer}")
        return (out, lse) if return_lse else out

    def _attend_host(self, p, res, q, rows, return_lse):
        hq, d = self.num_qo_heads, self.head_dim
        torch = _torch() if _is_torch(q) else None
        if torch is not None:
            qb = q.detach().to(torch.bfloat16).contiguous()
            qa = qb.view(torch.int16).numpy().view(np.uint16)
            kind = None
        else:
            qa, kind = _np_bf16(q, "q")
        o = np.empty((rows, hq, d), dtype=np.uint16)
        lse = np.empty((rows, hq), dtype=np.float32) if return_lse else None
        p.q, p.o = qa.ctypes.data, o.ctypes.data
        p.lse = lse.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) if lse is not None else None
        _lib.check(self._call(self._lib.sw_swap_attend, ctypes.byref(p), ctypes.byref(res),
                              None), f"layer {p.layer}")
        if torch is not None:
            out = torch.from_numpy(o.view(np.int16)).view(torch.bfloat16)
            return out, (torch.from_numpy(lse) if lse is not None else None)
        return _np_out(o, kind), lse

    def _attend_cuda(self, p, res, q, rows, return_lse):
        torch = _torch()
        if q.dtype != torch.bfloat16:
            _invalid(f"q must be bfloat16 for a device pool, got {q.dtype}")
        if q.device.index is not None and q.device.index != self.device:
            _invalid(f"q is on {q.device} but the engine's pool is on cuda:{self.device}")
        dev = q.device
        qc = q.detach()
        if not qc.is_contiguous():
            qc = qc.contiguous()
        out = torch.empty((rows, self.num_qo_heads, self.head_dim), dtype=torch.bfloat16,
                          device=dev)
        lse = (torch.empty((rows, self.num_qo_heads), dtype=torch.float32, device=dev)
               if return_lse else None)
        p.q, p.o = qc.data_ptr(), out.data_ptr()
        p.lse = (ctypes.cast(lse.data_ptr(), ctypes.POINTER(ctypes.c_float))
                 if lse is not None else None)
        # torch's current stream on the engine's device, the caller's device
        # restored after (no torch call when it is already the engine's)
        prev = _current_device(torch)
        if prev != self.device:
            torch.cuda.set_device(self.device)
        try:
            st = self._call(self._lib.sw_swap_attend, ctypes.byref(p), ctypes.byref(res),
                            _raw_stream(torch, self.device))
        finally:
            if prev != self.device:
                torch.cuda.set_device(prev)
        _lib.check(st, f"layer {p.layer}")
        return out, lse

    # ----------------------------------------------------------- other --
    def resident_slots(self, seq_id, layer):
        """sw_swap_resident_slots: int32 [blocks], the pool slot holding each
        block of a sequence's layer as BF16, -1 where it is not resident.
        Valid until the next call that can change the pool."""
        seq_id, layer = _c_int(seq_id, "seq_id", "u64"), _c_int(layer, "layer", "i32")
        _, blocks = self.seq_length(seq_id, layer)
        slots = np.empty(max(blocks, 1), dtype=np.int32)
        nb = _lib._i32()
        _lib.check(self._call(self._lib.sw_swap_resident_slots, seq_id, layer,
                              slots.ctypes.data_as(ctypes.POINTER(_lib._i32)), slots.shape[0],
                              ctypes.byref(nb)), f"seq {seq_id}")
        return slots[:nb.value].copy()

    def pool_view(self):
        """sw_swap_get_pool_view: the device pool as paged K and V, torch
        BF16 tensors [num_slots, num_kv_heads, block_size, head_dim] (a
        FlashInfer "HND" page each) over the engine's memory -- no copy (the
        tensors keep the engine object alive, but close() frees the pool
        under them): valid while the engine is open, and its contents until
        the next call that can change the pool (attend, offload, seq_remove).
        Work on torch's current stream after this call sees the pool as the
        engine's calls left it. Which slot holds which block:
        resident_slots(). Read-only by contract. A host pool raises
        SW_STATUS_UNSUPPORTED."""
        if self.pool != "device":
            _lib.fail(_lib.SW_STATUS_UNSUPPORTED, "a host pool has no pool view (its slots move)")
        torch = _torch()
        v = _lib.sw_swap_pool_view()
        v.struct_size = ctypes.sizeof(v)
        stream = _raw_stream(torch, self.device)
        _lib.check(self._call(self._lib.sw_swap_get_pool_view, stream, ctypes.byref(v)),
                   "pool view")
        shape = (v.num_slots, self.num_kv_heads, self.block_size, self.head_dim)
        strides = (v.page_stride * 2, v.head_stride * 2, v.token_stride * 2, 2)

        class _Pages:  # a CUDA array interface over the engine's pool
            def __init__(self, ptr, eng):
                self.engine = eng  # (torch keeps this object, so the engine, alive)
                self.__cuda_array_interface__ = {
                    "shape": shape, "typestr": "<i2", "data": (ptr, False),
                    "strides": strides, "version": 3, "stream": None}

        dev = torch.device("cuda", v.device)
        k = torch.as_tensor(_Pages(v.k, self), device=dev).view(torch.bfloat16)
        vv = torch.as_tensor(_Pages(v.v, self), device=dev).view(torch.bfloat16)
        return k, vv

    def score_blocks(self, seq_id, layer, q):
        """sw_swap_score_blocks: the predictor's score of every block of a
        sequence's layer for the query rows q ([rows, num_qo_heads,
        head_dim], host). Returns float32 [blocks] (-inf for FP8 blocks)."""
        if len(q.shape) != 3 or _shape(q)[1:] != (self.num_qo_heads, self.head_dim) or \
                _shape(q)[0] < 1:
            _invalid(f"q has shape {_shape(q)}; want [rows >= 1, num_qo_heads="
                     f"{self.num_qo_heads}, head_dim={self.head_dim}]")
        seq_id, layer = _c_int(seq_id, "seq_id", "u64"), _c_int(layer, "layer", "i32")
        _c_int(_shape(q)[0], "rows of q", "i32")
        if _is_torch(q):
            torch = _torch()
            qa = q.detach().to("cpu").to(torch.bfloat16).contiguous().view(torch.int16)
            qa = qa.numpy().view(np.uint16)
        else:
            qa = _np_bf16(q, "q")[0]
        _, blocks = self.seq_length(seq_id, layer)
        scores = np.empty(max(blocks, 1), dtype=np.float32)
        nb = _lib._i32()
        _lib.check(self._call(self._lib.sw_swap_score_blocks, seq_id, layer,
                              qa.ctypes.data, _shape(q)[0],
                              scores.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                              scores.shape[0], ctypes.byref(nb)), f"seq {seq_id}")
        return scores[:nb.value].copy()

    def get_stats(self):
        """sw_swap_get_stats as a dict (policy as its name)."""
        st = _lib.sw_swap_stats()
        st.struct_size = ctypes.sizeof(st)
        _lib.check(self._call(self._lib.sw_swap_get_stats, ctypes.byref(st)))
        d = _lib.struct_dict(st)
        d["policy"] = self._lib.sw_swap_policy_name(st.policy).decode()
        return d

    def reset_stats(self):
        """sw_swap_reset_stats: zeroes the traffic counters."""
        self._call(self._lib.sw_swap_reset_stats)
