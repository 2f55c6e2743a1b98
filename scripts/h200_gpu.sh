#!/usr/bin/env bash
# The GPU suite on the lent H200, built here (the device call spends no time
# compiling). Two halves:
#
#   scripts/h200_gpu.sh stage [--opp D]  here: build build-h200 (sm_90a, Release;
#                                        configured on first use) and pack what
#                                        ctest needs into .carry/ (ignored; carried);
#                                        --opp D: also D/libspillway.so, a build
#                                        with the FlashInfer opponent (docs/
#                                        opponents.md), its test_opponent_flashinfer,
#                                        spillway-bench-paged and -swap, xz-packed into
#                                        .carry/opp.tar.xz (run unpacks .carry/opp/)
#   scripts/h200_gpu.sh run STAGE...     there, from the repository root, with
#                                        carry [".carry"]; files under $OUT
#
# Stages of `run`:
#   suiteN     `ctest -j4 -L gpu` N times in a row (suite20: twenty), stopping
#              at the first failure; one log per run plus a table of each
#              run's time and result
#   sanitize   compute-sanitizer's racecheck, synccheck, initcheck and memcheck
#              on the portable kernel's two shapes that failed under load
#              (test_prefill_cuda --only f16 56|66 portable) and on the Hopper
#              kernel's case 56
#   racecheck  compute-sanitizer racecheck, whole reports, on those shapes and
#              six more, for each test_prefill_cuda under .carry/li/ (built
#              with -lineinfo: reports name source lines), then synccheck and
#              initcheck on the two shapes
#   unorderedN test_prefill_stress built with -DSW_TEST_UPLOAD_UNORDERED (the
#              upload as it was: cudaMemcpy on the legacy stream), then the
#              real one, N times (default 1)
#   figures    the recorded figures to hold: bench/prefill.py (1x16k and both
#              mixes, d128 and d256, against cuDNN and FA2 varlen) and
#              `spillway bench swap` (its three cases)
#   cli        the command-line tests (`ctest -j4 -R ^cli_`: the demo and the
#              benches, on the GPU here)
#   pytest     the Python binding's tests over this build's library (their
#              `gpu` ones run here; the machine's torch)
#   abhostN    the host-tier case of `spillway bench swap` N times (default
#              3), alternating the build staged in .carry/old/ and this one
#   decode     the decode figures of the swap engine: bench/swap_decode.py
#              (the opponent build from .carry/opp/ when staged, with
#              SPILLWAY_OPPONENT=flashinfer), `spillway bench swap` at
#              Llama-3-8B's heads and head_dim (its three cases), a 32-layer
#              decode step of that shape (8 x 32k tokens, all resident:
#              swap_decode.py --step) against the HBM floor, and
#              bench/hf_decode.py's host-tier case at that shape over
#              131,072 tokens (4 tokens, the engine's time per token by
#              phase)
#   opp        the opponent build staged by --opp: test_opponent_flashinfer
#              (SW_TEST_OPPONENT and SW_TEST_CASES passed through; unset: every
#              path, which takes minutes) and spillway-bench-paged's prefill
#              cases (1x16k and both mixes beside FlashInfer's FA2 and FA3 paged
#              prefill; its JSON in $OUT/paged-h200.json)
#   records    the recorded runs of issues 24 and 25 on the opponent build
#              staged by --opp, two rounds (the first of each bench before the
#              second of either, so a call cut short by the device's time still
#              brings one of each back): `spillway bench paged` (every case, ~40 s
#              a run on an H100), tabled by bench/paged_table.py; and
#              `spillway bench swap`, both shapes in one run (--shapes
#              h32-8/d128,h16-2/d256, ~35 s a run on an H100) beside FlashInfer's
#              batch decode and cuDNN's paged SDPA (the machine's PyTorch cuDNN
#              on LD_LIBRARY_PATH), tabled by bench/swap_table.py. Files
#              paged-h200[-2].json, paged-h200.log, paged-h200-lines.md,
#              swap-h200[-2].json, swap-h200.log, swap-h200-lines.md: what
#              bench/results/ keeps
#   hostdiag   the host-tier case's diagnostics, no record (both shapes, 30 steps,
#              ~2 s a run on an H100): a run with the timeline (tuning
#              `timeline`, docs/perf/swap.md), then landing ahead 0 / 16 / 48 MiB
#              alternating (tuning `land_ahead_mb`, two rounds), then the process
#              held to 2 cores; files hd-*.json and hd-*.log
#   all        the whole C suite once, `ctest -j4`
#   pack       last: every file under $OUT into $OUT/out.tgz, keeping only it and
#              the *.md tables beside it (the device brings back 8 files at most)
set -uo pipefail
cd "$(dirname "$0")/.."
B=build-h200
case ${1:-} in
stage)
  opp=
  [ "${2:-}" = --opp ] && opp=${3:?--opp needs a build directory}
  set -e
  [ -f $B/CMakeCache.txt ] || cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_CUDA=ON \
    -DSPILLWAY_CUDA_ARCHS=90a >/dev/null
  cmake --build $B -j"$(nproc)" >/dev/null
  # The stress test with the old upload, to show that the test catches it.
  (cd $B/tests &&
    gcc -DSW_HAVE_CUDA=1 -D_GNU_SOURCE -DSW_TEST_UPLOAD_UNORDERED -I../../src -I../../include \
      -isystem /usr/local/cuda/include -O2 -std=c11 -c ../../tests/test_prefill_stress.c \
      -o /tmp/sw_stress_unordered.o &&
    sed 's#CMakeFiles/test_prefill_stress.dir/test_prefill_stress.c.o#/tmp/sw_stress_unordered.o#' \
      CMakeFiles/test_prefill_stress.dir/objects1 >/tmp/sw_stress_unordered.objs &&
    g++ @/tmp/sw_stress_unordered.objs -o test_prefill_stress_unordered \
      @CMakeFiles/test_prefill_stress.dir/linkLibs.rsp \
      -L/usr/local/cuda/targets/x86_64-linux/lib/stubs -L/usr/local/cuda/targets/x86_64-linux/lib)
  mkdir -p "$(git rev-parse --git-dir)/info"
  grep -qx '/.carry/' "$(git rev-parse --git-dir)/info/exclude" 2>/dev/null ||
    echo '/.carry/' >>"$(git rev-parse --git-dir)/info/exclude"
  rm -rf .carry && mkdir -p .carry/debs .carry/li
  # test_prefill_cuda programs built with -lineinfo, when staged in /tmp/sw-li/
  cp -a /tmp/sw-li/. .carry/li/ 2>/dev/null || true
  (find $B -name CTestTestfile.cmake; find $B -maxdepth 2 -type f -perm -u+x ! -path '*/CMakeFiles/*';
   ls $B/libspillway.so*) | sort -u | tar cJf .carry/build.tar.xz -T -
  (cd .carry/debs && apt-get download liburing2 libhiredis0.14 >/dev/null 2>&1)
  if [ -n "$opp" ]; then
    # (the library and three programs: ~70 MB, ~9 MB packed)
    rm -rf /tmp/sw-opp-stage && mkdir -p /tmp/sw-opp-stage/opp
    cp -L "$opp/libspillway.so" /tmp/sw-opp-stage/opp/
    for f in tests/test_opponent_flashinfer spillway-bench-paged spillway-bench-swap; do
      [ -x "$opp/$f" ] && cp "$opp/$f" /tmp/sw-opp-stage/opp/
    done
    tar cJf .carry/opp.tar.xz -C /tmp/sw-opp-stage opp
  fi
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')" >.carry/commit
  echo "staged $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')"
  du -sh .carry ;;
