#!/usr/bin/env bash
# Railyard vs Slurm 22.05 on this machine, one run (issue 11). Both clusters run side by side on 127.0.0.1
# with the same node count and leaf groups (DGX H100, 8 GPUs a node, LEAF nodes per leaf switch).
# For each N it measures, for each system:
#   single: N one-job CLI calls (`sbatch --gres=gpu:1 --wrap true` vs `railyard submit --gpus 1 -- true`)
#   bulk:   one job array, one CLI call (`sbatch --array=1-N --wrap true` vs `railyard submit --array 1-N -- true`)
# and reports submit wall time (jobs/s), end-to-end time from the first submit until all N jobs have
# completed, the scheduler's CPU seconds over that window (/proc/PID/stat utime+stime: slurmctld vs
# railyard-scheduler) and its peak RSS (VmHWM, reset through /proc/PID/clear_refs before each run). Each run
# also times the same loop (or call) starting /bin/true, the floor under any CLI: a second table gives the
# highest submit ratio that floor leaves reachable (Slurm's time / floor's) next to Railyard's. Submits are
# timed with bash's EPOCHREALTIME (no fork). Installs Slurm and munge when missing (bench/slurm/install.sh).
#
#   bench/vs-slurm.sh [-b BUILD] [-n "1000 5000"] [-s "1000 5000"] [-r RUNS] [-N "1024 256 128"] [-l LEAF]
#                     [-w DIR] [-t E2E_TIMEOUT_S] [-u SLURM_DIR] [-W WARMUP_JOBS] [-d synced|written]
#   bench/vs-slurm.sh -R RESULTS_TSV      # only the tables, from an earlier run's results.tsv
#
# -d: when Railyard acknowledges a submit (railyard-scheduler --submit-durability): synced, the default (on
# disk: one fsync per one-job submit), or written (in its log: a killed scheduler loses none; Slurm answers
# with the job record in memory and saves job state in the background, every 5 s at most). Noted under the tables.
# -n: sizes of the bulk runs; -s: sizes of the one-CLI-call-per-job runs (default: as -n; "none": skip either; minutes
# per 1,000 jobs on 2 cores). -u: use a Slurm that bench/slurm/setup.sh already started in SLURM_DIR (its node
# count is used for Railyard too; it is left running). -r: measure each N RUNS times, Slurm and Railyard in
# turn (default 1); the table then gives each system's median and, under the ratio, the lowest and highest
# ratio of one Slurm run and the Railyard run right after it. Otherwise:
# -N lists node counts to try, largest first: the first one whose Slurm (one slurmd per node) and Railyard
# both come up is used for both systems. Needs root (munge, slurmd, clear_refs). Every daemon it starts is
# stopped at exit (bench/slurm/stop.sh, railyard down). -W: one-call jobs sent through each system, and
# drained, before the first measured run (default 100; 0: none).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=$root/build/release SIZES="1000 5000" SINGLE_SIZES= USE_SLURM= NODE_TRIES="1024 256 128" LEAF=32 E2E_TIMEOUT=600 RUNS=1 WARMUP=100
WORK=$(mktemp -d /tmp/vs-slurm.XXXXXX)
# The tables from a results file (this run's, or one given with -R).
report() {
  # Per form and N: each system's median over the runs; with more than one run, the range of the per-run ratios
  # (a Slurm run against the Railyard run that followed it) in brackets. mawk has no asort: insertion sort.
  awk -F'\t' '
    NR == 1 { next }
    { k = $2 "\t" $3; r = $4
      if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
      if (r > runs[k]) runs[k] = r
      # Rates from the seconds (the file rounds jobs/s to integers, which moved ratios by up to 5 %).
      sub_[$1, k, r] = ($5 == "-" ? "-" : $3 / $5); e2e[$1, k, r] = ($7 == "-" ? "-" : $3 / $7)
      cpu[$1, k, r] = ($9 == "-" ? "-" : $9 * 1000 / $3); mem[$1, k, r] = $11 }
    function median(a, sys, k, n,   i, j, m, v, t) {
      m = 0
      for (i = 1; i <= n; i++) if (((sys, k, i) in a) && a[sys, k, i] != "-") v[++m] = a[sys, k, i] + 0
      if (m == 0) return "-"
      for (i = 2; i <= m; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
      return (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.1fx", a / b) }
    # ratio of the medians, then [lowest-highest] of the per-run ratios; up: Railyard over Slurm, else inverse
    function ratios(a, k, n, up,   i, x, lo, hi, s) {
      s = up ? ratio(median(a, "railyard", k, n), median(a, "slurm", k, n)) \
             : ratio(median(a, "slurm", k, n), median(a, "railyard", k, n))
      if (n < 2) return s
      lo = ""; hi = ""
      for (i = 1; i <= n; i++) {
        if (a["railyard", k, i] == "-" || a["slurm", k, i] == "-" || a["railyard", k, i] + 0 == 0 || a["slurm", k, i] + 0 == 0) continue
        x = up ? a["railyard", k, i] / a["slurm", k, i] : a["slurm", k, i] / a["railyard", k, i]
        if (lo == "" || x < lo) lo = x
        if (hi == "" || x > hi) hi = x
      }
      return lo == "" ? s : sprintf("%s [%.1f-%.1f]", s, lo, hi)
    }
    function fmt(v, d) { return v == "-" ? "-" : sprintf("%." d "f", v) }
    END {
      printf "| form | N | runs | submit jobs/s Slurm | Railyard | ratio | e2e jobs/s Slurm | Railyard | ratio | sched CPU ms/job Slurm | Railyard | ratio | peak RSS MB Slurm | Railyard |\n"
      printf "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
      for (i = 1; i <= nk; i++) { k = keys[i]; n = runs[k]; split(k, p, "\t")
        printf "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], n,
          fmt(median(sub_, "slurm", k, n), 0), fmt(median(sub_, "railyard", k, n), 0), ratios(sub_, k, n, 1),
          fmt(median(e2e, "slurm", k, n), 0), fmt(median(e2e, "railyard", k, n), 0), ratios(e2e, k, n, 1),
          fmt(median(cpu, "slurm", k, n), 2), fmt(median(cpu, "railyard", k, n), 2), ratios(cpu, k, n, 0),
          fmt(median(mem, "slurm", k, n), 0), fmt(median(mem, "railyard", k, n), 0) }
      # The ceiling on a submit ratio: a CLI call costs at least a process start (the floor rows).
      printf "\n| form | N | floor (/bin/true) calls/s | Slurm submit jobs/s | highest reachable ratio | Railyard ratio |\n"
      printf "|---|---|---|---|---|---|\n"
      for (i = 1; i <= nk; i++) { k = keys[i]; n = runs[k]; split(k, p, "\t")
        f = median(sub_, "floor", k, n); sl = median(sub_, "slurm", k, n); ry = median(sub_, "railyard", k, n)
        printf "| %s | %s | %s | %s | %s | %s |\n", p[1], p[2],
          (f == "-" ? "-" : sprintf("%.0f", (p[1] == "bulk" ? f / p[2] : f))), fmt(sl, 0), ratio(f, sl), ratio(ry, sl) } }' "$1"
  local mode=synced
  [[ -f $(dirname "$1")/railyard-durability ]] && mode=$(cat "$(dirname "$1")/railyard-durability")
  echo "(Railyard's submits acknowledged once $mode: railyard-scheduler --submit-durability $mode.)"
  echo "(ratios: Railyard over Slurm for jobs/s; Slurm over Railyard for CPU per job, so > 1x favours Railyard."
  echo " Floor: the same loop starting /bin/true instead of the CLI; bulk: one call, so its rate is calls/s.)"
}
DURABILITY=synced
while getopts "b:n:s:r:N:l:w:t:u:W:R:d:" opt; do
  case $opt in
    b) BUILD=$(realpath "$OPTARG") ;; n) SIZES=$OPTARG ;; N) NODE_TRIES=$OPTARG ;; l) LEAF=$OPTARG ;;
    w) WORK=$(realpath -m "$OPTARG"); mkdir -p "$WORK" ;; t) E2E_TIMEOUT=$OPTARG ;;
    s) SINGLE_SIZES=$OPTARG ;; u) USE_SLURM=$(realpath "$OPTARG") ;; r) RUNS=$OPTARG ;; W) WARMUP=$OPTARG ;;
    R) rmdir "$WORK"; report "$OPTARG"; exit 0 ;;
    d) DURABILITY=$OPTARG ;;
    *) sed -n '2,29p' "$0"; exit 2 ;;
  esac
