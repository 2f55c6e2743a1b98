#!/usr/bin/env bash
# The main job: installs, builds, and runs `spillway demo` (GPU when usable,
# else the CPU). Extra arguments go to `spillway demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
SPILLWAY_SKIP_PY=1 ./scripts/setup.sh
exec "${SPILLWAY_BUILD_DIR:-build}/spillway" demo "$@"
