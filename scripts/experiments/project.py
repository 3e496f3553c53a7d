#!/usr/bin/python3
"""Scaling projection: epoch time of a 2-layer GCN (hidden 128) on N nodes × G GPUs, from a stated model.

The model, per epoch, for the slowest rank r of P = N·G:

  compute_r   = units_r / throughput · sharing, units_r = Σ_l [(E_r + V_r)·w_l + V_r·d_(l-1)·w_l]
                (aggregation over in-edges and owned rows, and the transform's multiply-adds, forward and
                backward alike, so one constant covers both; sharing = ranks per core where ranks outnumber the
                cores, as 4 ranks on this machine's 2 cores do, else 1)
  transfer_r  = T_r / B_host, where T_r is the rows' host-device bytes the plan predicts (0 where the rank's rows
                fit its device)
  exchange_r  = X_r·(1 - f) / B_intra + X_r·f / B_inter + messages_r·latency, X_r the bytes it sends (boundary rows
                forward, mirror gradients backward, every layer), f = (P - G)/(P - 1) the share of its peers on other
                nodes, messages_r = 2·L·min(P - 1, peers)
  allreduce   = 2·4·parameters·(P - 1)/P / B_inter (ring), on one node over B_intra
  epoch(P)    = max_r (compute_r + transfer_r) + max_r exchange_r + allreduce

nothing overlapped (an upper bound: the executors hide part of the exchange and the copies behind compute).

Where a partition exists (`nj plan PARTS --json` for P ranks), V_r, E_r, T_r and X_r are exact; elsewhere the
ranks are balanced (V/P, E/P, METIS's usual 3 % imbalance) and the mirror fraction follows m(P) = a·log2(P)
(capped at the mean degree), `a` fitted to the measured partitions of the same graph (`--mirror-coefficient` sets
it where none are). The throughput is measured: the 1-rank unlimited sweep run's compute seconds for the same
graph on this machine (`--cpu`), or, for GPUs, an H200's effective rates (an assumption, `--gpu-*`). Links are
named models with bandwidth (GB/s, one direction) and latency (µs) as parameters.

Usage: scripts/experiments/project.py [--nj build/nj] [--sweep data/generated/sweep/sweep.csv]
                                      [--work data/generated/sweep] [--plots docs/plots]
"""
import argparse
import csv
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from nj_bench import figures, prepare_parts, run, train_run  # noqa: E402

# Bandwidth in GB/s (one direction) and latency in µs.
LINKS = {
    "shm": (5.0, 1.0),        # MPI between ranks of one machine, through shared memory (this machine)
    "pcie4": (25.0, 5.0),     # PCIe 4.0 x16, host to GPU
    "pcie5": (50.0, 5.0),     # PCIe 5.0 x16 (H200 nodes)
    "nvlink4": (450.0, 2.0),  # NVLink 4 per GPU, within an H100/H200 node
    "ib-hdr": (25.0, 2.0),    # InfiniBand HDR 200 Gb/s, one port per GPU
    "ib-ndr": (50.0, 2.0),    # InfiniBand NDR 400 Gb/s, one port per GPU
    "memcpy": (10.0, 0.5),    # the emulated device's copies on this machine
}
HIDDEN, LAYERS = 128, 2


def widths(features, classes):
    """(input width, row width) of each layer of the GCN."""
    dims = [features] + [HIDDEN] * (LAYERS - 1) + [classes]
    return [(dims[l], dims[l + 1]) for l in range(LAYERS)]


def units(vertices, edges, layer_widths):
    return sum((edges + vertices) * w + vertices * d * w for d, w in layer_widths)


def parameters(layer_widths):
    return sum(d * w + w for d, w in layer_widths)


def link_seconds(nbytes, link):
    bandwidth, _ = LINKS[link]
    return nbytes / (bandwidth * 1e9)


def epoch_seconds(ranks, throughput, layer_widths, p, g, host_link, intra, inter, sharing=1.0):
    """ranks: per rank dicts of owned, in_edges, host_bytes, exchange_bytes, peers. `sharing`: ranks per core, where
    ranks share cores (this machine), which slows each rank's compute by that factor."""
    compute = max(units(r["owned"], r["in_edges"], layer_widths) / throughput * sharing +
                  link_seconds(r["host_bytes"], host_link) for r in ranks)
    off_node = (p - g) / (p - 1) if p > 1 else 0.0
    exchange = 0.0
    if p > 1:
        exchange = max(link_seconds(r["exchange_bytes"] * (1 - off_node), intra) +
                       link_seconds(r["exchange_bytes"] * off_node, inter) +
                       2 * LAYERS * min(p - 1, r["peers"]) * LINKS[inter if off_node > 0 else intra][1] * 1e-6
                       for r in ranks)
    reduce_link = inter if p > g else intra
    allreduce = 0.0 if p == 1 else link_seconds(2 * 4 * parameters(layer_widths) * (p - 1) / p, reduce_link)
    return compute + exchange + allreduce, compute, exchange, allreduce


