#!/usr/bin/env bash
# Placement quality on a replayed Philly slice, Railyard vs Slurm 22.05, both live on this machine (issue 11).
# One slice of /work/shared/traces/philly_gavel.csv is submitted at its (compressed) submit times to both
# systems at once, brought up side by side by bench/lib/side-by-side.sh (Slurm: bench/slurm/setup.sh, one
# slurmd per emulated node, topology/tree; Railyard: `railyard up --emulate-nodes 128`), with the same node
# count and leaf groups (LEAF nodes per leaf switch). For each multi-node job it reports the leaf groups
# spanned against the minimum, ceil(nodes / LEAF) (Railyard's min_leaves with equal leaves), both computed
# here from each system's own node -> leaf map, and the queueing delay (start - submit, whole seconds on both).
#
#   bench/placement-replay.sh [-b BUILD] [-N "1024 256"] [-l LEAF] [-s SKIP] [-j JOBS] [-g SCALE] [-c COMPRESS]
#                             [-L LOAD] [-m MAX_DUR] [-t TRACE] [-w DIR] [-T DRAIN_TIMEOUT_S] [-u SLURM_DIR]
#
# The slice (the trace reader's rules, scheduler/sim/trace.hpp): rows sorted by submit_s, bad rows skipped;
# GPU counts times SCALE (default 8: 1,2,4,8,16,32 GPUs become 8..256 GPUs = 1..32 whole 8-GPU nodes, nodes =
# ceil(GPUs / 8)); jobs needing more nodes than the cluster has are skipped; then the JOBS rows after the first
# SKIP. Times: submit = (submit_s - first submit_s) / COMPRESS / LOAD (LOAD as the simulator's --load), duration
# = duration_s / COMPRESS rounded, clamped to [2, MAX_DUR] s. Every job is `sleep DURATION` on whole nodes,
# time limit ceil(DURATION / 60) + 1 minutes on both:
#   Slurm:    sbatch -J ID -N K --gres=gpu:8 --exclusive -t H:MM:00 -o /dev/null --wrap "sleep D"
#   Railyard: railyard submit --name ID --nodes K --gpus-per-node 8 --time H:MM:00 -- sleep D
# One submitter per system, both running at once from the same start instant, each sleeping until the next
# job's submit time (a submit that lags behind only delays that job's own submit time, which both systems
# record). Slurm keeps no accounting here (setup.sh), so squeue -t R,CG,CD is polled every second (jobs last
# >= 2 s and stay listed MinJobAge = 2 s after their end); Railyard's jobs come from GET /api/v1/jobs.
#
# Output in the work dir (-w, default a new /tmp/placement-replay.*): slice.csv, jobs-slurm.csv and
# jobs-railyard.csv (one row per job; free_leaves_needed, see "per job" below, uses Railyard's event order from
# its SQLite file when sqlite3 is installed), compare.csv (one row per multi-node job placed by both) and
# summary.md (also printed). Needs root (munge, slurmd). Every daemon started here is stopped at exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=$root/build/release NODE_TRIES="1024 256" LEAF=32 SKIP=500 JOBS=500 SCALE=8 COMPRESS=800 LOAD=4 MAX_DUR=180
TRACE=/work/shared/traces/philly_gavel.csv DRAIN_TIMEOUT=900 USE_SLURM='' WORK=''
while getopts "b:N:l:s:j:g:c:L:m:t:w:T:u:" opt; do
  case $opt in
    b) BUILD=$(realpath "$OPTARG") ;; N) NODE_TRIES=$OPTARG ;; l) LEAF=$OPTARG ;; s) SKIP=$OPTARG ;;
    j) JOBS=$OPTARG ;; g) SCALE=$OPTARG ;; c) COMPRESS=$OPTARG ;; L) LOAD=$OPTARG ;; m) MAX_DUR=$OPTARG ;;
    t) TRACE=$(realpath "$OPTARG") ;; w) WORK=$(realpath -m "$OPTARG"); mkdir -p "$WORK" ;;
    T) DRAIN_TIMEOUT=$OPTARG ;; u) USE_SLURM=$(realpath "$OPTARG") ;;
    *) sed -n '2,29p' "$0"; exit 2 ;;
  esac
