#!/bin/bash
# (session 4: copied to .carry/call9.sh, run with carry [".carry"] after scripts/h200_stage.sh; commit 1500d54)
# call 9: swap bench (all cases) and store bench with the committed defaults
set -u
mkdir -p .carry/debs/root; for f in .carry/debs/*.deb; do dpkg -x $f .carry/debs/root; done
B=.carry/build-h200
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
timeout 130 $B/spillway bench swap --dir /var/tmp --json $OUT/swap-h200.json 2>&1 | grep -v -E "^  (offload|decode): +[0-9]+%" > $OUT/swap-h200.log
echo "bench swap rc=$?"
grep -E "^(disk-bound|host-tier-bound|all-resident) .*(GBps |step_ms|attend_ms)|disk path|storage by|ms per step" $OUT/swap-h200.log
{ uptime; df -hT /var/tmp | tail -1; timeout 150 $B/spillway store bench --dir /var/tmp \
    --engine-ab SPILLWAY_STORE_READ_CHUNK=524288,SPILLWAY_STORE_READ_INFLIGHT=8388608 --json $OUT/store-h200.json; echo "store bench rc=$?"; } > $OUT/store-h200.log 2>&1
grep -E "rc=|/ raw-seq: median|host-tier / memcpy|engine/raw per|A/B/raw per" $OUT/store-h200.log
