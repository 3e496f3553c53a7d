#!/usr/bin/python3
"""Side by side on one machine, in one run: nj against DGL and PyG, GCN to APPNP, on one dataset file.

A benchmark, not a test. It runs, with the same thread count and on the same HDF5 dataset file:

  nj-in-memory   nj train --execution in-memory (plain full-graph training)
  nj-reuse       nj train --execution reuse: the subgraph executor on the emulated device, unlimited budget
                 (the executor every --device-memory run uses; plain `nj train` without a budget runs in memory)
  dgl            DGL GraphConv / GATConv / SAGEConv / GINConv / APPNPConv, from PyPI in a virtual environment
                 (torch 2.2.1, dgl 2.1.0)
  pyg            PyG GCNConv / GATConv / SAGEConv / GINConv / APPNP on an edge_index, in a second virtual
                 environment (torch 2.15.0 and torch_geometric 2.8.1)
  pyg-csr        (not run by default) PyG's convs on a torch.sparse CSR adjacency (adj_t), same venv as pyg

and prints one table: system, model, median seconds per epoch, and the ratio to DGL and to nj in memory, with
the CPU model and its SIMD flags. Models (the same in every system, nj's defaults otherwise):
  GCN  2 layers, hidden 128, ReLU, dropout 0.5 on each layer's input, symmetric normalisation with one
       self-loop per vertex (DGL GraphConv norm='both'; PyG GCNConv cached=True, i.e. normalised once,
       as nj and DGL do not redo it per epoch either)
  GAT  2 layers, hidden 8 x 8 heads (concatenated), ELU, one output head, dropout 0.5 on each layer's input,
       attention dropout 0.6, one self-loop per vertex
  SAGE 2 layers of mean aggregation with a root weight, hidden 128, ReLU, dropout 0.5 on each layer's input,
       the graph as stored (DGL SAGEConv 'mean', PyG SAGEConv)
  GIN  2 GIN layers, each a sum with eps 0 (fixed) and an MLP Linear, ReLU, Linear of hidden 128, ReLU between
       them, dropout 0.5 on each GIN layer's input, the graph as stored (DGL GINConv 'sum', PyG GINConv)
  APPNP an MLP of 2 Linear layers, hidden 128, ReLU, dropout 0.5 on each one's input, then 10 propagation steps
       with teleport 0.1 over the GCN-normalised graph with one self-loop per vertex (DGL APPNPConv(10, 0.1) on
       the graph with its self-loops, PyG APPNP(K=10, alpha=0.1, cached=True))
An epoch is forward, backward and Adam (lr 0.01, weight decay 5e-4) over the whole graph, loss on the training
vertices, no evaluation; the median is taken over the epochs after the warm-up.

Baselines run in their own virtual environments (never a test dependency, never in the repository): by default
data/venvs/dgl and data/venvs/pyg (git-ignored), made with --make-venv from PyPI. A baseline whose venv is
missing or does not import is skipped with the reason; the rest still runs.

Usage (from the repository root; /usr/bin/python3 needs nothing beyond the standard library here):
  scripts/bench/side_by_side.py --make-venv --systems dgl,pyg --check      # make the venvs, check imports
  scripts/bench/side_by_side.py --dataset gen200k                          # the 200k-vertex generated graph
  scripts/bench/side_by_side.py --dataset slashdot                         # Slashdot, 128 random features
  scripts/bench/side_by_side.py --dataset path/to/file.h5 --models gcn --epochs 5 --threads 2
  scripts/bench/side_by_side.py --dataset gen20k --epochs 2 --warmup 1     # a smoke run (seconds)
  scripts/bench/side_by_side.py --venv dgl=/opt/dgl-venv --venv pyg=/opt/pyg-venv ...
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import nj_bench  # noqa: E402  (standard library only)

SYSTEMS = ["nj-in-memory", "nj-reuse", "dgl", "pyg", "pyg-csr"]
DEFAULT_SYSTEMS = ["nj-in-memory", "nj-reuse", "dgl", "pyg"]
MODELS = ["gcn", "gat", "sage", "gin", "appnp"]

# Which venv each baseline runs in, and what --make-venv installs there (from PyPI). DGL 2.1.0's wheel ships its
# graphbolt library for torch 2.0.0-2.2.1 only (`import dgl` fails on torch 2.2.2); torchdata 0.8+ dropped the
# datapipes graphbolt imports; graphbolt also imports pandas and pydantic without declaring them; torch 2.2 is
# built against NumPy 1.x.
VENV_OF = {"dgl": "dgl", "pyg": "pyg", "pyg-csr": "pyg"}
VENV_PACKAGES = {
    "dgl": ["torch==2.2.1", "dgl==2.1.0", "torchdata==0.7.1", "numpy<2", "pandas<3", "pydantic", "pyyaml", "h5py"],
    "pyg": ["torch==2.15.0", "torch_geometric==2.8.1", "numpy", "h5py"],
}
VENV_CHECK = {
    "dgl": "import torch, dgl; from dgl.nn import GraphConv, GATConv, SAGEConv, GINConv, APPNPConv; "
           "print('torch', torch.__version__, 'dgl', dgl.__version__)",
    "pyg": "import torch, torch_geometric; from torch_geometric.nn import GCNConv, GATConv, SAGEConv, GINConv, APPNP; "
           "print('torch', torch.__version__, 'torch_geometric', torch_geometric.__version__)",
}


def dataset_recipes(nj, data):
    """Named datasets: the 200k-vertex generated graph (the file scripts/bench/gcn_vs_pytorch.sh makes),
    Slashdot with 128 random features and Cora (as nj_bench makes them), and a 20k-vertex graph for smoke runs."""
    shared = nj_bench.dataset_recipes(nj, data)
    return {
        "gen200k": ("bench-200k.h5", [nj, "generate", "--vertices", "200000", "--edges", "4200000", "--features", "128",
                                      "--classes", "40", "--seed", "1"]),
        "slashdot": ("slashdot.h5", shared["slashdot"]),
        "cora": ("cora.h5", shared["cora"]),
        "gen20k": ("gen20k.h5", [nj, "generate", "--vertices", "20000", "--edges", "200000", "--features", "128",
                                 "--classes", "40", "--seed", "1"]),
    }


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="gen200k",
                   help="an HDF5 dataset file, or a name made in --work: gen200k, slashdot, cora, gen20k (default gen200k)")
    p.add_argument("--models", default="gcn,gat", help=f"any of {','.join(MODELS)} (default gcn,gat)")
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                   help=f"any of {','.join(SYSTEMS)} (default {','.join(DEFAULT_SYSTEMS)})")
    p.add_argument("--epochs", type=int, default=10, help="timed epochs per run, after the warm-up (default 10)")
    p.add_argument("--warmup", type=int, default=1, help="untimed epochs first (default 1)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every (system, model) this many times, interleaved; the table gives the median of "
                        "the rounds' medians (default 1)")
    p.add_argument("--threads", type=int, default=2, help="threads of every system (default 2)")
    p.add_argument("--nj-args", default="", metavar="FLAGS",
                   help="more `nj train` flags for both nj runs, one string: --nj-args=\"--cache-policy lru\"")
    p.add_argument("--nj", default=None, help="the nj binary (default build/nj, else build-bench/nj)")
    p.add_argument("--data", default=os.environ.get("NJ_DATA_DIR", os.path.join(ROOT, "../shared/data")),
                   help="the shared real datasets (default ../shared/data or NJ_DATA_DIR)")
    p.add_argument("--work", default=os.path.join(ROOT, "data/generated/side-by-side"),
                   help="where named datasets are made (default data/generated/side-by-side, git-ignored)")
    p.add_argument("--venv-root", default=os.path.join(ROOT, "data/venvs"),
                   help="where the baselines' venvs are, as <root>/dgl and <root>/pyg (default data/venvs, git-ignored)")
    p.add_argument("--venv", action="append", default=[], metavar="[SYSTEM=]DIR",
                   help="use this venv for SYSTEM (dgl, pyg, pyg-csr), or for every baseline without SYSTEM=; repeatable")
    p.add_argument("--make-venv", action="store_true",
                   help="create each needed baseline venv that is missing or does not import, and pip install its "
                        "pinned packages from PyPI into it")
    p.add_argument("--check", action="store_true", help="only check (and with --make-venv make) the venvs, run nothing")
    p.add_argument("--python", default="/usr/bin/python3", help="the interpreter --make-venv makes venvs with")
    p.add_argument("--json", metavar="FILE", help="also write every run's result to FILE")
    p.add_argument("--worker", choices=["dgl", "pyg", "pyg-csr"], help=argparse.SUPPRESS)
    p.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help="seed of weights and dropout in every system (default 0)")
    args = p.parse_args(argv)
    if args.worker:
        return args
    args.models = [m for m in args.models.split(",") if m]
    args.systems = [s for s in args.systems.split(",") if s]
    for m in args.models:
        if m not in MODELS:
            p.error(f"unknown model {m!r} ({', '.join(MODELS)})")
    for s in args.systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r} ({', '.join(SYSTEMS)})")
    if args.epochs < 1 or args.warmup < 0 or args.rounds < 1 or args.threads < 1:
        p.error("--epochs, --rounds and --threads must be at least 1, --warmup at least 0")
    return args


# ---------------------------------------------------------------------------------------------------------------
# The baselines: this same file, run by the venv's interpreter with --worker. Prints one line "RESULT {json}".

def worker(args):
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import warnings
    import numpy as np
    import torch
    import torch.nn.functional as F

    warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = nj_bench.DatasetFile(args.dataset)
    indptr, indices, dst, features, labels = data.indptr, data.indices, data.dst, data.features, data.labels
    train, classes = data.masks["train"], data.classes
    n, width = features.shape
    x = torch.from_numpy(features)
    train_idx = torch.from_numpy(np.nonzero(train)[0])
    y_train = torch.from_numpy(labels)[train_idx]
    hidden, heads, dropout, attn_dropout = (8, 8, 0.5, 0.6) if args.model == "gat" else (128, 1, 0.5, 0.6)
    teleport, steps = 0.1, 10

    def mlp(inputs, outputs):  # GIN's
        return torch.nn.Sequential(torch.nn.Linear(inputs, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, outputs))

    # layers: the modules that take dropped-out rows, each called as call(layer, h); then propagate(h).
    propagate = None
    if args.worker == "dgl":
        import dgl
        from dgl.nn import APPNPConv, GATConv, GINConv, GraphConv, SAGEConv
        version = f"DGL {dgl.__version__} (torch {torch.__version__})"
        stored = dgl.graph((torch.from_numpy(indices), torch.from_numpy(dst)), num_nodes=n)
        # GCN, GAT and APPNP: one self-loop per vertex, as nj; SAGE and GIN: the graph as stored, as nj.
        g = dgl.add_self_loop(dgl.remove_self_loop(stored)) if args.model in ("gcn", "gat", "appnp") else stored
        g.create_formats_()
        graph = g
        if args.model == "gcn":
            conv = "GraphConv"
            layers = [GraphConv(width, hidden, norm="both"), GraphConv(hidden, classes, norm="both")]
        elif args.model == "gat":
            conv = "GATConv"
            layers = [GATConv(width, hidden, heads, attn_drop=attn_dropout, negative_slope=0.2),
                      GATConv(hidden * heads, classes, 1, attn_drop=attn_dropout, negative_slope=0.2)]
        elif args.model == "sage":
            conv = "SAGEConv('mean')"
            layers = [SAGEConv(width, hidden, "mean"), SAGEConv(hidden, classes, "mean")]
        elif args.model == "gin":
            conv = "GINConv('sum') with an MLP"
            layers = [GINConv(mlp(width, hidden), "sum"), GINConv(mlp(hidden, classes), "sum")]
        else:
            conv = f"Linear x2, APPNPConv(k={steps}, alpha={teleport})"
            layers = [torch.nn.Linear(width, hidden), torch.nn.Linear(hidden, classes)]
            appnp = APPNPConv(steps, teleport)

            def propagate(h):
                return appnp(graph, h)

        def conv_call(layer, h):
            return layer(h) if isinstance(layer, torch.nn.Linear) else layer(graph, h)
    else:
        import torch_geometric
        from torch_geometric.nn import APPNP, GATConv, GCNConv, GINConv, SAGEConv
        version = f"PyG {torch_geometric.__version__} (torch {torch.__version__})"
        if args.worker == "pyg":
            graph = torch.from_numpy(np.stack([indices, dst]))  # edge_index, messages flow source -> target
        else:
            # adj_t[target, source]: the in-edge CSR as it is.
            graph = torch.sparse_csr_tensor(torch.from_numpy(indptr), torch.from_numpy(indices),
                                            torch.ones(len(indices)), size=(n, n))
        if args.model == "gcn":
            conv = "GCNConv"
            layers = [GCNConv(width, hidden, cached=True), GCNConv(hidden, classes, cached=True)]
        elif args.model == "gat":
            conv = "GATConv"
            layers = [GATConv(width, hidden, heads=heads, dropout=attn_dropout),
                      GATConv(hidden * heads, classes, heads=1, concat=False, dropout=attn_dropout)]
        elif args.model == "sage":
            conv = "SAGEConv (mean)"
            layers = [SAGEConv(width, hidden), SAGEConv(hidden, classes)]
        elif args.model == "gin":
            conv = "GINConv with an MLP"
            layers = [GINConv(mlp(width, hidden)), GINConv(mlp(hidden, classes))]
        else:
            conv = f"Linear x2, APPNP(K={steps}, alpha={teleport}, cached=True)"
            layers = [torch.nn.Linear(width, hidden), torch.nn.Linear(hidden, classes)]
            appnp = APPNP(K=steps, alpha=teleport, cached=True)

            def propagate(h):
                return appnp(h, graph)

        def conv_call(layer, h):
            return layer(h) if isinstance(layer, torch.nn.Linear) else layer(h, graph)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(layers)

        def forward(self, h):
            for i, layer in enumerate(self.layers):
                h = F.dropout(h, dropout, self.training)
                h = conv_call(layer, h)
                h = h.flatten(1) if h.dim() == 3 and i + 1 < len(self.layers) else h
                if h.dim() == 3:
                    h = h.mean(1)  # DGL's output heads, averaged
                if i + 1 < len(self.layers):
                    h = F.elu(h) if args.model == "gat" else F.relu(h)
            return propagate(h) if propagate else h

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    model.train()

    def epoch():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x)[train_idx], y_train)
        loss.backward()
        opt.step()
        return loss.item()

    times, losses = [], []
    for e in range(args.warmup + args.epochs):
        t0 = time.perf_counter()
        losses.append(epoch())
        if e >= args.warmup:
            times.append(time.perf_counter() - t0)
    on = {"dgl": "", "pyg": " on edge_index", "pyg-csr": " on adj_t (torch.sparse CSR)"}[args.worker]
    print("RESULT " + json.dumps({"label": f"{version} {conv}{on}", "epoch_seconds": times,
                                  "median": statistics.median(times), "loss": losses[-1], "threads": torch.get_num_threads()}),
          flush=True)
    return 0


# ---------------------------------------------------------------------------------------------------------------
# The driver.

def thread_env(threads):
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                MKL_NUM_THREADS=str(threads), DGLBACKEND="pytorch")


def last_line(text):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def venv_dirs(args):
    """The venv folder of each baseline system: --venv SYSTEM=DIR, else a bare --venv DIR, else <venv-root>/<venv>."""
    given, every = {}, None
    for item in args.venv:
        system, sep, folder = item.partition("=")
        if sep and system in VENV_OF:
            given[system] = folder
        else:
            every = item
    dirs = {}
    for system, venv in VENV_OF.items():
        dirs[system] = os.path.abspath(given.get(system) or given.get(venv) or every or os.path.join(args.venv_root, venv))
    return dirs


def venv_python(folder):
    return next((p for p in (os.path.join(folder, "bin", name) for name in ("python", "python3")) if os.path.exists(p)),
                os.path.join(folder, "bin", "python"))


def check_venv(folder, venv):
    """(None, versions) where the venv imports its baseline, else (reason, None)."""
    python = venv_python(folder)
    if not os.path.exists(python):
        return f"no virtual environment at {folder} (make it with --make-venv, or give one with --venv)", None
    check = subprocess.run([python, "-W", "ignore", "-c", VENV_CHECK[venv]], capture_output=True, text=True,
                           env=thread_env(1))
    if check.returncode != 0:
        return f"the venv at {folder} does not import it: {last_line(check.stderr + check.stdout)}", None
    return None, last_line(check.stdout)


def make_venv(folder, venv, python):
    print(f"== making the {venv} venv at {folder}: pip install {' '.join(VENV_PACKAGES[venv])}", flush=True)
    if not os.path.exists(os.path.join(folder, "pyvenv.cfg")):
        # Never turn a folder that is not a venv into one (say --venv /usr).
        if os.path.exists(folder) and os.listdir(folder):
            return f"{folder} is neither a virtual environment nor empty: not making one there"
        code, out = nj_bench.run([python, "-m", "venv", folder])
        if code != 0:
            return f"{python} -m venv {folder} failed: {last_line(out)}"
    pip = [os.path.join(folder, "bin", "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    code = subprocess.call(pip + VENV_PACKAGES[venv])
    return None if code == 0 else f"pip install into {folder} failed (exit {code})"


def prepare_dataset(args, nj):
    if os.path.exists(args.dataset) or args.dataset.endswith(".h5"):
        if not os.path.exists(args.dataset):
            sys.exit(f"error: no dataset file {args.dataset}")
        return os.path.abspath(args.dataset)
    recipes = dataset_recipes(nj, args.data)
    if args.dataset not in recipes:
        sys.exit(f"error: {args.dataset!r} is neither a file nor one of {', '.join(recipes)}")
    name, recipe = recipes[args.dataset]
    path = os.path.join(args.work, name)
    if not os.path.exists(path):
        os.makedirs(args.work, exist_ok=True)
        print(f"== making {path}: {' '.join(recipe[1:])}", flush=True)
        code, out = nj_bench.run(recipe + ["--output", path])
        if code != 0:
            sys.exit(f"error: making {args.dataset} failed: {last_line(out)}")
    return path


def nj_train_args(model, execution, args):
    common = ["--layers", "2", "--dropout", "0.5", "--lr", "0.01", "--weight-decay", "0.0005",
              "--seed", str(args.seed), "--threads", str(args.threads), "--epochs", str(args.warmup + args.epochs),
              "--eval-every", "0", "--execution", execution]
    if model in ("gcn", "sage"):
        return ["--model", model, "--hidden", "128", "--activation", "relu"] + common
    if model == "gin":
        return ["--model", "gin", "--hidden", "128", "--activation", "relu", "--gin-eps", "0"] + common
    if model == "appnp":
        return ["--model", "appnp", "--hidden", "128", "--activation", "relu", "--propagation-steps", "10",
                "--teleport", "0.1"] + common
    return ["--model", "gat", "--hidden", "8", "--heads", "8", "--output-heads", "1", "--activation", "elu",
            "--attention-dropout", "0.6"] + common


def run_nj(nj, system, model, dataset, args):
    execution = "in-memory" if system == "nj-in-memory" else "reuse"
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [nj, "--log-level", "warn", "train", *nj_train_args(model, execution, args), *args.nj_args.split(),
               "--metrics-out", metrics, dataset]
        code, out = nj_bench.run(cmd, thread_env(args.threads))
        if code != 0:
            return {"error": f"nj failed: {last_line(out)}"}
        with open(metrics) as f:
            records = [json.loads(line) for line in f if line.strip()]
    epochs = [r for r in records if r.get("type") == "epoch"][args.warmup:]
    if not epochs:
        return {"error": "nj wrote no epoch records"}
    times = [r["epoch_seconds"] for r in epochs]
    label = ("nj train --execution in-memory" if execution == "in-memory"
             else "nj train --execution reuse (subgraph executor, unlimited budget)")
    return {"label": label, "epoch_seconds": times, "median": statistics.median(times), "loss": epochs[-1].get("loss")}


def run_baseline(system, model, dataset, args, venvs):
    python = venv_python(venvs[system])
    cmd = [python, "-W", "ignore::FutureWarning", os.path.abspath(__file__), "--worker", system, "--model", model, "--dataset", dataset,
           "--threads", str(args.threads), "--epochs", str(args.epochs), "--warmup", str(args.warmup),
           "--seed", str(args.seed)]
    code, out = nj_bench.run(cmd, thread_env(args.threads))
    results = [line[len("RESULT "):] for line in out.splitlines() if line.startswith("RESULT ")]
    if code != 0 or not results:
        return {"error": f"{system} failed: {last_line(out)}"}
    return json.loads(results[-1])


def fmt_ratio(value, reference):
    return f"{value / reference:.2f}x" if value is not None and reference else "-"


def main(argv):
    args = parse_args(argv)
    if args.worker:
        return worker(args)

    venvs = venv_dirs(args)
    baselines = [s for s in args.systems if s in VENV_OF]
    skipped = {}  # system -> reason
    versions = {}
    for venv in sorted({VENV_OF[s] for s in baselines}):
        users = [s for s in baselines if VENV_OF[s] == venv]
        folder = venvs[users[0]]
        reason, version = check_venv(folder, venv)
        if reason and args.make_venv:
            failed = make_venv(folder, venv, args.python)
            reason, version = (failed, None) if failed else check_venv(folder, venv)
        for s in users:
            if reason:
                skipped[s] = reason
            else:
                versions[s] = version
    for s in baselines:
        print(f"{s}: " + (f"skipped: {skipped[s]}" if s in skipped else f"{versions[s]} ({venvs[s]})"), flush=True)
    if args.check:
        return 1 if skipped else 0

    nj = args.nj or next((p for p in (os.path.join(ROOT, "build/nj"), os.path.join(ROOT, "build-bench/nj"))
                          if os.path.exists(p)), None)
    if any(s.startswith("nj") for s in args.systems) or not os.path.exists(args.dataset):
        if not nj or not os.path.exists(nj):
            sys.exit("error: no nj binary; build one with\n  cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release "
                     "-DNJ_ENABLE_CUDA=OFF && ninja -C build-bench nj\nor give it with --nj")
    dataset = prepare_dataset(args, nj)

    print(f"machine: {nj_bench.machine()}")
    if nj:
        code, info = nj_bench.run([nj, "info", dataset])
        summary = [line for line in info.splitlines() if "vertices" in line or "edges" in line][:2]
        print(f"dataset: {dataset}" + ("".join(f"\n  {line.strip()}" for line in summary) if code == 0 else ""))
    else:
        print(f"dataset: {dataset}")
    print(f"nj: {nj}{' ' + args.nj_args if args.nj_args else ''}; threads {args.threads}; {args.warmup} warm-up + {args.epochs} timed epochs; {args.rounds} round(s)")
    print(f"load average at the start: {' '.join(open('/proc/loadavg').read().split()[:3])}", flush=True)

    runs = []  # (system, model, result)
    for rnd in range(args.rounds):
        for model in args.models:
            for system in args.systems:
                if system in skipped:
                    continue
                t0 = time.perf_counter()
                if system.startswith("nj"):
                    result = run_nj(nj, system, model, dataset, args)
                else:
                    result = run_baseline(system, model, dataset, args, venvs)
                result.update(system=system, model=model, round=rnd, wall_seconds=time.perf_counter() - t0)
                runs.append(result)
                status = (f"median {result['median']:.4f} s/epoch, loss {result.get('loss') or 0:.4f}"
                          if "median" in result else result["error"])
                print(f"  [{rnd + 1}/{args.rounds}] {model} {system}: {status} ({result['wall_seconds']:.1f} s)",
                      flush=True)
    load_end = " ".join(open("/proc/loadavg").read().split()[:3])

    # One row per (model, system): the median of the rounds' medians.
    rows = []
    for model in args.models:
        for system in args.systems:
            done = [r for r in runs if r["system"] == system and r["model"] == model]
            ok = [r for r in done if "median" in r]
            if system in skipped:
                rows.append((model, system, None, None, f"skipped: {skipped[system]}"))
            elif not ok:
                rows.append((model, system, None, None, done[-1]["error"] if done else "not run"))
            else:
                rows.append((model, system, ok[-1]["label"], statistics.median(r["median"] for r in ok), ""))

    def reference(model, system):
        return next((r[3] for r in rows if r[0] == model and r[1] == system), None)

    print()
    print(f"machine: {nj_bench.machine()}")
    print(f"dataset: {dataset}; threads {args.threads}; median of {args.epochs} epochs after {args.warmup} warm-up"
          f"{'' if args.rounds == 1 else f', median over {args.rounds} rounds'}; "
          f"load average {load_end} at the end")
    print()
    print("| system | model | median s/epoch | × DGL | × nj in-memory |")
    print("|---|---|---|---|---|")
    for model, system, label, median, note in rows:
        if median is None:
            print(f"| {system} | {model.upper()} | - | - | - |  {note}")
            continue
        print(f"| {label} | {model.upper()} | {median:.3f} | {fmt_ratio(median, reference(model, 'dgl'))} "
              f"| {fmt_ratio(median, reference(model, 'nj-in-memory'))} |")
    print()
    print("× DGL and × nj in-memory are this row's epoch over theirs, same model (below 1: faster).")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": nj_bench.machine(), "dataset": dataset, "threads": args.threads,
                       "epochs": args.epochs, "warmup": args.warmup, "skipped": skipped, "runs": runs}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
