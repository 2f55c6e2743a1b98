#!/bin/bash
# h200_s7_call2.sh STAGE... - session 7's second H200 call (v12 the default; issue 4's host tier).
# Staged here by bench/dev/stage_s7b.sh from a clean tree of the commit:
#   .carry/build-h200   lib, spillway, tests/test_prefill_cuda, tests/test_prefill_errors
#   .carry/build-opp    the opponent build's lib (FlashInfer FA2 + FA3 compiled in, docs/opponents.md)
#   .carry/probe        gather_probe (bench/dev/gather_probe.cu)
#   .carry/tests.tar.xz every test_store_* / test_swap_* program of build-h200 (static; packed to travel)
#   .carry/debs         liburing2, libhiredis0.14
# Stages:
#   ptest    test_prefill_cuda and test_prefill_errors (the Hopper path, v12 on)
#   cprobe   copy_probe: pinned H2D copy-engine rate by copy size and by streams alternated (48 and 256 MiB)
#   demo     spillway demo (the main job) on the GPU
#   dprobe   disk_probe: the disk's O_DIRECT read rate by request size and requests in flight
#   gprobe   gather_probe: the GPU's rate for 8 KiB host-tier stripes (gather kernel, zero-copy copies,
#            batched copy-engine copies, one contiguous memcpy)
#   record   the recorded bench/prefill.py run (every opponent), then non-causal 1x16k
#   pytest   the binding's tests on build-h200
#   storetests every test_store_* / test_swap_* program with the GPU present
#   hosttl   the swap host-tier case at tiles of 128 and 256 blocks with SPILLWAY_SWAP_TIMELINE=1
#   hostq    the host-tier case at tile $TILE (256) with the timeline, for each setting in $HOSTQ (default: as
#            is, CUDA_DEVICE_MAX_CONNECTIONS=32, SPILLWAY_SWAP_GATHER_AHEAD=0)
#   swaprec  the recorded `spillway bench swap` (every case)
#   storerec the recorded `spillway store bench` ($STOREREC_ARGS: more options)
#   chunkab  512 KiB read pieces: store bench in-run A/B, swap disk case default / 512K
#   diskab   the swap disk case under read knobs ($DISKAB: default, VAR=value, pdN (--prefetch-depth), tileN
#            (--tile), ioN (--io-buffer-mb), joined by commas; $DISKAB_ROUNDS)
#   storeab  the store bench's in-run A/B of $STOREAB
#   varab    kernel variants (stage_s7b.sh var:NAME): test_prefill_cuda, then the causal cases against main
#            ($VARAB_ENV: settings for both, e.g. SPILLWAY_CUDA_KERNEL=portable for the portable kernel)
#   ncrec    non-causal 1x16k with cuDNN and FA3, $NCREC_ROUNDS runs (the opponent build)
#   hostab   the host-tier case (no timeline) under settings ($HOSTAB: default, VAR=value, tileN, pdN, joined
#            by commas; $HOSTAB_ROUNDS)
#   swapvar  swap variants (stage_s7b.sh var:NAME): test_swap_cuda, then the host-tier case against main
#   swapenv  test_swap_cuda (and test_swap_exact) under each setting in $SWAPENV (VAR=value[,VAR=value...]
#            or default; e.g. SPILLWAY_SWAP_DIRECT=1 for the direct tiles)
#   ncab     non-causal 1x16k (all three head shapes), main against .carry/v10 (stage_s7b.sh var:v10), 3 rounds
# Run with carry [".carry"]; each stage's files go to one archive under $OUT.
. bench/dev/h200_prelude.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for stage in "$@"; do mkdir -p "$OUT/$stage"; case $stage in
ptest)
  # $PTEST_CASES: SPILLWAY_TEST_CASES (the random families' size, default 100); $PTEST_TIMEOUT (150 s)
  { echo "# SPILLWAY_TEST_CASES=${PTEST_CASES:-100} test_prefill_cuda"
    SPILLWAY_TEST_CASES=${PTEST_CASES:-100} LD_LIBRARY_PATH=$PWD/$B:$DEB timeout ${PTEST_TIMEOUT:-150} \
      $B/tests/test_prefill_cuda; echo "test_prefill_cuda rc=$?"
    LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 60 $B/tests/test_prefill_errors; echo "test_prefill_errors rc=$?"; } \
    >"$OUT/ptest/ctest-h200-prefill-cuda-v12.log" 2>&1
  grep -E "rc=|cases|FAIL" "$OUT/ptest/ctest-h200-prefill-cuda-v12.log" | head -12 ;;
