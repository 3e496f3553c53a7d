"""The soak test behind scripts/soak.sh: a multi-rank job trains for many epochs within a tenth of the device memory
it needs, while every rank's resident memory is sampled; then the same job trains without a budget (in-memory
execution, the plain full-graph run) and the two are compared.

Passes when
  - no rank's resident memory grows after the warm-up: its highest in the last epochs exceeds its highest in the
    epochs right after the warm-up by at most --growth-percent of it or --growth-mib, whichever is larger;
  - the two runs compute the same function, as docs/executor.md promises (up to float rounding, checked at 1e-5
    relative as the tests check it): at the same weights, the initial ones and those the budgeted run ends with,
    both executors give the same loss, and one more step from the budgeted run's checkpoint gives the same
    weights. The two 500-epoch trajectories are not bitwise equal (the order of additions differs, and Adam turns
    rounding in near-zero gradients into whole steps), so how far their final weights lie apart is reported, not
    required.
Writes a figure of resident memory per rank over the epochs and prints a summary; exits 1 when a check fails."""
import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench"))
from nj_bench import machine, minimum_budget, prepare_parts, run  # noqa: E402

# The tests' tolerance for "the same function up to float rounding" (tests/exec/test_subgraph_executor.cpp).
SAME_FUNCTION = 1e-5
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nj", default="build/nj")
    parser.add_argument("--work", default="data/generated/soak", help="folder for the graph, runs and samples")
    parser.add_argument("--plot", default="docs/plots/soak-rss.png")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=500)
    parser.add_argument("--vertices", type=int, default=40000)
    parser.add_argument("--edges", type=int, default=480000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--model", default="gat")
    parser.add_argument("--budget-percent", type=int, default=10, help="of the largest rank's device memory need")
    parser.add_argument("--warmup", type=int, default=20, help="epochs after which resident memory must not grow")
    parser.add_argument("--window", type=int, default=50, help="epochs compared at the warm-up and at the end")
    parser.add_argument("--growth-percent", type=float, default=2.0)
    parser.add_argument("--growth-mib", type=float, default=4.0)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    return parser.parse_args()


def train_args(args, parts):
    return ["--log-level", "warn", "train", "--partitions", parts, "--model", args.model, "--threads", "1",
            "--seed", "1"]


def descendants(pid):
    """The processes below `pid`, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # The command may hold spaces and parentheses: the parent pid follows its closing one.
                    parent = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def rank_of(pid, nj):
    """The MPI rank of an nj process, or None for another process."""
    try:
        if os.path.realpath(f"/proc/{pid}/exe") != os.path.realpath(nj):
            return None
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        return int(env[b"OMPI_COMM_WORLD_RANK"])
    except (OSError, KeyError, ValueError):
        return None


def resident_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def epochs_done(metrics):
    """Epoch records written so far (rank 0 writes one per epoch and flushes it)."""
    try:
        with open(metrics) as f:
            return sum(1 for line in f if '"type":"epoch"' in line)
    except OSError:
        return 0


def mpirun_train(args, nj_args, metrics, samples_csv=None):
    """Runs the job under mpirun; with `samples_csv`, records (seconds, rank, epochs done, resident KiB) every
    interval, also into that file as they come. Returns (seconds, samples); exits on failure with nj's error line."""
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = ["mpirun", "-np", str(args.ranks), "--oversubscribe", args.nj, *nj_args, "--metrics-out", metrics]
    print("  " + " ".join(cmd), flush=True)
    start = time.monotonic()
    samples = []
    output_path = os.path.splitext(metrics)[0] + ".out"  # a file, not a pipe nobody reads while the job runs
    with open(output_path, "w") as output, \
            open(samples_csv, "w") if samples_csv else contextlib.nullcontext() as log, \
            subprocess.Popen(cmd, env=MPI_ENV, stdout=output, stderr=subprocess.STDOUT) as job:
        if log:
            log.write("seconds,rank,epochs_done,rss_kib\n")
        while job.poll() is None:
            if log:
                ranks = {pid: rank_of(pid, args.nj) for pid in descendants(job.pid)}
                done = epochs_done(metrics)
                for pid, rank in ranks.items():
                    kib = resident_kib(pid) if rank is not None else None
                    if kib is not None:
                        samples.append((time.monotonic() - start, rank, done, kib))
                        log.write("{:.1f},{},{},{}\n".format(*samples[-1]))
                log.flush()
            time.sleep(args.interval)
    if job.returncode != 0:
        with open(output_path) as f:
            lines = f.read().splitlines()
        errors = [line for line in lines if line.startswith("nj: error:")]
        sys.exit(f"the job failed: {errors[0] if errors else lines[-20:]} (all of it: {output_path})")
    return time.monotonic() - start, samples


def records(metrics):
    with open(metrics) as f:
        return [json.loads(line) for line in f]


def epoch_losses(metrics):
    return [r["loss"] for r in records(metrics) if r["type"] == "epoch"]


def parameters(checkpoint):
    with h5py.File(checkpoint, "r") as f:
        return {name: f["params"][name][()] for name in f["params"]}


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def weight_differences(a, b):
    """Per parameter: the largest absolute difference, the largest relative to max(1, |w|) (the tests' measure),
    and the norm of the difference relative to the parameter's."""
    out = {}
    for name in sorted(b):
        d = np.abs(a[name].astype(np.float64) - b[name].astype(np.float64))
        out[name] = {"max_abs": float(d.max()),
                     "max_scaled": float((d / np.maximum(1.0, np.abs(b[name]))).max()),
                     "norm_relative": float(np.linalg.norm(d) / max(np.linalg.norm(b[name]), 1e-30))}
    return out


def growth(samples, args):
    """Per rank: its highest resident memory in the window after the warm-up and in the last window, in KiB."""
    out = {}
    for rank in sorted({s[1] for s in samples}):
        mine = [(done, kib) for _, r, done, kib in samples if r == rank]
        early = [kib for done, kib in mine if args.warmup <= done < args.warmup + args.window]
        late = [kib for done, kib in mine if args.epochs - args.window <= done < args.epochs]
        if not early or not late:
            sys.exit(f"rank {rank}: no samples in the compared windows (too few epochs for the warm-up and window?)")
        out[rank] = (max(early), max(late))
    return out


def plot(budgeted, straight, budget, args):
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for samples, style, what in ((budgeted, "-", f"budget {budget}"), (straight, "--", "in-memory")):
        for rank in sorted({s[1] for s in samples}):
            points = [(done, kib / 1024) for _, r, done, kib in samples if r == rank]
            axis.plot([p[0] for p in points], [p[1] for p in points], style, label=f"rank {rank}, {what}")
    axis.axvline(args.warmup, color="grey", linewidth=0.8)
    axis.set(xlabel="epochs done", ylabel="resident memory (MiB)",
             title=f"{args.model.upper()}, {args.ranks} ranks, {args.vertices} vertices: resident memory per rank")
    axis.legend()
    axis.grid(alpha=0.3)
    os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
    figure.tight_layout()
    figure.savefig(args.plot, dpi=120)


def main():
    args = parse_args()
    os.makedirs(args.work, exist_ok=True)
    work = args.work
    graph = os.path.join(work, f"graph-{args.vertices}-{args.edges}-{args.features}-{args.classes}.h5")
    if not os.path.exists(graph):
        code, out = run([args.nj, "--log-level", "warn", "generate", "--vertices", str(args.vertices), "--edges",
                         str(args.edges), "--features", str(args.features), "--classes", str(args.classes),
                         "--seed", "1", "--output", graph])
        if code != 0:
            sys.exit(f"generating the graph failed:\n{out}")
    parts = prepare_parts(args.nj, work, graph, args.ranks)

    # The need: the largest rank's device peak without a budget, as nj plan forecasts it.
    code, out = run([args.nj, "--log-level", "warn", "plan", parts, "--model", args.model, "--json"])
    if code != 0:
        sys.exit(f"nj plan failed:\n{out}")
    need = max(r["device_peak_bytes"] for r in json.loads(out)["ranks"])
    budget = str(need * args.budget_percent // 100)
    note = ""
    # Below a rank's minimum: again at the minimum it names (another rank may name a larger one).
    for _ in range(args.ranks + 1):
        code, out = run([args.nj, "--log-level", "warn", "plan", parts, "--model", args.model, "--device-memory",
                         budget])
        if code == 0:
            break
        if not minimum_budget(out):
            sys.exit(f"nj plan at {budget} bytes failed:\n{out}")
        note = f" (raised from {need * args.budget_percent // 100} bytes, below a rank's minimum)"
        budget = minimum_budget(out)
    print(f"machine: {machine()}")
    print(f"need {need} bytes on the largest rank; budget {budget}{note}")

    common = train_args(args, parts)
    soak_metrics, soak_checkpoint = os.path.join(work, "soak.jsonl"), os.path.join(work, "soak.h5")
    print(f"budgeted run, {args.epochs} epochs:")
    soak_seconds, soak_samples = mpirun_train(
        args, [*common, "--device-memory", budget, "--epochs", str(args.epochs), "--save-checkpoint",
               soak_checkpoint], soak_metrics, os.path.join(work, "rss-budgeted.csv"))
    straight_metrics, straight_checkpoint = os.path.join(work, "straight.jsonl"), os.path.join(work, "straight.h5")
    print(f"straight run (in-memory, no budget), {args.epochs} epochs:")
    straight_seconds, straight_samples = mpirun_train(
        args, [*common, "--execution", "in-memory", "--epochs", str(args.epochs), "--save-checkpoint",
               straight_checkpoint], straight_metrics, os.path.join(work, "rss-straight.csv"))

    # One more epoch from the budgeted run's end, in each mode: the same weights and optimizer state.
    continued = {}
    for mode, flags in (("budgeted", ["--device-memory", budget]), ("in-memory", ["--execution", "in-memory"])):
        print(f"one more epoch from the budgeted run's checkpoint, {mode}:")
        metrics, checkpoint = os.path.join(work, f"continue-{mode}.jsonl"), os.path.join(work, f"continue-{mode}.h5")
        mpirun_train(args, [*common, *flags, "--epochs", str(args.epochs + 1), "--load-checkpoint", soak_checkpoint,
                            "--save-checkpoint", checkpoint], metrics)
        continued[mode] = (epoch_losses(metrics)[-1], parameters(checkpoint))

    failures = []
    rss = growth(soak_samples, args)
    print(f"\nresident memory, highest in epochs [{args.warmup}, {args.warmup + args.window}) and in the last "
          f"{args.window} (budgeted run):")
    for rank, (early, late) in rss.items():
        allowed = max(early * args.growth_percent / 100, args.growth_mib * 1024)
        print(f"  rank {rank}: {early / 1024:.1f} MiB -> {late / 1024:.1f} MiB ({(late - early) / 1024:+.2f} MiB, "
              f"{100 * (late - early) / early:+.2f} %; allowed {allowed / 1024:.1f} MiB)")
        if late - early > allowed:
            failures.append(f"rank {rank}'s resident memory grew by {(late - early) / 1024:.1f} MiB")
    for rank, (early, late) in growth(straight_samples, args).items():
        print(f"  (straight run, rank {rank}: {early / 1024:.1f} MiB -> {late / 1024:.1f} MiB)")

    soak_losses, straight_losses = epoch_losses(soak_metrics), epoch_losses(straight_metrics)
    first = relative(soak_losses[0], straight_losses[0])
    (loss_budgeted, weights_budgeted), (loss_in_memory, weights_in_memory) = continued["budgeted"], continued["in-memory"]
    last = relative(loss_budgeted, loss_in_memory)
    step = weight_differences(weights_budgeted, weights_in_memory)
    worst_step = max(d["max_scaled"] for d in step.values())
    print(f"\nthe same function (<= {SAME_FUNCTION:g} relative):")
    print(f"  epoch 1 loss, from the same initial weights: {soak_losses[0]!r} vs {straight_losses[0]!r} "
          f"({first:.2e})")
    print(f"  epoch {args.epochs + 1} loss, from the budgeted run's weights: {loss_budgeted!r} vs {loss_in_memory!r} "
          f"({last:.2e})")
    print(f"  weights after that step: largest difference {worst_step:.2e} of max(1, |w|)")
    for value, what in ((first, "the first epoch's losses"), (last, "the continued epoch's losses"),
                        (worst_step, "the weights after the continued epoch")):
        if not value <= SAME_FUNCTION:
            failures.append(f"{what} differ by {value:.2e}")

    soak_weights, straight_weights = parameters(soak_checkpoint), parameters(straight_checkpoint)
    final = weight_differences(soak_weights, straight_weights)
    soak_summary = next(r for r in records(soak_metrics) if r["type"] == "summary")
    straight_summary = next(r for r in records(straight_metrics) if r["type"] == "summary")
    print(f"\nafter {args.epochs} epochs (reported, not required to match):")
    print(f"  final loss {soak_losses[-1]:.6f} budgeted, {straight_losses[-1]:.6f} straight "
          f"({relative(soak_losses[-1], straight_losses[-1]):.2e} relative)")
    print(f"  test accuracy {soak_summary['final']['test']:.4f} budgeted, {straight_summary['final']['test']:.4f} "
          f"straight")
    for name, d in final.items():
        print(f"  {name}: max |dw| {d['max_abs']:.3e}, max |dw|/max(1,|w|) {d['max_scaled']:.3e}, "
              f"|dw|/|w| {d['norm_relative']:.3e}")
    bitwise = all(np.array_equal(soak_weights[name], straight_weights[name]) for name in final)
    print(f"  bitwise equal: {'yes' if bitwise else 'no'}")

    plot(soak_samples, straight_samples, budget, args)
    print(f"\ntimes: budgeted {soak_seconds / 60:.1f} min, straight {straight_seconds / 60:.1f} min; figure "
          f"{args.plot}")
    summary = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "need_bytes": need, "budget": budget,
               "budgeted_seconds": soak_seconds, "straight_seconds": straight_seconds,
               "rss_kib": {str(r): {"warmup": e, "end": l} for r, (e, l) in rss.items()},
               "first_loss_relative": first, "continued_loss_relative": last, "continued_step_scaled": worst_step,
               "final_weights": final, "final_weights_bitwise_equal": bitwise, "failures": failures}
    with open(os.path.join(work, "soak-summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)
    print("PASSED")


if __name__ == "__main__":
    main()
