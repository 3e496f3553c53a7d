#!/usr/bin/env bash
# Every process capped at the same memory (the cgroup v1 memory controller, one group per process): four ranks
# convert, partition and train a graph that one process under the same cap cannot train. The edge list is converted by
# one process within the cap (its graph sorted on disk); four ranks partition it with PT-Scotch and train one epoch,
# each in a group of its own; then one process trains the same dataset within the same cap, and must fail (refused by
# its memory check, or killed by the kernel). Prints each group's peak. Skips (77) where the controller is absent or
# the test is not root; CI runs it as root and must not skip it (scripts/check_skips.sh).
# Usage: tests/memory/capped_ranks_test.sh BUILD/nj
set -euo pipefail
nj="$(realpath "$1")"
controller=/sys/fs/cgroup/memory
[[ -d $controller && -w $controller ]] || { echo "skipped: no writable cgroup v1 memory controller at $controller"; exit 77; }
[[ -z ${NJ_SANITIZED:-} ]] || { echo "skipped: a sanitizer's shadow memory and quarantine exceed any cap sized for nj"; exit 77; }
cap=$((400 << 20))
root="$controller/nj-capped-$$"
work="$(mktemp -d)"
cleanup() {
  for group in "$root"/*/; do [[ -d $group ]] && rmdir "$group" 2>/dev/null; done
  [[ -d $root ]] && rmdir "$root"
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$root"

# A command run in a capped group of its own, named by its first argument: the shell joins the group, then becomes
# the command. Under mpirun each rank names its group by its rank.
cat >"$work/capped.sh" <<SCRIPT
#!/usr/bin/env bash
set -euo pipefail
group="$root/\${1//RANK/\${OMPI_COMM_WORLD_RANK:-0}}"
shift
mkdir -p "\$group"
echo $cap >"\$group/memory.limit_in_bytes"
echo \$\$ >"\$group/cgroup.procs"
exec "\$@"
SCRIPT
chmod +x "$work/capped.sh"
peak() { echo "$(($(cat "$root/$1/memory.max_usage_in_bytes") >> 20)) MiB"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1
ranks=(mpirun --oversubscribe -np 4 "$work/capped.sh")

# 200,000 vertices, 1,000,000 random pairs (undirected: about 2,000,000 edges), 16 classes, 128 random features.
awk 'BEGIN { srand(7); for (i = 0; i < 1000000; ++i) print int(rand() * 200000), int(rand() * 200000) }' >"$work/edges.txt"
awk 'BEGIN { srand(8); for (i = 0; i < 200000; ++i) print int(rand() * 16) }' >"$work/labels.txt"
"$work/capped.sh" convert "$nj" --log-level warn convert --format edgelist "$work/edges.txt" --undirected \
  --self-loops remove --duplicates remove --labels "$work/labels.txt" --random-features 128 --split-ratio 0.1,0.1,0.8 \
  --memory 256M -o "$work/graph.h5"
echo "convert, one process: peak $(peak convert)"

"${ranks[@]}" partition-RANK "$nj" --log-level warn partition "$work/graph.h5" --parts 4 -o "$work/parts"
for r in 0 1 2 3; do echo "partition, rank $r: peak $(peak partition-$r)"; done
# Each rank has a cap of its own, not a share of one: --host-memory says so (nj would share what it sees among the
# ranks on the node).
"${ranks[@]}" train-RANK "$nj" --log-level warn train --partitions "$work/parts" --epochs 1 --threads 1 \
  --host-memory $((cap >> 20))M >"$work/ranks.log"
grep -q '^done:' "$work/ranks.log" || { echo "FAILED: four capped ranks did not train"; cat "$work/ranks.log"; exit 1; }
for r in 0 1 2 3; do echo "train, rank $r: peak $(peak train-$r)"; done

set +e
"$work/capped.sh" single "$nj" --log-level warn train "$work/graph.h5" --epochs 1 --threads 1 >"$work/single.log" 2>&1
status=$?
set -e
echo "train, one process: exit status $status, peak $(peak single)"
if [[ $status -eq 0 ]]; then
  echo "FAILED: one process trained within the cap, so the test shows nothing"
  exit 1
fi
# Refused by the check before it loads, or killed by the kernel at the cap: not any other error.
if [[ $status -ne 137 ]] && ! grep -q "of host memory" "$work/single.log"; then
  echo "FAILED: one process failed for another reason:"
  cat "$work/single.log"
  exit 1
fi
head -1 "$work/single.log"
echo "PASSED: four ranks converted, partitioned and trained within $((cap >> 20)) MiB each; one process could not"
