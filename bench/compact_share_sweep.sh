#!/usr/bin/env bash
# The compact wait's share (issue 31): railyard against first-fit in the same run on the Philly slice and the
# synthetic mix, on the non-blocking pod and the 2:1 tree, at loads 0.5 / 0.8 / 1.0 / 1.2, for several
# --compact-wait-share values (a wait that buys the job no speed by the cost model lasts at most that many
# time limits). Prints the markdown table of bench/RESULTS.md, "The compact wait's share".
# Usage: bench/compact_share_sweep.sh [RAILYARD_BINARY] [SHARES]   (default build/release/cli/railyard, "4 8 12 16 24")
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/sim-clusters.sh "$@"
shares=${2:-4 8 12 16 24}
echo "| cluster | workload | share | load | min leaf span | mean JCT vs first-fit | mean bounded slowdown vs first-fit | p99 wait vs first-fit |"
echo "|---|---|---|---|---|---|---|---|"
for c in "${clusters[@]}"; do
  name=${c%%:*}; args=${c#*:}
  for w in philly synth; do
    for share in $shares; do
      for load in 0.5 0.8 1.0 1.2; do
        workload "$w" "$load"
        # shellcheck disable=SC2086
        "$R" sim $args "${src[@]}" --policy railyard,first-fit --compact-wait-share "$share" --json |
          python3 -c '
import json, sys
d = json.load(sys.stdin)["policies"]
r, f = d["railyard"], d["first-fit"]
print("| %s | %s | %s | %s | %.1f %% | %+.1f %% | %+.1f %% | %.2fx |" % (*sys.argv[1:5], 100 * r["min_span_share"],
      100 * (r["mean_jct_s"] / f["mean_jct_s"] - 1), 100 * (r["mean_bounded_slowdown"] / f["mean_bounded_slowdown"] - 1),
      r["p99_wait_s"] / f["p99_wait_s"]))
' "$name" "$w" "$share" "$load"
      done
    done
  done
done
