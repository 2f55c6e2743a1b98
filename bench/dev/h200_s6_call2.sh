#!/bin/bash
# h200_s6_call2.sh STAGE... - session 6's second H200 call. Stages:
#   sys      the disk's block-layer queues and the CPU count (does the virtio disk have several
#            hardware queues that reads from several CPUs would use?)
#   ceiling  bench/dev/stream_ceiling: the fastest plain read of 64 MiB / 1 GiB (issue 4's resident line)
#   shape    store bench A/B: SPILLWAY_STORE_IO_ASYNC=1 (reads through io_uring's workers), alone and
#            with 512 KiB pieces (.carry/build-h200 = main + the switch)
#   disk     the swap disk case with SPILLWAY_STORE_IO_ASYNC=0 / 1, two rounds
#   resident the resident case on the new default (kernel 3's DWIN|NODIV variant)
#   window   kernel 3's descriptor window sized per launch (up to 4096 blocks, fewer stages):
#            swap_tile_check against fp64 (16 random cases + 3 of 16000-40000 blocks), test_swap_cuda,
#            the bench tile at 2050 blocks (64 MiB) and 32768 (1 GiB, the D2D reference's size) for
#            kernels 2 / 3 / 3 first form; `spillway bench swap --cases resident` at context 512k (1 GiB)
# Run with carry [".carry"]; each stage's files go to one archive under $OUT.
. bench/dev/h200_prelude.sh
for stage in "$@"; do mkdir -p "$OUT/$stage"; case $stage in
sys)
  { nproc; df -T /var/tmp; for d in /sys/block/*; do bn=$(basename $d); [ -d $d/mq ] || continue
      echo "$bn queues=$(ls $d/mq | wc -l) nr_requests=$(cat $d/queue/nr_requests) sched=$(cat $d/queue/scheduler) max_sectors_kb=$(cat $d/queue/max_sectors_kb)"; done
    cat /proc/interrupts | grep -i virtio | head -40; uname -r; } >"$OUT/sys/sys.txt" 2>&1
  grep -E "queues=" "$OUT/sys/sys.txt" | grep -v loop ;;
ceiling)
  timeout 120 .carry/s6/stream_ceiling >"$OUT/ceiling/stream-ceiling-h200.log" 2>&1; echo "rc=$?" >>"$OUT/ceiling/stream-ceiling-h200.log"
  cat "$OUT/ceiling/stream-ceiling-h200.log" ;;
shape)
  for v in "SPILLWAY_STORE_IO_ASYNC=1" "SPILLWAY_STORE_IO_ASYNC=1,SPILLWAY_STORE_READ_CHUNK=524288"; do
    n=$(( ${n:-0} + 1 ))
    { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 150 $B/spillway store bench --dir /var/tmp --size-mb 1024 \
        --passes 7 --host-passes 1 --engine-ab "$v" --json "$OUT/shape/store-h200-async$n.json"
      echo "store bench rc=$?"; } >"$OUT/shape/store-h200-async$n.log" 2>&1
    grep -E "rc=|engine/raw per|A/B/raw per|median of per-pass ratios" "$OUT/shape/store-h200-async$n.log"
  done ;;
disk)
  for r in 1 2; do for w in 0 1; do
    { echo "# SPILLWAY_STORE_IO_ASYNC=$w spillway bench swap --dir /var/tmp --cases disk"
      SPILLWAY_STORE_IO_ASYNC=$w LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 120 $B/spillway bench swap --dir /var/tmp \
        --cases disk --json "$OUT/disk/swap-h200-ioasync$w-r$r.json"; echo "rc=$?"; } >"$OUT/disk/swap-h200-ioasync$w-r$r.log" 2>&1
    grep -E "rc=|ms per step|disk reads:" "$OUT/disk/swap-h200-ioasync$w-r$r.log" | head -5
  done; done ;;
resident)
  for r in 1 2; do
    LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 30 $B/spillway bench swap --cases resident --dir /var/tmp \
      --json "$OUT/resident/swap-h200-resident-default-r$r.json" >>"$OUT/resident/swap-h200-resident-default.log" 2>&1
    echo "rc=$?"; done
  grep -E "tile_kernel_read_GBps" "$OUT/resident/swap-h200-resident-default.log" ;;
window)
  export LD_LIBRARY_PATH=$PWD/$B:$DEB
  L=$OUT/window/swap-tile-check-h200-window.log
  { timeout 60 .carry/s6/swap_tile_check --check --cases 16 --kernels 3; echo "check rc=$?"
    timeout 100 .carry/s6/swap_tile_check --check --big --cases 3 --kernels 3,2; echo "check big rc=$?"
    for bl in 2050 32768; do for v in 1 0; do SPILLWAY_SWAP_BULK_VARIANT=$v timeout 40 .carry/s6/swap_tile_check --bench --reps 30 --kernels 3 --blocks $bl; echo "bench blocks=$bl variant=$v rc=$?"; done
      timeout 40 .carry/s6/swap_tile_check --bench --reps 30 --kernels 2 --blocks $bl; echo "bench blocks=$bl kernel 2 rc=$?"; done; } >"$L" 2>&1
  grep -E "failure|rc=|GB/s|FAIL" "$L"
  { SW_TEST_SWAP_CASES=16 timeout 60 $B/tests/test_swap_cuda; echo "test_swap_cuda rc=$?"; } >"$OUT/window/swap-h200-window-test.log" 2>&1
  grep -E "rc=|cases \(|FAIL" "$OUT/window/swap-h200-window-test.log" | head -4
  { timeout 150 $B/spillway bench swap --cases resident --dir /var/tmp --context 524288 \
      --json "$OUT/window/swap-h200-resident-1g.json"; echo "rc=$?"; } >"$OUT/window/swap-h200-resident-1g.log" 2>&1
  grep -E "rc=|tile_kernel_read_GBps|max rel|FAIL" "$OUT/window/swap-h200-resident-1g.log"
  unset LD_LIBRARY_PATH ;;
sys2)
  { for f in max_segments max_segment_size max_sectors_kb max_hw_sectors_kb; do echo "vda $f $(cat /sys/block/vda/queue/$f)"; done
    echo "thp $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
    grep -i huge /proc/meminfo; } >"$OUT/sys2/sys2.txt" 2>&1; cat "$OUT/sys2/sys2.txt" ;;
iomem)
  { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 150 $B/spillway store bench --dir /var/tmp --size-mb 1024 \
      --passes 7 --host-passes 1 --engine-ab SPILLWAY_STORE_IO_MEM=1 --json "$OUT/iomem/store-h200-iomem.json"
    echo "store bench rc=$?"; } >"$OUT/iomem/store-h200-iomem.log" 2>&1
  grep -E "rc=|engine/raw per|A/B/raw per|median of per-pass ratios" "$OUT/iomem/store-h200-iomem.log"
  for r in 1 2; do for w in 0 1; do
    { echo "# SPILLWAY_STORE_IO_MEM=$w spillway bench swap --dir /var/tmp --cases disk"
      SPILLWAY_STORE_IO_MEM=$w LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 120 $B/spillway bench swap --dir /var/tmp \
        --cases disk --json "$OUT/iomem/swap-h200-iomem$w-r$r.json"; echo "rc=$?"; } >"$OUT/iomem/swap-h200-iomem$w-r$r.log" 2>&1
    grep -E "rc=|ms per step|disk reads:" "$OUT/iomem/swap-h200-iomem$w-r$r.log" | head -5
  done; done ;;
sizes)
  L=$OUT/sizes/swap-tile-check-h200-sizes.log
  { for bl in 2050 8192 16384 32768; do SPILLWAY_SWAP_BULK_VARIANT=0 timeout 40 .carry/s6/swap_tile_check --bench --reps 30 --kernels 3 --blocks $bl; echo "bench blocks=$bl rc=$?"; done; } >"$L" 2>&1
  grep -E "rc=|GB/s" "$L"
  { LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 170 $B/spillway bench swap --cases resident --dir /var/tmp --context 524288 \
      --steps 2 --warmup-steps 1 --json "$OUT/sizes/swap-h200-resident-1g.json"; echo "rc=$?"; } >"$OUT/sizes/swap-h200-resident-1g.log" 2>&1
  grep -E "rc=|tile_kernel_read_GBps|max rel|FAIL" "$OUT/sizes/swap-h200-resident-1g.log" ;;
tests)
  export LD_LIBRARY_PATH=$PWD/$B:$DEB
  for t in test_store_basic test_store_async test_store_lease test_store_corrupt test_store_capacity test_swap_exact test_swap_cuda; do
    { SW_TEST_SWAP_CASES=16 timeout 120 $B/tests/$t; echo "$t rc=$?"; } >"$OUT/tests/$t-h200.log" 2>&1
    tail -1 "$OUT/tests/$t-h200.log"; done
  unset LD_LIBRARY_PATH ;;
host)
  for r in 1 2; do for w in 0 1; do
    { echo "# SPILLWAY_STORE_IO_MEM=$w spillway bench swap --dir /var/tmp --cases host"
      SPILLWAY_STORE_IO_MEM=$w LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 100 $B/spillway bench swap --dir /var/tmp \
        --cases host --json "$OUT/host/swap-h200-host-iomem$w-r$r.json"; echo "rc=$?"; } >"$OUT/host/swap-h200-host-iomem$w-r$r.log" 2>&1
    grep -E "rc=|host_tier_read_GBps" "$OUT/host/swap-h200-host-iomem$w-r$r.log" | head -3
  done; done ;;
record)
  { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 300 $B/spillway bench swap --dir /var/tmp --json "$OUT/record/swap-h200.json"
    echo "rc=$?"; } >"$OUT/record/swap-h200-bench.log" 2>&1
  grep -E "rc=|max rel|MISSED|met|FAIL" "$OUT/record/swap-h200-bench.log" ;;
inflight)
  for r in 1 2; do for w in 4194304 8388608 6291456; do
    { echo "# SPILLWAY_STORE_READ_INFLIGHT=$w spillway bench swap --dir /var/tmp --cases disk --steps 12"
      SPILLWAY_STORE_READ_INFLIGHT=$w LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 100 $B/spillway bench swap --dir /var/tmp \
        --cases disk --steps 12 --json "$OUT/inflight/swap-h200-inflight$w-r$r.json"; echo "rc=$?"; } >"$OUT/inflight/swap-h200-inflight$w-r$r.log" 2>&1
    echo "inflight $w r$r"; grep -E "rc=|ms per step|disk_read_GBps|step_ms_vs" "$OUT/inflight/swap-h200-inflight$w-r$r.log" | head -4
  done; done ;;
thread)
  # .carry/build-h200 = main + bench/dev/rejected/store_v13_io_thread.patch (an I/O thread per handle)
  export LD_LIBRARY_PATH=$PWD/$B:$DEB
  for t in test_store_async test_swap_cuda; do
    { SW_TEST_SWAP_CASES=16 timeout 120 $B/tests/$t; echo "$t rc=$?"; } >"$OUT/thread/$t-h200-v13.log" 2>&1
    tail -1 "$OUT/thread/$t-h200-v13.log"; done
  for r in 1 2 3; do for w in 0 1; do
    { echo "# SPILLWAY_STORE_READ_THREAD=$w spillway bench swap --dir /var/tmp --cases disk --steps 12"
      SPILLWAY_STORE_READ_THREAD=$w timeout 100 $B/spillway bench swap --dir /var/tmp \
        --cases disk --steps 12 --json "$OUT/thread/swap-h200-thread$w-r$r.json"; echo "rc=$?"; } >"$OUT/thread/swap-h200-thread$w-r$r.log" 2>&1
    echo "thread $w r$r"; grep -E "rc=|ms per step|step_ms_vs|device vda" "$OUT/thread/swap-h200-thread$w-r$r.log" | head -4
  done; done
  { uptime; timeout 150 $B/spillway store bench --dir /var/tmp --size-mb 1024 --passes 7 --host-passes 1 \
      --engine-ab SPILLWAY_STORE_READ_THREAD=0 --json "$OUT/thread/store-h200-v13-iomem.json"; echo "store bench rc=$?"; } >"$OUT/thread/store-h200-v13-iomem.log" 2>&1
  grep -E "rc=|engine/raw per|A/B/raw per|median of per-pass ratios" "$OUT/thread/store-h200-v13-iomem.log"
  unset LD_LIBRARY_PATH ;;
chunk)
  for v in "SPILLWAY_STORE_READ_CHUNK=524288" "SPILLWAY_STORE_READ_MERGE=0"; do
    n2=$(( ${n2:-0} + 1 ))
    { uptime; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 150 $B/spillway store bench --dir /var/tmp --size-mb 1024 \
        --passes 7 --host-passes 1 --engine-ab "$v" --json "$OUT/chunk/store-h200-iomem-ab$n2.json"
      echo "store bench rc=$?"; } >"$OUT/chunk/store-h200-iomem-ab$n2.log" 2>&1
    grep -E "rc=|engine/raw per|A/B/raw per|median of per-pass ratios" "$OUT/chunk/store-h200-iomem-ab$n2.log"
  done ;;
storerec)
  { uptime; df -h /var/tmp | tail -1; LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 280 $B/spillway store bench --dir /var/tmp \
      --json "$OUT/storerec/store-h200.json"; echo "store bench rc=$?"; } >"$OUT/storerec/store-h200.log" 2>&1
  grep -E "rc=|median of per-pass ratios|host-tier / memcpy" "$OUT/storerec/store-h200.log" ;;
demo)
  { LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 200 $B/spillway demo --dir /var/tmp; echo "demo rc=$?"; } >"$OUT/demo/demo-h200.log" 2>&1
  grep -E "rc=|PASS|FAIL|tokens/s|max rel|check" "$OUT/demo/demo-h200.log" | tail -12 ;;
swapshape)
  # the store's request-shape variants that won the store bench's pairings, on the swap disk case
  for r in 1 2; do for v in "X=0" "SPILLWAY_STORE_READ_CHUNK=524288" "SPILLWAY_STORE_READ_MERGE=0"; do
    { echo "# $v spillway bench swap --dir /var/tmp --cases disk --steps 12"
      env $v LD_LIBRARY_PATH=$PWD/$B:$DEB timeout 60 $B/spillway bench swap --dir /var/tmp \
        --cases disk --steps 12 --json "$OUT/swapshape/swap-h200-shape-${v%%=*}-r$r.json"; echo "rc=$?"; } >"$OUT/swapshape/swap-h200-shape-${v%%=*}-r$r.log" 2>&1
    echo "$v r$r"; grep -E "rc=|steps:|step_ms_vs|device vda" "$OUT/swapshape/swap-h200-shape-${v%%=*}-r$r.log" | head -4
  done; done ;;
*) echo "unknown stage $stage" >&2 ;;
esac; echo "$stage $(el)"; pack "$stage"; done
