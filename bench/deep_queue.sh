#!/usr/bin/env bash
# What a deep queue of jobs waiting on a dependency costs the scheduler (issue 11: no per-pass full rescans).
# On a local cluster (`railyard up`, 1,024 emulated dgx-h100 nodes, 8 agents), one job runs `sleep` for the
# whole run (the anchor); then, before and after WAITING jobs that wait for it (`afterok`, one
# POST /jobs:batch) are queued, the same two one-call-per-job loops:
#   waiting  CALLS x `railyard submit --gpus 1 -d afterok:ANCHOR -- true` (each job waits too)
#   running  CALLS x `railyard submit --gpus 1 -- true` (each job starts and ends)
# For each: ms per call, the scheduler's CPU ms per call (utime + stime), the passes run and their mean
# time, and railyard_jobs_parked. Last, the anchor is cancelled and the pass that rejects every waiting job
# is reported. Figures: bench/RESULTS.md ("Deep queues").
#
#   bench/deep_queue.sh [-n WAITING] [-c CALLS] [-b BUILD_DIR]     (defaults 5000, 300, build/release)
#   RAILYARD_BIN_DIR=DIR: the scheduler and agent from DIR instead (e.g. an older build, to compare)
# Build first: ninja -C build/release railyard railyard-scheduler railyard-agent
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
WAITING=5000 CALLS=300 BUILD=$here/../build/release
while getopts "n:c:b:" opt; do
  case $opt in
    n) WAITING=$OPTARG ;;
    c) CALLS=$OPTARG ;;
    b) BUILD=$OPTARG ;;
    *) sed -n '2,14p' "$0"; exit 2 ;;
  esac
done
[[ $WAITING =~ ^[0-9]+$ && $CALLS =~ ^[1-9][0-9]*$ ]] || { echo "deep_queue: -n and -c take counts" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd)
export PATH=$BUILD/cli:$BUILD/scheduler:$BUILD/agent:$PATH
command -v jq >/dev/null || { echo "deep_queue: needs jq" >&2; exit 3; }
WORK=$(mktemp -d /tmp/railyard-deep.XXXXXX)
DIR=$WORK/cluster
trap 'railyard down --state-dir "$DIR" --grace 2 >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
TICK=$(getconf CLK_TCK)

eval "$(railyard up --nodes 1024 --profile dgx-h100 --state-dir "$DIR" --port 0 --emulate-nodes 128 \
  --no-config --timeout 120 2>>"$WORK/up.log")"
S=$RAILYARD_URL/api/v1
SCHED=$(awk '$2 == "scheduler" {print $1}' "$DIR/pids")
api() { curl -sf -H "Authorization: Bearer $RAILYARD_TOKEN" "$@"; }
metric() { api "$RAILYARD_URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SCHED/stat"; }

ANCHOR=$(railyard submit --gpus 1 --name anchor -- sleep 100000)
for _ in $(seq 100); do [[ $(api "$S/jobs/$ANCHOR" | jq -r .state) == RUNNING ]] && break; sleep 0.1; done

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo));" \
  "1,024 emulated dgx-h100 nodes, 8 agents; $CALLS calls per loop; scheduler $(readlink -f "${RAILYARD_BIN_DIR:-$BUILD/scheduler}/railyard-scheduler")"
echo
echo "| queued waiting jobs | loop | ms per call | scheduler CPU ms per call | passes | ms per pass | parked after |"
echo "|---|---|---|---|---|---|---|"
loop() {  # loop QUEUED NAME ARGS...: one row
  local queued=$1 name=$2 c0 c1 t0 t1 s0 s1 n0 n1
  shift 2
  sleep 1
  c0=$(cpu_ticks) s0=$(metric railyard_scheduling_pass_seconds_sum) n0=$(metric railyard_scheduling_pass_seconds_count)
  t0=$(date +%s%N)
  for ((i = 0; i < CALLS; i++)); do railyard submit "$@" >/dev/null; done
  t1=$(date +%s%N)
  sleep 1  # the passes and ends the last calls caused
  c1=$(cpu_ticks) s1=$(metric railyard_scheduling_pass_seconds_sum) n1=$(metric railyard_scheduling_pass_seconds_count)
  awk -v q="$queued" -v l="$name" -v t="$(((t1 - t0) / 1000))" -v c="$((c1 - c0))" -v k="$TICK" -v n="$CALLS" \
    -v s0="$s0" -v s1="$s1" -v n0="$n0" -v n1="$n1" -v p="$(metric railyard_jobs_parked)" 'BEGIN {
      passes = n1 - n0
      per_pass = passes > 0 ? 1000 * (s1 - s0) / passes : 0
      printf "| %d | %s | %.2f | %.2f | %d | %.2f | %s |\n", q, l, t / n / 1000, 1000 * c / k / n, passes,
        per_pass, p }'
}
loop 0 waiting --gpus 1 -d "afterok:$ANCHOR" -- true
loop 0 running --gpus 1 -- true

if ((WAITING > 0)); then
  for ((left = WAITING; left > 0; left -= 10000)); do  # POST /jobs:batch takes 10,000 at most
    jq -nc --argjson n "$((left < 10000 ? left : 10000))" --arg d "afterok:$ANCHOR" \
      '{jobs: [range($n) | {name: "deep", gpus: 1, command: ["true"], dependency: $d}]}' > "$WORK/batch.json"
    api -o /dev/null --data-binary @"$WORK/batch.json" "$S/jobs:batch"
  done
  loop "$WAITING" waiting --gpus 1 -d "afterok:$ANCHOR" -- true
  loop "$WAITING" running --gpus 1 -- true
fi

railyard cancel "$ANCHOR" >/dev/null
for _ in $(seq 300); do
  [[ $(metric 'railyard_jobs{state="PENDING"}') == 0 ]] && break
  sleep 0.1
done
echo
echo "Anchor cancelled, every waiting job rejected by one pass:"
grep "rejected" "$DIR/scheduler.log" | grep -v " 0 rejected" | tail -1 | sed 's/^.*pass: /  pass: /'
