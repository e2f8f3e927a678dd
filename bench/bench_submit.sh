#!/usr/bin/env bash
# Submit throughput of railyard-scheduler (issue 5): single submits over keep-alive with 1, 8 and 32
# clients and with one pipelining client, and jobs/s through POST /jobs:batch. Each run gets a fresh daemon and database on a generated
# SuperPOD. daemon_load also prints how long GET /api/v1/health took meanwhile (the event loop's stalls).
#
#   bench/bench_submit.sh [BUILD_DIR] [SECONDS]        (default build/daemon-rel, 10 s per run)
#   bench/bench_submit.sh BUILD_DIR SECONDS pass       pass time with PENDING (100,000) jobs of FILL_GPUS (1)
#                                                      GPUs queued on a full cluster of SUS_PASS (32) SUs of 32
#                                                      nodes, from /metrics and the scheduler's pass log;
#                                                      PASS_BUDGET_MS: the daemon's --pass-budget-ms
# Build first: cmake -S . -B build/daemon-rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DRAILYARD_BENCH=OFF
#              ninja -C build/daemon-rel railyard-scheduler daemon_load
set -euo pipefail
BUILD=${1:-build/daemon-rel}
SECS=${2:-10}
BIN=$BUILD/scheduler/railyard-scheduler
LOAD=$BUILD/tests/daemon_load
SUS=${SUS:-4}

start() {  # sets dir, pid, port, token
  dir=$(mktemp -d /tmp/railyard-bench-XXXXXX)
  token=$("$BIN" token create --db "$dir/s.db" --user bench 2>/dev/null | tail -1)
  "$BIN" --listen 127.0.0.1:0 --db "$dir/s.db" --preset dgx-h100-superpod --sus "$SUS" \
    ${PASS_BUDGET_MS:+--pass-budget-ms "$PASS_BUDGET_MS"} >"$dir/out" 2>"$dir/err" &
  pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$dir/out" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$dir/out")
}

metrics() { curl -s "http://127.0.0.1:$port/metrics" | grep -E "^railyard_($1) " | tr '\n' ' '; echo; }

# Fills the queue with PENDING jobs of FILL_GPUS GPUs (batches of 1,000), lets the passes settle, then submits
# one more job and reports the pass it triggers, while GET /health is timed. The pass log splits each pass
# into snapshot and apply (on the event loop) and schedule() (on the pass thread).
pass_time() {
  local dir pid port token n=${PENDING:-100000} body
  SUS=${SUS_PASS:-32} start
  body='{"jobs": ['$(for i in $(seq 1000); do printf '%s{"name": "fill", "gpus": %d}' "$([ "$i" = 1 ] || echo ,)" "${FILL_GPUS:-1}"; done)']}'
  for _ in $(seq $((n / 1000))); do
    curl -sf -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
      -d "$body" "http://127.0.0.1:$port/api/v1/jobs:batch"
  done
  sleep "${SETTLE:-20}"
  metrics 'queue_length|gpus_allocated|scheduling_pass_seconds_count|scheduling_last_pass_seconds'
  "$LOAD" "$port" "$token" 1 "$SECS" single
  metrics 'queue_length|scheduling_pass_seconds_count|scheduling_last_pass_seconds|scheduling_cut_passes_total|jobs_not_reached'
  grep "pass:" "$dir/err" | tail -3
  kill "$pid"; wait "$pid" || true
  rm -rf "$dir"
}

run() {  # run CLIENTS MODE [BATCH_SIZE] [PIPELINE]
  local dir pid port token
  start
  "$LOAD" "$port" "$token" "$1" "$SECS" "$2" "${3:-1000}" "${4:-1}"
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^railyard_(submit_commits_total|scheduling_pass_seconds_count|scheduling_last_pass_seconds|queue_length) ' | tr '\n' ' '
  echo
  kill "$pid"; wait "$pid" || true
  rm -rf "$dir"
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); dgx-h100-superpod x $([ "${3:-}" = pass ] && echo "${SUS_PASS:-32}" || echo "$SUS") SUs; $SECS s per run"
if [ "${3:-}" = pass ]; then pass_time; exit; fi
run 1 plan          # submit -> placed latency on an idle cluster, one job at a time
run 1 single
run 1 single 1 32   # one connection, 32 requests in flight (HTTP/1.1 pipelining)
run 8 single
run 32 single
run 1 batch 1000
run 1 batch 1000 4
run 4 batch 1000
