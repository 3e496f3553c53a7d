#!/usr/bin/env python3
"""Writes tests/fixtures/training_reference.h5: three Adam steps of PyG's GCN, GAT, GraphSAGE, GIN and APPNP, for
nj's Trainer to match.

Each case trains a two-layer model with PyG's GCNConv, GATConv, SAGEConv or GINConv (an MLP of two Linear layers
with ReLU between; ε fixed, and learnt in the case gin-train-eps), or PyG's APPNP example (a two-layer MLP, then
APPNP's propagation), from the same initial weights on a small graph with a few self-loops stored, dropout off, the
loss F.cross_entropy over the training vertices (the mean), and torch.optim.Adam with L2 weight decay on every
parameter or (GCN and GAT) on the first layer's only. It records each step's loss, every parameter's gradient and
every parameter after Adam's step. tests/train/test_training_reference.cpp
runs nj's Trainer (model, loss scaling and Adam) on it in memory, within a device budget and on two ranks.

Parameters are stored in nj's layout and under nj's names (layer<l>.weight as in x out, layer<l>.att_src and
att_dst as heads x channels, layer<l>.bias as 1 x out): PyG's Linear weights are transposed. nj numbers the model's
layers from 1 and names each parameter within its layer: GIN's layer l has layer<l>.eps (where learnt) and its MLP's
layer<l>.linear1 and layer<l>.linear2, APPNP's MLP layers are layer1 and layer2, and its propagation has no
parameters.

Not run by CI. Needs torch, torch_geometric and h5py (scripts/reference/README.md):
    python3 scripts/reference/training_reference.py tests/fixtures/training_reference.h5
"""
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import APPNP, GATConv, GCNConv, GINConv, SAGEConv

VERTICES, EDGES, FEATURES, CLASSES = 24, 70, 5, 3
HIDDEN, HEADS, OUTPUT_HEADS = 4, 2, 2
# Adam's eps is far above torch's default: some gradients are zero but for rounding (GAT's attention of a head
# whose logits all lie on one side of the leaky ReLU), and Adam scales a gradient far above eps to about lr,
# rounding included, so that the two sides' rounding would otherwise decide those weights' steps.
LR, EPS, DECAY, STEPS = 0.05, 1e-4, 0.01, 3
# GIN's eps, fixed or the learnt one's initial value (nonzero, so that the self term's factor is checked), and
# APPNP's K and alpha.
GIN_EPS, PROPAGATION_STEPS, TELEPORT = 0.25, 3, 0.1


def graph(rng):
    """Random directed edges without repeats, and self-loops stored on every fifth vertex."""
    pairs = set()
    while len(pairs) < EDGES:
        s, d = (int(x) for x in rng.integers(0, VERTICES, 2))
        if s != d:
            pairs.add((s, d))
    pairs |= {(v, v) for v in range(0, VERTICES, 5)}
    src, dst = zip(*sorted(pairs))
    return np.array(src, dtype=np.int32), np.array(dst, dtype=np.int32)


class Gcn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([GCNConv(FEATURES, HIDDEN), GCNConv(HIDDEN, CLASSES)])

    def forward(self, x, edge_index):
        return self.convs[1](F.relu(self.convs[0](x, edge_index)), edge_index)

    def nj_parameters(self):
        """nj's name, the PyG parameter, and how to turn one layout into the other."""
        for l, conv in enumerate(self.convs, start=1):
            yield f"layer{l}.weight", conv.lin.weight, lambda t: t.t()
            yield f"layer{l}.bias", conv.bias, lambda t: t.reshape(1, -1)


