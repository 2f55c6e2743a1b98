#!/usr/bin/env bash
# Issue 4 on the lent H200 (the swap engine's disk-bound case): `spillway bench
# swap --cases disk` with the disk-path counters, tiles cut at store chunks
# (SPILLWAY_SWAP_ALIGN_TILES=1, the default) against tiles cut by count (=0),
# interleaved, twice; then the aligned tiles with 8 tiles of read-ahead.
# Uses the binaries staged by scripts/h200_stage.sh (.carry/build-h200; carry
# [".carry"]). Writes $OUT/swap-disk.log (all runs) and one JSON per run
# (6 files). About 2 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root
for f in .carry/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" .carry/debs/root; done
export LD_LIBRARY_PATH=$PWD/.carry/build-h200:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
B=.carry/build-h200
LOG=$OUT/swap-disk.log
{ date -u; uname -r; df -hT /var/tmp | tail -1; nvidia-smi --query-gpu=name --format=csv,noheader; } >"$LOG" 2>&1
run() { # tag, env, extra args
  local tag=$1 env=$2; shift 2
  local cmd="$env $B/spillway bench swap --dir /var/tmp --cases disk --json $OUT/swap-disk-$tag.json $*"
  echo "=== $tag: $cmd" >>"$LOG"
  env $env timeout 240 $B/spillway bench swap --dir /var/tmp --cases disk \
    --json "$OUT/swap-disk-$tag.json" "$@" 2>&1 | grep -v -E "^  (offload|decode): +[0-9]+%" >>"$LOG"
  echo "rc=${PIPESTATUS[0]}" >>"$LOG"
}
for rep in 1 2; do
  run a0-r$rep SPILLWAY_SWAP_ALIGN_TILES=0
  run a1-r$rep SPILLWAY_SWAP_ALIGN_TILES=1
done
run a1-pf8 SPILLWAY_SWAP_ALIGN_TILES=1 --prefetch-depth 8
grep -E "^===|ms per step|waiting for reads|disk reads:|disk path|storage by|ticket queue|device .* in the steps" "$LOG"
