#!/usr/bin/env bash
# Load sweeps of placement under contention (issue 31): every policy of `railyard sim` on a synthetic mixed
# workload, the Philly slice of the demo and the Alibaba openb trace (bench/lib/sim-clusters.sh, `workload`),
# at offered loads 0.5 / 0.8 / 1.0 / 1.2, on a non-blocking
# 4-SU DGX H100 SuperPOD and on a 2:1 oversubscribed fat tree of the same size. Prints one markdown table
# per cluster and workload (the tables in bench/RESULTS.md, "Placement under contention").
# Usage: bench/placement_sweep.sh [RAILYARD_BINARY]   (default build/release/cli/railyard)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/sim-clusters.sh "$@"
for c in "${clusters[@]}"; do
  name=${c%%:*}; args=${c#*:}
  for w in synth philly alibaba; do
    echo
    echo "### $name, $w"
    echo
    echo "| load | policy | min leaf span | mean JCT (s) | mean bounded slowdown | p99 wait (s) | mean comm slowdown | wall (s) |"
    echo "|---|---|---|---|---|---|---|---|"
    for load in 0.5 0.8 1.0 1.2; do
      workload "$w" "$load"
      # shellcheck disable=SC2086
      "$R" sim $args "${src[@]}" --policy railyard,first-fit,fifo,slurm-tree --json |
        python3 -c '
import json, sys
d = json.load(sys.stdin)["policies"]
for name in ["railyard", "first-fit", "fifo", "slurm-tree"]:
    p = d[name]
    print("| %s | %s | %.1f %% | %.0f | %.2f | %.0f | %.4f | %.2f |" % (sys.argv[1], name, 100 * p["min_span_share"],
          p["mean_jct_s"], p["mean_bounded_slowdown"], p["p99_wait_s"], p["mean_comm_slowdown"], p["wall_s"]))
' "$load"
    done
  done
done
