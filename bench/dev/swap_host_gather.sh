#!/usr/bin/env bash
# One call on the lent H200 for the swap device pool's host-tier gather
# (issue 4; docs/perf/NOTES.md, "Swap device pool: host-tier hits gathered
# by the GPU"): builds build-h200 for sm_90a as scripts/h200_check.sh does,
# runs the tests of the path (CRC maths, leases, the device-pool test with
# both tile kernels), then `spillway bench swap --cases host` with the
# gather (default) and without it (SPILLWAY_SWAP_HOST_GATHER=0: host-tier
# hits through the store's tickets and one upload per tile, the old path),
# interleaved, twice each. Logs and JSON go to $OUT (or out/ when unset).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
B=build-h200
DIR=${SWAP_DIR:-/var/tmp}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_CUDA=ON -DSPILLWAY_CUDA_ARCHS=90a \
    -DSPILLWAY_WERROR=OFF >"$B.log" 2>&1 &&
    cmake --build $B -j16 >>"$B.log" 2>&1 || { tail -30 "$B.log"; exit 1; }
  grep -E "spill|warning" "$B.log" | head -5
  $B/tests/test_crc32c_gf2 | tail -2
  $B/tests/test_store_lease | tail -2
  $B/tests/test_swap_cuda | grep -E "host gather|cases|FAIL|CHECK" | head -40
  SPILLWAY_SWAP_TILE_KERNEL=0 $B/tests/test_swap_cuda | grep -E "host gather|cases|FAIL|CHECK" | head -20
} 2>&1 | tee "$OUT/swap-host-gather-tests.log"
for rep in 1 2; do
  for g in 1 0; do
    echo "== rep $rep SPILLWAY_SWAP_HOST_GATHER=$g"
    SPILLWAY_SWAP_HOST_GATHER=$g $B/spillway bench swap --cases host --dir "$DIR" \
      --json "$OUT/swap-host-gather$g-rep$rep.json"
  done
done 2>&1 | tee "$OUT/swap-host-gather-bench.log"
