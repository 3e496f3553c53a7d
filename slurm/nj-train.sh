#!/usr/bin/env bash
# The training step every template runs: one `nj train` rank per Slurm task, started by srun with PMIx, so that
# Open MPI needs no mpirun. Each rank reads its shard (NJ_PARTITIONS) or partitions NJ_DATASET in memory, and takes
# the GPU of its local rank (SLURM_LOCALID) when NJ_DEVICE is cuda or auto.
#
# Environment (the templates' parameters; any can also be given on the sbatch command line with --export):
#   NJ_ROOT        the checkout                   (default: the folder sbatch was run in, SLURM_SUBMIT_DIR)
#   NJ_BIN         the nj binary                  (default: $NJ_ROOT/build/nj)
#   NJ_DATASET     an HDF5 dataset, or
#   NJ_PARTITIONS  a folder written by `nj partition` with one part per task
#   NJ_DEVICE      cuda, cpu or auto              (default: auto)
#   NJ_ARGS        further `nj train` options, e.g. "--model gat --epochs 200 --device-memory 8G"
#   NJ_METRICS     where rank 0 writes its JSONL metrics (default: nj-<job id>.jsonl in the submit folder)
set -euo pipefail
bin="${NJ_BIN:-${NJ_ROOT:-${SLURM_SUBMIT_DIR:-.}}/build/nj}"
if [[ -n "${NJ_PARTITIONS:-}" ]]; then
  input=(--partitions "$NJ_PARTITIONS")
elif [[ -n "${NJ_DATASET:-}" ]]; then
  input=("$NJ_DATASET")
else
  echo "nj-train.sh: set NJ_DATASET or NJ_PARTITIONS" >&2
  exit 2
fi
read -r -a extra <<<"${NJ_ARGS:-}"
threads="${SLURM_CPUS_PER_TASK:-1}"
# The layout Slurm gave: tasks per node as Slurm writes them ("2(x2)": 2 on each of 2 nodes), GPUs of this node.
echo "job ${SLURM_JOB_ID:-?}: ${SLURM_NTASKS:-1} ranks on ${SLURM_JOB_NUM_NODES:-1} node(s) (${SLURM_JOB_NODELIST:-local})," \
  "tasks per node ${SLURM_TASKS_PER_NODE:-1}, ${SLURM_GPUS_ON_NODE:-0} GPUs per node, ${threads} threads each"
exec srun --mpi=pmix --kill-on-bad-exit=1 "$bin" train "${input[@]}" --device "${NJ_DEVICE:-auto}" \
  --threads "$threads" --metrics-out "${NJ_METRICS:-nj-${SLURM_JOB_ID:-local}.jsonl}" "${extra[@]}"
