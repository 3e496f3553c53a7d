#!/usr/bin/env bash
# A one-node Slurm on this machine, for tests and for trying the slurm/ templates: munged, slurmctld and slurmd
# started directly (no systemd), from Debian's munge and slurm-wlm, everything under one state folder.
#
#   scripts/slurm-local.sh start    start the daemons; prints the `export SLURM_CONF=...` clients need
#   scripts/slurm-local.sh stop     stop them and wait until they are gone (safe to run when none runs)
#   scripts/slurm-local.sh status   `sinfo` of the local cluster
#
# NJ_SLURM_DIR (default /tmp/nj-slurm) holds the configuration, the munge key, spool folders, pid files and logs.
# The ports are 16817 (slurmctld) and 16818 (slurmd), away from a system Slurm's defaults. MpiDefault is pmix, so
# `srun` starts Open MPI ranks directly.
set -euo pipefail

dir="${NJ_SLURM_DIR:-/tmp/nj-slurm}"
conf="$dir/slurm.conf"
node="$(hostname -s)"

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
  stop_pid_file "$dir/slurmd.pid" slurmd
  stop_pid_file "$dir/slurmctld.pid" slurmctld
  stop_pid_file "$dir/munged.pid" munged
  # Job steps that outlived their daemon (a test killed halfway) must not linger either.
  pkill -f "slurmstepd.*$dir" 2>/dev/null || true
}

start() {
  for tool in munged slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || { echo "slurm-local: $tool not found (scripts/setup.sh installs slurm-wlm and munge)" >&2; exit 1; }
  done
  stop
  mkdir -p "$dir"/{state,spool,munge,log}
  chmod 700 "$dir/munge"
  [[ -f "$dir/munge/munge.key" ]] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  # --force: munged refuses keys and folders it does not consider private enough, and /tmp is world-writable.
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munge.seed"

  local cpus memory
  cpus="$(getconf _NPROCESSORS_ONLN)"  # not nproc, which OMP_NUM_THREADS lowers
  memory="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"
  cat >"$conf" <<EOF
ClusterName=nj-local
SlurmctldHost=$node
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$node CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  export SLURM_CONF="$conf"
  slurmctld -f "$conf"
  slurmd -f "$conf" -N "$node"
  # Ready once the node accepts jobs.
  for _ in $(seq 100); do
    if sinfo -h -N -o "%t" 2>/dev/null | grep -qE "^(idle|mix|alloc)"; then
      echo "slurm-local: up ($node, $cpus CPUs); clients need: export SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.2
  done
  echo "slurm-local: the node did not come up; logs in $dir/log" >&2
  tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
  stop
  exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop; echo "slurm-local: stopped" ;;
  status) SLURM_CONF="$conf" sinfo ;;
  *) echo "usage: scripts/slurm-local.sh start|stop|status" >&2; exit 2 ;;
esac
