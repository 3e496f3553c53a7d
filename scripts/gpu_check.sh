#!/usr/bin/env bash
# The GPU check, for a machine with one GPU and the project's dependencies (scripts/setup.sh), in one command:
#   1. builds with the CUDA backend (sm_80, sm_90) and warnings as errors;
#   2. runs every GPU test instance (the suites' */cuda instances, the CPU-against-GPU gradient tests, and the
#      multi-rank suite's cuda instances on 1 and 2 ranks sharing the GPU);
#   3. compares CPU and GPU loss traces of `nj train` on Cora and on a generated graph (1e-4 relative);
#   4. times GCN and GAT epochs on 1 and 2 ranks at 100 %, 25 % and 10 % of the graph's device need, and prints
#      the table last (scripts/bench/gpu_check.py).
# Everything it prints also goes to the log file (default: gpu_check.log in the build folder). Meant to finish in
# under 8 minutes on one H200; --vertices and --edges size the timed graph.
#
# Usage: scripts/gpu_check.sh [--build build-gpu] [--data ../shared/data] [--log FILE] [--jobs N]
#                             [--vertices 500000] [--edges 5000000] [--skip-build]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-gpu"
data="$root/../shared/data"
log=""
jobs="$(nproc)"
skip_build=0
timing_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --data) data="$(realpath -m "$2")"; shift 2 ;;
    --log) log="$(realpath -m "$2")"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --vertices|--edges) timing_args+=("$1" "$2"); shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$build"
log="${log:-$build/gpu_check.log}"
exec > >(tee "$log") 2>&1
start=$(date +%s)
section() { echo; echo "=== $1 ($(( $(date +%s) - start )) s)"; }

section "machine"
date -u +"%Y-%m-%d %H:%M UTC"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || {
  echo "gpu_check.sh: nvidia-smi found no GPU" >&2
  exit 1
}
lscpu | grep -E "^Model name|^CPU\(s\)" || true

if [[ $skip_build -eq 0 ]]; then
  section "build (CUDA backend, warnings as errors)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNJ_ENABLE_CUDA=ON -DNJ_WARNINGS_AS_ERRORS=ON \
    >/dev/null
  cmake --build "$build" --parallel "$jobs"
fi
ldd "$build/nj" | grep -E "cusparse|cublas|nccl|cudart"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
section "GPU test instances"
# Every suite's cuda instances, and the tests that compare the two backends.
NJ_DATA_DIR="$data" "$build/tests/nj_tests" --gtest_filter='*/cuda*:*cuda_*:*CrossBackend*' --gtest_brief=1
section "multi-rank GPU test instances (1 and 2 ranks on one GPU)"
NJ_DATA_DIR="$data" "$build/tests/nj_mpi_tests" --gtest_filter='*/cuda*:*cuda_*' --gtest_brief=1
NJ_DATA_DIR="$data" mpirun -np 2 --oversubscribe "$build/tests/nj_mpi_tests" --gtest_filter='*/cuda*:*cuda_*' \
  --gtest_brief=1

section "CPU against GPU loss traces, then epoch timings"
python3 "$root/scripts/bench/gpu_check.py" --nj "$build/nj" --data "$data" --work "$build/gpu-check-data" \
  "${timing_args[@]}"
echo
echo "gpu_check.sh: done in $(( $(date +%s) - start )) s; full log in $log"
