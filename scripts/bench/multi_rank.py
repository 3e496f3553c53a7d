#!/usr/bin/python3
"""Multi-rank training on METIS shards: what the boundary exchange costs at 1, 2 and 4 ranks.

Generates a graph (or takes --dataset), partitions it with METIS into as many parts as each rank count
(`nj partition`, shards reused when the folder already has a manifest), and trains a 2-layer GCN (hidden 128)
with the subgraph executor (`--execution reuse`) at each rank count, twice: with an unlimited device budget, and
with a budget per rank of --budget-fraction of the 1-rank unlimited run's device peak. One rank trains on the
dataset itself; several run under `mpirun --oversubscribe`, each reading only its shard. Every run uses
--threads compute threads per rank (default 1) and trains --epochs epochs, the first not timed.

The table gives, per rank count and configuration: the edge cut and the mirror fraction (mirrors over owned
vertices, mean over parts) from the run's summary; the bytes the boundary exchange sends per epoch (summed over
ranks, layers and both directions); per phase, the median over epochs of the slowest rank's seconds: compute,
host-device copies (transfer), time spent waiting on copies, the exchanges' time in flight (from start to
completion, during which the subgraphs that read no mirror run, so it overlaps compute) and the time ranks
spent blocked waiting on them (each exchange figure sums the per-layer, per-direction maxima); the median
epoch time (rank 0, evaluation excluded since --eval-every is 0); and the largest rank's resident memory peak
above its start.

Bytes, edge cut and mirror fraction are exact and repeatable. Times are not: with more ranks than cores the
ranks share the cores (each rank also has the emulated device's copy-engine thread).

Usage: scripts/bench/multi_rank.py [--nj build/nj] [--mpirun mpirun] [--work data/generated/multi-rank]
                                   [--dataset X.h5 | --vertices 1000000 --edges 10000000 --features 64
                                   --classes 16 --seed 1] [--ranks 1,2,4] [--epochs 3] [--budget-fraction 0.25]
                                   [--threads 1] [--csv results.csv]
"""
import argparse
import csv
import json
import os
import re
import statistics
import sys

from nj_bench import minimum_budget, run

MODEL = ["--model", "gcn", "--layers", "2", "--hidden", "128"]
# The SIMD extensions that decide which kernels the compiler's -march=native build can use.
SIMD_FLAG = re.compile(r"^(sse4_2|avx|avx2|fma|avx512\w*|amx\w*)$")


def machine():
    model, flags = "unknown", []
    with open("/proc/cpuinfo") as info:
        for line in info:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = [f for f in value.split() if SIMD_FLAG.match(f)]
    return f"{model}, {os.cpu_count()} cores, SIMD flags: {' '.join(flags) or 'none'}"


def prepare_dataset(args):
    if args.dataset:
        return args.dataset
    path = os.path.join(args.work, f"generated-{args.vertices}-{args.edges}-{args.features}-{args.seed}.h5")
    if not os.path.exists(path):
        code, out = run([args.nj, "generate", "--vertices", str(args.vertices), "--edges", str(args.edges),
                         "--features", str(args.features), "--classes", str(args.classes), "--seed", str(args.seed),
                         "--output", path])
        if code != 0:
            sys.exit(f"generating the graph failed:\n{out}")
    return path


def prepare_parts(args, dataset, parts):
    folder = os.path.join(args.work, os.path.splitext(os.path.basename(dataset))[0] + f"-metis-{parts}")
    if not os.path.exists(os.path.join(folder, "manifest.json")):
        code, out = run([args.nj, "partition", dataset, "--parts", str(parts), "--method", "metis",
                         "--output", folder])
        if code != 0:
            sys.exit(f"partitioning into {parts} parts failed:\n{out}")
    return folder


def train(args, ranks, source, budget, metrics):
    """Trains at `ranks` ranks on `source` (a dataset, or a partition folder when ranks > 1)."""
    nj_args = ["--log-level", "warn", "train", *MODEL, "--threads", str(args.threads), "--epochs", str(args.epochs),
               "--eval-every", "0", "--execution", "reuse", "--device-memory", str(budget), "--metrics-out", metrics]
    if ranks == 1:
        code, out = run([args.nj, *nj_args, source])
    else:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_mpi_yield_when_idle="1")
        code, out = run([args.mpirun, "-np", str(ranks), "--oversubscribe", args.nj, *nj_args,
                         "--partitions", source], env)
    if code != 0:
        return None, out.strip().splitlines()[-1] if out.strip() else "failed"
    records = [json.loads(line) for line in open(metrics)]
    all_epochs = [r for r in records if r["type"] == "epoch"]
    epochs = all_epochs[1:] or all_epochs
    summary = next(r for r in records if r["type"] == "summary")
    return {"epochs": epochs, "summary": summary}, None


