#!/usr/bin/env python3
"""What nj convert held at the peak of each phase against the formula it logs beside it (convert_memory.hpp), on two
edge lists written here:

- dense ids, 1M vertices and 4M edges made undirected, 64 random features, the community order found, runs of 6M
  edges (--memory 96M): the features take 256 MB, which a conversion that held them would show;
- relabelled ids, 500k vertices and 2M edges, a sparse feature file and a label file, runs of 2M edges (--memory 32M).

    convert_memory_test.py NJ WORK

Both are measured above what the process held before it read anything (the kernel's VmHWM, reset at each phase). The
most the conversion held must be within 10 % of its formula; each phase within 10 % or 6 MiB, whichever is larger
(HDF5 and the allocator hold a few MiB beyond the arrays). On the first, `nj convert --forecast` of its shape must be
within 10 % of the most it held too. Exits 1 naming every phase that is off.
"""
import os
import random
import re
import shutil
import sys

from nj_commands import finish, run

TOLERANCE = 0.10
PHASE_SLACK = 6 * 2**20
HELD = re.compile(r"converting held at most ([0-9.]+)([KMG]?) above the \S+ held before \(formula ([0-9.]+)([KMG]?)\)")
PHASE = re.compile(r"\] ([a-z ]+): peak ([0-9.]+)([KMG]?) above the \S+ held before, formula ([0-9.]+)([KMG]?)")
FORECAST = re.compile(r"^converting holds ([0-9.]+)([KMG]?) at its peak", re.MULTILINE)
UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def write_edges(path, vertices, edges, name, rng):
    """Every vertex in an edge (so that relabelling keeps them all), the rest at random within a window."""
    with open(path, "w") as out:
        for first in range(0, edges, 100000):
            lines = []
            for e in range(first, min(edges, first + 100000)):
                source = e if e < vertices else rng.randrange(vertices)
                lines.append(f"{name(source)} {name((source + rng.randrange(1, 1000)) % vertices)}\n")
            out.write("".join(lines))


def bytes_of(value, unit):
    return float(value) * UNIT[unit]


def check(label, log, failures):
    held = HELD.search(log)
    phases = PHASE.findall(log)
    if not held or not phases:
        failures.append(f"{label}: no memory lines in the log:\n{log[-2000:]}")
        return 0
    peak, formula = bytes_of(*held.group(1, 2)), bytes_of(*held.group(3, 4))
    print(f"{label}: held {peak / 2**20:.1f} MiB, formula {formula / 2**20:.1f} MiB")
    if abs(peak - formula) > TOLERANCE * peak:
        failures.append(f"{label}: held {peak / 2**20:.1f} MiB, formula {formula / 2**20:.1f} MiB")
    for phase, measured, unit, said, said_unit in phases:
        measured, said = bytes_of(measured, unit), bytes_of(said, said_unit)
        print(f"  {phase}: {measured / 2**20:.1f} MiB, formula {said / 2**20:.1f} MiB")
        if abs(measured - said) > max(TOLERANCE * measured, PHASE_SLACK):
            failures.append(f"{label}: {phase}: held {measured / 2**20:.1f} MiB, formula {said / 2**20:.1f} MiB")
    return peak




def main():
    nj, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = random.Random(5)
    failures = []

    dense = os.path.join(work, "dense.txt")
    write_edges(dense, 1000000, 4000000, str, rng)
    _, log = run([nj, "--log-level", "debug", "convert", "--format", "edgelist", dense, "--undirected",
                  "--random-features", "64", "--memory", "96M", "--output", os.path.join(work, "dense.h5")])
    peak = check("dense ids, random features", log, failures)
    printed, _ = run([nj, "convert", "--forecast", "1000000,8000000,64", "--memory", "96M"])
    forecast = FORECAST.search(printed)
    if not forecast:
        failures.append(f"nj convert --forecast printed {printed!r}")
    elif abs(bytes_of(*forecast.groups()) - peak) > TOLERANCE * peak:
        failures.append(f"--forecast said {printed.strip()}, the conversion held {peak / 2**20:.1f} MiB")

    def name(v):
        return str(v * 1000003 + 17)

    relabelled = os.path.join(work, "relabelled.txt")
    write_edges(relabelled, 500000, 2000000, name, rng)
    features = os.path.join(work, "features.txt")
    labels = os.path.join(work, "labels.txt")
    with open(features, "w") as out:
        out.write("".join(" ".join(f"{rng.randrange(300)}:{rng.random():.3f}" for _ in range(rng.randrange(6))) + "\n"
                          for _ in range(500000)))
    with open(labels, "w") as out:
        out.write("".join(f"{name(v)} {rng.randrange(7)}\n" for v in range(500000)))
    _, log = run([nj, "--log-level", "debug", "convert", "--format", "edgelist", relabelled, "--relabel",
                  "--features", features, "--labels", labels, "--memory", "32M", "--no-community-order",
                  "--output", os.path.join(work, "relabelled.h5")])
    check("relabelled ids, sparse feature file", log, failures)

    shutil.rmtree(work, ignore_errors=True)
    return finish(failures, "nj convert held what its formula says")


if __name__ == "__main__":
    sys.exit(main())
