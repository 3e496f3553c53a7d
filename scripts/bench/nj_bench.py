"""What the benchmark and experiment scripts share: running nj (on one rank or several), preparing datasets and
partitions, reading the metrics it writes, and naming the machine."""
import json
import os
import re
import statistics
import subprocess
import sys


class DatasetFile:
    """An nj dataset file as the baselines read it, in NumPy (imported here, inside a baseline's venv only): the
    in-edge CSR (`indptr`, `indices`: row v lists the sources of the edges into v), `dst` (each edge's target, in
    the same order), features, labels, the split masks and the class count."""

    def __init__(self, path):
        import h5py
        import numpy as np
        with h5py.File(path, "r") as f:
            self.indptr = np.asarray(f["/graph/indptr"][...], dtype=np.int64)
            self.indices = np.asarray(f["/graph/indices"][...], dtype=np.int64)
            if "/features_sparse" in f:  # compressed rows (docs/dataset-format.md, "Sparse features")
                rows, width = (int(x) for x in f["/features_sparse/shape"][...])
                indptr = np.asarray(f["/features_sparse/indptr"][...], dtype=np.int64)
                self.features = np.zeros((rows, width), dtype=np.float32)
                self.features[np.repeat(np.arange(rows), np.diff(indptr)), f["/features_sparse/indices"][...]] = \
                    f["/features_sparse/values"][...]
            else:
                self.features = np.asarray(f["/features"][...], dtype=np.float32)
            self.labels = np.asarray(f["/labels"][...], dtype=np.int64)
            self.masks = {name: np.asarray(f[f"/masks/{name}"][...]).astype(bool)
                          for name in ("train", "val", "test") if f"/masks/{name}" in f}
            self.classes = int(f.attrs["num_classes"]) if "num_classes" in f.attrs else int(self.labels.max()) + 1
        self.num_vertices = self.features.shape[0]
        self.dst = np.repeat(np.arange(self.num_vertices, dtype=np.int64), np.diff(self.indptr))


def run(cmd, env=None):
    """Runs a command; returns its exit code and its stdout and stderr together."""
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return result.returncode, result.stdout + result.stderr


def minimum_budget(message):
    """The smallest budget a 'budget too small' error of nj names, or None."""
    match = re.search(r"use --device-memory (\S+) or more", message or "")
    return match.group(1) if match else None


# The SIMD extensions that decide which kernels the compiler's -march=native build can use.
SIMD_FLAG = re.compile(r"^(sse4_2|avx|avx2|fma|avx512\w*|amx\w*)$")


def machine():
    """The CPU model, its cores and its SIMD flags: what every recorded time is measured on."""
    model, flags = "unknown", []
    with open("/proc/cpuinfo") as info:
        for line in info:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = [f for f in value.split() if SIMD_FLAG.match(f)]
    return f"{model}, {os.cpu_count()} cores, SIMD flags: {' '.join(flags) or 'none'}"


def dataset_recipes(nj, data):
    """How each named dataset is made: Cora and Slashdot from the shared data, a generated 1M-vertex graph."""
    return {
        "cora": [nj, "convert", "--format", "plain", os.path.join(data, "cora")],
        "slashdot": [nj, "convert", "--format", "edgelist", os.path.join(data, "snap/soc-Slashdot0902.txt.gz"),
                     "--undirected", "--self-loops", "remove", "--duplicates", "remove", "--random-features", "128",
                     "--seed", "1"],
        "generated": [nj, "generate", "--vertices", "1000000", "--edges", "10000000", "--features", "128",
                      "--classes", "16", "--seed", "1"],
    }


def prepare_datasets(nj, data, work, names):
    """The HDF5 file of each named dataset, made in `work` unless it is there already."""
    os.makedirs(work, exist_ok=True)
    recipes = dataset_recipes(nj, data)
    paths = {}
    for name in names:
        path = os.path.join(work, name + ".h5")
        if not os.path.exists(path):
            code, out = run(recipes[name] + ["--output", path])
            if code != 0:
                sys.exit(f"preparing {name} failed:\n{out}")
        paths[name] = path
    return paths


