"""cpu_fast_short - the bench's short-request case (B requests of L tokens,
bf16, causal; default 16 x 128) through Spillway's CPU fast path and
PyTorch's CPU SDPA in one process, and what running right after torch does
to OUR time. Development driver; measurement only.

Per shape, three interleaved orders, each `--reps` rounds:
  ours-ours    ours timed right after ours (no torch call in between)
  torch-ours   ours timed right after a torch call (torch's OpenMP workers
               may still be spinning on the same CPUs)
  torch-gap    the same, with --gap-ms of sleep between torch and ours
and torch timed after ours. The process is pinned to --cpus (default: the
first --threads CPUs it may use), like bench/prefill.py --cpu.

Build first: sh bench/dev/cpu_fast_check.sh   (makes build/dev/libcpu_fast_dev.so)
Usage: python3 bench/dev/cpu_fast_short.py [--threads 2] [--reps 15] [--isa -1]
       [--shape B,L,hq,hkv,d ...] [--gap-ms 100] [--json FILE]
FLOPs = 4 * d * Hq * sum over rows of visible keys (DESIGN.md)."""
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
ap.add_argument("--reps", type=int, default=15)
ap.add_argument("--isa", type=int, default=-1,
                help="0 scalar 1 avx2 2 avx512 3 avx512bf16 4 amx; -1 best")
ap.add_argument("--gap-ms", type=float, default=100.0)
ap.add_argument("--cpus", help="comma list of CPUs to pin to")
ap.add_argument("--json")
ap.add_argument("--shape", action="append", help="B,L,hq,hkv,d (repeatable)")
a = ap.parse_args()

cpus = ([int(c) for c in a.cpus.split(",")] if a.cpus
        else sorted(os.sched_getaffinity(0))[:a.threads])
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
lib.sw_cpu_isa_best.restype = C.c_int
isa = lib.sw_cpu_isa_best() if a.isa < 0 else a.isa
torch.set_num_threads(a.threads)
names = ["scalar", "avx2", "avx512", "avx512bf16", "amx"]


def pin():
    # every thread of the process (torch's pool included), as bench/prefill.py does
    for t in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(t), cpus)
        except OSError:
            pass


print(f"torch {torch.__version__} threads {torch.get_num_threads()} capability "
      f"{torch.backends.cpu.get_cpu_capability()}; spillway isa {names[isa]}; cpus {cpus}; "
      f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; load {os.getloadavg()}")
shapes = [(16, 128, 16, 2, 256), (16, 128, 32, 8, 128), (16, 128, 32, 8, 64)]
if a.shape:
    shapes = [tuple(int(x) for x in sh.split(",")) for sh in a.shape]
rows = []
for (B, L, hq, hkv, d) in shapes:
    g = torch.Generator().manual_seed(0)
    Qt = torch.randn(B, hq, L, d, generator=g).to(torch.bfloat16)
    Kt = torch.randn(B, hkv, L, d, generator=g).to(torch.bfloat16)
    Vt = torch.randn(B, hkv, L, d, generator=g).to(torch.bfloat16)
    Q = Qt.transpose(1, 2).reshape(B * L, hq * d).contiguous()  # ours: [tokens, heads*d]
    K = Kt.transpose(1, 2).reshape(B * L, hkv * d).contiguous()
    V = Vt.transpose(1, 2).reshape(B * L, hkv * d).contiguous()
    O = torch.empty_like(Q)
    ind = torch.arange(0, (B + 1) * L, L, dtype=torch.int32)
    pb = Problem(2, B, hq, hkv, d, 1, d ** -0.5, ind.data_ptr(), ind.data_ptr(), Q.data_ptr(),
                 K.data_ptr(), V.data_ptr(), O.data_ptr(), None, hq * d, hkv * d, hkv * d, hq * d)
    flops = 4.0 * d * hq * B * (L * (L + 1) // 2)
    ours = lambda: lib.sw_cpu_prefill_fast_isa(C.byref(pb), a.threads, isa)
    theirs = lambda: F.scaled_dot_product_attention(Qt, Kt, Vt, is_causal=True, enable_gqa=True)
    ours()
    ref = theirs()
    err = ((O.float() - ref.transpose(1, 2).reshape(B * L, hq * d).float()).norm()
           / ref.float().norm()).item()
    pin()
    for _ in range(3):
        ours(), theirs()

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    res = {"ours-ours": [], "torch-ours": [], "torch-gap": [], "torch": []}
    for _ in range(a.reps):
        ours()
        res["ours-ours"].append(timed(ours))
        res["torch"].append(timed(theirs))
        res["torch-ours"].append(timed(ours))
        theirs()
        time.sleep(a.gap_ms * 1e-3)
        res["torch-gap"].append(timed(ours))
    med = {k: statistics.median(v) for k, v in res.items()}
    tag = f"{B}x{L} hq{hq} hkv{hkv} d{d} causal"
    print(f"{tag}: ours after ours {med['ours-ours']:7.3f} ms ({flops / med['ours-ours'] * 1e-6:6.1f} "
          f"GFLOP/s) | after torch {med['torch-ours']:7.3f} | after torch + {a.gap_ms:.0f} ms gap "
          f"{med['torch-gap']:7.3f} | torch {med['torch']:7.3f} ms ({flops / med['torch'] * 1e-6:6.1f}"
          f" GFLOP/s) | torch / ours-after-ours {med['torch'] / med['ours-ours']:4.2f}x | rel L2 vs "
          f"torch {err:.1e}", flush=True)
    rows.append(dict(shape=tag, isa=names[isa], threads=a.threads, reps=a.reps, flops=flops,
                     median_ms=med, times_ms=res, rel_l2_vs_torch=err))
if a.json:
    with open(a.json, "w") as f:
        json.dump(dict(driver="bench/dev/cpu_fast_short.py", torch=torch.__version__, cpus=cpus,
                       omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), gap_ms=a.gap_ms,
                       results=rows), f, indent=1)
