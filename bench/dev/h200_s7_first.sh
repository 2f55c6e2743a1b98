#!/bin/bash
# h200_s7_first.sh STAGE... - the next session's first H200 call, prepared at the end of session 6
# (Run in session 7: v12 adopted; v11 moved to bench/dev/rejected/hopper_v11_xitem.patch, so the
# SW_HOPPER_XITEM builds below need that patch applied first.)
# (docs/perf/NOTES.md "v11", docs/perf/swap.md "session 6"). Staging, here, from a clean worktree of main
# (`bench/dev/stage_s7.sh` does all of it, ~3 min with ccache; `stage_s7.sh tests` for storetests):
#   .carry/build-h200  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_CUDA=ON
#                      -DSPILLWAY_CUDA_ARCHS=90a -DSPILLWAY_WERROR=OFF (lib, spillway, tests/test_prefill_cuda,
#                      tests/test_store_*, tests/test_swap_* )
#   .carry/v11         the same with -DCMAKE_CUDA_FLAGS=-DSW_HOPPER_XITEM=1 (lib, spillway, test_prefill_cuda)
#   .carry/v12         -DCMAKE_CUDA_FLAGS=-DSW_MAX_SLACK=1 (lib, spillway)
#   .carry/v1112       -DCMAKE_CUDA_FLAGS="-DSW_HOPPER_XITEM=1 -DSW_MAX_SLACK=1" (lib, spillway,
#                      test_prefill_cuda)
#   .carry/debs        liburing2, libhiredis0.14 (scripts/h200_stage.sh fetches them)
# Stages:
#   v11test   test_prefill_cuda on the v11+v12 build, then on v11 alone if that fails (docs/perf/NOTES.md
#             "v11", "v12"; every case of the suite, Hopper path)
#   v11ab     `spillway bench prefill` v10 / v11 / v12 / v11+v12 interleaved, 2 rounds: mix-a, mix-b, 16x1k, 1x16k at
#             h32-8/d128 and h32-8/d64, h16-2/d256 (ours only; the opponents' ratios follow from the
#             recorded run once v11 is the default); then the portable kernel v10 / v12
#             (SPILLWAY_CUDA_KERNEL=portable; v12's lazy rescale is in both kernels)
#   storetests every test_store_* / test_swap_* program staged in $B/tests with a GPU present (the store's
#             I/O memory is pinned huge pages there since session 6; session 6 ran five of them plus
#             test_swap_exact/_cuda). The programs are static, ~4.5 MB each: with the four prefill builds
#             they exceed the 64 MiB carry, so stage them for a second call.
#   hosttile  the swap host-tier case at tiles of 128 (the case's default), 256 and 64 blocks, 2 rounds
#             (fewer, larger tiles: fewer per-tile host costs and launches; issue 4's host line)
# Run with carry [".carry"]; each stage's files are packed into one archive under $OUT.
. bench/dev/h200_prelude.sh
for stage in "$@"; do mkdir -p "$OUT/$stage"; case $stage in
v11test)
  for v in v1112 v11; do
    { LD_LIBRARY_PATH=$PWD/.carry/$v:$DEB timeout 200 .carry/$v/tests/test_prefill_cuda; echo "test_prefill_cuda $v rc=$?"; } \
      >"$OUT/v11test/test-prefill-cuda-$v.log" 2>&1
    grep -m5 FAIL "$OUT/v11test/test-prefill-cuda-$v.log"; tail -2 "$OUT/v11test/test-prefill-cuda-$v.log"
    grep -q "rc=0" "$OUT/v11test/test-prefill-cuda-$v.log" && break
  done ;;
v11ab)
  for r in 1 2; do for v in v10 v11 v12 v1112; do
    L=.carry/$v; [ $v = v10 ] && L=$B
    for sh in h32-8/d128 h32-8/d64 h16-2/d256; do
      LD_LIBRARY_PATH=$PWD/$L:$DEB timeout 60 $L/spillway bench prefill --cases mix-a,mix-b,16x1k,1x16k \
        --shapes $sh --reps 20 --warmup 3 >>"$OUT/v11ab/prefill-$v-r$r.log" 2>&1
    done
    echo "$v r$r"; grep -E "spillway " "$OUT/v11ab/prefill-$v-r$r.log" | awk '{print $1, $5}' | tr '\n' ' '; echo
  done; done
  # the portable kernel (sm_80 .. sm_121's path, here at sm_90a) with and without the lazy rescale
  for r in 1 2; do for v in v10 v12; do
    L=.carry/$v; [ $v = v10 ] && L=$B
    SPILLWAY_CUDA_KERNEL=portable LD_LIBRARY_PATH=$PWD/$L:$DEB timeout 60 $L/spillway bench prefill \
      --cases mix-b,16x1k,1x16k --shapes h32-8/d128,h32-8/d64 --reps 10 --warmup 2 >>"$OUT/v11ab/portable-$v-r$r.log" 2>&1
    echo "portable $v r$r"; grep -E "spillway " "$OUT/v11ab/portable-$v-r$r.log" | awk '{print $1, $5}' | tr '\n' ' '; echo
  done; done ;;
storetests)
  for t in $B/tests/test_store_* $B/tests/test_swap_*; do
    n=$(basename $t)
    { SW_TEST_SWAP_CASES=16 LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 120 $t; echo "$n rc=$?"; } >"$OUT/storetests/$n-h200.log" 2>&1
    tail -1 "$OUT/storetests/$n-h200.log"
  done ;;
hosttile)
  for r in 1 2; do for t in 128 256 64; do
    { echo "# spillway bench swap --dir /var/tmp --cases host --tile $t"
      LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 40 $B/spillway bench swap --dir /var/tmp --cases host --tile $t \
        --json "$OUT/hosttile/swap-h200-host-tile$t-r$r.json"; echo "rc=$?"; } >"$OUT/hosttile/swap-h200-host-tile$t-r$r.log" 2>&1
    echo "tile $t r$r"; grep -E "rc=|host_tier_read_GBps|host side|per step: " "$OUT/hosttile/swap-h200-host-tile$t-r$r.log" | head -4
  done; done ;;
*) echo "unknown stage $stage" >&2 ;;
esac; echo "$stage $(el)"; pack "$stage"; done
