#!/usr/bin/env bash
# Railyard vs Slurm 22.05 on this machine, one run (issue 11). Both clusters run side by side on 127.0.0.1
# with the same node count and leaf groups (DGX H100, 8 GPUs a node, LEAF nodes per leaf switch).
# For each N it measures, for each system:
#   single: N one-job CLI calls (`sbatch --gres=gpu:1 --wrap true` vs `railyard submit --gpus 1 -- true`)
#   bulk:   one job array (`sbatch --array=1-N`) vs one POST /api/v1/jobs:batch of N specs
# and reports submit wall time (jobs/s), end-to-end time from the first submit until all N jobs have
# completed, the scheduler's CPU seconds over that window (/proc/PID/stat utime+stime: slurmctld vs
# railyard-scheduler) and its peak RSS (VmHWM, reset through /proc/PID/clear_refs before each run).
#
#   bench/vs-slurm.sh [-b BUILD] [-n "1000 5000"] [-s "1000 5000"] [-N "1024 256 128"] [-l LEAF] [-w DIR]
#                     [-t E2E_TIMEOUT_S] [-u SLURM_DIR]
#
# -n: sizes of the bulk runs; -s: sizes of the one-CLI-call-per-job runs (default: as -n; "none": skip; minutes
# per 1,000 jobs on 2 cores). -u: use a Slurm that bench/slurm/setup.sh already started in SLURM_DIR (its node
# count is used for Railyard too; it is left running). Otherwise:
# -N lists node counts to try, largest first: the first one whose Slurm (one slurmd per node) and Railyard
# both come up is used for both systems. Needs root (munge, slurmd, clear_refs). Every daemon it starts is
# stopped at exit (bench/slurm/stop.sh, railyard down).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=$root/build/release SIZES="1000 5000" SINGLE_SIZES= USE_SLURM= NODE_TRIES="1024 256 128" LEAF=32 E2E_TIMEOUT=600
WORK=$(mktemp -d /tmp/vs-slurm.XXXXXX)
while getopts "b:n:s:N:l:w:t:u:" opt; do
  case $opt in
    b) BUILD=$(realpath "$OPTARG") ;; n) SIZES=$OPTARG ;; N) NODE_TRIES=$OPTARG ;; l) LEAF=$OPTARG ;;
    w) WORK=$(realpath -m "$OPTARG"); mkdir -p "$WORK" ;; t) E2E_TIMEOUT=$OPTARG ;;
    s) SINGLE_SIZES=$OPTARG ;; u) USE_SLURM=$(realpath "$OPTARG") ;;
    *) sed -n '2,21p' "$0"; exit 2 ;;
  esac
done
SINGLE_SIZES=${SINGLE_SIZES:-$SIZES}
export PATH=$BUILD/cli:$BUILD/scheduler:$BUILD/agent:$BUILD/jobs/workloads:$PATH
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
log "both up: $NODES nodes (leaf $LEAF); slurmctld pid $CTLD, railyard-scheduler pid $SCHED; work dir $WORK"

# --- the four runs per N -------------------------------------------------------------------------------------
slurm_single() { for ((i = 0; i < $1; i++)); do sbatch -Q --gres=gpu:1 -o /dev/null --wrap true; done; }
slurm_bulk() { sbatch -Q --gres=gpu:1 -o /dev/null --array="1-$1" --wrap true; }
ry_single() { for ((i = 0; i < $1; i++)); do railyard submit --gpus 1 -- true >/dev/null; done; }
ry_bulk() {
  local body=$WORK/batch-$1.json
  awk -v n="$1" 'BEGIN { printf "{\"jobs\":["; for (i = 0; i < n; i++) printf "%s{\"gpus\":1,\"command\":[\"true\"]}", (i ? "," : ""); print "]}" }' > "$body"
  local code
  code=$(curl -s -o "$WORK/batch-reply.json" -w '%{http_code}' "${AUTH[@]}" -H 'Content-Type: application/json' \
    --data-binary "@$body" "$API/jobs:batch")
  [[ $code == 201 ]] || log "jobs:batch answered $code: $(head -c 300 "$WORK/batch-reply.json")"
}

