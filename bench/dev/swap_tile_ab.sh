#!/usr/bin/env bash
# A/B of the swap tile kernels on a GPU (SPILLWAY_SWAP_TILE_KERNEL = 1 CUDA
# cores, 0 tensor cores, 2 streaming tensor cores (default), 3 bulk copies
# into an mbarrier ring, sm_90+), from the repository root:
#   OUT=... bash bench/dev/swap_tile_ab.sh [build dir] [checker] [kernels]
# build dir: the library build (default .carry/build-h200, else build-h200);
# checker: bench/dev/swap_tile_check.cu built elsewhere, e.g. here with
#   nvcc -std=c++17 -O3 -Iinclude -Isrc -gencode=arch=compute_90a,code=sm_90a \
#     -o .carry/swap_tile_check bench/dev/swap_tile_check.cu src/cuda/swap/swap_tile*.cu
# (default .carry/swap_tile_check; built on the machine with nvcc if absent);
# kernels: the pair to A/B (default 2,3). SPILLWAY_SWAP_BULK_VARIANT=1 in the
# environment runs kernel 3's SW_BK_V_FIX variant in both steps (checker and
# library); bench/dev/swap_stream_probe.cu times all of kernel 3's variants.
# 1. the checker: each kernel of the pair against the fp64 reference on 40
#    random shapes (BF16/FP8/mixed, ragged last block, causal ql > 1), then
#    the bench's all-resident tile timed iso (as the bench's events) and back
#    to back, the pair interleaved twice -> $OUT/swap-tile-check.log
# 2. with the library build: `spillway bench swap --cases resident` per
#    kernel of the pair -> $OUT/swap-tile-ab.log. The
#    engine passes kernel 3 only with the src/swap/device.c change of helper
#    H8's report (without it, 3 runs kernel 2: same figures twice).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
B=${1:-}
[ -z "$B" ] && { [ -d .carry/build-h200 ] && B=.carry/build-h200 || B=build-h200; }
STC=${2:-.carry/swap_tile_check}
K=${3:-2,3}
KA=${K%%,*}
KB=${K##*,}
if [ -d .carry/debs ]; then
  mkdir -p .carry/debs/root
  for f in .carry/debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" .carry/debs/root; done
fi
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if [ ! -x "$STC" ]; then
  export PATH=/usr/local/cuda/bin:$PATH
  STC=/tmp/swap_tile_check
  nvcc -std=c++17 -O3 -Iinclude -Isrc -gencode=arch=compute_90a,code=sm_90a -o "$STC" \
    bench/dev/swap_tile_check.cu src/cuda/swap/swap_tile*.cu || exit 1
fi
{ timeout 100 "$STC" --check --cases 40 --kernels "$K"; echo "check rc=$?"
  timeout 40 "$STC" --bench --reps 50 --kernels "$K,$K"; echo "bench rc=$?"; } \
  >"$OUT/swap-tile-check.log" 2>&1
grep -E "FAIL|rc=|^check|^bench|^kernel" "$OUT/swap-tile-check.log" | head -30
if [ -x "$B/spillway" ]; then
  for k in $KA $KB; do
    { echo "== SPILLWAY_SWAP_TILE_KERNEL=$k"
      SPILLWAY_SWAP_TILE_KERNEL=$k timeout 60 "$B/spillway" bench swap --dir /var/tmp \
        --cases resident --json "$OUT/swap-resident-k$k.json"
      echo "bench swap kernel=$k rc=$?"; } >>"$OUT/swap-tile-ab.log" 2>&1
  done
  grep -E "^==|rc=|GB/s;|^all-resident +(tile_kernel|loop_attend)" "$OUT/swap-tile-ab.log"
fi
