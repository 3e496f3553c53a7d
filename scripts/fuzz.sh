#!/usr/bin/env bash
# Builds the libFuzzer targets of the input readers (tests/fuzz; clang with ASan and UBSan, in build-fuzz/) and
# runs each for a fixed time, one after the other, starting from its seed corpus (tests/fuzz/corpus/<target>/)
# and its regressions. Prints a table of the runs; exits non-zero when any target crashed, leaked, hung or ran
# out of memory. docs/reliability.md ("Fuzzing") describes the targets.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]    default: 100 seconds each, every target
#
# Each target's run is kept in build-fuzz/fuzz-runs/<target>/: log, corpus/ (what it found worth keeping, reused
# by the next run; corpus-raw/ with NJ_FUZZ_RAW_HDF5=1, below) and crashes/, where libFuzzer saves a failing
# input (crash-*, leak-*, timeout-*, oom-*).
# Replay one with `build-fuzz/tests/fuzz/fuzz_<target> <file>`; once the reader is fixed, move it to
# tests/fuzz/regressions/<target>/, named after what it found, so that the test suite replays it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-100}
shift $(($# > 0 ? 1 : 0))
build="$root/build-fuzz"
runs="$build/fuzz-runs"

targets=("$@")
if ((${#targets[@]} == 0)); then
  for source in "$root"/tests/fuzz/fuzz_*.cpp; do
    name=$(basename "$source" .cpp)
    targets+=("${name#fuzz_}")
  done
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DNJ_ENABLE_CUDA=OFF -DNJ_BUILD_FUZZERS=ON >/dev/null
cmake --build "$build" -j "${NJ_BUILD_JOBS:-2}" --target nj "${targets[@]/#/fuzz_}"

# NJ_FUZZ_RAW_HDF5=1: the HDF5 targets also take raw files (tests/fuzz/target_support.hpp), seeded with files nj
# writes (too large to keep in the repository). Debian's libhdf5 1.10.8 then soon crashes in its own code, so such
# runs keep their corpus apart. nj's own leaks at exit (MPI's) are not the readers'.
export NJ_FUZZ_RAW_HDF5=${NJ_FUZZ_RAW_HDF5:-0}
corpus=corpus
((NJ_FUZZ_RAW_HDF5)) && corpus=corpus-raw
seeds="$runs/seeds"
if ((NJ_FUZZ_RAW_HDF5)) && [[ ! -f "$seeds/shard_file/part-1.h5" ]]; then
  mkdir -p "$seeds/dataset_file" "$seeds/shard_file"
  ASAN_OPTIONS=detect_leaks=0 "$build/nj" --log-level error generate --vertices 12 --edges 40 --features 3 \
    --classes 3 --output "$seeds/dataset_file/generated.h5"
  ASAN_OPTIONS=detect_leaks=0 "$build/nj" --log-level error partition "$seeds/dataset_file/generated.h5" --parts 2 \
    --method contiguous --output "$seeds/partition"
  cp "$seeds/partition/"part-*.h5 "$seeds/shard_file/"
fi

# Leaks are checked after every input (except libhdf5's own, tests/fuzz/lsan.supp); a sanitizer report ends the
# run with a stack trace. An allocation beyond the address space returns null, as glibc's malloc does: libhdf5
# asks for one on a corrupt object header and fails cleanly on null (the readers' own would still throw
# std::bad_alloc, which fails the target).
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

rows=()
failed=0
for target in "${targets[@]}"; do
  dir="$runs/$target"
  # The files a target writes for each input go to memory where /dev/shm is there (a quarter more runs).
  scratch="$dir/tmp"
  [[ -w /dev/shm ]] && scratch="/dev/shm/nj-fuzz-$target"
  mkdir -p "$dir/$corpus" "$dir/crashes" "$scratch"
  echo "fuzz: $target for ${seconds} s"
  start=$(date +%s)
  status=0
  # -timeout: one input running longer is a hang. -rss_limit_mb: the process growing beyond it is a failure
  # (and so is one allocation of that size). The outer timeout only guards against libFuzzer itself stalling.
  TMPDIR="$scratch" timeout $((seconds + 300)) "$build/tests/fuzz/fuzz_$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/crashes/" "$dir/$corpus" "$root/tests/fuzz/corpus/$target" \
    $(for extra in "$root/tests/fuzz/regressions/$target" "$seeds/$target"; do
      [[ -d $extra && ($NJ_FUZZ_RAW_HDF5 == 1 || $extra != "$seeds"/*) ]] && echo "$extra"
    done) \
    >"$dir/log" 2>&1 || status=$?
  elapsed=$(($(date +%s) - start))
  rmdir "$scratch" 2>/dev/null || true # what a crashed target left there stays for a look
  executed=$(awk '/stat::number_of_executed_units/ {print $2}' "$dir/log")
  rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$dir/log")
  peak=$(awk '/stat::peak_rss_mb/ {print $2}' "$dir/log")
  if ((status == 0)); then
    result=ok
  else
    failed=1
    artifact=$(grep -o "Test unit written to [^ ]*" "$dir/log" | tail -1 | sed 's/Test unit written to //' || true)
    result="FAILED (exit $status) ${artifact:-see $dir/log}"
    # What went wrong: the target's own complaint and the message, or the sanitizer's report.
    { grep -a -A1 "^fuzz: " "$dir/log" | head -2 || true; } | sed 's/^/    /'
    { grep -a -E "==ERROR|^SUMMARY" "$dir/log" | head -2 || true; } | sed 's/^/    /'
  fi
  rows+=("$(printf '%-14s %12s %8s %8s %8s  %s' "$target" "${executed:-?}" "$elapsed" "${rate:-?}" "${peak:-?}" "$result")")
done

echo
printf '%-14s %12s %8s %8s %8s  %s\n' target runs seconds runs/s "rss MB" result
printf '%s\n' "${rows[@]}"
if ((failed)); then
  echo "fuzz: failures above; their inputs and logs are under $runs"
  exit 1
fi
echo "fuzz: no crash, leak, hang or out-of-memory in ${#targets[@]} targets"
