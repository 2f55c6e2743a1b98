#!/bin/sh
# cpu_fast_xeon.sh - ONE device call on the H200's host (Intel Xeon with AMX):
# the CPU fast path against torch's CPU SDPA, side by side, plus the kernel
# variants, in a few minutes. Writes two files:
#   $OUT/prefill-cpu.json   bench/prefill.py --cpu (library default kernel vs
#                           torch, interleaved, pinned; per-rep ratios)
#   $OUT/cpu-xeon.log       everything printed: CPU/topology, the AMX kernel
#                           checked on real tiles (cpu_fast_check, 40 random
#                           cases on every ISA, 20 more at 256 keys per tile;
#                           test_prefill_cpu, 700-token bf16 cases included),
#                           the fixed costs per call (cpu_fast_overhead: driver,
#                           K/V pack, scalar vs AVX-512 epilogue), then the
#                           variants on the bench's cases: amx (library: keys
#                           per tile chosen per unit), amx at fixed 128 / 256
#                           keys (SPILLWAY_CPU_AMX_KEYS), amx-v0 (the first
#                           kernel), then the bench/prefill.py output and its
#                           markdown table (for docs/perf/prefill.md).
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
  SPILLWAY_CPU_AMX_KEYS=256 taskset -c "$CPUS" build/dev/cpu_fast_check --cases 20 --seed 6 \
    --threads 2 --check-only --dtype bf16 --isa-min 4
  SPILLWAY_TEST_CASES=60 $B/tests/test_prefill_cpu 2>&1 | tail -3
  echo "== fixed costs per call (16 x 128 tokens, 2 threads) $(date -u +%T)"
  taskset -c "$CPUS" build/dev/cpu_fast_overhead 2
  echo "== variants (bf16, 2 threads, median of 7; amx_keys 0 = per unit, the default) $(date -u +%T)"
  taskset -c "$CPUS" build/dev/cpu_fast_check --perf-only --shapes bench --threads 2 --reps 7 \
    --isa-min 4
  for nk in 128 256; do
    SPILLWAY_CPU_AMX_KEYS=$nk taskset -c "$CPUS" build/dev/cpu_fast_check --perf-only \
      --shapes bench --threads 2 --reps 7 --isa-min 4 | grep "isa amx "
  done
  echo "== bench/prefill.py --cpu (library default kernel vs torch CPU SDPA) $(date -u +%T)"
  SPILLWAY_LIB=$PWD/$B/libspillway.so python3 bench/prefill.py --cpu --threads 2 \
    --cpu-scale 0.125 --reps 20 --warmup 3 --out "$OUT/prefill-cpu.json" --md "${TMPDIR:-/tmp}/prefill-cpu-xeon.md" 2>&1 |
    grep -v -E "USDT|gpuGetDeviceCount"
  echo "== done $(date -u +%T)"
} >"$LOG" 2>&1
tail -45 "$LOG"
