#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<reader>/): small valid and nearly valid inputs
in each target's input format (see the comment at the top of each fuzz_<reader>.cpp). Run from anywhere; it
replaces the seeds it writes and leaves other files alone."""
import gzip
import pathlib

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"


def write(reader, name, data):
    folder = CORPUS / reader
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def pieces(mask, *texts):
    """A folder target's input: the byte of present files, then their texts separated by 0xff."""
    return bytes([mask]) + b"\xff".join(t.encode() for t in texts)


# --- edge lists: a flags byte (fuzz_edge_list.cpp), then the file ---
write("edge_list", "triangle", b"\x00" + b"0 1\n1 2\n2 0\n")
write("edge_list", "one-based-comments", b"\x01" + b"# a comment\n% another\n1 2\n\n2 3\n3 1\n")
write("edge_list", "relabel-commas", b"\x02" + b"100,2000\n2000 5\n5\t100\n")
write("edge_list", "given-count", b"\x04\x05" + b"0\t1\n3 4\n")
write("edge_list", "undirected-dedup-no-loops", b"\x58" + b"0 1\n1 0\n0 0\n0 1\n")
write("edge_list", "add-loops-crlf-extra-column", b"\x20" + b"0 1 7\r\n1 2 8\r\n")
write("edge_list", "gzipped", b"\x80" + b"0 1\n1 2\n2 3\n")
write("edge_list", "raw-gzip", b"\x00" + gzip.compress(b"0 1\n1 2\n", mtime=0))
write("edge_list", "truncated-gzip", b"\x00" + gzip.compress(b"0 1\n1 2\n3 4\n", mtime=0)[:-6])

# --- plain folders: meta, edges, features, labels, train, val, test (fuzz_plain_folder.cpp) ---
meta = "6 3 2 5\n"
edges = "0 1\n1 2\n2 3\n3 4\n4 5\n"
dense = "".join(f"{v}.5 {v % 2} -1e-3\n" for v in range(6))
sparse = "0:1.5 2:0.25\n\n1:1\n2:3\n0:0.5 1:0.5\n1:2\n"
labels = "0\n1\n0\n1\nnan\n1\n"
write("plain_folder", "dense", pieces(0x7F, meta, edges, dense, labels, "0\n1\n", "2\n3\n", "5\n"))
write("plain_folder", "sparse-pairs", pieces(0x7F, meta, edges, sparse, "0 1\n2 0\n3 1\n", "0\n3\n", "2\n", ""))
write("plain_folder", "meta-and-edges", pieces(0x03, "6 0 2 5\n", edges))
write("plain_folder", "labels-no-split", pieces(0x0B, meta, edges, labels))

# --- OGB folders: raw/edge, node-feat, node-label, num-node-list, split train, valid, test (fuzz_ogb.cpp) ---
ogb_edges = "0,1\n1,2\n2,3\n3,0\n"
ogb_features = "0.1,0.2\n0.3,0.4\n-1,2\n0,0\n"
ogb_labels = "0\n1\nnan\n1\n"
write("ogb", "full", pieces(0x7F, ogb_edges, ogb_features, ogb_labels, "4\n", "0\n1\n", "3\n", ""))
write("ogb", "plain-csv", pieces(0xFF, ogb_edges, ogb_features, ogb_labels, "4\n", "0\n", "1\n", "3\n"))
write("ogb", "edges-and-split", pieces(0x71, ogb_edges, "0\n1\n", "2\n", "3\n"))

# --- TOML configurations of nj train (fuzz_config_file.cpp) ---
write("config_file", "gat", """# nj train --config
model = "gat"
layers = 3
hidden = 8
heads = 4
output-heads = 1
dropout = 0.6
attention-dropout = 0.6
epochs = 200
lr = 0.005
weight-decay = 5e-4
deterministic = true
""")
write("config_file", "executor", """execution = "reuse"
device-memory = "512M"
cache-policy = "lru"
threads = 2
device = "cpu"
eval-every = 10
feature-norm = "row"
weight-decay-scope = "first"
""")
write("config_file", "paths-and-arrays", """dataset = 'data/cora.h5'
metrics-out = "out/metrics.jsonl"
seed = [1, 2]
partition-method = "random"
""")
write("config_file", "unknown-key", "model = \"gcn\"\n[section]\nkey = 1\n")

# --- manifests of a 2-part partition folder (fuzz_manifest.cpp; the folder holds valid part-0.h5 and part-1.h5) ---
manifest = """{
  "kind": "nj-partition",
  "format_version": 1,
  "dataset": {"name": "fuzz", "path": "", "num_vertices": 12, "num_edges": 40, "train": 6},
  "method": "contiguous",
  "parts": 2,
  "seed": 0,
  "seconds": 0.001,
  "undirected_edges": 20,
  "edge_cut": 4,
  "cut_fraction": 0.2,
  "vertex_imbalance": 1.0,
  "train_imbalance": 1.0,
  "per_part": [
    {"part": 0, "file": "part-0.h5", "owned": 6, "mirrors": 2, "train": 3, "in_edges": 20, "mirror_fraction": 0.3},
    {"part": 1, "file": "part-1.h5", "owned": 6, "mirrors": 2, "train": 3, "in_edges": 20, "mirror_fraction": 0.3}
  ]
}
"""
write("manifest", "two-parts", manifest)
write("manifest", "swapped-files", manifest.replace('"part-0.h5"', '"part-x"').replace('"part-1.h5"', '"part-0.h5"'))
write("manifest", "one-part", manifest.replace('"parts": 2', '"parts": 1'))

# --- HDF5 datasets and shards: edit lists (hdf5_edits.cpp) on the targets' valid base files; empty is the base ---
for reader in ("dataset_file", "shard_file"):
    write(reader, "unchanged", b"")
    for target in range(0, 24, 3):
        write(reader, f"delete-{target}", bytes([0, target]))
        write(reader, f"set-element-{target}", bytes([2, target, 1, 0]) + (2**40 + 7).to_bytes(8, "little"))
        write(reader, f"resize-{target}", bytes([3, target, 5]))
    write(reader, "replace-with-floats", bytes([1, 1, 4, 2, 3, 2]) + bytes(range(24)))
    write(reader, "attribute-strings", bytes([3, 30, 4]) + b"kept" + bytes([4, 31, 5]) + b"added")
