#!/usr/bin/python3
"""Ablation of the memory-managed executor, in the spirit of the published evaluation.

For each dataset, model and device budget (a fraction of the unlimited-budget peak of the reuse executor), trains
a few epochs with each configuration and reports the bytes moved between host and device per epoch and the
median epoch time:

  baseline     recompute + size-order (a graph-unaware swapping framework running a split full-graph model)
  lru          reuse + lru
  degree       reuse + degree (static pinning of high-degree vertices)
  st-aware     reuse + st-aware
  belady       reuse + belady (the offline optimum, the lower bound)

The baseline pages each subgraph's L-hop closure through the device, so it runs within every budget the reuse
executor runs within. Where a budget is below a configuration's minimum (one vertex with all its in-edges), that
configuration runs at its minimum instead, and the table says so. The baseline, many times slower, trains
--baseline-epochs epochs (default 1, timed); the others train --epochs and the first is not timed.

Every run uses --threads compute threads (default 1). The emulated device's copy engine is a thread of its own,
as a GPU's copy engine is hardware of its own; on a 2-core machine, two compute threads plus the copy engine
oversubscribe the cores, and epochs of the same run then vary by 2-10x.

Usage: scripts/bench/ablation.py [--nj build/nj] [--data ../shared/data] [--work data/generated/ablation]
                                 [--datasets cora,slashdot,generated] [--models gcn,gat] [--epochs 3]
                                 [--baseline-epochs 1] [--fractions 0.5,0.25,0.1] [--configs ...] [--threads 1]
                                 [--csv results.csv]
  --models takes any of gcn, gat, sage, gin, appnp.
"""
import argparse
import csv
import os
import sys

from nj_bench import figures, minimum_budget, prepare_datasets, train_run

CONFIGS = [
    ("baseline", "recompute", "size-order"),
    ("lru", "reuse", "lru"),
    ("degree", "reuse", "degree"),
    ("st-aware", "reuse", "st-aware"),
    ("belady", "reuse", "belady"),
]
FRACTIONS = [0.5, 0.25, 0.1]
MODELS = {
    "gcn": ["--model", "gcn", "--layers", "2", "--hidden", "128"],
    "gat": ["--model", "gat", "--layers", "2", "--hidden", "8", "--heads", "8"],
    "sage": ["--model", "sage", "--layers", "2", "--hidden", "128"],
    "gin": ["--model", "gin", "--layers", "2", "--hidden", "128"],
    "appnp": ["--model", "appnp", "--layers", "2", "--hidden", "128", "--propagation-steps", "10", "--teleport", "0.1"],
}


def train(nj, dataset, model, execution, policy, budget, epochs, metrics, threads):
    records, error = train_run(nj, [*MODELS[model], "--threads", str(threads), "--epochs", str(epochs),
                                    "--eval-every", "0", "--execution", execution, "--cache-policy", policy,
                                    "--device-memory", str(budget)], metrics, dataset)
    if records is None:
        return None, error
    f = figures(records)
    return {
        "seconds": f["epoch_seconds"],
        "bytes": f["transfer_bytes"],
        "peak": f["device_peak_bytes"],
        "recompute_ratio": f["recompute_ratio"],
        "hit_rate": f["hit_rate"],
        "wait": f["copy_wait_seconds"],
        "plan": f["plan_seconds"],
    }, None


def mib(b):
    return f"{b / 2**20:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--nj", default=os.path.join(root, "build/nj"))
    parser.add_argument("--data", default=os.environ.get("NJ_DATA_DIR", os.path.join(root, "../shared/data")))
    parser.add_argument("--work", default=os.path.join(root, "data/generated/ablation"))
    parser.add_argument("--datasets", default="cora,slashdot,generated")
    parser.add_argument("--models", default="gcn,gat")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--baseline-epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fractions", default=",".join(str(f) for f in FRACTIONS))
    parser.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    parser.add_argument("--csv", default=None)
    args = parser.parse_args()
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r} ({', '.join(MODELS)})")

    datasets = prepare_datasets(args.nj, args.data, args.work, args.datasets.split(","))
    metrics = os.path.join(args.work, f"metrics-{os.getpid()}.jsonl")  # several runs may share --work
    rows = []
    for name, path in datasets.items():
        for model in args.models.split(","):
            unlimited, error = train(args.nj, path, model, "reuse", "st-aware", "unlimited", args.epochs, metrics,
                                     args.threads)
            if unlimited is None:
                sys.exit(f"{name}/{model} unlimited run failed: {error}")
            print(f"\n### {name}, {model}: unlimited budget: peak {mib(unlimited['peak'])} MiB, "
                  f"{mib(unlimited['bytes'])} MiB moved, {unlimited['seconds']:.3f} s/epoch", flush=True)
            print("| budget | config | MiB moved | vs belady | vs baseline | s/epoch | speed-up vs baseline | "
                  "vs unlimited time | hit rate | recompute | peak MiB |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            at_minimum = {}  # a configuration that needed more than the budget runs once, at its minimum
            for fraction in [float(f) for f in args.fractions.split(",")]:
                budget = int(fraction * unlimited["peak"])
                results = {}
                for label, execution, policy in CONFIGS:
                    if label not in args.configs.split(","):
                        continue
                    if label in at_minimum:
                        results[label] = at_minimum[label]
                        continue
                    epochs = args.baseline_epochs if label == "baseline" else args.epochs
                    result, error = train(args.nj, path, model, execution, policy, budget, epochs, metrics,
                                          args.threads)
                    note = ""
                    if result is None and minimum_budget(error):
                        note = f"at its minimum {minimum_budget(error)}"
                        result, error = train(args.nj, path, model, execution, policy, minimum_budget(error),
                                              epochs, metrics, args.threads)
                        if result is not None:
                            result["note"] = note
                            at_minimum[label] = result
                    if result is None:
                        print(f"| {fraction:.0%} | {label} | failed: {error} |||||||||")
                        continue
                    result["note"] = note
                    results[label] = result
                for label, result in results.items():
                    base = results.get("baseline")
                    belady = results.get("belady")
                    row = {
                        "dataset": name, "model": model, "budget_fraction": fraction, "budget_bytes": budget,
                        "config": label, "bytes": result["bytes"], "seconds": result["seconds"],
                        "peak": result["peak"], "hit_rate": result["hit_rate"],
                        "recompute_ratio": result["recompute_ratio"], "plan_seconds": result["plan"],
                        "note": result["note"],
                    }
                    rows.append(row)
                    vs_belady = f"{result['bytes'] / belady['bytes']:.2f}x" if belady else "-"
                    vs_base = "-"
                    if base and label != "baseline":
                        saved = 1 - result["bytes"] / base["bytes"]
                        vs_base = f"{saved:.1%} less" if saved >= 0 else f"{-saved:.1%} more"
                    speedup = f"{base['seconds'] / result['seconds']:.2f}x" if base and label != "baseline" else "-"
                    vs_unlimited = f"{result['seconds'] / unlimited['seconds']:.2f}x"
                    seconds = f"{result['seconds']:.3f}"
                    if result["plan"] > 0:  # the baseline cuts its closures while it trains
                        seconds += f" (plan {result['plan']:.2f})"
                    print(f"| {fraction:.0%} | {label}{' (' + result['note'] + ')' if result['note'] else ''} | "
                          f"{mib(result['bytes'])} | {vs_belady} | {vs_base} | {seconds} | {speedup} | "
                          f"{vs_unlimited} | {result['hit_rate']:.1%} | {result['recompute_ratio']:.2f} | "
                          f"{mib(result['peak'])} |", flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
