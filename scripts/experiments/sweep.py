#!/usr/bin/python3
"""A scaling sweep: datasets × ranks × device budgets × cache policies × models, one CSV row per cell, and plots.

For each dataset and rank count it partitions the dataset with METIS (one part per rank; 1 rank trains on the
dataset itself) and runs the subgraph executor (`--execution reuse`) once without a budget: the largest rank's
device peak in that run is the need that the budgets are fractions of (--budgets, in percent; 100 is that
unlimited run). Each cell then trains --epochs epochs (the first is not timed) with `nj train` on this machine,
under `mpirun --oversubscribe` for several ranks, and appends a row to the CSV:

  dataset, ranks, model, policy, budget_percent, budget_bytes, note (e.g. "at its minimum 1.2M"), epoch_seconds,
  compute_seconds, copy_seconds, copy_wait_seconds, exchange_seconds, exchange_wait_seconds (the slowest rank's,
  median over epochs), transfer_bytes, other_transfer_bytes (rank 0's host-device bytes per epoch),
  exchange_bytes (all ranks), edge_cut, mirror_fraction, device_peak_bytes, host_peak_bytes, hit_rate, machine

The sweep is resumable: a cell already in the CSV is not run again (unless it failed), so an interrupted sweep
continues where it stopped. A progress line tells which cell runs and an estimate of the time left. Finally it draws, with
matplotlib, into --plots:

  scaling-<dataset>.png     epoch time and bytes exchanged against ranks (each policy, the middle budget)
  budget-<dataset>.png      bytes moved between host and device against budget, one line per policy (1 rank)
  phases.png                each dataset's epoch split into compute, copy wait, exchange wait and the rest,
                            per rank count (st-aware, the smallest budget)

Usage: scripts/experiments/sweep.py [--nj build/nj] [--data ../shared/data] [--work data/generated/sweep]
                                    [--datasets cora,slashdot,generated] [--ranks 1,2,4] [--budgets 100,25,10]
                                    [--policies st-aware,lru,fifo] [--models gcn] [--epochs 3] [--threads 1]
                                    [--csv data/generated/sweep/sweep.csv] [--plots docs/plots] [--plots-only]
"""
import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from nj_bench import figures, machine, minimum_budget, prepare_datasets, prepare_parts, train_run  # noqa: E402

MODELS = {
    "gcn": ["--model", "gcn", "--layers", "2", "--hidden", "128"],
    "gat": ["--model", "gat", "--layers", "2", "--hidden", "8", "--heads", "8"],
}
FIELDS = ["dataset", "ranks", "model", "policy", "budget_percent", "budget_bytes", "note", "epoch_seconds",
          "compute_seconds", "copy_seconds", "copy_wait_seconds", "exchange_seconds", "exchange_wait_seconds",
          "transfer_bytes", "other_transfer_bytes", "exchange_bytes", "edge_cut", "mirror_fraction",
          "device_peak_bytes", "host_peak_bytes", "hit_rate", "machine"]
KEY = ("dataset", "ranks", "model", "policy", "budget_percent")


def key_of(row):
    return tuple(str(row[k]) for k in KEY)


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class Progress:
    """One line per cell: which runs, how many are left, and the time left at the pace so far."""

    def __init__(self, total, done):
        self.total, self.done, self.ran, self.start = total, done, 0, time.monotonic()
        self.tty = sys.stdout.isatty()

    def show(self, what):
        left = ""
        if self.ran:
            seconds = (time.monotonic() - self.start) / self.ran * (self.total - self.done)
            left = f", about {seconds / 60:.0f} min left"
        line = f"[{self.done + 1}/{self.total}] {what}{left}"
        print(("\r\033[K" + line) if self.tty else line, end="" if self.tty else "\n", flush=True)

    def finished(self):
        self.done += 1
        self.ran += 1


def train_cell(args, source, ranks, model, policy, budget, metrics):
    train_args = [*MODELS[model], "--threads", str(args.threads), "--epochs", str(args.epochs), "--eval-every", "0",
                  "--execution", "reuse", "--cache-policy", policy, "--device-memory", str(budget)]
    records, error = train_run(args.nj, train_args, metrics, source, ranks, args.mpirun)
    return (figures(records), None) if records else (None, error)