def prepare_parts(nj, work, dataset, parts, method="metis"):
    """The partition folder of `dataset` into `parts` parts, made in `work` unless it is there already."""
    folder = os.path.join(work, os.path.splitext(os.path.basename(dataset))[0] + f"-{method}-{parts}")
    if not os.path.exists(os.path.join(folder, "manifest.json")):
        code, out = run([nj, "partition", dataset, "--parts", str(parts), "--method", method, "--output", folder])
        if code != 0:
            sys.exit(f"partitioning {dataset} into {parts} parts failed:\n{out}")
    return folder


def train_run(nj, train_args, metrics, source, ranks=1, mpirun="mpirun"):
    """`nj train` with `train_args` on `source` (a dataset, or with ranks > 1 a partition folder), one rank or
    `ranks` under mpirun on this machine. Returns (records of the metrics file, None) or (None, nj's error line, or
    the output's last line where there is none)."""
    args = ["--log-level", "warn", "train", *train_args, "--metrics-out", metrics]
    if ranks == 1:
        code, out = run([nj, *args, source])
    else:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_mpi_yield_when_idle="1")
        code, out = run([mpirun, "-np", str(ranks), "--oversubscribe", nj, *args, "--partitions", source], env)
    if code != 0:
        lines = out.strip().splitlines()
        # Under mpirun, mpirun's own report of the abort follows nj's one error line.
        errors = [line for line in lines if line.startswith("nj: error:")]
        return None, errors[0] if errors else (lines[-1] if lines else "failed")
    with open(metrics) as f:
        return [json.loads(line) for line in f], None


def timed_epochs(records):
    """The epoch records after the first (which warms up), or all where there is only one."""
    epochs = [r for r in records if r["type"] == "epoch"]
    return epochs[1:] or epochs


def summary(records):
    return next(r for r in records if r["type"] == "summary")


def exchange_layers(epoch):
    # The per-layer exchange records sit under "over_ranks"; a top-level "exchange" is read the same way.
    return epoch.get("exchange") or epoch.get("over_ranks", {}).get("exchange", [])


def figures(records):
    """Medians over the timed epochs: the slowest rank's phase times, the exchange, the epoch; and the partition,
    the memory peaks and the host-device bytes of rank 0."""
    epochs, final = timed_epochs(records), summary(records)

    def median(per_epoch):
        return statistics.median(per_epoch(e) for e in epochs)

    def slowest_rank(name):
        # One process without over-ranks records: its own execution figures.
        return median(lambda e: e["over_ranks"][name]["max"] if "over_ranks" in e
                      else e["execution"][{"copy_wait_seconds": "wait_seconds"}.get(name, name)])

    def exchange(per_direction):
        return median(lambda e: sum(per_direction(layer[d]) for layer in exchange_layers(e)
                                    for d in ("forward", "backward")))

    partition = final["partition"]
    execution = epochs[-1]["execution"]
    return {
        "edge_cut": partition["edge_cut"],
        "cut_fraction": partition["cut_fraction"],
        "mirror_fraction": statistics.mean(partition["mirror_fraction"]),
        "exchange_bytes": exchange(lambda d: d["bytes_sent"]),
        "compute_seconds": slowest_rank("compute_seconds"),
        "copy_seconds": slowest_rank("copy_seconds"),
        "copy_wait_seconds": slowest_rank("copy_wait_seconds"),
        "exchange_seconds": exchange(lambda d: d["seconds"]["max"]),
        "exchange_wait_seconds": exchange(lambda d: d["wait_seconds"]["max"]),
        "epoch_seconds": median(lambda e: e["epoch_seconds"]),
        "host_peak_bytes": final["host_peak_above_baseline_bytes"]["max"],
        "device_peak_bytes": execution["peak_device_bytes"],
        "device_footprint_bytes": execution["peak_device_footprint_bytes"],
        "transfer_bytes": execution["h2d_bytes"] + execution["d2h_bytes"],
        "other_transfer_bytes": execution["h2d_other_bytes"] + execution["d2h_other_bytes"],
        "hit_rate": execution["cache_hit_rate"],
        "recompute_ratio": execution["recompute_ratio"],
        "plan_seconds": median(lambda e: e["execution"]["plan_seconds"]),
    }
