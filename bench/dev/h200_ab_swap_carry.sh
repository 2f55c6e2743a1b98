#!/bin/bash
# h200_ab_swap_carry.sh - the last H200 call of 2026-11-30 (docs/perf/NOTES.md
# v6 second A/B, docs/perf/swap.md): nothing compiled there; .carry/ holds
# build-h200 (lib, CLI, tests/test_swap_cuda), swap_tile_check (nvcc -arch
# sm_90a of bench/dev/swap_tile_check.cu, built here) and the v4 library in
# .carry/v4. Copy to .carry/final.sh, run `bash .carry/final.sh` with carry
# [".carry"]: the quick swap GPU test (SW_TEST_SWAP_CASES=8), every tile
# kernel vs fp64, v6/v4 alternating on 1x16k d128 causal and non-causal
# (one process each), the disk case at read-ahead 16.
set -u
B=.carry/build-h200; mkdir -p .carry/debs/root; for f in .carry/debs/*.deb; do dpkg -x $f .carry/debs/root; done
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
SW_TEST_SWAP_CASES=8 timeout 90 $B/tests/test_swap_cuda > $OUT/swap-gpu-quick.log 2>&1; echo "test_swap_cuda quick rc=$?"; grep -E "FAIL|CHECK|host gather|cases \(" $OUT/swap-gpu-quick.log | tail -12
timeout 60 .carry/swap_tile_check --cases 40 --reps 20 > $OUT/swap-tile-check.log 2>&1; echo "swap_tile_check rc=$?"; grep -E "FAIL|^check|^kernel" $OUT/swap-tile-check.log | head
i=0; mkdir -p /tmp/ab
for v in v6 v4 v6 v4; do
  i=$((i+1))
  L=$PWD/$B/libspillway.so; [ $v = v4 ] && L=$PWD/.carry/v4/libspillway.so
  for nc in "--no-causal" ""; do
    SPILLWAY_LIB=$L timeout 40 python3 bench/prefill.py --impls spillway,sdpa-cudnn --cases 1x16k/h32-8/d128 $nc --md "" --out /tmp/ab/ab-$i-$v${nc:+-nc}.json --reps 10 >> $OUT/ab.log 2>&1
    echo "$v ${nc:-causal}: $(grep -E '^  (spillway|sdpa-cudnn) ' $OUT/ab.log | tail -2 | awk '{print $1, $4}' | paste -sd' ')"
  done
done
tar czf $OUT/ab-json.tgz -C /tmp ab
timeout 40 $B/spillway bench swap --dir /var/tmp --cases disk --prefetch-depth 16 --json $OUT/swap-disk-pf16.json > $OUT/swap-disk-pf16.log 2>&1; echo "disk pf16 rc=$?"; grep -E "^disk-bound +(disk|step)|read per step|per step:" $OUT/swap-disk-pf16.log