def sweep(args):
    datasets = prepare_datasets(args.nj, args.data, args.work, args.datasets.split(","))
    ranks_list = [int(r) for r in args.ranks.split(",")]
    budgets = [int(b) for b in args.budgets.split(",")]
    policies = args.policies.split(",")
    models = args.models.split(",")
    rows = read_rows(args.csv)
    # Failed cells run again: their rows go, the others stay.
    if any(r["note"].startswith("failed") for r in rows):
        rows = [r for r in rows if not r["note"].startswith("failed")]
        with open(args.csv, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
    done = {key_of(r) for r in rows}
    cells = [(d, r, m, p, b) for d in datasets for r in ranks_list for m in models for p in policies for b in budgets]
    progress = Progress(len(cells), sum(1 for d, r, m, p, b in cells if (d, str(r), m, p, str(b)) in done))
    metrics = os.path.join(args.work, f"metrics-{os.getpid()}.jsonl")
    here = machine()
    new_file = not os.path.exists(args.csv)
    with open(args.csv, "a", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        if new_file:
            writer.writeheader()
        for name, path in datasets.items():
            for ranks in ranks_list:
                source = path if ranks == 1 else prepare_parts(args.nj, args.work, path, ranks)
                for model in models:
                    todo = [(p, b) for p in policies for b in budgets
                            if (name, str(ranks), model, p, str(b)) not in done]
                    if not todo:
                        continue
                    progress.show(f"{name}, {ranks} ranks, {model}: the unlimited run")
                    unlimited, error = train_cell(args, source, ranks, model, "st-aware", "unlimited", metrics)
                    if unlimited is None:
                        sys.exit(f"\n{name} on {ranks} ranks ({model}) without a budget failed: {error}")
                    need = unlimited["device_footprint_bytes"]
                    for policy, percent in todo:
                        progress.show(f"{name}, {ranks} ranks, {model}, {policy}, {percent}% budget")
                        budget = need * percent // 100
                        note = ""
                        result, error = (unlimited, None) if percent >= 100 and policy == "st-aware" else \
                            train_cell(args, source, ranks, model, policy, budget if percent < 100 else "unlimited",
                                       metrics)
                        # Below a rank's minimum: again at the minimum it names (another rank may name a larger one).
                        for _ in range(ranks):
                            if result is not None or not minimum_budget(error):
                                break
                            note = f"at its minimum {minimum_budget(error)}"
                            result, error = train_cell(args, source, ranks, model, policy, minimum_budget(error),
                                                       metrics)
                        if result is None:
                            note = f"failed: {error}"
                            result = {}
                        row = {"dataset": name, "ranks": ranks, "model": model, "policy": policy,
                               "budget_percent": percent, "budget_bytes": budget, "note": note, "machine": here}
                        row.update({k: result.get(k, "") for k in FIELDS if k not in row})
                        writer.writerow(row)
                        out.flush()
                        progress.finished()
    if os.path.exists(metrics):
        os.remove(metrics)
    print()


def number(row, field):
    return float(row[field]) if row[field] not in ("", None) else float("nan")


def plot(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_rows(args.csv) if not r["note"].startswith("failed")]
    if not rows:
        sys.exit(f"{args.csv}: no rows to plot")
    os.makedirs(args.plots, exist_ok=True)
    budgets = sorted({int(r["budget_percent"]) for r in rows}, reverse=True)
    middle = budgets[len(budgets) // 2]
    smallest = budgets[-1]
    written = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == dataset]
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        for policy in dict.fromkeys(r["policy"] for r in mine):
            line = sorted((int(r["ranks"]), r) for r in mine
                          if r["policy"] == policy and int(r["budget_percent"]) == middle)
            if not line:
                continue
            ranks = [x for x, _ in line]
            left.plot(ranks, [number(r, "epoch_seconds") for _, r in line], marker="o", label=policy)
            right.plot(ranks, [number(r, "exchange_bytes") / 2**20 for _, r in line], marker="o", label=policy)
        left.set(xlabel="ranks", ylabel="epoch seconds (median)", title=f"{dataset}: epoch time, {middle}% budget")
        right.set(xlabel="ranks", ylabel="MiB exchanged per epoch (all ranks)", title=f"{dataset}: boundary exchange")
        for axis in (left, right):
            axis.set_xticks(sorted({int(r["ranks"]) for r in mine}))
            axis.grid(alpha=0.3)
            axis.legend()
        fig.tight_layout()
        written.append(os.path.join(args.plots, f"scaling-{dataset}.png"))
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)

        fig, axis = plt.subplots(figsize=(5.5, 4))
        for policy in dict.fromkeys(r["policy"] for r in mine):
            line = sorted((int(r["budget_percent"]), r) for r in mine if r["policy"] == policy and r["ranks"] == "1")
            if line:
                axis.plot([x for x, _ in line], [number(r, "transfer_bytes") / 2**20 for _, r in line], marker="o",
                          label=policy)
        axis.set(xlabel="device budget (% of the unlimited run's need)", ylabel="MiB host↔device per epoch",
                 title=f"{dataset}: bytes moved against budget (1 rank)")
        axis.invert_xaxis()
        axis.grid(alpha=0.3)
        axis.legend()
        fig.tight_layout()
        written.append(os.path.join(args.plots, f"budget-{dataset}.png"))
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)

    bars = [r for r in rows if r["policy"] == "st-aware" and int(r["budget_percent"]) == smallest]
    bars.sort(key=lambda r: (r["dataset"], int(r["ranks"])))
    if bars:
        fig, axis = plt.subplots(figsize=(max(6.0, 0.7 * len(bars)), 4))
        labels = [f"{r['dataset']}\n{r['ranks']} r" for r in bars]
        bottom = [0.0] * len(bars)
        epoch = [number(r, "epoch_seconds") for r in bars]
        for field, label in (("compute_seconds", "compute"), ("copy_wait_seconds", "waiting for copies"),
                             ("exchange_wait_seconds", "waiting for the exchange")):
            values = [number(r, field) for r in bars]
            axis.bar(labels, values, bottom=bottom, label=label)
            bottom = [b + v for b, v in zip(bottom, values)]
        axis.bar(labels, [max(0.0, e - b) for e, b in zip(epoch, bottom)], bottom=bottom, label="the rest")
        axis.tick_params(axis="x", labelsize=7)
        axis.set(ylabel="seconds per epoch (slowest rank)",
                 title=f"Where an epoch goes (st-aware, {smallest}% budget)")
        axis.legend()
        fig.tight_layout()
        written.append(os.path.join(args.plots, "phases.png"))
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    print("plots: " + ", ".join(written))


