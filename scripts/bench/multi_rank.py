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
import os
import sys

from nj_bench import figures, machine, minimum_budget, prepare_parts, run, train_run

MODEL = ["--model", "gcn", "--layers", "2", "--hidden", "128"]


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


def train(args, ranks, source, budget, metrics):
    """Trains at `ranks` ranks on `source` (a dataset, or a partition folder when ranks > 1)."""
    records, error = train_run(args.nj, [*MODEL, "--threads", str(args.threads), "--epochs", str(args.epochs),
                                         "--eval-every", "0", "--execution", "reuse", "--device-memory", str(budget)],
                               metrics, source, ranks, args.mpirun)
    return (figures(records), None) if records else (None, error)


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
    one_rank_peak = unlimited["device_peak_bytes"]
    budget = int(args.budget_fraction * one_rank_peak)
    print(f"dataset: {dataset}; 1-rank unlimited device peak {mib(one_rank_peak)} MiB, so the budget per rank is "
          f"{args.budget_fraction:.0%} of it: {mib(budget)} MiB", flush=True)
    print("\n| ranks | device budget per rank | edge cut | mirror fraction (mean) | exchange MiB/epoch | "
          "compute s | transfer s | transfer wait s | exchange in flight s | exchange wait s | epoch s (median) | "
          "host peak MiB (largest rank) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for ranks in [int(r) for r in args.ranks.split(",")]:
        source = dataset if ranks == 1 else prepare_parts(args.nj, args.work, dataset, ranks)
        for label, limit in (("unlimited", "unlimited"), (f"{args.budget_fraction:.0%} ({mib(budget)} MiB)", budget)):
            result, error = (unlimited, None) if ranks == 1 and limit == "unlimited" else \
                train(args, ranks, source, limit, metrics)
            if result is None and minimum_budget(error):
                label += f" (at its minimum {minimum_budget(error)})"
                result, error = train(args, ranks, source, minimum_budget(error), metrics)
            if result is None:
                print(f"| {ranks} | {label} | failed: {error} ||||||||||", flush=True)
                continue
            f = result
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
