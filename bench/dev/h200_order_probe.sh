#!/bin/bash
# h200_order_probe.sh - one H200 call (docs/perf/NOTES.md, issue 5): is the bench's slow,
# bimodal mix-a figure for spillway an order effect of bench/prefill.py? order_probe.py with
# several implementation orders, then the bench itself on mix-a alone and on the d128 cases
# (where mix-a ran after three other cases). Opponent build; carry [".carry"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
export LD_LIBRARY_PATH=$PWD/.carry/build-opp:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 SPILLWAY_OPPONENT=flashinfer
export SPILLWAY_LIB=$PWD/.carry/build-opp/libspillway.so
nvidia-smi dmon -s pc -o T >"$OUT/dmon.log" 2>&1 & DMON=$!
t0=$(date +%s)
timeout 120 python3 bench/dev/order_probe.py >"$OUT/order.log" 2>&1
echo "order probe rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "^--|^==|spillway  |flashinfer-c" "$OUT/order.log"
for c in mix-a d128; do
  timeout 150 python3 bench/prefill.py --cases $c --impls spillway,flashinfer-c-fa3,sdpa-cudnn --md "" \
    --out "$OUT/bench-$c.json" --reps 10 >"$OUT/bench-$c.log" 2>&1
  echo "bench $c rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "^==|spillway  |flashinfer-c|sdpa-cudnn  " "$OUT/bench-$c.log"
done
kill $DMON