def balanced_ranks(p, vertices, edges, features, layer_widths, mirror_coefficient, device_bytes):
    mean_degree = edges / vertices
    mirrors = vertices / p * min(mean_degree, mirror_coefficient * math.log2(p)) if p > 1 else 0.0
    owned = vertices / p * 1.03
    in_edges = edges / p * 1.03
    rows = sum(w for _, w in layer_widths)
    # Rows that do not fit the device travel each epoch: the features read and every layer's rows out and back in.
    need = (owned + mirrors) * (features + 3 * rows) * 4
    host = 0.0 if need <= device_bytes else owned * (features + 2 * rows) * 4
    exchange = mirrors * 2 * rows * 4
    return [{"owned": owned, "in_edges": in_edges, "host_bytes": host, "exchange_bytes": exchange,
             "peers": p - 1}]


def plan_ranks(nj, parts):
    code, out = run([nj, "--log-level", "warn", "plan", parts, "--execution", "reuse", "--device-memory", "unlimited",
                     "--hidden", str(HIDDEN), "--json"])
    if code != 0:
        sys.exit(f"nj plan {parts} failed:\n{out}")
    plan = json.loads(out)
    return [{"owned": r["owned"], "in_edges": r["in_edges"], "host_bytes": r["h2d_bytes"] + r["d2h_bytes"],
             "exchange_bytes": r["exchange_bytes_sent"], "peers": plan["parts"] - 1, "mirrors": r["mirrors"],
             "owned_reading_mirrors": r["owned_reading_mirrors"]}
            for r in plan["ranks"]]


