#!/usr/bin/env bash
# Builds the sanitizer presets with warnings as errors and runs their tests: the whole suite under AddressSanitizer
# and UndefinedBehaviorSanitizer (asan-ubsan, in build-asan), the tests labelled tsan (device, executor and
# multi-rank) under ThreadSanitizer (tsan, in build-tsan). Every sanitized process, the nj ranks that tests launch
# included, writes its reports to <build folder>/sanitizer.<pid>: a report fails the run even where the test's
# own check passed (a test that expects nj to fail, or one that discards mpirun's output). NJ_SANITIZERS picks
# the presets (default "asan-ubsan tsan"). See docs/reliability.md, "Sanitizers".
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"
declare -A build_dir=([asan-ubsan]=build-asan [tsan]=build-tsan)
for preset in ${NJ_SANITIZERS:-asan-ubsan tsan}; do
  build=$root/${build_dir[$preset]:?unknown preset $preset}
  start=$SECONDS
  cmake --preset "$preset" -DNJ_WARNINGS_AS_ERRORS=ON >/dev/null
  cmake --build --preset "$preset" --parallel "$(nproc)"
  built=$SECONDS
  rm -f "$build"/sanitizer.*
  status=0
  ctest --preset "$preset" --parallel "$(nproc)" || status=$?
  reports=()
  for report in "$build"/sanitizer.*; do
    [[ -e $report ]] || continue
    # allocator_may_return_null's note on an allocation beyond the address space (libhdf5 asking for one on a
    # corrupt header, as a fuzz regression does) is what glibc's malloc answers with null too: not a report.
    grep -qv -e '^==[0-9]*==WARNING: AddressSanitizer failed to allocate 0x[0-9a-f]* bytes$' -e '^$' "$report" ||
      continue
    reports+=("$report")
    echo "=== $report"
    cat "$report"
  done
  echo "$preset: build $((built - start)) s, tests $((SECONDS - built)) s, ${#reports[@]} sanitizer reports"
  ((status == 0 && ${#reports[@]} == 0)) || exit 1
done
