"""The tiered KV block store (include/spillway_store.h) from Python.

    with spillway.Store("/var/tmp/kv", capacity_bytes=1 << 30) as st:
        gen = st.write(spillway.StoreKey(ns=1, layer=0, block=0, kv_head=0, kind="K"), data)
        data, = st.read([spillway.StoreKey(1, 0, 0, 0, "K")])
        print(st.get_stats()["file_hits"])

Same names and lifecycle as the C API: Store(...) is sw_store_open, close()
is sw_store_close (also on leaving a `with` block, or when the object is
collected). Failures raise SpillwayError with the library's status and its
sw_last_error() sentence. A closed store, or one that still has open swap
engines when it is closed, is refused with SW_STATUS_INVALID.
"""

import collections
import ctypes
import operator
import os
import weakref

import numpy as np

from . import _lib

StoreKey = collections.namedtuple("StoreKey", "ns layer block kv_head kind")
StoreKey.__doc__ = """Key of one stripe: namespace (u64), layer (u32), block (u32),
kv_head (u16) and kind ("K"/"V", or 0/1)."""

_DURABILITY = {"process": _lib.SW_STORE_DURABILITY_PROCESS, "sync": _lib.SW_STORE_DURABILITY_SYNC}
_FULL = {"evict_lru": _lib.SW_STORE_FULL_EVICT_LRU, "refuse": _lib.SW_STORE_FULL_REFUSE}
_IO = {"auto": _lib.SW_STORE_IO_AUTO, "io_uring": _lib.SW_STORE_IO_URING,
       "pread": _lib.SW_STORE_IO_PREAD}
_KINDS = {"K": _lib.SW_STORE_KIND_K, "V": _lib.SW_STORE_KIND_V, "k": _lib.SW_STORE_KIND_K,
          "v": _lib.SW_STORE_KIND_V, 0: _lib.SW_STORE_KIND_K, 1: _lib.SW_STORE_KIND_V}


def _choice(table, value, name):
    if value not in table:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"{name}={value!r}; one of {sorted(k for k in table if isinstance(k, str))}")
    return table[value]


_C_RANGES = {"u16": (0, (1 << 16) - 1), "u32": (0, (1 << 32) - 1), "u64": (0, (1 << 64) - 1),
             "i32": (-(1 << 31), (1 << 31) - 1), "i64": (-(1 << 63), (1 << 63) - 1)}


def _c_int(val, name, ctype):
    """val as a Python int that fits the C type `ctype` ("u32", "i32", ...):
    an integer (int, numpy or torch integer; not a float) in its range, as
    ctypes would otherwise wrap it silently."""
    lo, hi = _C_RANGES[ctype]
    try:
        v = operator.index(val)
    except TypeError:
        v = None
    if v is None or not lo <= v <= hi:
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"{name}={val!r} is not an integer in {lo}..{hi} ({ctype})")
    return v


def _c_str(val, name):
    """A str or path as the bytes of a C string: refused with an embedded NUL
    (ctypes would cut the string there)."""
    b = os.fsencode(val)
    if b"\0" in b:
        _lib.fail(_lib.SW_STATUS_INVALID, f"{name}={val!r} contains a NUL character")
    return b


def _c_key(key, out=None):
    """A StoreKey (or a 5-tuple) as an sw_store_key; field ranges are checked
    here, where Python ints could otherwise wrap silently."""
    try:
        ns, layer, block, kv_head, kind = key
    except (TypeError, ValueError):
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"key {key!r} is not (ns, layer, block, kv_head, kind)")
    if kind not in _KINDS:
        _lib.fail(_lib.SW_STATUS_INVALID, f"key kind {kind!r}: 'K' or 'V'")
    for name, val, bits in (("ns", ns, 64), ("layer", layer, 32), ("block", block, 32),
                            ("kv_head", kv_head, 16)):
        if not isinstance(val, (int, np.integer)) or not 0 <= int(val) < (1 << bits):
            _lib.fail(_lib.SW_STATUS_INVALID, f"key {name}={val!r} is not a u{bits}")
    k = out if out is not None else _lib.sw_store_key()
    k.ns, k.layer, k.block, k.kv_head = int(ns), int(layer), int(block), int(kv_head)
    k.kind, k.reserved = _KINDS[kind], 0
    return k


