#!/bin/sh
# `spillway store verify` on a damaged store: exit 1, what it found printed,
# every file byte-identical afterwards (verify and inspect open read-only);
# `spillway store repair` then drops what cannot be proven (exit 0) and
# verify passes; every store subcommand answers --help with exit 0.
# usage: store_cli_verify.sh SPILLWAY_CLI TEST_STORE_JOURNAL_DAMAGE WORKDIR
set -u
cli=$1
maker=$2
work=$3/cli_verify
fail() { echo "store_cli_verify: FAIL: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work" || fail "mkdir $work"
"$maker" --make-damaged "$work/store" > /dev/null || fail "could not build the damaged store"
mkdir "$work/before" && cp -p "$work/store/superblock" "$work/store/data" "$work/store/journal" \
    "$work/before/" || fail "copy"
same() {
    for f in superblock data journal; do
        cmp -s "$work/before/$f" "$work/store/$f" || fail "$1 changed $f"
    done
    [ ! -e "$work/store/journal.tmp" ] || fail "$1 left journal.tmp"
}

"$cli" store verify --dir "$work/store" > "$work/verify.out" 2>&1
rc=$?
cat "$work/verify.out"
[ $rc -eq 1 ] || fail "verify of a damaged store exited $rc, want 1"
grep -q "failed their checksum" "$work/verify.out" || fail "verify did not report the record"
grep -q "[1-9][0-9]* key(s) cannot be proven current" "$work/verify.out" ||
    fail "verify did not report unprovable keys"
grep -q "unprovable: ns" "$work/verify.out" || fail "verify did not list the unprovable key"
same "verify"
"$cli" store verify --dir "$work/store" > /dev/null 2>&1
[ $? -eq 1 ] || fail "a second verify did not fail"
same "the second verify"
"$cli" store inspect --dir "$work/store" > /dev/null || fail "inspect"
same "inspect"

for c in verify repair inspect bench; do
    "$cli" store $c --help > "$work/help.out" 2>&1 || fail "store $c --help exited non-zero"
    grep -qi "usage" "$work/help.out" || fail "store $c --help printed no usage"
done
"$cli" store --help > /dev/null || fail "store --help"
"$cli" store verify > /dev/null 2>&1
[ $? -eq 2 ] || fail "verify without --dir must exit 2"

"$cli" store repair --dir "$work/store" > "$work/repair.out" || fail "repair exited non-zero"
cat "$work/repair.out"
grep -q "dropped 1 unprovable" "$work/repair.out" || fail "repair did not drop the key"
"$cli" store verify --dir "$work/store" || fail "verify after repair exited non-zero"
rm -rf "$work"
echo "store_cli_verify: ok"
