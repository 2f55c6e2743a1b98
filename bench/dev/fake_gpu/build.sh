#!/bin/bash
# build.sh [BUILD] [OUT] - the device pool's host side on a machine without a GPU, for CPU profiles of it
# (perf): the library from BUILD's C objects (default build-h200: a CUDA build, so the engine takes its
# device-pool path) with fakedev.c in place of the CUDA sources (kernels do nothing, copies under 64 KiB
# are memcpy, the rest nothing), and spillway-bench-swap with fakecudart.c in place of cudart. Its attend results
# are garbage (the checks fail, by design); its plan / submit / compute host times are the engine's.
# Use: `$O/spillway-bench-swap --dir /var/tmp --cases host --steps 300 --check-heads 1` under
# `perf record` (the host planning profile in docs/perf/swap.md); also ThreadSanitizer builds of the
# engine's threads with the GPU faked.
set -euo pipefail
cd "$(dirname "$0")/../../.."
B=${1:-build-h200}; O=${2:-/tmp/fake_gpu}
mkdir -p "$O"
# (FAKE=-DFAKE_RESIDENT: the resident path taken, its launches doing nothing)
gcc -O2 -fPIC -g -std=c11 -D_GNU_SOURCE ${FAKE:-} -Iinclude -Isrc -c bench/dev/fake_gpu/fakedev.c -o "$O/fakedev.o"
# (a static archive: the bench calls internal functions -- the opponent gate,
# sw_fail -- that the shared library does not export)
rm -f "$O/libspillway_fake.a"
ar rcs "$O/libspillway_fake.a" $(find "$B/CMakeFiles/spillway_obj.dir/src" -name '*.c.o') "$O/fakedev.o"
echo "#define SW_BENCH_COMMIT \"$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)\"" \
  >"$O/bench_commit.h"
gcc -O2 -g -std=c11 -D_GNU_SOURCE -DSW_HAVE_CUDA=1 -I/usr/local/cuda/include -Iinclude -Isrc -Ibench -I"$O" \
  bench/swap.c bench/swap_report.c bench/swap_run.c bench/swap_iostat.c bench/common.c bench/opp_cudnn.c \
  bench/dev/fake_gpu/fakecudart.c "$O/libspillway_fake.a" -luring -lhiredis -lm -lpthread -ldl \
  -o "$O/spillway-bench-swap"
# tests/test_swap_cuda.c over the faked GPU: its host-side checks (lease counts, kept leases'
# visits and idle release) hold; every numeric, CRC and score check fails by design
gcc -O1 -g -std=c11 -D_GNU_SOURCE -DSW_HAVE_CUDA=1 -I/usr/local/cuda/include -Iinclude -Isrc -Itests \
  tests/test_swap_cuda.c tests/sw_test.c bench/dev/fake_gpu/fakecudart.c "$O/libspillway_fake.a" \
  -luring -lhiredis -lm -lpthread -ldl -o "$O/test_swap_cuda"
echo "$O/spillway-bench-swap $O/test_swap_cuda"
