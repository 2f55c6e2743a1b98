#!/bin/sh
# cpu_fast_xeon.sh - the CPU fast path on an AMX host (the H200's Xeon) against
# torch's CPU SDPA, side by side, plus the kernel variants, in a few minutes
# (how prefill-cpu-h200host.json was produced; docs/perf/prefill.md). Writes two files:
#   $OUT/prefill-cpu.json   bench/prefill.py --cpu (library default kernel vs
#                           torch, interleaved, pinned; per-rep ratios)
#   $OUT/cpu-xeon.log       everything printed: CPU/topology, the AMX kernel
#                           checked on real tiles (cpu_fast_check, 40 random
#                           cases on every ISA, 20 more at 256 keys per tile,
#                           40 bf16 cases with scores spread over hundreds of
#                           log2 units (--qamp 100: probabilities below 2^-125);
#                           test_prefill_cpu, 700-token bf16 cases included),
#                           the costs per call on 16 x 128 tokens
#                           (cpu_fast_overhead: driver, K/V pack, epilogue,
#                           then nodp-v1 / nodp = kernel v1 / the library's
#                           kernel without tdpbf16ps, and amx-v1 / amx on real
#                           tiles, interleaved), then the variants on the
#                           bench's cases: amx (library), amx-v1
#                           (bench/dev/cpu_fast_amx_v1.c, the kernel before
#                           2026-11-30), amx at fixed 128 keys per tile; then
#                           bench/dev/cpu_fast_short.py (16 x 128 vs torch: our
#                           time right after our call, right after torch's, and
#                           after torch + 100 ms), then the bench/prefill.py
#                           output and its markdown table.
# Usage (repo root): OUT=/some/dir sh bench/dev/cpu_fast_xeon.sh
# Builds a CPU-only library in build-cpu-xeon/ (python binding via SPILLWAY_LIB).
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
LOG="$OUT/cpu-xeon.log"
B=build-cpu-xeon
NPROC=$(nproc)
{
  echo "== host"; lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\)|NUMA node0)" ; uptime
  grep -o -w -E "amx_tile|amx_bf16|avx512_bf16" /proc/cpuinfo | sort | uniq -c
  # two logical CPUs on two different physical cores, the same for every step
  CPUS=$(lscpu -p=CPU,CORE | grep -v '^#' | sort -t, -k2,2n -k1,1n | awk -F, '!seen[$2]++ {print $1}' |
         head -2 | paste -sd, -)
  echo "pinned CPUs for the dev driver: $CPUS"
  echo "== build"
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_CUDA=OFF >/dev/null 2>&1 &&
    cmake --build $B -j"$NPROC" >/dev/null 2>&1 && echo "library built" || echo "LIBRARY BUILD FAILED"
  sh bench/dev/cpu_fast_check.sh 2>&1 | tail -3
  echo "== AMX kernel on real tiles: random cases, every ISA (oracle: fp64) $(date -u +%T)"
  taskset -c "$CPUS" build/dev/cpu_fast_check --cases 40 --seed 5 --threads 2 --check-only
  taskset -c "$CPUS" build/dev/cpu_fast_check --amx-keys 256 --cases 20 --seed 6 \
    --threads 2 --check-only --dtype bf16 --isa-min 4
  taskset -c "$CPUS" build/dev/cpu_fast_check --cases 40 --seed 12 --threads 2 --check-only \
    --dtype bf16 --isa-min 4 --qamp 100
  SW_TEST_CASES=60 $B/tests/test_prefill_cpu 2>&1 | tail -3
  echo "== costs per call (16 x 128 tokens, 2 threads, 9 interleaved rounds) $(date -u +%T)"
  taskset -c "$CPUS" build/dev/cpu_fast_overhead 2 9
  echo "== variants (bf16, 2 threads, median of 7; amx_keys 0 = per unit, the default) $(date -u +%T)"
  taskset -c "$CPUS" build/dev/cpu_fast_check --perf-only --shapes bench --threads 2 --reps 7 \
    --isa-min 4
  for nk in 128; do
    taskset -c "$CPUS" build/dev/cpu_fast_check --amx-keys $nk --perf-only \
      --shapes bench --threads 2 --reps 7 --isa-min 4 | grep "isa amx "
  done
  echo "== 16 x 128 vs torch, our time after ours / after torch / after torch + 100 ms $(date -u +%T)"
  python3 bench/dev/cpu_fast_short.py --threads 2 --reps 15 --cpus "$CPUS" 2>&1 |
    grep -v -E "USDT|gpuGetDeviceCount"
  echo "== bench/prefill.py --cpu (library default kernel vs torch CPU SDPA) $(date -u +%T)"
  SPILLWAY_LIB=$PWD/$B/libspillway.so python3 bench/prefill.py --cpu --threads 2 \
    --cpu-scale 0.125 --reps 20 --warmup 3 --out "$OUT/prefill-cpu.json" --md "${TMPDIR:-/tmp}/prefill-cpu-xeon.md" 2>&1 |
    grep -v -E "USDT|gpuGetDeviceCount"
  echo "== done $(date -u +%T)"
} >"$LOG" 2>&1
tail -45 "$LOG"
