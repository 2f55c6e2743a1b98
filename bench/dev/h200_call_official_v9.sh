#!/bin/bash
# h200_call_official_v9.sh - one H200 call (issue 5): the recorded run of v9. A quick check of the
# interleaved bench, test_prefill_cuda + test_prefill_errors (build-h200), the recorded
# bench/prefill.py run with every opponent compiled in or installed (the opponent build's
# library, which also holds our kernels), the non-causal 1x16k cases, the binding's tests.
# Stage with scripts/h200_stage.sh test_prefill_cuda test_prefill_errors (build-h200 and
# build-opp of the same commit); run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
DEBS=$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 SPILLWAY_OPPONENT=flashinfer
export LD_LIBRARY_PATH=$PWD/.carry/build-opp:$DEBS SPILLWAY_LIB=$PWD/.carry/build-opp/libspillway.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
t0=$(date +%s); el() { echo "($(( $(date +%s) - t0 )) s)"; }
timeout 60 python3 bench/prefill.py --quick --impls spillway,sdpa-cudnn --md "" --out /tmp/quick.json \
  >"$OUT/official.log" 2>&1 || { echo "quick bench failed"; tail -20 "$OUT/official.log"; exit 1; }
echo "quick bench ok $(el)"
B=.carry/build-h200
{ LD_LIBRARY_PATH=$PWD/$B:$DEBS timeout 150 $B/tests/test_prefill_cuda; echo "test_prefill_cuda rc=$?"
  LD_LIBRARY_PATH=$PWD/$B:$DEBS timeout 60 $B/tests/test_prefill_errors; echo "test_prefill_errors rc=$?"; } >"$OUT/test.log" 2>&1
echo "tests $(el)"; grep -E "rc=|cases \(|FAIL" "$OUT/test.log" | head -12
timeout 300 python3 bench/prefill.py --impls spillway,sdpa-flash,sdpa-cudnn,fa2-varlen,flashinfer-c,flashinfer-c-fa3 \
  --out "$OUT/prefill-h200.json" --md docs/perf/prefill.md >>"$OUT/official.log" 2>&1
echo "official rc=$? $(el)"; cp docs/perf/prefill.md "$OUT/prefill.md"
grep -E "^\| (16x1k|4x4k|1x16k|mix)" "$OUT/prefill.md" | head -20
timeout 120 python3 bench/prefill.py --impls spillway,sdpa-cudnn,flashinfer-c-fa3 --cases 1x16k --no-causal \
  --md "" --out "$OUT/nc.json" >"$OUT/nc.log" 2>&1
echo "nc rc=$? $(el)"; grep -E "^==|spillway  |cudnn  |fa3  " "$OUT/nc.log"
LD_LIBRARY_PATH=$PWD/$B:$DEBS SPILLWAY_LIB=$PWD/$B/libspillway.so timeout 200 python3 -m pytest -q -rs tests/python \
  >"$OUT/pytest.log" 2>&1; echo "pytest rc=$? $(el)"; tail -3 "$OUT/pytest.log"
