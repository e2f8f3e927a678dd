#!/bin/sh
# The layer check (cmake/check_layers.cmake) on a scratch tree: an include that points up a layer fails with
# the file and the header named; the same include from the layer above, and any include in a test, passes.
set -eu
cmake_bin=$1 script=$2
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/scheduler/placement" "$tree/scheduler/core" "$tree/scheduler/tests" "$tree/workloads"
printf '#include "scheduler/model/usage.hpp"\n#include <vector>\n' > "$tree/scheduler/placement/placer.hpp"
printf '#include "jobs/mllog.hpp"\n#include "workloads/dataset.hpp"\n' > "$tree/workloads/trainer.hpp"
printf '#include "scheduler/placement/placer.hpp"\n' > "$tree/scheduler/core/cycle.hpp"
printf '#include "scheduler/daemon/service.hpp"\n' > "$tree/scheduler/tests/any_test.cpp"
"$cmake_bin" -DROOT="$tree" -P "$script" || { echo "FAIL: a tree with only downward includes was refused"; exit 1; }

printf '#include "scheduler/core/cycle.hpp"\n' >> "$tree/scheduler/placement/placer.hpp"
if out=$("$cmake_bin" -DROOT="$tree" -P "$script" 2>&1); then
  echo "FAIL: placement including core passed the layer check"; exit 1
fi
echo "$out" | grep -q 'scheduler/placement/placer.hpp includes scheduler/core/cycle.hpp: above its layer' || {
  echo "FAIL: the error does not name the file and header:"; echo "$out"; exit 1; }

# The worker programs (workloads/) take MLLOG from jobs/ (passed above) but nothing from the agent.
printf '#include "scheduler/model/usage.hpp"\n' > "$tree/scheduler/placement/placer.hpp"
printf '#include "agent/streams/metrics.hpp"\n' >> "$tree/workloads/trainer.hpp"
if out=$("$cmake_bin" -DROOT="$tree" -P "$script" 2>&1); then
  echo "FAIL: workloads including the agent passed the layer check"; exit 1
fi
echo "$out" | grep -q 'workloads/trainer.hpp includes agent/streams/metrics.hpp: above its layer' || {
  echo "FAIL: the error does not name the workloads file and header:"; echo "$out"; exit 1; }
echo "ok: upward include refused"
