#!/usr/bin/env python3
"""What a budgeted epoch moves between host and device, by what it carries, and what it costs in time.

For each model: trains in memory, with the subgraph executor without a budget (whose device peak sets the budgets),
and at each fraction of that peak, in interleaved rounds; prints per run the median epoch and, within a budget, the
bytes an epoch moves each way split into rows, the graph's blocks (structure), slots and ids, and parameters. Beside
them, what `nj plan --all-policies` predicts the rows alone would move under ST-Aware, LRU and Belady, and the graph
blocks with the set kept for the run and with their room under LRU and Belady. Models named by --recomputed (GAT) are
also trained within each budget with --recompute-outputs on, what a GPU does by default.

    scripts/bench/bytes_per_epoch.py                                   # the 200k graph, GCN and GAT, 25 and 10 %
    scripts/bench/bytes_per_epoch.py --dataset FILE.h5 --models gcn --fractions 0.5 --rounds 3
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nj_bench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = {
    "gcn": ["--model", "gcn", "--layers", "2", "--hidden", "128"],
    "gat": ["--model", "gat", "--layers", "2", "--hidden", "8", "--heads", "8"],
}
GENERATE_200K = ["generate", "--vertices", "200000", "--edges", "4200000", "--features", "128", "--classes", "40",
                 "--seed", "1"]
MIB = 1024 * 1024


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nj", default=os.path.join(ROOT, "build", "nj"))
    p.add_argument("--dataset", default=os.path.join(ROOT, "data", "generated", "side-by-side", "bench-200k.h5"),
                   help="made with `nj generate` (the 200k graph) where it does not exist")
    p.add_argument("--models", default="gcn,gat")
    p.add_argument("--fractions", default="0.25,0.1", help="of the unlimited executor's device peak")
    p.add_argument("--epochs", type=int, default=4, help="per run; the first warms up")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--recomputed", default="gat",
                   help="models also trained with --recompute-outputs on within each budget: an attention layer's "
                        "outputs aggregated again in the backward half, what auto does on a GPU")
    return p.parse_args()


def train(args, model, extra, work, name):
    metrics = os.path.join(work, f"{name}.jsonl")
    records, error = nj_bench.train_run(
        args.nj, [*MODELS[model], "--epochs", str(args.epochs), "--eval-every", "0", "--threads", str(args.threads),
                  *extra], metrics, args.dataset)
    if records is None:
        sys.exit(f"bytes_per_epoch.py: {name}: {error}")
    return nj_bench.timed_epochs(records)


def split(epoch):
    """Bytes an epoch moves, by direction and kind (a build from before the split gives "other" bytes whole)."""
    e = epoch["execution"]
    if "h2d_structure_bytes" not in e:
        return {"h2d rows": e["h2d_bytes"], "h2d other": e["h2d_other_bytes"], "d2h rows": e["d2h_bytes"],
                "d2h other": e["d2h_other_bytes"]}
    return {"h2d rows": e["h2d_bytes"], "h2d graph": e["h2d_structure_bytes"], "h2d slots, ids": e["h2d_index_bytes"],
            "h2d parameters": e["h2d_parameter_bytes"], "d2h rows": e["d2h_bytes"],
            "d2h parameters": e["d2h_parameter_bytes"]}


def planned_rows(args, model, budget, extra):
    """Row bytes per epoch (h2d + d2h) nj plan predicts under each policy, and the graph bytes its blocks' room moves
    with the blocks kept for the run, and under LRU and Belady's rule."""
    code, out = nj_bench.run([args.nj, "plan", args.dataset, *MODELS[model], "--execution", "reuse",
                              "--device-memory", str(budget), "--all-policies", *extra])
    if code != 0:
        sys.exit(f"bytes_per_epoch.py: nj plan failed: {out.strip().splitlines()[-1]}")
    rows = {}
    for policy in ("st-aware", "lru", "belady"):
        match = re.search(rf"^{policy}\s+\S+\s+\S+\s+(\S+)", out, re.MULTILINE)  # its total
        rows[policy] = match.group(1) if match else "-"
    match = re.search(r"^graph per epoch, in the room .*: kept for the run (\S+), lru (\S+), belady (\S+)$", out,
                      re.MULTILINE)
    for i, name in enumerate(("graph kept", "graph lru", "graph belady")):
        rows[name] = match.group(i + 1) if match else "-"
    return rows


def main():
    args = parse_args()
    if not os.path.exists(args.dataset):
        code, out = nj_bench.run([args.nj, *GENERATE_200K, "--output", args.dataset])
        if code != 0:
            sys.exit(f"bytes_per_epoch.py: nj generate failed: {out}")
    fractions = [float(f) for f in args.fractions.split(",")]
    print(f"machine: {nj_bench.machine()}")
    print(f"dataset: {args.dataset}; {args.epochs} epochs a run, the first not timed; {args.rounds} round(s)\n")
    with tempfile.TemporaryDirectory() as work:
        for model in args.models.split(","):
            times = {}
            moved = {}
            budgets = {}
            for r in range(args.rounds):
                times.setdefault("in memory", []).append(statistics.median(
                    e["epoch_seconds"] for e in train(args, model, ["--execution", "in-memory"], work, "in-memory")))
                unlimited = train(args, model, ["--execution", "reuse"], work, "unlimited")
                times.setdefault("executor, no budget", []).append(
                    statistics.median(e["epoch_seconds"] for e in unlimited))
                peak = unlimited[-1]["execution"]["peak_device_footprint_bytes"]
                variants = {"": []}
                if model in args.recomputed.split(","):
                    variants[", outputs computed again"] = ["--recompute-outputs", "on"]
                for f in fractions:
                    budget = int(peak * f)
                    for label, extra in variants.items():
                        budgets[(f, label)] = (budget, extra)
                        epochs = train(args, model, ["--execution", "reuse", "--device-memory", str(budget), *extra],
                                       work, f"budget-{f}")
                        times.setdefault(f"{f:.0%} of {peak / MIB:.2f} MiB{label}", []).append(
                            statistics.median(e["epoch_seconds"] for e in epochs))
                        moved[(f, label)] = split(epochs[-1])
            base = statistics.median(times["in memory"])
            print(f"## {model}\n")
            print("| run | s/epoch per round | median | × in memory |")
            print("|---|---|---:|---:|")
            for name, values in times.items():
                median = statistics.median(values)
                print(f"| {name} | {', '.join(f'{v:.3f}' for v in values)} | {median:.3f} | {median / base:.2f} |")
            print()
            kinds = list(next(iter(moved.values())).keys())
            print("| budget | " + " | ".join(kinds) + " | total MiB | rows planned: st-aware, lru, belady "
                  "| graph planned: kept, lru, belady |")
            print("|---|" + "---:|" * (len(kinds) + 1) + "---|---|")
            for (f, label), bytes_by_kind in moved.items():
                budget, extra = budgets[(f, label)]
                planned = planned_rows(args, model, budget, extra)
                total = sum(bytes_by_kind.values())
                cells = " | ".join(f"{bytes_by_kind[k] / MIB:.2f}" for k in kinds)
                print(f"| {f:.0%} ({budget:,} B){label} | {cells} | {total / MIB:.2f} | "
                      f"{planned['st-aware']}, {planned['lru']}, {planned['belady']} | "
                      f"{planned['graph kept']}, {planned['graph lru']}, {planned['graph belady']} |")
            print()


if __name__ == "__main__":
    main()
