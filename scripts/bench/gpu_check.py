#!/usr/bin/python3
"""The measuring half of scripts/gpu_check.sh: CPU against GPU loss traces, then GPU epoch timings.

Loss traces: `nj train` runs GCN, GAT, GraphSAGE, GIN (ε learnt) and APPNP (dropout and attention dropout on)
for --trace-epochs epochs on Cora and on a generated graph, once with --device cpu and once with --device cuda (cuSPARSE aggregation), in memory; every
epoch's loss must agree within 1e-4 relative, or the script fails. The gradients are compared by the GPU test
instances that gpu_check.sh runs before this (CrossBackendGradientTest).

Timings: a generated graph (--vertices, --edges, 64 features) trains GCN (hidden 128) and GAT (4 heads of 32) with
the subgraph executor (`--execution reuse`) on 1 rank and on 2 ranks (METIS shards, both ranks on the one GPU),
at 100 %, 25 % and 10 % of the device memory the run needs with no budget (its measured peak; where a fraction
is below the least the planner accepts, that least is used and marked '*'). Per run: the median epoch time
(epochs after the first), the rows' host-device bytes per epoch (both directions, rank 0), the bytes of the
boundary exchange (all ranks), the copy engines' busy time (rank 0) and how much of it was hidden behind
compute: 1 - (time the host waited for copies) / (copy time), a lower bound on the overlap, since the GPU may
also wait on a copy while the host does not.

The table also goes to --csv (default gpu_check.csv in the current folder), one row written as each run ends, so
that a run stopped early still leaves what it measured. With --time-limit no timed run starts after that many
seconds from the script's start; the table then says which were skipped. Only the standard library is used.

Usage: scripts/bench/gpu_check.py --nj build-gpu/nj [--data ../shared/data] [--work DIR] [--vertices 500000]
                                  [--edges 5000000] [--epochs 4] [--trace-epochs 10] [--mpirun mpirun]
                                  [--csv gpu_check.csv] [--time-limit SECONDS]
"""
import argparse
import csv
import json
import os
import statistics
import sys
import time

from nj_bench import minimum_budget, run

MODELS = {
    "gcn": ["--model", "gcn", "--layers", "2", "--hidden", "128", "--dropout", "0.5"],
    "gat": ["--model", "gat", "--layers", "2", "--hidden", "32", "--heads", "4", "--dropout", "0.5",
            "--attention-dropout", "0.3"],
}
TRACE_MODELS = {
    "gcn": ["--model", "gcn", "--hidden", "16", "--dropout", "0.5"],
    "gat": ["--model", "gat", "--hidden", "8", "--heads", "8", "--dropout", "0.6", "--attention-dropout", "0.6"],
    "sage": ["--model", "sage", "--hidden", "16", "--dropout", "0.5"],
    "gin": ["--model", "gin", "--hidden", "16", "--dropout", "0.5", "--gin-train-eps"],
    "appnp": ["--model", "appnp", "--hidden", "64", "--dropout", "0.5"],
}


def checked(cmd, what):
    code, output = run(cmd)
    if code != 0:
        sys.exit(f"gpu_check.py: {what} failed ({code}):\n{' '.join(cmd)}\n{output}")
    return output


def records(path, kind="epoch"):
    with open(path) as f:
        return [r for r in map(json.loads, f) if r["type"] == kind]


def compare_traces(args, dataset, label):
    """Trains each trace model on the CPU and on the GPU; returns the largest relative loss difference."""
    worst = 0.0
    for name, model in TRACE_MODELS.items():
        losses = {}
        for device in ("cpu", args.device):
            metrics = os.path.join(args.work, f"trace-{label}-{name}-{device}.jsonl")
            checked([args.nj, "train", dataset, *model, "--epochs", str(args.trace_epochs), "--eval-every", "0",
                     "--device", device, "--metrics-out", metrics], f"{label} {name} on {device}")
            losses[device] = [r["loss"] for r in records(metrics)]
        other = losses[args.device]
        differences = [abs(g - c) / abs(c) for c, g in zip(losses["cpu"], other)]
        print(f"{label:>10} {name}: cpu {losses['cpu'][0]:.6f} .. {losses['cpu'][-1]:.6f}, "
              f"{args.device} {other[0]:.6f} .. {other[-1]:.6f}, largest relative difference "
              f"{max(differences):.2e}")
        worst = max(worst, max(differences))
    return worst


