#!/bin/bash
# h200_call_s5_bulkfix.sh - one H200 call (written 2026-11-30, session 5; not yet run: the
# device time ran out): swap kernel 3's variant
# DWIN|NODIV (descriptors in shared memory, no divisions in the producer loop), the library's
# opt-in variant 1, before it becomes the default: swap_tile_check against fp64 with it, the bench tile A/B against the first kernel 3
# (SPILLWAY_SWAP_BULK_VARIANT=1 / 0), test_swap_cuda with it, and `spillway bench swap
# --cases resident` both ways. .carry/build-h200 = a clean worktree of main + the change;
# .carry/h12b/swap_tile_check built here from it. Run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
B=.carry/build-h200
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
t0=$(date +%s); el() { echo "($(( $(date +%s) - t0 )) s)"; }
{ SPILLWAY_SWAP_BULK_VARIANT=1 timeout 40 .carry/h12b/swap_tile_check --check --cases 24 --kernels 3; echo "check variant=1 rc=$?"
  for r in 1 2; do for v in 1 0; do SPILLWAY_SWAP_BULK_VARIANT=$v timeout 12 .carry/h12b/swap_tile_check --bench --reps 50 --kernels 3; echo "bench variant=$v rc=$?"; done; done
} >"$OUT/swap-tile-check-h200-bulkfix.log" 2>&1
echo "check $(el)"; grep -E "GB/s|rc=|failure" "$OUT/swap-tile-check-h200-bulkfix.log"
{ SPILLWAY_SWAP_BULK_VARIANT=1 SW_TEST_SWAP_CASES=16 timeout 60 $B/tests/test_swap_cuda; echo "test_swap_cuda rc=$?"; } >"$OUT/swap-h200-bulkfix-test.log" 2>&1
echo "test $(el)"; grep -E "rc=|cases \(|FAIL" "$OUT/swap-h200-bulkfix-test.log" | head
for v in 1 0; do
  SPILLWAY_SWAP_BULK_VARIANT=$v timeout 30 $B/spillway bench swap --cases resident --dir /var/tmp \
    --json "$OUT/swap-h200-resident-bulk$v.json" >>"$OUT/swap-h200-bulkfix-bench.log" 2>&1
  echo "bench swap variant=$v rc=$? $(el)"
done
grep -E "tile_kernel_read_GBps|tile_kernel_ms_per_attend" "$OUT/swap-h200-bulkfix-bench.log"
