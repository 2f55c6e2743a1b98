#!/bin/bash
# (session 4: copied to .carry/call8.sh and run with carry [".carry"] after scripts/h200_stage.sh test_swap_cuda test_prefill_cuda test_prefill_errors and the opponent build of a clean worktree copied to .carry/build-opp)
# call 8 (commit 8d2b95b): store v11 verdict run with v10 settings as the in-run A/B, swap
# (quick GPU test + bench, all cases), the binding's tests, and a second recorded prefill run
set -u
mkdir -p .carry/debs/root; for f in .carry/debs/*.deb; do dpkg -x $f .carry/debs/root; done
B=.carry/build-h200
export LD_LIBRARY_PATH=$PWD/$B:$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
{ uptime; df -hT /var/tmp | tail -1; timeout 170 $B/spillway store bench --dir /var/tmp \
    --engine-ab SPILLWAY_STORE_READ_CHUNK=0,SPILLWAY_STORE_READ_INFLIGHT=4194304 --json $OUT/store-h200.json; echo "store bench rc=$?"; } > $OUT/store-h200.log 2>&1
grep -E "rc=|/ raw-seq: median|host-tier / memcpy|engine/raw per|A/B/raw per" $OUT/store-h200.log
{ SW_TEST_SWAP_CASES=8 timeout 120 $B/tests/test_swap_cuda; echo "test_swap_cuda (8 cases) rc=$?";
  timeout 150 $B/spillway bench swap --dir /var/tmp --json $OUT/swap-h200.json; echo "bench swap rc=$?"; } 2>&1 | \
  grep -v -E "^  (offload|decode): +[0-9]+%" > $OUT/swap-h200.log
grep -E "rc=|cases \(|FAIL|^(disk-bound|host-tier-bound|all-resident) .*(GBps|step_ms|max_rel)|disk path|storage by" $OUT/swap-h200.log
bash scripts/h200_dev_run.sh pytest official 2>&1 | grep -E "rc=|passed|failed|^\| (16x1k|4x4k|1x16k|mix)"