run)
  shift
  OUT=${OUT:-out}; mkdir -p "$OUT"
  # ctest's files name the build tree by its path here: give it that path.
  here=$(cd "$(dirname "$0")/.." && pwd)
  mkdir -p /work && { [ -e /work/main ] || ln -s "$here" /work/main; }
  rm -rf $B && tar xJf .carry/build.tar.xz
  mkdir -p /tmp/sw-debs && for f in .carry/debs/*.deb; do dpkg -x "$f" /tmp/sw-debs; done
  [ -f .carry/opp.tar.xz ] && tar xJf .carry/opp.tar.xz -C .carry
  export LD_LIBRARY_PATH=/tmp/sw-debs/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PATH=/usr/local/cuda/bin:$PATH
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  for stage in "$@"; do case $stage in
  suite*)
    n=${stage#suite}; pass=0
    echo "# ctest -j4 -L gpu, $n runs in a row, $(date -u +%FT%TZ), build $(cat .carry/commit 2>/dev/null)" \
      >"$OUT/gpu-suite.md"
    for i in $(seq 1 "$n"); do
      t0=$(date +%s.%N)
      (cd /work/main/$B && ctest -j4 -L gpu --output-on-failure) >"$OUT/gpu-suite-run$i.log" 2>&1
      rc=$?; t1=$(date +%s.%N)
      # every test's whole output, first run only (each test's own timings)
      [ "$i" = 1 ] && cp /work/main/$B/Testing/Temporary/LastTest.log "$OUT/gpu-suite-full-run1.log"
      [ $rc = 0 ] && pass=$((pass + 1))
      line="run $i: rc=$rc $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s; $(grep -E 'tests passed' "$OUT/gpu-suite-run$i.log")"
      echo "$line" | tee -a "$OUT/gpu-suite.md"
      [ $rc = 0 ] || { echo "run $i failed: the runs stop here" | tee -a "$OUT/gpu-suite.md"; break; }
    done
    echo "$pass of $n runs passed" | tee -a "$OUT/gpu-suite.md"
    # each test's time, per run
    grep -hE "Test +#" "$OUT"/gpu-suite-run[0-9]*.log | sed 's/^ *//' >>"$OUT/gpu-suite.md"
    cat "$OUT"/gpu-suite-run[0-9]*.log >"$OUT/gpu-suite-all.log" && rm -f "$OUT"/gpu-suite-run[0-9]*.log ;;
  sanitize)
    for tool in racecheck synccheck initcheck memcheck; do
      for c in "56 portable" "66 portable" "56 hopper"; do
        echo "## compute-sanitizer --tool $tool test_prefill_cuda --only f16 $c"
        timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 \
          $B/tests/test_prefill_cuda --only f16 $c 2>&1 | tail -4
        echo "rc=${PIPESTATUS[0]}"
      done
    done 2>&1 | tee "$OUT/sanitize.log" ;;
  racecheck)
    for bin in .carry/li/*; do
      shapes=("f16 56 portable" "f16 66 portable")
      case $bin in *before*) ;; *) shapes+=("bf16 1 portable" "bf16 2 portable" "bf16 3 portable"
        "f16 4 portable" "f16 5 portable" "f16 6 portable" "f16 56 hopper") ;; esac
      for c in "${shapes[@]}"; do
        echo "## compute-sanitizer --tool racecheck $bin --only $c"
        timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $bin --only $c 2>&1
        echo "rc=$?"
      done
      case $bin in *before*) continue ;; esac
      for tool in synccheck initcheck; do for c in "f16 56 portable" "f16 66 portable"; do
        echo "## compute-sanitizer --tool $tool $bin --only $c"
        timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $bin --only $c 2>&1 | tail -3
        echo "rc=${PIPESTATUS[0]}"
      done; done
    done >"$OUT/racecheck.log" 2>&1
    grep -E "^## |SUMMARY|^rc=" "$OUT/racecheck.log" ;;
  unordered*)
    n=${stage#unordered}
    for i in $(seq 1 "${n:-1}"); do
      echo "## test_prefill_stress_unordered, run $i"
      timeout 300 $B/tests/test_prefill_stress_unordered 2>&1 | grep -vE '^ok ' | tail -12
      echo "rc=${PIPESTATUS[0]}"
      echo "## test_prefill_stress, run $i"
      timeout 300 $B/tests/test_prefill_stress 2>&1 | tail -4
      echo "rc=${PIPESTATUS[0]}"
    done 2>&1 | tee "$OUT/stress.log" ;;
  prefill)
    # the prefill programs and the default swap test, together (-j4)
    (cd /work/main/$B && ctest -j4 --output-on-failure -R '^(test_prefill_cuda|test_prefill_stress|test_swap_cuda)$') \
      >"$OUT/ctest-prefill.log" 2>&1
    echo "ctest prefill: rc=$?"; grep -E "Test +#|tests passed|FAIL" "$OUT/ctest-prefill.log" | head -20 ;;
  cli)
    (cd /work/main/$B && ctest -j4 -R '^cli_' --output-on-failure) >"$OUT/ctest-cli.log" 2>&1
    echo "ctest cli: rc=$?"; grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest-cli.log" | head -20 ;;
  pytest)
    SPILLWAY_LIB=$PWD/$B/libspillway.so PYTHONPATH=$PWD/python timeout 540 \
      python3 -m pytest -q -rs tests/python >"$OUT/pytest.log" 2>&1
    echo "pytest: rc=$?"; grep -E "passed|failed|FAILED|Error" "$OUT/pytest.log" | tail -12 ;;
  figures)
    # The recorded figures to hold: prefill 1x16k and both mixes at d128 and
    # d256 against cuDNN and the FlashAttention-2 varlen op (PyTorch of the
    # machine), then `spillway bench swap`'s three cases.
    SPILLWAY_LIB=$PWD/$B/libspillway.so PYTHONPATH=$PWD/python timeout 300 python3 bench/prefill.py \
      --impls spillway,sdpa-cudnn,fa2-varlen \
      --cases 1x16k/h32-8/d128,1x16k/h16-2/d256,mix-a/h32-8/d128,mix-a/h16-2/d256,mix-b/h32-8/d128,mix-b/h16-2/d256 \
      --out "$OUT/prefill-figures.json" --md "$OUT/prefill-figures.md" >"$OUT/prefill-figures.log" 2>&1
    echo "prefill figures: rc=$?"; grep -E "^\| (1x16k|mix)" "$OUT/prefill-figures.md" | cut -c1-160
    timeout 300 $B/spillway bench swap --dir /var/tmp --json "$OUT/swap-h200.json" >"$OUT/swap-h200.log" 2>&1
    echo "bench swap: rc=$?"; grep -E "GBps|ms_per_step|vs_" "$OUT/swap-h200.log" | head -40 ;;
  abhost*)
    # the host-tier case of `spillway bench swap`, N times (default 3), the
    # build staged in .carry/old/ (lib + bench) and this one alternating
    n=${stage#abhost}
    for i in $(seq 1 "${n:-3}"); do
      for side in old new; do
        if [ $side = old ]; then bin=.carry/old/spillway-bench-swap; lp=$PWD/.carry/old
        else bin=$B/bench/spillway-bench-swap; lp=$PWD/$B; fi
        [ -x $bin ] || bin=$B/spillway-bench-swap
        LD_LIBRARY_PATH=$lp:$LD_LIBRARY_PATH timeout 120 $bin --dir /var/tmp --cases host \
          --json "$OUT/ab-$side-$i.json" >"$OUT/ab-$side-$i.log" 2>&1
        echo "$side $i: rc=$? $(grep -E 'host_tier_read_GBps ' "$OUT/ab-$side-$i.log" | head -1)"
        grep -E "attend calls|host side" "$OUT/ab-$side-$i.log" | sed 's/; each:.*//'
      done
    done 2>&1 | tee "$OUT/abhost.log"
    # one file back instead of four a run
    (cd "$OUT" && tar czf abhost-runs.tar.gz ab-*-*.json ab-*-*.log && rm -f ab-*-*.json ab-*-*.log) ;;
  decode)
    c=$(cat .carry/commit)
    lib=$PWD/$B/libspillway.so
    [ -f .carry/opp/libspillway.so ] && lib=$PWD/.carry/opp/libspillway.so
    SPILLWAY_LIB=$lib SPILLWAY_OPPONENT=flashinfer PYTHONPATH=$PWD/python timeout 200 \
      python3 bench/swap_decode.py --reps 10 --commit "$c" --json "$OUT/swap-decode-h200.json" \
      >"$OUT/swap-decode-h200.log" 2>&1
    echo "swap_decode: rc=$?"; grep -E "^[0-9]+x|failed" "$OUT/swap-decode-h200.log"
    timeout 200 $B/spillway bench swap --dir /var/tmp --shape h32-8/d128 \
      --json "$OUT/swap-h200-d128.json" >"$OUT/swap-h200-d128.log" 2>&1
    echo "bench swap, h32-8/d128: rc=$?"
    grep -E "GBps|ms_per_step|vs_" "$OUT/swap-h200-d128.log" | head -20
    SPILLWAY_LIB=$PWD/$B/libspillway.so PYTHONPATH=$PWD/python timeout 150 python3 \
      bench/swap_decode.py --step 8x32k/h32-8/d128/32 --reps 10 --commit "$c" \
      --json "$OUT/swap-step-h200.json" >"$OUT/swap-step-h200.log" 2>&1
    echo "32-layer step: rc=$?"; tail -2 "$OUT/swap-step-h200.log"
    SPILLWAY_LIB=$PWD/$B/libspillway.so PYTHONPATH=$PWD/python timeout 180 python3 \
      bench/hf_decode.py --layers 32 --heads 32 --kv-heads 8 --head-dim 128 --hidden 4096 \
      --ffn 14336 --vocab 128256 --context 131072 --new-tokens 4 --host-new-tokens 4 \
      --impls spillway-host --commit "$c" --json "$OUT/hf-llama-128k-host.json" \
      >"$OUT/hf-llama-128k-host.log" 2>&1
    echo "hf_decode 128k host tier: rc=$?"; tail -3 "$OUT/hf-llama-128k-host.log" ;;
  opp)
    [ -x .carry/opp/test_opponent_flashinfer ] || { echo "opp: nothing staged (stage --opp D)"; continue; }
    SPILLWAY_OPPONENT=flashinfer timeout 400 stdbuf -oL .carry/opp/test_opponent_flashinfer \
      >"$OUT/opp-test.log" 2>&1
    echo "test_opponent_flashinfer (SW_TEST_OPPONENT=${SW_TEST_OPPONENT:-all}): rc=$?"
    grep -E "FAIL|^test_opponent" "$OUT/opp-test.log" | head -20
    SPILLWAY_OPPONENT=flashinfer timeout 300 .carry/opp/spillway-bench-paged \
      --cases p1x16k,pmix-a,pmix-b --reps 10 --json "$OUT/paged-h200.json" \
      >"$OUT/paged-h200.log" 2>&1
    echo "bench paged (prefill cases): rc=$?"; grep -E "^p" "$OUT/paged-h200.log" | cut -c1-230 ;;
  records)
    [ -x .carry/opp/spillway-bench-swap ] && [ -x .carry/opp/spillway-bench-paged ] ||
      { echo "records: no opponent build staged (stage --opp D)"; continue; }
    cudnn=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null)
    [ -n "$cudnn" ] || echo "records: no cuDNN in the machine's Python: its lines are left out"
    # bench NAME RUN CMD...: CMD with `--json` $OUT/NAME.json (run 1) or NAME-2.json (run 2), its
    # log appended to $OUT/NAME.log. Both benches' first runs come before either's second, so a
    # call cut short by the device's time still brings back one run of each.
    bench() {
      local name=$1 run=$2 j; shift 2
      j=$OUT/$name.json; [ "$run" = 2 ] && { j=$OUT/$name-2.json; echo "# second run" >>"$OUT/$name.log"; }
      "$@" --json "$j" >>"$OUT/$name.log" 2>&1
      echo "$name, run $run: rc=$?" >&2
    }
    for run in 1 2; do
      SPILLWAY_OPPONENT=flashinfer bench paged-h200 $run timeout 240 .carry/opp/spillway-bench-paged
      LD_LIBRARY_PATH=${cudnn:+$cudnn:}$LD_LIBRARY_PATH SPILLWAY_OPPONENT=flashinfer,cudnn \
        bench swap-h200 $run timeout 240 .carry/opp/spillway-bench-swap --dir /var/tmp \
        --shapes h32-8/d128,h16-2/d256
    done
    # the runs' files that exist, in run order
    runs() { for j in "$OUT/$1.json" "$OUT/$1-2.json"; do [ -f "$j" ] && echo "$j"; done; }
    python3 bench/paged_table.py $(runs paged-h200) --md "$OUT/paged-h200-lines.md" | tail -1
    python3 bench/swap_table.py $(runs swap-h200) --md "$OUT/swap-h200-lines.md" ;;
  hostdiag)
    bin=.carry/opp/spillway-bench-swap; [ -x $bin ] || bin=$B/spillway-bench-swap
    # hd TAG CMD...: CMD's host-tier case at both shapes, its figures against pinned H2D
    hd() {
      local tag=$1; shift
      "$@" --dir /var/tmp --cases host --shapes h32-8/d128,h16-2/d256 --steps 30 \
        --json "$OUT/hd-$tag.json" >"$OUT/hd-$tag.log" 2>&1
      echo "$tag: rc=$?"; grep -E "host_tier_read_GBps " "$OUT/hd-$tag.log" | sed 's/^/  /'
    }
    hd timeline timeout 120 $bin --tune timeline=1
    for r in 1 2; do for a in 0 16 48; do
      hd ahead$a-$r timeout 120 $bin --tune land_ahead_mb=$a
    done; done
    hd cores2 timeout 120 taskset -c 0-1 $bin ;;
  all)
    (cd /work/main/$B && ctest -j4 --output-on-failure) >"$OUT/ctest-all.log" 2>&1
    echo "ctest all: rc=$?"; tail -25 "$OUT/ctest-all.log" ;;
  pack)
    (cd "$OUT" && tar czf /tmp/sw-out.tgz --exclude out.tgz . && mv /tmp/sw-out.tgz out.tgz &&
      find . -type f ! -name out.tgz ! -name '*.md' -delete && find . -mindepth 1 -type d -empty -delete)
    echo "pack: $(ls "$OUT" | tr '\n' ' ')" ;;
  *) echo "h200_gpu.sh: unknown stage $stage" >&2; exit 2 ;;
  esac; done ;;
*) awk 'NR > 1 && /^set /{exit} NR > 1' "$0"; exit 2 ;;
esac
