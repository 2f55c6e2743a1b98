#!/usr/bin/env bash
# The test command: installs, builds (CUDA compiled when nvcc exists), runs the
# C tests (ctest; GPU tests report skipped without a GPU) and the Python
# binding's tests (pytest; torch is installed, GPU tests skipped without CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD_DIR=${SPILLWAY_BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$PWD/$BUILD_DIR" ;; esac  # (absolute or repo-relative)
status=0
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$(nproc)") || status=1
SPILLWAY_LIB="$BUILD_DIR/libspillway.so" PYTHONPATH="$PWD/python" \
  python3 -m pytest -q -rs tests/python || status=1
exit $status
