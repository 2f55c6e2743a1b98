#!/bin/bash
# swap_s13_summary.sh JSON... - per every-case `spillway bench swap` JSON (session 13 on: the disk case held against
# raw passes interleaved with its steps, --raw-every): the disk line as step time / (1.15 x the raw time of its disk
# bytes) against the interleaved raw figure (the verdict) and against the better of the before / after passes (the
# old limit, context), the host-tier line (% of pinned H2D) and the all-resident line (% of D2D). <= 100 / >= 80 /
# >= 60 meet the lines.
for f in "$@"; do
  awk -v f="$f" -F'"value": |, "limit": |}' '
    /"metric": "disk_read_GBps",/ {d = $2; dl = $3}
    /"metric": "disk_read_GBps_vs_raw_before_after"/ {ba = $3}
    /"metric": "step_ms_vs_1.15x_disk_ms"/ {s = $2; sl = $3}
    /"metric": "host_tier_read_GBps",/ {h = $2; hl = $3}
    /"metric": "tile_kernel_read_GBps"/ {r = $2; rl = $3}
    END {
      printf "%s: disk %.1f%% (raw interleaved %.3f GB/s", f, 100 * s / sl, dl
      if (ba > 0) printf "; against the before/after %.3f: %.1f%%", ba, 100 * ba / dl * s / sl
      printf ")"
      if (hl > 0) printf ", host %.1f%%", 100 * h / hl
      if (rl > 0) printf ", resident %.1f%%", 100 * r / rl
      printf "\n" }' "$f"
done
