#!/usr/bin/env bash
# Stops exactly the daemons bench/slurm/setup.sh started (pids recorded in DIR/pids), checking each pid still
# runs the program it started.
set -uo pipefail
dir=$(realpath -m "${1:?usage: stop.sh DIR}")
[[ -f "$dir/pids" ]] || exit 0
tac "$dir/pids" | while read -r name pid; do
  if [[ -r /proc/$pid/comm ]] && grep -q "$name" "/proc/$pid/cmdline" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
done
rm -f "$dir/pids"
