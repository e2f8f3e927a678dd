#!/usr/bin/env bash
# Stops exactly the daemons bench/slurm/setup.sh started (pids recorded in DIR/pids), checking each pid still
# runs the program it started: SIGTERM to all at once (slurmd takes about a second to exit, so one at a time
# would take many minutes for 1,024 of them), then SIGKILL to any still there after 10 s.
set -uo pipefail
dir=$(realpath -m "${1:?usage: stop.sh DIR}")
[[ -f "$dir/pids" ]] || exit 0
mine=() left=()
while read -r name pid; do
  [[ -r /proc/$pid/cmdline ]] && grep -q "$name" "/proc/$pid/cmdline" 2>/dev/null && mine+=("$pid")
done < <(tac "$dir/pids")
((${#mine[@]})) && kill "${mine[@]}" 2>/dev/null
for _ in $(seq 100); do
  left=()
  for pid in "${mine[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
  ((${#left[@]})) || break
  sleep 0.1
done
((${#left[@]})) && kill -9 "${left[@]}" 2>/dev/null
rm -f "$dir/pids"
