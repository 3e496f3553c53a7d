#!/usr/bin/python3
"""What aggregating the exchange per host would save: nj sends each boundary row from its rank to every rank that
mirrors it, one message per pair of ranks, also where several ranks of one host mirror the same row. Per host, a
row that k of its ranks mirror from one remote rank crosses the link k times; aggregated per host, it would cross
once and be handed on in shared memory.

Reads a partition folder's shards (their receive lists and global ids), places the ranks on hosts as
`mpirun --map-by ppr:K:node` does (ranks 0..K-1 on the first host, and so on), and prints per pair of hosts the
rows that cross between them per layer and direction, as sent and as they would be once per host, with what that
is in MB at a row width.

Usage: scripts/experiments/host_aggregation.py PARTITION_FOLDER --ranks-per-host K [--width 128]
"""
import argparse
import json
import os

import h5py
import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--ranks-per-host", type=int, required=True)
    parser.add_argument("--width", type=int, default=128, help="floats a row (default: GCN's hidden 128)")
    args = parser.parse_args()
    with open(os.path.join(args.folder, "manifest.json")) as f:
        shards = [os.path.join(args.folder, s["file"]) for s in json.load(f)["per_part"]]
    k = args.ranks_per_host
    if k < 1 or len(shards) % k:
        raise SystemExit(f"{len(shards)} ranks do not fill hosts of {k}")
    host_of = [rank // k for rank in range(len(shards))]
    # crossing[(from host, to host)] = (rows sent, distinct rows), over the receiving host's ranks
    sent, distinct = {}, {}
    for rank, path in enumerate(shards):
        with h5py.File(path, "r") as shard:
            global_id = shard["vertices/global_id"][:]
            peers = shard["peers/part"][:]
            offsets = shard["peers/receive_offsets"][:]
            receive = shard["peers/receive"][:]
        for i, peer in enumerate(peers):
            if host_of[peer] == host_of[rank]:
                continue
            ids = global_id[receive[offsets[i]:offsets[i + 1]]]
            key = (host_of[peer], host_of[rank])
            sent[key] = sent.get(key, 0) + len(ids)
            distinct.setdefault(key, set()).update(ids.tolist())
    print(f"{len(shards)} ranks, {k} per host; rows of {args.width} floats")
    print("| from host | to host | rows sent | rows once per host | saved | MB sent | MB once per host |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key in sorted(sent):
        once = len(distinct[key])
        print(f"| {key[0]} | {key[1]} | {sent[key]:,} | {once:,} | {100 * (1 - once / sent[key]):.1f} % | "
              f"{sent[key] * args.width * 4 / 1e6:.1f} | {once * args.width * 4 / 1e6:.1f} |")
    total_sent, total_once = sum(sent.values()), sum(len(v) for v in distinct.values())
    if total_sent:
        print(f"\nall links: {total_sent:,} rows sent, {total_once:,} once per host "
              f"({100 * (1 - total_once / total_sent):.1f} % saved), per layer and direction")


if __name__ == "__main__":
    np.seterr(all="raise")
    main()
