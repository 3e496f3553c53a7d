#!/usr/bin/python3
"""Convert the original Planetoid files (ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}) to the nj HDF5
dataset format (the schema written by write_dataset in src/io/dataset_file.cpp).

The rules are those of PyG's Planetoid loader, so the result has the counts PyG and DGL report:
  - features and labels are allx/ally followed by tx/ty, with the test rows moved to the vertices that
    test.index names;
  - CiteSeer's isolated test vertices (absent from tx/ty) get zero features and label 0;
  - the public split: train = the first len(y) vertices, val = the 500 after them, test = test.index;
  - the graph is symmetrized, with duplicate edges and self-loops removed.

Usage: planetoid_to_h5.py RAW_DIR NAME OUTPUT, e.g.
  scripts/planetoid_to_h5.py ../shared/data/planetoid-raw cora cora.h5

It runs on Debian's python3 with python3-numpy, python3-scipy and python3-h5py.
"""
import argparse
import os
import pickle
import sys
import warnings

import h5py
import numpy as np
import scipy.sparse as sp

FORMAT_VERSION = 1
FEATURE_ROWS_PER_CHUNK = 4096
PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph")


def load_parts(raw_dir, name):
    def path(part):
        return os.path.join(raw_dir, f"ind.{name}.{part}")

    for part in PARTS + ("test.index",):
        if not os.path.exists(path(part)):
            hint = " (the public PubMed files lack allx, so its features cannot be built)" if part == "allx" else ""
            sys.exit(f"planetoid_to_h5: {path(part)}: missing{hint}")
    parts = {}
    with warnings.catch_warnings():
        # The pickles name scipy.sparse.csr, a module path scipy now deprecates.
        warnings.simplefilter("ignore", DeprecationWarning)
        for part in PARTS:
            with open(path(part), "rb") as f:
                # Python 2 pickles: latin1 reads their byte strings back unchanged.
                parts[part] = pickle.load(f, encoding="latin1")
    with open(path("test.index")) as f:
        parts["test_index"] = np.array([int(line) for line in f if line.strip()], dtype=np.int64)
    return parts


def dense(matrix):
    return np.asarray(matrix.todense() if sp.issparse(matrix) else matrix, dtype=np.float32)


def features_and_labels(parts):
    test_index = parts["test_index"]
    sorted_test = np.sort(test_index)
    tx, ty = dense(parts["tx"]), np.asarray(parts["ty"])
    # CiteSeer's test.index skips isolated vertices; give them zero rows so that the indices are contiguous.
    span = sorted_test[-1] - sorted_test[0] + 1
    if span != len(test_index):
        tx_full = np.zeros((span, tx.shape[1]), dtype=np.float32)
        ty_full = np.zeros((span, ty.shape[1]), dtype=ty.dtype)
        tx_full[sorted_test - sorted_test[0]] = tx
        ty_full[sorted_test - sorted_test[0]] = ty
        tx, ty = tx_full, ty_full
    features = np.vstack([dense(parts["allx"]), tx])
    one_hot = np.vstack([np.asarray(parts["ally"]), ty])
    # The test rows are stored in sorted order; put each at the vertex test.index names.
    features[test_index] = features[sorted_test]
    one_hot[test_index] = one_hot[sorted_test]
    return features, one_hot.argmax(axis=1).astype(np.int32), one_hot.shape[1]


def in_edge_csr(graph, num_vertices):
    src = np.array([s for s, targets in graph.items() for _ in targets], dtype=np.int64)
    dst = np.array([d for targets in graph.values() for d in targets], dtype=np.int64)
    src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    keep = src != dst
    # A CSR matrix with rows = destinations sums duplicates into one entry and sorts each row's sources.
    adjacency = sp.csr_matrix((np.ones(keep.sum(), dtype=np.int8), (dst[keep], src[keep])),
                              shape=(num_vertices, num_vertices))
    adjacency.sum_duplicates()
    adjacency.sort_indices()
    return adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int32)


def write(path, name, indptr, indices, features, labels, num_classes, masks):
    n = len(labels)
    with h5py.File(path, "w") as f:
        f.create_dataset("graph/indptr", data=indptr)
        f.create_dataset("graph/indices", data=indices, chunks=(min(1 << 20, max(len(indices), 1)),))
        f.create_dataset("features", data=features, chunks=(min(FEATURE_ROWS_PER_CHUNK, n), features.shape[1]))
        f.create_dataset("labels", data=labels)
        for split, mask in masks.items():
            f.create_dataset(f"masks/{split}", data=mask.astype(np.uint8))
        f.attrs["format_version"] = np.int64(FORMAT_VERSION)
        f.attrs["name"] = name
        f.attrs["num_classes"] = np.int64(num_classes)
        f.attrs["num_vertices"] = np.int64(n)
        f.attrs["num_edges"] = np.int64(len(indices))
        f.attrs["symmetrized"] = np.int64(1)
        f.attrs["self_loops"] = "removed"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw_dir", help="folder holding the ind.<name>.* files")
    parser.add_argument("name", help="dataset name: cora, citeseer or pubmed")
    parser.add_argument("output", help="HDF5 file to write")
    args = parser.parse_args()

    parts = load_parts(args.raw_dir, args.name)
    features, labels, num_classes = features_and_labels(parts)
    n = len(labels)
    indptr, indices = in_edge_csr(parts["graph"], n)
    num_train = len(parts["y"])
    masks = {split: np.zeros(n, dtype=np.uint8) for split in ("train", "val", "test")}
    masks["train"][:num_train] = 1
    masks["val"][num_train:num_train + 500] = 1
    masks["test"][parts["test_index"]] = 1
    write(args.output, args.name, indptr, indices, features, labels, num_classes, masks)
    print(f"{args.name}: {n} vertices, {len(indices)} edges, {features.shape[1]} features, {num_classes} classes, "
          f"split {masks['train'].sum()}/{masks['val'].sum()}/{masks['test'].sum()}, "
          f"features nnz {np.count_nonzero(features)} -> {args.output}")


if __name__ == "__main__":
    main()
