#!/usr/bin/env bash
# Partition, then train: submits slurm/partition.sbatch and the training template as a job that starts only once
# the partition job has succeeded (--dependency=afterok). Prints both job ids.
#   NJ_DATASET=big.h5 NJ_PARTS=8 NJ_PARTITIONS=big.parts slurm/submit.sh slurm/train-gpu-nodes.sbatch \
#       --nodes=2 --ntasks-per-node=4 --gpus-per-node=4
# The sbatch options after the template go to the training job; NJ_PARTS must equal its number of tasks.
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: slurm/submit.sh TEMPLATE [sbatch options for the training job]" >&2; exit 2; }
template="$1"
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export NJ_ROOT="${NJ_ROOT:-$root}"
: "${NJ_DATASET:?set NJ_DATASET}" "${NJ_PARTS:?set NJ_PARTS}" "${NJ_PARTITIONS:?set NJ_PARTITIONS}"
partition=$(sbatch --parsable --export=ALL "$root/slurm/partition.sbatch")
train=$(sbatch --parsable --export=ALL --dependency="afterok:$partition" --ntasks="$NJ_PARTS" "$@" "$template")
echo "partition job $partition, training job $train (starts when $partition succeeds)"
