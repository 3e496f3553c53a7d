#!/usr/bin/env bash
# Only the model area knows which layers exist: everything else follows what a layer declares (its dimensions,
# its AggregationTraits, its workspace), so that a new layer needs no change to the executors, the planner or
# the estimates (docs/architecture.md). Fails, naming the lines, where code outside src/model and
# include/nj/model names a layer type or a model kind.
set -euo pipefail
root="$1"
found=$(grep -rnE 'ModelKind::k[A-Z]|\b(Gcn|Gat)Layer\b|dynamic_cast<[^>]*Layer' "$root/src" "$root/include" \
  --include='*.cpp' --include='*.hpp' --include='*.cu' --include='*.cuh' |
  grep -vE "^$root/(src/model|include/nj/model)/" || true)
if [[ -n "$found" ]]; then
  echo "layer_types_test.sh: code outside the model area asks which layer it runs:" >&2
  echo "$found" >&2
  exit 1
fi
echo "layer_types_test.sh: only the model area names layer types"
