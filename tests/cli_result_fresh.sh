#!/bin/sh
# A benchmark without --json writes a new file under bench/results and never
# touches a file that is already there (a committed record).
# Usage: cli_result_fresh.sh SPILLWAY_CLI SCRATCH_DIR
set -eu
cli=$1 dir=$2/cli-result-fresh
rm -rf "$dir" && mkdir -p "$dir/bench/results" "$dir/store"
cd "$dir"
host=$(hostname | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
echo KEEP >"bench/results/store-${host:-host}.json"
for i in 1 2; do
  "$cli" store bench --size-mb 64 --stream-blocks 64 --host-mb 16 --dir "$dir/store" >/dev/null
done
n=$(ls bench/results | grep -c '^store-.*-[0-9]\{8\}T[0-9]\{6\}Z.*\.json$' || true)
[ "$n" = 2 ] || { echo "FAIL: want 2 new result files, found $n:"; ls bench/results; exit 1; }
[ "$(cat "bench/results/store-${host:-host}.json")" = KEEP ] || { echo "FAIL: record overwritten"; exit 1; }
echo "ok: two new result files, the record untouched"
