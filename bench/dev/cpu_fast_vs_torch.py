"""cpu_fast_vs_torch - Spillway's CPU fast path against PyTorch's CPU
scaled_dot_product_attention (bf16) in ONE process on the same inputs, runs
interleaved (ours, torch, ours, torch, ...) so that both see the same
machine load. Development driver; measurement only.

Build first: sh bench/dev/cpu_fast_check.sh   (makes build/dev/libcpu_fast_dev.so)
Usage: python3 bench/dev/cpu_fast_vs_torch.py [--threads 2] [--reps 7] [--json FILE]
       [--shape q,kv,hq,hkv,d,causal ...]
FLOPs = 4 * q_len * kv_eff * d * Hq (DESIGN.md). Prints medians; also
checks our output against torch (relative L2) so a fast wrong answer shows."""
import argparse
import ctypes as C
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--reps", type=int, default=7)
ap.add_argument("--isa", type=int, default=-1, help="0 scalar 1 avx2 2 avx512 3 avx512bf16 4 amx; -1 best")
ap.add_argument("--json")
ap.add_argument("--shape", action="append",
                help="q,kv,hq,hkv,d,causal (repeatable); default: the four reporting shapes")
a = ap.parse_args()

lib = C.CDLL(os.environ.get("SW_DEV_LIB") or
             os.path.join(os.path.dirname(__file__), "../../build/dev/libcpu_fast_dev.so"))


class Problem(C.Structure):  # sw_attn_problem, src/attn/attn_internal.h
    _fields_ = [("dtype", C.c_int), ("batch", C.c_int32), ("num_qo_heads", C.c_int32),
                ("num_kv_heads", C.c_int32), ("head_dim", C.c_int32), ("causal", C.c_int32),
                ("sm_scale", C.c_float), ("qo_indptr", C.c_void_p), ("kv_indptr", C.c_void_p),
                ("q", C.c_void_p), ("k", C.c_void_p), ("v", C.c_void_p), ("o", C.c_void_p),
                ("lse", C.c_void_p), ("q_stride", C.c_int64), ("k_stride", C.c_int64),
                ("v_stride", C.c_int64), ("o_stride", C.c_int64)]


lib.sw_cpu_prefill_fast_isa.argtypes = [C.POINTER(Problem), C.c_int, C.c_int]
lib.sw_cpu_prefill_isa.restype = C.c_char_p
lib.sw_cpu_isa_best.restype = C.c_int
isa = lib.sw_cpu_isa_best() if a.isa < 0 else a.isa
torch.set_num_threads(a.threads)
names = ["scalar", "avx2", "avx512", "avx512bf16", "amx"]
print(f"torch {torch.__version__} threads {torch.get_num_threads()} capability "
      f"{torch.backends.cpu.get_cpu_capability()}; spillway isa {names[isa]}; "
      f"load average {os.getloadavg()}")
rows = []
shapes = [(2048, 2048, 16, 2, 256, True), (2048, 2048, 32, 8, 128, True),
          (2048, 2048, 32, 32, 128, True), (2048, 2048, 16, 2, 256, False)]
if a.shape:
    shapes = [tuple(int(x) for x in sh.split(",")) for sh in a.shape]
for (q, kv, hq, hkv, d, causal) in shapes:
    causal = bool(causal)
    g = torch.Generator().manual_seed(0)
    Qt = torch.randn(1, hq, q, d, generator=g).to(torch.bfloat16)
    Kt = torch.randn(1, hkv, kv, d, generator=g).to(torch.bfloat16)
    Vt = torch.randn(1, hkv, kv, d, generator=g).to(torch.bfloat16)
    # ours: [tokens, heads, d]
    Q = Qt[0].transpose(0, 1).contiguous()
    K = Kt[0].transpose(0, 1).contiguous()
    V = Vt[0].transpose(0, 1).contiguous()
    O = torch.empty_like(Q)
    qo = torch.tensor([0, q], dtype=torch.int32)
    kvp = torch.tensor([0, kv], dtype=torch.int32)
    pb = Problem(2, 1, hq, hkv, d, int(causal), d ** -0.5, qo.data_ptr(), kvp.data_ptr(),
                 Q.data_ptr(), K.data_ptr(), V.data_ptr(), O.data_ptr(), None,
                 hq * d, hkv * d, hkv * d, hq * d)
    vis = sum(min(kv, t + 1 + kv - q) for t in range(q)) if causal else q * kv
    flops = 4.0 * vis * d * hq
    ours = lambda: lib.sw_cpu_prefill_fast_isa(C.byref(pb), a.threads, isa)
    theirs = lambda: F.scaled_dot_product_attention(Qt, Kt, Vt, is_causal=causal, enable_gqa=True)
    ours()
    ref = theirs()
    err = ((O.float() - ref[0].transpose(0, 1).float()).norm() / ref.float().norm()).item()
    t_o, t_t = [], []
    for _ in range(a.reps):
        t0 = time.perf_counter(); ours(); t_o.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); theirs(); t_t.append(time.perf_counter() - t0)
    mo, mt = statistics.median(t_o), statistics.median(t_t)
    tag = f"1x{q}/{kv} hq{hq} hkv{hkv} d{d} {'causal' if causal else 'full'}"
    print(f"{tag}: spillway-{names[isa]} {mo*1e3:8.2f} ms {flops/mo*1e-9:6.1f} GFLOP/s | "
          f"torch-sdpa {mt*1e3:8.2f} ms {flops/mt*1e-9:6.1f} GFLOP/s | ratio {mt/mo:4.2f}x | "
          f"rel L2 vs torch {err:.1e}", flush=True)
    rows.append(dict(shape=tag, dtype="bf16", threads=a.threads, reps=a.reps,
                     spillway_isa=names[isa], spillway_ms=mo * 1e3, spillway_gflops=flops / mo * 1e-9,
                     torch_ms=mt * 1e3, torch_gflops=flops / mt * 1e-9, rel_l2_vs_torch=err))
if a.json:
    with open(a.json, "w") as f:
        json.dump(dict(driver="bench/dev/cpu_fast_vs_torch.py", torch=torch.__version__,
                       load_average_at_start=os.getloadavg(), results=rows), f, indent=1)
