#!/usr/bin/env python3
"""Ragged batched prefill attention: Spillway against the usual opponents.

GPU mode (default; an NVIDIA GPU, torch with CUDA):
  spillway       spillway.varlen_attention on the packed ragged batch, one call
                 (the C library's CUDA backend; plans are cached, cu_seqlens
                 are host arrays so the call never synchronises).
  sdpa-flash     torch SDPA under sdpa_kernel(SDPBackend.FLASH_ATTENTION),
  sdpa-cudnn     ... under sdpa_kernel(SDPBackend.CUDNN_ATTENTION): dense
                 [B, H, S, d]. Requests of equal length are batched into one
                 call (16x1k, 4x4k: a single call); every other request is a
                 call of its own, and ONE timed run is the whole sequence of
                 calls back to back on the stream - what a serving engine
                 without a varlen kernel would do. The dense tensors are
                 contiguous [n, H, L, d] copies of the packed inputs made
                 before timing (--dense-layout bshd passes zero-copy transposed
                 views of the packed buffers instead). GQA: K/V keep
                 Hkv heads with enable_gqa=True where the backend takes it,
                 else Hkv heads without the flag (cuDNN reads them natively),
                 else K/V expanded to Hq heads before timing; the record's
                 "note" says which.
  fa2-varlen     torch.ops.aten._flash_attention_forward (PyTorch's vendored
                 FlashAttention-2 varlen kernel) on the packed batch, one call.
  flashinfer     flashinfer.BatchPrefillWithRaggedKVCacheWrapper, default
  flashinfer-fa3 backend and backend="fa3" (when `import flashinfer` works);
                 plan() outside the timing, run() timed.
  flashinfer-c   FlashInfer's FA2 ragged prefill compiled into libspillway as
                 an opponent backend (docs/opponents.md) and called through
                 the binding exactly like "spillway" (backend="flashinfer"):
                 only when the loaded library reports it was built with it
                 (sw_version_string names it) and SPILLWAY_OPPONENT=flashinfer
                 is set; for GPUs where the flashinfer package cannot be
                 installed. Its record names the FlashInfer version compiled in.
  flashinfer-c-fa3
                 the same for FlashInfer's FA3 (sm90) ragged prefill, the
                 kernel its Python picks on Hopper (backend="flashinfer-fa3"):
                 an opponent build with 90a in SPILLWAY_CUDA_ARCHS, on an sm_90
                 GPU.

What is timed: CUDA events around one call (or, for dense SDPA, the sequence
of calls) on the current stream; --warmup untimed runs of each implementation
first, then --reps timed runs of each, interleaved: rep r runs every
implementation once, starting at a different one each rep, all enqueued back
to back (no host sync between them, so host launch overhead overlaps the
previous run). A slow phase of the machine (seen on the H200: whole stretches
of runs ~1.4x slower) then falls on every implementation
alike instead of on whichever one was timed then. --no-interleave times each
implementation's reps in one block instead. The median is reported; the JSON
keeps every rep's time (times_ms). An implementation whose call raises while
being timed is reported as failed and dropped; the others' figures stand (a
sticky CUDA error fails every later call, unavoidably). Every implementation's
buffers stay allocated while the case is timed, so a case's peak memory is
the sum over its implementations. Before every
timed run the L2 cache is flushed by writing a 256 MiB buffer (outside the
events). The inputs are one fixed set per case rather than rotated sets: Q
alone is 64-218 MiB in every case, more than the 50-60 MB L2 of an H100/H200,
but K+V is 32-109 MiB, and in the smaller cases would partly stay resident
between runs without the flush. --no-flush turns it off. Python-side overhead of each call (spillway: a plan-cache lookup and
the output allocation) is inside the events unless the GPU is still busy
with the previous run.

FLOPs (the library's reporting convention, sw_prefill_plan_flops; the same
formula is used in Python for every implementation): per request
4 * q_len * kv_eff * head_dim * Hq, kv_eff = mean number of visible keys per
query row (bottom-right causal). TFLOP/s = FLOPs / median time.

Correctness: every implementation's output is compared with a float32
reference computed per request on the GPU (plain matmul-softmax, chunked over
query rows so the score matrix stays small, TF32 off); "max_rel_err" is the
largest relative L2 error over the requests of the case.

CPU mode (--cpu): spillway's CPU backend ("spillway-cpu", torch bf16 CPU
tensors through the binding) against torch's CPU SDPA ("torch-cpu-sdpa", per
group of equal-length requests like the dense GPU opponents; inputs are
contiguous [B, H, S, d] copies, GQA native with enable_gqa), lengths scaled
by --cpu-scale. Side by side on the same cores: the process (every thread of
it) is pinned with sched_setaffinity to N = --threads logical CPUs, one per
physical core where the topology allows (the chosen list is recorded), and
both use N threads (torch.set_num_threads(N); SPILLWAY_NUM_THREADS=N and
num_threads=N for ours). After --warmup untimed runs of each, the
implementations run interleaved rep by rep (A B, B A, A B, ...: the order
alternates so neither always runs first); wall clock (perf_counter) per
run; the median is reported, and the ratio of a case is the median over reps
of the per-rep ratio (torch time / our time in the same rep), so a load
change that hits both in one rep cancels. Which torch kernel ran is checked
per case with the profiler (the op names are recorded; the CPU flash kernel
is aten::_scaled_dot_product_flash_attention_for_cpu). Records carry
"gflops" as well as "tflops", the per-rep times, and "env" (CPU model, ISA
chosen by the library, threads, pinned CPUs, torch's CPU capability).

Results: a JSON list of {"case", "impl", "tflops", "ms", "max_rel_err", ...}
written to --out, or else to a fresh file bench/results/prefill-<gpu>-<UTC
time>.json (prefill-cpu-<cpu>-... in CPU mode; created, never over another),
and with --md FILE a table between markers for that device in FILE
(bench/results/prefill-<gpu>.md for a recorded run; docs/perf/prefill.md quotes
it). A committed record changes only when --out / --md name it.
An implementation that fails is recorded with its error string ("error") and
the run goes on.
"""