done
SINGLE_SIZES=${SINGLE_SIZES:-$SIZES}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "vs-slurm: -r takes a count of runs (1, 2, ...), not '$RUNS'" >&2; exit 2; }
[[ $WARMUP =~ ^[0-9]+$ ]] || { echo "vs-slurm: -W takes a count of jobs (0: no warm-up), not '$WARMUP'" >&2; exit 2; }
[[ $DURABILITY == synced || $DURABILITY == written ]] ||
  { echo "vs-slurm: -d takes synced or written, not '$DURABILITY'" >&2; exit 2; }
echo "$DURABILITY" > "$WORK/railyard-durability"
RY_UP_ARGS="${RY_UP_ARGS:-} --scheduler-arg=--submit-durability=$DURABILITY"
export PATH=$BUILD/cli:$BUILD/scheduler:$BUILD/agent:$BUILD/workloads:$PATH
"$here/slurm/install.sh"  # sbatch, slurmctld, munge when missing (apt)
for p in railyard railyard-scheduler railyard-agent sbatch slurmctld curl; do
  command -v "$p" >/dev/null || { echo "vs-slurm: $p not found (build $BUILD?)" >&2; exit 3; }
done
SDIR=${USE_SLURM:-$WORK/slurm} RDIR=$WORK/railyard
log() { echo "vs-slurm: $*" >&2; }
# Bringing both up, stopping them, counting their active jobs: shared with bench/placement-replay.sh.
# shellcheck source-path=SCRIPTDIR
. "$here/lib/side-by-side.sh"
trap sbs_down EXIT

