#!/usr/bin/python3
"""Accuracy side by side: nj's GraphSAGE, GIN and APPNP against PyG's, on the same dataset files and settings.

A benchmark, not a test. For each dataset, model and seed it trains nj (`nj train`) and PyG (SAGEConv, GINConv with
a Linear-ReLU-Linear MLP, or Linear-ReLU-Linear then APPNP) with the same settings: 2 layers, hidden 64, dropout 0.5
on each weighted layer's input, ReLU, Adam lr 0.01 and weight decay 5e-4 on every parameter, 200 epochs, row-
normalised features, the datasets' own splits; GIN's eps 0, APPNP's K 10 and alpha 0.1 (PyG's citation example's
APPNP settings, used for all three). Each run reports the test accuracy at its best validation epoch; the table gives
the mean and standard deviation over the seeds and nj's mean minus PyG's in points.

PyG runs in a virtual environment given by --python (torch and torch_geometric; scripts/reference/README.md makes
one); never a test dependency.

Usage (from the repository root):
  scripts/bench/model_accuracy.py --nj build/nj --python /tmp/nj-reference/bin/python \\
      --dataset cora=cora.h5 --dataset citeseer=citeseer.h5 --seeds 5
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nj_bench  # noqa: E402  (standard library only)

MODELS = ["sage", "gin", "appnp"]
SETTINGS = {"layers": 2, "hidden": 64, "dropout": 0.5, "lr": 0.01, "weight_decay": 5e-4, "epochs": 200,
            "gin_eps": 0.0, "propagation_steps": 10, "teleport": 0.1}


def nj_accuracy(nj, dataset, model, seed, threads, work):
    metrics = os.path.join(work, f"nj-{model}-{seed}.jsonl")
    s = SETTINGS
    cmd = [nj, "train", dataset, "--model", model, "--layers", str(s["layers"]), "--hidden", str(s["hidden"]),
           "--dropout", str(s["dropout"]), "--lr", str(s["lr"]), "--weight-decay", str(s["weight_decay"]),
           "--epochs", str(s["epochs"]), "--eval-every", "1", "--feature-norm", "row", "--seed", str(seed),
           "--gin-eps", str(s["gin_eps"]), "--propagation-steps", str(s["propagation_steps"]),
           "--teleport", str(s["teleport"]), "--activation", "relu", "--threads", str(threads),
           "--execution", "in-memory", "--log-level", "warn", "--metrics-out", metrics]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(metrics) as f:
        summary = [json.loads(line) for line in f][-1]
    return summary["best_val"]["test"]


def pyg_worker(args):
    """Runs inside the PyG venv: one model, one seed; prints the test accuracy at the best validation epoch."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import APPNP, GINConv, SAGEConv

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = nj_bench.DatasetFile(args.dataset)
    n, width = data.features.shape
    classes = data.classes
    labels = torch.from_numpy(data.labels)
    masks = {name: torch.from_numpy(mask) for name, mask in data.masks.items()}
    sums = data.features.sum(axis=1, keepdims=True)
    x = torch.from_numpy(np.divide(data.features, sums, out=np.zeros_like(data.features), where=sums != 0))
    edge_index = torch.from_numpy(np.stack([data.indices, data.dst]))  # messages flow source -> target
    s = SETTINGS
    hidden, p = s["hidden"], s["dropout"]

    def mlp(a, b, c):
        return torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(), torch.nn.Linear(b, c))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            if args.model == "sage":
                self.convs = torch.nn.ModuleList([SAGEConv(width, hidden), SAGEConv(hidden, classes)])
            elif args.model == "gin":
                self.convs = torch.nn.ModuleList([GINConv(mlp(width, hidden, hidden), eps=s["gin_eps"]),
                                                  GINConv(mlp(hidden, hidden, classes), eps=s["gin_eps"])])
            else:
                self.lin1, self.lin2 = torch.nn.Linear(width, hidden), torch.nn.Linear(hidden, classes)
                self.prop = APPNP(K=s["propagation_steps"], alpha=s["teleport"])

        def forward(self):
            if args.model == "appnp":
                h = F.relu(self.lin1(F.dropout(x, p, self.training)))
                return self.prop(self.lin2(F.dropout(h, p, self.training)), edge_index)
            h = F.relu(self.convs[0](F.dropout(x, p, self.training), edge_index))
            return self.convs[1](F.dropout(h, p, self.training), edge_index)

    net = Net()
    optimizer = torch.optim.Adam(net.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    best_val, best_test = -1.0, 0.0
    for _ in range(s["epochs"]):
        net.train()
        optimizer.zero_grad()
        F.cross_entropy(net()[masks["train"]], labels[masks["train"]]).backward()
        optimizer.step()
        net.eval()
        with torch.no_grad():
            predicted = net().argmax(dim=1)
        val = (predicted[masks["val"]] == labels[masks["val"]]).float().mean().item()
        test = (predicted[masks["test"]] == labels[masks["test"]]).float().mean().item()
        if val > best_val:
            best_val, best_test = val, test
    print(best_test)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nj", default="build/nj")
    parser.add_argument("--python", help="the PyG virtual environment's python (required)")
    parser.add_argument("--dataset", action="append", required=True, help="NAME=FILE.h5 (repeatable)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.dataset = args.dataset[0]
        pyg_worker(args)
        return
    if not args.python:
        parser.error("--python is required: the PyG virtual environment's python")
    print(nj_bench.machine())
    print(f"settings: {SETTINGS}, {args.seeds} seeds, {args.threads} threads")
    print(f"{'dataset':<10} {'model':<6} {'nj test %':>16} {'PyG test %':>16} {'nj - PyG':>9}")
    with tempfile.TemporaryDirectory() as work:
        for entry in args.dataset:
            name, path = entry.split("=", 1)
            for model in args.models.split(","):
                ours, theirs = [], []
                for seed in range(args.seeds):
                    ours.append(100 * nj_accuracy(args.nj, path, model, seed, args.threads, work))
                    out = subprocess.run([args.python, os.path.abspath(__file__), "--worker", "--dataset", path,
                                          "--model", model, "--seed", str(seed), "--threads", str(args.threads)],
                                         check=True, capture_output=True, text=True)
                    theirs.append(100 * float(out.stdout.strip().split("\n")[-1]))
                row = [f"{statistics.mean(v):.2f} ± {statistics.stdev(v) if len(v) > 1 else 0:.2f}"
                       for v in (ours, theirs)]
                print(f"{name:<10} {model:<6} {row[0]:>16} {row[1]:>16} "
                      f"{statistics.mean(ours) - statistics.mean(theirs):>+9.2f}", flush=True)


if __name__ == "__main__":
    main()
