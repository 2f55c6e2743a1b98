#!/bin/bash
# swap_s12_summary.sh DIR... - session 12's figures from the files of H200 calls (bench/results/swap-h200-s12/cN-*):
# per host-case run (hostab/, hostq/): % of pinned H2D (mean attend), median / max attend ms; per timeline run
# (hostq/, SPILLWAY_SWAP_TIMELINE=1): medians over its calls of the copy engine's idle time between landing
# launches (a launch recorded on the host after the previous one ended on the GPU; clocks aligned at B), the
# tail from the last landing copy's end to the finalisation (Z), and the first landing launch's end (ms from B).
for d in "$@"; do
  echo "== $d"
  for f in "$d"/hostab/*.log "$d"/hostq/*.log "$d"/swaprec*/*bench.log; do
    [ -f "$f" ] || continue
    pct=$(grep -E "host_tier_read_GBps " "$f" | awk '{print $5}')
    med=$(grep -oE 'attend calls: min [0-9.]+, median [0-9.]+, max [0-9.]+' "$f" | sed -n 2p)
    [ -z "$med" ] && med=$(grep -oE 'attend calls: min [0-9.]+, median [0-9.]+, max [0-9.]+' "$f" | head -1)
    case $f in *bench.log) # the host case's results: after its second header (the first is its setup)
      med=$(awk '/^-- host-tier-bound --$/ {k++} k == 2' "$f" | grep -oE 'attend calls: min [0-9.]+, median [0-9.]+, max [0-9.]+' | head -1) ;; esac
    line="$(basename "$f" .log): host ${pct:-?} ($med)"
    if grep -q "swap timeline 1: L" "$f"; then
      n=$(grep -oE "swap timeline [0-9]+: L" "$f" | awk '{print $3}' | sort -un | tail -1); n=${n%:}
      stats=$(for c in $(seq 1 "$n"); do
        grep "swap timeline $c: [LZ]" "$f" | awk -v c=$c '
          $4 == "L" {g=$7; h=$10; if (nl > 0 && h > pg) idle += h - pg; if (nl == 0) l0 = g; pg = g; nl++}
          $4 == "Z" {z=$7}
          END {printf "%.4f %.4f %.4f\n", idle, z - pg, l0}'
      done | awk '{i[NR]=$1; t[NR]=$2; l[NR]=$3} END {
          n=NR; for (a=1;a<=n;a++) for (b=a+1;b<=n;b++) {if (i[b]<i[a]) {x=i[a];i[a]=i[b];i[b]=x} if (t[b]<t[a]) {x=t[a];t[a]=t[b];t[b]=x} if (l[b]<l[a]) {x=l[a];l[a]=l[b];l[b]=x}}
          m=int(n/2)+1; printf "copy idle %.3f ms, tail %.3f ms, first launch end %.3f ms (medians of %d calls)", i[m], t[m], l[m], n}')
      line="$line; timeline: $stats"
    fi
    echo "  $line"
  done
done