def tables(args):
    """The CSV as Markdown: per dataset, epoch seconds and bytes for each rank count, budget and policy."""
    rows = [r for r in read_rows(args.csv) if not r["note"].startswith("failed")]
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        print(f"\n{dataset}: epoch s / MiB host-device (rank 0) / MiB exchanged (all ranks) per epoch")
        policies = list(dict.fromkeys(r["policy"] for r in rows))
        print("| ranks | budget | " + " | ".join(policies) + " |")
        print("|---|---|" + "---|" * len(policies))
        cells = {(r["ranks"], r["budget_percent"], r["policy"]): r for r in rows if r["dataset"] == dataset}
        order = sorted({(int(r["ranks"]), -int(r["budget_percent"])) for r in rows if r["dataset"] == dataset})
        for ranks, budget in ((str(r), str(-b)) for r, b in order):
            shown = []
            for policy in policies:
                r = cells.get((ranks, budget, policy))
                shown.append("-" if r is None else
                             f"{number(r, 'epoch_seconds'):.3f} / {number(r, 'transfer_bytes') / 2**20:,.0f} / "
                             f"{number(r, 'exchange_bytes') / 2**20:,.0f}{' *' if r['note'] else ''}")
            print(f"| {ranks} | {budget}% | " + " | ".join(shown) + " |")


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nj", default=os.path.join(root, "build/nj"))
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--data", default=os.environ.get("NJ_DATA_DIR", os.path.join(root, "../shared/data")))
    parser.add_argument("--work", default=os.path.join(root, "data/generated/sweep"))
    parser.add_argument("--datasets", default="cora,slashdot,generated")
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--budgets", default="100,25,10", help="percent of the unlimited run's device need")
    parser.add_argument("--policies", default="st-aware,lru,fifo")
    parser.add_argument("--models", default="gcn")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--csv", default=None, help="default: WORK/sweep.csv")
    parser.add_argument("--plots", default=None, help="default: WORK/plots")
    parser.add_argument("--plots-only", action="store_true", help="draw the plots and print the tables of a CSV")
    args = parser.parse_args()
    args.csv = args.csv or os.path.join(args.work, "sweep.csv")
    args.plots = args.plots or os.path.join(args.work, "plots")
    os.makedirs(args.work, exist_ok=True)
    if not args.plots_only:
        print(f"machine: {machine()}", flush=True)
        sweep(args)
    plot(args)
    tables(args)


if __name__ == "__main__":
    main()
