#!/usr/bin/env bash
# Installs the Python package (python/) into a fresh virtual environment and runs its tests against the nj given,
# as a user would: pip install straight from the source folder, then pytest. Fails if the install left a file in
# the source folder. The venv sees Debian's numpy, h5py, scipy, pytest and flit_core (scripts/setup.sh), so nothing
# comes from the network.
# Usage: run_pytest.sh SOURCE_DIR NJ_BINARY WORK_DIR
set -euo pipefail
source_dir=$1
export NJ_BINARY=$2
work=$3
package=$source_dir/python
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
find "$package" | sort >"$work/before.txt"
"$work/venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation --no-index "$package"
find "$package" | sort >"$work/after.txt"
if ! diff "$work/before.txt" "$work/after.txt" >"$work/install-left.txt"; then
  echo "run_pytest.sh: installing wrote into $package:" >&2
  cat "$work/install-left.txt" >&2
  exit 1
fi
# Under mpirun as root (containers), Open MPI asks for consent.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Nor does pytest write there: no cache, no bytecode.
export PYTHONDONTWRITEBYTECODE=1
cd "$work"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$package/tests"