cprobe)
  # copy_probe (bench/dev/copy_probe.cu): pinned H2D copy-engine rate by copy size and streams, 48 and 256 MiB
  for mb in 48 256; do
    { echo "# .carry/probe/copy_probe $mb"; timeout 120 .carry/probe/copy_probe $mb; echo "rc=$?"; } \
      >"$OUT/cprobe/copy-probe-h200-$mb.log" 2>&1
    cat "$OUT/cprobe/copy-probe-h200-$mb.log"
  done ;;
dprobe)
  # disk_probe (bench/dev/disk_probe.c): O_DIRECT sequential read rate by request size x requests in flight,
  # $DPROBE_MB (512) MiB, $DPROBE_ROUNDS (3) rounds, then the first read of a freshly written file
  { echo "# .carry/probe/disk_probe /var/tmp ${DPROBE_MB:-512} ${DPROBE_ROUNDS:-3}"; uptime
    timeout 200 .carry/probe/disk_probe /var/tmp ${DPROBE_MB:-512} ${DPROBE_ROUNDS:-3}; echo "rc=$?"; } \
    >"$OUT/dprobe/disk-probe-h200.log" 2>&1
  cat "$OUT/dprobe/disk-probe-h200.log" ;;
demo)
  # the main job on the GPU: `spillway demo` (part 1 prefill mix-a, part 2 swap on the device pool); exit 0
  # only when every checked row meets its reference
  { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 400 $B/spillway demo --dir /var/tmp; echo "demo rc=$?"; } \
    >"$OUT/demo/demo-h200.log" 2>&1
  grep -E "rc=|PASS|FAIL|tokens/s|max rel|raw O_DIRECT" "$OUT/demo/demo-h200.log" | head -20 ;;
gprobe)
  { echo "# .carry/probe/gather_probe 6144 8192"; timeout 60 .carry/probe/gather_probe 6144 8192; echo "rc=$?"; } \
    >"$OUT/gprobe/gather-probe-h200.log" 2>&1
  cat "$OUT/gprobe/gather-probe-h200.log" ;;
record)
  export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 SPILLWAY_OPPONENT=flashinfer
  O=$PWD/.carry/build-opp
  LD_LIBRARY_PATH=$O:$DEB SPILLWAY_LIB=$O/libspillway.so timeout 330 python3 bench/prefill.py \
    --impls spillway,sdpa-flash,sdpa-cudnn,fa2-varlen,flashinfer-c,flashinfer-c-fa3 \
    --out "$OUT/record/prefill-h200.json" --md docs/perf/prefill.md >"$OUT/record/prefill-h200.log" 2>&1
  echo "record rc=$? $(el)"; cp docs/perf/prefill.md "$OUT/record/prefill.md"
  grep -E "^\| (16x1k|4x4k|1x16k|mix)" "$OUT/record/prefill.md" | awk -F'|' '{print $2, $3, $13, $14, $16, $17}'
  LD_LIBRARY_PATH=$O:$DEB SPILLWAY_LIB=$O/libspillway.so timeout 120 python3 bench/prefill.py \
    --impls spillway,sdpa-cudnn,flashinfer-c-fa3 --cases 1x16k --no-causal --md "" \
    --out "$OUT/record/prefill-h200-noncausal.json" >"$OUT/record/prefill-h200-noncausal.log" 2>&1
  echo "nc rc=$? $(el)"; grep -E "spillway  |cudnn  |fa3  " "$OUT/record/prefill-h200-noncausal.log" ;;
