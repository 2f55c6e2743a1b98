#!/bin/bash
# h200_call_v10_final.sh - one H200 call (issue 5, 2026-11-30): main's library (.carry/build-main,
# a clean worktree of the commit) through test_prefill_cuda (the wide kernel forced on its
# non-causal d128 cases too) and test_prefill_errors; the recorded non-causal 1x16k run
# (interleaved with cuDNN); then an L2-section sweep (SPILLWAY_PLAN_SECTION_MB) on the two mixes
# at d128 and d64, one process per value. Run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
DEBS=$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
B=$PWD/.carry/build-main
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=$B:$DEBS SPILLWAY_LIB=$B/libspillway.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
t0=$(date +%s); el() { echo "($(( $(date +%s) - t0 )) s)"; }
{ timeout 120 $B/tests/test_prefill_cuda; echo "test_prefill_cuda rc=$?"
  timeout 60 $B/tests/test_prefill_errors; echo "test_prefill_errors rc=$?"; } >"$OUT/test.log" 2>&1
echo "tests $(el)"; grep -E "rc=|cases \(|FAIL" "$OUT/test.log" | head -12
timeout 90 python3 bench/prefill.py --impls spillway,sdpa-cudnn --cases 1x16k --no-causal --md "" \
  --out "$OUT/prefill-h200-v10-noncausal-2.json" >"$OUT/nc.log" 2>&1
echo "nc rc=$? $(el)"; grep -E "^==|spillway  |cudnn  " "$OUT/nc.log"
for mb in 16 0 8 32 64 16; do
  echo "== SPILLWAY_PLAN_SECTION_MB=$mb" >>"$OUT/sections.log"
  SPILLWAY_PLAN_SECTION_MB=$mb timeout 60 python3 bench/prefill.py --impls spillway \
    --cases mix-a/h32-8/d128,mix-b/h32-8/d128,mix-a/h32-8/d64,mix-b/h32-8/d64 --md "" \
    --out /tmp/sec.json >>"$OUT/sections.log" 2>&1
  echo "sections $mb rc=$? $(el)"
done
grep -E "^== (S|m)|spillway  " "$OUT/sections.log"
