#!/usr/bin/env python3
"""`nj plan --shape` (a training rank of a graph that is not at hand, planned over a part made up to the mean part's
counts) against `nj plan` of real shards of a like graph: a generated graph of 200k vertices and 2M edges, 32 features
and 8 classes, in 4 parts. The projection takes the shards' mean mirrors per owned vertex (--mirrors). Its device and
host peaks must be within 10 % of the shards' mean, for GCN and GAT in memory and for GCN within a 24 MiB budget.
`nj plan` of shards is itself held to what training measures by Forecasts.EqualWhatTrainingMeasures.

    shape_projection_test.py NJ WORK

Exits 1 naming every case that is off.
"""
import json
import os
import re
import shutil
import sys

from nj_commands import finish, run

TOLERANCE = 0.10
SHAPE = {"vertices": 200000, "features": 32, "classes": 8}
CASES = [["--model", "gcn"], ["--model", "gat"], ["--model", "gcn", "--device-memory", "24M"]]
PEAKS = re.compile(r"device memory: peak ([0-9.]+)([KMG]?)\nhost memory: peak ([0-9.]+)([KMG]?) ")
UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}




def main():
    nj, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    dataset, parts = os.path.join(work, "g.h5"), os.path.join(work, "parts")
    run([nj, "generate", "--vertices", str(SHAPE["vertices"]), "--edges", "2000000", "--features",
         str(SHAPE["features"]), "--classes", str(SHAPE["classes"]), "--seed", "4", "--output", dataset])
    run([nj, "partition", dataset, "--parts", "4", "--output", parts])
    failures = []
    for case in CASES:
        ranks = json.loads(run([nj, "plan", parts, "--json", *case])[0])["ranks"]
        owned = sum(r["owned"] for r in ranks)
        mirrors = sum(r["mirrors"] for r in ranks) / owned
        edges = sum(r["in_edges"] for r in ranks)
        shards = {"device": sum(r["execution"]["peak_device_footprint_bytes"] for r in ranks) / len(ranks),
                  "host": sum(r["host_peak_bytes"] for r in ranks) / len(ranks)}
        shape = f"{SHAPE['vertices']},{edges},{SHAPE['features']},{SHAPE['classes']}"
        printed, _ = run([nj, "plan", "--shape", shape, "--ranks", "4", "--mirrors", f"{mirrors:.3f}", *case])
        found = PEAKS.search(printed)
        if not found:
            failures.append(f"{' '.join(case)}: nj plan --shape printed {printed!r}")
            continue
        projected = {"device": float(found.group(1)) * UNIT[found.group(2)],
                     "host": float(found.group(3)) * UNIT[found.group(4)]}
        for what in ("device", "host"):
            line = (f"{' '.join(case)}: {what} peak projected {projected[what] / 2**20:.1f} MiB, the shards' mean "
                    f"{shards[what] / 2**20:.1f} MiB")
            print(line)
            if abs(projected[what] - shards[what]) > TOLERANCE * shards[what]:
                failures.append(line)
    shutil.rmtree(work, ignore_errors=True)
    return finish(failures, "the projection from a shape is the shards' forecast")


if __name__ == "__main__":
    sys.exit(main())
