#!/usr/bin/env bash
# Controller high availability (issues 30, 46): the cost of HA on the submit path and the takeover time.
#
#   bench/ha_takeover.sh [BUILD_DIR] [KILLS] [SECONDS] [JOBS]
#       (default build/release, 10 kills, 10 s per load run, 100000 jobs in the state for the takeovers)
#   HA_BENCH_COST=0: the takeovers only. HA_TTL: the lease TTL (default 5 s).
#
# Submit cost, side by side in one run: daemon_load with 1, 8 and 64 keep-alive clients, one job per request,
# each with its own idempotency key (as the CLI sends them), against (a) one scheduler without HA, (b) the HA
# leader with the state replicated through 3 etcd members (two standbys following), (c) the HA leader on a
# shared database (--ha-state shared); each on a fresh database of the same 2-node cluster. Prints submits/s,
# the p50/p99 of a submit's answer, and the CPU seconds each scheduler and etcd member used in the run.
# Takeover: 3 etcd members, 3 schedulers with replicated state (--ha-ttl $HA_TTL, default 5), JOBS pending jobs
# in the state (POST /jobs:batch of 1,000), an agent with 2 emulated nodes; KILLS times: SIGKILL the leader,
# then POST a job to the other two every 50 ms until one answers 201 (an idempotency key per round): the time
# from the kill to that 201. The killed scheduler is restarted as a standby before the next round.
set -euo pipefail
BUILD=$(cd "${1:-build/release}" && pwd)
KILLS=${2:-10}
SECS=${3:-10}
JOBS=${4:-100000}
export RAILYARD_SCHEDULER=$BUILD/scheduler/railyard-scheduler RAILYARD_AGENT=$BUILD/agent/railyard-agent \
  RAILYARD_CLI=$BUILD/cli/railyard
LOAD=$BUILD/tests/daemon_load
export HA_TTL=${HA_TTL:-5}
source "$(dirname "$0")/../tests/ha/lib.sh"
trap ha_cleanup EXIT
ha_require
[ -x "$LOAD" ] || ha_fail "$LOAD is not built (cmake --build --preset release --target daemon_load)"

ha_start_etcd 3
ha_setup_cluster

stop_sched() { kill -TERM "${HA_PID[$1]}" 2>/dev/null || true; wait "${HA_PID[$1]}" 2>/dev/null || true; unset "HA_PID[$1]"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
load() {  # load PORT TOKEN LABEL PROCESS...: each PROCESS's CPU seconds in the run are printed after it
  local port=$1 token=$2 label=$3
  shift 3
  for clients in 1 8 64; do
    printf '%-24s %2d client(s): ' "$label" "$clients"
    local before=()
    for p in "$@"; do before+=("$(ticks "${HA_PID[$p]}")"); done
    RAILYARD_LOAD_KEYS=1 "$LOAD" "$port" "$token" "$clients" "$SECS" single | head -1 |
      sed -E 's/.* requests_per_s=([0-9]+).*submit_ms_p50=([0-9.]+) p99=([0-9.]+).*/\1 submits\/s, answer p50 \2 ms, p99 \3 ms/' | tr -d '\n'
    local i=0 cpu=""
    for p in "$@"; do
      cpu+=" $p $(awk -v d=$(($(ticks "${HA_PID[$p]}") - before[i])) -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", d / hz}')"
      i=$((i + 1))
    done
    echo "; CPU s:$cpu"
  done
}

if [ "${HA_BENCH_COST:-1}" = 1 ]; then
echo "== submit cost ($(date -u +%FT%TZ), $(nproc) cores)"
mkdir -p "$HA_DIR/plain"
token=$("$RAILYARD_SCHEDULER" token create --db "$HA_DIR/plain/railyard.db" --user bench --role admin 2>/dev/null | tail -1)
port=$(ha_free_port)
"$RAILYARD_SCHEDULER" --listen "127.0.0.1:$port" --db "$HA_DIR/plain/railyard.db" --cluster "$HA_DIR/cluster.json" \
  --web-root none >"$HA_DIR/plain.log" 2>&1 &
HA_PID[sched-plain]=$!
until grep -q "listening on" "$HA_DIR/plain.log"; do sleep 0.1; done
load "$port" "$token" "single controller" sched-plain
stop_sched sched-plain

