#!/usr/bin/env bash
# Development runner on the lent H200 for binaries built here and staged by
# scripts/h200_stage.sh into .carry/ (carry: [".carry"]). Stages:
#   test    test_prefill_cuda + test_prefill_errors (default backend: Hopper on sm_90)
#   testp   the same CUDA test with the portable kernel forced
#   bench   bench/prefill.py: spillway vs sdpa-cudnn vs fa2-varlen (all cases)
#   nc      non-causal 1x16k cases
#   mixa    mix-a d256 dissected: the 8192 request alone, and unpacked GQA
#   swap    test_swap_cuda + spillway bench swap (device pool)
#   opp     the opponent build (.carry/build-opp): its GPU test, then spillway vs
#           flashinfer-c (FlashInfer's FA2 ragged prefill) vs fa2-varlen vs sdpa-cudnn
#   cpu     bench/dev/cpu_fast_xeon.sh: CPU path vs torch CPU SDPA on this host's Xeon
#   pytest  the binding's tests (torch CUDA included) against the carried library
#   official  bench/prefill.py with every opponent (the opponent build's library, which
#           also holds our kernels) -> $OUT/prefill-h200.json and $OUT/prefill.md
# Results under $OUT; every log is appended to $OUT/run.log (8 files come back at most).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root
for f in .carry/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" .carry/debs/root; done
export LD_LIBRARY_PATH=$PWD/.carry/build-h200:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
export SPILLWAY_LIB=$PWD/.carry/build-h200/libspillway.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
B=.carry/build-h200
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for stage in "$@"; do case $stage in
  test)
    timeout 120 $B/tests/test_prefill_cuda >"$OUT/t.log" 2>&1; echo "test_prefill_cuda rc=$?"
    grep -m8 -E "FAIL" "$OUT/t.log"; tail -2 "$OUT/t.log"; cat "$OUT/t.log" >>"$OUT/run.log"; rm "$OUT/t.log"
    timeout 60 $B/tests/test_prefill_errors >>"$OUT/run.log" 2>&1; echo "test_prefill_errors rc=$?" ;;
  testp)
    SPILLWAY_CUDA_KERNEL=portable timeout 200 $B/tests/test_prefill_cuda >"$OUT/testp.log" 2>&1
    echo "portable rc=$?"; tail -1 "$OUT/testp.log" ;;
  bench)
    timeout 400 python3 bench/prefill.py --impls spillway,sdpa-cudnn,fa2-varlen --md "" \
      --out "$OUT/bench.json" --reps 10 2>&1 | tee -a "$OUT/run.log" | grep -E "^==|spillway|cudnn|fa2" ;;
  nc)
    timeout 300 python3 bench/prefill.py --impls spillway,sdpa-cudnn --cases 1x16k --no-causal \
      --md "" --out "$OUT/nc.json" --reps 10 2>&1 | tee -a "$OUT/run.log" | grep -E "^==|spillway|cudnn" ;;
  mixa)
    python3 bench/prefill.py --impls spillway,sdpa-cudnn --cases h16-2 --lens 8192 --md "" \
      --out "$OUT/mixa1.json" --reps 10 2>&1 | grep -E "^==|spillway|cudnn"
    SPILLWAY_PACK_MAX_Q=0 python3 bench/prefill.py --impls spillway --cases mix-a/h16-2 --md "" \
      --out "$OUT/mixa2.json" --reps 10 2>&1 | grep -E "^==|spillway"
    SPILLWAY_PACK_MAX_Q=0 python3 bench/prefill.py --impls spillway --cases h16-2 --lens 8192 --md "" \
      --out "$OUT/mixa3.json" --reps 10 2>&1 | grep -E "^==|spillway" ;;
  swap)
    # 3 files: swap-gpu.log (test_swap_cuda + demo part 2), swap-bench.log
    # (bench swap with the CUDA-core tile kernel, the default; then the
    # all-resident case with the tensor-core kernel, SPILLWAY_SWAP_TILE_KERNEL=0,
    # also at 2 CTAs per SM), swap-h200.json. The GPU test runs on both kernels.
    { df -hT /var/tmp | tail -1; timeout 300 $B/tests/test_swap_cuda; echo "test_swap_cuda rc=$?"
      SPILLWAY_SWAP_TILE_KERNEL=0 timeout 300 $B/tests/test_swap_cuda; echo "test_swap_cuda (tensor cores) rc=$?"
      t0=$(date +%s%N); timeout 240 $B/spillway demo --part swap --dir /var/tmp; rc=$?
      echo "demo --part swap rc=$rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms"; } \
      >"$OUT/swap-gpu.log" 2>&1
    grep -E "FAIL|CHECK|needle ranks|rc=|cases \(" "$OUT/swap-gpu.log" | tail -12
    timeout 300 $B/spillway bench swap --dir /var/tmp --json "$OUT/swap-h200.json" >"$OUT/swap-bench.log" 2>&1
    echo "bench swap rc=$?"
    for v in "SPILLWAY_SWAP_TILE_KERNEL=0" "SPILLWAY_SWAP_TILE_KERNEL=0 SPILLWAY_SWAP_TILE_CTAS_PER_SM=2"; do
      echo "== $v, all-resident only ==" >>"$OUT/swap-bench.log"
      env $v timeout 120 $B/spillway bench swap --dir /var/tmp \
        --cases resident --json /tmp/swap-var.json >>"$OUT/swap-bench.log" 2>&1
      echo "$v rc=$?"
    done
    grep -E "^(case|disk-bound|host-tier-bound|all-resident|==)|GB/s;|raw O_DIRECT" "$OUT/swap-bench.log" \
      | grep -vE "pool_hit|host_tier_hit|tokens_per_s|bytes_read_per" ;;
  swapq)
    # quick swap check: the GPU test on the tensor-core tile kernel (opt-in,
    # SPILLWAY_SWAP_TILE_KERNEL=0), one default bench (CUDA-core kernel), and
    # the all-resident case with the tensor-core kernel for A/B
    { SPILLWAY_SWAP_TILE_KERNEL=0 timeout 200 $B/tests/test_swap_cuda; echo "test_swap_cuda rc=$?"; } >"$OUT/swap-gpu.log" 2>&1
    grep -E "FAIL|CHECK|needle ranks|rc=|cases \(" "$OUT/swap-gpu.log" | tail -12
    timeout 110 $B/spillway bench swap --dir /var/tmp --json "$OUT/swap-h200.json" >"$OUT/swap-bench.log" 2>&1
    echo "bench swap rc=$?"
    echo "== SPILLWAY_SWAP_TILE_KERNEL=0 (tensor cores), all-resident only ==" >>"$OUT/swap-bench.log"
    SPILLWAY_SWAP_TILE_KERNEL=0 timeout 60 $B/spillway bench swap --dir /var/tmp --cases resident \
      --json /tmp/swap-mma.json >>"$OUT/swap-bench.log" 2>&1
    echo "tensor-core resident rc=$?"
    grep -E "^(case|disk-bound|host-tier-bound|all-resident|==)|GB/s;|raw O_DIRECT" "$OUT/swap-bench.log" \
      | grep -vE "pool_hit|host_tier_hit|tokens_per_s|bytes_read_per" ;;
  opp)
    SPILLWAY_OPPONENT=flashinfer LD_LIBRARY_PATH=$PWD/.carry/build-opp:$LD_LIBRARY_PATH \
      timeout 200 .carry/build-opp/tests/test_opponent_flashinfer >"$OUT/t.log" 2>&1
    echo "test_opponent_flashinfer rc=$?"; tail -3 "$OUT/t.log"; cat "$OUT/t.log" >>"$OUT/run.log"; rm "$OUT/t.log"
    SPILLWAY_LIB=$PWD/.carry/build-opp/libspillway.so SPILLWAY_OPPONENT=flashinfer timeout 400 \
      python3 bench/prefill.py --impls spillway,flashinfer-c,fa2-varlen,sdpa-cudnn --md "" \
      --out "$OUT/prefill-opp.json" --reps 10 2>&1 | tee -a "$OUT/run.log" | grep -E "^==|spillway|flashinfer|cudnn|fa2" ;;
  cpu)
    OUT="$OUT" timeout 250 sh bench/dev/cpu_fast_xeon.sh | tail -24 ;;
  demo)
    { timeout 150 $B/spillway demo; echo "spillway demo rc=$?"; } >"$OUT/t.log" 2>&1
    grep -E "rc=|check|ok|FAIL|TFLOP" "$OUT/t.log" | tail -12; cat "$OUT/t.log" >>"$OUT/run.log"; rm "$OUT/t.log" ;;
  pytest)
    timeout 300 python3 -m pytest -q -rs tests/python >"$OUT/t.log" 2>&1; echo "pytest rc=$?"
    tail -3 "$OUT/t.log"; cat "$OUT/t.log" >>"$OUT/run.log"; rm "$OUT/t.log" ;;
  official)
    SPILLWAY_LIB=$PWD/.carry/build-opp/libspillway.so SPILLWAY_OPPONENT=flashinfer timeout 500 \
      python3 bench/prefill.py --impls spillway,sdpa-flash,sdpa-cudnn,fa2-varlen,flashinfer-c,flashinfer-c-fa3 \
      --out "$OUT/prefill-h200.json" --md docs/perf/prefill.md 2>&1 | tee -a "$OUT/run.log" |
      grep -E "^==|spillway|cudnn|fa2|flashinfer"
    cp docs/perf/prefill.md "$OUT/prefill.md" ;;
esac; done
