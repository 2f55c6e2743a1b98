#!/bin/sh
# Builds bench/dev/cpu_fast_check.c with the per-file flags the library uses
# for the CPU fast path (see the comment at the top of src/attn/cpu_fast.c):
#   build/dev/cpu_fast_check       library ISAs (amx included where the CPU has it) and
#                                  the previous AMX kernel bench/dev/cpu_fast_amx_v1.c
#                                  ("amx-v1")
#   build/dev/cpu_fast_check_emul  the same + the AMX kernel over the scalar tile
#                                  model (bench/dev/cpu_fast_amx_emul.h), "amx(emul)"
#   build/dev/cpu_fast_overhead    costs per call on the short-request shapes (driver, K/V
#                                  pack, epilogue, the AMX kernels with and without tiles)
#   build/dev/libcpu_fast_dev.so   for bench/dev/cpu_fast_vs_torch.py
# Usage (from the repo root): sh bench/dev/cpu_fast_check.sh [CC]
set -e
CC=${1:-${CC:-cc}}
OUT=build/dev
mkdir -p $OUT
CFLAGS="-std=c11 -O2 -g -Wall -Wextra -Iinclude -Isrc"
X86=$($CC -dumpmachine | grep -c x86_64 || true)
AVX512="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c"
BF16="$AVX512 -mavx512bf16"
# AMX flags only where the compiler knows them (GCC >= 11, clang >= 12);
# without them cpu_fast_amx.c compiles to a stub and amx is never chosen.
AMXF="$BF16"
if [ "$X86" != 0 ] && echo 'int x;' | $CC -mamx-tile -mamx-bf16 -x c -c -o /dev/null - 2>/dev/null; then
  AMXF="$BF16 -mamx-tile -mamx-bf16"
fi
# each library file as an object, plain and -fPIC (for the .so)
build() { # build <src> <obj> <flags...>
  src=$1; obj=$2; shift 2
  $CC $CFLAGS "$@" -c $src -o $obj
}
OBJS=""
SOBJS=""
for f in cpu_fast cpu_fast_unit cpu_fast_scalar cpu_fast_avx2 cpu_fast_avx512 cpu_fast_avx512bf16 cpu_fast_amx; do
  case $f in
    cpu_fast|cpu_fast_unit|cpu_fast_scalar) FL="" ;;
    cpu_fast_avx2) FL="-mavx2 -mfma -mf16c" ;;
    cpu_fast_avx512) FL="$AVX512" ;;
    cpu_fast_avx512bf16) FL="$BF16" ;;
    cpu_fast_amx) FL="$AMXF" ;;
  esac
  [ "$X86" = 0 ] && FL=""
  build src/attn/$f.c $OUT/$f.o $FL
  build src/attn/$f.c $OUT/pic_$f.o $FL -fPIC
  OBJS="$OBJS $OUT/$f.o"
  SOBJS="$SOBJS $OUT/pic_$f.o"
done
for f in src/attn/cpu_ref.c src/core/status.c src/core/sys.c; do
  o=$(basename $f .c)
  build $f $OUT/$o.o
  OBJS="$OBJS $OUT/$o.o"
done
# the previous AMX kernel (bench/dev/cpu_fast_amx_v1.c), timed as
# "amx-v1"; the library's kernel and v1 without the tile arithmetic ("nodp",
# "nodp-v1", bench/dev/cpu_fast_amx_nodp.h) for cpu_fast_overhead
if [ "$X86" != 0 ]; then
  build bench/dev/cpu_fast_amx_v1.c $OUT/cpu_fast_amx_v1.o $AMXF
  build bench/dev/cpu_fast_amx_nodp.c $OUT/cpu_fast_amx_nodp.o $BF16
  build bench/dev/cpu_fast_amx_v1_nodp.c $OUT/cpu_fast_amx_v1_nodp.o $BF16
  OBJS="$OBJS $OUT/cpu_fast_amx_v1.o $OUT/cpu_fast_amx_nodp.o"
  OBJS="$OBJS $OUT/cpu_fast_amx_v1_nodp.o"
fi
$CC $CFLAGS bench/dev/cpu_fast_check.c $OBJS -o $OUT/cpu_fast_check -lm -pthread
echo "built $OUT/cpu_fast_check"
if [ "$X86" != 0 ]; then
  $CC $CFLAGS bench/dev/cpu_fast_overhead.c $OBJS -o $OUT/cpu_fast_overhead -lm -pthread
  echo "built $OUT/cpu_fast_overhead"
fi
if [ "$X86" != 0 ]; then
  build bench/dev/cpu_fast_amx_emul.c $OUT/cpu_fast_amx_emul.o $BF16
  $CC $CFLAGS -DSW_AMX_EMULATE bench/dev/cpu_fast_check.c $OBJS $OUT/cpu_fast_amx_emul.o \
    -o $OUT/cpu_fast_check_emul -lm -pthread
  echo "built $OUT/cpu_fast_check_emul"
fi
# Shared library of the same objects, for bench/dev/cpu_fast_vs_torch.py (ctypes).
for f in src/core/status.c src/core/sys.c; do
  o=$OUT/pic_$(basename $f .c).o; build $f $o -fPIC; SOBJS="$SOBJS $o"
done
# default visibility for the dev library: ctypes needs the internal symbols
$CC -shared $SOBJS -o $OUT/libcpu_fast_dev.so -lm -pthread -Wl,--export-dynamic
echo "built $OUT/libcpu_fast_dev.so"