def _c_keys(keys):
    """A list of keys as an sw_store_key array."""
    ck = (_lib.sw_store_key * len(keys))()
    for i, key in enumerate(keys):
        _c_key(key, ck[i])
    return ck


def _is_one_key(keys):
    return isinstance(keys, StoreKey) or (
        isinstance(keys, tuple) and len(keys) == 5 and not isinstance(keys[0], (tuple, list)))


class Store:
    """An open block store (sw_store_open). Arguments are sw_store_config's
    fields; 0 (or the default) means the library's default as documented
    there.

    Args:
        path: the store directory (created 0700 when missing and create).
        capacity_bytes: budget of the data file; required when creating.
        create: create the store when it does not exist (else a missing
            store is SW_STATUS_NOT_FOUND).
        stripe_bytes, run_blocks, queue_depth, host_tier_bytes,
            io_buffer_bytes, lock_wait_ms, read_inflight_bytes: as in
            sw_store_config. With create=False and neither stripe_bytes nor
            run_blocks given, the store's own geometry is used ("as
            created"); given, they must match it.
        durability: "process" (default) or "sync".
        full_policy: "evict_lru" (default) or "refuse".
        read_only, zero_fill, buffered_io: booleans.
        io_backend: "auto" (default), "io_uring" or "pread".
    """

    def __init__(self, path, capacity_bytes=0, *, create=True, stripe_bytes=0, run_blocks=0,
                 queue_depth=0, host_tier_bytes=0, io_buffer_bytes=0, durability="process",
                 full_policy="evict_lru", read_only=False, zero_fill=False, io_backend="auto",
                 buffered_io=False, lock_wait_ms=0, read_inflight_bytes=0):
        self._handle = None
        self._engines = weakref.WeakSet()
        L = _lib.lib()
        c = _lib.new_struct(_lib.sw_store_config, "sw_store_config_init")
        self.path = os.fspath(path)
        c.dir = _c_str(self.path, "path")
        c.capacity_bytes = _c_int(capacity_bytes, "capacity_bytes", "u64")
        if not create and not stripe_bytes and not run_blocks:
            c.stripe_bytes = c.run_blocks = 0  # the library's "as created"
        if stripe_bytes:
            c.stripe_bytes = _c_int(stripe_bytes, "stripe_bytes", "u32")
        if run_blocks:
            c.run_blocks = _c_int(run_blocks, "run_blocks", "u32")
        if queue_depth:
            c.queue_depth = _c_int(queue_depth, "queue_depth", "u32")
        c.host_tier_bytes = _c_int(host_tier_bytes, "host_tier_bytes", "u64")
        c.io_buffer_bytes = _c_int(io_buffer_bytes, "io_buffer_bytes", "u64")
        c.durability = _choice(_DURABILITY, durability, "durability")
        c.full_policy = _choice(_FULL, full_policy, "full_policy")
        c.create = 1 if create else 0
        c.read_only = 1 if read_only else 0
        c.zero_fill = 1 if zero_fill else 0
        c.io_backend = _choice(_IO, io_backend, "io_backend")
        c.buffered_io = 1 if buffered_io else 0
        c.lock_wait_ms = _c_int(lock_wait_ms, "lock_wait_ms", "i32")
        c.read_inflight_bytes = _c_int(read_inflight_bytes, "read_inflight_bytes", "u64")
        h = _lib._HANDLE_P()
        _lib.check(L.sw_store_open(ctypes.byref(c), ctypes.byref(h)), f"store {self.path}")
        self._handle = h
        self._lib = L
        self.stripe_bytes = int(self.get_stats()["stripe_bytes"])

    # ------------------------------------------------------- lifecycle --
    @property
    def closed(self):
        return self._handle is None

    def _h(self):
        if self._handle is None:
            _lib.fail(_lib.SW_STATUS_INVALID, f"store {self.path} is closed")
        return self._handle

    def close(self):
        """sw_store_close: flushes and releases the store. Idempotent. Refused
        (SW_STATUS_INVALID) while a SwapEngine on this store is open."""
        if self._handle is None:
            return
        live = [e for e in self._engines if not e.closed]
        if live:
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"store {self.path} still has {len(live)} open SwapEngine(s); "
                      "close them first")
        h, self._handle = self._handle, None
        _lib.check(self._lib.sw_store_close(h), f"store {self.path}")

    def __enter__(self):
        self._h()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        h, self._handle = getattr(self, "_handle", None), None
        if h is not None:
            try:
                self._lib.sw_store_close(h)
            except Exception:  # interpreter shutdown
                pass

    def __repr__(self):
        return f"Store({self.path!r}{', closed' if self.closed else ''})"

    # ------------------------------------------------------------ calls --
    def write(self, key, data):
        """sw_store_write: stores `data` (bytes-like or a contiguous numpy
        array, at most stripe_bytes) under `key`. Returns its generation."""
        h = self._h()
        buf = np.ascontiguousarray(np.frombuffer(data, dtype=np.uint8)
                                   if not isinstance(data, np.ndarray) else data)
        ck = _c_key(key)
        gen = _lib._u64()
        _lib.check(self._lib.sw_store_write(h, ctypes.byref(ck),
                                            buf.ctypes.data if buf.nbytes else None,
                                            buf.nbytes, ctypes.byref(gen)), f"key {tuple(key)}")
        return int(gen.value)

    def read(self, keys):
        """sw_store_read: one key -> its bytes; a list of keys -> a list of
        bytes, in order. A key that is missing or fails its check raises
        SpillwayError with that key's status (the first such key)."""
        h = self._h()
        one = _is_one_key(keys)
        keys = [keys] if one else list(keys)
        n = len(keys)
        if n == 0:
            return []
        ck = _c_keys(keys)
        stripe = self.stripe_bytes
        buf = np.empty((n, stripe), dtype=np.uint8)
        dst = (ctypes.c_void_p * n)(*(buf.ctypes.data + i * stripe for i in range(n)))
        lengths = (ctypes.c_size_t * n)()
        statuses = (_lib._c_enum * n)()
        st = self._lib.sw_store_read(h, n, ck, dst, stripe, lengths, None, statuses)
        if st != _lib.SW_OK:
            bad = next((i for i in range(n) if statuses[i] != _lib.SW_OK), 0)
            _lib.check(st, f"key {tuple(keys[bad])} (index {bad} of {n})")
        out = [buf[i, :lengths[i]].tobytes() for i in range(n)]
        return out[0] if one else out

    def delete(self, key):
        """sw_store_delete: removes the stripe of `key` (SW_STATUS_NOT_FOUND
        when there is none)."""
        h = self._h()
        ck = _c_key(key)
        _lib.check(self._lib.sw_store_delete(h, ctypes.byref(ck)), f"key {tuple(key)}")

    def delete_batch(self, keys):
        """sw_store_delete_batch: removes the stripes of `keys` (a list), in
        order, with the I/O batched. Returns a list of bools: True where a
        stripe was deleted, False where there was none (not an error). A
        failure raises SpillwayError; the keys before the failing group's
        are deleted then (see the C documentation)."""
        h = self._h()
        keys = list(keys)
        n = len(keys)
        if n == 0:
            return []
        ck = _c_keys(keys)
        deleted = (ctypes.c_uint8 * n)()
        done = ctypes.c_size_t()
        _lib.check(self._lib.sw_store_delete_batch(h, n, ck, deleted, ctypes.byref(done)),
                   f"{n} keys ({done.value} done)")
        return [bool(x) for x in deleted]

    def get_stats(self):
        """sw_store_get_stats as a dict (io_backend as its name)."""
        h = self._h()
        st = _lib.sw_store_stats()
        st.struct_size = ctypes.sizeof(st)
        _lib.check(self._lib.sw_store_get_stats(h, ctypes.byref(st)))
        d = _lib.struct_dict(st)
        d["io_backend"] = self._lib.sw_store_io_backend_name(st.io_backend).decode()
        return d

    def verify(self):
        """sw_store_verify: reads back and checks every stripe. Returns the
        counts as a dict plus "status" (the status name: "SW_OK", or
        "SW_STATUS_CORRUPT" / "SW_STATUS_IO" with what was found); other
        failures raise."""
        h = self._h()
        res = _lib.sw_store_verify_result()
        res.struct_size = ctypes.sizeof(res)
        st = self._lib.sw_store_verify(h, None, None, ctypes.byref(res))
        if st not in (_lib.SW_OK, _lib.SW_STATUS_CORRUPT, _lib.SW_STATUS_IO):
            _lib.check(st)
        d = _lib.struct_dict(res)
        d["status"] = _lib.status_name(st)
        return d