done
WORK=${WORK:-$(mktemp -d /tmp/placement-replay.XXXXXX)}
export PATH=$BUILD/cli:$BUILD/scheduler:$BUILD/agent:$PATH
"$here/slurm/install.sh"  # sbatch, slurmctld, munge when missing (apt)
for p in railyard railyard-scheduler railyard-agent sbatch squeue slurmctld curl jq; do
  command -v "$p" >/dev/null || { echo "placement-replay: $p not found (build $BUILD?)" >&2; exit 3; }
done
log() { echo "placement-replay: $*" >&2; }
SDIR=${USE_SLURM:-$WORK/slurm} RDIR=$WORK/railyard POLLER=  # SDIR, RDIR: for the lib
# shellcheck source-path=SCRIPTDIR
. "$here/lib/side-by-side.sh"
cleanup() {
  [[ -z "$POLLER" ]] || kill "$POLLER" 2>/dev/null || true
  sbs_down
}
trap cleanup EXIT

# --- the slice ------------------------------------------------------------------------------------------------
GPN=8  # GPUs per node of the dgx-h100 profile both systems emulate
make_slice() {  # -> trace_id,at_ms,duration_s,nodes,time_limit
  tail -n +2 "$TRACE" | sort -t, -k2,2g -s |
    awk -F, -v skip="$SKIP" -v n="$JOBS" -v scale="$SCALE" -v c="$COMPRESS" -v load="$LOAD" -v cap="$MAX_DUR" \
      -v gpn="$GPN" -v maxn="${1:-0}" '
      { gsub(/[ \t\r]/, "") }
      NF < 5 || NF > 6 || $1 == "" || $2 !~ /^[0-9.]+$/ || $3 !~ /^[0-9.]+$/ || $4 !~ /^[0-9]+$/ || $4 + 0 <= 0 { next }
      { k = int(($4 * scale + gpn - 1) / gpn) }
      maxn > 0 && k > maxn { next }
      ++good <= skip { next }
      good > skip + n { next }
      { if (!started) { t0 = $2; started = 1 }
        d = int($3 / c + 0.5); if (d < 2) d = 2; if (d > cap) d = cap
        m = int((d + 59) / 60) + 1
        printf "%s,%d,%d,%d,%d:%02d:00\n", $1, ($2 - t0) / c / load * 1000, d, k, int(m / 60), m % 60 }'
}

# --- bring up both -----------------------------------------------------------------------------------------------
t_up=$(now)
sbs_up "$NODE_TRIES" || { log "no node count came up"; exit 1; }
log "both up: $NODES nodes (leaf $LEAF) in $(awk -v a="$t_up" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s;" \
  "slurmctld pid $CTLD, railyard-scheduler pid $SCHED; work dir $WORK"
make_slice "$NODES" > "$WORK/slice.csv"
[[ -s "$WORK/slice.csv" ]] || { log "empty slice"; exit 1; }
awk -F, '{ n[$1]++ } END { for (k in n) if (n[k] > 1) { print "placement-replay: trace id " k " repeats" > "/dev/stderr"; exit 1 } }' \
  "$WORK/slice.csv"

# node -> leaf, from each system's own description of itself
awk '/^SwitchName=.* Nodes=/ { sub(/^SwitchName=/, "", $1); sub(/^Nodes=/, "", $2); print $1, $2 }' "$SDIR/topology.conf" |
  while read -r leaf list; do scontrol show hostnames "$list" | sed "s/\$/ $leaf/"; done > "$WORK/leaves-slurm.txt"
curl -sf "$API/nodes" | jq -r '.nodes[] | "\(.name) \(.leaf)"' > "$WORK/leaves-railyard.txt"
for s in slurm railyard; do
  [[ $(wc -l < "$WORK/leaves-$s.txt") == "$NODES" ]] || { log "$s: leaf map has not $NODES nodes"; exit 1; }
done

