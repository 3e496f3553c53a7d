#!/usr/bin/python3
"""The first layer over sparse rows against dense rows, side by side: epoch time, and the density where they cross.

Writes a bag-of-words graph (sparse_features.py's) with the Python package and trains it with `nj train
--sparse-inputs off` and `--sparse-inputs on`, interleaved round by round: in memory, and within a device budget
(the same bytes for both). Prints each run's median epoch and device peak, and their ratios. Then trains a smaller
graph at several densities to show where SpMM over the stored entries stops paying (what `--sparse-inputs auto`
decides by). A benchmark, not a test.

  scripts/bench/sparse_inputs.py                        # 20k vertices, 4096 words, 0.3 % density; GCN and GAT
  scripts/bench/sparse_inputs.py --rounds 5 --models gcn
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import neutronjittor as nj  # noqa: E402
from nj_bench import machine  # noqa: E402
from sparse_features import bag_of_words_graph  # noqa: E402


def epoch(nj_binary, path, work, model, sparse_inputs, budget, epochs):
    """Median epoch (s) and device peak (bytes) of one run."""
    metrics = os.path.join(work, "metrics.jsonl")
    options = dict(model=model, hidden=16, epochs=epochs, eval_every=0, threads=2, sparse_inputs=sparse_inputs,
                   metrics_out=metrics)
    if budget != "unlimited":
        options.update(execution="reuse", device_memory=budget)
    nj.train(path, nj=nj_binary, quiet=True, **options)
    records = [json.loads(line) for line in open(metrics)]
    summary = records[-1]
    peak = max(r["execution"]["peak_device_footprint_bytes"] for r in records if r["type"] == "epoch")
    return summary["median_epoch_seconds"], peak


def write_graph(work, name, vertices, words, density):
    edge_index, features, labels, train, val, test = bag_of_words_graph(vertices, words, density, 7, 10, 1)
    path = nj.write_dataset(os.path.join(work, f"{name}.h5"), edge_index, features, labels, train, val, test,
                            name=name)
    return path, edge_index.shape[1], features.nnz


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vertices", type=int, default=20000)
    p.add_argument("--words", type=int, default=4096)
    p.add_argument("--density", type=float, default=0.003)
    p.add_argument("--models", default="gcn,gat")
    p.add_argument("--budget", default="64M", help="the budgeted runs' --device-memory")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sweep", default="0.005,0.02,0.04,0.0625,0.1,0.2",
                   help="densities of the crossover sweep (empty: none)")
    p.add_argument("--nj", default=os.path.join(ROOT, "build", "nj"))
    p.add_argument("--work", default=None, help="where the files go (default: a temporary folder)")
    args = p.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="nj-sparse-inputs-")
    path, edges, entries = write_graph(work, "bag-of-words", args.vertices, args.words, args.density)
    print(f"machine: {machine()}")
    print(f"graph: {args.vertices} vertices, {edges} directed edges, {args.words} words, "
          f"{entries / (args.vertices * args.words):.4%} non-zero ({entries} entries); hidden 16, {args.epochs} "
          f"epochs a run, {args.rounds} interleaved rounds")
    print("| model | budget | first layer | median epoch, each round | median | device peak |")
    print("|---|---|---|---|---:|---:|")
    ratios = []
    for model in args.models.split(","):
        for budget in ("unlimited", args.budget):
            runs = {"off": [], "on": []}
            peaks = {}
            for _ in range(args.rounds):
                for choice in runs:
                    seconds, peaks[choice] = epoch(args.nj, path, work, model, choice, budget, args.epochs)
                    runs[choice].append(seconds)
            for choice, label in (("off", "dense rows"), ("on", "sparse rows")):
                print(f"| {model} | {budget} | {label} | {', '.join(f'{t:.4f}' for t in runs[choice])} | "
                      f"{statistics.median(runs[choice]):.4f} s | {peaks[choice] / 2**20:.1f} MiB |")
            ratios.append(f"{model} {budget}: epoch {statistics.median(runs['on']) / statistics.median(runs['off']):.3f}"
                          f", peak {peaks['on'] / peaks['off']:.3f}")
    print("sparse / dense rows: " + "; ".join(ratios))

    if not args.sweep:
        return
    print("\ncrossover (GCN in memory, 5,000 vertices, 1,024 words): median epoch over dense rows, over sparse rows")
    print("| density | dense rows | sparse rows | sparse / dense |")
    print("|---:|---:|---:|---:|")
    for density in (float(d) for d in args.sweep.split(",")):
        sweep_path, _, sweep_entries = write_graph(work, f"sweep-{density}", 5000, 1024, density)
        times = {"off": [], "on": []}
        for _ in range(args.rounds):
            for choice in times:
                times[choice].append(epoch(args.nj, sweep_path, work, "gcn", choice, "unlimited", args.epochs)[0])
        dense, sparse = statistics.median(times["off"]), statistics.median(times["on"])
        print(f"| {sweep_entries / (5000 * 1024):.2%} | {dense:.4f} s | {sparse:.4f} s | {sparse / dense:.2f} |")


if __name__ == "__main__":
    main()
