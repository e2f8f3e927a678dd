#!/usr/bin/env bash
# Stops what bench/slurm/setup.sh started in DIR, and nothing else:
#  1. the daemons recorded in DIR/pids, each checked to still run the program it started: SIGTERM to all at
#     once (slurmd takes about a second to exit, so one at a time would take many minutes for 1,024), then
#     SIGKILL to any still there after 10 s;
#  2. what they left behind: every finished job step's slurmstepd waits (for minutes) on its stopped slurmd,
#     and jobs' processes may still run. With DIR/cgroup (setup.sh's cgroup v2): cgroup.kill ends every
#     process in it, then the cgroup is removed. Without: the slurmstepd/slurmd/slurmctld processes whose
#     environment has SLURM_CONF=DIR/slurm.conf (the daemons pass theirs on) get SIGKILL (a job's own
#     processes are then not found: only the cgroup reaches those).
# Then `pgrep -c slurmstepd` counts none of ours.
set -uo pipefail
dir=$(realpath -m "${1:?usage: stop.sh DIR}")
mine=() left=()
if [[ -f "$dir/pids" ]]; then
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
fi

in_cgroup() { [[ -n $(cat "$1/cgroup.procs" 2>/dev/null) ]]; }  # (cgroupfs files have size 0)
cg=$(cat "$dir/cgroup" 2>/dev/null || true)
if [[ -n $cg && -d $cg ]]; then
  killed=$(cat "$cg/cgroup.procs")
  for _ in $(seq 50); do
    in_cgroup "$cg" || break
    if [[ -e $cg/cgroup.kill ]]; then echo 1 > "$cg/cgroup.kill"
    else xargs -r kill -9 < "$cg/cgroup.procs" 2>/dev/null; fi
    sleep 0.1
  done
  in_cgroup "$cg" && echo "stop.sh: processes left in $cg: $(paste -sd' ' "$cg/cgroup.procs")" >&2
  rmdir "$cg" 2>/dev/null
  rm -f "$dir/cgroup"
else
  conf="SLURM_CONF=$dir/slurm.conf"
  killed=""
  for _ in 1 2 3; do
    found=()
    for p in /proc/[0-9]*; do
      case $(cat "$p/comm" 2>/dev/null) in slurmstepd | slurmd | slurmctld) ;; *) continue ;; esac
      { tr '\0' '\n' < "$p/environ" | grep -qxF "$conf"; } 2>/dev/null && found+=("${p#/proc/}")
    done
    ((${#found[@]})) || break
    kill -9 "${found[@]}" 2>/dev/null
    killed+=" ${found[*]}"
    sleep 0.2
  done
fi
# Killed processes stay zombies (and count for pgrep) until their parent, init, reaps them: wait up to 5 s.
for _ in $(seq 50); do
  alive=0
  for pid in ${killed:-}; do [[ -e /proc/$pid ]] && alive=1 && break; done
  ((alive)) || break
  sleep 0.1
done
exit 0