pytest)
  PYTHONPATH=$PWD/python LD_LIBRARY_PATH=$PWD/$B:$DEB SPILLWAY_LIB=$PWD/$B/libspillway.so timeout 200 \
    python3 -m pytest -q -rs tests/python >"$OUT/pytest/pytest-h200.log" 2>&1
  echo "pytest rc=$?"; tail -3 "$OUT/pytest/pytest-h200.log" ;;
storetests)
  mkdir -p .carry/st && tar xJf .carry/tests.tar.xz -C .carry/st
  for t in .carry/st/test_store_* .carry/st/test_swap_*; do
    n=$(basename $t)
    { SW_TEST_SWAP_CASES=16 LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 100 $t; echo "$n rc=$?"; } >"$OUT/storetests/$n-h200.log" 2>&1
    tail -1 "$OUT/storetests/$n-h200.log"
  done ;;
swapenv)
  [ -d .carry/st ] || { mkdir -p .carry/st && tar xJf .carry/tests.tar.xz -C .carry/st; }
  for v in ${SWAPENV:-default}; do setting "$v"; for t in test_swap_cuda test_swap_exact; do
    { echo "# ${envs[*]} $t"; env "${envs[@]}" SW_TEST_SWAP_CASES=16 LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 150 .carry/st/$t
      echo "$t rc=$?"; } >"$OUT/swapenv/$t-$n.log" 2>&1
    echo "$v: $(tail -1 "$OUT/swapenv/$t-$n.log")"
  done; done ;;
hosttl)
  # the host-tier case with the GPU timeline (SPILLWAY_SWAP_TIMELINE=1, src/swap/device.c): per call the
  # GPU start / end of every gather and tile compute, the host's enqueue times, and a busy summary
  for t in 128 256; do
    { echo "# SPILLWAY_SWAP_TIMELINE=1 spillway bench swap --dir /var/tmp --cases host --tile $t"
      SPILLWAY_SWAP_TIMELINE=1 LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 60 $B/spillway bench swap --dir /var/tmp \
        --cases host --tile $t --json "$OUT/hosttl/swap-h200-host-tl$t.json"; echo "rc=$?"; } \
      >"$OUT/hosttl/swap-h200-host-tl$t.log" 2>&1
    echo "tile $t"; grep -E "rc=|host_tier_read_GBps|per step, host" "$OUT/hosttl/swap-h200-host-tl$t.log"
    grep -E "span" "$OUT/hosttl/swap-h200-host-tl$t.log" | tail -4
  done ;;
ncab)
  # non-causal 1x16k, v12 (build-h200) against v10's softmax (.carry/v10: -DSW_MAX_SLACK=0), 3 rounds
  export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
  for r in ${NCAB_ROUNDS:-1 2 3}; do for v in build-h200 v10; do
    L=$PWD/.carry/$v
    LD_LIBRARY_PATH=$L:$DEB SPILLWAY_LIB=$L/libspillway.so timeout 60 python3 bench/prefill.py --impls spillway \
      --cases 1x16k --no-causal --md "" --out "$OUT/ncab/nc-$v-r$r.json" >"$OUT/ncab/nc-$v-r$r.log" 2>&1
    echo "$v r$r: $(grep -E '^  spillway ' "$OUT/ncab/nc-$v-r$r.log" | awk '{print $4}' | tr '\n' ' ')"
  done; done ;;
