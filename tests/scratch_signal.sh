#!/bin/sh
# A program interrupted while it holds a scratch directory removes it.
# usage: scratch_signal.sh SIGNAL DIR PROG ARGS... (PROG gets --dir DIR/scratch;
# it must still be running after 1.5 s). Passes when PROG died of SIGNAL
# and DIR/scratch is empty.
sig=$1; dir=$2; shift 2
rm -rf "$dir" && mkdir -p "$dir/scratch" || exit 1
"$@" --dir "$dir/scratch" >"$dir/out.txt" 2>&1 &
pid=$!
sleep 1.5
kill -"$sig" "$pid"
wait "$pid"
rc=$?
left=$(ls -A "$dir/scratch" | wc -l)
echo "$*: exit status $rc after SIG$sig, $left entries left in the scratch directory"
case "$sig" in INT) want=130 ;; TERM) want=143 ;; HUP) want=129 ;; *) want=-1 ;; esac
[ "$rc" -eq "$want" ] && [ "$left" -eq 0 ]
