#!/usr/bin/env bash
# Only the model area knows which layers exist: everything else follows what a layer declares (its dimensions,
# its AggregationTraits, its workspace), so that a new layer needs no change to the executors, the planner or
# the estimates (docs/architecture.md). Fails, naming the lines, where code outside src/model and
# include/nj/model names a layer type or a model kind.
set -euo pipefail
cd "$1"
pattern='ModelKind::k[A-Z]|\b(Gcn|Gat|Sage|Gin|Dense|Propagation)Layer\b|dynamic_cast<[^>]*Layer'
# The pattern must catch what it is for, or the check below proves nothing.
for sample in 'if (kind == ModelKind::kGat)' 'const GcnLayer& g' 'dynamic_cast<const GatLayer*>(&l)'; do
  grep -qE "$pattern" <<<"$sample" || { echo "layer_types_test.sh: the pattern misses '$sample'" >&2; exit 1; }
done
status=0
found=$(grep -rnE "$pattern" src include --include='*.cpp' --include='*.hpp' --include='*.cu' --include='*.cuh') ||
  status=$?
((status <= 1)) || { echo "layer_types_test.sh: grep failed in $PWD" >&2; exit 1; }
found=$(grep -vE '^(src/model|include/nj/model)/' <<<"$found" || true)
if [[ -n "$found" ]]; then
  echo "layer_types_test.sh: code outside the model area asks which layer it runs:" >&2
  echo "$found" >&2
  exit 1
fi
echo "layer_types_test.sh: only the model area names layer types"