hostq)
  # the host-tier case, tile 256, timeline on: as is; with CUDA_DEVICE_MAX_CONNECTIONS=32 (do the compute
  # and gather streams share a hardware queue?); with the gathers on the compute stream
  for v in ${HOSTQ:-default CUDA_DEVICE_MAX_CONNECTIONS=32 SPILLWAY_SWAP_GATHER_AHEAD=0}; do
    setting "$v"; v=$n
    { echo "# ${envs[*]} SPILLWAY_SWAP_TIMELINE=1 spillway bench swap --dir /var/tmp --cases host --tile ${TILE:-256}"
      env "${envs[@]}" SPILLWAY_SWAP_TIMELINE=1 LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 60 \
        $B/spillway bench swap --dir /var/tmp --cases host --tile ${TILE:-256} --json "$OUT/hostq/swap-h200-host-q-${v//=/-}-t${TILE:-256}.json"
      echo "rc=$?"; } >"$OUT/hostq/swap-h200-host-q-${v//=/-}-t${TILE:-256}.log" 2>&1
    echo "$v"; grep -E "rc=|host_tier_read_GBps" "$OUT/hostq/swap-h200-host-q-${v//=/-}-t${TILE:-256}.log"
    grep -E "span" "$OUT/hostq/swap-h200-host-q-${v//=/-}-t${TILE:-256}.log" | tail -2
  done ;;
swaprec)
  # the recorded swap bench (every case; the resident one at 512k tokens with a GPU)
  { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 200 $B/spillway bench swap --dir /var/tmp \
      --json "$OUT/swaprec/swap-h200.json"; echo "bench swap rc=$?"; } >"$OUT/swaprec/swap-h200-bench.log" 2>&1
  grep -E "rc=|_GBps|step_ms|MISSED|met" "$OUT/swaprec/swap-h200-bench.log" | head -20 ;;
storerec)
  # the recorded store bench (issue 3): raw-seq, raw-rand64k, the engine's order, host tier, memcpy
  { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 300 $B/spillway store bench --dir /var/tmp ${STOREREC_ARGS:-} \
      --json "$OUT/storerec/store-h200.json"; echo "store bench rc=$?"; } >"$OUT/storerec/store-h200.log" 2>&1
  grep -E "rc=|engine/raw|host tier|median of per-pass" "$OUT/storerec/store-h200.log" | head -12 ;;
chunkab)
  # issue 3 / 4: 512 KiB read pieces (SPILLWAY_STORE_READ_CHUNK=524288), which won every store-bench
  # pairing on this disk in session 6 but slowed the swap disk case in session 4 (before the pinned
  # huge-page I/O memory): the store bench in-run A/B, then the swap disk case default / 512K, 2 rounds
  { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 200 $B/spillway store bench --dir /var/tmp --size-mb 1024 \
      --passes 7 --host-passes 1 --engine-ab "SPILLWAY_STORE_READ_CHUNK=524288" \
      --json "$OUT/chunkab/store-h200-chunk512k-ab.json"; echo "store bench rc=$?"; } >"$OUT/chunkab/store-h200-chunk512k-ab.log" 2>&1
  grep -E "rc=|engine/raw per|A/B/raw per|median of per-pass ratios" "$OUT/chunkab/store-h200-chunk512k-ab.log"
  for r in 1 2; do for c in 0 524288; do
    { echo "# SPILLWAY_STORE_READ_CHUNK=$c spillway bench swap --dir /var/tmp --cases disk"
      env $( [ $c = 0 ] || echo SPILLWAY_STORE_READ_CHUNK=$c ) LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 120 \
        $B/spillway bench swap --dir /var/tmp --cases disk --json "$OUT/chunkab/swap-h200-disk-chunk$c-r$r.json"
      echo "rc=$?"; } >"$OUT/chunkab/swap-h200-disk-chunk$c-r$r.log" 2>&1
    echo "chunk=$c r$r: $(grep -E 'step_ms_vs_1.15x|disk_read_GBps' "$OUT/chunkab/swap-h200-disk-chunk$c-r$r.log" | awk '{print $2, $3, $4, $5}' | tr '\n' ' ')"
  done; done ;;
