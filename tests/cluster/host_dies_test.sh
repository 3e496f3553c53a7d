#!/usr/bin/env bash
# A whole host dies mid-epoch: 2 emulated hosts × 2 ranks train, mpirun on the first; once training runs, every
# process of the second host is killed (SIGKILL, as a power cut leaves them). The job must end on the first host
# within 30 s, with a non-zero exit, a line naming the host it lost, and no rank left behind.
# Usage: tests/cluster/host_dies_test.sh BUILD/nj
set -euo pipefail
nj="$(realpath "$1")"
source "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"

cluster_up 2
"$nj" --log-level warn generate --vertices 20000 --edges 200000 --features 32 --classes 4 --seed 3 -o "$work/graph.h5"
metrics="$work/metrics.jsonl"
set +e
pass_to_ranks OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
on h0 timeout 120 mpirun "${mpirun_args[@]}" -np 4 --map-by ppr:2:node "$nj" train "$work/graph.h5" --epochs 100000 --eval-every 0 --threads 1 \
  --metrics-out "$metrics" >"$work/job.log" 2>&1 &
job=$!
set -e
# Training runs once rank 0 has written an epoch.
for _ in $(seq 600); do grep -q '"type":"epoch"' "$metrics" 2>/dev/null && break; sleep 0.1; done
grep -q '"type":"epoch"' "$metrics" || { echo "FAILED: no epoch within 60 s"; cat "$work/job.log"; exit 1; }
victims="$(ip netns pids "$NJ_CLUSTER-h1")"
[[ -n "$victims" ]] || { echo "FAILED: nothing runs on h1"; exit 1; }
echo "killing every process of h1: $(tr '\n' ' ' <<<"$victims")"
kill -9 $victims || true  # one may have exited meanwhile
start=$(date +%s%N)
set +e
wait "$job"
status=$?
set -e
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
cat "$work/job.log"
echo "the job ended with status $status $elapsed_ms ms after h1 died"
((status != 0 && status != 124)) || { echo "FAILED: the job must fail, not succeed or run into the time limit"; exit 1; }
((elapsed_ms < 30000)) || { echo "FAILED: the job outlived its host by $elapsed_ms ms"; exit 1; }
# Open MPI names the host: mpirun, as the host of the daemon it lost ("Remote daemon: [[J,0],1] on node h1"), and
# a rank on h0, as the host of the peer that hung up ("Peer host: h1"), whichever sees the loss first. Under load a
# rank may first fail to reach the lost host again, and Open MPI then names it by its address ("connect() to
# ADDRESS:PORT failed"), with mpirun's generic "unable to reliably start one or more daemons" beside it.
h1_address="$("$root/scripts/netns-cluster.sh" hosts | awk '$1 == "h1" {print $2}')"
[[ -n "$h1_address" ]] || { echo "FAILED: the cluster lists no address for h1"; exit 1; }
grep -qE "(Remote daemon: .* on node|Peer host:) +h1\b|connect\(\) to ${h1_address//./\\.}:[0-9]+ failed" "$work/job.log" ||
  { echo "FAILED: no line names the lost host h1 (or its address $h1_address)"; exit 1; }
# The ranks on h0 are gone once their daemon has reaped them: a loaded machine may take a few seconds.
for _ in $(seq 100); do
  left="$(ip netns pids "$NJ_CLUSTER-h0")"
  [[ -z "$left" ]] && break
  sleep 0.1
done
[[ -z "$left" ]] || { echo "FAILED: processes left on h0:"; ps -o pid,args -p "$(tr '\n' , <<<"$left" | sed 's/,$//')"; exit 1; }
echo "passed: the job ended $elapsed_ms ms after h1 died, naming it"