def train(args, ranks, dataset, model, budget, metrics):
    """One timed run; returns (exit code, output)."""
    cmd = [args.nj, "train", *(["--partitions", dataset] if ranks > 1 else [dataset]), *MODELS[model],
           "--epochs", str(args.epochs), "--eval-every", "0", "--device", args.device, "--execution", "reuse",
           "--device-memory", str(budget), "--threads", str(args.threads), "--metrics-out", metrics]
    if ranks > 1:
        cmd = [args.mpirun, "-np", str(ranks), "--oversubscribe", *cmd]
    return run(cmd)


def summarise(metrics):
    epochs = records(metrics)[1:] or records(metrics)
    execution = [e["execution"] for e in epochs]
    exchange = 0
    for layer in epochs[-1]["over_ranks"]["exchange"]:
        exchange += layer["forward"]["bytes_sent"] + layer["backward"]["bytes_sent"]
    copy = statistics.median(x["copy_seconds"] for x in execution)
    wait = statistics.median(x["wait_seconds"] for x in execution)
    return {
        "seconds": statistics.median(e["epoch_seconds"] for e in epochs),
        "rows_bytes": statistics.median(x["h2d_bytes"] + x["d2h_bytes"] for x in execution),
        "exchange_bytes": exchange,
        "copy_seconds": copy,
        "hidden": max(0.0, 1.0 - wait / copy) if copy > 0 else float("nan"),
        "peak": max(x["peak_device_footprint_bytes"] for x in execution),
    }


CSV_FIELDS = ["model", "ranks", "budget", "budget_bytes", "epoch_seconds", "rows_bytes", "exchange_bytes",
              "copy_seconds", "hidden", "peak_bytes", "vertices", "edges", "epochs", "device"]