# --- replay ------------------------------------------------------------------------------------------------------
poll() {  # squeue of started jobs every second, and the load average every 10 s
  local i=0
  while :; do
    SLURM_TIME_FORMAT=%s squeue -h -t R,CG,CD -o '%i|%j|%T|%V|%S|%e|%D|%N' >> "$WORK/squeue.log" 2>/dev/null || true
    ((i++ % 10)) || echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)" >> "$WORK/loadavg.log"
    sleep 1
  done
}
submit_all() {  # submit_all SYSTEM T0_US -> WORK/submitted-SYSTEM.csv: trace_id,job_id,lag_ms
  local sys=$1 t0=$2 id at d k lim target left jid
  while IFS=, read -r id at d k lim; do
    target=$((t0 + at * 1000)) left=$((t0 + at * 1000 - ${EPOCHREALTIME/[.,]/}))
    ((left <= 0)) || sleep "$(printf '%d.%06d' $((left / 1000000)) $((left % 1000000)))"
    case $sys in
      slurm) jid=$(sbatch --parsable -J "$id" -N "$k" --gres=gpu:$GPN --exclusive -t "$lim" -o /dev/null \
        --wrap "sleep $d" 2>> "$WORK/submit-$sys.err") || jid= ;;
      railyard) jid=$(railyard submit --name "$id" --nodes "$k" --gpus-per-node $GPN --time "$lim" -- sleep "$d" \
        2>> "$WORK/submit-$sys.err") || jid= ;;
    esac
    echo "$id,$jid,$(((${EPOCHREALTIME/[.,]/} - target) / 1000))"
  done < "$WORK/slice.csv" > "$WORK/submitted-$sys.csv"
}
poll & POLLER=$!
t0=$((${EPOCHREALTIME/[.,]/} + 2000000))
log "replaying $(wc -l < "$WORK/slice.csv") jobs over $(tail -1 "$WORK/slice.csv" | awk -F, '{ printf "%.0f", $2 / 1000 }') s" \
  "on both; load average $(cut -d' ' -f1-3 /proc/loadavg)"
submit_all slurm "$t0" & sub_slurm=$!
submit_all railyard "$t0" & sub_ry=$!
wait "$sub_slurm" "$sub_ry"
log "all submitted; waiting for both to drain (at most $DRAIN_TIMEOUT s)"
drain_slurm=$(wait_drained slurm_active "$(awk -v t="$t0" 'BEGIN { printf "%.6f", t / 1e6 }')" "$DRAIN_TIMEOUT")
drain_ry=$(wait_drained ry_active "$(awk -v t="$t0" 'BEGIN { printf "%.6f", t / 1e6 }')" "$DRAIN_TIMEOUT")
sleep 2  # a last poll of Slurm's completed jobs
kill "$POLLER" 2>/dev/null || true
POLLER=
log "drained: Slurm $drain_slurm s, Railyard $drain_ry s after the first submit"

# --- collect: trace_id|job_id|state|submit|start|end|nodelist ---------------------------------------------------
# Slurm: the first RUNNING row gives start and nodes (a COMPLETING row lists only the nodes still completing);
# the last row gives the final state and end.
awk -F'|' '
  { id = $2 }
  !(id in seen) { seen[id] = 1; order[++n] = id }
  $3 == "RUNNING" && !(id in start) { start[id] = $5; nodes[id] = $8 }
  !(id in nodes) && $8 != "" { nodes[id] = $8; if (!(id in start)) start[id] = $5 }
  { jid[id] = $1; state[id] = $3; sub_[id] = $4; end_[id] = ($3 == "COMPLETED" ? $6 : "") }
  END { for (i = 1; i <= n; i++) { id = order[i]
    print id "|" jid[id] "|" state[id] "|" sub_[id] "|" start[id] "|" end_[id] "|" nodes[id] } }' \
  "$WORK/squeue.log" > "$WORK/raw-slurm.txt"
