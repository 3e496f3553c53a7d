#!/usr/bin/env bash
# Fails where the manuals stop being manuals:
#
#   1. docs/performance.md is over 20 KiB (20,480 bytes): it holds current results only, each once.
#   2. docs/tuning.md's table does not name every execution option of `nj train --help`. An option counts as named
#      where a table row's first cell holds it in backquotes (| `--device-memory` | ...). Which options are the
#      execution options, read from the help itself:
#        - where the help has option groups (sections "Name:" other than "Options:" and "Positionals:") whose
#          name mentions execution, executor or device, every option listed in those groups;
#        - otherwise (one flat "Options:" list, where nj train adds --threads, --device, --deterministic and the
#          executor's options last), every option from --threads to the end of the list, and every option whose
#          name ends in -memory (--host-memory sits among the training options).
#      The set must hold --execution and --device-memory, or the help is not what this script understands (exit 2).
#   3. A dated run appears twice in docs/performance.md. Each result states its machine and date on one line that
#      starts with "**Measured:**", so: a date (12 Dec 2026, Dec 2026, 2026-12-05) may appear on such lines only;
#      no heading holds a date; no two headings are the same; a section (the text from one heading to the next, of
#      any level) holds at most one Measured line; and each Measured line names a machine of the page's machine
#      table (its rows' bold names: | **EPYC-Zen3** | ...).
#
#   tests/docs/manuals.sh NJ SOURCE_DIR
#
# Prints each failure and exits 1 if there is one, else 0; exits 2 where it cannot run its checks.
set -euo pipefail

nj=${1:?usage: manuals.sh NJ SOURCE_DIR}
root=${2:?usage: manuals.sh NJ SOURCE_DIR}
performance=$root/docs/performance.md
tuning=$root/docs/tuning.md
for file in "$performance" "$tuning"; do
  [[ -f $file ]] || { echo "manuals.sh: $file is missing" >&2; exit 2; }
done

failed=0
fail() {
  echo "manuals.sh: $*"
  failed=1
}

# 1. The size of docs/performance.md.
limit=20480
size=$(wc -c <"$performance")
if ((size > limit)); then
  fail "docs/performance.md is $size bytes, over $limit: keep current results only, each once"
fi

# 2. Every execution option of nj train --help in docs/tuning.md's table.
help=$("$nj" train --help 2>/dev/null) || { echo "manuals.sh: '$nj train --help' failed" >&2; exit 2; }
options=$(awk '
  # A section header: "Options:", "Positionals:", "Execution options:" at the start of a line.
  /^[A-Za-z][^:]*:[[:space:]]*$/ { section = $0; sub(/:[[:space:]]*$/, "", section); next }
  # An option: two spaces, an optional short name, then the long name.
  match($0, /^  (-[A-Za-z0-9],)?--[A-Za-z0-9][A-Za-z0-9-]*/) {
    name = substr($0, RSTART, RLENGTH); sub(/^ *(-[A-Za-z0-9],)?/, "", name)
    count++; names[count] = name; sections[count] = section
  }
  END {
    grouped = 0
    for (i = 1; i <= count; i++) {
      s = tolower(sections[i])
      if (s != "options" && s != "positionals" && s ~ /execut|device/) grouped = 1
    }
    from = 0
    for (i = 1; i <= count; i++) {
      s = tolower(sections[i])
      if (grouped) {
        if (s != "options" && s != "positionals" && s ~ /execut|device/) print names[i]
        continue
      }
      if (names[i] == "--threads") from = 1
      if (from || names[i] ~ /-memory$/) print names[i]
    }
  }' <<<"$help" | sort -u)
for required in --execution --device-memory; do
  grep -qx -- "$required" <<<"$options" || {
    echo "manuals.sh: cannot find the execution options in '$nj train --help' (no $required among them)" >&2
    exit 2
  }
done
# shellcheck disable=SC2016  # the backquotes are Markdown's, matched literally
named=$(grep -oE '^\|[[:space:]]*`--[A-Za-z0-9-]+`' "$tuning" | grep -oE -- '--[A-Za-z0-9-]+' | sort -u || true)
while IFS= read -r option; do
  grep -qx -- "$option" <<<"$named" || fail "docs/tuning.md's table has no row for $option (nj train --help)"
done <<<"$options"

# 3. Each dated run once in docs/performance.md.
months='Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec'
date="\\b([0-9]{1,2} ($months)[a-z]*|($months)[a-z]* [0-9]{4}|[0-9]{4}-[0-9]{2}-[0-9]{2})\\b"
machines=$(grep -oE '^\| \*\*[^*]+\*\* \|' "$performance" | sed -E 's/^\| \*\*([^*]+)\*\* \|$/\1/' || true)
[[ -n $machines ]] || fail "docs/performance.md has no machine table (rows starting | **NAME** |)"
declare -A seen_heading=()
heading="(the top of the page)"
measured=0
incode=0
number=0
while IFS= read -r line || [[ -n $line ]]; do
  number=$((number + 1))
  if [[ $line == '```'* ]]; then
    incode=$((1 - incode))
    continue
  fi
  ((incode)) && continue
  if [[ $line =~ ^#+\  ]]; then
    heading=$line
    measured=0
    if [[ -n ${seen_heading[$heading]:-} ]]; then
      fail "docs/performance.md:$number: the heading '$heading' appears twice"
    fi
    seen_heading[$heading]=1
    if grep -qE "$date" <<<"$line"; then
      fail "docs/performance.md:$number: a heading holds a date; say what is measured: $line"
    fi
    continue
  fi
  if [[ $line == '**Measured:**'* ]]; then
    measured=$((measured + 1))
    if ((measured > 1)); then
      fail "docs/performance.md:$number: a second Measured line under '$heading': keep the newest run only"
    fi
    grep -qE "$date" <<<"$line" || fail "docs/performance.md:$number: a Measured line without a date"
    known=0
    while IFS= read -r machine; do
      [[ -n $machine && $line == *"$machine"* ]] && known=1
    done <<<"$machines"
    ((known)) || fail "docs/performance.md:$number: a Measured line names no machine of the machine table"
  elif grep -qE "$date" <<<"$line"; then
    fail "docs/performance.md:$number: a date outside a Measured line: $line"
  fi
done <"$performance"

if ((failed == 0)); then
  echo "manuals.sh: docs/performance.md is $size bytes; docs/tuning.md names all $(wc -l <<<"$options") execution options; each section of docs/performance.md holds at most one dated run"
fi
exit "$failed"
