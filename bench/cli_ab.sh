#!/usr/bin/env bash
# Per-call cost of two builds of the `railyard` CLI, side by side: alternating rounds of N calls of A and of
# B (and of /bin/true, the floor under any CLI) against one release railyard-scheduler on 127.0.0.1 (no agents:
# the submitted jobs stay queued), so that whatever else loads the machine hits both alike. Prints ms per call.
#
#   bench/cli_ab.sh A_RAILYARD B_RAILYARD [N] [ROUNDS] [BUILD]     (default N 200, ROUNDS 4, BUILD build/release)
set -euo pipefail
A=$(realpath "${1:?usage: cli_ab.sh A_RAILYARD B_RAILYARD [N] [ROUNDS] [BUILD]}")
B=$(realpath "${2:?usage: cli_ab.sh A_RAILYARD B_RAILYARD [N] [ROUNDS] [BUILD]}")
N=${3:-200} ROUNDS=${4:-4}
BUILD=$(realpath "${5:-$(dirname "$0")/../build/release}")
S=$BUILD/scheduler/railyard-scheduler
d=$(mktemp -d /tmp/cli-ab.XXXXXX)
tok=$("$S" token create --db "$d/s.db" --user bench --role admin 2>/dev/null | tail -1)
"$S" --db "$d/s.db" --preset dgx-h100-superpod --sus 1 --listen 127.0.0.1:0 --web-root none > "$d/log" 2>&1 &
sched=$!
trap 'kill $sched 2>/dev/null; wait $sched 2>/dev/null; rm -rf "$d"' EXIT
port=
for _ in $(seq 100); do
  port=$(grep -o '127\.0\.0\.1:[0-9]*' "$d/log" | head -1 | cut -d: -f2) && [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { echo "cli_ab: the scheduler did not start: $(tail -1 "$d/log")" >&2; exit 1; }
export RAILYARD_URL=http://127.0.0.1:$port RAILYARD_TOKEN=$tok HOME=$d
loop() {  # loop BIN what: ms per call over N calls (EPOCHREALTIME: no fork for the clock)
  local bin=$1 what=$2 t0 t1 i
  t0=$EPOCHREALTIME
  case $what in
    submit) for ((i = 0; i < N; i++)); do "$bin" submit --gpus 1 -- true >/dev/null; done ;;
    version) for ((i = 0; i < N; i++)); do "$bin" --version >/dev/null; done ;;
    *) for ((i = 0; i < N; i++)); do /bin/true; done ;;
  esac
  t1=$EPOCHREALTIME
  awk -v a="${t0/,/.}" -v b="${t1/,/.}" -v n="$N" 'BEGIN { printf "%.2f", (b - a) * 1000 / n }'
}
echo "| round | /bin/true | A --version | B --version | A submit | B submit | load average |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$ROUNDS"); do
  echo "| $r | $(loop /bin/true floor) | $(loop "$A" version) | $(loop "$B" version) | $(loop "$A" submit) |" \
       "$(loop "$B" submit) | $(cut -d' ' -f1 /proc/loadavg) |"
done
