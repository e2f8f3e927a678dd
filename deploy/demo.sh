#!/usr/bin/env bash
# Builds Railyard (Release) and runs the main job of this stage: generate a reference DGX H100 SuperPOD,
# print its topology and a placement-cost table, then replay a slice of the Philly trace on it with the
# topology-aware and the first-fit policy side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
bin=build/release/cli/railyard
out=${RAILYARD_DEMO_DIR:-build/demo}
mkdir -p "$out"
"$bin" topo generate --preset dgx-h100-superpod --sus 4 -o "$out/h100-4su.json"
"$bin" topo show "$out/h100-4su.json"
echo
"$bin" topo table "$out/h100-4su.json"
trace=../shared/traces/philly_gavel.csv
if [ -f "$trace" ] && "$bin" sim --help >/dev/null 2>&1; then
  echo
  "$bin" sim --cluster "$out/h100-4su.json" --trace "$trace" --user 6c71a0 --limit 2000 --scale-gpus 8 \
    --policy railyard,first-fit,fifo
fi
