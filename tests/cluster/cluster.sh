# Sourced by the emulated-cluster tests: skips (77) where they cannot run, brings up a cluster of its own, and
# removes it on exit whatever happened (also when killed with TERM or INT), failing the test where a process is
# left on one of its hosts, a cleanup fails, or a namespace outlives it.
#   source cluster.sh; cluster_up N [--link RATE]; on h0 COMMAND...; mpirun_args (an array)
# Cora comes from NJ_DATA_DIR or the shared data folder; where it is absent the test skips, or fails with
# NJ_REQUIRE_DATA set.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
data="${NJ_DATA_DIR:-$root/../shared/data}"
if [[ "$(id -u)" != 0 ]] || ! command -v nsenter >/dev/null || ! ip netns list >/dev/null 2>&1; then
  echo "skipped: emulated hosts need root and network namespaces (iproute2, util-linux)"
  exit 77
fi
if [[ ! -d "$data/cora" ]]; then
  [[ -z "${NJ_REQUIRE_DATA:-}" || "${NJ_REQUIRE_DATA}" == 0 ]] || { echo "FAILED: $data/cora not found (NJ_REQUIRE_DATA)"; exit 1; }
  echo "skipped: $data/cora not found (set NJ_DATA_DIR)"
  exit 77
fi
export NJ_CLUSTER="njtest$$"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work="$(mktemp -d /tmp/nj-cluster-test.XXXXXX)"
cluster_cleanups=()  # commands run before the cluster goes down

cluster_down() {
  local status=$? cleanup ns left
  trap - EXIT INT TERM
  for cleanup in "${cluster_cleanups[@]}"; do eval "$cleanup" || status=1; done
  # Whatever still runs on a host now was left behind by what the test ran (down would kill it unseen).
  for ns in $(ip netns list | awk -v prefix="$NJ_CLUSTER-" 'index($1, prefix) == 1 {print $1}'); do
    left="$(ip netns pids "$ns" | paste -sd,)"
    if [[ -n "$left" ]]; then
      echo "FAILED: processes left on $ns:"; ps -o pid=,args= -p "$left" || true
      status=1
    fi
  done
  "$root/scripts/netns-cluster.sh" down >/dev/null || true
  if ip netns list | grep -q "^$NJ_CLUSTER-"; then
    echo "FAILED: namespaces of $NJ_CLUSTER are left:"; ip netns list | grep "^$NJ_CLUSTER-"
    status=1
  fi
  [[ -n "${NJ_KEEP_WORK:-}" ]] || rm -rf "$work"
  exit "$status"
}
trap cluster_down EXIT
trap 'exit 143' INT TERM  # a test killed (ctest's time limit) still removes its cluster

# pass_to_ranks VAR=VALUE...: sets variables for every rank. Through mca_base_env_list, not mpirun's -x, which
# Open MPI refuses beside it, and the sanitizer preset sets it.
pass_to_ranks() {
  local variable
  for variable in "$@"; do
    OMPI_MCA_mca_base_env_list="${OMPI_MCA_mca_base_env_list:+$OMPI_MCA_mca_base_env_list;}$variable"
  done
  export OMPI_MCA_mca_base_env_list
}
cluster_up() { "$root/scripts/netns-cluster.sh" up "$@"; mapfile -t mpirun_args < <("$root/scripts/netns-cluster.sh" mpirun-args); }
on() { "$root/scripts/netns-cluster.sh" exec "$@"; }
# received_bytes HOST: what the host's interface has received so far
# (/proc/net/dev is the reader's network namespace's; /sys stays the machine's)
received_bytes() { on "$1" awk -F'[: ]+' '$2 == "eth0" {print $3}' /proc/net/dev; }
