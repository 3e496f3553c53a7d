#!/usr/bin/env bash
# Generating (where given the options), partitioning and training a dataset at 1, 2 and 4 ranks on this machine:
# nj generate on each rank count, METIS in one process, PT-Scotch at every rank count, then one epoch on the shards of
# each; prints each run's time and every rank's peak resident memory (the command's own log line; getrusage's maxrss
# for training and one process's generation, through /usr/bin/time). A benchmark, not a test: docs/performance.md
# ("Partitioning on many ranks") holds its current result.
#
# Usage: scripts/bench/partition_memory.sh BUILD/nj DATASET.h5 [PARTS [GENERATE OPTIONS...]]
#   with GENERATE OPTIONS (nj generate's, without --output), DATASET.h5 is written first, on 1, 2 and 4 ranks
set -euo pipefail
nj="$(realpath "$1")"
dataset="$2"
parts="${3:-4}"
generate=("${@:4}")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1
echo "machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
seconds() { awk '/in [0-9.]+ s$/ && /parts by/ {print $(NF-1)}' "$1"; }
peaks() { sed -nE 's/.*rank ([0-9]+): peak resident memory (.*)/rank \1 \2/p' "$1" | sort | paste -sd' '; }

if ((${#generate[@]} > 0)); then
  /usr/bin/time -f "%M %e" -o "$work/rss" "$nj" generate "${generate[@]}" --no-community-order -o "$dataset" \
    >/dev/null 2>&1
  read -r kib wall <"$work/rss"
  echo "generate, 1 process: $wall s, peak $((kib / 1024)) MiB"
  for ranks in 2 4; do
    /usr/bin/time -f "%e" -o "$work/wall" mpirun --oversubscribe -np "$ranks" "$nj" generate "${generate[@]}" \
      -o "$dataset" >"$work/log" 2>&1
    echo "generate, $ranks ranks: $(cat "$work/wall") s, peak $(peaks "$work/log")"
  done
fi

/usr/bin/time -f "%M" -o "$work/rss" "$nj" partition "$dataset" --parts "$parts" --method metis -o "$work/metis" \
  >"$work/log" 2>&1
echo "partition metis, 1 process: $(seconds "$work/log") s, peak $(($(cat "$work/rss") / 1024)) MiB"
for ranks in 1 2 4; do
  mpirun --oversubscribe -np "$ranks" "$nj" partition "$dataset" --parts "$parts" --method scotch \
    -o "$work/scotch$ranks" >"$work/log" 2>&1
  echo "partition scotch, $ranks ranks: $(seconds "$work/log") s, peak $(peaks "$work/log")"
done

/usr/bin/time -f "%M" -o "$work/rss" "$nj" train "$dataset" --epochs 1 --threads 1 >"$work/log" 2>&1
echo "train, 1 process: peak $(($(cat "$work/rss") / 1024)) MiB"
for ranks in 2 4; do
  mpirun --oversubscribe -np "$ranks" "$nj" partition "$dataset" --parts "$ranks" -o "$work/train$ranks" >/dev/null 2>&1
  mpirun --oversubscribe -np "$ranks" /usr/bin/time -f "rank peak %M KiB" "$nj" train --partitions "$work/train$ranks" \
    --epochs 1 --threads 1 >"$work/log" 2>&1
  echo "train, $ranks ranks: peaks $(sed -nE 's/.*rank peak ([0-9]+) KiB/\1/p' "$work/log" | awk '{printf "%d MiB ", $1 / 1024}')"
done
