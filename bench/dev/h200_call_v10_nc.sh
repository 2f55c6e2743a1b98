#!/bin/bash
# h200_call_v10_nc.sh - H200 calls (issue 5, docs/perf/NOTES.md "v10"): the non-causal d128
# kernel with 144-key K/V tiles (first call: always; second call: chosen per batch by sw_plan_wide_kv) (.carry/build-v10: library + test_prefill_cuda from a clean
# worktree) through test_prefill_cuda, then every d128 non-causal case A/B against v9
# (.carry/build-v9: the library of main) in alternating processes, each with cuDNN.
# Run with carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
DEBS=$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
t0=$(date +%s); el() { echo "($(( $(date +%s) - t0 )) s)"; }
LD_LIBRARY_PATH=$PWD/.carry/build-v10:$DEBS timeout 150 .carry/build-v10/tests/test_prefill_cuda >"$OUT/v10-test.log" 2>&1
echo "v10 test_prefill_cuda rc=$? $(el)"; grep -m8 FAIL "$OUT/v10-test.log"; tail -1 "$OUT/v10-test.log"
for r in 1 2; do for v in v10 v9; do
  echo "== $v round $r ==" >>"$OUT/ab.log"
  LD_LIBRARY_PATH=$PWD/.carry/build-$v:$DEBS SPILLWAY_LIB=$PWD/.carry/build-$v/libspillway.so timeout 100 \
    python3 bench/prefill.py --cases d128 --no-causal --impls spillway,sdpa-cudnn --md "" \
    --out "$OUT/nc-$v-ab$r.json" --reps 20 >>"$OUT/ab.log" 2>&1
  echo "$v round $r rc=$? $(el)"
done; done
grep -E "^== (v|[0-9m])|spillway  |cudnn  " "$OUT/ab.log"
