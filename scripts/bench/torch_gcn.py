#!/usr/bin/python3
"""Plain PyTorch full-batch GCN: the baseline of scripts/bench/gcn_vs_pytorch.sh.

Reads a NeutronJittor HDF5 dataset (see docs/dataset-format.md) and trains the
same model as `nj train --model gcn`: PyG GCNConv semantics (a self-loop added
to every vertex lacking one, symmetric normalisation w_ji = d_j^-1/2 d_i^-1/2
with degrees counted at the target including the self-loop), two layers

    dropout(0.5) -> X W1 -> A_hat . -> + b1 -> ReLU -> dropout(0.5) -> H W2 -> A_hat . -> + b2

Glorot weights, zero biases, Adam (lr 0.01, L2 weight decay 5e-4 on all
parameters), mean cross-entropy over the training vertices. A_hat is a
torch.sparse_csr_tensor of shape [N, N] whose rows are destinations.

Each timed epoch is forward + backward + optimizer.step (no evaluation),
measured with time.perf_counter after one untimed warm-up epoch.

Needs Debian's python3-torch, python3-h5py and python3-numpy: run it with
/usr/bin/python3, not a pyenv/virtualenv interpreter without them.
"""

import argparse
import json
import platform
import statistics
import sys
import time
import warnings

import h5py
import numpy as np
import torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="NeutronJittor HDF5 dataset file")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--epochs", type=int, default=10, help="timed epochs after one warm-up (default 10)")
    p.add_argument("--hidden", type=int, default=128, help="hidden width (default 128)")
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE", help="write the result as a JSON object to FILE")
    return p.parse_args()


def load(path):
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        indptr = np.asarray(f["/graph/indptr"][...], dtype=np.int64)
        indices = np.asarray(f["/graph/indices"][...], dtype=np.int64)
        features = np.asarray(f["/features"][...], dtype=np.float32)
        labels = np.asarray(f["/labels"][...], dtype=np.int64)
        train = np.asarray(f["/masks/train"][...]).astype(bool)
        if "num_classes" in f.attrs:
            num_classes = int(f.attrs["num_classes"])
        else:
            num_classes = int(labels.max()) + 1
    return indptr, indices, features, labels, train, num_classes, time.perf_counter() - t0


def gcn_norm_csr(indptr, indices, n):
    """A_hat with PyG GCNConv semantics as a CSR tensor, rows = destinations.

    indptr/indices: in-edge CSR (row v lists the sources of the edges into v).
    A self-loop (weight 1) is added to every vertex that lacks one; an existing
    self-loop is kept once per occurrence, as PyG's add_remaining_self_loops
    keeps the existing ones (the generator removes them anyway).
    """
    counts = np.diff(indptr)
    dst = np.repeat(np.arange(n, dtype=np.int64), counts)
    has_loop = np.zeros(n, dtype=bool)
    has_loop[dst[indices == dst]] = True
    missing = np.nonzero(~has_loop)[0]
    rows = np.concatenate([dst, missing])
    cols = np.concatenate([indices, missing])
    order = np.lexsort((cols, rows))  # row-major, columns sorted within a row
    rows, cols = rows[order], cols[order]
    deg = np.bincount(rows, minlength=n).astype(np.float64)  # in-degree at the target incl. self-loop
    dinv = np.where(deg > 0, deg ** -0.5, 0.0)
    vals = (dinv[cols] * dinv[rows]).astype(np.float32)
    crow = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=crow[1:])
    return torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(cols), torch.from_numpy(vals),
                                   size=(n, n))


class GCN(torch.nn.Module):
    def __init__(self, in_dim, hidden, out_dim, dropout):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.empty(in_dim, hidden))
        self.b1 = torch.nn.Parameter(torch.zeros(hidden))
        self.w2 = torch.nn.Parameter(torch.empty(hidden, out_dim))
        self.b2 = torch.nn.Parameter(torch.zeros(out_dim))
        torch.nn.init.xavier_uniform_(self.w1)
        torch.nn.init.xavier_uniform_(self.w2)
        self.dropout = dropout

    def forward(self, a_hat, x):
        x = torch.nn.functional.dropout(x, self.dropout, self.training)
        h = torch.sparse.mm(a_hat, x @ self.w1) + self.b1
        h = torch.relu(h)
        h = torch.nn.functional.dropout(h, self.dropout, self.training)
        return torch.sparse.mm(a_hat, h @ self.w2) + self.b2


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    torch.manual_seed(args.seed)

    indptr, indices, features, labels, train_mask, num_classes, load_s = load(args.dataset)
    n, f = features.shape
    t0 = time.perf_counter()
    a_hat = gcn_norm_csr(indptr, indices, n)
    norm_s = time.perf_counter() - t0
    x = torch.from_numpy(features)
    y = torch.from_numpy(labels)
    train_idx = torch.from_numpy(np.nonzero(train_mask)[0])
    y_train = y[train_idx]
    print(f"dataset {args.dataset}: {n} vertices, {len(indices)} edges ({a_hat.values().numel()} with self-loops), "
          f"{f} features, {num_classes} classes, {train_idx.numel()} train (load {load_s:.2f} s, norm {norm_s:.2f} s)")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, python {platform.python_version()}")

    model = GCN(f, args.hidden, num_classes, args.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    model.train()

    def epoch():
        opt.zero_grad(set_to_none=True)
        out = model(a_hat, x)
        loss = torch.nn.functional.cross_entropy(out[train_idx], y_train)
        loss.backward()
        opt.step()
        return loss.item()

    t0 = time.perf_counter()
    loss = epoch()
    print(f"warm-up epoch: {time.perf_counter() - t0:.3f} s, loss {loss:.4f}")
    times = []
    for e in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        loss = epoch()
        dt = time.perf_counter() - t0
        times.append(dt)
        print(f"epoch {e:3d}: {dt:.3f} s, loss {loss:.4f}", flush=True)
    median = statistics.median(times)
    print(f"median epoch: {median:.3f} s over {len(times)} epochs (min {min(times):.3f}, max {max(times):.3f})")
    print(f"final training loss: {loss:.4f}")

    if args.json:
        result = {
            "system": "pytorch",
            "torch_version": torch.__version__,
            "threads": args.threads,
            "vertices": int(n),
            "edges": int(len(indices)),
            "nnz_with_self_loops": int(a_hat.values().numel()),
            "features": int(f),
            "classes": int(num_classes),
            "hidden": args.hidden,
            "epochs": args.epochs,
            "epoch_seconds": times,
            "median_epoch_seconds": median,
            "final_loss": loss,
        }
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
