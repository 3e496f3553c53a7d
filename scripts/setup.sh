#!/usr/bin/env bash
# Installs the dependencies from Debian 12 packages: with `nj`, only what building and running nj takes (what
# scripts/quickstart.sh needs); otherwise every build, test and tool dependency. Idempotent: packages already present
# are skipped, so a second run costs one dpkg query.
#
#   scripts/setup.sh [nj|all]
set -euo pipefail
scope=${1:-all}
[[ $scope == nj || $scope == all ]] || { echo "usage: scripts/setup.sh [nj|all]" >&2; exit 2; }

packages=(
  build-essential cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev
  libmetis-dev
  libptscotch-dev # nj partition on many ranks: PT-Scotch's 64-bit flavour (scotch-int64)
  libhdf5-openmpi-dev
  libopenblas-openmp-dev # nj links the OpenMP build (NJ_OPENBLAS_VARIANT)
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
)
if [[ $scope == all ]]; then
  packages+=(
    git hdf5-tools
    libopenblas-pthread-dev # the tsan preset links OpenBLAS's pthread build
    libgtest-dev libgmock-dev libbenchmark-dev
    python3 python3-numpy python3-scipy python3-h5py python3-matplotlib
    python3-venv flit python3-pytest # tests/python/run_pytest.sh: the Python package, built by flit_core (Debian's flit) and installed with pip into a venv
    slurm-wlm munge
    clang libclang-rt-14-dev # scripts/fuzz.sh: libFuzzer and the sanitizer runtimes
    libomp-dev # the tsan preset (scripts/test-sanitizers.sh): LLVM's OpenMP runtime and Archer, which TSan understands
    time # MemoryLogsCli and the benchmarks: GNU time's maxrss of a finished process
  )
fi
# Extra packages for optional tasks, e.g. NJ_SETUP_EXTRA="python3-torch" for the PyTorch baseline benchmark.
read -r -a extra <<<"${NJ_SETUP_EXTRA:-}"
packages+=("${extra[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
