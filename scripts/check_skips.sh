#!/usr/bin/env bash
# Fails, naming them, where a ctest run skipped tests that CI must run: only the CUDA instances (no GPU here) and
# the tests whose subject the machine lacks (transparent huge pages, an OpenBLAS that names its core) may skip;
# with --sanitizer also those a sanitizer's allocator or a build without CUDA rules out. docs/testing.md, "Skips",
# says why each one skips.
#
# Usage: scripts/check_skips.sh [--sanitizer] CTEST_OUTPUT
set -euo pipefail
allowed='/cuda(_[a-z0-9_]+)?$|^Models/CrossBackendGradientTest\.'
allowed+='|^HugeVector\.LargeArraysAreAdvisedToTakeHugePages$|^BlasKernels\.NjRunsTheKernelsTheCpuRuns$'
if [[ "${1:-}" == --sanitizer ]]; then
  allowed+='|^CpuDevice\.AllocationsLieWhereTheArenaPlacesThem$|^HostFootprint\.TheSourcesOfBlocksBuiltToStayForTheRunAreCounted$'
  allowed+='|^GpuBundle\.RunsInACleanRoot$|^MemoryCaps\.FourRanksTrainWhatOneProcessCannot$'
  shift
fi
[[ $# -eq 1 && -f "$1" ]] || { echo "usage: scripts/check_skips.sh [--sanitizer] CTEST_OUTPUT" >&2; exit 2; }
# An output without ctest's summary is no evidence that nothing skipped.
grep -qE '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$1" ||
  { echo "check_skips.sh: $1 holds no ctest summary" >&2; exit 1; }
# ctest lists them after its summary: "<tab>123 - Suite.Name/param  # GetParam() = ... (Skipped)"; a disabled
# test is listed alike, as "(Disabled)", and never allowed.
mapfile -t skipped < <(sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+).*\((Skipped|Disabled)\)$/\1/p' "$1")
unexpected=()
for name in "${skipped[@]}"; do
  [[ "$name" =~ $allowed ]] || unexpected+=("$name")
done
if [[ ${#unexpected[@]} -gt 0 ]]; then
  echo "check_skips.sh: ${#unexpected[@]} tests skipped that CI must run (docs/testing.md, \"Skips\"):" >&2
  printf '  %s\n' "${unexpected[@]}" >&2
  exit 1
fi
echo "check_skips.sh: ${#skipped[@]} tests skipped, each allowed to"
