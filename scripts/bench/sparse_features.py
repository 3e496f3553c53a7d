#!/usr/bin/python3
"""Dense against sparse feature storage on a bag-of-words graph: file size and load time, side by side.

Writes one graph twice with the neutronjittor package (python/), its features stored dense and sparse
(docs/dataset-format.md, "Sparse features"), then loads each file with `nj train --epochs 1 --vertex-order input`
several times, interleaved, and reads the load time nj logs ("loaded and ordered in X s"; with the input order
nothing is ordered). Prints sizes, the median load times and their ratios. A benchmark, not a test.

  scripts/bench/sparse_features.py                       # 20k vertices, 4096 words, 0.3 % density
  scripts/bench/sparse_features.py --vertices 50000 --rounds 5
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import neutronjittor as nj  # noqa: E402
from nj_bench import machine  # noqa: E402


def bag_of_words_graph(vertices, words, density, classes, degree, seed):
    """Communities of vertices whose words come mostly from their class's vocabulary: a citation graph's shape."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, vertices)
    per_vertex = max(1, int(round(density * words)))
    vocabulary = words // classes
    rows = np.repeat(np.arange(vertices), per_vertex)
    own = rng.random(rows.size) < 0.7
    columns = np.where(own, labels[rows] * vocabulary + rng.integers(0, vocabulary, rows.size),
                       rng.integers(0, words, rows.size))
    features = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, columns)), shape=(vertices, words))
    features.data[:] = 1.0  # repeated words count once
    src = rng.integers(0, vertices, vertices * degree // 2)
    same = rng.random(src.size) < 0.8
    by_class = [np.flatnonzero(labels == c) for c in range(classes)]
    dst = np.array([rng.choice(by_class[labels[s]]) if keep else rng.integers(0, vertices)
                    for s, keep in zip(src, same)])
    keep = src != dst
    edge_index = np.concatenate([np.stack([src[keep], dst[keep]]), np.stack([dst[keep], src[keep]])], axis=1)
    split = rng.random(vertices)
    return edge_index, features, labels, split < 0.1, (split >= 0.1) & (split < 0.3), split >= 0.3


def load_seconds(nj_binary, path):
    printed = nj.train(path, nj=nj_binary, epochs=1, threads=2, vertex_order="input", hidden=16, quiet=True)
    return float(re.search(r"loaded and ordered in ([\d.]+) s", printed).group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vertices", type=int, default=20000)
    p.add_argument("--words", type=int, default=4096)
    p.add_argument("--density", type=float, default=0.003)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--nj", default=os.path.join(ROOT, "build", "nj"))
    p.add_argument("--work", default=None, help="where the two files go (default: a temporary folder)")
    args = p.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="nj-sparse-")
    edge_index, features, labels, train, val, test = bag_of_words_graph(args.vertices, args.words, args.density, 7,
                                                                        10, 1)
    files = {}
    for storage in ("dense", "sparse"):
        files[storage] = nj.write_dataset(os.path.join(work, f"bow-{storage}.h5"), edge_index, features, labels, train,
                                          val, test, name="bag-of-words", feature_storage=storage)
    times = {storage: [] for storage in files}
    for _ in range(args.rounds):
        for storage, path in files.items():
            times[storage].append(load_seconds(args.nj, path))

    sizes = {storage: os.path.getsize(path) for storage, path in files.items()}
    print(f"machine: {machine()}")
    print(f"graph: {args.vertices} vertices, {edge_index.shape[1]} directed edges, {args.words} words, "
          f"{features.nnz / (args.vertices * args.words):.4%} non-zero ({features.nnz} entries); "
          f"{args.rounds} interleaved loads each")
    print("| storage | file | load (s), each round | median load |")
    print("|---|---:|---|---:|")
    for storage in files:
        print(f"| {storage} | {sizes[storage] / 2**20:.1f} MiB | {', '.join(f'{t:.3f}' for t in times[storage])} | "
              f"{statistics.median(times[storage]):.3f} s |")
    print(f"sparse / dense: file {sizes['sparse'] / sizes['dense']:.4f}, "
          f"load {statistics.median(times['sparse']) / statistics.median(times['dense']):.2f}")


if __name__ == "__main__":
    main()
