#!/usr/bin/env bash
# Sustained load (issue 10): NODES emulated DGX H100 nodes on 127.0.0.1 (railyard up; EMULATE nodes per agent
# process), JOBS jobs pushed through the whole system in batches of BATCH every INTERVAL seconds (1-GPU `sleep
# SLEEP` jobs, every 10th a whole 8-GPU node), while a probe measures what a user sees:
#   - the dashboard's Jobs page   GET /api/v1/jobs?order=desc&limit=100
#   - the nodes list              GET /api/v1/nodes
#   - the CLI                     railyard show 1, and railyard queue --state RUNNING (wall time of each command)
# each every PROBE seconds, and the answer time of each batch POST ("batch"). Prints p50/p99/max per probe, jobs/s end to end, and the scheduler's RSS sampled
# every second (start, peak, end) and CPU seconds.
#
#   bench/load_run.sh [BUILD_DIR]     (default build/release)
#   env: NODES (1000) EMULATE (125) JOBS (50000) BATCH (1000) INTERVAL (2) SLEEP (1) PROBE (0.5) WAIT_S (1800)
# Build first: ninja -C build/release railyard railyard-scheduler railyard-agent
set -euo pipefail
BUILD=$(cd "${1:-build/release}" && pwd)
NODES=${NODES:-1000}
EMULATE=${EMULATE:-125}
JOBS=${JOBS:-50000}
BATCH=${BATCH:-1000}
INTERVAL=${INTERVAL:-2}
SLEEP=${SLEEP:-1}
PROBE=${PROBE:-0.5}
WAIT_S=${WAIT_S:-1800}
export PATH=$BUILD/cli:$BUILD/scheduler:$BUILD/agent:$PATH
WORK=$(mktemp -d /tmp/railyard-load.XXXXXX)
DIR=$WORK/cluster
TICK=$(getconf CLK_TCK)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  railyard down --state-dir "$DIR" --grace 2 >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s.%N; }
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $NODES nodes" \
  "($EMULATE per agent), $JOBS jobs in batches of $BATCH every $INTERVAL s, sleep $SLEEP"
t_up=$(now)
eval "$(railyard up --nodes "$NODES" --profile dgx-h100 --state-dir "$DIR" --port 0 --emulate-nodes "$EMULATE" \
  --no-config --timeout 300 2>>"$WORK/up.log")"
S=$RAILYARD_URL/api/v1
T=$RAILYARD_TOKEN
SCHED=$(awk '$2 == "scheduler" {print $1}' "$DIR/pids")
echo "cluster up in $(printf %.1f "$(echo "$(now) - $t_up" | bc)") s; scheduler pid $SCHED"

rss() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$SCHED/status"; }
cpu() { awk -v t="$TICK" '{printf "%.1f", ($14 + $15) / t}' "/proc/$SCHED/stat"; }
rss_start=$(rss)
cpu_start=$(cpu)

# Samplers: scheduler RSS every second; the probes every PROBE seconds.
(while kill -0 "$SCHED" 2>/dev/null; do rss >>"$WORK/rss"; echo >>"$WORK/rss"; sleep 1; done) &
PIDS+=($!)
(while :; do
   curl -s -o /dev/null -w '%{time_total}\n' "$S/jobs?order=desc&limit=100" >>"$WORK/p_jobs"
   curl -s -o /dev/null -w '%{time_total}\n' "$S/nodes" >>"$WORK/p_nodes"
   a=$(now); railyard show 1 --url "$RAILYARD_URL" >/dev/null 2>&1 || true
   echo "$(now) - $a" | bc >>"$WORK/p_cli_show"
   a=$(now); railyard queue --state RUNNING --url "$RAILYARD_URL" >/dev/null 2>&1 || true
   echo "$(now) - $a" | bc >>"$WORK/p_cli_queue"
   sleep "$PROBE"
 done) &
PIDS+=($!)

# Submitter.
t0=$(now)
sent=0
while ((sent < JOBS)); do
  n=$((JOBS - sent < BATCH ? JOBS - sent : BATCH))
  jq -nc --argjson n "$n" --arg w "$WORK" --arg s "$SLEEP" \
    '{jobs: [range($n) | {name: "load", gpus: (if . % 10 == 0 then 8 else 1 end), launcher: "env",
                          command: ["sleep", $s], workdir: $w, time_limit: "10m"}]}' >"$WORK/batch.json"
  curl -sf -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $T" --data-binary "@$WORK/batch.json" \
    "$S/jobs:batch" >>"$WORK/p_batch"
  sent=$((sent + n))
  sleep "$INTERVAL"
done
t_sub=$(echo "$(now) - $t0" | bc)
while :; do
  left=$(curl -sf "$S/jobs?state=PENDING,STARTING,RUNNING&limit=1" | jq '.jobs | length')
  [[ $left == 0 ]] && break
  if (($(echo "$(now) - $t0 > $WAIT_S" | bc))); then echo "gave up after $WAIT_S s" >&2; break; fi
  sleep 1
done
wall=$(echo "$(now) - $t0" | bc)
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
PIDS=()
done_n=$(curl -sf "$RAILYARD_URL/metrics" | awk '$1 == "railyard_jobs{state=\"COMPLETED\"}" {print $2}')
other=$(curl -sf "$RAILYARD_URL/metrics" | awk '$1 ~ /^railyard_jobs\{state="(FAILED|CANCELLED|TIMEOUT|NODE_FAIL)"\}/ {s += $2} END {print s + 0}')

pct() {  # pct FILE: "p50 p99 max" in ms, and the count
  sort -g "$1" | awk '{v[NR] = $1} END {printf "%.1f %.1f %.1f %d\n", v[int(NR * 0.5) + 1] * 1000, v[int(NR * 0.99) + 1] * 1000, v[NR] * 1000, NR}'
}
echo "submitted $JOBS in $(printf %.1f "$t_sub") s; all terminal after $(printf %.1f "$wall") s:" \
  "$done_n COMPLETED, $other other; $(printf %.0f "$(echo "$done_n / $wall" | bc -l)") jobs/s end to end"
echo "| probe | p50 ms | p99 ms | max ms | samples |"
echo "|---|---|---|---|---|"
for p in jobs nodes cli_show cli_queue batch; do read -r a b c d < <(pct "$WORK/p_$p"); echo "| $p | $a | $b | $c | $d |"; done
peak=$(sort -g "$WORK/rss" | tail -1)
echo "scheduler RSS MiB: start $rss_start, peak $peak, end $(rss); CPU s over the run: $(echo "$(cpu) - $cpu_start" | bc)"
