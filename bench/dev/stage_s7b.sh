#!/bin/bash
# stage_s7b.sh [opp] [var:NAME...] - stages what bench/dev/h200_s7_call2.sh needs into .carry/ (ignored), from the
# build dirs of this tree (build-h200: -DSPILLWAY_CUDA=ON -DSPILLWAY_CUDA_ARCHS=90a Release; build-opp: the
# same + -DSPILLWAY_OPPONENT_FLASHINFER=/work/opp/flashinfer/include), refusing a tree with changes
# to tracked files (the results must name a commit). `opp` stages the opponent library too, `var:NAME` the variant build-NAME
# (e.g. build-v14: -DCMAKE_CUDA_FLAGS=-DSW_NOMAX=1; its test_swap_cuda too, for swap variants).
# (Session 7's `emuK`, v13's builds, went with v13: bench/dev/rejected/hopper_v13_exp2_emu_d64.patch.)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "stage_s7b: the tree has uncommitted changes; commit first" >&2; exit 1
fi
cmake --build build-h200 -j"$(nproc)" --target spillway_cli test_prefill_cuda test_prefill_errors \
  $(cd tests && ls test_store_*.c test_swap_*.c | sed 's/\.c$//') >/dev/null
grep -qx '/.carry/' .git/info/exclude || echo '/.carry/' >>.git/info/exclude
rm -rf .carry && mkdir -p .carry/build-h200/tests .carry/debs .carry/probe
cp -a build-h200/libspillway.so* build-h200/spillway .carry/build-h200/
cp -a build-h200/tests/test_prefill_cuda build-h200/tests/test_prefill_errors .carry/build-h200/tests/
tar cJf .carry/tests.tar.xz -C build-h200/tests $(cd build-h200/tests && ls test_store_* test_swap_* | grep -v '\.')
nvcc -O2 -std=c++17 -arch=sm_90a -Isrc -Iinclude bench/dev/gather_probe.cu src/cuda/swap/swap_gather.cu \
  src/core/status.c src/core/sys.c src/store/crc32c.c -o .carry/probe/gather_probe
nvcc -O2 -std=c++17 -arch=sm_90a bench/dev/copy_probe.cu -o .carry/probe/copy_probe
gcc -O2 -std=c11 -pthread bench/dev/disk_probe.c -o .carry/probe/disk_probe
for x in "$@"; do case $x in
opp) cmake --build build-opp -j"$(nproc)" >/dev/null
     mkdir -p .carry/build-opp && cp -a build-opp/libspillway.so* .carry/build-opp/ ;;
var:*) # build-NAME, configured like build-h200 with its own CMAKE_CUDA_FLAGS (an A/B variant): lib, CLI
     # and test_prefill_cuda into .carry/NAME
     n=${x#var:}
     [ -f build-$n/CMakeCache.txt ] || { echo "stage_s7b: build-$n is not configured" >&2; exit 1; }
     cmake --build build-$n -j"$(nproc)" --target spillway_cli test_prefill_cuda test_swap_cuda >/dev/null
     mkdir -p .carry/$n/tests && cp -a build-$n/libspillway.so* build-$n/spillway .carry/$n/ &&
       cp -a build-$n/tests/test_prefill_cuda build-$n/tests/test_swap_cuda .carry/$n/tests/ ;;
esac; done
(cd .carry/debs && apt-get download liburing2 libhiredis0.14 >/dev/null 2>&1) || true
echo "staged at $(git rev-parse --short HEAD)"; du -sh .carry