diskab)
  # issue 4's disk case: read knobs, each variant once per round, $DISKAB_ROUNDS rounds (default 2):
  # as is; 8 MiB of ticket reads on the device (SPILLWAY_STORE_READ_INFLIGHT); no read-through of gaps
  # (SPILLWAY_STORE_READ_GAP=0); both; 8 MiB with 8 tiles of read-ahead
  for r in $(seq 1 ${DISKAB_ROUNDS:-2}); do
  for v in ${DISKAB:-default SPILLWAY_STORE_READ_INFLIGHT=8388608 SPILLWAY_STORE_READ_GAP=0 SPILLWAY_STORE_READ_INFLIGHT=8388608,SPILLWAY_STORE_READ_GAP=0 SPILLWAY_STORE_READ_INFLIGHT=8388608,pd8}; do
    setting "$v"
    { echo "# ${envs[*]} spillway bench swap --dir /var/tmp --cases disk ${args[*]}"
      env "${envs[@]}" LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 120 $B/spillway bench swap --dir /var/tmp --cases disk \
        "${args[@]}" ${DISKAB_ARGS:-} --json "$OUT/diskab/swap-h200-disk-$n-r$r.json"; echo "rc=$?"; } >"$OUT/diskab/swap-h200-disk-$n-r$r.log" 2>&1
    echo "$v r$r: $(grep -E 'step_ms_vs_1.15x|disk_read_GBps' "$OUT/diskab/swap-h200-disk-$n-r$r.log" | awk '{print $2, $3, $4, $5}' | tr '\n' ' ') $(grep -oE 'x the payload|busy [0-9.]+% of the step' "$OUT/diskab/swap-h200-disk-$n-r$r.log" | tr '\n' ' ') $(grep -oE '[0-9.]+ MiB per step = [0-9.]+ x' "$OUT/diskab/swap-h200-disk-$n-r$r.log")"
  done; done ;;
storeab)
  # issue 3: the store bench's in-run A/B of $STOREAB (default 8 MiB of ticket reads on the device)
  { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 200 $B/spillway store bench --dir /var/tmp --size-mb 1024 \
      --passes 7 --host-passes 1 --engine-ab "${STOREAB:-SPILLWAY_STORE_READ_INFLIGHT=8388608}" \
      --json "$OUT/storeab/store-h200-ab.json"; echo "store bench rc=$?"; } >"$OUT/storeab/store-h200-ab.log" 2>&1
  grep -E "rc=|engine/raw per|A/B/raw per|median of per-pass ratios" "$OUT/storeab/store-h200-ab.log" ;;
varab)
  # kernel variants staged with `stage_s7b.sh var:NAME` (.carry/NAME): test_prefill_cuda on each, then
  # the C CLI's prefill bench (ours only) for $VARAB_SHAPES on the causal cases, the main build and each
  # variant interleaved, $VARAB_ROUNDS rounds (default 2)
  vars=$(cd .carry && for v in *; do [ -x $v/tests/test_prefill_cuda ] && [ $v != build-h200 ] && echo $v; done)
  for e in $vars; do
    { env ${VARAB_ENV:-} LD_LIBRARY_PATH=$PWD/.carry/$e:$DEB timeout 200 .carry/$e/tests/test_prefill_cuda; echo "test_prefill_cuda $e rc=$?"; } \
      >"$OUT/varab/test-prefill-cuda-$e.log" 2>&1
    tail -2 "$OUT/varab/test-prefill-cuda-$e.log"
  done
  for r in $(seq 1 ${VARAB_ROUNDS:-2}); do for v in build-h200 $vars; do
    env ${VARAB_ENV:-} LD_LIBRARY_PATH=$PWD/.carry/$v:$DEB timeout 120 .carry/$v/spillway bench prefill --cases mix-a,mix-b,16x1k,1x16k \
      --shapes ${VARAB_SHAPES:-h32-8/d64,h32-8/d128,h16-2/d256} --reps 20 --warmup 3 >"$OUT/varab/prefill-$v-r$r.log" 2>&1
    echo "$v r$r: $(grep -E 'spillway ' "$OUT/varab/prefill-$v-r$r.log" | awk '{print $1, $5}' | sed 's|/causal||; s|/h[0-9-]*/| |' | tr '\n' ' ')"
  done; done ;;
