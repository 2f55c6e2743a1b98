# h200_prelude.sh - sourced by the H200 call scripts (bench/dev/h200_s6_*.sh, h200_s7_*.sh) at the
# repository root of the device machine's copy: $OUT, the carried Debian packages unpacked ($DEB: their
# library folder), $B (the carried build), el (seconds since the start), pack STAGE ($OUT/STAGE into
# one archive), and setting V (a variant written VAR=value[,VAR=value...], default, tileN -> --tile N,
# pdN -> --prefetch-depth N, ioN -> --io-buffer-mb N, rawN -> --raw-every N, during -> --check-during: sets n (a file-name form), envs and args).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
mkdir -p .carry/debs/root && for f in .carry/debs/*.deb; do dpkg -x "$f" .carry/debs/root; done
DEB=$PWD/.carry/debs/root/usr/lib/x86_64-linux-gnu
B=.carry/build-h200
t0=$(date +%s); el() { echo "($(( $(date +%s) - t0 )) s)"; }
# pack STAGE: $OUT/STAGE into $OUT/STAGE.tgz, or STAGE-2.tgz, -3, .. when a run of the same call
# packed that stage before (session 12 lost a recorded run's files to the overwrite)
pack() {
  local t="$OUT/$1.tgz" k=2
  while [ -e "$t" ]; do t="$OUT/$1-$k.tgz"; k=$((k + 1)); done
  tar czf "$t" -C "$OUT" "$1" && rm -rf "${OUT:?}/$1"
}
setting() {
  n=${1//=/-}; n=${n//,/+}; envs=(); args=()
  local kv
  for kv in ${1//,/ }; do case $kv in
    default) ;;
    tile*) args+=(--tile "${kv#tile}") ;;
    pd*) args+=(--prefetch-depth "${kv#pd}") ;;
    io*) args+=(--io-buffer-mb "${kv#io}") ;;
    raw*) args+=(--raw-every "${kv#raw}") ;;
    during) args+=(--check-during) ;;
    *) envs+=("$kv") ;;
  esac; done
}