curl -sf "$API/jobs?limit=10000" |
  jq -r '.jobs[] | [.name, .id, .state, .submit_time, .start_time, .end_time, (.nodes | join(",")),
                    .leaves_spanned, .min_leaves] | map(. // "" | tostring) | join("|")' > "$WORK/raw-railyard.txt"

# --- per job -------------------------------------------------------------------------------------------------------
# system,trace_id,job_id,state,nodes,submit_time,start_time,end_time,queue_s,leaves,min_leaves,excess_leaves,
# leaf_list,free_leaves_needed. The last column says whether the system's own state allowed better: the fewest
# leaf groups its free nodes would have needed when the job was placed (largest free groups first).
# Railyard: exact up to one pass, from the order of its "placed" and "COMPLETED" events (the events table's
# sequence; the API gives only whole seconds): nodes freed after the pass's snapshot count as free, so it is a
# lower bound. Slurm (whole seconds from squeue): every node not held by a job that started before that second
# and ended after it counts as free, a looser lower bound. leaves > free_leaves_needed: the placement chose
# more leaf groups than its free nodes required; leaves == free_leaves_needed > min_leaves: the free nodes were
# scattered, so the excess comes from the state the system had reached (earlier placements, what still ran).
per_job() {  # per_job SYSTEM [ORDER_FILE: "JOB_ID PLACED_SEQ COMPLETED_SEQ" lines, used instead of times]
  awk -F'|' -v sys="$1" -v leaf_size="$LEAF" -v order="${2:-}" '
    function expand(s, out,   n, i, c, depth, tok, toks, nt, b, e, pre, post, parts, m, j, r, w, x) {
      nt = 0; tok = ""; depth = 0
      for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "[") depth++
        else if (c == "]") depth--
        if (c == "," && depth == 0) { if (tok != "") toks[++nt] = tok; tok = "" } else tok = tok c
      }
      if (tok != "") toks[++nt] = tok
      n = 0
      for (i = 1; i <= nt; i++) {
        tok = toks[i]; b = index(tok, "[")
        if (!b) { out[++n] = tok; continue }
        e = index(tok, "]"); pre = substr(tok, 1, b - 1); post = substr(tok, e + 1)
        m = split(substr(tok, b + 1, e - b - 1), parts, ",")
        for (j = 1; j <= m; j++) {
          if (split(parts[j], r, "-") == 2) {
            w = length(r[1])
            for (x = r[1] + 0; x <= r[2] + 0; x++) out[++n] = pre sprintf("%0" w "d", x) post
          } else out[++n] = pre parts[j] post
        }
      }
      return n
    }
    function free_leaves_needed(j,   t, o, i, l, free, v, nv, x, y, tmp, got) {
      t = sk[j]
      for (i = 1; i <= nleaves; i++) free[leaves[i]] = size[leaves[i]]
      for (o = 1; o <= nj; o++)
        if (o != j && sk[o] != "" && sk[o] < t && (ek[o] == "" || ek[o] > t))
          for (i = 1; i <= jl_n[o]; i++) free[jl_leaf[o, i]] -= jl_cnt[o, i]
      nv = 0
      for (i = 1; i <= nleaves; i++) v[++nv] = free[leaves[i]]
      for (x = 2; x <= nv; x++)  # insertion sort, largest first (tens of leaves)
        for (y = x; y > 1 && v[y] > v[y - 1]; y--) { tmp = v[y]; v[y] = v[y - 1]; v[y - 1] = tmp }
      got = 0
      for (i = 1; i <= nv; i++) { got += (v[i] > 0 ? v[i] : 0); if (got >= want_k[j]) return i }
      return "?"
    }
    BEGIN { if (order != "") while ((getline line < order) > 0) { split(line, f, " "); oseq[f[1]] = f[2]; oend[f[1]] = f[3] } }
    FNR == 1 { file++ }
    file == 1 { split($0, f, " "); leaf[f[1]] = f[2]; if (!(f[2] in size)) leaves[++nleaves] = f[2]; size[f[2]]++; next }
    file == 2 { split($0, f, ","); want[f[1]] = f[4]; next }
    !($1 in want) { next }
    {
      j = ++nj; k = want_k[j] = want[$1]; got[$1] = 1
      delete nodes; delete cnt; nl = 0; list = ""
      nn = ($7 == "") ? 0 : expand($7, nodes)
      for (i = 1; i <= nn; i++) {
        l = (nodes[i] in leaf) ? leaf[nodes[i]] : "?"
        if (!(l in cnt)) { nl++; list = list (list == "" ? "" : ";") l; jl_leaf[j, nl] = l }
        cnt[l]++
      }
      for (i = 1; i <= nl; i++) jl_cnt[j, i] = cnt[jl_leaf[j, i]]
      jl_n[j] = nl; placed[j] = nn
      if (order != "") { sk[j] = ($2 in oseq) ? oseq[$2] + 0 : ""; ek[j] = ($2 in oend) ? oend[$2] : "" }
      else { sk[j] = $5; ek[j] = $6 }
      if (ek[j] != "") ek[j] += 0
      minl = int((k + leaf_size - 1) / leaf_size)
      q = ($5 == "" || $4 == "") ? "" : $5 - $4
      row[j] = sprintf("%s,%s,%s,%s,%d,%s,%s,%s,%s,%s,%d,%s,%s", sys, $1, $2, $3, k, $4, $5, $6, q,
        (nn ? nl : ""), minl, (nn ? nl - minl : ""), list)
      if (nn && nn != k) printf "placement-replay: %s job %s: %d nodes placed, %d asked\n", sys, $1, nn, k > "/dev/stderr"
      if (sys == "railyard" && nn && ($8 != nl || $9 != minl))
        printf "placement-replay: railyard job %s: leaves_spanned/min_leaves %s/%s, computed here %d/%d\n", $1, $8, $9, nl, minl > "/dev/stderr"
    }
    END {
      for (j = 1; j <= nj; j++) print row[j] "," ((placed[j] && want_k[j] >= 2) ? free_leaves_needed(j) : "")
      for (id in want) if (!(id in got)) printf "%s,%s,,NOT_SEEN,%d,,,,,,%d,,,\n", sys, id, want[id], int((want[id] + leaf_size - 1) / leaf_size)
    }' "$WORK/leaves-$1.txt" "$WORK/slice.csv" "$WORK/raw-$1.txt"
}
HEADER=system,trace_id,job_id,state,nodes,submit_time,start_time,end_time,queue_s,leaves,min_leaves,excess_leaves
HEADER+=,leaf_list,free_leaves_needed
# Railyard's event order (its SQLite events table, read-only after the run).
sqlite3 -readonly "$RDIR/railyard.db" "SELECT substr(subject, 5), min(CASE WHEN what LIKE 'placed on %' THEN seq END),
  max(CASE WHEN what = 'COMPLETED' OR actor LIKE 'agent:%' AND what NOT LIKE 'running%' THEN seq END)
  FROM events WHERE subject LIKE 'job:%' GROUP BY subject" 2>/dev/null | tr '|' ' ' > "$WORK/order-railyard.txt" || true
{ echo "$HEADER"; per_job slurm; } > "$WORK/jobs-slurm.csv"
{ echo "$HEADER"; per_job railyard "$([[ -s $WORK/order-railyard.txt ]] && echo "$WORK/order-railyard.txt")"; } \
  > "$WORK/jobs-railyard.csv"

