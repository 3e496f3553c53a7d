#!/usr/bin/env bash
# Emulated hosts on this machine, for testing what crosses a network: each host is a network namespace with its own
# interface, address and hostname, joined by a veth pair to a bridge that lives in a namespace of its own. Nothing
# is added to the machine's own network namespace, and no address outside 10.213.0.0/24 is created or contacted.
#
#   scripts/netns-cluster.sh up N [--link RATE]   create hosts h0 .. h(N-1) (N from 1 to 16); --link rate-limits
#                                                 each host's link in both directions with tc tbf (10gbit, 500mbit)
#   scripts/netns-cluster.sh down                 remove every namespace, link and file `up` made
#   scripts/netns-cluster.sh exec HOST CMD...     run CMD on HOST: in its network namespace, with its hostname
#   scripts/netns-cluster.sh hosts                the hosts, one per line: name and address
#   scripts/netns-cluster.sh mpirun-args          Open MPI options that launch across the hosts (one per line)
#
# NJ_CLUSTER (default nj) names the cluster: its namespaces are NJ_CLUSTER-h0 .., NJ_CLUSTER-switch, its files are
# in /tmp/NJ_CLUSTER-cluster, among them the hosts file that a command on a host sees as /etc/hosts (every host's
# name and address). Two clusters with different names can coexist: the same addresses do not meet, each cluster
# living in its own namespaces. Root only (namespaces). docs/launching.md, "A test cluster".
set -euo pipefail

cluster="${NJ_CLUSTER:-nj}"
state="/tmp/$cluster-cluster"
switch="$cluster-switch"
subnet=10.213.0

die() { echo "netns-cluster: $*" >&2; exit 1; }
namespace_of() { echo "$cluster-$1"; }
address_of() { echo "$subnet.$((${1#h} + 1))"; }
hosts() { [[ -f "$state/hosts" ]] || die "no cluster '$cluster' is up (scripts/netns-cluster.sh up N)"; cat "$state/hosts"; }

down() {
  local ns
  # Every process of a host goes with it, so that no daemon or rank outlives the cluster.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$cluster-(h[0-9]+|switch)$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns delete "$ns" 2>/dev/null || true
  done
  rm -rf "$state"
}

up() {
  local count="${1:-}" link="" i
  shift || true
  while (($#)); do
    case "$1" in
      --link) link="${2:?--link needs a rate, such as 10gbit}"; shift 2 ;;
      *) die "unknown option '$1' (up N [--link RATE])" ;;
    esac
  done
  [[ "$count" =~ ^[0-9]+$ ]] && ((count >= 1 && count <= 16)) || die "up needs a host count from 1 to 16, not '$count'"
  local burst=""
  if [[ -n "$link" ]]; then
    # The bucket holds 10 ms of the rate (at least 1 MiB): a smaller one, refilled once per timer tick, would cap
    # the speed below the rate.
    burst="$(awk -v rate="$link" 'BEGIN {
      n = rate + 0; unit = tolower(substr(rate, length(n "") + 1))
      scale["bit"] = 1; scale["kbit"] = 1e3; scale["mbit"] = 1e6; scale["gbit"] = 1e9
      if (n <= 0 || !(unit in scale)) exit 1
      bytes = n * scale[unit] / 8 / 100; if (bytes < 1048576) bytes = 1048576
      printf "%d", bytes }')" || die "--link takes a rate such as 500mbit or 10gbit, not '$link'"
  fi
  [[ "$(id -u)" == 0 ]] || die "network namespaces need root"
  command -v ip >/dev/null || die "ip (iproute2) not found"
  down
  trap 'echo "netns-cluster: setting up failed; removing what was made" >&2; down' ERR
  mkdir -p "$state"
  ip netns add "$switch"
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  ip -n "$switch" link set lo up
  for ((i = 0; i < count; i++)); do
    local host="h$i" ns
    ns="$(namespace_of "$host")"
    ip netns add "$ns"
    # The pair is made inside the host's namespace, so its names never meet the machine's own interfaces.
    ip -n "$ns" link add eth0 type veth peer name "port$i" netns "$switch"
    ip -n "$ns" addr add "$(address_of "$host")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$switch" link set "port$i" master br0
    ip -n "$switch" link set "port$i" up
    if [[ -n "$link" ]]; then
      # Rate-limit both directions: the host's egress on eth0, its ingress as the switch port's egress.
      tc -n "$ns" qdisc add dev eth0 root tbf rate "$link" burst "$burst" latency 50ms
      tc -n "$switch" qdisc add dev "port$i" root tbf rate "$link" burst "$burst" latency 50ms
    fi
    echo "$host $(address_of "$host")" >>"$state/hosts"
  done
  { echo "127.0.0.1 localhost"; awk '{print $2, $1}' "$state/hosts"; } >"$state/etc-hosts"
  # Open MPI's launch agent: `agent HOST COMMAND` runs COMMAND on HOST as ssh would.
  cat >"$state/agent" <<EOF
#!/usr/bin/env bash
# Open MPI's plm_rsh_agent for the emulated cluster '$cluster': runs a command on an emulated host.
host="\$1"; shift
exec "$(realpath "${BASH_SOURCE[0]}")" exec "\$host" sh -c "\$*"
EOF
  chmod +x "$state/agent"
  awk '{print $1, "slots=16"}' "$state/hosts" >"$state/hostfile"
  trap - ERR
  echo "netns-cluster: $count hosts up${link:+, links limited to $link}; hostfile $state/hostfile"
}

exec_on() {
  local host="${1:-}" ns
  shift || true
  [[ -n "$host" && $# -gt 0 ]] || die "exec needs a host and a command"
  hosts | awk '{print $1}' | grep -qx "$host" || die "no host '$host' in cluster '$cluster'"
  ns="$(namespace_of "$host")"
  # The host's network namespace; a UTS namespace gives the command the host's name, and a mount namespace the
  # cluster's /etc/hosts. Not `ip netns exec`, which also mounts a sysfs of the namespace over /sys and so hides
  # the cgroup file system that slurmd needs. NJ_CLUSTER travels so that nested calls (Open MPI's agent) find the
  # same cluster.
  exec nsenter --net="/run/netns/$ns" unshare --uts --mount env NJ_CLUSTER="$cluster" \
    sh -c 'mount --bind "$1" /etc/hosts && hostname "$0" && shift && exec "$@"' "$host" "$state/etc-hosts" "$@"
}

mpirun_args() {
  hosts >/dev/null
  # TCP between hosts (on eth0, not loopback), shared memory between ranks of one host. No binding: the hosts
  # share this machine's cores, and Open MPI would bind the first rank of every host to the same core.
  printf '%s\n' --hostfile "$state/hostfile" --mca plm_rsh_agent "$state/agent" --mca btl tcp,vader,self \
    --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --bind-to none
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down; echo "netns-cluster: '$cluster' is down" ;;
  exec) shift; exec_on "$@" ;;
  hosts) hosts ;;
  mpirun-args) mpirun_args ;;
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
  *) echo "usage: scripts/netns-cluster.sh up N [--link RATE] | down | exec HOST CMD... | hosts | mpirun-args" >&2; exit 2 ;;
esac
