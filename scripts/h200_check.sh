#!/usr/bin/env bash
# The recorded runs on the H200, built there: build with CUDA for sm_90a, run
# the whole C suite (GPU tests included) and the binding's tests, then the
# benchmarks (bench/results/README.md lists what each stage records).
# Stages: build ctest pytest cli gpu cpu cpudev opp (default: build ctest
# pytest cli gpu cpu). The GPU test suite alone, built here: scripts/h200_gpu.sh.
# Stage opp (run it alone; needs .opp/ carried to the machine, see
# docs/opponents.md): an opponent build of its own with FlashInfer's headers,
# its tests against the reference, and the recorded prefill run with every
# opponent (FlashInfer's FA2 and FA3 paths compiled in, SDPA, the FA2 varlen op).
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
if has cpudev; then
  # Development kernels of the CPU path (AMX among them) on this host's CPU.
  { lscpu | grep -E "Model name|Flags" | cut -c1-400; sh bench/dev/cpu_fast_check.sh &&
    build/dev/cpu_fast_check --cases 60 --threads 2 --reps 5; } 2>&1 | tee "$OUT/cpudev.log" | tail -30
fi
if has opp; then
  # The FlashInfer opponent (docs/opponents.md). With an opponent build made
  # here (scripts/opp_build.sh) and staged by `scripts/h200_gpu.sh stage --opp
  # D` (.carry/opp.tar.xz: FA2 and FA3 paths, the recorded run's setting) that
  # build is measured; otherwise one is made here from the headers in .opp/
  # (ignored by git; carried): FA2 path only.
  impls=spillway,sdpa-flash,sdpa-cudnn,fa2-varlen,flashinfer-c
  [ -f .carry/opp.tar.xz ] && tar xJf .carry/opp.tar.xz -C .carry
  if [ -f .carry/opp/libspillway.so ]; then
    mkdir -p .carry/debs/root
    for f in .carry/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" .carry/debs/root; done
    export LD_LIBRARY_PATH=$PWD/.carry/opp:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
    lib=$PWD/.carry/opp/libspillway.so impls=$impls,flashinfer-c-fa3
  else
    OB=build-h200-opp FI=/tmp/spillway-opp
    tarball=$(ls .opp/flashinfer-*-headers.tar.xz 2>/dev/null | head -1)
    [ -n "$tarball" ] || { echo "opp: no .opp/flashinfer-*-headers.tar.xz (carry .opp)"; exit 1; }
    rm -rf $FI && mkdir -p $FI && tar -xJf "$tarball" -C $FI || exit 1
    t0=$(date +%s)
    cmake -S . -B $OB -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_CUDA=ON -DSPILLWAY_CUDA_ARCHS=90a \
      -DSPILLWAY_WERROR=OFF -DSPILLWAY_OPPONENT_FLASHINFER=$FI/flashinfer/include >"$OB.log" 2>&1 &&
      cmake --build $OB -j16 >>"$OB.log" 2>&1 || { tail -30 "$OB.log"; exit 1; }
    echo "opp: opponent build took $(( $(date +%s) - t0 )) s"
    (cd $OB && ctest --output-on-failure -R test_opponent 2>&1) | tee "$OUT/opp-ctest.log" | tail -8
    lib=$PWD/$OB/libspillway.so
  fi
  SPILLWAY_LIB=$lib SPILLWAY_OPPONENT=flashinfer python3 bench/prefill.py --impls $impls \
    ${OPP_CASES:+--cases $OPP_CASES} --out "$OUT/prefill-h200.json" --md "$OUT/prefill-h200.md" 2>&1 |
    tee "$OUT/prefill-h200.log" | tail -40
fi