import argparse
import datetime
import itertools
import json
import math
import os
import platform
import re
import shlex
import statistics
import sys
import time
import traceback

import numpy as np

_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# This repository's binding, not some other installed copy.
sys.path.insert(0, os.path.join(_ROOT, "python"))
import spillway  # noqa: E402

import torch  # noqa: E402

GPU_IMPLS = ["spillway", "sdpa-flash", "sdpa-cudnn", "fa2-varlen", "flashinfer", "flashinfer-fa3",
             "flashinfer-c", "flashinfer-c-fa3"]
CPU_IMPLS = ["spillway-cpu", "torch-cpu-sdpa"]
HEAD_CONFIGS = [(16, 2, 256), (32, 8, 128), (32, 8, 64)]
MIN_LEN, MAX_LEN = 100, 8192
FLUSH_BYTES = 256 << 20


# ------------------------------------------------------------------ cases --

# The two ragged mixes are fixed lists (lengths 100..8192), the same as
# tool_length_sets in bench/prefill_run.c, so `spillway bench prefill` and
# this driver measure identical batches. mix-a: one long prompt among short
# ones (the tail-balance case); mix-b: many requests, log-spread lengths.
SHAPES = {
    "16x1k": [1024] * 16,
    "4x4k": [4096] * 4,
    "1x16k": [16384],
    "mix-a": [8192, 3000, 1500, 1200, 800, 600, 400, 300, 200, 100],
    "mix-b": [4096, 4096, 2048, 2048, 2048, 1777, 1500, 1024, 1024, 1000, 900,
              800, 700, 600, 513, 500, 400, 300, 257, 200, 150, 100, 100, 100,
              3000, 2500, 1200, 999, 640, 333, 129, 100],
}
assert all(MIN_LEN <= x <= MAX_LEN for k in ("mix-a", "mix-b") for x in SHAPES[k])


class Case:
    def __init__(self, shape, lens, hq, hkv, d, causal=True, tag=None):
        self.shape = shape
        self.lens = list(lens)
        self.hq, self.hkv, self.d = hq, hkv, d
        self.causal = causal
        self.name = f"{tag or shape}/h{hq}-{hkv}/d{d}/{'causal' if causal else 'full'}"
        self.cu = np.concatenate([[0], np.cumsum(self.lens)]).astype(np.int32)
        self.total = int(self.cu[-1])
        self.flops = spillway.prefill_flops(self.cu, self.cu, hq, d, causal)


def all_cases(cpu_scale=None, causal=True):
    out = []
    for shape, lens in SHAPES.items():
        tag = None
        if cpu_scale is not None:
            lens = [max(1, int(round(x * cpu_scale))) for x in lens]
            tag = f"{shape}@{cpu_scale:g}"
        for hq, hkv, d in HEAD_CONFIGS:
            out.append(Case(shape, lens, hq, hkv, d, causal, tag))
    return out


def select_cases(cases, filters):
    if not filters:
        return cases
    pats = [f.strip() for f in filters.split(",") if f.strip()]
    # CPU case names carry "@scale" after the shape; match with and without it.
    plain = {c.name: re.sub(r"@[^/]*", "", c.name) for c in cases}
    return [c for c in cases if any(p in c.name or p in plain[c.name] for p in pats)]


# ----------------------------------------------------------------- inputs --

class Inputs:
    """One fixed input set per case: packed q [T, Hq, d], k/v [T, Hkv, d]."""

    def __init__(self, case, dtype, device, seed):
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        T = case.total
        self.q = torch.randn((T, case.hq, case.d), generator=g, device=device, dtype=torch.float32).to(dtype)
        self.k = torch.randn((T, case.hkv, case.d), generator=g, device=device, dtype=torch.float32).to(dtype)
        self.v = torch.randn((T, case.hkv, case.d), generator=g, device=device, dtype=torch.float32).to(dtype)
        self.cu_host = case.cu
        self.cu_dev = torch.from_numpy(case.cu).to(device)
        self.scale = 1.0 / math.sqrt(case.d)
        self.max_len = max(case.lens) if case.lens else 0


