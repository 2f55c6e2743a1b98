#!/bin/bash
# h200_call_v10k3_swapk3.sh - one H200 call (2026-11-30): the wide non-causal d128 kernel with
# 3 K stages and one Q buffer (.carry/build-k3, -DSW_HOPPER_WIDE_KST=3) against main's 2 K + 2 Q
# (.carry/build-v10) on the long non-causal d128 cases, alternating processes; then
# test_swap_cuda on the bulk-copy tile kernel (SPILLWAY_SWAP_TILE_KERNEL=3, .carry/build-h200).
# Run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
DEBS=$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$(date +%s); el() { echo "($(( $(date +%s) - t0 )) s)"; }
for r in 1 2 3; do for v in k3 v10; do
  echo "== $v round $r ==" >>"$OUT/ab.log"
  LD_LIBRARY_PATH=$PWD/.carry/build-$v:$DEBS SPILLWAY_LIB=$PWD/.carry/build-$v/libspillway.so timeout 60 \
    python3 bench/prefill.py --cases 1x16k/h32-8/d128,mix-a/h32-8/d128 --no-causal --impls spillway,sdpa-cudnn \
    --md "" --out "$OUT/nc-$v-ab$r.json" --reps 20 >>"$OUT/ab.log" 2>&1
  echo "$v round $r rc=$? $(el)"
done; done
grep -E "^== (k|v|[0-9m])|spillway  |cudnn  " "$OUT/ab.log"
B=.carry/build-h200
{ SPILLWAY_SWAP_TILE_KERNEL=3 SW_TEST_SWAP_CASES=24 LD_LIBRARY_PATH=$PWD/$B:$DEBS timeout 90 $B/tests/test_swap_cuda
  echo "test_swap_cuda kernel 3 rc=$?"; } >"$OUT/swap-k3-test.log" 2>&1
echo "swap $(el)"; grep -E "rc=|cases \(|FAIL" "$OUT/swap-k3-test.log" | head
