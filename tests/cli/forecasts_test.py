#!/usr/bin/env python3
"""nj plan's forecasts against what nj train measures, for every model, in memory and within budgets of 25 % and 10 %
of the unlimited peak, on Cora and CiteSeer (features stored sparse), a generated graph with dense features, and on 2
ranks of a partition folder.

What an epoch copies each way (by what it carried), the device's peak and the bytes exchanged are counted by the
forecast, so they must equal the measurement to the byte, every epoch. The host peak adds up what the rank holds, and
must be within 10 % of the peak resident memory that the kernel reports for the run (getrusage of the waited
process; under mpirun, the largest of its processes).

    forecasts_test.py NJ WORK [--data DIR] [--counted-only]

Exits 1 naming every case whose forecast is off, 0 where all agree. Without the shared data folder the real graphs are
skipped with a message (an error where NJ_REQUIRE_DATA is set).
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys

MODELS = ["gcn", "gat", "sage", "gin", "appnp"]
BUDGET_SHARES = [0.25, 0.10]
HOST_TOLERANCE = 0.10
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_mpi_yield_when_idle": "1"}


def run(command, env=None):
    """Runs a command; returns its standard output (nj writes its logs to standard error)."""
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


def measure(command, env=None):
    """The peak resident memory of `command` and what it waited for (getrusage of the children: the largest of
    them), through a child Python of its own, so that no earlier run's peak counts."""
    probe = ("import resource,subprocess,sys;"
             "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.PIPE,text=True);"
             "sys.stderr.write(r.stderr[-3000:]) if r.returncode else None;"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024);sys.exit(r.returncode)")
    result = subprocess.run([sys.executable, "-c", probe, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return int(result.stdout.strip())


def plan(nj, data, options):
    return json.loads(run([nj, "plan", data, "--json", *options]))


def epochs_of(metrics):
    with open(metrics) as f:
        return [r for r in map(json.loads, f) if r["type"] == "epoch"]


def check_case(nj, work, name, data, options, ranks, failures, counted_only):
    forecast = plan(nj, data, options)
    metrics = os.path.join(work, "metrics.jsonl")
    train = [nj, "train", *(["--partitions", data] if ranks > 1 else [data]), *options, "--epochs", "2",
             "--metrics-out", metrics]
    if ranks > 1:
        train = ["mpirun", "-np", str(ranks), "--oversubscribe", *train]
    rss = measure(train, MPI_ENV if ranks > 1 else None)
    problems = []
    rank0 = forecast["ranks"][0]
    for epoch in epochs_of(metrics):
        for key, value in rank0["execution"].items():
            if epoch["execution"][key] != value:
                problems.append(f"epoch {epoch['epoch']} {key}: measured {epoch['execution'][key]}, forecast {value}")
        for layer in epoch["over_ranks"]["exchange"]:
            l = layer["layer"] - 1
            for direction in ("forward", "backward"):
                expected = sum(r["exchange"][l][f"{direction}_bytes"] for r in forecast["ranks"])
                if layer[direction]["bytes_sent"] != expected:
                    problems.append(f"epoch {epoch['epoch']} layer {l + 1} {direction} exchange: measured "
                                    f"{layer[direction]['bytes_sent']}, forecast {expected}")
    host = max(r["host_peak_bytes"] for r in forecast["ranks"])
    error = (host - rss) / rss
    line = f"{name}: host peak forecast {host / 2**20:.1f} MiB, measured {rss / 2**20:.1f} MiB ({100 * error:+.1f} %)"
    if counted_only:
        line = f"{name}: copies, device peak and exchange"
    elif abs(error) > HOST_TOLERANCE:
        problems.append(f"host peak off by more than {100 * HOST_TOLERANCE:.0f} %: " + json.dumps(rank0["host"]))
    print(line + ("" if not problems else " FAILED"), flush=True)
    for p in problems:
        failures.append(f"{name}: {p}")


def check_host_budget(nj, work, failures, counted_only):
    """A --host-memory between what two of the planner's lighter choices need, at a quarter budget: nj plan forecasts
    the plan nj train then chooses (blocks built by each step, and 7/8 of the device budget), within the limit, and training measures what it forecasts. The graph's wide rows put MiBs between the
    choices, far more than a process's own memory differs from run to run."""
    path = os.path.join(work, "wide.h5")
    run([nj, "generate", "--vertices", "20000", "--edges", "200000", "--features", "1024", "--classes", "6",
         "--output", path])
    budget = int(budgets(nj, path, ["--model", "gcn"])[0][:-1])  # KiB
    base = ["--model", "gcn", "--threads", "2"]
    lightest = ["--recompute-outputs", "on", "--host-blocks", "1K"]
    blocks_built = plan(nj, path, [*base, "--device-memory", f"{budget}K", *lightest])["ranks"][0]
    smaller = plan(nj, path, [*base, "--device-memory", f"{budget * 7 // 8}K", *lightest])["ranks"][0]
    limit = (blocks_built["host_peak_bytes"] + smaller["host_peak_bytes"]) // 2 // 1024
    options = [*base, "--device-memory", f"{budget}K", "--host-memory", f"{limit}K"]
    chosen = plan(nj, path, options)["ranks"][0]
    if "7/8" not in "".join(chosen["host_memory_choices"][-1:]) or chosen["execution"] != smaller["execution"]:
        failures.append(f"wide gcn within --host-memory {limit}K: planned {chosen['host_peak_bytes']} B by "
                        f"{chosen['host_memory_choices']}, not as 7/8 of the device budget")
    check_case(nj, work, f"wide gcn within --host-memory {limit}K", path, options, 1, failures, counted_only)


def size_of(text):
    """Bytes of nj's format_bytes text ("91.00M", "2.68G", "512.0K", "7B")."""
    units = {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    return float(text[:-1]) * units[text[-1]]


def check_loading(nj, work, failures):
    """What loading a dataset adds to a process, measured (the peak resident memory once loaded, less the process's
    own) against what nj train forecast for it before reading anything (rank 0's, on several):
    - one process: the dataset and, beside it, the renumbering's copies of the graph, which on this graph of many
      edges and few features are a third of it;
    - two ranks that partition in memory: each reads the whole dataset, whose features are stored sparse and fully
      dense (twice the bytes of their dense rows), all held beside the rows they fill while they are read."""
    edges = os.path.join(work, "edges.h5")
    run([nj, "generate", "--vertices", "400000", "--edges", "10000000", "--features", "8", "--classes", "4",
         "--output", edges])
    stored = os.path.join(work, "stored_sparse.h5")
    run([nj, "generate", "--vertices", "200000", "--edges", "1000000", "--features", "64", "--classes", "4",
         "--feature-storage", "sparse", "--output", stored])
    train = ["--epochs", "1", "--threads", "1"]
    cases = [("loading", [nj, "train", edges, *train], None),
             ("loading on 2 ranks that partition in memory",
              ["mpirun", "-np", "2", "--oversubscribe", nj, "train", stored, "--partition-method", "metis", *train],
              MPI_ENV)]
    for name, command, env in cases:
        log = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True,
                             env={**os.environ, **(env or {})}).stderr
        found = re.findall(r"loading peaked at (\S+), forecast (\S+) \(process (\S+),", log)
        if len(found) != 1:  # rank 0 logs it
            failures.append(f"{name}: nj train logged {len(found)} loading peaks and forecasts, not one")
            continue
        for peak, forecast, process in ([size_of(t) for t in rank] for rank in found):
            error = (forecast - peak) / (peak - process)
            print(f"{name}: {(forecast - process) / 2**20:.1f} MiB forecast, {(peak - process) / 2**20:.1f} MiB "
                  f"measured beside the process ({100 * error:+.1f} %)", flush=True)
            if abs(error) > HOST_TOLERANCE:
                failures.append(f"{name} off by more than {100 * HOST_TOLERANCE:.0f} %: forecast {forecast:.0f} B, "
                                f"measured {peak:.0f} B, process {process:.0f} B")


def budgets(nj, data, model_options):
    """The device budgets of 25 % and 10 % of the unlimited subgraph executor's peak, in whole KiB, or the smallest
    budget it plans with where that is more."""
    ranks = plan(nj, data, [*model_options, "--execution", "reuse"])["ranks"]
    peak = max(r["execution"]["peak_device_footprint_bytes"] for r in ranks)
    least = max(r["minimum_device_budget_bytes"] for r in ranks)
    return [f"{(max(int(peak * share), least) + 1023) // 1024}K" for share in BUDGET_SHARES]


def graphs(nj, work, data_dir):
    found = []
    for name in ("cora", "citeseer"):
        folder = os.path.join(data_dir, name) if data_dir else ""
        if not folder or not os.path.isdir(folder):
            if os.environ.get("NJ_REQUIRE_DATA"):
                sys.exit(f"forecasts_test: {folder or 'the data folder'} is missing and NJ_REQUIRE_DATA is set")
            print(f"SKIPPED {name}: no {folder or 'data folder'}")
            continue
        path = os.path.join(work, f"{name}.h5")
        run([nj, "convert", "--format", "plain", folder, "--output", path])
        found.append((name, path))
    generated = os.path.join(work, "generated.h5")
    run([nj, "generate", "--vertices", "6000", "--edges", "60000", "--features", "64", "--classes", "6",
         "--output", generated])
    found.append(("generated", generated))
    return found


def bag_of_words(nj, work, vertices=22000, columns=4714, density=0.003, seed=5):
    """A graph like the bag-of-words ones users bring: 22,000 vertices, 4,714 binary features of which 0.3 % are
    non-zero, stored sparse; written as nj convert's plain-text folder and converted."""
    rng = random.Random(seed)
    folder = os.path.join(work, "bag-of-words")
    os.makedirs(folder, exist_ok=True)
    pairs = set()
    for _ in range(vertices * 8):
        u, v = rng.randrange(vertices), rng.randrange(vertices)
        if u != v:
            pairs.update({(u, v), (v, u)})
    edges = sorted(pairs)
    with open(os.path.join(folder, "meta.txt"), "w") as f:
        f.write(f"{vertices} {columns} 10 {len(edges)}\n")
    with open(os.path.join(folder, "edges.txt"), "w") as f:
        f.writelines(f"{u} {v}\n" for u, v in edges)
    per_row = int(columns * density)
    with open(os.path.join(folder, "features.txt"), "w") as f:
        f.writelines(" ".join(f"{c}:1" for c in sorted(rng.sample(range(columns), per_row))) + "\n"
                     for _ in range(vertices))
    with open(os.path.join(folder, "labels.txt"), "w") as f:
        f.writelines(f"{rng.randrange(10)}\n" for _ in range(vertices))
    order = list(range(vertices))
    rng.shuffle(order)
    for name, part in (("train", order[:2200]), ("val", order[2200:4400]), ("test", order[4400:8800])):
        with open(os.path.join(folder, f"{name}.txt"), "w") as f:
            f.writelines(f"{v}\n" for v in sorted(part))
    path = os.path.join(work, "bag-of-words.h5")
    run([nj, "convert", "--format", "plain", folder, "--output", path])
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nj")
    parser.add_argument("work")
    parser.add_argument("--data", help="the shared data folder (NJ_DATA_DIR, where set, takes its place, as it does for "
                                       "every other test)")
    parser.add_argument("--counted-only", action="store_true",
                        help="check what is counted (copies, device peak, exchange) on the first graph only, not the "
                             "host peak: for sanitizer builds, whose shadow memory is resident too")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    failures = []
    found = graphs(args.nj, args.work, os.environ.get("NJ_DATA_DIR") or args.data)
    for name, path in found[:1] if args.counted_only else found:
        for model in MODELS:
            options = ["--model", model, "--threads", "2"]
            check_case(args.nj, args.work, f"{name} {model} in memory", path, options, 1, failures,
                       args.counted_only)
            for budget in budgets(args.nj, path, options):
                check_case(args.nj, args.work, f"{name} {model} at {budget}", path, [*options, "--device-memory", budget],
                           1, failures, args.counted_only)
    # The recompute baseline, whose passes each cut a closure as they run.
    name, path = found[0]
    for model in MODELS[:2]:
        options = ["--model", model, "--threads", "2", "--execution", "recompute"]
        budget = budgets(args.nj, path, options[:4])[0]
        check_case(args.nj, args.work, f"{name} {model} recompute at {budget}", path,
                   [*options, "--device-memory", budget], 1, failures, args.counted_only)
    if not args.counted_only:
        check_host_budget(args.nj, args.work, failures, False)
        check_loading(args.nj, args.work, failures)
    parts = os.path.join(args.work, "parts")
    run([args.nj, "partition", path, "--parts", "2", "--output", parts])
    for model in MODELS:
        options = ["--model", model, "--threads", "1"]
        check_case(args.nj, args.work, f"{name} 2 ranks {model} in memory", parts, options, 2, failures,
                   args.counted_only)
        budget = budgets(args.nj, parts, options)[0]
        check_case(args.nj, args.work, f"{name} 2 ranks {model} at {budget}", parts, [*options, "--device-memory", budget],
                   2, failures, args.counted_only)
    if not args.counted_only:
        # Its dense rows alone take 400 MB, its sparse rows 2.5 MB: a run that once was refused at 1 GiB, as if every
        # copy of its features were dense, fits, and is forecast as it runs.
        words = bag_of_words(args.nj, args.work)
        check_case(args.nj, args.work, "bag of words sage in memory, within --host-memory 1G", words,
                   ["--model", "sage", "--host-memory", "1G"], 1, failures, False)
    if failures:
        print("\n".join(["FAILED:", *failures]))
        sys.exit(1)
    print(f"all forecasts equal the measurements ({len(found)} graphs)")


if __name__ == "__main__":
    main()
