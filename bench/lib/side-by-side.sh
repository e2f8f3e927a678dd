# shellcheck shell=bash disable=SC2034,SC2154  # sets and reads the caller's variables
# Sourced (not run) by bench/vs-slurm.sh and bench/placement-replay.sh: Slurm 22.05 (bench/slurm/setup.sh, one
# slurmd per emulated node) and a Railyard local cluster (`railyard up --emulate-nodes`) side by side on
# 127.0.0.1, with the same node count, 8-GPU DGX H100 nodes and the same leaf groups (LEAF nodes per leaf
# switch on both: Slurm's topology.conf and Railyard's fat tree name the nodes dgx0001.. alike).
#
# The caller sets, before sourcing: here (the bench folder), WORK (setup logs go there), SDIR (Slurm state
# dir), RDIR (Railyard state dir), LEAF, USE_SLURM ("" or a Slurm that setup.sh already started in SDIR: used
# as is and left running), and defines log(). Optional: EMULATE (nodes per agent process, default 128),
# RY_UP_ARGS (more `railyard up` arguments, split on spaces, e.g. "--scheduler-arg=--priority-weights=size=0").
#
#   sbs_up "1024 256"   tries node counts, largest first, until both systems come up with the same count;
#                       sets NODES, CTLD, SCHED, API, AUTH; exports SLURM_CONF, RAILYARD_URL, RAILYARD_TOKEN.
#                       Returns 1 when no count came up.
#   sbs_down            stops both (Slurm only when this script started it); meant for `trap sbs_down EXIT`.
#   slurm_active / ry_active / ry_state STATE   job counts; wait_drained FN START TIMEOUT_S.
#   settle [TIMEOUT_S]  waits until no slurmstepd runs and the machine is at least 85 % idle over a second:
#                       Slurm's queue empties while its step daemons and slurmctld still work for a minute
#                       or more after a 5,000-task array, which would otherwise land on the next run. At most TIMEOUT_S (default 420) s.

now() { date +%s.%N; }
# The same clock without a fork: `t=$(now)` costs a subshell and a `date` process, which a
# measured single CLI call would include. EPOCHREALTIME (bash 5) is read in the shell itself (its decimal
# comma, in a locale that has one, made a point).  Usage: stamp VAR
stamp() { printf -v "$1" '%s' "${EPOCHREALTIME/,/.}"; }

sbs_down() {
  [[ -n "$USE_SLURM" ]] || "$here/slurm/stop.sh" "$SDIR" 2>/dev/null || true
  railyard down --state-dir "$RDIR" --grace 3 >/dev/null 2>&1 || true
}

sbs_setup_slurm() {  # sbs_setup_slurm N
  if [[ -n "$USE_SLURM" ]]; then echo "slurm up: $1/$1 (already running)"
  else timeout 600 "$here/slurm/setup.sh" "$SDIR" "$1" "$LEAF"; fi
}

sbs_up() {
  local tries=$1 n t_setup env_lines
  NODES=
  [[ -n "$USE_SLURM" ]] && tries=$(grep -c '^slurmd ' "$SDIR/pids")
  for n in $tries; do
    log "trying $n nodes"
    t_setup=$(now)
    if sbs_setup_slurm "$n" > "$WORK/slurm-setup.log" 2>&1 &&
      grep -q "slurm up: $n/$n" "$WORK/slurm-setup.log"; then
      export SLURM_CONF=$SDIR/slurm.conf
      log "slurm up with $n nodes in $(awk -v a="$t_setup" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s;" \
        "slurmd RSS total $(pgrep -x slurmd | xargs -I{} awk '/^VmRSS/ { s += $2 } END { print s + 0 }' /proc/{}/status 2>/dev/null | awk '{ s += $1 } END { printf "%.0f MB", s / 1024 }')"
      if env_lines=$(railyard up --nodes "$n" --profile dgx-h100 --leaf-size "$LEAF" --state-dir "$RDIR" --port 0 \
        --emulate-nodes "${EMULATE:-128}" --no-config --timeout 120 ${RY_UP_ARGS:-} 2> "$WORK/railyard-up.log"); then
        eval "$env_lines"
        NODES=$n
        break
      fi
      log "railyard up failed with $n nodes: $(tail -1 "$WORK/railyard-up.log")"
      railyard down --state-dir "$RDIR" --grace 3 >/dev/null 2>&1 || true
    else
      log "slurm did not come up with $n nodes: $(tail -1 "$WORK/slurm-setup.log")"
    fi
    [[ -n "$USE_SLURM" ]] || "$here/slurm/stop.sh" "$SDIR"
  done
  [[ -n "$NODES" ]] || return 1
  CTLD=$(cat "$SDIR/slurmctld.pid")
  # RDIR/pids lines are "PID<tab>NAME<tab>COMMAND" (cli/local_cluster.cpp).
  SCHED=$(awk -F'\t' '$2 == "scheduler" { print $1 }' "$RDIR/pids" 2>/dev/null | head -1)
  [[ -n "$SCHED" ]] || SCHED=$(pgrep -n -f "railyard-scheduler .*--db $RDIR/railyard.db")
  API=$RAILYARD_URL/api/v1
  AUTH=(-H "Authorization: Bearer $RAILYARD_TOKEN")
}

slurm_active() { squeue -h -o %i -r 2>/dev/null | wc -l; }
ry_active() {
  curl -s "$RAILYARD_URL/metrics" |
    awk '/^railyard_jobs\{state="(PENDING|STARTING|RUNNING|HELD|COMPLETING|SUSPENDED)"\}/ { n += $2 } END { print n + 0 }'
}
ry_state() { curl -s "$RAILYARD_URL/metrics" | awk -v s="$1" '$1 == "railyard_jobs{state=\"" s "\"}" { print $2 + 0 }'; }
idle_pct() {  # share of idle CPU time over one second, from /proc/stat
  local a b
  a=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
  sleep 1
  b=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); t = y[2] - x[2]
    printf "%d", (t > 0 ? 100 * (y[1] - x[1]) / t : 100) }'
}
settle() {  # settle [TIMEOUT_S]
  local deadline idle=0 t0
  t0=$(date +%s); deadline=$((t0 + ${1:-420}))
  while (($(date +%s) < deadline)); do
    idle=$(idle_pct)
    if ! pgrep -x slurmstepd >/dev/null && ((idle >= 85)); then
      (($(date +%s) - t0 > 2)) && log "settled after $(($(date +%s) - t0)) s"
      return 0
    fi
  done
  log "still busy after ${1:-420} s ($idle % idle, $(pgrep -cx slurmstepd) slurmstepd); measuring anyway"
}
wait_drained() {  # wait_drained FN START TIMEOUT_S -> prints seconds from START until FN reports 0 active, or "timeout"
  local fn=$1 start=$2 deadline
  deadline=$(($(date +%s) + $3))
  while (($(date +%s) < deadline)); do
    if (($($fn) == 0)); then awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; return; fi
    sleep 0.2
  done
  log "$fn: $($fn) jobs still not finished after $3 s"
  echo timeout
}
