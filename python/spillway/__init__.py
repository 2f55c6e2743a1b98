"""Spillway: ragged batched prefill attention, the tiered KV block store and the
swap engine (ctypes binding of libspillway).

    import spillway
    out = spillway.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=True)
    # FlashAttention's varlen signature and positional order:
    out = spillway.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, 0.0, None, True)
    # exact attention over a KV cache offloaded to a block store:
    with spillway.Store(path, capacity_bytes=1 << 30) as st, \
         spillway.SwapEngine(st, num_layers=L, num_kv_heads=Hkv, num_qo_heads=Hq,
                             head_dim=d, block_size=16) as eng:
        eng.seq_add(seq_id, ns=1)
        eng.offload_tokens(seq_id, layer, k, v)
        out = eng.attend(layer, seq_id, q)

The library is found, in order, at $SPILLWAY_LIB (a full path), inside this
package (where `pip install .` puts it), at ../../build/libspillway.so
relative to this package (the CMake build tree), at ../../lib/libspillway.so
(the installed tree), then through ctypes.util.find_library("spillway"). It
is loaded on first use.

torch is never imported by this package: torch tensors are recognised when the
caller has imported torch.
"""

from ._lib import SpillwayError, lib_path
from .attention import (
    PrefillPlan,
    clear_caches,
    get_plan,
    plan_cache_info,
    prefill_flops,
    paged_attention,
    varlen_attention,
    workspace_bytes,
)
from .flash_compat import flash_attn_varlen_func, flash_attn_with_kvcache
from .store import Store, StoreKey
from .swap import SwapEngine, SwapGraph

__all__ = [
    "SpillwayError",
    "PrefillPlan",
    "varlen_attention",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "paged_attention",
    "Store",
    "StoreKey",
    "SwapEngine",
    "SwapGraph",
    "get_plan",
    "prefill_flops",
    "plan_cache_info",
    "clear_caches",
    "workspace_bytes",
    "version",
    "cuda_device_count",
    "cpu_isa",
    "lib_path",
]


def version():
    """The library's version string, e.g. "0.1.0 (cuda archs: sm_80 sm_90a)"."""
    from . import _lib
    s = _lib.lib().sw_version_string()
    return s.decode() if s else ""


def cuda_device_count():
    """CUDA devices usable by the loaded library (0 without CUDA or a GPU)."""
    from . import _lib
    return int(_lib.lib().sw_cuda_device_count())


def cpu_isa():
    """Instruction set the library's CPU fast path picked on this machine
    ("amx", "avx512bf16", "avx512", "avx2", "scalar"); "unknown" for a library
    without sw_prefill_cpu_isa."""
    from . import _lib
    if not _lib.has("sw_prefill_cpu_isa"):
        return "unknown"
    s = _lib.lib().sw_prefill_cpu_isa()
    return s.decode() if s else "unknown"
