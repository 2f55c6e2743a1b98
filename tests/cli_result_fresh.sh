#!/bin/sh
# A benchmark without --json writes a new file under bench/results and never
# touches a file that is already there (a committed record); the file is
# headed by the command that wrote it and the commit it was built from.
# Usage: cli_result_fresh.sh BENCH_DIR SCRATCH_DIR (BENCH_DIR holds the
# spillway-bench-* programs)
set -eu
bin=$1 dir=$2/cli-result-fresh
rm -rf "$dir" && mkdir -p "$dir/bench/results" "$dir/store"
cd "$dir"
host=$(hostname | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
echo KEEP >"bench/results/store-${host:-host}.json"
echo KEEP >"bench/results/prefill-${host:-host}.json"
# The store bench once (its 64 MiB file is most of this test's time), the
# prefill bench twice: two runs in the same second get two files.
"$bin/spillway-bench-store" --size-mb 64 --stream-blocks 64 --host-mb 16 --passes 1 \
  --host-passes 1 --dir "$dir/store" >/dev/null
for i in 1 2; do
  "$bin/spillway-bench-prefill" --cpu --scale 0.02 --reps 1 --warmup 0 --cases 16x1k \
    --shapes h32-8/d64 >/dev/null
done
for c in store prefill; do
  want=2; [ $c = store ] && want=1
  n=$(ls bench/results | grep -c "^$c-.*-[0-9]\{8\}T[0-9]\{6\}Z.*\.json\$" || true)
  [ "$n" = $want ] || { echo "FAIL: want $want new $c result files, found $n:"; ls bench/results; exit 1; }
  [ "$(cat "bench/results/$c-${host:-host}.json")" = KEEP ] || { echo "FAIL: $c record overwritten"; exit 1; }
  for f in bench/results/$c-*T*Z*.json; do
    grep -q "^{\"component\": \"$c\", \"command\": \"spillway-bench-$c " "$f" ||
      { echo "FAIL: $f does not start with its component and command:"; head -2 "$f"; exit 1; }
    grep -q '"commit": "[0-9a-f+a-z]\{1,\}"' "$f" || { echo "FAIL: $f names no commit"; exit 1; }
    grep -q '"records": \[' "$f" || { echo "FAIL: $f has no records list"; exit 1; }
  done
done
if command -v python3 >/dev/null 2>&1; then
  for f in bench/results/*T*Z*.json; do
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["records"], sys.argv[1]' "$f" ||
      { echo "FAIL: $f is not JSON with records"; exit 1; }
  done
fi
echo "ok: a new result file per run, each headed by its command and commit; the records untouched"
