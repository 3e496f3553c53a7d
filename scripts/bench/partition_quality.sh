#!/usr/bin/env bash
# The edge cut and balance of PT-Scotch against METIS: for each dataset and part count, METIS in one process and
# PT-Scotch in one process and on 4 ranks. Prints a Markdown table (cut as a fraction of the undirected edges;
# balance as max / mean of vertices and of training vertices). A benchmark, not a test: partition/README.md holds
# its current result.
#
# Usage: scripts/bench/partition_quality.sh BUILD/nj PARTS DATASET.h5...
set -euo pipefail
nj="$(realpath "$1")"
parts="$2"
shift 2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1
# "4.26%, 1.027 / 1.029" from a partition's log.
quality() {
  local cut balance
  cut=$(sed -nE 's/.*edge cut: .*\((.*%)\)$/\1/p' "$1")
  balance=$(sed -nE 's/.*balance \(max \/ mean\): vertices (.*), training vertices (.*)$/\1 \/ \2/p' "$1")
  echo "$cut, $balance"
}
echo "| graph | parts | METIS | Scotch, 1 rank | Scotch, 4 ranks |"
echo "|---|---|---|---|---|"
for dataset in "$@"; do
  for k in $parts; do
    "$nj" partition "$dataset" --parts "$k" --method metis -o "$work/m" >"$work/metis.log" 2>&1
    "$nj" partition "$dataset" --parts "$k" --method scotch -o "$work/s" >"$work/one.log" 2>&1
    mpirun --oversubscribe -np 4 "$nj" partition "$dataset" --parts "$k" -o "$work/p" >"$work/four.log" 2>&1
    echo "| $(basename "$dataset" .h5) | $k | $(quality "$work/metis.log") | $(quality "$work/one.log") | $(quality "$work/four.log") |"
  done
done
