#!/usr/bin/env bash
# The FlashInfer opponent build (docs/opponents.md), from nothing, outside the
# repository: FlashInfer's wheel from PyPI, its headers unpacked, a build for
# sm_90a with the opponent compiled in, and the programs that
# `scripts/h200_gpu.sh stage --opp DIR/build-opp` carries to the H200.
#
#   scripts/opp_build.sh [DIR]     default DIR /work/opp; FlashInfer 0.7.4
#
# Nothing of FlashInfer enters the tree. Takes ~15-25 min on two cores, most
# of it the opponent's kernels; a second run rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/work/opp}
V=0.7.4
case $DIR in /*) ;; *) DIR=$PWD/$DIR ;; esac
case $DIR/ in "$PWD"/*) echo "opp_build.sh: $DIR is inside the repository" >&2; exit 2 ;; esac
mkdir -p "$DIR"
whl=$DIR/flashinfer_python-$V-py3-none-any.whl
[ -f "$whl" ] || pip download -q --no-deps "flashinfer-python==$V" -d "$DIR"
if [ ! -f "$DIR/flashinfer/VERSION" ]; then
  rm -rf "$DIR/flashinfer" "$DIR/unpack" && mkdir -p "$DIR/unpack" "$DIR/flashinfer"
  (cd "$DIR/unpack" && unzip -q "$whl" 'flashinfer/data/include/*' 'flashinfer/data/cccl/*' \
    'flashinfer/data/cutlass/include/*' 'flashinfer/data/cutlass/tools/util/include/*')
  mv "$DIR"/unpack/flashinfer/data/{include,cccl,cutlass} "$DIR/flashinfer/"
  rm -rf "$DIR/unpack"
  echo $V >"$DIR/flashinfer/VERSION"
fi
B=$DIR/build-opp
[ -f "$B/CMakeCache.txt" ] ||
  cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_CUDA=ON -DSPILLWAY_CUDA_ARCHS=90a \
    -DSPILLWAY_OPPONENT_FLASHINFER="$DIR/flashinfer/include" >/dev/null
cmake --build "$B" -j"$(nproc)" --target spillway spillway_bench_swap spillway_bench_paged \
  test_opponent_flashinfer
echo "opponent build: $B ($(git rev-parse --short HEAD)); next: scripts/h200_gpu.sh stage --opp $B"
