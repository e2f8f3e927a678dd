#!/usr/bin/env bash
# Latency for other clients during a slow-loris attack (issue 32): a fresh scheduler per run, then
# bench/abuse_load.cpp holds CONNECTIONS half-sent requests open (reopening those the scheduler closes) while
# two clients time GET /api/v1/jobs: p50/p99 before and during, and the scheduler's RSS before and during.
# Two runs: the default limits (--max-connections 4096: most of the crowd is refused), and a cap above the
# crowd (every connection held: the cost of 10,000 idle connections itself).
#
#   bench/abuse_p99.sh [BUILD_DIR] [CONNECTIONS] [SECONDS]     (default build/release 10000 8)
# Build first: cmake --preset release && cmake --build --preset release --target railyard-scheduler abuse_load
set -euo pipefail
BUILD=${1:-build/release}
CONNS=${2:-10000}
SECS=${3:-8}
BIN=$BUILD/scheduler/railyard-scheduler
LOAD=$BUILD/bench/abuse_load
# The crowd and the clients need CONNECTIONS descriptors here, and the scheduler as many (it raises its own
# soft limit to the hard one).
ulimit -n "$(ulimit -Hn)"

run() {  # extra scheduler flags...
  local dir pid port token
  dir=$(mktemp -d /tmp/railyard-abuse-XXXXXX)
  token=$("$BIN" token create --db "$dir/s.db" --user bench 2>/dev/null | tail -1)
  "$BIN" --listen 127.0.0.1:0 --db "$dir/s.db" --preset dgx-h100-superpod --sus 4 --web-root none "$@" \
    >"$dir/out" 2>"$dir/err" &
  pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$dir/out" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$dir/out")
  # 100 jobs, so that the list has rows to write.
  body='{"jobs": ['$(for i in $(seq 100); do printf '%s{"name": "j%d", "gpus": 1}' "$([ "$i" = 1 ] || echo ,)" "$i"; done)']}'
  curl -sf -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$body" \
    "http://127.0.0.1:$port/api/v1/jobs:batch"
  echo "== railyard-scheduler $* (crowd $CONNS, ${SECS} s per phase)"
  "$LOAD" "$port" "$token" "$pid" "$CONNS" "$SECS"
  grep -c "refused" "$dir/err" | sed 's/^/scheduler log lines about refusals: /'
  kill "$pid"
  wait "$pid" || true
  rm -rf "$dir"
}

# The crowd comes from one address, which --max-connections-per-address (512 by default) would cap first:
# these runs measure the global cap and the cost of the held connections, so that cap is off.
run --max-connections-per-address 0
run --max-connections-per-address 0 --max-connections 16384
