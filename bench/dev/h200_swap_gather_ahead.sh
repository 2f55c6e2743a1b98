#!/usr/bin/env bash
# Helper H9 (2026-11-30), one call on the lent H200 for issue 4's host-tier line: the gathers
# issued ahead on two gather streams (SPILLWAY_SWAP_GATHER_AHEAD, default 1; 0 = the gather on
# the compute stream after each tile's scatter, as in commit 1b79bb1) and the partial victim
# ranking (SPILLWAY_SWAP_RANK_FIRST, default 1; 0 = the full sw_swap_pool_rank per tile).
# Nothing is compiled there: the library, the CLI and test_swap_cuda built here for sm_90a are
# staged under .carry/build-h200 (scripts/h200_stage.sh test_swap_cuda). Run from the repo root
# with carry [".carry"]:   OUT=$OUT bash bench/dev/h200_swap_gather_ahead.sh
# ~3 minutes: test_swap_cuda (24 + 12 random cases, needle, errors, host gather) with the new
# path on and off, then `spillway bench swap --cases host` interleaved on / off / rank off.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT" .carry/debs/root
for f in .carry/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" .carry/debs/root; done
B=.carry/build-h200
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  SW_TEST_SWAP_CASES=24 timeout 75 $B/tests/test_swap_cuda; echo "test_swap_cuda ahead=1 rc=$?"
  SPILLWAY_SWAP_GATHER_AHEAD=0 SW_TEST_SWAP_CASES=12 timeout 45 $B/tests/test_swap_cuda
  echo "test_swap_cuda ahead=0 rc=$?"
} > "$OUT/swap-h200-ahead-test.log" 2>&1
grep -E "rc=|host gather|cases \(|FAIL" "$OUT/swap-h200-ahead-test.log" | head -30
n=0
for v in "1 1" "0 1" "1 0" "1 1" "0 1"; do
  set -- $v
  n=$((n + 1))
  echo "=== run $n: SPILLWAY_SWAP_GATHER_AHEAD=$1 SPILLWAY_SWAP_RANK_FIRST=$2"
  SPILLWAY_SWAP_GATHER_AHEAD=$1 SPILLWAY_SWAP_RANK_FIRST=$2 timeout 40 $B/spillway bench swap \
    --cases host --dir /var/tmp --json "$OUT/swap-h200-ahead$1-rank$2-run$n.json" 2>&1 |
    grep -v -E "^  (offload|decode): +[0-9]+%"
done > "$OUT/swap-h200-ahead-bench.log" 2>&1
grep -E "^===|host_tier_read_GBps|attend_ms_per_step|plan_ms|submit_ms|finish_ms|compute_ms|max_rel" \
  "$OUT/swap-h200-ahead-bench.log"
