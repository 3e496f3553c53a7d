#!/usr/bin/env bash
# From a fresh Debian 12 machine to a trained GCN: installs, builds, generates the default graph, trains it and
# prints the accuracy and epoch time. Arguments are passed to `nj train` (e.g. --model gat --epochs 50).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
nj="${NJ_BUILD_DIR:-$root/build}/nj"
dataset="$root/data/generated/quickstart.h5"
mkdir -p "$(dirname "$dataset")"
[[ -f $dataset ]] || "$nj" generate --seed 1 --output "$dataset"
"$nj" info "$dataset"
"$nj" train "$dataset" --epochs 100 --hidden 64 --metrics-out "$root/data/generated/quickstart-metrics.jsonl" "$@"
