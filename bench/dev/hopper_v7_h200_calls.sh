#!/bin/bash
# hopper_v7_h200_calls.sh STEP - the H200 calls behind the Hopper v7 and
# L2-section figures of docs/perf/NOTES.md (2026-11-30). Nothing is compiled
# on the device: build-h200 (-DSPILLWAY_CUDA_ARCHS=90a) staged by
# scripts/h200_stage.sh; for `ncu`, build-prof (the same with
# -DCMAKE_CUDA_FLAGS=-lineinfo) copied to .carry/prof; for `ab`, the
# baseline library copied to .carry/v4sec. Copy to .carry/, run with
# carry [".carry"]: bash .carry/hopper_v7_h200_calls.sh ncu|sections|ab
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root; for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
DEB=$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
case ${1:-} in
ncu) # full ncu sets of one timed launch (clocks left alone), details + per-SASS stall samples
  for c in 16x1k 1x16k; do
    LD_LIBRARY_PATH=$PWD/.carry/prof:$DEB timeout 200 $NCU --clock-control none --kernel-name regex:prefill_kernel \
      --launch-skip 2 --launch-count 1 --set full --import-source yes -o $OUT/ncu-$c -f \
      .carry/prof/spillway bench prefill --cases $c --shapes h32-8/d128 --reps 3 --warmup 1 > $OUT/ncu-$c.txt 2>&1
    $NCU -i $OUT/ncu-$c.ncu-rep --page details > $OUT/ncu-$c-details.txt 2>&1
    $NCU -i $OUT/ncu-$c.ncu-rep --page source --csv --print-source sass > $OUT/ncu-$c-sass.csv 2>&1
  done ;;
sections) # correctness, the full bench at the default (16 MiB), then 0 / 8 / 32 / 0 MiB sections
  bash scripts/h200_dev_run.sh test bench
  export LD_LIBRARY_PATH=$PWD/.carry/build-h200:$DEB SPILLWAY_LIB=$PWD/.carry/build-h200/libspillway.so
  for mb in 0 8 32 0; do
    SPILLWAY_PLAN_SECTION_MB=$mb timeout 200 python3 bench/prefill.py --impls spillway \
      --cases 16x1k,4x4k,mix,1x16k/h32-8/d128 --md "" --out $OUT/sec$mb.json --reps 10 2>&1 | tee -a $OUT/sections.log
  done
  LD_LIBRARY_PATH=$PWD/.carry/build-h200:$DEB timeout 120 $NCU --clock-control none --kernel-name regex:prefill_kernel \
    --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section WarpStateStats .carry/build-h200/spillway bench prefill \
    --cases 16x1k --shapes h32-8/d128 --reps 3 --warmup 1 > $OUT/ncu-16x1k-sec16.txt 2>&1 ;;
ab) # the new library (.carry/build-h200) and the baseline (.carry/v4sec) alternating, cuDNN in each process
  bash scripts/h200_dev_run.sh test
  export LD_LIBRARY_PATH=$DEB
  for v in v7 v4sec v7 v4sec; do
    L=$PWD/.carry/build-h200/libspillway.so; [ $v = v4sec ] && L=$PWD/.carry/v4sec/libspillway.so
    SPILLWAY_LIB=$L timeout 150 python3 bench/prefill.py --impls spillway,sdpa-cudnn \
      --cases 16x1k,4x4k,1x16k,mix-b --md "" --out $OUT/ab-$v-$RANDOM.json --reps 10 2>&1 | tee -a $OUT/ab.log
  done
  for v in v7 v4sec; do
    L=$PWD/.carry/build-h200/libspillway.so; [ $v = v4sec ] && L=$PWD/.carry/v4sec/libspillway.so
    SPILLWAY_LIB=$L timeout 100 python3 bench/prefill.py --impls spillway,sdpa-cudnn \
      --cases 1x16k/h32-8/d128,1x16k/h16-2 --no-causal --md "" --out $OUT/nc-$v.json --reps 10 2>&1 | tee -a $OUT/ab.log
  done ;;
*) echo "usage: $0 ncu|sections|ab" >&2; exit 2 ;;
esac
