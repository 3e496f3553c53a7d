#!/usr/bin/env bash
# Installs the dependencies, builds with warnings as errors and runs every test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" -DNJ_WARNINGS_AS_ERRORS=ON -DNJ_BUILD_TESTS=ON "$@"
# Idle OpenMP threads sleep instead of spinning, so tests running side by side do not starve each other.
export OMP_WAIT_POLICY=passive
cd "${NJ_BUILD_DIR:-$root/build}"
ctest --output-on-failure --parallel "$(nproc)"
