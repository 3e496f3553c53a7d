#!/usr/bin/env bash
# Fails where the tree narrates its own making: work-step numbers ("stop 21", "step 3 of the plan"), internal
# issue numbers ("issue 12", "#12"), numbered sessions ("session 4"), and commit hashes given as history
# ("(`99e00a1`)", "at commit 02a594c"). That history is git's; documents and comments state what is.
# An issue number on a line that names an upstream project (PyG #1997, an HDF5 or Open MPI bug, a GitHub URL) is
# allowed, and so is a hash on a line with a URL or the word "upstream".
#
#   tests/docs/no_narration.sh ROOT
#
# Scans the files git lists under ROOT (tracked, and untracked ones it does not ignore), or, outside a git
# checkout, the project's source folders; fuzz inputs, binary files and this script are skipped. Prints each
# offending line as FILE:LINE: TEXT and exits 1 if there is one, else 0. Before scanning it checks its patterns
# against lines that must and must not match, and exits 2 if they misbehave.
set -euo pipefail

root=${1:?usage: no_narration.sh ROOT}
cd "$root"
self=tests/docs/no_narration.sh

# A hex string of 7 to 40 digits with at least one letter and one digit: an abbreviated or full commit hash.
hash='(?=[0-9a-f]{0,39}[a-f])(?=[0-9a-f]{0,39}[0-9])[0-9a-f]{7,40}'
# Units after "stop N" that make it a quantity, not a work step ("stop within 10 s", "stop 2 ranks").
units='%|[KMGT]i?B\b|ms\b|s\b|sec|seconds?\b|minutes?\b|hours?\b|epochs?\b|ranks?\b|steps?\b|times\b|rows?\b|bytes?\b'
# Work steps and sessions: never allowed.
steps="(?<!-)\\b[Ss]tops? [0-9]+(?:[-–][0-9]+)?\\b(?! ?(?:$units))|\\b[Ss]tep [0-9]+ of the\\b|\\b[Ss]essions? [0-9]+\\b"
# Issue and pull-request numbers: allowed where they are an upstream project's.
issues='\b[Ii]ssues? #?[0-9]+\b|\b(?:PR|[Pp]ull request|MR) #?[0-9]+\b|(?<![\w&#/$])#[0-9]{1,5}\b(?![0-9a-fA-F])'
projects='PyG|PyTorch|torch|torch_geometric|DGL|HDF5|libhdf5|h5py|Open ?MPI|OMPI|MPICH|PMIx|NCCL|CUDA|cuSPARSE|cuBLAS|NVIDIA|METIS|Slurm|GCC|GLIBC|LLVM|Clang|CMake|CLI11|spdlog|fmt|nlohmann|OpenBLAS|glibc|Debian|Ubuntu|Linux|GoogleTest|libFuzzer|NumPy|SciPy|matplotlib|OGB|SNAP|Umpire|NeutronStar'
# An upstream reference: a URL, or the project named in the same clause as the number, before it or just after.
upstream="(?i)https?://|github\\.com|gitlab\\.|\\b(?:$projects)\\b[^.;()]{0,60}?(?:\\b(?:issues?|bugs?|PR|pull request)\\b|#) ?#?[0-9]|(?:\\bissues?|#) ?#?[0-9]+[^.;()]{0,30}?\\b(?:$projects|upstream)\\b"
# Commit hashes as history: in backquotes or parentheses, or after "commit". Allowed on a line with a URL.
hashes="\`$hash\`|\\($hash\\)|\\b[Cc]ommits? $hash\\b"
links='(?i)https?://|\bupstream\b'

# Whether one line narrates.
offends() {
  local text=$1
  grep -qP -- "$steps" <<<"$text" && return 0
  grep -qP -- "$issues" <<<"$text" && ! grep -qP -- "$upstream" <<<"$text" && return 0
  grep -qP -- "$hashes" <<<"$text" && ! grep -qP -- "$links" <<<"$text" && return 0
  return 1
}

# The patterns' own check (the lines are literal text).
# shellcheck disable=SC2016
must=(
  'measured at stop 19 of the speed work'
  '### Planning (speed issue, stop 24)'
  'as it had sat on the line since Stop 19.'
  'A benchmark, not a test (issue 12).'
  'fixed in #12, see there'
  'A benchmark, not a test (issue 12). It reads one HDF5 file.'
  'what session 3 measured'
  'the plans at (`99e00a1`) moved fewer bytes'
  '| before (`6d653d6`) | 323.49M |'
  'built at commit 02a594c'
  'this is step 3 of the issue'
)
# shellcheck disable=SC2016
must_not=(
  'the step that loads the rows runs first'
  'stop the job with scancel'
  'the pipeline stops when a rank fails'
  'the test steps stop after 180, 45 and 75 s at most'
  'kill it if it does not stop within 10 s'
  'PyG #1997: GATConv drops attention coefficients'
  'a bug of libhdf5 1.10 (issue 1234 upstream)'
  'see https://github.com/dmlc/dgl/issues/5084'
  'as DGL does (DGL #5084), the bias is added after the sum'
  'Open MPI leaks in components it unloads (Open MPI issue 11500)'
  'for ((i = 0; i < ${#targets[@]}; ++i)); do'
  '#include <vector>'
  'colours #1f77b4 and #112233'
  'the checks of steps 5, 6 and 8 to 12, checked at step 11'
  'a schedule of steps: step 1 loads, step 2 computes'
  'sessions of the device are lent per task'
  'the arena at 0x7f3a2b1c is freed'
  'a sha256 of 3f9a2c1be0 in the manifest'
  'a run that commits 2 checkpoints'
  'nj train --early-stop 4 --eval-every 2'
)
for line in "${must[@]}"; do
  offends "$line" || { echo "no_narration.sh: the patterns miss: $line" >&2; exit 2; }
done
for line in "${must_not[@]}"; do
  ! offends "$line" || { echo "no_narration.sh: the patterns wrongly match: $line" >&2; exit 2; }
done

files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do files+=("$f"); done < <(git ls-files -z --cached --others --exclude-standard)
else
  while IFS= read -r -d '' f; do files+=("${f#./}"); done < <(
    find . \( -path ./data/generated -o -path ./data/venvs -o -name '.git' -o -name 'build*' \) -prune -o \
      -type f \( -path './README.md' -o -path './CMakeLists.txt' -o -path './CMakePresets.json' -o -path './.ci/*' \
      -o -path './docs/*' -o -path './data/*' -o -path './scripts/*' -o -path './slurm/*' -o -path './partition/*' \
      -o -path './src/*' -o -path './include/*' -o -path './tests/*' -o -path './cmake/*' \) -print0)
fi
scan=()
for f in "${files[@]}"; do
  case $f in
    "$self" | tests/fuzz/corpus/* | tests/fuzz/regressions/*) continue ;;
  esac
  [[ -f $f ]] && scan+=("$f")
done

found=0
if ((${#scan[@]} > 0)); then
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    number=${rest%%:*}
    text=${rest#*:}
    if offends "$text"; then
      echo "$file:$number: $text"
      found=1
    fi
  done < <(printf '%s\0' "${scan[@]}" | xargs -0 grep -nIHP -- "$steps|$issues|$hashes" || true)
fi
exit "$found"