# --- summary -------------------------------------------------------------------------------------------------------
pct() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { if (!NR) { print "-"; exit } i = int(p / 100 * NR + 0.999999); if (i < 1) i = 1; print v[i] }'; }
stats() {  # stats SYSTEM -> one table row
  local f=$WORK/jobs-$1.csv multi
  multi=$(awk -F, 'NR > 1 && $5 >= 2 && $10 != ""' "$f")
  awk -F, -v sys="$1" '
    NR > 1 { all++; if ($4 != "COMPLETED") bad[$4]++ }
    NR > 1 && $5 >= 2 && $10 != "" { m++; ex += $12; q += $9; if ($12 > 0) over++; if ($12 > mx) mx = $12
                                      if ($14 != "" && $14 != "?" && $10 > $14) own++ }
    END { s = ""; for (k in bad) s = s (s == "" ? "" : " ") k "=" bad[k]
      printf "| %s | %d | %s | %d | %d (%.1f%%) | %d | %.3f | %d | %.1f | ", sys, all, (s == "" ? "all" : s), m, over,
        (m ? 100 * over / m : 0), own, (m ? ex / m : 0), mx, (m ? q / m : 0) }' "$f"
  printf '%s | %s | %s |\n' "$(cut -d, -f9 <<<"$multi" | pct 50)" "$(cut -d, -f9 <<<"$multi" | pct 95)" \
    "$(awk -F, 'NR > 1 && $9 != "" { s += $9; n++ } END { printf "%.1f", n ? s / n : 0 }' "$f")"
}
queue_by_size() {  # queue_by_size SYSTEM -> "1: 6.8, 2: 1.1, ..." (mean queueing delay by node count)
  awk -F, 'NR > 1 && $9 != "" { n[$5]++; q[$5] += $9 } END { for (k in n) printf "%d %d %.1f\n", k, n[k], q[k] / n[k] }' \
    "$WORK/jobs-$1.csv" | sort -n | awk '{ printf "%s%s nodes (%d jobs) %s s", (NR > 1 ? ", " : ""), $1, $2, $3 }'
}
# compare.csv: multi-node jobs placed by both
join -t, -j1 \
  <(awk -F, 'NR > 1 && $5 >= 2 && $10 != "" { print $2 "," $5 "," $11 "," $10 "," $9 "," $13 "," $14 }' "$WORK/jobs-railyard.csv" | sort) \
  <(awk -F, 'NR > 1 && $5 >= 2 && $10 != "" { print $2 "," $10 "," $9 "," $13 "," $14 }' "$WORK/jobs-slurm.csv" | sort) |
  { echo -n trace_id,nodes,min_leaves,railyard_leaves,railyard_queue_s,railyard_leaf_list,railyard_free_leaves_needed,
    echo slurm_leaves,slurm_queue_s,slurm_leaf_list,slurm_free_leaves_needed
    sort -t, -k1,1; } > "$WORK/compare.csv"
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo));" \
    "load average during the replay: mean $(awk '{ s += $2; n++ } END { printf "%.1f", n ? s / n : 0 }' "$WORK/loadavg.log")," \
    "max $(sort -k2 -g "$WORK/loadavg.log" | tail -1 | cut -d' ' -f2)"
  echo "# $NODES emulated DGX H100 nodes (8 GPUs), leaf $LEAF on both; Slurm $(sbatch --version | awk '{ print $2 }')" \
    "(cons_tres, topology/tree, backfill), railyard up --emulate-nodes ${EMULATE:-128} from $BUILD"
  echo "# slice: $TRACE rows $((SKIP + 1))..$((SKIP + JOBS)) by submit_s, GPUs x$SCALE, times / $COMPRESS, submits / $LOAD more," \
    "durations clamped to [2, $MAX_DUR] s: $(wc -l < "$WORK/slice.csv") jobs," \
    "$(awk -F, '$4 >= 2' "$WORK/slice.csv" | wc -l) multi-node, submitted over" \
    "$(tail -1 "$WORK/slice.csv" | awk -F, '{ printf "%.0f", $2 / 1000 }') s; both drained after $drain_slurm s (Slurm)," \
    "$drain_ry s (Railyard); submit lag p95 $(cut -d, -f3 "$WORK/submitted-slurm.csv" | pct 95) ms (Slurm)," \
    "$(cut -d, -f3 "$WORK/submitted-railyard.csv" | pct 95) ms (Railyard)"
  echo
  echo "| system | jobs | not COMPLETED | multi-node placed | span > min | span > free nodes needed | mean excess leaves | max excess | queue mean s (multi) | p50 | p95 | queue mean s (all) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  stats slurm
  stats railyard
  echo
  echo "(span > free nodes needed: the placement used more leaf groups than the system's own free nodes required at"
  echo "that moment; Railyard's from its event order, Slurm's from whole seconds, a looser bound.)"
  echo "Queueing delay by job size, Slurm: $(queue_by_size slurm)."
  echo "Queueing delay by job size, Railyard: $(queue_by_size railyard)."
  echo
  awk -F, 'NR > 1 { n++; if ($4 > $8) more++; else if ($4 < $8) less++; else same++
                    if ($4 > $8) list = list sprintf("\n  %s: %d nodes, min %d; Railyard %d leaves (%s; its free nodes needed %s), Slurm %d (%s)",
                                                     $1, $2, $3, $4, $6, $7, $8, $10) }
    END { printf "Multi-node jobs placed by both: %d. Railyard spans more leaves than Slurm: %d; fewer: %d; the same: %d.%s\n",
          n, more, less, same, list }' "$WORK/compare.csv"
} | tee "$WORK/summary.md"
log "per-job CSVs: $WORK/jobs-slurm.csv $WORK/jobs-railyard.csv $WORK/compare.csv"
