#!/bin/bash
# h200_call_s5_h11h12h13.sh - one H200 call (2026-11-30, session 5): the store's I/O thread A/B
# (helper H13, SPILLWAY_STORE_READ_THREAD), the swap planner thread A/B + test_swap_cuda (helper
# H11, bench/dev/h200_swap_plan_thread.sh), both from .carry/build-h200 (a clean worktree of main +
# both helpers' changes), then helper H12's stream probe and bulk-kernel variant check
# (.carry/h12, built here from H12's tree). Each stage's files go into one archive.
# Run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
B=.carry/build-h200
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
t0=$(date +%s); el() { echo "($(( $(date +%s) - t0 )) s)"; }
pack() { tar czf "$OUT/$1.tgz" -C "$OUT" "$1" && rm -rf "${OUT:?}/$1"; }
mkdir -p "$OUT/h13"
{ uptime; nproc; df -hT /var/tmp | tail -1; timeout 140 $B/spillway store bench --dir /var/tmp --size-mb 1024 \
    --passes 7 --host-passes 1 --engine-ab SPILLWAY_STORE_READ_THREAD=0 --json "$OUT/h13/store-h200-h13.json"
  echo "store bench rc=$?"; } >"$OUT/h13/store-h200-h13.log" 2>&1
echo "h13 $(el)"; grep -E "rc=|READ_THREAD|/ raw-seq: median|engine/raw per|A/B/raw per" "$OUT/h13/store-h200-h13.log"; pack h13
mkdir -p "$OUT/h11"
OUT=$OUT/h11 timeout 150 bash bench/dev/h200_swap_plan_thread.sh
echo "h11 rc=$? $(el)"; pack h11
mkdir -p "$OUT/h12"
{ timeout 40 .carry/h12/swap_stream_probe --reps 50; echo "probe rc=$?"; } >"$OUT/h12/swap-stream-probe-h200.log" 2>&1
{ SPILLWAY_SWAP_BULK_VARIANT=1 timeout 50 .carry/h12/swap_tile_check --check --cases 24 --kernels 3; echo "check variant=1 rc=$?"
  for v in 1 0; do SPILLWAY_SWAP_BULK_VARIANT=$v timeout 12 .carry/h12/swap_tile_check --bench --reps 50 --kernels 3,3; echo "bench variant=$v rc=$?"; done
} >"$OUT/h12/swap-tile-check-h200-fix.log" 2>&1
echo "h12 $(el)"; grep -hE "GB/s|FAIL|rc=|failure" "$OUT"/h12/*.log | head -60; pack h12
