#!/usr/bin/env bash
# Local-cluster benchmarks (issue 6), on clusters that `railyard up` starts on 127.0.0.1:
#  1. launch latency: submit -> job RUNNING (the scheduler marks an `env` job RUNNING once every node's agent
#     has reported its ranks launched) for 8, 64 and 512 ranks = 1, 8 and 64 emulated dgx-h100 nodes x 8
#     GPUs, `sleep 5` as the command, REPS runs each. Measured by polling GET /jobs/ID every 10 ms (the
#     events' times are whole seconds); the rank processes seen under the agents at that moment are counted.
#  2. throughput: JOBS trivial jobs (1 GPU, `true`) on 128 emulated nodes, submitted in one
#     POST /jobs:batch, until all are terminal (jobs/s).
# For each cluster the scheduler's CPU seconds (utime + stime) and peak RSS (VmHWM), and the agents' CPU
# seconds, are printed (cumulative from the cluster's start).
#
#   bench/local_cluster.sh [BUILD_DIR]          (default build/release)
#   env: REPS (3), JOBS (10000), PER_AGENT (8: emulated nodes per agent process in the latency runs),
#        SIZES ("1 8 64": nodes per latency run), WAIT_S (900: give up waiting for the throughput run),
#        HA (0; 3: every cluster with 3 etcd members and 3 schedulers, for the cost of HA)
# Build first: ninja -C build/release railyard railyard-scheduler railyard-agent (HA needs etcd installed)
set -euo pipefail
BUILD=$(cd "${1:-build/release}" && pwd)
REPS=${REPS:-3}
JOBS=${JOBS:-10000}
PER_AGENT=${PER_AGENT:-8}
SIZES=${SIZES-1 8 64}  # "" skips the latency runs
WAIT_S=${WAIT_S:-900}
HA=${HA:-0}  # 3: `railyard up --ha 3` (3 etcd members, 3 schedulers); the figures are the leader's
export PATH=$BUILD/cli:$BUILD/scheduler:$BUILD/agent:$BUILD/workloads:$PATH
WORK=$(mktemp -d /tmp/railyard-bench.XXXXXX)
DIR=""
TICK=$(getconf CLK_TCK)