def reference(case, inp, rows_budget=1 << 27):
    """float32 attention per request on the inputs' device, chunked over query
    rows so a score block stays under rows_budget elements."""
    T, hq, d = inp.q.shape
    group = case.hq // case.hkv
    out = torch.zeros((T, hq, d), dtype=torch.float32, device=inp.q.device)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for b in range(len(case.lens)):
            s, e = int(case.cu[b]), int(case.cu[b + 1])
            L = e - s
            if L == 0:
                continue
            qb = inp.q[s:e].float().transpose(0, 1)  # [Hq, L, d]
            kb = inp.k[s:e].float().transpose(0, 1).repeat_interleave(group, 0)
            vb = inp.v[s:e].float().transpose(0, 1).repeat_interleave(group, 0)
            chunk = max(1, rows_budget // (hq * L))
            for r0 in range(0, L, chunk):
                r1 = min(L, r0 + chunk)
                kmax = r1 if case.causal else L  # square: row i sees keys <= i
                sc = torch.matmul(qb[:, r0:r1], kb[:, :kmax].transpose(1, 2)) * inp.scale
                if case.causal:
                    i = torch.arange(r0, r1, device=sc.device)[:, None]
                    j = torch.arange(kmax, device=sc.device)[None, :]
                    sc.masked_fill_(j > i, float("-inf"))
                p = torch.softmax(sc, dim=-1)
                out[s + r0:s + r1] = torch.matmul(p, vb[:, :kmax]).transpose(0, 1)
                del sc, p
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def max_rel_err(case, out, ref):
    worst = 0.0
    for b in range(len(case.lens)):
        s, e = int(case.cu[b]), int(case.cu[b + 1])
        if e == s:
            continue
        r = ref[s:e]
        den = torch.linalg.vector_norm(r).item()
        num = torch.linalg.vector_norm(out[s:e].float() - r).item()
        err = num / den if den > 0 else num
        if not math.isfinite(err):
            return float("inf")
        worst = max(worst, err)
    return worst


# -------------------------------------------------------- implementations --
# Each setup function returns (run, collect, note): run() does the timed work;
# collect(result) turns its return value into a packed [T, Hq, d] output for
# the correctness check (outside the timing).

def setup_spillway(case, inp, args):
    backend = "cpu" if inp.q.device.type == "cpu" else args.spillway_backend
    nthreads = args.threads if inp.q.device.type == "cpu" else 0
    plan = spillway.get_plan(inp.cu_host, inp.cu_host, case.hq, case.hkv, case.d, inp.q.dtype,
                             causal=case.causal, device=str(inp.q.device), backend=backend,
                             num_threads=nthreads)
    if abs(plan.flops - case.flops) > 1e-9 * case.flops:
        raise RuntimeError(f"plan FLOPs {plan.flops} != Python FLOPs {case.flops}")
    q, k, v, cu = inp.q, inp.k, inp.v, inp.cu_host

    def run():
        return spillway.varlen_attention(q, k, v, cu, cu, causal=case.causal, backend=backend,
                                         num_threads=nthreads)
    note = f"backend={plan.backend}"
    if plan.workspace_size:
        note += f", workspace={plan.workspace_size} B"
    return run, (lambda o: o), note


def _groups(case):
    """Requests grouped by length, in order of first appearance: [(L, [b...])]."""
    groups = {}
    for b, L in enumerate(case.lens):
        groups.setdefault(L, []).append(b)
    return list(groups.items())


def _dense_views(case, inp, layout):
    """Per group of equal-length requests: (L, [request ids], q, k, v) as
    [n, H, L, d]. Consecutive requests are zero-copy views of the packed
    buffers; others are gathered once here (outside any timing)."""
    out = []
    for L, ids in _groups(case):
        if L == 0:
            continue
        n = len(ids)
        consecutive = all(ids[i + 1] == ids[i] + 1 for i in range(n - 1))
        views = []
        for x in (inp.q, inp.k, inp.v):
            if consecutive:
                s = int(case.cu[ids[0]])
                t = x[s:s + n * L].view(n, L, x.shape[1], x.shape[2])
            else:
                t = torch.stack([x[int(case.cu[b]):int(case.cu[b]) + L] for b in ids])
            t = t.transpose(1, 2)  # [n, H, L, d]
            if layout == "bhsd":
                t = t.contiguous()
            views.append(t)
        out.append((L, ids, *views))
    return out


def _collect_dense(case, inp, groups, results):
    o = torch.empty_like(inp.q)
    for (L, ids, *_), r in zip(groups, results):
        r = r.transpose(1, 2)  # [n, L, H, d]
        for j, b in enumerate(ids):
            s = int(case.cu[b])
            o[s:s + L] = r[j]
    return o


def _gqa_modes(case):
    """How dense SDPA may see GQA, best first."""
    if case.hq == case.hkv:
        return ["mha"]
    return ["enable_gqa", "native", "expanded"]


def setup_sdpa(case, inp, args, backend_name):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "cpu": None}[backend_name]
    groups = _dense_views(case, inp, args.dense_layout)
    group = case.hq // case.hkv
    errors = []
    for mode in _gqa_modes(case):
        if mode == "expanded":
            calls = [(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
                     for _, _, q, k, v in groups]
        else:
            calls = [(q, k, v) for _, _, q, k, v in groups]
        kw = {"enable_gqa": True} if mode == "enable_gqa" else {}

        def run(calls=calls, kw=kw):
            if backend is None:
                return [F.scaled_dot_product_attention(q, k, v, is_causal=case.causal, **kw)
                        for q, k, v in calls]
            with sdpa_kernel(backend):
                return [F.scaled_dot_product_attention(q, k, v, is_causal=case.causal, **kw)
                        for q, k, v in calls]
        try:
            run()
            if inp.q.device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as e:  # this GQA mode is not taken; try the next
            errors.append(f"{mode}: {_one_line(e)}")
            continue
        note = f"gqa={mode}, {len(calls)} call(s) per run, layout={args.dense_layout}"
        if errors:
            note += " (rejected: " + "; ".join(errors) + ")"
        return run, (lambda res: _collect_dense(case, inp, groups, res)), note
    raise RuntimeError("no GQA mode ran: " + " | ".join(errors))


def setup_fa2_varlen(case, inp, args):
    op = torch.ops.aten._flash_attention_forward
    cu = inp.cu_dev.to(torch.int32)
    group = case.hq // case.hkv
    errors = []
    for mode in (["native", "expanded"] if group > 1 else ["mha"]):
        if mode == "expanded":
            k = inp.k.repeat_interleave(group, 1)
            v = inp.v.repeat_interleave(group, 1)
        else:
            k, v = inp.k, inp.v
        q = inp.q

        # Schema (torch 2.5 .. 2.12): (query, key, value, cum_seq_q, cum_seq_k,
        # max_q, max_k, dropout_p, is_causal, return_debug_mask, *, scale=None,
        # window_size_left=None, window_size_right=None, seqused_k=None,
        # alibi_slopes=None[, block_table=None, num_splits=None]) ->
        # (output, softmax_logsumexp, rng_state/philox_seed, unused/philox_offset,
        # debug_attn_mask). Only `scale` is passed by keyword; older builds
        # without it fall back to the default scale, 1/sqrt(d), the same value.
        def run(q=q, k=k, v=v, use_scale=[True]):
            if use_scale[0]:
                try:
                    return op(q, k, v, cu, cu, inp.max_len, inp.max_len, 0.0, case.causal,
                              False, scale=inp.scale)[0]
                except TypeError:
                    use_scale[0] = False
            return op(q, k, v, cu, cu, inp.max_len, inp.max_len, 0.0, case.causal, False)[0]
        try:
            run()
            torch.cuda.synchronize()
        except Exception as e:
            errors.append(f"{mode}: {_one_line(e)}")
            continue
        note = f"gqa={mode}"
        if errors:
            note += " (rejected: " + "; ".join(errors) + ")"
        return run, (lambda o: o), note
    raise RuntimeError(" | ".join(errors))


_FLASHINFER_WS = {}


def setup_flashinfer(case, inp, args, fi_backend):
    import flashinfer

    dev = inp.q.device
    if dev not in _FLASHINFER_WS:
        _FLASHINFER_WS[dev] = torch.zeros(512 << 20, dtype=torch.uint8, device=dev)
    ws = _FLASHINFER_WS[dev]
    cls = flashinfer.BatchPrefillWithRaggedKVCacheWrapper
    if fi_backend is None:
        w = cls(ws, "NHD")
    else:
        try:
            w = cls(ws, "NHD", backend=fi_backend)
        except TypeError as e:
            raise RuntimeError(f"flashinfer {getattr(flashinfer, '__version__', '?')} has no "
                               f"backend= option: {e}")
    indptr = torch.from_numpy(case.cu).to(torch.int32)  # host: plan() reads it on the CPU
    if hasattr(w, "plan"):
        try:
            w.plan(indptr, indptr, case.hq, case.hkv, case.d, causal=case.causal,
                   sm_scale=inp.scale, q_data_type=inp.q.dtype, kv_data_type=inp.k.dtype)
        except TypeError:
            w.plan(indptr, indptr, case.hq, case.hkv, case.d, causal=case.causal,
                   q_data_type=inp.q.dtype)
        q, k, v = inp.q, inp.k, inp.v

        def run():
            return w.run(q, k, v)
    else:  # flashinfer < 0.2
        w.begin_forward(indptr.to(dev), indptr.to(dev), case.hq, case.hkv, case.d)
        q, k, v = inp.q, inp.k, inp.v

        def run():
            return w.forward(q, k, v, causal=case.causal, sm_scale=inp.scale)
    note = f"flashinfer {getattr(flashinfer, '__version__', '?')}, backend={fi_backend or 'auto'}"
    return run, (lambda o: o), note


def setup_flashinfer_c(case, inp, args, path="fa2"):
    """The FlashInfer opponent compiled into libspillway, through the binding
    (same call, plan cache and workspace as "spillway"; only the backend
    differs): its FA2 path (backend "flashinfer") or its FA3 path (backend
    "flashinfer-fa3"). Refuses, with the reason, unless the library has it and
    the environment enables it."""
    ver = spillway.version()
    m = re.search(r"opponent: ([^\]]+)", ver)
    if not m or "flashinfer" not in m.group(1):
        raise RuntimeError(f"libspillway {ver!r} was built without the FlashInfer opponent "
                           "(configure with -DSPILLWAY_OPPONENT_FLASHINFER=<include dir>)")
    backend = "flashinfer-fa3" if path == "fa3" else "flashinfer"
    if path == "fa3" and "fa3" not in m.group(1):
        raise RuntimeError(f"libspillway {ver!r} has FlashInfer's FA2 path only (its FA3 path "
                           "needs 90a in SPILLWAY_CUDA_ARCHS)")
    if "flashinfer" not in os.environ.get("SPILLWAY_OPPONENT", "").split(","):
        raise RuntimeError("the FlashInfer opponent is compiled in but not enabled: "
                           "set SPILLWAY_OPPONENT=flashinfer")
    plan = spillway.get_plan(inp.cu_host, inp.cu_host, case.hq, case.hkv, case.d, inp.q.dtype,
                             causal=case.causal, device=str(inp.q.device), backend=backend)
    if plan.backend != backend:
        raise RuntimeError(f"plan resolved to {plan.backend}, not the opponent")
    q, k, v, cu = inp.q, inp.k, inp.v, inp.cu_host

    def run():
        return spillway.varlen_attention(q, k, v, cu, cu, causal=case.causal, backend=backend)
    ver_fi = re.match(r"flashinfer \S+", m.group(1))
    what = f"{ver_fi.group(0)} ({path})" if ver_fi else m.group(1)
    note = (f"{what} compiled into libspillway (backend={plan.backend}), "
            f"workspace={plan.workspace_size} B")
    return run, (lambda o: o), note


def make_setup(name):
    return {
        "spillway": setup_spillway,
        "spillway-cpu": setup_spillway,
        "sdpa-flash": lambda c, i, a: setup_sdpa(c, i, a, "flash"),
        "sdpa-cudnn": lambda c, i, a: setup_sdpa(c, i, a, "cudnn"),
        "torch-cpu-sdpa": lambda c, i, a: setup_sdpa(c, i, a, "cpu"),
        "fa2-varlen": setup_fa2_varlen,
        "flashinfer": lambda c, i, a: setup_flashinfer(c, i, a, None),
        "flashinfer-fa3": lambda c, i, a: setup_flashinfer(c, i, a, "fa3"),
        "flashinfer-c": setup_flashinfer_c,
        "flashinfer-c-fa3": lambda c, i, a: setup_flashinfer_c(c, i, a, "fa3"),
    }[name]


# ----------------------------------------------------------------- timing --

class _Flusher:
    def __init__(self, device, enabled):
        self.buf = (torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
                    if enabled and device.type == "cuda" else None)

    def __call__(self):
        if self.buf is not None:
            self.buf.zero_()


def time_cuda(fn, warmup, reps, flush):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    evs = []
    for _ in range(reps):
        flush()
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        evs.append((s, e))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in evs]


