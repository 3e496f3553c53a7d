#!/usr/bin/env bash
# scripts/check_skips.sh accepts a ctest output whose skips are all allowed (or that has none), and fails, naming
# it, on one where a test that CI must run skipped or was disabled, or on an output with no ctest summary; the
# sanitizer-only skips pass only with --sanitizer.
set -euo pipefail
check="$1/scripts/check_skips.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "check_skips_test.sh: $*" >&2; exit 1; }
summary='100% tests passed, 0 tests failed out of 491'

printf '%s\n' "$summary" >"$log"
"$check" "$log" | grep -q '0 tests skipped, each allowed to' || fail "a run without skips refused"

printf '%s\n' 'The following tests did not run:' \
  $'\t180 - Backends/KernelTest.SpmmMatchesADenseReference/cuda  # GetParam() = cuda (Skipped)' \
  $'\t 33 - Models/CrossBackendGradientTest.CudaGradientsEqualTheCpusOnCora/gcn2  # GetParam() = 48-byte object <F8-B6> (Skipped)' \
  $'\t301 - Models/SubgraphExecutorTest.MatchesInMemory/cuda_gat  # GetParam() = (cuda, 1) (Skipped)' >>"$log"
"$check" "$log" | grep -q '3 tests skipped, each allowed to' || fail "allowed skips refused"

printf '%s\n' $'\t12 - CpuDevice.AllocationsLieWhereTheArenaPlacesThem (Skipped)' >>"$log"
"$check" "$log" >/dev/null 2>&1 && fail "a sanitizer-only skip passed without --sanitizer"
"$check" --sanitizer "$log" >/dev/null || fail "a sanitizer-only skip refused with --sanitizer"

printf '%s\n' $'\t13 - Accuracy.GcnOnCora (Skipped)' $'\t 9 - Adam.Steps (Disabled)' >>"$log"
if output=$("$check" --sanitizer "$log" 2>&1); then fail "an unlisted skip passed"; fi
grep -q '^  Accuracy.GcnOnCora$' <<<"$output" || fail "the unlisted skip is not named: $output"
grep -q '^  Adam.Steps$' <<<"$output" || fail "the disabled test is not named: $output"
grep -q 'CpuDevice' <<<"$output" && fail "an allowed skip is named as unexpected: $output"

printf 'ninja: build stopped\n' >"$log"
"$check" "$log" >/dev/null 2>&1 && fail "an output without a ctest summary passed"
echo "check_skips_test.sh: passed"
