#!/usr/bin/env bash
# The GPU check, for a machine with one GPU, in one command:
#   1. builds with the CUDA backend (sm_80, sm_90) and warnings as errors (with --bundle: nothing is built, the
#      bundle's programs run; scripts/gpu_bundle.sh makes the bundle for a machine without the project's Debian
#      packages, and this script is its gpu_check.sh);
#   2. runs every GPU test instance (the suites' */cuda instances, the CPU-against-GPU gradient tests, and the
#      multi-rank suite's cuda instances on 1 and 2 ranks sharing the GPU);
#   3. compares CPU and GPU loss traces of `nj train` (GCN, GAT, GraphSAGE, GIN, APPNP) on Cora and on a generated
#      graph (1e-4 relative);
#   4. times GCN and GAT epochs on 1 and 2 ranks at 100 %, 25 % and 10 % of the graph's device need, and prints
#      the table last (scripts/bench/gpu_check.py).
# A failed step does not stop the later ones; the exit status is non-zero if any failed. Everything printed goes
# to the log (OUT/gpu_check.log) and the timing table to OUT/gpu_check.csv; OUT is the build folder, or with
# --bundle ./gpu-check-out. Meant to finish in under 8 minutes on one H200 including the build, under 6 from a
# bundle, where --time-limit (default 360 s) also caps each step; --vertices and --edges size the timed graph
# (default 500000 and 5000000; from a bundle 250000 and 2500000, to leave the tests their share of the 6 minutes).
# --device cpu is a dry run on a machine without a GPU: the GPU test instances skip, the CPU is timed.
#
# Usage: scripts/gpu_check.sh [--build build-gpu | --bundle DIR] [--data ../shared/data] [--out DIR] [--log FILE]
#                             [--csv FILE] [--jobs N] [--vertices 500000] [--edges 5000000] [--skip-build]
#                             [--time-limit SECONDS] [--device cuda|cpu]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build-gpu"
bundle=""
data=""
out=""
log=""
csv=""
jobs="$(nproc)"
skip_build=0
time_limit=""
device="cuda"
timing_args=()
# The copy at a bundle's top runs that bundle without being told.
[[ -f $here/lib/bundle-env.sh ]] && bundle="$here"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; bundle=""; shift 2 ;;
    --bundle) bundle="$(realpath -m "$2")"; shift 2 ;;
    --data) data="$(realpath -m "$2")"; shift 2 ;;
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --log) log="$(realpath -m "$2")"; shift 2 ;;
    --csv) csv="$(realpath -m "$2")"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --vertices|--edges) timing_args+=("$1" "$2"); shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --time-limit) time_limit="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n $bundle ]]; then
  if [[ ! -f $bundle/lib/bundle-env.sh ]]; then
    echo "gpu_check.sh: $bundle is no GPU bundle (scripts/gpu_bundle.sh)" >&2
    exit 2
  fi
  out="${out:-$PWD/gpu-check-out}"
  data="${data:-$bundle/data}"
  time_limit="${time_limit:-360}"
  ((${#timing_args[@]} > 0)) || timing_args=(--vertices 250000 --edges 2500000)
  nj="$bundle/nj"
  tests="$bundle/bin"
  mpirun="$bundle/mpirun"
  bench="$bundle/bench"
  work="${TMPDIR:-/tmp}/nj-gpu-check-data"
else
  out="${out:-$build}"
  data="${data:-$root/../shared/data}"
  time_limit="${time_limit:-0}"
  nj="$build/nj"
  tests="$build/tests"
  mpirun="mpirun"
  bench="$root/scripts/bench"
  work="$build/gpu-check-data"
fi
mkdir -p "$out"
log="${log:-$out/gpu_check.log}"
csv="${csv:-$out/gpu_check.csv}"
exec > >(tee "$log") 2>&1
start=$(date +%s)
section() { echo; echo "=== $1 ($(( $(date +%s) - start )) s)"; }
failed=()
# step NAME CAP COMMAND...: runs COMMAND, within CAP seconds and what is left of --time-limit where one is set;
# a failure is recorded and the check goes on.
step() {
  local name="$1" cap="$2" limit=() left code=0
  shift 2
  if ((time_limit > 0)); then
    left=$(( start + time_limit - $(date +%s) ))
    ((left < cap)) && cap=$left
    if ((cap < 10)); then
      echo "gpu_check.sh: skipped '$name': the time limit is reached"
      failed+=("$name (skipped: time limit)")
      return 0
    fi
    limit=(timeout --kill-after=15 "$cap")
  fi
  "${limit[@]}" "$@" || code=$?
  if ((code != 0)); then
    [[ ${#limit[@]} -gt 0 && ( $code -eq 124 || $code -eq 137 ) ]] && name+=" (stopped after $cap s)"
    echo "gpu_check.sh: FAILED: $name (exit $code)"
    failed+=("$name")
  fi
}

section "machine"
date -u +"%Y-%m-%d %H:%M UTC"
if [[ $device == cuda ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || {
    echo "gpu_check.sh: nvidia-smi found no GPU" >&2
    exit 1
  }
fi
lscpu 2>/dev/null | grep -E "^Model name|^CPU\(s\)" || true

if [[ -n $bundle ]]; then
  section "bundle $bundle"
  head -1 "$bundle/MANIFEST.txt"
  # shellcheck source=/dev/null
  . "$bundle/lib/bundle-env.sh"
  nj_bundle_setup "$bundle" || exit 1
  ldd "$bundle/bin/nj" | grep -E "nccl|cudart|libcuda\.so|not found" || true
elif [[ $skip_build -eq 0 ]]; then
  section "build (CUDA backend, warnings as errors)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNJ_ENABLE_CUDA=ON -DNJ_WARNINGS_AS_ERRORS=ON \
    >/dev/null
  cmake --build "$build" --parallel "$jobs"
  ldd "$build/nj" | grep -E "nccl|cudart"
else
  ldd "$build/nj" | grep -E "nccl|cudart"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 NJ_DATA_DIR="$data"
section "GPU test instances"
# Every suite's cuda instances, and the tests that compare the two backends.
step "GPU test instances" 180 "$tests/nj_tests" --gtest_filter='*/cuda*:*cuda_*:*CrossBackend*' --gtest_brief=1
section "multi-rank GPU test instances (1 and 2 ranks on one GPU)"
step "multi-rank GPU test instances, 1 rank" 45 "$tests/nj_mpi_tests" --gtest_filter='*/cuda*:*cuda_*' --gtest_brief=1
step "multi-rank GPU test instances, 2 ranks" 75 "$mpirun" -np 2 --oversubscribe "$tests/nj_mpi_tests" \
  --gtest_filter='*/cuda*:*cuda_*' --gtest_brief=1

section "CPU against GPU loss traces, then epoch timings"
python_limit=()
if ((time_limit > 0)); then
  # The script stops starting timed runs at its limit and prints what it has; the step's own cap is the backstop.
  python_limit=(--time-limit $(( start + time_limit - $(date +%s) - 20 )))
fi
python="$(command -v python3 || echo /opt/torch/.venv/bin/python3)"
step "loss traces and timings" 100000 "$python" "$bench/gpu_check.py" --nj "$nj" --mpirun "$mpirun" --data "$data" \
  --work "$work" --csv "$csv" --device "$device" "${python_limit[@]}" "${timing_args[@]}"
echo
if ((${#failed[@]} > 0)); then
  echo "gpu_check.sh: ${#failed[@]} step(s) failed: $(IFS=';'; echo "${failed[*]}")"
  echo "gpu_check.sh: done in $(( $(date +%s) - start )) s; full log in $log, timings in $csv"
  exit 1
fi
echo "gpu_check.sh: done in $(( $(date +%s) - start )) s; full log in $log, timings in $csv"