for mode in etcd shared; do
  HA_STATE=$mode
  rm -rf "$HA_DIR"/s1 "$HA_DIR"/s2 "$HA_DIR"/s3 "$HA_DIR"/railyard.db*
  mkdir -p "$(dirname "$(ha_db s1)")"
  "$RAILYARD_SCHEDULER" token create --db "$(ha_db s1)" --user bench --role admin 2>/dev/null | tail -1 >"$HA_DIR/token"
  # A fresh log for each mode: etcd's keys of the last one go.
  ETCDCTL_API=3 etcdctl --endpoints "$HA_ETCD_URLS" del --prefix /railyard/ >/dev/null
  ha_start_sched s1
  ha_wait_leader 30 s1 >/dev/null
  ha_start_sched s2
  ha_start_sched s3
  sleep 1
  load "${HA_PORT[s1]}" "$(cat "$HA_DIR/token")" "HA leader, state $mode" s1 s2 s3 etcd1 etcd2 etcd3
  for s in s1 s2 s3; do stop_sched "$s"; done
done
fi

echo "== takeover with $JOBS jobs in the replicated state (TTL $HA_TTL s)"
HA_STATE=etcd
rm -rf "$HA_DIR"/s1 "$HA_DIR"/s2 "$HA_DIR"/s3
ETCDCTL_API=3 etcdctl --endpoints "$HA_ETCD_URLS" del --prefix /railyard/ >/dev/null
mkdir -p "$HA_DIR/s1"
HA_TOKEN=$("$RAILYARD_SCHEDULER" token create --db "$(ha_db s1)" --user admin --role admin 2>/dev/null | tail -1)
export RAILYARD_TOKEN=$HA_TOKEN
ha_start_three
batch='{"jobs": ['$(for i in $(seq 1000); do printf '%s{"name":"state","gpus":1,"command":["true"],"time_limit":600}' "$([ "$i" = 1 ] || echo ,)"; done)']}'
for _ in $(seq $((JOBS / 1000))); do
  curl -sf -o /dev/null -H "Authorization: Bearer $HA_TOKEN" -d "$batch" "$(ha_url s1)/api/v1/jobs:batch" || ha_fail "batch submit"
done
echo "state: $(curl -sf "$(ha_url s1)/metrics" | awk '/^railyard_jobs\{/ {n += $2} END {print n}') jobs"
SPEC='{"name":"probe","gpus":1,"command":["true"],"time_limit":60}'
times=()
for round in $(seq "$KILLS"); do
  leader=$(ha_wait_leader 60 s1 s2 s3)
  others=()
  for s in s1 s2 s3; do [ "$s" = "$leader" ] || others+=("$s"); done
  # The standbys caught up (cluster status's lag 0) before the kill.
  for _ in $(seq 100); do
    lag=$(RAILYARD_URL=$HA_URLS "$RAILYARD_CLI" cluster status --json |
      jq '[.schedulers[].answer.self | select(.applied != null) | .applied] | max - min')
    [ "$lag" = 0 ] && break
    sleep 0.2
  done
  sleep 1  # let the standbys see the leader's key
  t0=$(ha_now_ms)
  kill -KILL "${HA_PID[$leader]}"
  wait "${HA_PID[$leader]}" 2>/dev/null || true
  done_ms=""
  while [ -z "$done_ms" ]; do
    for s in "${others[@]}"; do
      r=$(ha_submit "$(ha_url "$s")" "$SPEC" "round-$round")
      if [ "${r##* }" = 201 ]; then done_ms=$(($(ha_now_ms) - t0)); new=$s; break; fi
    done
    [ -n "$done_ms" ] || sleep 0.05
    [ $(($(ha_now_ms) - t0)) -lt 60000 ] || ha_fail "no takeover within 60 s"
  done
  times+=("$done_ms")
  # Where the time went, from the new leader's log: the lease (kill to "leads"), then loading the state
  # ("leads" to "listening on").
  at_ms() { date -d "$(grep -a "$1" "$HA_DIR/$new.log" | tail -1 | sed -E 's/^\[([^]]+)\].*/\1/')" +%s%3N 2>/dev/null || echo "$t0"; }
  leads=$(($(at_ms "ha: $new leads") - t0))
  loaded=$(($(at_ms "loaded [0-9]* jobs") - t0))
  [ "$loaded" -ge "$leads" ] || loaded="?"  # its log line not written yet
  echo "round $round: killed $leader, $new accepted a submit after $done_ms ms (led at $leads ms, state loaded at $loaded ms)"
  ha_start_sched "$leader"
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
n=${#times[@]}
median=$(echo "$sorted" | awk -v n="$n" '{a[NR]=$1} END {print (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2}')
echo "takeover (ms, TTL $HA_TTL s, $n kills, $JOBS jobs): median $median, max $(echo "$sorted" | tail -1), all: $(echo $sorted)"