ncrec)
  # non-causal 1x16k (all three head shapes) with cuDNN and FlashInfer's FA3, $NCREC_ROUNDS runs (default 3)
  export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 SPILLWAY_OPPONENT=flashinfer
  O=$PWD/.carry/build-opp
  for r in $(seq 1 ${NCREC_ROUNDS:-3}); do
    LD_LIBRARY_PATH=$O:$DEB SPILLWAY_LIB=$O/libspillway.so timeout 120 python3 bench/prefill.py \
      --impls spillway,sdpa-cudnn,flashinfer-c-fa3 --cases 1x16k --no-causal --md "" \
      --out "$OUT/ncrec/prefill-h200-noncausal-r$r.json" >"$OUT/ncrec/prefill-h200-noncausal-r$r.log" 2>&1
    echo "r$r rc=$? $(grep -E '^== |spillway  ' "$OUT/ncrec/prefill-h200-noncausal-r$r.log" | awk '{print $2, $5}' | tr '\n' ' ')"
  done ;;
hostab)
  # the host-tier case (no timeline) under settings: $HOSTAB = variants, each VAR=value[,VAR=value...] or
  # default; $HOSTAB_ROUNDS rounds (default 2), the variants interleaved
  for r in $(seq 1 ${HOSTAB_ROUNDS:-2}); do for v in ${HOSTAB:-default}; do
    setting "$v"
    { echo "# ${envs[*]} spillway bench swap --dir /var/tmp --cases host ${args[*]}"
      env "${envs[@]}" LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 60 $B/spillway bench swap --dir /var/tmp --cases host \
        "${args[@]}" --json "$OUT/hostab/swap-h200-host-$n-r$r.json"; echo "rc=$?"; } >"$OUT/hostab/swap-h200-host-$n-r$r.log" 2>&1
    echo "$v r$r: $(grep -E 'host_tier_read_GBps' "$OUT/hostab/swap-h200-host-$n-r$r.log" | awk '{print $3, $4, $5}')"
  done; done ;;
swapvar)
  # swap engine variants staged with `stage_s7b.sh var:NAME` (.carry/NAME, e.g. build-fm:
  # -DSW_SWAP_FUSED_MERGE=1; $SWAPVAR_ONLY: just these): test_swap_cuda on each with every tile kernel
  # ($SWAPVAR_KERNELS, default 3 0 2 1: the fused merge is in 3, 0, 2, the CUDA-core kernel 1 takes the
  # separate merge), then the host-tier case, main and each variant interleaved, $SWAPVAR_ROUNDS rounds
  # (default 2), $SWAPVAR_ARGS added (e.g. --tile 256)
  vars=$(cd .carry && for v in *; do [ -x $v/tests/test_swap_cuda ] && echo $v; done)
  for e in ${SWAPVAR_ONLY:-$vars}; do for k in ${SWAPVAR_KERNELS:-3 0 2 1}; do
    { SPILLWAY_SWAP_TILE_KERNEL=$k SW_TEST_SWAP_CASES=16 LD_LIBRARY_PATH=$PWD/.carry/$e:$DEB timeout 150 \
        .carry/$e/tests/test_swap_cuda; echo "test_swap_cuda $e kernel $k rc=$?"; } >"$OUT/swapvar/test-swap-cuda-$e-k$k.log" 2>&1
    tail -1 "$OUT/swapvar/test-swap-cuda-$e-k$k.log"
  done; done
  vars=${SWAPVAR_ONLY:-$vars}
  for r in $(seq 1 ${SWAPVAR_ROUNDS:-2}); do for v in build-h200 $vars; do
    { LD_LIBRARY_PATH=$PWD/.carry/$v:$DEB timeout 60 .carry/$v/spillway bench swap --dir /var/tmp --cases host \
        ${SWAPVAR_ARGS:-} --json "$OUT/swapvar/swap-h200-host-$v-r$r.json"; echo "rc=$?"; } >"$OUT/swapvar/swap-h200-host-$v-r$r.log" 2>&1
    echo "$v r$r: $(grep -E 'host_tier_read_GBps' "$OUT/swapvar/swap-h200-host-$v-r$r.log" | awk '{print $3, $4, $5}')"
  done; done ;;
*) echo "unknown stage $stage" >&2 ;;
esac; echo "$stage $(el)"; pack "$stage"; done
