#!/usr/bin/env bash
# A Slurm on this machine, for tests and for trying the slurm/ templates: munged, slurmctld and slurmd started
# directly (no systemd), from Debian's munge and slurm-wlm, everything under one state folder.
#
#   scripts/slurm-local.sh start            one node, this machine; prints the `export SLURM_CONF=...` clients need
#   scripts/slurm-local.sh start --hosts    one node per host of the emulated cluster (scripts/netns-cluster.sh up
#                                           N): a slurmd on each, slurmctld on the first; clients run on a host,
#                                           e.g. `scripts/netns-cluster.sh exec h0 sbatch ...`
#   scripts/slurm-local.sh stop             stop them and wait until they are gone (safe to run when none runs)
#   scripts/slurm-local.sh status           `sinfo` of the local cluster
#
# NJ_SLURM_DIR (default /tmp/nj-slurm) holds the configuration, the munge key, spool folders, pid files and logs;
# every node has its own spool folder, pid file and log (slurmd-NODE). One munged serves every node: its socket is a
# file, which every network namespace reaches. The ports are 16817 (slurmctld) and 16818 (slurmd), away from a
# system Slurm's defaults. MpiDefault is pmix, so `srun` starts Open MPI ranks directly. Every node offers 4 GPUs
# that are not there (gres `gpu` whose device files are empty files), so that the GPU templates' node, task and GPU
# layout is scheduled as on a GPU cluster; ranks then run with --device cpu (NJ_DEVICE=cpu).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${NJ_SLURM_DIR:-/tmp/nj-slurm}"
conf="$dir/slurm.conf"
hosts_mode=""

stop_pid_file() {  # stop_pid_file FILE NAME: TERM, then KILL after 10 s; quiet when nothing runs
  local file="$1" name="$2" pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file")"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurm-local: $name ($pid) did not stop; killing it" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$file"
}

stop() {
  local file
  for file in "$dir"/slurmd-*.pid; do
    [[ -e "$file" ]] && stop_pid_file "$file" "$(basename "$file" .pid)"
  done
  stop_pid_file "$dir/slurmctld.pid" slurmctld
  stop_pid_file "$dir/munged.pid" munged
  # Job steps that outlived their daemon (a test killed halfway) must not linger either.
  pkill -f "slurmstepd.*$dir" 2>/dev/null || true
}

# on NODE COMMAND...: runs COMMAND on NODE; in one-node mode, on this machine.
on() {
  local node="$1"
  shift
  if [[ -n "$hosts_mode" ]]; then
    "$root/scripts/netns-cluster.sh" exec "$node" "$@"
  else
    "$@"
  fi
}

start() {
  case "${1:-}" in
    --hosts) hosts_mode=1 ;;
    "") ;;
    *) echo "slurm-local: unknown option '$1' (start [--hosts])" >&2; exit 2 ;;
  esac
  for tool in munged slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || { echo "slurm-local: $tool not found (scripts/setup.sh installs slurm-wlm and munge)" >&2; exit 1; }
  done
  local nodes  # "name address", a line per node
  if [[ -n "$hosts_mode" ]]; then
    nodes="$("$root/scripts/netns-cluster.sh" hosts)"
  else
    nodes="$(hostname -s) $(hostname -s)"
  fi
  stop
  mkdir -p "$dir"/{state,spool,munge,log}
  chmod 700 "$dir/munge"
  [[ -f "$dir/munge/munge.key" ]] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  # --force: munged refuses keys and folders it does not consider private enough, and /tmp is world-writable.
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munge.seed"

  local count controller cpus memory name address
  count="$(wc -l <<<"$nodes")"
  controller="$(head -n 1 <<<"$nodes")"
  cpus="$(getconf _NPROCESSORS_ONLN)"  # not nproc, which OMP_NUM_THREADS lowers
  # Emulated nodes share this machine: each declares every core and its share of the memory.
  memory="$(awk -v n="$count" '/MemTotal/ {print int($2 / 1024 * 0.9 / n)}' /proc/meminfo)"
  cat >"$conf" <<EOF
ClusterName=nj-local
SlurmctldHost=${controller% *}(${controller#* })
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
EOF
  while read -r name address; do
    echo "NodeName=$name NodeAddr=$address CPUs=$cpus RealMemory=$memory Gres=gpu:4 State=UNKNOWN" >>"$conf"
  done <<<"$nodes"
  echo "PartitionName=local Nodes=$(awk '{print $1}' <<<"$nodes" | paste -sd,) Default=YES MaxTime=INFINITE" \
    "State=UP OverSubscribe=FORCE:4" >>"$conf"
  # Slurm counts a GPU by its device file, which must be a character device: links to /dev/null stand in for them
  # (with task/none nothing opens them).
  mkdir -p "$dir/gpus"
  for gpu in 0 1 2 3; do ln -sfn /dev/null "$dir/gpus/nvidia$gpu"; done
  echo "Name=gpu File=$dir/gpus/nvidia[0-3]" >"$dir/gres.conf"
  export SLURM_CONF="$conf"
  on "${controller% *}" slurmctld -f "$conf"
  while read -r name address; do
    # Each node's own temporary folder: PMIx names its files by job and step, alike on every node.
    mkdir -p "$dir/spool/$name" "$dir/tmp/$name"
    on "$name" slurmd -f "$conf" -N "$name"
  done <<<"$nodes"
  # Ready once every node accepts jobs.
  for _ in $(seq 150); do
    if [[ "$(on "${controller% *}" sinfo -h -N -o "%t" 2>/dev/null | grep -cE "^(idle|mix|alloc)")" == "$count" ]]; then
      if [[ -n "$hosts_mode" ]]; then
        echo "slurm-local: up ($count nodes, $cpus CPUs each); clients run on a node and need: export SLURM_CONF=$conf"
      else
        echo "slurm-local: up (${controller% *}, $cpus CPUs); clients need: export SLURM_CONF=$conf"
      fi
      return 0
    fi
    sleep 0.2
  done
  echo "slurm-local: not every node came up; logs in $dir/log" >&2
  tail -n 20 "$dir"/log/*.log >&2 || true
  stop
  exit 1
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop; echo "slurm-local: stopped" ;;
  status) SLURM_CONF="$conf" sinfo ;;
  *) echo "usage: scripts/slurm-local.sh start [--hosts] | stop | status" >&2; exit 2 ;;
esac
