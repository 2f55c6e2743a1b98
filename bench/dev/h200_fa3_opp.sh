#!/bin/bash
# h200_fa3_opp.sh - the FlashInfer FA3 opponent's first GPU run (issue 5): its GPU test on the
# FA3 path, then spillway vs flashinfer-c-fa3 vs cuDNN on every case. Needs an opponent build
# (cmake -DSPILLWAY_CUDA_ARCHS=90a -DSPILLWAY_OPPONENT_FLASHINFER=/work/opp/flashinfer/include,
# CUTLASS beside the headers) staged into .carry/build-opp (scripts/h200_stage.sh does it) and
# the liburing/hiredis debs in .carry/debs. Run from the repo root with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
export LD_LIBRARY_PATH=$PWD/.carry/build-opp:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 SPILLWAY_OPPONENT=flashinfer
export SPILLWAY_LIB=$PWD/.carry/build-opp/libspillway.so
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
SPILLWAY_TEST_OPPONENT=fa3 timeout 240 .carry/build-opp/tests/test_opponent_flashinfer >"$OUT/opp-fa3-test.log" 2>&1
echo "test_opponent_flashinfer (fa3) rc=$?"; grep -m12 FAIL "$OUT/opp-fa3-test.log"; tail -3 "$OUT/opp-fa3-test.log"
timeout 330 python3 bench/prefill.py --impls spillway,flashinfer-c-fa3,sdpa-cudnn --md "" \
  --out "$OUT/prefill-h200-fa3.json" --reps 10 >"$OUT/bench-fa3.log" 2>&1
echo "bench rc=$?"; grep -E "^==|spillway|flashinfer|cudnn" "$OUT/bench-fa3.log" | head -80
