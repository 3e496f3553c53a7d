#!/usr/bin/python3
"""Exchange over rate-limited links: 2 emulated hosts × 1 rank (scripts/netns-cluster.sh up 2 --link RATE) train a
2-layer GCN (hidden 128) on the 2 METIS shards of the generated 1M-vertex graph, subgraph by subgraph without a
budget, one thread per rank; and scripts/experiments/project.py's model predicts each epoch from `nj plan`'s bytes
and a link of the same rate.

Per rate it prints the median timed epoch, the bytes exchanged, per layer and direction the time in flight and the
time waited (the slower rank's), the share of the exchange hidden behind compute (1 - waited / in flight), what
the epoch spent beyond compute and those waits, and the projection with its error, twice: over a link of the rate,
and over a link of the rate or of what TCP between two emulated hosts reaches on this machine without a limiter,
whichever is slower (measured first, from the first layer's forward exchange). The compute rate comes from the
same graph on 2 ranks of this machine without a link (shared memory), less the time those ranks waited.

Usage: scripts/experiments/link_limited.py [--nj build/nj] [--work data/generated/links]
                                           [--links 1gbit,10gbit,25gbit] [--epochs 6]
Root only (network namespaces); the hosts are torn down after each run, also on failure.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "bench"))
sys.path.insert(0, here)
from nj_bench import machine, prepare_datasets, prepare_parts, run, timed_epochs  # noqa: E402
import project  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(here))
CLUSTER = os.path.join(ROOT, "scripts", "netns-cluster.sh")
LATENCY_US = 50.0  # TCP through the namespaces' veth pairs and bridge, a few round trips per message
TRAIN = ["--model", "gcn", "--layers", "2", "--hidden", "128", "--threads", "1", "--eval-every", "0",
         "--execution", "reuse", "--device-memory", "unlimited"]


def rate_gbit(rate):
    for suffix, scale in (("gbit", 1.0), ("mbit", 1e-3)):
        if rate.endswith(suffix):
            return float(rate[: -len(suffix)]) * scale
    sys.exit(f"link rate {rate}: give it as 500mbit or 10gbit")


def train(nj, parts, epochs, metrics, link):
    """2 ranks on 2 emulated hosts over a link of `link` ("" for no limiter), or on this machine where link is
    None."""
    args = [nj, "--log-level", "warn", "train", "--partitions", parts, *TRAIN, "--epochs", str(epochs),
            "--metrics-out", metrics]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1", OMP_NUM_THREADS="1", NJ_CLUSTER="njlinks")
    if link is None:
        code, out = run(["mpirun", "-np", "2", *args], env)
    else:
        try:
            code, out = run([CLUSTER, "up", "2", *(["--link", link] if link else [])], env)
            if code == 0:
                cluster_args = subprocess.run([CLUSTER, "mpirun-args"], env=env, capture_output=True, text=True,
                                              check=True).stdout.split()
                code, out = run([CLUSTER, "exec", "h0", "mpirun", *cluster_args, "-np", "2", "--map-by",
                                 "ppr:1:node", "-x", "OMP_NUM_THREADS=1", *args], env)
        finally:  # also on Ctrl-C: no host outlives the run
            run([CLUSTER, "down"], env)
    if code != 0:
        sys.exit(f"training over {'shared memory' if link is None else link or 'TCP'} failed:\n{out}")
    with open(metrics) as f:
        return timed_epochs([json.loads(line) for line in f])


def measured(epochs):
    """Medians over the timed epochs: epoch seconds, bytes sent, and per (layer, direction) the slower rank's time in
    flight and time waited."""
    flows = {}
    for layer in epochs[0]["over_ranks"]["exchange"]:
        for direction in ("forward", "backward"):
            key = (layer["layer"], direction)
            flows[key] = {
                "bytes": layer[direction]["bytes_sent"],
                "flight": statistics.median(e["over_ranks"]["exchange"][layer["layer"] - 1][direction]["seconds"]["max"]
                                            for e in epochs),
                "wait": statistics.median(
                    e["over_ranks"]["exchange"][layer["layer"] - 1][direction]["wait_seconds"]["max"] for e in epochs),
            }
    return statistics.median(e["epoch_seconds"] for e in epochs), flows


def projected(ranks, compute, link_name):
    """project.py's epoch over `link_name` between the 2 hosts, at the compute rate that makes the slower rank's
    work take `compute` seconds."""
    widths = project.widths(128, 16)
    throughput = max(project.units(r["owned"], r["in_edges"], widths) for r in ranks) / compute
    return project.epoch_seconds([dict(r, host_bytes=0) for r in ranks], throughput, widths, 2, 1, "memcpy",
                                 link_name, link_name)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nj", default=os.path.join(ROOT, "build/nj"))
    parser.add_argument("--work", default=os.path.join(ROOT, "data/generated/links"))
    parser.add_argument("--links", default="1gbit,10gbit,25gbit")
    parser.add_argument("--epochs", type=int, default=6, help="epochs per run; the first warms up")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("link_limited.py: the emulated hosts need root")
    nj = os.path.abspath(args.nj)
    dataset = prepare_datasets(nj, os.path.join(ROOT, "..", "shared", "data"), args.work, ["generated"])["generated"]
    parts = prepare_parts(nj, args.work, dataset, 2)
    ranks = project.plan_ranks(nj, parts)
    metrics = os.path.join(args.work, "metrics.jsonl")

    print(f"machine: {machine()}")
    base_epoch, base_flows = measured(train(nj, parts, args.epochs, metrics, None))
    compute = base_epoch - sum(f["wait"] for f in base_flows.values())
    print(f"shared memory (no link): epoch {base_epoch:.3f} s, of which compute {compute:.3f} s (the rate the "
          f"projections use)")
    free = ", ".join(f"{100 * (1 - r['owned_reading_mirrors'] / r['owned']):.0f} %" for r in ranks)
    print(f"owned rows that read no mirror (nj plan): {free}")
    _, open_flows = measured(train(nj, parts, args.epochs, metrics, ""))
    first = open_flows[(1, "forward")]
    ceiling = first["bytes"] / 2 / first["flight"] / 1e9  # bytes_sent is summed over the 2 ranks
    print(f"TCP between the emulated hosts without a limiter: {8 * ceiling:.1f} Gbit/s (first layer's forward "
          f"exchange, {first['bytes'] / 2e6:.0f} MB a rank in {first['flight']:.3f} s)\n")

    print("| link | epoch s | exchanged MB | layer, direction: in flight / waited s (hidden) | beyond compute and "
          "waits s | projected s (error) | projected, TCP ceiling (error) |")
    print("|---|---|---|---|---|---|---|")
    for link in args.links.split(","):
        project.LINKS["rate"] = (rate_gbit(link) / 8, LATENCY_US)
        project.LINKS["path"] = (min(rate_gbit(link) / 8, ceiling), LATENCY_US)
        epoch, flows = measured(train(nj, parts, args.epochs, metrics, link))
        exchanged = sum(f["bytes"] for f in flows.values())
        shown = "; ".join(
            f"L{layer} {direction[:3]}: {f['flight']:.3f} / {f['wait']:.3f} "
            f"({100 * (1 - f['wait'] / f['flight']) if f['flight'] > 0 else 0:.0f} %)"
            for (layer, direction), f in sorted(flows.items()) if f["bytes"] > 0)
        rest = epoch - compute - sum(f["wait"] for f in flows.values())
        cells = []
        for name in ("rate", "path"):
            seconds = projected(ranks, compute, name)
            cells.append(f"{seconds:.3f} ({100 * (seconds - epoch) / epoch:+.0f} %)")
        print(f"| {link} | {epoch:.3f} | {exchanged / 1e6:.1f} | {shown} | {rest:+.3f} | {cells[0]} | {cells[1]} |")
    os.remove(metrics)


if __name__ == "__main__":
    main()
