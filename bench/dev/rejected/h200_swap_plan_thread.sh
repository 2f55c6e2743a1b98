#!/usr/bin/env bash
# Helper H11 (2026-11-30), one call on the lent H200 for issue 4's host-tier line: the planner
# thread (SPILLWAY_SWAP_PLAN_THREAD, default 1 for a device pool; 0 = plan, lease and submit on
# the caller's thread between the tiles' kernels, as in commit 74ad0f0) and the per-tile
# unpin by the tile's own slots instead of a scan of the pool, no ev_stage record for a tile
# without a scatter (both always on). Nothing is compiled there: the library, the CLI and
# test_swap_cuda built here for sm_90a are staged under .carry/build-h200
# (scripts/h200_stage.sh test_swap_cuda). Run from the repo root with carry [".carry"]:
#   OUT=$OUT bash bench/dev/h200_swap_plan_thread.sh
# <= 2.5 minutes, 6 files under $OUT: test_swap_cuda (16 random cases + the fixed checks,
# host gather included) with the planner thread on, then `spillway bench swap --cases host`
# interleaved on / off / on / off.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT" .carry/debs/root
for f in .carry/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" .carry/debs/root; done
B=.carry/build-h200
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  SPILLWAY_SWAP_PLAN_THREAD=1 SW_TEST_SWAP_CASES=16 timeout 55 $B/tests/test_swap_cuda
  echo "test_swap_cuda plan_thread=1 rc=$?"
} > "$OUT/swap-h200-planthread-test.log" 2>&1
grep -E "rc=|host gather|cases \(|FAIL" "$OUT/swap-h200-planthread-test.log" | head -30
n=0
for v in 1 0 1 0; do
  n=$((n + 1))
  echo "=== run $n: SPILLWAY_SWAP_PLAN_THREAD=$v"
  SPILLWAY_SWAP_PLAN_THREAD=$v timeout 22 $B/spillway bench swap --cases host --dir /var/tmp \
    --raw-mb 64 --json "$OUT/swap-h200-planthread$v-run$n.json" 2>&1 |
    grep -v -E "^  (offload|decode): +[0-9]+%"
done > "$OUT/swap-h200-planthread-bench.log" 2>&1
grep -E "^===|host_tier_read_GBps|attend_ms_per_step|plan_ms|submit_ms|finish_ms|compute_ms|max_rel" \
  "$OUT/swap-h200-planthread-bench.log"
