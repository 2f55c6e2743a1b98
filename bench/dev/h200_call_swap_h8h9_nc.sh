#!/bin/bash
# h200_call_swap_h8h9_nc.sh - one H200 call (2026-11-30): the v10 non-causal 1x16k record
# (.carry/build-v10 = main's library), the swap tile kernel A/B 2 vs 3 (bench/dev/swap_tile_ab.sh,
# helper H8's bulk-copy kernel) and the host-tier gathers issued ahead
# (bench/dev/h200_swap_gather_ahead.sh, helper H9), from .carry/build-h200 (a clean worktree of
# main + both helpers' changes) and .carry/swap_tile_check. Each stage's files are packed into
# one archive under $OUT (a call returns at most 8 files). Run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
DEBS=$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
t0=$(date +%s); el() { echo "($(( $(date +%s) - t0 )) s)"; }
pack() { tar czf "$OUT/$1.tgz" -C "$OUT" "$1" && rm -rf "${OUT:?}/$1"; }
mkdir -p "$OUT/nc"
LD_LIBRARY_PATH=$PWD/.carry/build-v10:$DEBS SPILLWAY_LIB=$PWD/.carry/build-v10/libspillway.so \
  PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 timeout 90 python3 bench/prefill.py --impls spillway,sdpa-cudnn \
  --cases 1x16k --no-causal --md "" --out "$OUT/nc/prefill-h200-v10-noncausal.json" >"$OUT/nc/nc.log" 2>&1
echo "nc rc=$? $(el)"; grep -E "^==|spillway  |cudnn  " "$OUT/nc/nc.log"; pack nc
mkdir -p "$OUT/h8"
OUT=$OUT/h8 timeout 200 bash bench/dev/swap_tile_ab.sh .carry/build-h200 .carry/swap_tile_check 2,3
echo "h8 rc=$? $(el)"; pack h8
mkdir -p "$OUT/h9"
OUT=$OUT/h9 timeout 260 bash bench/dev/h200_swap_gather_ahead.sh
echo "h9 rc=$? $(el)"; pack h9
