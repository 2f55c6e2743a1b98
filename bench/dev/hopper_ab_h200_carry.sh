#!/bin/bash
# hopper_ab_h200_carry.sh - Hopper v6 measurement on the lent H200 (docs/perf/
# NOTES.md, "v6"), nothing compiled there: build-h200 staged by
# scripts/h200_stage.sh test_prefill_cuda into .carry/, the previous library
# (v4) copied into .carry/v4. Copy to .carry/hop.sh and run `bash .carry/hop.sh`
# with carry [".carry"]: test_prefill_cuda (both kernels), bench/prefill.py on
# every case vs cuDNN and FA2 varlen, non-causal 1x16k d128, then the v4
# library on four cases in a second process.
set -u
B=.carry/build-h200; mkdir -p .carry/debs/root; for f in .carry/debs/*.deb; do dpkg -x $f .carry/debs/root; done
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export SPILLWAY_LIB=$PWD/$B/libspillway.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 150 $B/tests/test_prefill_cuda > $OUT/test-v6.log 2>&1; echo "test_prefill_cuda rc=$?"; grep -m5 FAIL $OUT/test-v6.log; tail -2 $OUT/test-v6.log
timeout 250 python3 bench/prefill.py --impls spillway,sdpa-cudnn,fa2-varlen --md "" --out $OUT/bench-v6.json --reps 10 > $OUT/bench-v6.log 2>&1; echo "bench v6 rc=$?"
grep -E "^==|spillway / " $OUT/bench-v6.log
timeout 60 python3 bench/prefill.py --impls spillway,sdpa-cudnn --cases 1x16k/h32-8/d128 --no-causal --md "" --out $OUT/nc-v6.json --reps 10 2>&1 | grep -E "^==|spillway|cudnn"
SPILLWAY_LIB=$PWD/.carry/v4/libspillway.so timeout 100 python3 bench/prefill.py --impls spillway,sdpa-cudnn --cases 1x16k/h32-8/d128,16x1k/h32-8/d128,4x4k/h32-8/d128,1x16k/h16-2/d256 --md "" --out $OUT/bench-v4.json --reps 10 > $OUT/bench-v4.log 2>&1; echo "bench v4 rc=$?"
grep -E "^==|spillway / " $OUT/bench-v4.log