def exchange_layers(epoch):
    # The per-layer exchange records sit under "over_ranks"; a top-level "exchange" is read the same way.
    return epoch.get("exchange") or epoch.get("over_ranks", {}).get("exchange", [])


def figures(result):
    epochs, summary = result["epochs"], result["summary"]

    def median(per_epoch):
        return statistics.median(per_epoch(e) for e in epochs)

    def slowest_rank(name):
        # One process without over-ranks records: its own execution figures.
        return median(lambda e: e["over_ranks"][name]["max"] if "over_ranks" in e
                      else e["execution"][{"copy_wait_seconds": "wait_seconds"}.get(name, name)])

    def exchange(per_direction):
        return median(lambda e: sum(per_direction(layer[d]) for layer in exchange_layers(e)
                                    for d in ("forward", "backward")))

    partition = summary["partition"]
    return {
        "edge_cut": partition["edge_cut"],
        "cut_fraction": partition["cut_fraction"],
        "mirror_fraction": statistics.mean(partition["mirror_fraction"]),
        "exchange_bytes": exchange(lambda d: d["bytes_sent"]),
        "compute_seconds": slowest_rank("compute_seconds"),
        "copy_seconds": slowest_rank("copy_seconds"),
        "copy_wait_seconds": slowest_rank("copy_wait_seconds"),
        "exchange_seconds": exchange(lambda d: d["seconds"]["max"]),
        "exchange_wait_seconds": exchange(lambda d: d["wait_seconds"]["max"]),
        "epoch_seconds": median(lambda e: e["epoch_seconds"]),
        "host_peak_bytes": summary["host_peak_above_baseline_bytes"]["max"],
        "device_peak_bytes": epochs[-1]["execution"]["peak_device_bytes"],
    }


def mib(b):
    return f"{b / 2**20:,.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--nj", default=os.path.join(root, "build/nj"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--work", default=os.path.join(root, "data/generated/multi-rank"))
    parser.add_argument("--dataset", default=None, help="train on this dataset instead of generating one")
    parser.add_argument("--vertices", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--budget-fraction", type=float, default=0.25)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--csv", default=None)
    args = parser.parse_args()

    os.makedirs(args.work, exist_ok=True)
    print(f"machine: {machine()}", flush=True)
    dataset = prepare_dataset(args)
    metrics = os.path.join(args.work, f"metrics-{os.getpid()}.jsonl")  # several runs may share --work

    unlimited, error = train(args, 1, dataset, "unlimited", metrics)
    if unlimited is None:
        sys.exit(f"the 1-rank unlimited run failed: {error}")
    one_rank_peak = figures(unlimited)["device_peak_bytes"]
    budget = int(args.budget_fraction * one_rank_peak)
    print(f"dataset: {dataset}; 1-rank unlimited device peak {mib(one_rank_peak)} MiB, so the budget per rank is "
          f"{args.budget_fraction:.0%} of it: {mib(budget)} MiB", flush=True)
    print("\n| ranks | device budget per rank | edge cut | mirror fraction (mean) | exchange MiB/epoch | "
          "compute s | transfer s | transfer wait s | exchange in flight s | exchange wait s | epoch s (median) | "
          "host peak MiB (largest rank) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for ranks in [int(r) for r in args.ranks.split(",")]:
        source = dataset if ranks == 1 else prepare_parts(args, dataset, ranks)
        for label, limit in (("unlimited", "unlimited"), (f"{args.budget_fraction:.0%} ({mib(budget)} MiB)", budget)):
            result, error = (unlimited, None) if ranks == 1 and limit == "unlimited" else \
                train(args, ranks, source, limit, metrics)
            if result is None and minimum_budget(error):
                label += f" (at its minimum {minimum_budget(error)})"
                result, error = train(args, ranks, source, minimum_budget(error), metrics)
            if result is None:
                print(f"| {ranks} | {label} | failed: {error} ||||||||||", flush=True)
                continue
            f = figures(result)
            rows.append({"ranks": ranks, "budget": label, **f})
            cut = f"{f['edge_cut']:,} ({f['cut_fraction']:.1%})"
            print(f"| {ranks} | {label} | {cut} | {f['mirror_fraction']:.3f} | {mib(f['exchange_bytes'])} | "
                  f"{f['compute_seconds']:.2f} | {f['copy_seconds']:.2f} | {f['copy_wait_seconds']:.2f} | "
                  f"{f['exchange_seconds']:.2f} | {f['exchange_wait_seconds']:.2f} | {f['epoch_seconds']:.2f} | "
                  f"{mib(f['host_peak_bytes'])} |", flush=True)
    os.remove(metrics)
    if args.csv and rows:
        with open(args.csv, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
