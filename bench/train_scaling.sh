#!/usr/bin/env bash
# Scaling of `railyard-train` (issue 7) on a local cluster that `railyard up` starts on 127.0.0.1:
# `railyard-train --backend mpi --target-accuracy 0.95` through the mpi launcher on 1, 2 and 4 emulated
# dgx-h100 nodes, GPUS_PER_NODE ranks per node (default 2: the machine has 2 cores), REPS runs each.
# Per run: time-to-train as the scheduler recorded it (run_stop - run_start), throughput (median of the
# trainer's per-epoch `tracked_stats` throughput, in samples/s, from GET /jobs/ID/metrics) and the wall time
# from submit to the job's end. Prints a markdown table of medians.
#
#   bench/train_scaling.sh [BUILD_DIR]          (default build/release)
#   env: REPS (3), GPUS_PER_NODE (2), NODES ("1 2 4"), TARGET (0.95)
# Build first: ninja -C build/release railyard railyard-scheduler railyard-agent railyard-agent-exec railyard-train
set -euo pipefail
BUILD=$(cd "${1:-build/release}" && pwd)
REPS=${REPS:-3}
GPN=${GPUS_PER_NODE:-2}
NODES=${NODES:-1 2 4}
TARGET=${TARGET:-0.95}
export PATH=$BUILD/cli:$BUILD/scheduler:$BUILD/agent:$BUILD/workloads:$PATH
TRAIN=$BUILD/workloads/railyard-train
WORK=$(mktemp -d /tmp/railyard-train.XXXXXX)
MAXN=$(printf '%s\n' $NODES | sort -n | tail -1)
DIR=$WORK/cluster

cleanup() {
  railyard down --state-dir "$DIR" --grace 2 >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

median() { sort -g | awk '{v[NR] = $1} END {if (NR) printf "%.3f", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2}'; }
now() { date +%s.%N; }

# One agent process per node, as on a real cluster.
eval "$(railyard up --nodes "$MAXN" --profile dgx-h100 --state-dir "$DIR" --port 0 --no-config --timeout 120 \
  2>>"$WORK/up.log")"
S=$RAILYARD_URL/api/v1

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# railyard-train --backend mpi --target-accuracy $TARGET, mpi launcher, $GPN ranks per node, $REPS runs each"
echo
echo "| nodes | ranks | time-to-train s (median) | all runs s | samples/s (median) | submit -> end s (median) | status |"
echo "|---:|---:|---:|---|---:|---:|---|"
for n in $NODES; do
  ttts=() tputs=() walls=() states=()
  for r in $(seq "$REPS"); do
    t0=$(now)
    id=$(railyard submit --nodes "$n" --gpus-per-node "$GPN" --launcher mpi --name "train-${n}n" \
      --target "accuracy=$TARGET" --workdir "$WORK" -- "$TRAIN" --backend mpi --target-accuracy "$TARGET")
    while :; do
      job=$(curl -sf "$S/jobs/$id")
      st=$(jq -r .state <<<"$job")
      [[ $st =~ ^(PENDING|STARTING|RUNNING)$ ]] || break
      sleep 0.05
    done
    t1=$(now)
    ttt=$(jq -r '.time_to_train_s // "nan"' <<<"$job")
    tput=$(curl -sf "$S/jobs/$id/metrics" |
      jq -r '[.samples[] | select(.key == "throughput") | .data.value // empty] | sort
             | if length == 0 then "nan" else .[(length / 2 | floor)] end')
    ttts+=("$ttt") tputs+=("$tput") walls+=("$(echo "$t1 - $t0" | bc)") states+=("$st")
    echo "  $n nodes, run $r: job $id $st, time-to-train $ttt s, $tput samples/s, submit -> end ${walls[-1]} s" >&2
  done
  printf '| %d | %d | %s | %s | %.0f | %s | %s |\n' "$n" "$((n * GPN))" "$(printf '%s\n' "${ttts[@]}" | median)" \
    "$(printf '%s\n' "${ttts[@]}" | xargs printf '%.3f ' | sed 's/ $//')" \
    "$(printf '%s\n' "${tputs[@]}" | median)" "$(printf '%s\n' "${walls[@]}" | median)" \
    "$(printf '%s\n' "${states[@]}" | sort | uniq -c | awk '{printf "%s %s x%s", sep, $2, $1; sep = ","}' | sed 's/^ //')"
done
