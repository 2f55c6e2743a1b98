#!/bin/bash
# h200_call_v9_fa3.sh - one H200 call (issue 5, docs/perf/NOTES.md "v9"): the v9 library
# (bench/dev/pending/hopper_v9_d64_3wg.patch built in a clean worktree, staged as
# .carry/build-v9) through test_prefill_cuda; the d64 cases A/B against v7 (.carry/build-h200,
# main) in alternating processes with cuDNN and the FA2 varlen op; then the FlashInfer FA3
# opponent (.carry/build-opp) through its GPU test and a first bench on the d128 cases.
# Stage with scripts/h200_stage.sh test_prefill_cuda test_prefill_errors, copy the v9 build
# (libspillway.so* and tests/test_prefill_cuda) into .carry/build-v9, run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
DEBS=$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
t0=$(date +%s)
LD_LIBRARY_PATH=$PWD/.carry/build-v9:$DEBS timeout 170 .carry/build-v9/tests/test_prefill_cuda >"$OUT/v9-test.log" 2>&1
echo "v9 test_prefill_cuda rc=$? ($(( $(date +%s) - t0 )) s)"; grep -m8 FAIL "$OUT/v9-test.log"; tail -2 "$OUT/v9-test.log"
for r in 1 2; do for v in v9 v7; do
  d=build-$v; [ $v = v7 ] && d=build-h200
  echo "== $v round $r ==" >>"$OUT/ab.log"
  LD_LIBRARY_PATH=$PWD/.carry/$d:$DEBS SPILLWAY_LIB=$PWD/.carry/$d/libspillway.so timeout 110 \
    python3 bench/prefill.py --cases d64 --impls spillway,sdpa-cudnn,fa2-varlen --md "" \
    --out "$OUT/d64-$v-ab$r.json" --reps 10 >>"$OUT/ab.log" 2>&1
  echo "$v round $r rc=$? ($(( $(date +%s) - t0 )) s)"
done; done
grep -E "^==|spillway / " "$OUT/ab.log"
export LD_LIBRARY_PATH=$PWD/.carry/build-opp:$DEBS SPILLWAY_LIB=$PWD/.carry/build-opp/libspillway.so
SPILLWAY_OPPONENT=flashinfer SPILLWAY_TEST_OPPONENT=fa3 timeout 120 .carry/build-opp/tests/test_opponent_flashinfer >"$OUT/fa3.log" 2>&1
echo "test_opponent_flashinfer (fa3) rc=$? ($(( $(date +%s) - t0 )) s)"; grep -m12 FAIL "$OUT/fa3.log"; tail -3 "$OUT/fa3.log"
SPILLWAY_OPPONENT=flashinfer timeout 150 python3 bench/prefill.py --cases d128 --impls spillway,flashinfer-c-fa3,sdpa-cudnn \
  --md "" --out "$OUT/fa3-d128.json" --reps 10 >>"$OUT/fa3.log" 2>&1
echo "fa3 bench rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "^==|spillway|flashinfer|cudnn" "$OUT/fa3.log" | tail -40
