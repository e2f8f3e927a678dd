#!/usr/bin/env bash
# Controller high availability (issue 30): takeover time and the cost of HA on the submit path.
#
#   bench/ha_takeover.sh [BUILD_DIR] [KILLS] [SECONDS]     (default build/release, 10 kills, 10 s per load run)
#
# Takeover: 3 etcd members, 3 schedulers (--ha-ttl $HA_TTL, default 5) sharing one database, an agent with 2
# emulated nodes; KILLS times: SIGKILL the leader, then POST a job to the other two every 50 ms until one
# answers 201 (an idempotency key per round, so a retried probe is one job): the time from the kill to that
# 201 (wall clock). The killed scheduler is restarted as a standby before the next round. Prints every
# time, the median and the max.
# Submit cost: daemon_load, 1 and 8 keep-alive clients, one job per request, against a scheduler without HA
# and against the HA leader (its submits carry idempotency keys, as the CLI's do; RAILYARD_LOAD_KEYS=1), each on
# a fresh database of the same 2-node cluster.
set -euo pipefail
BUILD=$(cd "${1:-build/release}" && pwd)
KILLS=${2:-10}
SECS=${3:-10}
export RAILYARD_SCHEDULER=$BUILD/scheduler/railyard-scheduler RAILYARD_AGENT=$BUILD/agent/railyard-agent \
  RAILYARD_CLI=$BUILD/cli/railyard
LOAD=$BUILD/tests/daemon_load
export HA_TTL=${HA_TTL:-5}
source "$(dirname "$0")/../tests/ha/lib.sh"
trap ha_cleanup EXIT
ha_require

ha_start_etcd 3
ha_setup_cluster
for s in s1 s2 s3; do ha_start_sched $s; done
HA_URLS="$(ha_url s1),$(ha_url s2),$(ha_url s3)"
ha_start_agent
leader=$(ha_wait_leader 30 s1 s2 s3)
ha_wait_nodes_up "$(ha_url "$leader")" 2 60
SPEC='{"name":"probe","gpus":1,"command":["true"],"time_limit":60}'
times=()
for round in $(seq "$KILLS"); do
  leader=$(ha_wait_leader 30 s1 s2 s3)
  others=()
  for s in s1 s2 s3; do [ "$s" = "$leader" ] || others+=("$s"); done
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
  echo "round $round: killed $leader, $new accepted a submit after $done_ms ms"
  ha_start_sched "$leader"
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
n=${#times[@]}
median=$(echo "$sorted" | awk -v n="$n" '{a[NR]=$1} END {print (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2}')
echo "takeover (ms, TTL $HA_TTL s, $n kills): median $median, max $(echo "$sorted" | tail -1), all: $(echo $sorted)"

# Submit cost with and without HA.
ha_cleanup_keep_etcd() {
  for s in s1 s2 s3 agent; do
    kill -TERM "${HA_PID[$s]}" 2>/dev/null || true
    wait "${HA_PID[$s]}" 2>/dev/null || true
    unset "HA_PID[$s]"
  done
}
ha_cleanup_keep_etcd
load() {  # load PORT LABEL [env]
  for clients in 1 8; do
    printf '%-28s %2d client(s): ' "$2" "$clients"
    env ${3:-} "$LOAD" "$1" "$HA_TOKEN" "$clients" "$SECS" single | head -1
  done
}
if [ ! -x "$LOAD" ]; then
  echo "submit cost: skipped, $LOAD is not built (cmake --build --preset release --target daemon_load)"
  exit 0
fi
rm -f "$HA_DIR"/railyard.db*
HA_TOKEN=$("$RAILYARD_SCHEDULER" token create --db "$HA_DIR/railyard.db" --user bench --role admin 2>/dev/null | tail -1)
port=$(ha_free_port)
"$RAILYARD_SCHEDULER" --listen "127.0.0.1:$port" --db "$HA_DIR/railyard.db" --cluster "$HA_DIR/cluster.json" \
  --web-root none >"$HA_DIR/plain.log" 2>&1 &
HA_PID[sched-plain]=$!
until grep -q "listening on" "$HA_DIR/plain.log"; do sleep 0.1; done
load "$port" "without HA"
load "$port" "without HA (keys)" RAILYARD_LOAD_KEYS=1
kill -TERM "${HA_PID[sched-plain]}"; wait "${HA_PID[sched-plain]}" 2>/dev/null || true; unset "HA_PID[sched-plain]"
rm -f "$HA_DIR"/railyard.db*
HA_TOKEN=$("$RAILYARD_SCHEDULER" token create --db "$HA_DIR/railyard.db" --user bench --role admin 2>/dev/null | tail -1)
ha_start_sched s1
ha_wait_leader 30 s1 >/dev/null
load "${HA_PORT[s1]}" "HA leader (keys)" RAILYARD_LOAD_KEYS=1
load "${HA_PORT[s1]}" "HA leader (no keys)"
