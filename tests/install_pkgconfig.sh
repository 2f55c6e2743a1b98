#!/bin/sh
# `cmake --install --prefix P` into a fresh temporary prefix, then a program
# built only from `pkg-config --cflags --libs spillway` (P/<libdir>/pkgconfig
# on PKG_CONFIG_PATH) runs without LD_LIBRARY_PATH or ldconfig: spillway.pc
# must name P (not the configured prefix) and carry the rpath. The installed
# `spillway` and `spillway-bench-*` programs must find the library relative
# to themselves too.
# Exit 77 (skipped) without pkg-config.
# usage: install_pkgconfig.sh BUILD_DIR LIBDIR BINDIR C_COMPILER WORKDIR
set -u
build=$1
libdir=$2
bindir=$3
cc=$4
work=$5/install_pkgconfig
fail() { echo "install_pkgconfig: FAIL: $*" >&2; exit 1; }
command -v pkg-config > /dev/null 2>&1 || { echo "install_pkgconfig: no pkg-config: skipped"; exit 77; }

rm -rf "$work" && mkdir -p "$work" || fail "mkdir $work"
# A prefix with a space in it: the .pc must survive it (pkg-config escapes).
prefix="$work/pre fix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "cmake --install --prefix"; }
pc="$prefix/$libdir/pkgconfig/spillway.pc"
[ -f "$pc" ] || fail "no $pc"

unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
cflags=$(pkg-config --cflags spillway) || fail "pkg-config --cflags"
libs=$(pkg-config --libs spillway) || fail "pkg-config --libs"
echo "cflags: $cflags"
echo "libs:   $libs"
[ "$(pkg-config --modversion spillway)" = "$(sed -n 's/^Version: //p' "$pc")" ] || fail "modversion"

cat > "$work/hello.c" <<'CEOF'
#include <spillway.h>
#include <stdio.h>
#include <string.h>

/* One query that sees one key: the output is that key's value row, exactly. */
int main(void) {
    float q[64], k[64], v[64], o[64];
    for (int i = 0; i < 64; i++) { q[i] = 0.01f * i; k[i] = 1.0f - 0.02f * i; v[i] = 3.0f + i; }
    memset(o, 0, sizeof o);
    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.dtype = SW_DTYPE_F32; p.num_qo_heads = 1; p.num_kv_heads = 1; p.head_dim = 64;
    p.backend = SW_BACKEND_CPU_REF;
    int32_t qo[2] = {0, 1}, kv[2] = {0, 1};
    sw_prefill_tensors t;
    sw_prefill_tensors_init(&t);
    t.q = q; t.k = k; t.v = v; t.o = o; t.q_rows = 1; t.kv_rows = 1;
    sw_status st = sw_prefill_host(&p, 1, qo, kv, &t);
    if (st != SW_OK) { fprintf(stderr, "%s: %s\n", sw_status_str(st), sw_last_error()); return 1; }
    for (int i = 0; i < 64; i++)
        if (o[i] != v[i]) { fprintf(stderr, "o[%d] = %g, want %g\n", i, o[i], v[i]); return 1; }
    printf("spillway %s: ok\n", sw_version_string());
    return 0;
}
CEOF
# Word splitting of the pkg-config output is wanted here, as in a Makefile;
# eval keeps the quoting pkg-config put around the spaced prefix.
eval "\"\$cc\" -std=c11 -o \"\$work/hello\" \"\$work/hello.c\" $cflags $libs" ||
    fail "compile with pkg-config's flags"
"$work/hello" || fail "the program linked through pkg-config did not run"
if [ -x "$prefix/$bindir/spillway" ]; then
    "$prefix/$bindir/spillway" info > "$work/info.log" 2>&1 ||
        { cat "$work/info.log" >&2; fail "installed spillway info"; }
    for b in "$prefix/$bindir"/spillway-bench-*; do
        [ -x "$b" ] || continue
        "$b" --help > "$work/help.log" 2>&1 || { cat "$work/help.log" >&2; fail "installed $b --help"; }
    done
fi
rm -rf "$work"
echo "install_pkgconfig: ok"
