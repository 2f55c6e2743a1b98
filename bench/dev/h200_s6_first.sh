#!/bin/bash
# h200_s6_first.sh STAGE... - the next session's first H200 call, prepared at the end of session 5
# (2026-11-30; docs/perf/NOTES.md "Open (issue 5)", docs/perf/swap.md, docs/perf/store.md). Stages:
#   bulkfix  swap kernel 3's opt-in DWIN|NODIV variant through swap_tile_check, test_swap_cuda and the
#            resident bench (bench/dev/h200_call_s5_bulkfix.sh; .carry/build-h200 + .carry/h12b)
#   shape    the store's request shape on the H200 host's disk, with --engine-ab's alternating order,
#            against the default (K and V runs merged: ~1 MiB requests, 4 MiB in flight): runs not
#            merged (~516 KiB requests, ~8 in flight: the raw-tiles loop's shape, which reads at
#            87-104% of raw-seq there), 512 KiB pieces with 4 MiB and with 8 MiB in flight;
#            1 GiB x 7 passes each (.carry/build-h200)
#   swapenv  test_swap_cuda under the switches CI on the H200 no longer covers by default (kernel 2,
#            which every pre-sm_90 GPU runs; gathers on the compute stream; the full victim ranking)
#   disk     the device pool's disk case with run-aware eviction off and on (SPILLWAY_SWAP_RUN_EVICT=0 / 4),
#            two rounds (issue 4's disk line; measured only on a host pool so far)
#   ncu      full ncu sets with per-SASS stall samples of mix-b d128 and mix-a d64 (where the short
#            items' time goes; .carry/prof = a build with -DCMAKE_CUDA_FLAGS=-lineinfo)
# Each stage's files are packed into one archive under $OUT. Run with carry [".carry"].
. bench/dev/h200_prelude.sh
for stage in "$@"; do mkdir -p "$OUT/$stage"; case $stage in
bulkfix)
  OUT=$OUT/bulkfix timeout 200 bash bench/dev/h200_call_s5_bulkfix.sh ;;
shape)
  for v in "SPILLWAY_STORE_READ_MERGE=0" \
           "SPILLWAY_STORE_READ_CHUNK=524288,SPILLWAY_STORE_READ_INFLIGHT=4194304" \
           "SPILLWAY_STORE_READ_CHUNK=524288,SPILLWAY_STORE_READ_INFLIGHT=8388608"; do
    n=$(( ${n:-0} + 1 ))
    { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 150 $B/spillway store bench --dir /var/tmp --size-mb 1024 \
        --passes 7 --host-passes 1 --engine-ab "$v" --json "$OUT/shape/store-h200-shape$n.json"
      echo "store bench rc=$?"; } >"$OUT/shape/store-h200-shape$n.log" 2>&1
    grep -E "rc=|/ raw-seq: median|engine/raw per|A/B/raw per" "$OUT/shape/store-h200-shape$n.log"
  done ;;
swapenv)
  for e in SPILLWAY_SWAP_TILE_KERNEL=2 SPILLWAY_SWAP_GATHER_AHEAD=0 SPILLWAY_SWAP_RANK_FIRST=0; do
    { env $e SW_TEST_SWAP_CASES=16 LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 60 $B/tests/test_swap_cuda
      echo "$e rc=$?"; } >"$OUT/swapenv/swap-h200-$e.log" 2>&1
    grep -E "rc=|cases \(|FAIL" "$OUT/swapenv/swap-h200-$e.log" | head -4
  done ;;
disk)
  for r in 1 2; do for w in 0 4; do
    { echo "# SPILLWAY_SWAP_RUN_EVICT=$w spillway bench swap --dir /var/tmp --cases disk"
      SPILLWAY_SWAP_RUN_EVICT=$w LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 120 $B/spillway bench swap --dir /var/tmp \
        --cases disk --json "$OUT/disk/swap-h200-runevict$w-r$r.json"; echo "rc=$?"; } >"$OUT/disk/swap-h200-runevict$w-r$r.log" 2>&1
    grep -E "rc=|ms per step|disk reads:|storage by" "$OUT/disk/swap-h200-runevict$w-r$r.log" | head -5
  done; done ;;
ncu)
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
  for cs in "mix-b h32-8/d128" "mix-a h32-8/d64"; do
    set -- $cs; c=$1-${2//\//-}
    LD_LIBRARY_PATH=$PWD/.carry/prof:$DEB timeout 200 $NCU --clock-control none --kernel-name regex:prefill_kernel \
      --launch-skip 2 --launch-count 1 --set full --import-source yes -o "$OUT/ncu/ncu-$c" -f \
      .carry/prof/spillway bench prefill --cases $1 --shapes $2 --reps 3 --warmup 1 >"$OUT/ncu/ncu-$c.txt" 2>&1
    $NCU -i "$OUT/ncu/ncu-$c.ncu-rep" --page details >"$OUT/ncu/ncu-$c-details.txt" 2>&1
    $NCU -i "$OUT/ncu/ncu-$c.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu/ncu-$c-sass.csv" 2>&1
    rm -f "$OUT/ncu/ncu-$c.ncu-rep"
  done ;;
*) echo "unknown stage $stage" >&2 ;;
esac; echo "$stage $(el)"; pack "$stage"; done
