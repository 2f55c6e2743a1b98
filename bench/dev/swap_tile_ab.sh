#!/usr/bin/env bash
# A/B of the swap tile kernels on a GPU (SPILLWAY_SWAP_TILE_KERNEL = 1 CUDA
# cores, 0 tensor cores, 2 streaming tensor cores), from the repository root:
#   OUT=... bash bench/dev/swap_tile_ab.sh [build dir, default build-h200]
# 1. bench/dev/swap_tile_check.cu (built here with nvcc, ~1 min): every
#    kernel against the fp64 reference on random shapes, then the bench's
#    all-resident tile timed two ways (iso: as the bench's events; b2b: back
#    to back) -> $OUT/swap-tile-check.log
# 2. with the library build: test_swap_cuda per kernel, and
#    `spillway bench swap --cases resident` per kernel -> $OUT/swap-tile-ab.log
# The engine passes kernel 2 only with the src/swap/device.c change of
# helper H2's report; without it step 2 runs kernel 1 for "2" (the header of
# each bench says which engine ran, step 1 does not depend on it).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
B=${1:-build-h200}
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
nvcc -std=c++17 -O3 -Iinclude -Isrc -gencode=arch=compute_90a,code=sm_90a \
  -o /tmp/swap_tile_check bench/dev/swap_tile_check.cu src/cuda/swap/swap_tile.cu \
  src/cuda/swap/swap_tile_mma.cu src/cuda/swap/swap_tile_stream.cu || exit 1
timeout 240 /tmp/swap_tile_check --cases 40 --reps 50 >"$OUT/swap-tile-check.log" 2>&1
echo "swap_tile_check rc=$?"
grep -E "FAIL|^check|^bench|^kernel" "$OUT/swap-tile-check.log" | head -30
if [ -x "$B/spillway" ]; then
  for k in 1 0 2; do
    { echo "== SPILLWAY_SWAP_TILE_KERNEL=$k"
      SPILLWAY_SWAP_TILE_KERNEL=$k timeout 150 "$B/tests/test_swap_cuda" | tail -3
      echo "test_swap_cuda kernel=$k rc=${PIPESTATUS[0]}"
      SPILLWAY_SWAP_TILE_KERNEL=$k timeout 90 "$B/spillway" bench swap --dir /var/tmp \
        --cases resident --json "$OUT/swap-resident-k$k.json"
      echo "bench swap kernel=$k rc=$?"; } >>"$OUT/swap-tile-ab.log" 2>&1
  done
  grep -E "^==|rc=|^all-resident +tile_kernel" "$OUT/swap-tile-ab.log"
fi
