#!/bin/bash
# stage_s7.sh - builds, here, what bench/dev/h200_s7_first.sh needs on the H200, from a clean worktree of
# HEAD (nothing compiles there): the main build and the v11 / v12 / v11+v12 builds of the Hopper kernel
# (docs/perf/NOTES.md), staged into .carry/ (ignored). Usage: bench/dev/stage_s7.sh [prefill|tests]
#   prefill (default)  .carry/build-h200 (lib, spillway, test_prefill_cuda), .carry/v11, .carry/v12,
#                      .carry/v1112 (lib, spillway; test_prefill_cuda for v11 and v1112), .carry/debs
#   tests              .carry/build-h200 with every test_store_* / test_swap_* program instead (second call)
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-prefill}
WT=/work/wt-stage
git worktree remove --force $WT 2>/dev/null || true
git worktree add -f --detach $WT HEAD >/dev/null
build() { # dir flags targets...
  local d=$1 f=$2; shift 2
  cmake -S $WT -B $WT/$d -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_CUDA=ON -DSPILLWAY_CUDA_ARCHS=90a \
    -DSPILLWAY_WERROR=OFF "-DCMAKE_CUDA_FLAGS=$f" >/dev/null
  cmake --build $WT/$d -j"$(nproc)" --target "$@" 2>&1 | grep -E "error" || true
}
stage() { # dir name [tests...]
  local d=$1 n=$2; shift 2
  mkdir -p .carry/$n/tests
  cp -a $WT/$d/libspillway.so* $WT/$d/spillway .carry/$n/
  for t in "$@"; do cp -a $WT/$d/tests/$t .carry/$n/tests/; done
}
grep -qx '/.carry/' .git/info/exclude || echo '/.carry/' >>.git/info/exclude
rm -rf .carry && mkdir -p .carry/debs
if [ "$what" = tests ]; then
  tests=$(cd $WT/tests && ls test_store_*.c test_swap_*.c | sed 's/\.c$//')
  build b0 "" spillway_cli $tests
  stage b0 build-h200 $tests
else
  build b0 "" spillway_cli test_prefill_cuda
  stage b0 build-h200 test_prefill_cuda
  build b11 "-DSW_HOPPER_XITEM=1" spillway_cli test_prefill_cuda
  stage b11 v11 test_prefill_cuda
  build b12 "-DSW_MAX_SLACK=1" spillway_cli
  stage b12 v12
  build b1112 "-DSW_HOPPER_XITEM=1 -DSW_MAX_SLACK=1" spillway_cli test_prefill_cuda
  stage b1112 v1112 test_prefill_cuda
fi
(cd .carry/debs && apt-get download liburing2 libhiredis0.14 >/dev/null 2>&1) || true
git worktree remove --force $WT
du -sh .carry