class Table:
    """The timing rows, each appended to the CSV file as it is measured."""

    def __init__(self, path, args):
        self.rows, self.args = [], args
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.file = open(path, "w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=CSV_FIELDS)
        self.writer.writeheader()
        self.file.flush()

    def add(self, model, ranks, label, budget, budget_bytes, r):
        self.rows.append((model, ranks, label, budget, r))
        self.writer.writerow({
            "model": model, "ranks": ranks, "budget": label, "budget_bytes": budget_bytes,
            "epoch_seconds": f"{r['seconds']:.6f}", "rows_bytes": int(r["rows_bytes"]),
            "exchange_bytes": int(r["exchange_bytes"]), "copy_seconds": f"{r['copy_seconds']:.6f}",
            "hidden": f"{r['hidden']:.4f}", "peak_bytes": int(r["peak"]), "vertices": self.args.vertices,
            "edges": self.args.edges, "epochs": self.args.epochs, "device": self.args.device})
        self.file.flush()


def human(n):
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            return f"{n:.1f}{unit}" if unit != "B" else f"{int(n)}B"
        n /= 1024


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nj", default=os.path.join(here, "..", "..", "build-gpu", "nj"))
    parser.add_argument("--data", default=os.path.join(here, "..", "..", "..", "shared", "data"))
    parser.add_argument("--work", default="gpu-check-data")
    parser.add_argument("--vertices", type=int, default=500000)
    parser.add_argument("--edges", type=int, default=5000000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--trace-epochs", type=int, default=10)
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--device", default="cuda", help="what is checked against the CPU and timed (cpu: a dry "
                        "run of this script on a machine without a GPU)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads per rank (0: OpenMP's default)")
    parser.add_argument("--csv", default="gpu_check.csv", help="the timing table as CSV")
    parser.add_argument("--time-limit", type=float, default=0, help="start no timed run after this many seconds "
                        "(0: no limit)")
    args = parser.parse_args()
    started = time.monotonic()
    # The GPU machines run everything as root, which mpirun refuses unless told.
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    os.makedirs(args.work, exist_ok=True)
    table = Table(args.csv, args)
    skipped = []

    def out_of_time(what):
        if args.time_limit > 0 and time.monotonic() - started > args.time_limit:
            skipped.append(what)
            return True
        return False

    # ---- CPU against GPU ----
    cora = os.path.join(args.work, "cora.h5")
    checked([args.nj, "convert", "--format", "plain", os.path.join(args.data, "cora"), "-o", cora], "converting Cora")
    small = os.path.join(args.work, "small.h5")
    checked([args.nj, "generate", "-o", small, "--vertices", "20000", "--edges", "200000", "--features", "64",
             "--classes", "8", "--seed", "3"], "generating the trace graph")
    worst = max(compare_traces(args, cora, "cora"), compare_traces(args, small, "generated"))
    if worst > 1e-4:
        sys.exit(f"gpu_check.py: CPU and GPU losses differ by {worst:.2e} relative, more than 1e-4")
    print(f"loss traces agree: largest relative difference {worst:.2e} (limit 1e-4)")

    # ---- timings ----
    graph = os.path.join(args.work, f"timed-{args.vertices}-{args.edges}.h5")
    if not os.path.exists(graph):
        checked([args.nj, "generate", "-o", graph, "--vertices", str(args.vertices), "--edges", str(args.edges),
                 "--features", "64", "--classes", "16", "--seed", "1"], "generating the timed graph")
    shards = os.path.join(args.work, f"timed-{args.vertices}-{args.edges}-2")
    if not os.path.exists(os.path.join(shards, "manifest.json")):
        checked([args.nj, "partition", graph, "--parts", "2", "--method", "metis", "-o", shards], "partitioning")
    for model in MODELS:
        for ranks in (1, 2):
            if out_of_time(f"{model} on {ranks} ranks"):
                continue
            dataset = graph if ranks == 1 else shards
            metrics = os.path.join(args.work, f"time-{model}-{ranks}-full.jsonl")
            code, output = train(args, ranks, dataset, model, "unlimited", metrics)
            if code != 0:
                sys.exit(f"gpu_check.py: {model} on {ranks} ranks without a budget failed:\n{output}")
            full = summarise(metrics)
            table.add(model, ranks, "100%", human(full["peak"]), "unlimited", full)
            for fraction in (0.25, 0.10):
                budget = int(full["peak"] * fraction)
                label = f"{int(fraction * 100)}%"
                if out_of_time(f"{model} on {ranks} ranks at {label}"):
                    continue
                metrics = os.path.join(args.work, f"time-{model}-{ranks}-{label}.jsonl")
                code, output = train(args, ranks, dataset, model, budget, metrics)
                least = minimum_budget(output) if code != 0 else None
                if least is not None:
                    label += "*"
                    code, output = train(args, ranks, dataset, model, least, metrics)
                if code != 0:
                    sys.exit(f"gpu_check.py: {model} on {ranks} ranks at {label} failed:\n{output}")
                table.add(model, ranks, label, least or human(budget), least or budget, summarise(metrics))

    print()
    print(f"{args.device} epochs: {args.vertices} vertices, {args.edges} edges, 64 features; reuse executor; "
          f"median of epochs 2..{args.epochs}")
    header = f"{'model':<5} {'ranks':>5} {'budget':>7} {'bytes':>9} {'epoch s':>8} {'rows h2d+d2h':>13} " \
             f"{'exchange':>9} {'copy s':>7} {'hidden':>7}"
    print(header)
    print("-" * len(header))
    for model, ranks, label, budget, r in table.rows:
        print(f"{model:<5} {ranks:>5} {label:>7} {budget:>9} {r['seconds']:>8.3f} {human(r['rows_bytes']):>13} "
              f"{human(r['exchange_bytes']):>9} {r['copy_seconds']:>7.3f} {100 * r['hidden']:>6.0f}%")
    print(f"table also in {os.path.abspath(args.csv)}")
    if skipped:
        sys.exit(f"gpu_check.py: the time limit ({args.time_limit:.0f} s) left out: {'; '.join(skipped)}")


if __name__ == "__main__":
    main()