RESULTS=$WORK/results.tsv
printf 'system\tform\tN\tsubmit_s\tsubmit_jobs_per_s\te2e_s\te2e_jobs_per_s\tsched_cpu_s\tcpu_ms_per_job\tpeak_rss_mb\n' > "$RESULTS"
measure() {  # measure SYSTEM FORM N PID SUBMIT_FN ACTIVE_FN
  local sys=$1 form=$2 n=$3 pid=$4 submit=$5 active=$6 c0 t0 t1 e2e c1
  reset_hwm "$pid"
  c0=$(cpu_s "$pid"); t0=$(now)
  "$submit" "$n" || log "$sys $form $n: submitting failed"
  t1=$(now)
  e2e=$(wait_drained "$active" "$t0" "$E2E_TIMEOUT")
  c1=$(cpu_s "$pid")
  awk -v s="$sys" -v f="$form" -v n="$n" -v t0="$t0" -v t1="$t1" -v e="$e2e" -v c0="$c0" -v c1="$c1" -v m="$(hwm_mb "$pid")" '
    BEGIN { sub_s = t1 - t0; cpu = c1 - c0
      printf "%s\t%s\t%d\t%.2f\t%.0f\t%s\t%s\t%.2f\t%.2f\t%d\n", s, f, n, sub_s, n / sub_s, e,
        (e == "timeout" ? "-" : sprintf("%.0f", n / e)), cpu, 1000 * cpu / n, m }' | tee -a "$RESULTS" >&2
}
for n in $SINGLE_SIZES; do
  [[ $n == none ]] && continue
  measure slurm single "$n" "$CTLD" slurm_single slurm_active
  measure railyard single "$n" "$SCHED" ry_single ry_active
done
for n in $SIZES; do
  measure slurm bulk "$n" "$CTLD" slurm_bulk slurm_active
  measure railyard bulk "$n" "$SCHED" ry_bulk ry_active
done
failed=$(ry_state FAILED)
[[ -z "$failed" || "$failed" == 0 ]] || log "railyard: $failed jobs FAILED (see $RDIR/scheduler.log)"

# --- report ------------------------------------------------------------------------------------------------------
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo));" \
  "$NODES emulated DGX H100 nodes, leaf $LEAF; Slurm $(sbatch --version | awk '{ print $2 }'), one slurmd per node;" \
  "railyard up --emulate-nodes 128 from $BUILD"
awk -F'\t' '
  NR == 1 { next }
  { k = $2 "\t" $3; sub_[$1, k] = $5; e2e[$1, k] = $7; cpu[$1, k] = $9; mem[$1, k] = $10; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k } }
  function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.1fx", a / b) }
  END {
    printf "| form | N | submit jobs/s Slurm | Railyard | ratio | e2e jobs/s Slurm | Railyard | ratio | sched CPU ms/job Slurm | Railyard | ratio | peak RSS MB Slurm | Railyard |\n"
    printf "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    for (i = 1; i <= nk; i++) { k = keys[i]; split(k, p, "\t")
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2],
        sub_["slurm", k], sub_["railyard", k], ratio(sub_["railyard", k], sub_["slurm", k]),
        e2e["slurm", k], e2e["railyard", k], ratio(e2e["railyard", k], e2e["slurm", k]),
        cpu["slurm", k], cpu["railyard", k], ratio(cpu["slurm", k], cpu["railyard", k]),
        mem["slurm", k], mem["railyard", k] } }' "$RESULTS"
echo "(ratios: Railyard over Slurm for jobs/s; Slurm over Railyard for CPU per job, so > 1x favours Railyard)"
log "raw figures in $RESULTS"
