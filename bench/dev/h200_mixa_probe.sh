#!/bin/bash
# h200_mixa_probe.sh - one H200 call on mix-a's slow/bimodal timing (docs/perf/NOTES.md, issue 5):
# bench/dev/mixa_probe.py (per-rep times in three modes, host time per call) for spillway and
# FlashInfer's FA3 (opponent build .carry/build-opp, which also holds our kernels), the same with
# L2 sections off, the C CLI's own timing, and ncu per-launch duration + per-SM active cycles
# (min/max: the tail's imbalance), with nvidia-smi dmon logging clocks and power throughout.
# Stage with scripts/h200_stage.sh; run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
export LD_LIBRARY_PATH=$PWD/.carry/build-opp:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 SPILLWAY_OPPONENT=flashinfer
export SPILLWAY_LIB=$PWD/.carry/build-opp/libspillway.so
nvidia-smi dmon -s pc -o T >"$OUT/dmon.log" 2>&1 & DMON=$!
t0=$(date +%s)
timeout 200 python3 bench/dev/mixa_probe.py --impls spillway,flashinfer-c-fa3 >"$OUT/probe.log" 2>&1
echo "probe rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "^==|median" "$OUT/probe.log"
SPILLWAY_PLAN_SECTION_MB=0 timeout 60 python3 bench/dev/mixa_probe.py --cases mix-a/h32-8/d128,mix-a/h32-8/d64 \
  --modes bench,sync >"$OUT/probe-sec0.log" 2>&1
echo "sections off rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "^==|median" "$OUT/probe-sec0.log"
B=.carry/build-h200
LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu timeout 60 $B/spillway bench prefill \
  --cases mix-a --shapes h32-8/d128,h32-8/d64 --reps 20 >"$OUT/cli.log" 2>&1
echo "cli rc=$?"; tail -8 "$OUT/cli.log"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu timeout 120 $NCU --clock-control none \
  --kernel-name regex:prefill_kernel --launch-skip 1 --launch-count 12 \
  --metrics gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,sm__cycles_elapsed.max \
  $B/spillway bench prefill --cases mix-a --shapes h32-8/d128 --reps 10 --warmup 1 >"$OUT/ncu.txt" 2>&1
echo "ncu rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "gpu__time|sm__cycles" "$OUT/ncu.txt" | head -60
kill $DMON
