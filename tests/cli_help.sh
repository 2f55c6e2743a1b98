#!/bin/sh
# Every command of the spillway program and every bench program answers
# --help (exit 0, a usage on stdout); an unknown command, bench, case or
# shape and a bad option are usage errors (exit 2, a message on stderr).
# usage: cli_help.sh DIR (the directory holding spillway and spillway-bench-*)
set -u
d=$1
fails=0
fail() { echo "cli_help: FAIL: $*" >&2; fails=$((fails + 1)); }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# help: PROGRAM ARGS... -- exit 0 and "usage:" on stdout
help() {
    "$@" >"$out" 2>"$err"
    rc=$?
    [ $rc = 0 ] || fail "'$*' exited $rc"
    grep -q '^usage:' "$out" || fail "'$*' printed no usage on stdout"
}
# bad: PROGRAM ARGS... -- exit 2 and a message on stderr
bad() {
    "$@" >"$out" 2>"$err"
    rc=$?
    [ $rc = 2 ] || fail "'$*' exited $rc, not 2"
    [ -s "$err" ] || fail "'$*' said nothing on stderr"
}

s=$d/spillway
help "$s" --help
help "$s" info --help
help "$s" demo --help
help "$s" store --help
for c in verify repair inspect; do help "$s" store $c --help; done
help "$s" bench --help
for b in prefill paged swap store remote; do
    help "$s" bench $b --help
    help "$d/spillway-bench-$b" --help
    help "$d/spillway-bench-$b" -h
done

bad "$s"
bad "$s" nope
bad "$s" info extra
bad "$s" bench
bad "$s" bench nope
bad "$s" store nope
bad "$s" store bench
bad "$s" demo --part nope
bad "$s" demo --cases nope
bad "$s" demo --shapes h8-8/d32
bad "$s" demo --bogus
for p in "$d/spillway-bench-prefill" "$s bench prefill"; do
    bad $p --cases 16x1k,nope
    bad $p --cases 16x1k,
    bad $p --shapes h32-8/d100
    bad $p --reps 0
    bad $p --bogus
done
for p in "$d/spillway-bench-paged" "$s bench paged"; do
    bad $p --cases 16x32k,nope
    bad $p --shapes h32-8/d64
    bad $p --page 0
    bad $p --page 512
    bad $p --reps 0
    bad $p --bogus
done
for p in "$d/spillway-bench-swap" "$s bench swap"; do
    bad $p --cases disk,nope
    bad $p --cases ''
    bad $p --batch 0
    bad $p --bogus
done
for p in "$d/spillway-bench-store" "$s bench store"; do
    bad $p --size-mb 1
    bad $p --size-mb 128x
    bad $p --zero-fill 2
    bad $p --bogus 1
done
for p in "$d/spillway-bench-remote" "$s bench remote"; do
    bad $p --passes 0
    bad $p --keys -1
    bad $p --redis-cli /nonexistent/redis-cli
    bad $p --bogus 1
done

[ $fails = 0 ] || { echo "cli_help: $fails failure(s)"; exit 1; }
echo "ok: every --help answered, every bad command, case, shape and option refused"
