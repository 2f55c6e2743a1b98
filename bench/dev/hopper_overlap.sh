#!/bin/bash
# hopper_overlap.sh D - compile-only check of the Hopper prefill kernel's
# intra-warpgroup overlap (docs/perf/NOTES.md, Hopper v6): compiles
# src/cuda/attn/prefill_hopper_d<D>.cu for sm_90a, prints ptxas's C75xx
# notes and spill lines, then for each kernel instance the number of
# MUFU.EX2 (the softmax's exp2) between `WARPGROUP.DEPBAR.LE gsb0, 0x1` and
# the next `0x0` in address order: the exp2s that run while P V does.
# Needs cuobjdump (the CUDA toolkit's, or the one Triton's package ships).
# Usage (repo root): bash bench/dev/hopper_overlap.sh 128
set -euo pipefail
cd "$(dirname "$0")/../.."
D=${1:-128}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas=-v \
  --expt-relaxed-constexpr -c "src/cuda/attn/prefill_hopper_d$D.cu" -o "$T/k.o" 2>&1 |
  grep -E "C75|spill stores" | sort | uniq -c | cut -c1-120 || true
CO=$(command -v cuobjdump || true)
if [ -z "$CO" ]; then
  CO=$(python3 -c "import triton,os;print(os.path.dirname(triton.__file__))" 2>/dev/null)/backends/nvidia/bin/cuobjdump
fi
"$CO" --dump-sass "$T/k.o" | awk '/Function :/{if(name)print name, between; name=$3; between=0; f=0}
  /DEPBAR.LE gsb0, 0x1/{f=1} /DEPBAR.LE gsb0, 0x0/{f=0} f && /MUFU.EX2/{between++}
  END{print name, between}'
