#!/usr/bin/env bash
# Issue 31's placement targets over more than one sample: railyard against first-fit on six synthetic traces
# (seeds 1-6 of the mixed workload) and on the six largest Philly virtual clusters (their first 2,000 jobs, ×8 GPUs),
# at offered loads 0.5 / 0.8 / 1.0 / 1.2, on the non-blocking 4-SU pod and the 2:1 tree of
# bench/placement_sweep.sh. Prints one markdown table per cluster and workload: the mean and the worst
# sample of each figure (bench/RESULTS.md, "Placement under contention", "Over several samples").
# Usage: bench/placement_samples.sh [RAILYARD_BINARY]   (default build/release/cli/railyard)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/sim-clusters.sh "$@"
users=(11cb48 6214e9 6c71a0 b436b2 ee9e8c 0e4a51)

# One run: prints "load span jct_ratio bsd_ratio p99_ratio" (ratios railyard / first-fit).
run() {
  local load=$1
  shift
  "$R" sim "$@" --policy railyard,first-fit --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["policies"]
r, f = d["railyard"], d["first-fit"]
print(sys.argv[1], 100 * r["min_span_share"], r["mean_jct_s"] / f["mean_jct_s"],
      r["mean_bounded_slowdown"] / f["mean_bounded_slowdown"], r["p99_wait_s"] / max(f["p99_wait_s"], 1))
' "$load"
}

for c in "${clusters[@]}"; do
  name=${c%%:*}
  read -r -a args <<<"${c#*:}"
  for w in synth philly; do
    out="$tmp/$name-$w.txt"
    : >"$out"
    for load in 0.5 0.8 1.0 1.2; do
      for i in 0 1 2 3 4 5; do
        if [ "$w" = synth ]; then workload synth "$load" $((i + 1)); else workload philly "$load" "${users[$i]}"; fi
        run "$load" "${args[@]}" "${src[@]}" >>"$out" &
        if (( i % 2 == 1 )); then wait; fi
      done
    done
    wait
    echo
    echo "### $name, $w (6 samples)"
    echo
    echo "| load | min leaf span: mean / worst | mean JCT vs first-fit: mean / worst | bounded slowdown vs first-fit: mean / worst | p99 wait / first-fit's: worst |"
    echo "|---|---|---|---|---|"
    python3 - "$out" <<'PY'
import collections, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    load, span, jct, bsd, p99 = line.split()
    rows[load].append((float(span), float(jct), float(bsd), float(p99)))
pct = lambda x: "%+.1f %%" % (100 * (x - 1))
for load in sorted(rows):
    v = rows[load]
    n = len(v)
    print("| %s | %.1f %% / %.1f %% | %s / %s | %s / %s | %.2fx |" % (
        load, sum(x[0] for x in v) / n, min(x[0] for x in v),
        pct(sum(x[1] for x in v) / n), pct(max(x[1] for x in v)),
        pct(sum(x[2] for x in v) / n), pct(max(x[2] for x in v)), max(x[3] for x in v)))
PY
  done
done
