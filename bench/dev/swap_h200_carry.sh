#!/bin/bash
# swap_h200_carry.sh - the swap device pool on the lent H200 with nothing
# compiled there: build-h200 (-DSPILLWAY_CUDA_ARCHS=90a) staged into
# .carry/build-h200 (lib, CLI, tests test_swap_cuda, test_crc32c_gf2,
# test_store_lease, + liburing/hiredis .debs as scripts/h200_stage.sh does)
# and bench/dev/swap_tile_check.cu built here with nvcc -arch sm_90a into
# .carry/swap_tile_check. Copy to .carry/swap.sh, run `bash .carry/swap.sh`
# with carry [".carry"]: every tile kernel vs fp64 + bench-tile timing, the
# CPU tests of the gather maths and leases, test_swap_cuda on kernel 2,
# `spillway bench swap` (all cases) and the host case without the gather.
set -u
B=.carry/build-h200; mkdir -p .carry/debs/root; for f in .carry/debs/*.deb; do dpkg -x $f .carry/debs/root; done
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout 120 .carry/swap_tile_check --cases 40 --reps 50 > $OUT/swap-tile-check.log 2>&1; echo "swap_tile_check rc=$?"
grep -E "FAIL|^check|^bench|^kernel|iso|b2b|d2d|D2D" $OUT/swap-tile-check.log | head -24
{ timeout 30 $B/tests/test_crc32c_gf2 | tail -2; echo "crc rc=$?"; timeout 30 $B/tests/test_store_lease | tail -2; echo "lease rc=$?"
  SPILLWAY_SWAP_TILE_KERNEL=2 timeout 230 $B/tests/test_swap_cuda; echo "test_swap_cuda k2 rc=$?"; } > $OUT/swap-gpu-k2.log 2>&1
grep -E "rc=|FAIL|CHECK|host gather|gather|cases \(" $OUT/swap-gpu-k2.log | tail -20
SPILLWAY_SWAP_TILE_KERNEL=2 timeout 120 $B/spillway bench swap --dir /var/tmp --json $OUT/swap-h200.json > $OUT/swap-bench.log 2>&1; echo "bench swap k2 rc=$?"
grep -E "^(case|disk-bound|host-tier-bound|all-resident)|raw O_DIRECT|GB/s;" $OUT/swap-bench.log | grep -vE "pool_hit|host_tier_hit|tokens_per_s|bytes_read_per"
SPILLWAY_SWAP_HOST_GATHER=0 SPILLWAY_SWAP_TILE_KERNEL=2 timeout 60 $B/spillway bench swap --dir /var/tmp --cases host --json $OUT/swap-host-nogather.json > $OUT/swap-bench-nogather.log 2>&1; echo "no-gather rc=$?"
grep -E "^host-tier-bound +host_tier" $OUT/swap-bench-nogather.log