# --- process accounting -----------------------------------------------------------------------------------
ticks=$(getconf CLK_TCK)
cpu_s() { awk -v t="$ticks" '{ sub(/^.*\) /, ""); print ($12 + $13) / t }' "/proc/$1/stat"; }  # utime+stime
hwm_mb() { awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
reset_hwm() { echo 5 > "/proc/$1/clear_refs" 2>/dev/null || true; }

# --- bring up both clusters --------------------------------------------------------------------------------
sbs_up "$NODE_TRIES" || { log "no node count came up"; exit 1; }
log "both up: $NODES nodes (leaf $LEAF); slurmctld pid $CTLD, railyard-scheduler pid $SCHED (submits $DURABILITY); work dir $WORK"

# --- the four runs per N -------------------------------------------------------------------------------------
slurm_single() { for ((i = 0; i < $1; i++)); do sbatch -Q --gres=gpu:1 -o /dev/null --wrap true; done; }
slurm_bulk() { sbatch -Q --gres=gpu:1 -o /dev/null --array="1-$1" --wrap true; }
ry_single() { for ((i = 0; i < $1; i++)); do railyard submit --gpus 1 -- true >/dev/null; done; }
ry_bulk() { railyard submit --gpus 1 --array "1-$1" -- true >/dev/null; }
# The floor under any CLI's figure: the same loop (or single call) starting /bin/true, which does nothing.
# Neither system can submit faster than this; Slurm's time over it is the highest ratio a CLI could reach.
floor_single() { for ((i = 0; i < $1; i++)); do /bin/true; done; }
floor_bulk() { /bin/true; }

# Warm-up, not measured: the first jobs through a freshly started system cost it markedly more (caches,
# first pages of its database, first allocations). The same one-call jobs through both, each drained before
# the measured runs.
if ((WARMUP > 0)); then
  for sys in slurm ry; do
    "${sys}_single" "$WARMUP"
    [[ $(wait_drained "${sys}_active" "$(now)" "$E2E_TIMEOUT") != timeout ]] || log "$sys: warm-up jobs still active"
  done
  log "warmed up: $WARMUP one-call jobs through each system (not measured)"
fi

RESULTS=$WORK/results.tsv
printf 'system\tform\tN\trun\tsubmit_s\tsubmit_jobs_per_s\te2e_s\te2e_jobs_per_s\tsched_cpu_s\tcpu_ms_per_job\tpeak_rss_mb\n' > "$RESULTS"
measure() {  # measure SYSTEM FORM N RUN PID SUBMIT_FN ACTIVE_FN
  local sys=$1 form=$2 n=$3 run=$4 pid=$5 submit=$6 active=$7 c0 t0 t1 e2e c1
  settle  # the previous run's leftovers (Slurm's step daemons) must not land on this one
  reset_hwm "$pid"
  c0=$(cpu_s "$pid"); stamp t0
  "$submit" "$n" || log "$sys $form $n: submitting failed"
  stamp t1
  e2e=$(wait_drained "$active" "$t0" "$E2E_TIMEOUT")
  c1=$(cpu_s "$pid")
  awk -v s="$sys" -v f="$form" -v n="$n" -v r="$run" -v t0="$t0" -v t1="$t1" -v e="$e2e" -v c0="$c0" -v c1="$c1" -v m="$(hwm_mb "$pid")" '
    BEGIN { sub_s = t1 - t0; cpu = c1 - c0
      printf "%s\t%s\t%d\t%d\t%.4f\t%.0f\t%s\t%s\t%.2f\t%.2f\t%d\n", s, f, n, r, sub_s, n / sub_s, e,
        (e == "timeout" ? "-" : sprintf("%.0f", n / e)), cpu, 1000 * cpu / n, m }' | tee -a "$RESULTS" >&2
}
measure_floor() {  # measure_floor FORM N RUN: the floor_FORM loop's wall time, as a "floor" row
  local t0 t1
  settle
  stamp t0; "floor_$1" "$2"; stamp t1
  awk -v f="$1" -v n="$2" -v r="$3" -v t0="$t0" -v t1="$t1" 'BEGIN {
    printf "floor\t%s\t%d\t%d\t%.4f\t%.0f\t-\t-\t-\t-\t-\n", f, n, r, t1 - t0, n / (t1 - t0) }' | tee -a "$RESULTS" >&2
}
for n in $SINGLE_SIZES; do
  [[ $n == none ]] && continue
  for ((run = 1; run <= RUNS; run++)); do
    measure_floor single "$n" "$run"
    measure slurm single "$n" "$run" "$CTLD" slurm_single slurm_active
    measure railyard single "$n" "$run" "$SCHED" ry_single ry_active
  done
done
for n in $SIZES; do
  [[ $n == none ]] && continue
  for ((run = 1; run <= RUNS; run++)); do
    measure_floor bulk "$n" "$run"
    measure slurm bulk "$n" "$run" "$CTLD" slurm_bulk slurm_active
    measure railyard bulk "$n" "$run" "$SCHED" ry_bulk ry_active
  done
done
failed=$(ry_state FAILED)
[[ -z "$failed" || "$failed" == 0 ]] || log "railyard: $failed jobs FAILED (see $RDIR/scheduler.log)"

# --- report ------------------------------------------------------------------------------------------------------
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo));" \
  "$NODES emulated DGX H100 nodes, leaf $LEAF; Slurm $(sbatch --version | awk '{ print $2 }'), one slurmd per node;" \
  "railyard up --emulate-nodes 128 from $BUILD"
report "$RESULTS"
log "raw figures in $RESULTS"