def time_cuda_interleaved(fns, warmup, reps, flush):
    """time_cuda for several implementations at once: rep r runs each once,
    starting at implementation r % n. Returns (times, errors): one list of
    times per fn, and per fn None or the exception that stopped it (it is
    then dropped from the rotation; the others go on)."""
    n = len(fns)
    errors = [None] * n
    live = list(range(n))

    def call(j):
        try:
            fns[j]()
            return True
        except Exception as e:  # this implementation only
            errors[j] = e
            return False

    for _ in range(warmup):
        live = [j for j in live if call(j)]
    torch.cuda.synchronize()
    evs = [[] for _ in fns]
    for r in range(reps):
        order = [live[(r + i) % len(live)] for i in range(len(live))] if live else []
        for j in order:
            flush()
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            ok = call(j)
            e.record()
            if ok:
                evs[j].append((s, e))
        live = [j for j in live if errors[j] is None]
    torch.cuda.synchronize()
    times = [[s.elapsed_time(e) for s, e in ev] if errors[j] is None else []
             for j, ev in enumerate(evs)]
    return times, errors


def time_cpu(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


# Quiet gap before every timed CPU call. torch's OpenMP workers keep spinning
# on the pinned CPUs for a while after torch returns (1-5 ms seen on a Zen 4
# box; bench/dev/cpu_fast_short.py measures it), so whichever call
# follows torch's shares its CPUs with them. The gap lets them park before
# either implementation runs; it does not change what torch does inside its
# call (unlike OMP_WAIT_POLICY=passive). Recorded in the JSON as cpu_gap_ms.
CPU_GAP_S = 0.1


def time_cpu_interleaved(fns, warmup, reps):
    """Runs fns rep by rep, the order reversed every other rep, each timed
    call after a CPU_GAP_S pause; returns one list of times (ms) per fn,
    index i of each from the same rep."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    order = list(range(len(fns)))
    for rep in range(reps):
        for j in (order if rep % 2 == 0 else order[::-1]):
            time.sleep(CPU_GAP_S)
            t0 = time.perf_counter()
            fns[j]()
            times[j].append((time.perf_counter() - t0) * 1e3)
    return times


def _cpu_core_of(cpu):
    """(package, core) of a logical CPU from sysfs, or None."""
    base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
    try:
        with open(base + "physical_package_id") as f:
            pkg = int(f.read())
        with open(base + "core_id") as f:
            core = int(f.read())
        return (pkg, core)
    except (OSError, ValueError):
        return None


def choose_cpus(n):
    """n logical CPUs of this process's allowed set, one per physical core
    first (two threads on SMT siblings would share one core's AMX unit and
    vector ports); CPU 0 last (interrupt housekeeping). Returns (cpus, note)."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) > n and 0 in allowed:
        allowed = allowed[1:] + [0]
    picked, cores = [], set()
    for c in allowed:
        core = _cpu_core_of(c)
        if core is not None and core in cores:
            continue
        if core is not None:
            cores.add(core)
        picked.append(c)
        if len(picked) == n:
            break
    note = "one logical CPU per physical core"
    if len(picked) < n:
        picked += [c for c in allowed if c not in picked][:n - len(picked)]
        note = "fewer physical cores than threads: SMT siblings used"
    if any(_cpu_core_of(c) is None for c in picked):
        note = "topology unknown (no sysfs)"
    return sorted(picked), note


def pin_all_threads(cpus):
    """Every thread of the process (torch's OpenMP pool included) to cpus;
    threads created later inherit the mask of their creator."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass


def torch_cpu_ops(run):
    """Op names of one run of a torch CPU implementation, from the profiler,
    limited to attention-related ones; and whether the fused CPU flash kernel
    (and no decomposed math path) ran."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    keys = sorted({e.key for e in prof.key_averages()})
    ops = [k for k in keys if any(w in k for w in ("attention", "sdp", "softmax", "bmm", "matmul",
                                                   "repeat_interleave"))]
    flash = ("aten::_scaled_dot_product_flash_attention_for_cpu" in keys
             and not any(w in k for k in keys for w in ("_math", "softmax", "bmm")))
    return ops, flash


def run_case_cpu(case, impls, args, dtype, info):
    """CPU mode: correctness of each implementation, then all of them timed
    interleaved rep by rep on the pinned CPUs (see the module docstring)."""
    print(f"\n== {case.name}: {len(case.lens)} request(s), {case.total} tokens, "
          f"{case.flops / 1e12:.3f} TFLOP", flush=True)
    device = torch.device("cpu")
    inp = Inputs(case, dtype, device, args.seed)
    ref = None
    records, runs = [], {}
    for name in impls:
        rec = {"case": case.name, "impl": name, "tflops": None, "gflops": None, "ms": None,
               "max_rel_err": None, "flops": case.flops, "cmd": info["cmd"],
               "env": info.get("cpu_env")}
        try:
            run, collect, note = make_setup(name)(case, inp, args)
            out = collect(run())
            if ref is None:
                ref = reference(case, inp)
            rec["max_rel_err"] = max_rel_err(case, out, ref)
            del out
            if name.startswith("torch"):
                ops, flash = torch_cpu_ops(run)
                rec["torch_ops"] = ops
                rec["torch_flash_kernel"] = flash
                note += (", torch kernel: " + ("fused CPU flash attention" if flash
                                               else "NOT the fused flash kernel: " + ",".join(ops)))
            rec["note"] = note
            runs[name] = run
        except Exception as e:
            rec["error"] = _one_line(e)
            print(f"  {name:15s} FAILED: {rec['error']}", flush=True)
            if args.verbose:
                traceback.print_exc()
        records.append(rec)
    names = [r["impl"] for r in records if r["impl"] in runs]
    pin_all_threads(info["cpu_env"]["cpus"])
    times = time_cpu_interleaved([runs[n] for n in names], args.warmup, args.reps)
    by = {r["impl"]: r for r in records}
    for name, ts in zip(names, times):
        rec = by[name]
        ms = statistics.median(ts)
        rec["ms"] = ms
        rec["tflops"] = case.flops / (ms * 1e-3) / 1e12
        rec["gflops"] = rec["tflops"] * 1e3
        rec["times_ms"] = [round(t, 4) for t in ts]
        spread = (max(ts) - min(ts)) / ms if ms > 0 else 0.0
        print(f"  {name:15s} {ms:9.3f} ms  {rec['gflops']:8.1f} GFLOP/s  "
              f"max_rel_err {rec['max_rel_err']:.2e}  (spread {spread:.0%})  {rec.get('note', '')}",
              flush=True)
    main_name = impls[0]
    if main_name in names:
        tm = times[names.index(main_name)]
        ratios = {}
        for o, to in zip(names, times):
            if o == main_name:
                continue
            per = [b / a for a, b in zip(tm, to) if a > 0]
            ratios[o] = statistics.median(per)
            by[main_name].setdefault("ratio_range", {})[o] = [min(per), max(per)]
            print(f"  {main_name} / {o}: {ratios[o]:.2f}x (median of {len(per)} per-rep ratios, "
                  f"range {min(per):.2f}-{max(per):.2f})", flush=True)
        by[main_name]["ratios"] = ratios
    del inp, ref, runs
    spillway.clear_caches()
    return records


def _one_line(e):
    s = f"{type(e).__name__}: {e}"
    s = " ".join(s.split())
    return s[:500]


# ------------------------------------------------------------------ report --

def slug(s):
    s = s.lower().replace("nvidia", "").replace("(r)", "").replace("(tm)", "")
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s or "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def env_info(args, device, argv):
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "spillway": spillway.version(),
        # (the opponents a run measures depend on SPILLWAY_OPPONENT: part of the command)
        "cmd": "".join(f"{v}={shlex.quote(os.environ[v])} " for v in ("SPILLWAY_OPPONENT",)
                       if os.environ.get(v))
               + "python " + shlex.join(["bench/prefill.py"] + list(argv)),
        "dtype": args.dtype,
        "cpu": cpu_model(),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
        try:
            info["cudnn"] = str(torch.backends.cudnn.version())
        except Exception:
            info["cudnn"] = "n/a"
        try:
            import flashinfer
            info["flashinfer"] = getattr(flashinfer, "__version__", "?")
        except Exception as e:
            info["flashinfer"] = f"not available ({type(e).__name__})"
    else:
        info["threads"] = args.threads
        info["cpu_scale"] = args.cpu_scale
        info["spillway_cpu_isa"] = spillway.cpu_isa()
        cpus, topo = args.cpu_pinned
        info["cpus_pinned"] = f"{cpus} ({topo})"
        info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        info["cpu_env"] = {
            "cpu": info["cpu"], "spillway_cpu_isa": info["spillway_cpu_isa"],
            "threads": args.threads, "cpus": cpus, "cpu_topology": topo,
            "cpu_gap_ms": CPU_GAP_S * 1e3,
            "torch_num_threads": torch.get_num_threads(),
            "torch_cpu_capability": info["torch_cpu_capability"],
            "spillway_num_threads_env": os.environ.get("SPILLWAY_NUM_THREADS"),
            "spillway_cpu_isa_env": os.environ.get("SPILLWAY_CPU_ISA"),
        }
    return info


def fmt(x, nd=1):
    if x is None:
        return "err"
    return f"{x:.{nd}f}" if abs(x) >= 10 else f"{x:.{nd + 1}f}"


def render_md(records, impls, info, cases, device_label, json_path, peak, unit):
    by = {(r["case"], r["impl"]): r for r in records}
    case_names = []
    for r in records:
        if r["case"] not in case_names:
            case_names.append(r["case"])
    main = impls[0]
    opps = impls[1:]
    key = "gflops" if unit == "GFLOP/s" else "tflops"
    lines = [f"### {device_label}", ""]
    for k in ("gpu", "cpu", "date", "torch", "cuda", "cudnn", "flashinfer", "spillway", "dtype",
              "threads", "cpu_scale", "spillway_cpu_isa", "cpus_pinned", "torch_cpu_capability",
              "timing"):
        if k in info:
            lines.append(f"- {k}: {info[k]}")
    cmds = []
    for r in records:
        c = r.get("cmd")
        if c and c not in cmds:
            cmds.append(c)
    for c in cmds or [info["cmd"]]:
        lines.append(f"- command: `{c}`")
    lines.append(f"- results: `{os.path.relpath(json_path, _ROOT)}`")
    mixes = [(n, ls) for n, ls in SHAPES.items() if n.startswith("mix")]
    for n, ls in mixes:
        lines.append(f"- {n} lengths (before any CPU scaling): {ls} (total {sum(ls)})")
    lines.append("")
    head = ["case"] + [f"{i}" for i in impls] + [f"{main} / {o}" for o in opps]
    if peak:
        head.append(f"{main} / peak ({peak:g})")
    paired = any((r.get("ratios") or {}) for r in records if r.get("impl") == main)
    lines.append(f"{unit} (higher is better); " +
                 (f"ratios are the median over reps of the opponent's time over {main}'s in "
                  "the same rep (CPU mode: paired), not the ratio of the rates shown."
                  if paired else f"ratios are {main}'s rate over the opponent's."))
    lines.append("")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for cn in case_names:
        row = [cn]
        vals = {}
        for i in impls:
            r = by.get((cn, i))
            v = r.get(key) if r else None
            vals[i] = v
            row.append("—" if r is None else fmt(v, 1))
        for o in opps:
            a, b = vals.get(main), vals.get(o)
            paired = (by.get((cn, main)) or {}).get("ratios", {}).get(o)  # CPU mode
            row.append(f"{paired:.2f}x" if paired else f"{a / b:.2f}x" if a and b else "—")
        if peak:
            a = vals.get(main)
            row.append(f"{a / peak:.0%}" if a else "—")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("max_rel_err (relative L2 against the float32 reference, worst request):")
    lines.append("")
    lines.append("| case | " + " | ".join(impls) + " |")
    lines.append("|" + "---|" * (len(impls) + 1))
    for cn in case_names:
        row = [cn]
        for i in impls:
            r = by.get((cn, i))
            e = r.get("max_rel_err") if r else None
            row.append("—" if r is None else ("err" if e is None else f"{e:.1e}"))
        lines.append("| " + " | ".join(row) + " |")
    errs = [r for r in records if r.get("error")]
    notes = {}
    for r in records:
        if r.get("note"):
            notes.setdefault(r["impl"], set()).add(r["note"])
    if notes:
        lines.append("")
        lines.append("Notes:")
        for i in impls:
            for n in sorted(notes.get(i, ())):
                lines.append(f"- {i}: {n}")
    if errs:
        lines.append("")
        lines.append("Failures:")
        for r in errs:
            lines.append(f"- {r['impl']} on {r['case']}: `{r['error']}`")
    return "\n".join(lines) + "\n"


MD_HEADER = """# Prefill attention: recorded table

Generated by `bench/prefill.py`; each section below is rewritten by a run on
that device (between its BEGIN/END markers). What is timed, the FLOP
convention and the correctness check are described at the top of
bench/prefill.py. Every implementation of a case is measured in the same
process on the same inputs; the commands that produced a section are listed
in it.
"""


def update_md(path, section_id, body):
    begin = f"<!-- BEGIN {section_id} -->"
    end = f"<!-- END {section_id} -->"
    block = f"{begin}\n{body}{end}\n"
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    if begin in text and end in text:
        a = text.index(begin)
        b = text.index(end) + len(end)
        if b < len(text) and text[b] == "\n":
            b += 1
        text = text[:a] + block + text[b:]
    else:
        if not text:
            text = MD_HEADER
        if not text.endswith("\n\n"):
            text = text.rstrip("\n") + "\n\n"
        text += block
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


# -------------------------------------------------------------------- main --

def run_case(case, impls, args, device, dtype, flusher, info):
    if device.type == "cpu":
        return run_case_cpu(case, impls, args, dtype, info)
    print(f"\n== {case.name}: {len(case.lens)} request(s), {case.total} tokens, "
          f"{case.flops / 1e12:.3f} TFLOP", flush=True)
    inp = Inputs(case, dtype, device, args.seed)
    ref = None
    records, timed = [], []  # timed: (rec, run, note) of the implementations that ran
    for name in impls:
        rec = {"case": case.name, "impl": name, "tflops": None, "ms": None, "max_rel_err": None,
               "flops": case.flops}
        rec["cmd"] = info["cmd"]
        try:
            run, collect, note = make_setup(name)(case, inp, args)
            if note:
                rec["note"] = note
            res = run()
            torch.cuda.synchronize()
            out = collect(res)
            if ref is None:
                ref = reference(case, inp)
            rec["max_rel_err"] = max_rel_err(case, out, ref)
            del out, res
            timed.append((rec, run, note))
        except Exception as e:
            rec["error"] = _one_line(e)
            print(f"  {name:15s} FAILED: {rec['error']}", flush=True)
            if args.verbose:
                traceback.print_exc()
        records.append(rec)
        torch.cuda.synchronize()
    del ref
    if timed:
        fns = [run for _, run, _ in timed]
        if args.no_interleave:
            all_times, errors = [], []
            for fn in fns:
                try:
                    all_times.append(time_cuda(fn, args.warmup, args.reps, flusher))
                    errors.append(None)
                except Exception as e:  # this implementation only
                    all_times.append([])
                    errors.append(e)
        else:
            all_times, errors = time_cuda_interleaved(fns, args.warmup, args.reps, flusher)
        for (rec, _, note), times, err in zip(timed, all_times, errors):
            if err is not None:
                rec["error"] = "timing: " + _one_line(err)
                print(f"  {rec['impl']:15s} FAILED: {rec['error']}", flush=True)
                if args.verbose:
                    traceback.print_exception(type(err), err, err.__traceback__)
                continue
            ms = statistics.median(times)
            rec["ms"] = ms
            rec["tflops"] = case.flops / (ms * 1e-3) / 1e12
            rec["times_ms"] = [round(t, 5) for t in times]
            spread = (max(times) - min(times)) / ms if ms > 0 else 0.0
            print(f"  {rec['impl']:15s} {ms:9.3f} ms  {rec['tflops']:7.1f} TFLOP/s  max_rel_err "
                  f"{rec['max_rel_err']:.2e}  (spread {spread:.0%})  {note or ''}", flush=True)
    del timed
    torch.cuda.synchronize()
    del inp
    spillway.clear_caches()
    torch.cuda.empty_cache()
    return records


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Case names: <shape>/h<Hq>-<Hkv>/d<d>/causal, shapes "
                                        + ", ".join(SHAPES))
    ap.add_argument("--cases", default="",
                    help="comma list; a case runs if any item is a substring of its name "
                         "(e.g. 'mix-a', 'd128', '1x16k/h32-8/d64'). Default: all")
    ap.add_argument("--impls", default="",
                    help="comma list of implementations (GPU: " + ",".join(GPU_IMPLS)
                         + "; CPU: " + ",".join(CPU_IMPLS) + "). Default: all of the mode")
    ap.add_argument("--out", default=None,
                    help="JSON path (default: a fresh bench/results/prefill-<gpu>-<UTC time>.json, "
                         "never an existing file)")
    ap.add_argument("--md", default=None,
                    help="markdown table to write/update (default: none)")
    ap.add_argument("--merge", action="store_true",
                    help="merge into an existing JSON (replacing equal case+impl records) "
                         "instead of overwriting it; for a run split over several commands")
    ap.add_argument("--reps", type=int, default=None, help="timed runs (>= 10; default 20, CPU 10)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 5, CPU 2)")
    ap.add_argument("--quick", action="store_true",
                    help="16x1k and mix-a at h32-8/d128 only, 10 reps, 3 warm-up")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--lens", default="",
                    help="development: one custom shape 'custom' with these comma-separated "
                         "lengths instead of the standard shapes")
    ap.add_argument("--no-causal", action="store_true",
                    help="non-causal (full) attention instead of causal for every case")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--spillway-backend", default="cuda", choices=["cuda", "cuda_portable", "cuda_hopper"])
    ap.add_argument("--dense-layout", default="bhsd", choices=["bshd", "bhsd"],
                    help="dense SDPA inputs: contiguous [B, H, S, d] copies made before "
                         "timing (bhsd, default: SDPA's canonical layout) or zero-copy "
                         "transposed views of the packed [T, H, d] buffers (bshd)")
    ap.add_argument("--no-flush", action="store_true", help="do not flush L2 between timed runs")
    ap.add_argument("--no-interleave", action="store_true",
                    help="GPU: time each implementation's reps in one block instead of "
                         "interleaving the implementations rep by rep")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="dense BF16 rate for the %%-of-peak column (default 770 on an H200)")
    ap.add_argument("--cpu", action="store_true", help="CPU mode: spillway-cpu vs torch-cpu-sdpa")
    ap.add_argument("--cpu-scale", type=float, default=0.125,
                    help="CPU mode: multiply every request length by this")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="CPU mode: threads for both (torch.set_num_threads, spillway num_threads)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print tracebacks of failures")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    if args.lens:
        SHAPES.clear()
        SHAPES["custom"] = [int(x) for x in args.lens.split(",") if x.strip()]

    if args.cpu:
        device = torch.device("cpu")
        # same N cores and N threads for both (see the module docstring)
        args.cpu_pinned = choose_cpus(args.threads)
        pin_all_threads(args.cpu_pinned[0])
        os.environ["SPILLWAY_NUM_THREADS"] = str(args.threads)
        torch.set_num_threads(args.threads)
        avail = CPU_IMPLS
        cases = all_cases(args.cpu_scale, causal=not args.no_causal)
        args.reps = args.reps or 10
        args.warmup = 2 if args.warmup is None else args.warmup
    else:
        if not torch.cuda.is_available():
            ap.error("no CUDA device (use --cpu for the CPU comparison)")
        device = torch.device(args.device)
        torch.cuda.set_device(device)
        avail = GPU_IMPLS
        cases = all_cases(causal=not args.no_causal)
        args.reps = args.reps or 20
        args.warmup = 5 if args.warmup is None else args.warmup
    if args.quick:
        args.reps, args.warmup = 10, 3
        cases = [c for c in cases if c.shape in ("16x1k", "mix-a") and c.d == 128]
    if args.reps < 10:
        ap.error("--reps must be >= 10 (the median of fewer runs is noise)")
    cases = select_cases(cases, args.cases)
    impls = [i.strip() for i in args.impls.split(",") if i.strip()] or list(avail)
    bad = [i for i in impls if i not in avail]
    if bad:
        ap.error(f"unknown implementation(s) for this mode: {bad}; choose from {avail}")
    if not cases:
        ap.error("no case matches --cases")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16

    info = env_info(args, device, argv)
    if device.type == "cuda":
        info["timing"] = (f"median of {args.reps} runs after {args.warmup} warm-up, CUDA events, "
                          f"L2 {'not flushed' if args.no_flush else 'flushed before each run'}, "
                          + ("each implementation's runs in one block" if args.no_interleave
                             else "implementations interleaved rep by rep (order rotating)"))
    else:
        info["timing"] = (f"median of {args.reps} runs after {args.warmup} warm-up of each, "
                          "implementations interleaved rep by rep (order alternating), "
                          f"{CPU_GAP_S * 1e3:.0f} ms idle before each timed call, wall "
                          "clock, process pinned to the listed CPUs; ratio = median of "
                          "per-rep ratios")
    if device.type == "cuda":
        label = info["gpu"]
        dev_slug = slug(label)
        peak = args.peak_tflops or (770.0 if "h200" in dev_slug else None)
        unit = "TFLOP/s"
    else:
        label = f"CPU: {info['cpu']}, {args.threads} thread(s), lengths x{args.cpu_scale:g}"
        dev_slug = "cpu-" + slug(info["cpu"])
        peak = None
        unit = "GFLOP/s"
    if args.merge and not args.out:
        print("--merge needs --out FILE (the results to merge into)", file=sys.stderr)
        return 2
    out_path = args.out
    if not out_path:
        # named now, created when the results are in (a suffix if taken)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out_path = os.path.join(_ROOT, "bench", "results", f"prefill-{dev_slug}-{stamp}.json")

    print(f"device: {label}")
    for k, v in info.items():
        print(f"  {k}: {v}")
    for n, ls in SHAPES.items():
        if n.startswith("mix"):
            shown = ls if not args.cpu else [max(1, int(round(x * args.cpu_scale))) for x in ls]
            print(f"  {n} lengths: {shown} (total {sum(shown)})")
    print(f"  cases: {len(cases)}, impls: {impls}, reps {args.reps}, warmup {args.warmup}, "
          f"L2 flush {'off' if args.no_flush or args.cpu else 'on'}")

    flusher = _Flusher(device, not args.no_flush)
    records = []
    for case in cases:
        records.extend(run_case(case, impls, args, device, dtype, flusher, info))

    if args.merge and os.path.exists(out_path):
        with open(out_path) as f:
            old = json.load(f)
        new_keys = {(r["case"], r["impl"]) for r in records}
        records = [r for r in old if (r["case"], r["impl"]) not in new_keys] + records
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    if args.out:
        f = open(out_path, "w")
    else:
        # a fresh file: "x" never replaces one (a committed record included)
        base = out_path[:-len(".json")]
        for k in itertools.count(1):
            out_path = base + ("" if k == 1 else f"-{k}") + ".json"
            try:
                f = open(out_path, "x")
                break
            except FileExistsError:
                continue
    with f:
        json.dump(records, f, indent=1)
        f.write("\n")
    print(f"\nwrote {out_path} ({len(records)} records)")

    if args.md:
        all_impls = [i for i in avail if any(r["impl"] == i for r in records)]
        body = render_md(records, all_impls, info, cases, label, out_path, peak, unit)
        update_md(args.md, f"prefill-{dev_slug}", body)
        print(f"updated {args.md}")
        print()
        print(body)
    failed = [r for r in records if r.get("error") and r["impl"].startswith("spillway")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
