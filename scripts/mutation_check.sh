#!/usr/bin/env bash
# Applies each mutant of scripts/mutants.tsv in turn (one plausible bug in the source), rebuilds only what it
# changed, runs the suites named for it and reports it killed (a suite failed) or survived; the source is restored
# after each, and on any exit. Prints a table and exits non-zero if any mutant survived or could not be applied.
#
# Usage: scripts/mutation_check.sh [--build DIR] [--verify] [NAME...]
#   --build DIR  a configured build folder (default: build)
#   --verify     only check that every mutant's text occurs exactly once in its file and that docs/testing.md
#                lists every mutant (what the test suite checks, in seconds)
#   NAME...      only these mutants
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
verify=0
only=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --verify) verify=1; shift ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutation_check.sh: unknown option $1" >&2; exit 2 ;;
    *) only+=("$1"); shift ;;
  esac
done

# apply FILE OLD NEW [--check]: replaces the one occurrence of OLD (\n: a newline) in FILE by NEW; with --check,
# changes nothing. Fails, saying why, where OLD occurs other than once.
apply() {
  python3 - "$@" <<'PY'
import sys
path, old, new = sys.argv[1], sys.argv[2].replace("\\n", "\n"), sys.argv[3].replace("\\n", "\n")
text = open(path).read()
count = text.count(old)
if count != 1:
    sys.exit(f"{path}: the mutant's text occurs {count} times, not once: {old!r}")
if len(sys.argv) < 5:
    open(path, "w").write(text.replace(old, new))
PY
}

mutants=()
while IFS=$'\t' read -r name file old new tests; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  if [[ ${#only[@]} -gt 0 && ! " ${only[*]} " =~ " $name " ]]; then continue; fi
  mutants+=("$name"$'\t'"$file"$'\t'"$old"$'\t'"$new"$'\t'"$tests")
done < "$root/scripts/mutants.tsv"

if [[ $verify -eq 1 ]]; then
  status=0
  for m in "${mutants[@]}"; do
    IFS=$'\t' read -r name file old new tests <<< "$m"
    apply "$root/$file" "$old" "$new" --check || status=1
    grep -q "\`$name\`" "$root/docs/testing.md" || { echo "docs/testing.md does not list the mutant $name"; status=1; }
  done
  [[ $status -eq 0 ]] && echo "mutation_check.sh: ${#mutants[@]} mutants apply and are listed in docs/testing.md"
  exit "$status"
fi

[[ -f "$build/build.ninja" ]] || { echo "mutation_check.sh: no configured build in $build (scripts/build.sh)" >&2; exit 2; }
backup="$(mktemp -d)"
current=""
restore() {
  if [[ -n "$current" ]]; then cp "$backup/file" "$root/$current"; current=""; fi
}
trap 'restore; rm -rf "$backup"' EXIT
export OMP_WAIT_POLICY=passive
cmake --build "$build" >/dev/null  # the unmutated build, so that each mutant rebuilds only what it changes

survived=0
start_all=$(date +%s)
printf '%-40s %-8s %6s  %s\n' mutant result seconds "suites run"
for m in "${mutants[@]}"; do
  IFS=$'\t' read -r name file old new tests <<< "$m"
  start=$(date +%s)
  cp "$root/$file" "$backup/file"
  current="$file"
  if ! apply "$root/$file" "$old" "$new"; then
    result="stale"
    survived=$((survived + 1))
  elif ! cmake --build "$build" >"$backup/build.log" 2>&1; then
    result="no-build"  # a mutant that does not compile says nothing of the tests
    grep -m 3 "error" "$backup/build.log" >&2 || true
    survived=$((survived + 1))
  elif ctest --test-dir "$build" -R "$tests" --parallel "$(nproc)" --timeout 300 >"$backup/test.log" 2>&1; then
    result="SURVIVED"
    survived=$((survived + 1))
  else
    result="killed"
  fi
  restore
  printf '%-40s %-8s %6d  %s\n' "$name" "$result" $(( $(date +%s) - start )) "$tests"
done
cmake --build "$build" >/dev/null  # back to the unmutated build
echo "mutation_check.sh: ${#mutants[@]} mutants, $survived not killed, $(( $(date +%s) - start_all )) s"
[[ $survived -eq 0 ]]
