#!/usr/bin/python3
"""Epoch time of two nj builds, side by side on this machine: a change's overhead, measured as a ratio.

Runs each configuration with the baseline build and the candidate build in alternation (--rounds times each,
so that drifts of the machine's speed hit both alike) and prints the median epoch time of each, their ratio
(candidate / baseline), and whether the two builds trained to the same final loss.

Configurations: in-memory execution, and the subgraph executor with an unlimited device budget, for GCN and
GAT, on each dataset given (HDF5 files written by nj convert or nj generate).

Usage: scripts/bench/compare_builds.py --baseline OLD/nj --candidate build/nj DATASET.h5 [...]
                                       [--epochs 20] [--rounds 3] [--threads 1]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

from nj_bench import run

MODELS = {
    "gcn": ["--model", "gcn", "--layers", "2", "--hidden", "128"],
    "gat": ["--model", "gat", "--layers", "2", "--hidden", "8", "--heads", "8"],
}
EXECUTIONS = {
    "in-memory": ["--execution", "in-memory"],
    "subgraph, unlimited": ["--execution", "reuse"],
}


def epoch_times(nj, dataset, model, execution, epochs, threads, metrics):
    """Median epoch time (the first epoch, which warms up, left out) and the final loss."""
    cmd = [nj, "train", dataset, "--epochs", str(epochs), "--eval-every", "0", "--threads", str(threads),
           "--metrics-out", metrics] + MODELS[model] + EXECUTIONS[execution]
    code, output = run(cmd)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{output}")
    epochs_ = [r for r in map(json.loads, open(metrics)) if r.get("type") == "epoch"]
    return statistics.median(r["epoch_seconds"] for r in epochs_[1:]), epochs_[-1]["loss"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--baseline", required=True, help="the nj binary to compare against")
    parser.add_argument("--candidate", default="build/nj")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":")[1].split() for line in f if line.startswith("flags")), [])
    print(f"cpu: {os.cpu_count()} cores, avx512f {'yes' if 'avx512f' in flags else 'no'}; "
          f"{args.epochs} epochs x {args.rounds} rounds per build, {args.threads} thread(s)")
    print(f"{'dataset':<14} {'model':<5} {'execution':<20} {'baseline s':>11} {'candidate s':>12} {'ratio':>7}  loss")
    with tempfile.TemporaryDirectory() as work:
        metrics = os.path.join(work, "metrics.jsonl")
        for dataset in args.datasets:
            for model in MODELS:
                for execution in EXECUTIONS:
                    times = {"baseline": [], "candidate": []}
                    losses = {}
                    for _ in range(args.rounds):
                        for build in ("baseline", "candidate"):
                            nj = args.baseline if build == "baseline" else args.candidate
                            seconds, losses[build] = epoch_times(nj, dataset, model, execution, args.epochs,
                                                                 args.threads, metrics)
                            times[build].append(seconds)
                    base = statistics.median(times["baseline"])
                    cand = statistics.median(times["candidate"])
                    same = "same" if abs(losses["baseline"] - losses["candidate"]) <= 1e-5 * abs(
                        losses["baseline"]) else f"{losses['baseline']:.6f} vs {losses['candidate']:.6f}"
                    name = os.path.splitext(os.path.basename(dataset))[0]
                    print(f"{name:<14} {model:<5} {execution:<20} {base:>11.4f} {cand:>12.4f} {cand / base:>7.2f}  "
                          f"{same}", flush=True)


if __name__ == "__main__":
    main()