cleanup() {
  if [[ -n $DIR ]]; then railyard down --state-dir "$DIR" --grace 2 >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

up() {  # up NODES PER_AGENT: start a cluster in a fresh state dir; sets DIR, S, T, SCHED, AGENTS
  DIR=$WORK/c$1
  eval "$(railyard up --nodes "$1" --profile dgx-h100 --state-dir "$DIR" --port 0 --emulate-nodes "$2" \
    --no-config --timeout 120 $( ((HA > 0)) && echo --ha "$HA") 2>"$WORK/up.log")"
  S=${RAILYARD_URL%%,*}/api/v1  # with --ha the leader's address comes first
  T=$RAILYARD_TOKEN
  SCHED=$(sed -n 's/.*scheduler pid \([0-9]*\).*/\1/p' "$WORK/up.log" | tail -1)
  AGENTS=$(awk '$2 == "agent" {print $1}' "$DIR/pids" | paste -sd,)
}

down() {
  railyard down --state-dir "$DIR" --grace 2 >/dev/null
  DIR=""
}

usage() {  # "SCHEDULER_CPU_S SCHEDULER_PEAK_RSS_MIB AGENTS_CPU_S" so far
  local cpu hwm agents
  cpu=$(awk -v t="$TICK" '{printf "%.2f", ($14 + $15) / t}' "/proc/$SCHED/stat")
  hwm=$(awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$SCHED/status")
  agents=$(for p in ${AGENTS//,/ }; do cat "/proc/$p/stat"; done | awk -v t="$TICK" '{s += $14 + $15} END {printf "%.2f", s / t}')
  echo "$cpu $hwm $agents"
}

state() { curl -sf "$S/jobs/$1" | jq -r .state; }

ranks_running() {  # rank processes (the job's command) whose parent is one of the agents
  ps -eo ppid=,comm= | awk -v a=",$AGENTS," -v c="$1" 'index(a, "," $1 ",") && $2 == c' | wc -l
}

now() { date +%s.%N; }

latency() {  # latency NODES
  local nodes=$1 ranks=$(($1 * 8)) per=$PER_AGENT id t0 t1 st seen lat=() agents sorted med cpu hwm acpu
  ((per > nodes)) && per=$nodes
  up "$nodes" "$per"
  agents=$(awk '$2 == "agent"' "$DIR/pids" | wc -l)
  for r in $(seq "$REPS"); do
    t0=$(now)
    id=$(curl -sf -H "Authorization: Bearer $T" \
      -d "{\"name\": \"lat$ranks\", \"nodes\": $nodes, \"gpus_per_node\": 8, \"launcher\": \"env\",
           \"command\": [\"sleep\", \"5\"], \"workdir\": \"$WORK\"}" "$S/jobs" | jq -r .id)
    while :; do
      st=$(state "$id")
      [[ $st == RUNNING ]] && break
      case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL)
        echo "job $id ended $st before RUNNING" >&2; break ;;
      esac
      sleep 0.01
    done
    t1=$(now)
    seen=$(ranks_running sleep)
    lat+=("$(printf %.3f "$(echo "$t1 - $t0" | bc)")")
    echo "  ${ranks} ranks, ${nodes} nodes, run $r: job $id $st after ${lat[-1]} s; rank processes seen: $seen" >&2
    while [[ $(state "$id") =~ ^(PENDING|STARTING|RUNNING)$ ]]; do sleep 0.2; done
  done
  sorted=$(printf '%s\n' "${lat[@]}" | sort -g | paste -sd' ')
  med=$(printf '%s\n' "${lat[@]}" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  read -r cpu hwm acpu < <(usage)
  printf '| %d | %d | %d | %.3f | %s | %s | %s | %s |\n' "$ranks" "$nodes" "$agents" "$med" "$sorted" "$cpu" "$hwm" "$acpu"
  down
}

throughput() {  # throughput NODES JOBS
  local nodes=$1 jobs=$2 t0 t1 left start_usage done_n failed agents t_sub wall cpu hwm acpu
  up "$nodes" 64
  agents=$(awk '$2 == "agent"' "$DIR/pids" | wc -l)
  start_usage=$(usage)
  jq -nc --argjson n "$jobs" --arg w "$WORK" \
    '{jobs: [range($n) | {name: "t", gpus: 1, launcher: "env", command: ["true"], workdir: $w}]}' \
    >"$WORK/batch.json"
  t0=$(now)
  curl -sf -H "Authorization: Bearer $T" --data-binary "@$WORK/batch.json" "$S/jobs:batch" | jq '.ids | length' >/dev/null
  t_sub=$(printf %.3f "$(echo "$(now) - $t0" | bc)")
  while :; do
    left=$(curl -sf "$S/jobs?state=PENDING,STARTING,RUNNING&limit=1" | jq '.jobs | length')
    [[ $left == 0 ]] && break
    if (($(echo "$(now) - $t0 > $WAIT_S" | bc))); then echo "  gave up after $WAIT_S s" >&2; break; fi
    sleep 0.2
  done
  t1=$(now)
  done_n=$(curl -sf "$S/jobs?state=COMPLETED&limit=10000" | jq '.jobs | length')
  failed=$(curl -sf "$S/jobs?state=FAILED,CANCELLED,TIMEOUT,NODE_FAIL&limit=10000" | jq '.jobs | length')
  read -r cpu hwm acpu < <(usage)
  wall=$(echo "$t1 - $t0" | bc)
  echo "  batch of $jobs accepted in $t_sub s; at start: scheduler CPU s, peak RSS MiB, agents CPU s = $start_usage" >&2
  printf '| %d | %d | %d | %.3f | %.1f | %.0f | %d | %d | %s | %s | %s |\n' "$jobs" "$nodes" "$agents" "$t_sub" "$wall" \
    "$(echo "$done_n / $wall" | bc -l)" "$done_n" "$failed" "$cpu" "$hwm" "$acpu"
  down
}

echo "# $( ((HA > 0)) && echo "railyard up --ha $HA, ")$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Launch latency, submit -> RUNNING (all ranks launched), env launcher, \`sleep 5\`; $REPS runs:"
echo
echo "| ranks | nodes | agent processes | median s | all runs s | scheduler CPU s | scheduler peak RSS MiB | agents CPU s |"
echo "|---:|---:|---:|---:|---|---:|---:|---:|"
for n in $SIZES; do latency "$n"; done
echo
echo "Throughput, $JOBS jobs (1 GPU, \`true\`) in one POST /jobs:batch, until all are terminal:"
echo
echo "| jobs | nodes | agent processes | submit s | wall s | jobs/s | completed | failed | scheduler CPU s | scheduler peak RSS MiB | agents CPU s |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
throughput 128 "$JOBS"
