#!/usr/bin/env bash
# bench/pass_scale.sh BUILD_DIR [JOBS] [SUS...] (issue 48): what a deep queue costs the scheduler's event loop
# on a big cluster. For each SuperPOD size (default 313 SUs = 10,016 nodes, then 32 SUs = 1,024 nodes; no
# agents, so started jobs stay STARTING), each phase on a fresh scheduler and database:
#   fill:   JOBS (default 100,000) one-GPU jobs in back-to-back POST /jobs:batch calls of 1,000, started as
#           they come; printed: seconds from the first submit until every job that fits has started (80,128
#           on 10,016 nodes, 8,192 on 1,024), the passes' largest apply (pass log) and GET /api/v1/health
#           latency meanwhile (every 10 ms on one keep-alive connection: lib/health_probe.py);
#   queued: the same JOBS submitted behind one running job (`afterany`), which is then cancelled: one pass
#           finds them all eligible. Printed: seconds from the cancel until all that fit have started, that
#           pass's log line (its apply in slices) and the health latency meanwhile; then
#   submit: 10 s of one client's one-at-a-time submits on that full cluster (tests/daemon_load, 1 client,
#           single): its jobs/s and the health latency it saw; then
#   array:  the pending jobs topped up to JOBS, one 1,000,000-task array of one-GPU tasks submitted in one
#           call: the last pass's time 3 s later (/metrics) and the health latency from the submit until then.
# Build first: cmake --build --preset release --target railyard railyard-scheduler daemon_load. Port 8778 must
# be free.
set -euo pipefail
BUILD=${1:?usage: bench/pass_scale.sh BUILD_DIR [JOBS] [SUS...]}
JOBS=${2:-100000}
shift $(( $# >= 2 ? 2 : 1 ))
SIZES=${*:-313 32}
cd "$(dirname "$0")/.."
BIN=$BUILD/scheduler/railyard-scheduler
CLI=$BUILD/cli/railyard
LOAD=$BUILD/tests/daemon_load
PORT=8778
URL=http://127.0.0.1:$PORT
D= P= H=
stop() {
  [ -n "$H" ] && { kill "$H" 2>/dev/null || true; wait "$H" 2>/dev/null || true; H=; }
  [ -n "$P" ] && { kill "$P" 2>/dev/null || true; wait "$P" 2>/dev/null || true; P=; }
  [ -n "$D" ] && { rm -rf "$D"; D=; }
  return 0
}
trap stop EXIT
start() {  # SUS: a fresh scheduler; sets D, P, T
  D=$(mktemp -d /tmp/pass-scale.XXXX)
  "$CLI" topo generate --preset dgx-h100-superpod --sus "$1" -o "$D/cluster.json" >/dev/null
  T=$("$BIN" token create --db "$D/s.db" --user root --role admin 2>/dev/null | tail -1)
  "$BIN" --listen 127.0.0.1:$PORT --db "$D/s.db" --cluster "$D/cluster.json" >"$D/log" 2>&1 &
  P=$!
  for _ in $(seq 100); do curl -sf $URL/healthz >/dev/null && break; sleep 0.2; done
}
post() { curl -sf -H "Authorization: Bearer $T" --data-binary "$2" "$URL$1"; }
submit_all() {  # [AFTER_JSON]
  jq -nc --argjson after "${1:-[]}" '{jobs: [range(1000) | {name: "t", gpus: 1, command: ["true"], after: $after}]}' \
    >"$D/batch.json"
  for _ in $(seq $((JOBS / 1000))); do post /api/v1/jobs:batch @"$D/batch.json" >/dev/null; done
}
wait_started() {  # WANT: until that many are STARTING (or 5 min)
  for _ in $(seq 1200); do
    started=$(curl -sf $URL/metrics | sed -n 's/^railyard_jobs{state="STARTING"} //p')
    [ "${started:-0}" -ge "$1" ] && return 0
    sleep 0.05
  done
}
probe() { python3 bench/lib/health_probe.py $PORT >"$D/health" & H=$!; }
unprobe() { kill "$H"; wait "$H" || true; H=; }
for sus in $SIZES; do
  nodes=$((sus * 32)) gpus=$((sus * 32 * 8))
  want=$(( JOBS < gpus ? JOBS : gpus ))
  echo "## $nodes nodes, $JOBS one-GPU jobs, $want fit"
  start "$sus"
  probe
  t0=$(date +%s.%N)
  submit_all
  wait_started "$want"
  t1=$(date +%s.%N)
  unprobe
  echo "fill: $started started $(echo "$t1 - $t0" | bc) s after the first submit; largest apply" \
    "$(grep -o "apply [0-9.]* s" "$D/log" | awk '{if ($2 > m) m = $2} END {printf "%.3f s", m}'); $(cat "$D/health")"
  stop
  start "$sus"
  blocker=$(post /api/v1/jobs '{"name": "blocker", "gpus": 1, "command": ["true"]}' | jq -r .id)
  submit_all "[\"afterany:$blocker\"]"
  sleep 2  # the passes that noted the dependency reasons
  lines=$(grep -c "pass:" "$D/log" || true)
  probe
  t0=$(date +%s.%N)
  post "/api/v1/jobs/$blocker/cancel" '' >/dev/null
  wait_started "$want"
  t1=$(date +%s.%N)
  unprobe
  echo "queued: $started started $(echo "$t1 - $t0" | bc) s after the cancel; $(cat "$D/health")"
  sleep 1
  grep "pass:" "$D/log" | tail -n +$((lines + 1)) | head -3 | sed 's/^.*pass:/  pass:/'
  echo "submit: $("$LOAD" $PORT "$T" 1 10 single | tail -1)"
  pending=$(curl -sf $URL/metrics | sed -n 's/^railyard_jobs{state="PENDING"} //p')
  jq -nc '{jobs: [range(1000) | {name: "t", gpus: 1, command: ["true"]}]}' >"$D/batch.json"
  for _ in $(seq $(((JOBS - pending) / 1000))); do post /api/v1/jobs:batch @"$D/batch.json" >/dev/null; done
  sleep 2
  probe
  t0=$(date +%s.%N)
  array=$(post /api/v1/jobs '{"name": "million", "gpus": 1, "command": ["true"], "array": "0-999999"}' | jq -r .id)
  t1=$(date +%s.%N)
  sleep 3
  unprobe
  echo "array: $(curl -sf $URL/metrics | sed -n 's/^railyard_jobs{state="PENDING"} //p') pending; the 1,000,000-task" \
    "array $array submitted in $(echo "$t1 - $t0" | bc) s; last pass" \
    "$(curl -sf $URL/metrics | sed -n 's/^railyard_scheduling_last_pass_seconds //p') s; $(cat "$D/health")"
  stop
done
