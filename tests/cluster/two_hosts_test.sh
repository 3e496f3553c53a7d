#!/usr/bin/env bash
# Two emulated hosts × two ranks (scripts/netns-cluster.sh): TCP between the hosts, shared memory within each.
#  1. The multi-rank suite (nj_mpi_tests) passes across them: among its tests GCN on Cora's METIS shards equals
#     one process in every epoch's loss and every gradient, in memory and within a budget.
#  2. `nj train --partitions` on Cora's METIS shard files equals `nj train` in one process: the loss of every epoch
#     within 1e-5 (relative), and every gradient of the first step (Adam's first moment after one step is
#     (1 - β1)·g) within 1e-5 of its largest element (1e-4 for biases, whose terms cancel).
#  3. The exchange crossed the hosts' links: the second host's link carried its share of the training's exchange.
# Usage: tests/cluster/two_hosts_test.sh BUILD/nj BUILD/tests/nj_mpi_tests
set -euo pipefail
nj="$(realpath "$1")" mpi_tests="$(realpath "$2")"
source "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"

cluster_up 2
"$nj" --log-level warn convert --format plain "$data/cora" --output "$work/cora.h5"
"$nj" --log-level warn partition "$work/cora.h5" --parts 4 --method metis --output "$work/cora.parts"
ranks=(-np 4 --map-by ppr:2:node)
pass_to_ranks OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 NJ_DATA_DIR="$data"
[[ -z "${NJ_REQUIRE_DATA:-}" ]] || pass_to_ranks NJ_REQUIRE_DATA="$NJ_REQUIRE_DATA"

on h0 timeout 300 mpirun "${mpirun_args[@]}" "${ranks[@]}" "$mpi_tests" --gtest_brief=1
echo "passed: the multi-rank suite across 2 hosts × 2 ranks"

options=(--epochs 20 --eval-every 0 --threads 1)
"$nj" --log-level warn train "$work/cora.h5" "${options[@]}" --metrics-out "$work/one.jsonl"
"$nj" --log-level warn train "$work/cora.h5" --epochs 1 --threads 1 --save-checkpoint "$work/one.h5"
before="$(received_bytes h1)"
on h0 timeout 300 mpirun "${mpirun_args[@]}" "${ranks[@]}" "$nj" train --partitions "$work/cora.parts" "${options[@]}" \
  --metrics-out "$work/hosts.jsonl" 2>&1 | tee "$work/hosts.log"
on h0 timeout 300 mpirun "${mpirun_args[@]}" "${ranks[@]}" "$nj" --log-level warn train --partitions "$work/cora.parts" \
  --epochs 1 --threads 1 --save-checkpoint "$work/hosts.h5"
grep -q "4 ranks, metis partition" "$work/hosts.log" || { echo "FAILED: the job did not train 4 ranks on the shards"; exit 1; }
/usr/bin/python3 - "$work" <<'PY'
import json, sys
import h5py, numpy as np
work = sys.argv[1]
def losses(name):
    return [r["loss"] for r in map(json.loads, open(f"{work}/{name}.jsonl")) if r["type"] == "epoch"]
one, hosts = losses("one"), losses("hosts")
assert len(one) == 20 and len(hosts) == 20, f"{len(one)} and {len(hosts)} epochs, not 20"
for epoch, (a, b) in enumerate(zip(one, hosts), 1):
    assert abs(a - b) <= 1e-5 * abs(a), f"epoch {epoch}: loss {b} on 2 hosts, {a} in one process"
with h5py.File(f"{work}/one.h5") as a, h5py.File(f"{work}/hosts.h5") as b:
    names = sorted(a["adam_m"])
    assert names == sorted(b["adam_m"]), (names, sorted(b["adam_m"]))
    for name in names:
        expected, actual = a["adam_m"][name][()], b["adam_m"][name][()]
        largest = np.abs(expected).max()
        assert largest > 0, f"{name} has no gradient"
        tolerance = (1e-4 if name.endswith(".bias") else 1e-5) * largest
        worst = np.abs(actual - expected).max()
        assert worst <= tolerance, f"{name}: gradients differ by {worst} (tolerance {tolerance})"
print(f"passed: 20 losses and the gradients of {len(names)} parameters equal one process's")
PY

received=$(($(received_bytes h1) - before))
exchanged="$(/usr/bin/python3 -c "
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
print(sum(layer[d]['bytes_received'] for r in records if r['type'] == 'epoch' for layer in r['over_ranks']['exchange']
          for d in ('forward', 'backward')))" "$work/hosts.jsonl")"
echo "h1 received $received bytes over its link; the 4 ranks received $exchanged bytes of exchange"
# Half of the ranks' peers are on the other host; a quarter of what the ranks received is a floor that shared memory
# between the hosts could not reach.
((received > exchanged / 4)) || { echo "FAILED: less crossed the link than a quarter of the exchange"; exit 1; }
