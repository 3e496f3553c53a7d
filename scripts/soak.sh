#!/usr/bin/env bash
# Soak: a 2-rank job trains a GAT for 500 epochs on a generated graph (40,000 vertices) within 10 % of the device
# memory its largest rank needs, while each rank's resident memory is sampled every second; then the same job
# trains without a budget (in-memory execution). Fails when a rank's resident memory grows after the warm-up
# (epoch 20) by more than 2 % or 4 MiB, or when the two executors do not compute the same function (the loss at
# the same weights, at the start and after 500 epochs, and one more step from there, within 1e-5 relative).
# Writes docs/plots/soak-rss.png and prints a summary (docs/reliability.md, "Soak"). About 45 minutes on two
# busy cores. The logic is scripts/soak.py; its options (--epochs, --vertices, --model, --budget-percent, ...) may
# be given here.
#
# Environment:
#   NJ_BIN     nj binary                (default: build/nj)
#   SOAK_DIR   graph, runs and samples  (default: data/generated/soak, git-ignored)
#   PYTHON     interpreter with numpy, h5py and matplotlib (default: /usr/bin/python3)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
exec "${PYTHON:-/usr/bin/python3}" scripts/soak.py --nj "${NJ_BIN:-build/nj}" --work "${SOAK_DIR:-data/generated/soak}" "$@"
