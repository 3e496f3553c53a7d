#!/usr/bin/env bash
# Slurm on two emulated nodes (scripts/netns-cluster.sh up 2, then scripts/slurm-local.sh start --hosts): a slurmd
# on each host, slurmctld on h0, jobs submitted from h0.
#  1. slurm/submit.sh partitions Cora into 4 METIS shards and runs slurm/train-cpu.sbatch on 2 nodes × 2 tasks;
#     the job must say so and end with the final accuracy line.
#  2. The GPU templates' layouts, with NJ_DEVICE=cpu on nodes whose 4 GPUs are stand-ins: train-gpu-nodes.sbatch
#     as 2 nodes × 2 tasks × 2 GPUs, train-gpu-node.sbatch as 1 node × 2 tasks × 2 GPUs; each must be scheduled
#     as asked (one CPU per task here, not their 8) and train to the same accuracy.
# No Slurm daemon or job step may be left when the test ends. Skips (77) where slurm-wlm or munge is missing.
# Usage: tests/cluster/slurm_two_nodes_test.sh BUILD/nj
set -euo pipefail
nj="$(realpath "$1")"
for tool in munged slurmctld slurmd sbatch srun; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed (scripts/setup.sh installs it)"; exit 77; }
done
source "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
export NJ_SLURM_DIR="$work/slurm"
export SLURM_CONF="$NJ_SLURM_DIR/slurm.conf"
slurm_stopped() {
  "$root/scripts/slurm-local.sh" stop >/dev/null
  # slurmstepd renames itself ("slurmstepd: [job.step]"): found by name, not by its command line.
  if pgrep -f "$NJ_SLURM_DIR" >/dev/null || pgrep -x slurmstepd >/dev/null; then
    echo "FAILED: Slurm processes are left after stop:"
    pgrep -a -f "$NJ_SLURM_DIR" || true
    pgrep -a -x slurmstepd || true
    return 1
  fi
}
cluster_cleanups+=(slurm_stopped)

cluster_up 2
"$root/scripts/slurm-local.sh" start --hosts
"$nj" --log-level warn convert --format plain "$data/cora" --output "$work/cora.h5"
cd "$work"
export NJ_ROOT="$root" NJ_BIN="$nj" NJ_DATASET="$work/cora.h5" NJ_PARTS=4 NJ_PARTITIONS="$work/cora.parts"
export NJ_ARGS="--epochs 30 --feature-norm row --eval-every 10"

# check_job JOB EXPECTED_LAYOUT: the job's output names the layout and ends with an accuracy above chance.
check_job() {
  local output="$work/nj-$1.out" accuracy
  cat "$output"
  grep -qF "$2" "$output" || { echo "FAILED: job $1 did not run as '$2'"; exit 1; }
  accuracy="$(sed -n 's/.*done: final test \([0-9.]*\).*/\1/p' "$output")"
  [[ -n "$accuracy" ]] || { echo "FAILED: no final accuracy line in $output"; exit 1; }
  # 30 epochs of the default GCN on Cora reach 0.74 on the test vertices (any rank count: training is exact);
  # chance is below 0.32.
  awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.70) }' || { echo "FAILED: job $1's test accuracy $accuracy < 0.70"; exit 1; }
  echo "passed: job $1 ran as '$2', final test accuracy $accuracy"
}

# --wait: sbatch returns when the training job has ended, with its exit status.
on h0 timeout 240 "$root/slurm/submit.sh" "$root/slurm/train-cpu.sbatch" --nodes=2 --ntasks-per-node=2 --wait |
  tee submitted.txt
check_job "$(sed -n 's/.*training job \([0-9]*\).*/\1/p' submitted.txt)" \
  "4 ranks on 2 node(s) (h[0-1]), tasks per node 2(x2)"

export NJ_DEVICE=cpu
job="$(on h0 timeout 100 sbatch --parsable --wait --export=ALL --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 \
  "$root/slurm/train-gpu-nodes.sbatch")"
check_job "$job" "4 ranks on 2 node(s) (h[0-1]), tasks per node 2(x2), 2 GPUs per node"
export NJ_DATASET="$work/cora.h5" NJ_PARTITIONS=""
job="$(on h0 timeout 100 sbatch --parsable --wait --export=ALL --ntasks=2 --gpus=2 --cpus-per-task=1 "$root/slurm/train-gpu-node.sbatch")"
check_job "$job" "2 ranks on 1 node(s)"
grep -qF "tasks per node 2, 2 GPUs per node" "$work/nj-$job.out" || { echo "FAILED: job $job's layout"; exit 1; }
