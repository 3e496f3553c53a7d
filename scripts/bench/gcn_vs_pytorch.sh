#!/usr/bin/env bash
# Benchmark: `nj train` against a plain PyTorch full-batch GCN (scripts/bench/torch_gcn.py).
#
# 2-layer GCN, hidden 128, on a generated graph of 200,000 vertices, ~4.2M directed
# edges, 128 features, 40 classes, 2 threads. Target: nj's median epoch time (forward,
# backward and Adam) at most one fifth of PyTorch's. Results: docs/performance.md.
#
# Not part of the test suite. Exits 0 whether or not the target is met (it prints
# MET or NOT MET); non-zero only when something fails to run.
#
# Environment:
#   NJ_BIN          nj binary            (default: build/nj, else build-bench/nj)
#   NJ_EXECUTION    nj train --execution (default: in-memory, plain full-graph training like the baseline)
#   NJ_BENCH_DIR    data/results folder  (default: data/generated, git-ignored)
#   NJ_BENCH_EPOCHS nj timed epochs      (default 20)
#   TORCH_EPOCHS    PyTorch timed epochs (default 10, after 1 warm-up)
#   THREADS         threads for both     (default 2)
#   PYTHON          interpreter with torch, h5py, numpy (default /usr/bin/python3)
#   NJ_TRAIN_ARGS   extra `nj train` flags, appended (e.g. "--device-memory 512M" with NJ_EXECUTION=reuse)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

nj="${NJ_BIN:-}"
if [[ -z "$nj" ]]; then
  for candidate in build/nj build-bench/nj; do
    if [[ -x "$candidate" ]]; then nj="$candidate"; break; fi
  done
fi
if [[ -z "$nj" || ! -x "$nj" ]]; then
  echo "error: no nj binary; build one with" >&2
  echo "  cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DNJ_ENABLE_CUDA=OFF && ninja -C build-bench nj" >&2
  exit 2
fi
python="${PYTHON:-/usr/bin/python3}"
dir="${NJ_BENCH_DIR:-data/generated}"
threads="${THREADS:-2}"
nj_epochs="${NJ_BENCH_EPOCHS:-20}"
torch_epochs="${TORCH_EPOCHS:-10}"
mkdir -p "$dir"
data="$dir/bench-200k.h5"
nj_metrics="$dir/nj-gcn.jsonl"
torch_json="$dir/torch-gcn.json"

echo "== machine"
echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "cores:   $(nproc) online"
echo "memory:  $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
echo "nj:      $nj"

echo "== dataset"
if [[ -f "$data" ]]; then
  echo "using existing $data"
else
  "$nj" generate --vertices 200000 --edges 4200000 --features 128 --classes 40 --seed 1 --output "$data"
fi
"$nj" info "$data"

# Word-split on purpose: NJ_TRAIN_ARGS holds separate flags.
read -r -a extra_args <<< "${NJ_TRAIN_ARGS:-}"
execution="${NJ_EXECUTION:-in-memory}"
nj_flags="--execution $execution${NJ_TRAIN_ARGS:+ $NJ_TRAIN_ARGS}"
echo "== nj train ($threads threads, $nj_epochs epochs, $nj_flags)"
rm -f "$nj_metrics"
OMP_NUM_THREADS="$threads" "$nj" train "$data" --model gcn --layers 2 --hidden 128 --threads "$threads" \
  --epochs "$nj_epochs" --eval-every 0 --execution "$execution" --metrics-out "$nj_metrics" "${extra_args[@]}"

echo "== PyTorch ($threads threads, $torch_epochs epochs after 1 warm-up)"
OMP_NUM_THREADS="$threads" "$python" scripts/bench/torch_gcn.py "$data" --threads "$threads" \
  --epochs "$torch_epochs" --json "$torch_json"

echo "== result"
"$python" - "$nj_metrics" "$torch_json" "$threads" "$nj_flags" <<'EOF'
import json
import statistics
import sys

nj_path, torch_path, threads, nj_args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].strip()
epochs, summary = [], None
with open(nj_path) as f:
    for line in f:
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("type") == "epoch":
            epochs.append(rec)
        elif rec.get("type") == "summary":
            summary = rec
if not epochs:
    sys.exit(f"error: no epoch records in {nj_path}")
nj_median = statistics.median(r["epoch_seconds"] for r in epochs)
if summary and "median_epoch_seconds" in summary:
    # The JSONL summary's median should agree with ours; report ours either way.
    if abs(summary["median_epoch_seconds"] - nj_median) > 1e-3 * max(nj_median, 1e-9):
        print(f"note: summary median_epoch_seconds {summary['median_epoch_seconds']:.4f} differs from "
              f"the median of the epoch records {nj_median:.4f}")

def phase(name):
    vals = [r[name] for r in epochs if name in r]
    return statistics.median(vals) if vals else None

with open(torch_path) as f:
    torch_res = json.load(f)
torch_median = torch_res["median_epoch_seconds"]
speedup = torch_median / nj_median

print(f"| system | threads | epochs | median epoch (s) | speed-up vs PyTorch |")
print(f"|---|---|---|---|---|")
nj_label = f"nj train {nj_args}"
print(f"| {nj_label} | {threads} | {len(epochs)} | {nj_median:.3f} | {speedup:.2f}x |")
print(f"| PyTorch {torch_res['torch_version']} (CSR) | {threads} | {len(torch_res['epoch_seconds'])} "
      f"| {torch_median:.3f} | 1.00x |")
# Per-phase fields differ between nj versions (forward/backward/optimizer, or step/optimizer); print what is there.
parts = [(n, phase(n + "_seconds")) for n in ("forward", "backward", "step", "optimizer")]
parts = [(n, v) for n, v in parts if v is not None]
if parts:
    print()
    print("nj median phases: " + ", ".join(f"{n} {v:.3f} s" for n, v in parts))
# The executor's own accounting, where the nj version writes it ("execution": {...} per epoch record).
execution = [r["execution"] for r in epochs if isinstance(r.get("execution"), dict)]
exec_parts = []
for n in ("compute_seconds", "copy_seconds", "wait_seconds"):
    vals = [x[n] for x in execution if n in x]
    if any(vals):  # all zero under --execution in-memory, which has no device to account for
        exec_parts.append(f"{n.replace('_seconds', '')} {statistics.median(vals):.3f} s")
if exec_parts:
    print("nj median executor time: " + ", ".join(exec_parts))
last_loss = epochs[-1].get("loss")
if last_loss is not None:
    print(f"final training loss: nj {last_loss:.4f} (epoch {len(epochs)}), "
          f"PyTorch {torch_res['final_loss']:.4f} (epoch {len(torch_res['epoch_seconds']) + 1})")
print()
target = torch_median / 5
if nj_median <= target:
    print(f"target nj <= PyTorch/5 = {target:.3f} s: MET ({nj_median:.3f} s)")
else:
    print(f"target nj <= PyTorch/5 = {target:.3f} s: NOT MET ({nj_median:.3f} s, {nj_median / target:.2f}x over)")
EOF
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end"
exit 0
