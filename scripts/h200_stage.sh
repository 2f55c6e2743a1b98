#!/usr/bin/env bash
# Helper for the lent H200: stage a build made
# HERE (cmake -S . -B build-h200 -DSPILLWAY_CUDA_ARCHS=90a ...) into .carry/, an
# ignored folder small enough to travel (64 MiB), so a device call spends no
# time compiling. Usage: scripts/h200_stage.sh [test names...]
# With an opponent build (build-opp), `scripts/h200_check.sh opp` on the device
# measures it: the recorded prefill run (bench/results/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.carry/' .git/info/exclude || echo '/.carry/' >>.git/info/exclude
rm -rf .carry && mkdir -p .carry/build-h200/tests .carry/debs
cp -a build-h200/libspillway.so* build-h200/spillway .carry/build-h200/
for t in ${*:-test_prefill_cuda test_prefill_errors}; do
  [ -x build-h200/tests/$t ] && cp -a build-h200/tests/$t .carry/build-h200/tests/
done
# An opponent build (-DSPILLWAY_OPPONENT_FLASHINFER, docs/opponents.md) when there is one.
if [ -f build-opp/libspillway.so.0.1.0 ]; then
  mkdir -p .carry/build-opp/tests
  cp -a build-opp/libspillway.so* .carry/build-opp/
  cp -a build-opp/tests/test_opponent_flashinfer .carry/build-opp/tests/ 2>/dev/null || true
fi
# liburing / hiredis are not installed on the device image: carry the runtime
# packages (apt-get download, here) and unpack them there.
(cd .carry/debs && apt-get download liburing2 libhiredis0.14 >/dev/null 2>&1) || true
du -sh .carry