def measure(args):
    """GCN epochs with no budget at each rank count, one thread per rank, as the sweep runs them."""
    rows = []
    metrics = os.path.join(args.work, f"metrics-{os.getpid()}.jsonl")
    for dataset in args.measure.split(","):
        path = os.path.join(args.work, dataset + ".h5")
        for p in (int(r) for r in args.ranks.split(",")):
            source = path if p == 1 else prepare_parts(args.nj, args.work, path, p)
            records, error = train_run(args.nj, ["--model", "gcn", "--layers", str(LAYERS), "--hidden", str(HIDDEN),
                                                 "--threads", "1", "--epochs", str(args.epochs), "--eval-every", "0",
                                                 "--execution", "reuse", "--device-memory", "unlimited"],
                                       metrics, source, p)
            if records is None:
                sys.exit(f"{dataset} on {p} ranks failed: {error}")
            f = figures(records)
            rows.append({"dataset": dataset, "ranks": str(p), "epoch_seconds": f["epoch_seconds"],
                         "compute_seconds": f["compute_seconds"]})
    os.remove(metrics)
    return rows


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nj", default=os.path.join(root, "build/nj"))
    parser.add_argument("--work", default=os.path.join(root, "data/generated/sweep"))
    parser.add_argument("--sweep", default=None, help="default: WORK/sweep.csv")
    parser.add_argument("--plots", default=os.path.join(root, "docs/plots"))
    parser.add_argument("--gpu-gather-tbps", type=float, default=1.5,
                        help="H200: effective TB/s of the aggregation's row gathers (half the 4.8 TB/s HBM3e peak)")
    parser.add_argument("--gpu-tflops", type=float, default=30.0, help="H200: effective FP32 TFLOP/s of the GEMMs")
    parser.add_argument("--gpu-memory", type=float, default=137e9, help="bytes of a GPU's budget")
    parser.add_argument("--mirror-coefficient", type=float, default=None)
    parser.add_argument("--measure", default=None,
                        help="measure these datasets (of WORK) at --ranks now, instead of reading the sweep's rows")
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    if args.measure:
        rows = measure(args)
    else:
        with open(args.sweep or os.path.join(args.work, "sweep.csv"), newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["policy"] == "st-aware" and r["budget_percent"] == "100"
                    and r["model"] == "gcn" and not r["note"]]

    # ---- this machine: the model against measured epochs at 1, 2 and 4 ranks ----
    print("Projection against measurement on this machine (GCN, unlimited budget, st-aware; compute rate from the "
          "1-rank run; links: shm between ranks, memcpy host-device)")
    print(f"| dataset | ranks | measured s | projected s | error | compute | exchange | all-reduce |")
    print("|---|---|---|---|---|---|---|---|")
    fitted = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        mine = {int(r["ranks"]): r for r in rows if r["dataset"] == dataset}
        if 1 not in mine:
            continue
        path = os.path.join(args.work, dataset + ".h5")
        code, out = run([args.nj, "info", path, "--json"])
        info = json.loads(out)
        vertices, edges, features = info["num_vertices"], info["num_edges"], info["feature_width"]
        layer_widths = widths(features, info["num_classes"])
        throughput = units(vertices, edges, layer_widths) / float(mine[1]["compute_seconds"])
        for p in sorted(mine):
            ranks = plan_ranks(args.nj, os.path.join(args.work, f"{dataset}-metis-{p}")) if p > 1 else \
                [{"owned": vertices, "in_edges": edges, "host_bytes": 0, "exchange_bytes": 0, "peers": 0}]
            if p > 1:
                fitted.append(max(r["mirrors"] / r["owned"] for r in ranks) / math.log2(p))
            total, compute, exchange, allreduce = epoch_seconds(ranks, throughput, layer_widths, p, p, "memcpy",
                                                                "shm", "shm", max(1.0, p / os.cpu_count()))
            measured = float(mine[p]["epoch_seconds"])
            print(f"| {dataset} | {p} | {measured:.3f} | {total:.3f} | {100 * (total - measured) / measured:+.0f}% | "
                  f"{compute:.3f} | {exchange:.4f} | {allreduce:.4f} |")
    coefficient = args.mirror_coefficient or (max(fitted) if fitted else 0.3)

    # ---- GPUs: the generated graph and a graph the size of ogbn-papers100M ----
    graphs = {"generated (1M vertices, 10M edges, 128 features)": (1_000_000, 10_000_000, 128, 16),
              "ogbn-papers100M size (111M vertices, 3.2B edges, 128 features)": (111_059_956, 3_231_371_744, 128, 172)}
    gather_rate = args.gpu_gather_tbps * 1e12 / 4  # floats gathered per second
    print(f"\nProjection on H200 nodes of 8 GPUs (NVLink 4 within a node, InfiniBand NDR between nodes, PCIe 5 to the "
          f"host; mirror fraction {coefficient:.3f}·log2(P); gathers {args.gpu_gather_tbps} TB/s, GEMMs "
          f"{args.gpu_tflops} TFLOP/s, {args.gpu_memory / 1e9:.0f} GB per GPU)")
    print("| graph | GPUs (nodes × GPUs) | epoch s | compute + host copies | exchange | all-reduce | rows fit the GPUs |")
    print("|---|---|---|---|---|---|---|")
    series = {}
    for name, (vertices, edges, features, classes) in graphs.items():
        layer_widths = widths(features, classes)
        # Units per second: the gathers dominate the aggregation, the GEMM FLOPs the transform (2 per unit).
        agg = sum((edges + vertices) * w for _, w in layer_widths)
        gemm = sum(vertices * d * w for d, w in layer_widths)
        seconds_one = agg / gather_rate + 2 * gemm / (args.gpu_tflops * 1e12)
        throughput = units(vertices, edges, layer_widths) / seconds_one
        series[name] = []
        for p in (1, 2, 4, 8, 16, 32, 64):
            g = min(p, 8)
            ranks = balanced_ranks(p, vertices, edges, features, layer_widths, coefficient, args.gpu_memory)
            total, compute, exchange, allreduce = epoch_seconds(ranks, throughput, layer_widths, p, g, "pcie5",
                                                                "nvlink4", "ib-ndr")
            fits = ranks[0]["host_bytes"] == 0
            series[name].append((p, total))
            print(f"| {name} | {p} ({max(1, p // 8)} × {g}) | {total:.4f} | {compute:.4f} | {exchange:.4f} | "
                  f"{allreduce:.5f} | {'yes' if fits else 'no: rows stream over PCIe'} |")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axis = plt.subplots(figsize=(6.5, 4))
    for name, points in series.items():
        axis.loglog([p for p, _ in points], [t for _, t in points], marker="o", label=name.split(" (")[0])
    axis.set(xlabel="GPUs (8 per node)", ylabel="projected epoch seconds", title="GCN epoch time, projected (H200)")
    axis.grid(alpha=0.3, which="both")
    axis.legend()
    fig.tight_layout()
    os.makedirs(args.plots, exist_ok=True)
    path = os.path.join(args.plots, "projection.png")
    fig.savefig(path, dpi=110)
    print(f"\nplot: {path}")


if __name__ == "__main__":
    main()
