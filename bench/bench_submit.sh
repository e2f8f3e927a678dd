#!/usr/bin/env bash
# Submit throughput of railyard-scheduler (issue 5): single submits over keep-alive with 1 and 8 clients,
# and jobs/s through POST /jobs:batch. Each run gets a fresh daemon and database on a generated SuperPOD.
#
#   bench/bench_submit.sh [BUILD_DIR] [SECONDS]     (default build/daemon-rel, 10 s per run)
# Build first: cmake -S . -B build/daemon-rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DRAILYARD_BENCH=OFF
#              ninja -C build/daemon-rel railyard-scheduler daemon_load
set -euo pipefail
BUILD=${1:-build/daemon-rel}
SECS=${2:-10}
BIN=$BUILD/scheduler/railyard-scheduler
LOAD=$BUILD/tests/daemon_load
SUS=${SUS:-4}

run() {  # run CLIENTS MODE [BATCH_SIZE]
  local dir pid port token
  dir=$(mktemp -d)
  token=$("$BIN" token create --db "$dir/s.db" --user bench 2>/dev/null | tail -1)
  "$BIN" --listen 127.0.0.1:0 --db "$dir/s.db" --preset dgx-h100-superpod --sus "$SUS" >"$dir/out" 2>"$dir/err" &
  pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$dir/out" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$dir/out")
  "$LOAD" "$port" "$token" "$1" "$SECS" "$2" "${3:-1000}"
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^railyard_(submit_commits_total|scheduling_pass_seconds_count|scheduling_last_pass_seconds|queue_length) ' | tr '\n' ' '
  echo
  kill "$pid"; wait "$pid" || true
  rm -rf "$dir"
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores; dgx-h100-superpod x $SUS SUs; $SECS s per run"
run 1 single
run 8 single
run 1 batch 1000
run 4 batch 1000
