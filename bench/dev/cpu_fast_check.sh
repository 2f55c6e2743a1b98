#!/bin/sh
# Builds bench/dev/cpu_fast_check.c with the per-file flags the library uses
# for the CPU fast path (see the comment at the top of src/attn/cpu_fast.c).
# Usage (from the repo root): sh bench/dev/cpu_fast_check.sh [CC]
set -e
CC=${1:-${CC:-cc}}
OUT=build/dev
mkdir -p $OUT
CFLAGS="-std=c11 -O2 -g -Wall -Wextra -Iinclude"
X86=$($CC -dumpmachine | grep -c x86_64 || true)
$CC $CFLAGS -c src/attn/cpu_fast.c -o $OUT/cpu_fast.o
$CC $CFLAGS -c src/attn/cpu_fast_scalar.c -o $OUT/cpu_fast_scalar.o
OBJS="$OUT/cpu_fast.o $OUT/cpu_fast_scalar.o"
if [ "$X86" != 0 ]; then
  $CC $CFLAGS -mavx2 -mfma -mf16c -c src/attn/cpu_fast_avx2.c -o $OUT/cpu_fast_avx2.o
  $CC $CFLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -c src/attn/cpu_fast_avx512.c -o $OUT/cpu_fast_avx512.o
  $CC $CFLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -c src/attn/cpu_fast_avx512bf16.c -o $OUT/cpu_fast_avx512bf16.o
  OBJS="$OBJS $OUT/cpu_fast_avx2.o $OUT/cpu_fast_avx512.o $OUT/cpu_fast_avx512bf16.o"
  AMXF="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mamx-tile -mamx-bf16"
else
  AMXF=""
fi
# development AMX kernel (bench/dev/cpu_fast_amx.c); a stub where AMX cannot be compiled
$CC $CFLAGS $AMXF -c bench/dev/cpu_fast_amx.c -o $OUT/cpu_fast_amx.o
OBJS="$OBJS $OUT/cpu_fast_amx.o"
$CC $CFLAGS -c src/attn/cpu_ref.c -o $OUT/cpu_ref.o
$CC $CFLAGS -c src/core/status.c -o $OUT/status.o
$CC $CFLAGS -c src/core/sys.c -o $OUT/sys.o
$CC $CFLAGS bench/dev/cpu_fast_check.c $OBJS $OUT/cpu_ref.o $OUT/status.o $OUT/sys.o -o $OUT/cpu_fast_check -lm -pthread
echo "built $OUT/cpu_fast_check"
# Shared library of the same objects, for bench/dev/cpu_fast_vs_torch.py (ctypes).
PIC="$CFLAGS -fPIC"
SOBJS=""
for f in src/attn/cpu_fast.c src/attn/cpu_fast_scalar.c src/core/status.c src/core/sys.c; do
  o=$OUT/pic_$(basename $f .c).o; $CC $PIC -c $f -o $o; SOBJS="$SOBJS $o"
done
if [ "$X86" != 0 ]; then
  $CC $PIC -mavx2 -mfma -mf16c -c src/attn/cpu_fast_avx2.c -o $OUT/pic_avx2.o
  $CC $PIC -mavx512f -mavx512bw -mavx512vl -mavx512dq -c src/attn/cpu_fast_avx512.c -o $OUT/pic_avx512.o
  $CC $PIC -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -c src/attn/cpu_fast_avx512bf16.c -o $OUT/pic_avx512bf16.o
  SOBJS="$SOBJS $OUT/pic_avx2.o $OUT/pic_avx512.o $OUT/pic_avx512bf16.o"
fi
# default visibility for the dev library: ctypes needs the internal symbols
$CC -shared $SOBJS -o $OUT/libcpu_fast_dev.so -lm -pthread -Wl,--export-dynamic
echo "built $OUT/libcpu_fast_dev.so"
