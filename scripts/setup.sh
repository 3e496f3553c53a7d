#!/usr/bin/env bash
# Installs every build, test and tool dependency from Debian 12 packages. Idempotent: packages already
# present are skipped, so a second run costs one dpkg query.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev
  libmetis-dev
  libhdf5-openmpi-dev hdf5-tools
  libopenblas-openmp-dev libopenblas-pthread-dev # nj links the OpenMP build (NJ_OPENBLAS_VARIANT), the tsan preset the pthread one
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
  python3 python3-numpy python3-scipy python3-h5py python3-matplotlib
  python3-venv flit python3-pytest # tests/python/run_pytest.sh: the Python package, built by flit_core (Debian's flit) and installed with pip into a venv
  slurm-wlm munge
  clang libclang-rt-14-dev # scripts/fuzz.sh: libFuzzer and the sanitizer runtimes
  libomp-dev # the tsan preset (scripts/test-sanitizers.sh): LLVM's OpenMP runtime and Archer, which TSan understands
)
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
