#!/usr/bin/env bash
# One call on the lent H200 (see docs/perf/NOTES.md): build with CUDA for
# sm_90a, run the whole C suite (GPU tests included) and the binding's tests,
# then the benchmarks. Stages: build ctest pytest cli gpu cpu mixa cpudev
# (default: build ctest pytest cli gpu cpu). At most 8 files come back from $OUT.
# Logs and results go to $OUT (or out/ when unset).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
stages=${*:-build ctest pytest cli gpu cpu}
has() { [[ " $stages " == *" $1 "* ]]; }
B=build-h200
if has build; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_CUDA=ON -DSPILLWAY_CUDA_ARCHS=90a \
    -DSPILLWAY_WERROR=OFF >"$B.log" 2>&1 &&
    cmake --build $B -j16 >>"$B.log" 2>&1 || { tail -30 "$B.log"; exit 1; }
  grep -E "spill|warning" "$B.log" | head -5
fi
export SPILLWAY_LIB=$PWD/$B/libspillway.so PYTHONPATH=$PWD/python
if has ctest; then
  (cd $B && ctest --output-on-failure 2>&1) | tee "$OUT/ctest.log" | tail -15
fi
if has pytest; then
  python3 -m pytest -q -rs tests/python 2>&1 | tee "$OUT/pytest.log" | tail -5
fi
if has cli; then
  { $B/spillway demo; $B/spillway bench prefill --json "$OUT/cli-prefill.json"; } 2>&1 |
    tee "$OUT/cli-prefill.log"
fi
if has gpu; then
  python3 bench/prefill.py --impls spillway,sdpa-flash,sdpa-cudnn,fa2-varlen \
    --out "$OUT/prefill-h200.json" --md "$OUT/prefill.md" 2>&1 | tee "$OUT/bench-gpu.log" | tail -40
fi
if has cpu; then
  python3 bench/prefill.py --cpu --threads 2 --cpu-scale 0.125 --out "$OUT/prefill-cpu.json" \
    --md "$OUT/prefill-cpu.md" 2>&1 | tee "$OUT/bench-cpu.log" | grep -E "^\| " | head -17
fi
if has mixa; then
  # Repeat of mix-a at d256 (see NOTES, "Open anomaly").
  python3 bench/prefill.py --cases mix-a/h16-2 --impls spillway,fa2-varlen --reps 30 --md "" \
    --out "$OUT/mixa-rep.json" 2>&1 | grep -E "spillway|fa2" | head -4
fi
if has cpudev; then
  # Development kernels of the CPU path (AMX among them) on this host's CPU.
  { lscpu | grep -E "Model name|Flags" | cut -c1-400; sh bench/dev/cpu_fast_check.sh &&
    build/dev/cpu_fast_check --cases 60 --threads 2 --reps 5; } 2>&1 | tee "$OUT/cpudev.log" | tail -30
fi
