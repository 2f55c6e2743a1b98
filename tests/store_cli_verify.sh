#!/bin/sh
# `spillway store verify` on a damaged store: exit 1, what it found printed,
# every file byte-identical afterwards (verify and inspect open read-only);
# `spillway store repair` then drops what cannot be proven (exit 0) and
# verify passes; every store subcommand answers --help with exit 0.
# On a store whose only finding is a killed writer's unfinished put (the
# journal's last record, a put's, cut off): exit 0 with a note, files
# byte-identical; with one more record cut off, exit 1.
# usage: store_cli_verify.sh SPILLWAY_CLI TEST_STORE_JOURNAL_DAMAGE WORKDIR
set -u
cli=$1
maker=$2
work=$3/cli_verify
fail() { echo "store_cli_verify: FAIL: $*" >&2; exit 1; }
# the *_pread run: the CLI on the pread/pwrite backend too (the store maker
# reads SW_TEST_STORE_IO itself)
io=""
[ "${SW_TEST_STORE_IO:-}" = pread ] && io="--io pread"

rm -rf "$work" && mkdir -p "$work" || fail "mkdir $work"
"$maker" --make-damaged "$work/store" > /dev/null || fail "could not build the damaged store"
mkdir "$work/before" && cp -p "$work/store/superblock" "$work/store/data" "$work/store/journal" \
    "$work/before/" || fail "copy"
# same WHAT [STORE BEFORE]: STORE's files are those copied into BEFORE
same() {
    st=${2:-$work/store}
    bf=${3:-$work/before}
    for f in superblock data journal; do
        cmp -s "$bf/$f" "$st/$f" || fail "$1 changed $f"
    done
    [ ! -e "$st/journal.tmp" ] || fail "$1 left journal.tmp"
}

"$cli" store verify $io --dir "$work/store" > "$work/verify.out" 2>&1
rc=$?
cat "$work/verify.out"
[ $rc -eq 1 ] || fail "verify of a damaged store exited $rc, want 1"
grep -q "failed their checksum" "$work/verify.out" || fail "verify did not report the record"
grep -q "[1-9][0-9]* key(s) cannot be proven current" "$work/verify.out" ||
    fail "verify did not report unprovable keys"
grep -q "unprovable: ns" "$work/verify.out" || fail "verify did not list the unprovable key"
same "verify"
"$cli" store verify $io --dir "$work/store" > /dev/null 2>&1
[ $? -eq 1 ] || fail "a second verify did not fail"
same "the second verify"
"$cli" store inspect $io --dir "$work/store" > /dev/null || fail "inspect"
same "inspect"

for c in verify repair inspect; do
    "$cli" store $c --help > "$work/help.out" 2>&1 || fail "store $c --help exited non-zero"
    grep -qi "usage" "$work/help.out" || fail "store $c --help printed no usage"
done
"$cli" store --help > /dev/null || fail "store --help"
"$cli" store verify > /dev/null 2>&1
[ $? -eq 2 ] || fail "verify without --dir must exit 2"

"$cli" store repair $io --dir "$work/store" > "$work/repair.out" || fail "repair exited non-zero"
cat "$work/repair.out"
grep -q "dropped 1 unprovable" "$work/repair.out" || fail "repair did not drop the key"
"$cli" store verify $io --dir "$work/store" || fail "verify after repair exited non-zero"
# A writer killed before the journal record of a put leaves the extent
# without its record, which on disk is the journal with its last record (64
# bytes, the put's) cut off: one unfinished operation, not damage.
ks=$work/killed
"$maker" --make-killed "$ks" > /dev/null || fail "could not build the killed writer's store"
n=$(wc -c < "$ks/journal") || fail "size of the journal"
[ $((n % 64)) -eq 0 ] && [ "$n" -ge 128 ] || fail "journal of $n bytes"
# in place (the store refuses a journal with group/other access): dd
# truncates its output at the seek offset
dd if=/dev/null of="$ks/journal" bs=64 seek=$((n / 64 - 1)) 2> /dev/null ||
    fail "cut the journal's last record"
[ "$(wc -c < "$ks/journal")" -eq $((n - 64)) ] || fail "the journal was not cut"
mkdir "$work/killed_before" && cp -p "$ks/superblock" "$ks/data" "$ks/journal" \
    "$work/killed_before/" || fail "copy"
"$cli" store verify $io --dir "$ks" > "$work/killed.out" 2>&1
rc=$?
cat "$work/killed.out"
[ $rc -eq 0 ] || fail "verify after a killed writer exited $rc, want 0"
grep -q "^note: a writer was killed in the middle of one operation (a put whose journal" \
    "$work/killed.out" || fail "verify did not note the in-flight put"
grep -q "1 operation(s) are in the data file but not in the journal" "$work/killed.out" ||
    fail "verify did not count the put missing from the journal"
grep -q "0 key(s) cannot be proven current" "$work/killed.out" ||
    fail "verify found unprovable keys after a killed writer"
same "verify after a killed writer" "$ks" "$work/killed_before"
# One record more lost is not what a kill leaves: damage, exit 1, no note.
dd if=/dev/null of="$ks/journal" bs=64 seek=$((n / 64 - 2)) 2> /dev/null ||
    fail "cut the journal's last two records"
"$cli" store verify $io --dir "$ks" > "$work/killed2.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "verify with two records cut off exited $rc, want 1"
! grep -q "^note: a writer was killed" "$work/killed2.out" ||
    fail "verify took two lost records for a killed writer"

rm -rf "$work"
echo "store_cli_verify: ok"
