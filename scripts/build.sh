#!/usr/bin/env bash
# Configures and builds NeutronJittor in ./build (override with NJ_BUILD_DIR): every target, or only
# NJ_BUILD_TARGET's (e.g. nj). Extra arguments go to CMake.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${NJ_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" --parallel "$(nproc)" ${NJ_BUILD_TARGET:+--target "$NJ_BUILD_TARGET"}