class Gat(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([
            GATConv(FEATURES, HIDDEN, heads=HEADS),
            GATConv(HEADS * HIDDEN, CLASSES, heads=OUTPUT_HEADS, concat=False)])

    def forward(self, x, edge_index):
        return self.convs[1](F.elu(self.convs[0](x, edge_index)), edge_index)

    def nj_parameters(self):
        for l, conv in enumerate(self.convs, start=1):
            yield f"layer{l}.weight", conv.lin.weight, lambda t: t.t()
            yield f"layer{l}.att_src", conv.att_src, lambda t: t.reshape(t.shape[1], t.shape[2])
            yield f"layer{l}.att_dst", conv.att_dst, lambda t: t.reshape(t.shape[1], t.shape[2])
            yield f"layer{l}.bias", conv.bias, lambda t: t.reshape(1, -1)


def linear(name, lin):
    """nj's weight and bias of a torch Linear."""
    yield f"{name}.weight", lin.weight, lambda t: t.t()
    yield f"{name}.bias", lin.bias, lambda t: t.reshape(1, -1)


class Sage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([SAGEConv(FEATURES, HIDDEN), SAGEConv(HIDDEN, CLASSES)])

    def forward(self, x, edge_index):
        return self.convs[1](F.relu(self.convs[0](x, edge_index)), edge_index)

    def nj_parameters(self):
        for l, conv in enumerate(self.convs, start=1):
            yield from linear(f"layer{l}", conv.lin_l)
            yield f"layer{l}.root_weight", conv.lin_r.weight, lambda t: t.t()


class Gin(torch.nn.Module):
    def __init__(self, train_eps=False):
        super().__init__()

        def mlp(out):
            return torch.nn.Sequential(torch.nn.Linear(self.width, HIDDEN), torch.nn.ReLU(),
                                       torch.nn.Linear(HIDDEN, out))

        self.width = FEATURES
        first = GINConv(mlp(HIDDEN), eps=GIN_EPS, train_eps=train_eps)
        self.width = HIDDEN
        self.convs = torch.nn.ModuleList([first, GINConv(mlp(CLASSES), eps=GIN_EPS, train_eps=train_eps)])

    def forward(self, x, edge_index):
        return self.convs[1](F.relu(self.convs[0](x, edge_index)), edge_index)

    def nj_parameters(self):
        for l, conv in enumerate(self.convs, start=1):
            yield from linear(f"layer{l}.linear1", conv.nn[0])
            if isinstance(conv.eps, torch.nn.Parameter):  # train_eps: nj's 1 x 1 layer<l>.eps
                yield f"layer{l}.eps", conv.eps, lambda t: t.reshape(1, 1)
            yield from linear(f"layer{l}.linear2", conv.nn[2])


class Appnp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Linear(HIDDEN, CLASSES)
        self.propagate = APPNP(K=PROPAGATION_STEPS, alpha=TELEPORT)
        self.convs = [self.lin1, self.lin2]

    def forward(self, x, edge_index):
        return self.propagate(self.lin2(F.relu(self.lin1(x))), edge_index)

    def nj_parameters(self):
        yield from linear("layer1", self.lin1)
        yield from linear("layer2", self.lin2)


def write(group, model, what):
    for name, p, to_nj in model.nj_parameters():
        tensor = p if what == "value" else p.grad
        group.create_dataset(name, data=to_nj(tensor.detach()).contiguous().numpy().astype(np.float32))


def main(path):
    rng = np.random.default_rng(7)
    src, dst = graph(rng)
    features = rng.standard_normal((VERTICES, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, VERTICES).astype(np.int32)
    train_mask = (rng.random(VERTICES) < 0.5).astype(np.uint8)
    edge_index = torch.tensor(np.stack([src, dst]), dtype=torch.long)
    x, y, mask = torch.from_numpy(features), torch.from_numpy(labels).long(), torch.from_numpy(train_mask).bool()
    with h5py.File(path, "w") as f:
        f.attrs["generator"] = f"scripts/reference/training_reference.py, torch {torch.__version__}"
        for key, value in {"hidden": HIDDEN, "heads": HEADS, "output_heads": OUTPUT_HEADS, "classes": CLASSES,
                           "steps": STEPS, "lr": LR, "eps": EPS, "weight_decay": DECAY, "gin_eps": GIN_EPS,
                           "propagation_steps": PROPAGATION_STEPS, "teleport": TELEPORT}.items():
            f.attrs[key] = value
        f["graph/src"], f["graph/dst"] = src, dst
        f["features"], f["labels"], f["train_mask"] = features, labels, train_mask
        models = (("gcn", Gcn), ("gat", Gat), ("sage", Sage), ("gin", Gin), ("gin-train-eps", lambda: Gin(True)),
                  ("appnp", Appnp))
        for kind, Model in models:
            for scope in ("all", "first") if kind in ("gcn", "gat") else ("all",):  # nj train --weight-decay-scope
                torch.manual_seed(3)
                model = Model()
                case = f.create_group(f"{kind}/{scope}")
                write(case.create_group("initial"), model, "value")
                first = list(model.convs[0].parameters())
                rest = [p for conv in model.convs[1:] for p in conv.parameters()]
                groups = [{"params": first, "weight_decay": DECAY},
                          {"params": rest, "weight_decay": DECAY if scope == "all" else 0.0}]
                optimizer = torch.optim.Adam(groups, lr=LR, eps=EPS, foreach=False)
                losses = []
                for step in range(STEPS):
                    optimizer.zero_grad()
                    loss = F.cross_entropy(model(x, edge_index)[mask], y[mask])
                    loss.backward()
                    write(case.create_group(f"step{step}/gradient"), model, "grad")
                    optimizer.step()
                    write(case.create_group(f"step{step}/after"), model, "value")
                    losses.append(loss.item())
                case["losses"] = np.array(losses, dtype=np.float64)


if __name__ == "__main__":
    main(sys.argv[1])
