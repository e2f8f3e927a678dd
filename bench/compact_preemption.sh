#!/usr/bin/env bash
# Compact preemption (issue 31, the optional item): a high-QoS multi-node job may preempt scavenger work to
# start on its fewest leaf groups. `railyard sim` on the synthetic mix with half the jobs above 8 GPUs high and
# half those of 8 or fewer scavenger (`--synth ...,high=0.5,scavenger=0.5`), railyard with preemption and with
# `--no-preemption`, on the two clusters of bench/lib/sim-clusters.sh at offered loads 0.8 / 1.0 / 1.2.
# Preempted jobs keep the work they did (perfect checkpointing). Prints the markdown table of
# bench/RESULTS.md, "Compact preemption": per QoS, mean wait and JCT and multi-node jobs at their minimum, each
# the mean over the seeds' traces.
# Usage: bench/compact_preemption.sh [RAILYARD_BINARY] [SEEDS]   (default build/release/cli/railyard, "1 2 3")
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/sim-clusters.sh "$@"
seeds=${2:-1 2 3}
echo "| cluster | load | preemption | min leaf span: all / high | mean JCT (s): all / high / scavenger | mean wait (s): high | preemptions |"
echo "|---|---|---|---|---|---|---|"
for c in "${clusters[@]}"; do
  name=${c%%:*}; args=${c#*:}
  for load in 0.8 1.0 1.2; do
    for mode in on off; do
      flag=(); [ "$mode" = off ] && flag=(--no-preemption)
      for seed in $seeds; do
        # shellcheck disable=SC2086
        "$R" sim $args --synth "jobs=5000,seed=$seed,high=0.5,scavenger=0.5" --load "$load" --policy railyard \
          "${flag[@]}" --jobs-out "$tmp/jobs-$seed.csv" --json >"$tmp/out-$seed.json"
      done
      python3 - "$tmp" "$name" "$load" "$mode" $seeds <<'PY'
import csv, json, sys
tmp, name, load, mode, seeds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")
figures = []
for seed in seeds:
    rows = [r for r in csv.DictReader(open("%s/jobs-%s.csv" % (tmp, seed))) if r["end_s"]]
    of = lambda qos: [r for r in rows if qos is None or r["qos"] == qos]
    span = lambda rs: 100 * mean([r["leaves_spanned"] == r["min_leaves"] for r in rs if int(r["nodes"]) > 1])
    jct = lambda rs: mean([float(r["end_s"]) - float(r["submit_s"]) for r in rs])
    wait = lambda rs: mean([float(r["start_s"]) - float(r["submit_s"]) for r in rs])
    preemptions = json.load(open("%s/out-%s.json" % (tmp, seed)))["policies"]["railyard"]["preemptions"]
    figures.append((span(of(None)), span(of("high")), jct(of(None)), jct(of("high")), jct(of("scavenger")),
                    wait(of("high")), preemptions))
m = [mean([f[i] for f in figures]) for i in range(7)]
print("| %s | %s | %s | %.1f %% / %.1f %% | %.0f / %.0f / %.0f | %.0f | %.0f |" % (name, load, mode, *m))
PY
    done
  done
done
