#!/usr/bin/env bash
# Installs the Python package (python/) into a fresh virtual environment and runs its tests against the nj given,
# as a user would: pip install ./python, then pytest. The venv sees Debian's numpy, h5py, scipy and pytest
# (scripts/setup.sh), so nothing comes from the network.
# Usage: run_pytest.sh SOURCE_DIR NJ_BINARY WORK_DIR
set -euo pipefail
source_dir=$1
export NJ_BINARY=$2
work=$3
rm -rf "$work"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
# From a copy: building writes build/ and *.egg-info beside the sources.
cp -r "$source_dir/python" "$work/source"
"$work/venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation --no-index "$work/source"
# Under mpirun as root (containers), Open MPI asks for consent.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$work"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$work/source/tests"
