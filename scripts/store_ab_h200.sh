#!/usr/bin/env bash
# Store read tickets on the lent H200 (issue 3): the device-queue profile of
# `spillway store bench` and in-run A/Bs of the read-ticket settings
# (--engine-ab: the engine order read again in every pass on a handle opened
# with the variables set). Uses the CLI staged by scripts/h200_stage.sh in
# .carry/build-h200 (carry: [".carry"]). About 2 minutes; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root
for f in .carry/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" .carry/debs/root; done
B=${SPILLWAY_CLI:-.carry/build-h200/spillway}
export LD_LIBRARY_PATH=$PWD/$(dirname "$B"):$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
{ uptime; df -hT /var/tmp | tail -1; nproc; } >"$OUT/store-ab-host.txt" 2>&1
i=0
for ab in SPILLWAY_STORE_READ_CHUNK=524288 SPILLWAY_STORE_READ_INFLIGHT=8388608 \
          SPILLWAY_STORE_READ_CHUNK=524288,SPILLWAY_STORE_READ_INFLIGHT=8388608; do
  i=$((i + 1))
  cmd="$B store bench --size-mb ${SIZE_MB:-1024} --passes 3 --host-passes 1 --engine-ab $ab --json $OUT/store-ab$i.json"
  echo "\$ $cmd" >"$OUT/store-ab$i.log"
  timeout 55 $cmd >>"$OUT/store-ab$i.log" 2>&1; echo "run $i ($ab) rc=$?"
  grep -E "device queue|calling thread|requests, |engine/raw|A/B/raw|store/raw-tiles|/ raw-seq: median" \
    "$OUT/store-ab$i.log"
done
