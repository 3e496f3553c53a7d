#!/usr/bin/env bash
# From a fresh Debian 12 machine to a trained GCN: installs, builds nj (only nj: scripts/test.sh builds the tests),
# generates the default graph, trains it and prints the accuracy and epoch time, then how long each phase took.
# Arguments are passed to `nj train` (e.g. --model gat --epochs 50).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
timings=()
# Runs a phase and notes how long it took.
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-22s %4d s' "$name" $((SECONDS - start)))")
}
phase "installing packages" "$root/scripts/setup.sh" nj
phase "building nj" env NJ_BUILD_TARGET=nj "$root/scripts/build.sh" -DNJ_BUILD_TESTS=OFF
nj="${NJ_BUILD_DIR:-$root/build}/nj"
dataset="$root/data/generated/quickstart.h5"
mkdir -p "$(dirname "$dataset")"
[[ -f $dataset ]] || phase "generating a graph" "$nj" generate --seed 1 --output "$dataset"
"$nj" info "$dataset"
phase "training" "$nj" train "$dataset" --epochs 100 --hidden 64 \
  --metrics-out "$root/data/generated/quickstart-metrics.jsonl" "$@"
printf 'quickstart: %s\n' "${timings[@]}" >&2
