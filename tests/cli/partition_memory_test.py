#!/usr/bin/env python3
"""What each rank of nj partition held at its peak against the formula it logs beside it (partition_memory.hpp), on
1, 2 and 4 ranks of two generated graphs: one whose rows and edges dominate and whose clusters contract to a few
hundred (1M vertices, 20M edges, 64 features), and one whose clusters barely merge, where PT-Scotch's own memory
dominates (400k vertices, 1.6M edges, 4 features). On the first, `nj partition --forecast` (the formula over the mean
slice, PT-Scotch left out) must be within 10 % of the most each rank held too.

    partition_memory_test.py NJ WORK

Both are measured above what the process held before it read anything (the kernel's VmHWM, each rank apart, reset at
each phase). The most a rank held must be within 10 % of its formula; each phase within 10 % or 6 MiB, whichever is
larger (HDF5's and MPI's buffers and the allocator hold up to 5 MiB beyond the arrays in the runs measured, which the
formulas leave out). Exits 1 naming every rank and phase that is off.
"""
import os
import re
import shutil
import subprocess
import sys

TOLERANCE = 0.10
PHASE_SLACK = 6 * 2**20
GRAPHS = {
    "rows": ["--vertices", "1000000", "--edges", "20000000", "--features", "64", "--classes", "16", "--seed", "1"],
    "clusters": ["--vertices", "400000", "--edges", "1600000", "--features", "4", "--classes", "4"],
}
RANKS = [1, 2, 4]
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_mpi_yield_when_idle": "1"}
HELD = re.compile(r"rank (\d+): partitioning held at most ([0-9.]+)([KMG]?) above the \S+ held before "
                  r"\(formula ([0-9.]+)([KMG]?)\)")
PHASE = re.compile(r"rank (\d+): ([a-z ]+): peak ([0-9.]+)([KMG]?) above the \S+ held before, formula ([0-9.]+)([KMG]?)")
FORECAST = re.compile(r"^(\d+) ranks, \d+ parts: each rank holds ([0-9.]+)([KMG]?) at its peak", re.MULTILINE)
UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def run(command, env=None):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stderr


def main():
    nj, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []
    for name, shape in GRAPHS.items():
        dataset = os.path.join(work, f"{name}.h5")
        run([nj, "generate", *shape, "--output", dataset])
        forecast = {}
        if name == "rows":
            printed = subprocess.run([nj, "partition", dataset, "--parts", "4", "--forecast", ",".join(map(str, RANKS))],
                                     stdout=subprocess.PIPE, text=True, check=True).stdout
            for ranks, peak, unit in FORECAST.findall(printed):
                forecast[int(ranks)] = float(peak) * UNIT[unit]
            if sorted(forecast) != RANKS:
                failures.append(f"{name}: nj partition --forecast printed {printed!r}")
        for ranks in RANKS:
            launcher = [] if ranks == 1 else ["mpirun", "-np", str(ranks), "--oversubscribe"]
            log = run([*launcher, nj, "partition", dataset, "--parts", "4", "--method", "scotch",
                       "-o", os.path.join(work, f"{name}-{ranks}"), "--log-level", "debug"], MPI_ENV)
            phases = PHASE.findall(log)
            if len(phases) != 5 * ranks:
                failures.append(f"{name} on {ranks} ranks: {len(phases)} phase lines, not {5 * ranks}")
            for rank, phase, measured, measured_unit, formula, formula_unit in phases:
                measured_bytes = float(measured) * UNIT[measured_unit]
                formula_bytes = float(formula) * UNIT[formula_unit]
                if abs(formula_bytes - measured_bytes) > max(TOLERANCE * measured_bytes, PHASE_SLACK):
                    failures.append(f"{name} on {ranks} ranks, rank {rank}, {phase}: held {measured}{measured_unit}, "
                                    f"formula {formula}{formula_unit}")
            held = HELD.findall(log)
            if len(held) != ranks:
                failures.append(f"{name} on {ranks} ranks: {len(held)} lines of what a rank held, not {ranks}")
                continue
            for rank, measured, measured_unit, formula, formula_unit in held:
                measured_bytes = float(measured) * UNIT[measured_unit]
                formula_bytes = float(formula) * UNIT[formula_unit]
                error = (formula_bytes - measured_bytes) / measured_bytes
                line = (f"{name} on {ranks} ranks, rank {rank}: held {measured}{measured_unit}, "
                        f"formula {formula}{formula_unit} ({100 * error:+.1f} %)")
                print(line)
                if abs(error) > TOLERANCE:
                    failures.append(line)
                if ranks in forecast:
                    forecast_error = (forecast[ranks] - measured_bytes) / measured_bytes
                    print(f"  forecast {forecast[ranks] / 2**20:.2f}M ({100 * forecast_error:+.1f} %)")
                    if abs(forecast_error) > TOLERANCE:
                        failures.append(f"{line}: forecast {forecast[ranks] / 2**20:.2f}M")
    for failure in failures:
        print(f"partition_memory_test.py: off by more than {100 * TOLERANCE:.0f} %: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
