#!/bin/bash
# cpu_h200_carry.sh - the CPU fast path on the H200's host (Xeon, AMX) with
# NOTHING compiled there (device time): the library, CLI and test_prefill_cpu
# of build-h200 staged by scripts/h200_stage.sh into .carry/build-h200, and
# build/dev/{cpu_fast_check,libcpu_fast_dev.so} (sh bench/dev/cpu_fast_check.sh,
# built here) copied into .carry/dev. Copy this file to .carry/cpu.sh and run
# `bash .carry/cpu.sh` with carry [".carry"]. Writes $OUT/cpu-xeon.log (AMX
# kernel vs fp64 on real tiles, test_prefill_cpu, 16x128 vs torch, then
# bench/prefill.py --cpu: $OUT/prefill-cpu.json + .md) and the host-pool swap
# disk case ($OUT/swap-hostpool.log) for comparison with the device pool.
set -u
B=.carry/build-h200; export LD_LIBRARY_PATH=$PWD/$B PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
LOG=$OUT/cpu-xeon.log
mkdir -p .carry/debs/root; for f in .carry/debs/*.deb; do dpkg -x $f .carry/debs/root; done
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
{
echo "== host"; lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\))"; uptime
grep -o -w -E "amx_tile|amx_bf16|avx512_bf16" /proc/cpuinfo | sort | uniq -c
CPUS=$(lscpu -p=CPU,CORE | grep -v '^#' | sort -t, -k2,2n -k1,1n | awk -F, '!seen[$2]++ {print $1}' | head -2 | paste -sd, -)
echo "pinned CPUs: $CPUS"
echo "== AMX kernel (library, short path included) on real tiles vs fp64 $(date -u +%T)"
taskset -c "$CPUS" .carry/dev/cpu_fast_check --cases 40 --seed 5 --threads 2 --check-only
taskset -c "$CPUS" .carry/dev/cpu_fast_check --cases 40 --seed 12 --threads 2 --check-only --dtype bf16 --isa-min 4 --qamp 100
LD_LIBRARY_PATH=$LD_LIBRARY_PATH SPILLWAY_TEST_CASES=60 timeout 120 $B/tests/test_prefill_cpu 2>&1 | tail -3
echo "== 16 x 128 vs torch $(date -u +%T)"
SW_DEV_LIB=$PWD/.carry/dev/libcpu_fast_dev.so timeout 100 python3 bench/dev/cpu_fast_short.py --threads 2 --reps 15 --cpus "$CPUS" 2>&1 | grep -v -E "USDT|gpuGetDeviceCount"
echo "== bench/prefill.py --cpu $(date -u +%T)"
SPILLWAY_LIB=$PWD/$B/libspillway.so timeout 250 python3 bench/prefill.py --cpu --threads 2 --cpu-scale 0.125 --reps 20 --warmup 3 --out "$OUT/prefill-cpu.json" --md "$OUT/prefill-cpu.md" 2>&1 | grep -v -E "USDT|gpuGetDeviceCount"
echo "== done $(date -u +%T)"
} > $LOG 2>&1
tail -40 $LOG
timeout 100 $B/spillway bench swap --host-pool --cases disk --dir /var/tmp --json $OUT/swap-hostpool-disk.json > $OUT/swap-hostpool.log 2>&1; echo "host-pool disk rc=$?"
grep -E "per step|disk reads|read per step|tile|disk-bound +(disk|step)" $OUT/swap-hostpool.log | head -12
