#!/usr/bin/env bash
# Controller high availability end to end (issue 30), with real etcd, two railyard-scheduler instances sharing
# one SQLite database, and a real agent hosting 2 emulated DGX H100 nodes, all on 127.0.0.1.
#
# HA_STATE=etcd (the default: each scheduler its own database, the leader's writes replicated through etcd) or
# shared (one database both open).
#
#   ha_test.sh failover   s1 leads; the standby answers only /healthz and /api/v1/leader (503 + the leader
#                         elsewhere); a 2-node job runs; `railyard submit` runs in a loop (RAILYARD_URL lists
#                         both) while s1 is killed with SIGKILL: s2 accepts submits within 10 s, no
#                         acknowledged job is lost or duplicated, the running job keeps its processes, and s1
#                         restarted is a standby. HA_SUBMITS (default 60) submits, HA_ETCD_MEMBERS (1) members,
#                         HA_LONG_LAUNCHER (none; mpi: the running job is a 2-node mpirun, 8 ranks).
#   ha_test.sh cutoff     s1's etcd (its only member) is stopped with SIGSTOP: s1 exits (status 75) before its
#                         lease can expire, s2 cannot lead meanwhile; after SIGCONT s2 leads and the job that
#                         ran under s1 still runs.
#   ha_test.sh etcd_restart  every etcd member restarts: a leader afterwards, no job lost, the job still runs.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
trap ha_cleanup EXIT
ha_require

LONG_LAUNCHER=${HA_LONG_LAUNCHER:-none}
LONG_SPEC='{"name":"long","nodes":2,"gpus_per_node":4,"launcher":"'$LONG_LAUNCHER'","command":["sleep","3017"],"time_limit":7200}'
# none: one process per node; mpi: one rank per GPU, through mpirun and a remote orted.
LONG_PROCS=$([ "$LONG_LAUNCHER" = mpi ] && echo 8 || echo 2)
SHORT_SPEC='{"name":"short","gpus":1,"command":["true"],"time_limit":60}'

# Whether process $1 descends from process $2 (through /proc's parent links).
descends_from() {
  local p=$1
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    [ "$p" = "$2" ] && return 0
    p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
  done
  return 1
}

# The pids of the long job's processes (sleep 3017 under this test's agent: not a rank of another run that
# is still going away), sorted.
long_pids() {
  local p
  for p in $(pgrep -x sleep -a | awk '$3 == "3017" {print $1}'); do
    descends_from "$p" "${HA_PID[agent]}" && echo "$p"
  done | sort | tr '\n' ' '
}

all_job_ids() { ha_all_jobs "$1" .id; }

start_pair() {
  ha_start_etcd "${HA_ETCD_MEMBERS:-1}"
  ha_setup_cluster
  ha_start_sched s1
  [ "$(ha_wait_leader 30 s1)" = s1 ] || ha_fail "s1 did not lead"
  ha_start_sched s2
  HA_URLS="$(ha_url s1),$(ha_url s2)"
  ha_start_agent
  ha_wait_nodes_up "$(ha_url s1)" 2 60
  local r
  r=$(ha_submit "$(ha_url s1)" "$LONG_SPEC")
  [ "${r##* }" = 201 ] || ha_fail "long job submit: $r"
  LONG=$(echo "${r% *}" | jq .id)
  ha_wait_state "$(ha_url s1)" "$LONG" RUNNING 60
  local until=$((SECONDS + 30))
  until PIDS_BEFORE=$(long_pids); [ "$(echo "$PIDS_BEFORE" | wc -w)" = "$LONG_PROCS" ] || [ $SECONDS -ge $until ]; do
    sleep 0.1  # an MPI job is RUNNING once mpirun started: its ranks follow
  done
  [ "$(echo "$PIDS_BEFORE" | wc -w)" = "$LONG_PROCS" ] ||
    ha_fail "expected $LONG_PROCS processes of job $LONG, found: $PIDS_BEFORE"
  ha_log "s1 leads; job $LONG runs as $PIDS_BEFORE"
}

# The standby answers /healthz and GET /api/v1/leader, and sends everything else to the leader.
check_standby() {
  local until=$((SECONDS + 10)) leader="" r
  while [ $SECONDS -lt $until ]; do
    leader=$(curl -sf -m 1 "$(ha_url s2)/api/v1/leader" | jq -r '.leader.name // empty' || true)
    [ "$leader" = s1 ] && break
    sleep 0.1
  done
  [ "$leader" = s1 ] || ha_fail "s2 does not name s1 as the leader"
  curl -sf "$(ha_url s2)/healthz" | jq -e '.role == "standby"' >/dev/null || ha_fail "s2 /healthz"
  r=$(ha_submit "$(ha_url s2)" "$SHORT_SPEC")
  [ "${r##* }" = 503 ] || ha_fail "a standby took a submit: $r"
  echo "${r% *}" | jq -e --arg a "$(ha_url s1)" '.error.code == "not_leader" and .leader.address == $a' >/dev/null ||
    ha_fail "the standby's 503 does not name the leader: $r"
  curl -sf "$(ha_url s1)/api/v1/leader" | jq -e '.self.role == "leader" and .leader.epoch > 0' >/dev/null ||
    ha_fail "s1 /api/v1/leader"
  ha_log "standby ok: 503 with the leader's address"
}

# A retried submit with the same key gets the same id, and no second job.
check_idempotent() {
  local a b
  a=$(ha_submit "$(ha_url s1)" "$SHORT_SPEC" same-key)
  b=$(ha_submit "$(ha_url s1)" "$SHORT_SPEC" same-key)
  [ "${a##* }" = 201 ] && [ "${b##* }" = 201 ] || ha_fail "idempotent submits: $a / $b"
  [ "$(echo "${a% *}" | jq .id)" = "$(echo "${b% *}" | jq .id)" ] || ha_fail "same key, two ids: $a / $b"
  IDEM=$(echo "${a% *}" | jq .id)
}

# start_storm N: N `railyard submit` calls one after another in the background (RAILYARD_URL lists every
# scheduler, the CLI retries as a user's would); each acknowledged id, or FAIL, is a line of $HA_DIR/acked.
start_storm() {
  : >"$HA_DIR/acked"
  (
    for _ in $(seq "$1"); do
      if id=$(RAILYARD_URL=$HA_URLS "$RAILYARD_CLI" submit --gpus 1 --time 1m --name storm -- true 2>>"$HA_DIR/storm.err"); then
        echo "$id" >>"$HA_DIR/acked"
      else
        echo FAIL >>"$HA_DIR/acked"
      fi
    done
  ) &
  STORM=$!
}

# wait_acked N: until N submits of the storm have answered.
wait_acked() { while [ "$(wc -l <"$HA_DIR/acked")" -lt "$1" ]; do sleep 0.05; done; }

# check_acked URL N EXTRA...: the storm ended with N acknowledged and none failed, and the scheduler at URL
# holds exactly those jobs and the EXTRA ids, each once.
check_acked() {
  local url=$1 n=$2
  shift 2
  wait "$STORM"
  grep -q FAIL "$HA_DIR/acked" && ha_fail "submits failed: $(grep -c FAIL "$HA_DIR/acked"); $(tail -3 "$HA_DIR/storm.err")"
  sort -n "$HA_DIR/acked" >"$HA_DIR/acked.sorted"
  [ "$(uniq "$HA_DIR/acked.sorted" | wc -l)" = "$n" ] || ha_fail "duplicate ids acknowledged"
  all_job_ids "$url" | sort -n >"$HA_DIR/stored"
  printf '%s\n' "$@" | cat - "$HA_DIR/acked.sorted" | sort -n >"$HA_DIR/expected"
  diff "$HA_DIR/expected" "$HA_DIR/stored" >"$HA_DIR/diff" ||
    ha_fail "jobs at $url differ from those acknowledged (< acknowledged, > stored): $(head -5 "$HA_DIR/diff")"
}

failover() {
  start_pair
  check_standby
  check_idempotent
  local n=${HA_SUBMITS:-60}
  start_storm "$n"
  wait_acked $((n / 3))
  local t0 t1 r
  t0=$(ha_now_ms)
  kill -KILL "${HA_PID[s1]}"
  wait "${HA_PID[s1]}" 2>/dev/null || true
  ha_log "killed s1 (SIGKILL) after $(wc -l <"$HA_DIR/acked") submits"
  while :; do
    r=$(ha_submit "$(ha_url s2)" "$SHORT_SPEC" takeover-probe)
    [ "${r##* }" = 201 ] && break
    [ $(($(ha_now_ms) - t0)) -lt 10000 ] || ha_fail "s2 accepted no submit within 10 s of the kill: $r"
    sleep 0.05
  done
  t1=$(ha_now_ms)
  PROBE=$(echo "${r% *}" | jq .id)
  echo "takeover_ms $((t1 - t0))" | tee "$HA_DIR/takeover" >&2
  local s2; s2=$(ha_url s2)
  # Every acknowledged id is a job on the new leader, each once, and there is no other job.
  check_acked "$s2" "$n" "$LONG" "$IDEM" "$PROBE"
  # The running job was not killed: still RUNNING, first attempt, same processes, once the agent is back.
  ha_wait_agent_epoch "$s2" 30
  ha_wait_nodes_up "$s2" 2 30
  ha_wait_state "$s2" "$LONG" RUNNING 5
  [ "$(curl -sf "$s2/api/v1/jobs/$LONG/runs" | jq '[.runs[] | .attempt] | join(",")' -r)" = 1 ] ||
    ha_fail "job $LONG was restarted: $(curl -sf "$s2/api/v1/jobs/$LONG/runs")"
  [ "$(long_pids)" = "$PIDS_BEFORE" ] || ha_fail "job $LONG's processes changed: $PIDS_BEFORE -> $(long_pids)"
  # The old leader comes back as a standby; with replicated state, from nothing (its state directory
  # deleted): it rebuilds its database from the log and holds every job the new leader has.
  [ "$HA_STATE" = etcd ] && rm -rf "$HA_DIR/s1"
  ha_start_sched s1
  local until=$((SECONDS + 15)) role=""
  while [ $SECONDS -lt $until ]; do
    role=$(curl -sf -m 1 "$(ha_url s1)/api/v1/leader" | jq -r '.self.role + " " + (.leader.name // "")' || true)
    [ "$role" = "standby s2" ] && break
    sleep 0.2
  done
  [ "$role" = "standby s2" ] || ha_fail "restarted s1: '$role', expected a standby of s2"
  if [ "$HA_STATE" = etcd ]; then
    all_job_ids "$s2" | sort -n >"$HA_DIR/stored"
    ha_wait_db_jobs s1 "$HA_DIR/stored" 30
    ha_log "s1 rebuilt from the log: $(wc -l <"$HA_DIR/stored") jobs, as on s2"
  fi
  ha_log "PASS failover: $n submits, takeover $((t1 - t0)) ms, 0 lost, 0 duplicated, job $LONG kept running"
}

cutoff() {
  start_pair
  local t0 status=0 until
  t0=$(ha_now_ms)
  kill -STOP "${HA_PID[etcd1]}"
  ha_log "etcd stopped (SIGSTOP)"
  wait "${HA_PID[s1]}" || status=$?
  local stopped_ms=$(($(ha_now_ms) - t0))
  [ "$status" = 75 ] || ha_fail "s1 exited with $status, expected 75 (deposed)"
  # It must stop before etcd could expire its lease: TTL after its last confirmed keepalive.
  [ "$stopped_ms" -lt $((HA_TTL * 1000)) ] || ha_fail "s1 stopped acting only after $stopped_ms ms (TTL $HA_TTL s)"
  grep -q "no longer the leader" "$HA_DIR/s1.log" || ha_fail "s1's log does not say why it stopped"
  [ "$(ha_leader s2)" = "" ] || ha_fail "s2 leads while etcd is stopped"
  ha_log "s1 stopped acting $stopped_ms ms after etcd stopped (TTL $HA_TTL s)"
  kill -CONT "${HA_PID[etcd1]}"
  [ "$(ha_wait_leader 20 s2)" = s2 ] || ha_fail "s2 did not lead"
  ha_wait_agent_epoch "$(ha_url s2)" 30
  ha_wait_nodes_up "$(ha_url s2)" 2 30
  ha_wait_state "$(ha_url s2)" "$LONG" RUNNING 5
  [ "$(long_pids)" = "$PIDS_BEFORE" ] || ha_fail "job $LONG's processes changed"
  local e2
  e2=$(curl -sf "$(ha_url s2)/api/v1/leader" | jq .leader.epoch)
  ha_log "PASS cutoff: s1 stopped in $stopped_ms ms; s2 leads epoch $e2; job $LONG kept running"
}

# Every etcd member restarts (SIGTERM, then started again on its data): whichever scheduler leads afterwards
# (s1 if the restart was shorter than its margin, else s2) has every job, and the running job still runs.
etcd_restart() {
  start_pair
  check_idempotent
  local before; before=$(curl -sf "$(ha_url s1)/api/v1/jobs?limit=10000" | jq -c '[.jobs[].id]')
  local i
  for i in $(seq "${HA_ETCD_MEMBERS:-1}"); do kill -TERM "${HA_PID[etcd$i]}"; wait "${HA_PID[etcd$i]}" 2>/dev/null || true; done
  ha_log "etcd stopped (SIGTERM)"
  for i in $(seq "${HA_ETCD_MEMBERS:-1}"); do ha_run_etcd "$i" "$HA_ETCD_CLUSTER"; done
  sleep "$HA_TTL"  # past the point where s1 would have stepped down had it lost its lease
  local leader; leader=$(ha_wait_leader 30 s1 s2)
  ha_log "etcd restarted; $leader leads"
  ha_wait_agent_epoch "$(ha_url "$leader")" 30
  ha_wait_nodes_up "$(ha_url "$leader")" 2 30
  [ "$(curl -sf "$(ha_url "$leader")/api/v1/jobs?limit=10000" | jq -c '[.jobs[].id]')" = "$before" ] ||
    ha_fail "jobs changed across the etcd restart"
  ha_wait_state "$(ha_url "$leader")" "$LONG" RUNNING 5
  [ "$(long_pids)" = "$PIDS_BEFORE" ] || ha_fail "job $LONG's processes changed"
  local r; r=$(ha_submit "$(ha_url "$leader")" "$SHORT_SPEC")
  [ "${r##* }" = 201 ] || ha_fail "no submit after the etcd restart: $r"
  ha_log "PASS etcd_restart: $leader leads, nothing lost, job $LONG kept running"
}

# Replicated state only. The log is trimmed to 5 entries (--ha-log-keep 5) with three schedulers; the leader
# is killed and its state directory deleted; by the time it restarts the log no longer holds what it needs, so
# it rebuilds from a standby's snapshot and then follows the log: its database holds every job the leader has.
rebuild() {
  [ "$HA_STATE" = etcd ] || ha_fail "rebuild needs HA_STATE=etcd"
  HA_SCHED_ARGS="--ha-log-keep 5"
  start_pair
  ha_start_sched s3
  HA_URLS="$HA_URLS,$(ha_url s3)"
  local i r
  for i in $(seq 20); do r=$(ha_submit "$(ha_url s1)" "$SHORT_SPEC"); [ "${r##* }" = 201 ] || ha_fail "submit: $r"; done
  kill -KILL "${HA_PID[s1]}"
  wait "${HA_PID[s1]}" 2>/dev/null || true
  rm -rf "$HA_DIR/s1"
  local leader; leader=$(ha_wait_leader 20 s2 s3)
  for i in $(seq 20); do r=$(ha_submit "$(ha_url "$leader")" "$SHORT_SPEC"); [ "${r##* }" = 201 ] || ha_fail "submit: $r"; done
  # The trimmer runs every 5 s: wait until it has trimmed past entry 1.
  local until=$((SECONDS + 20)) base=0
  while [ $SECONDS -lt $until ]; do
    base=$(curl -s "${HA_ETCD_URLS%%,*}/v3/kv/range" -d "{\"key\":\"$(printf /railyard/log-base | base64)\"}" |
      jq -r '.kvs[0].value // empty' | base64 -d 2>/dev/null || true)
    [ -n "$base" ] && [ "$base" -gt 1 ] && break
    sleep 0.5
  done
  [ -n "$base" ] && [ "$base" -gt 1 ] || ha_fail "the log was not trimmed within 20 s"
  ha_start_sched s1
  all_job_ids "$(ha_url "$leader")" | sort -n >"$HA_DIR/stored"
  ha_wait_db_jobs s1 "$HA_DIR/stored" 30
  grep -q "rebuilt from a snapshot" "$HA_DIR/s1.log" || ha_fail "s1 did not rebuild from a snapshot: $(grep 'ha:' "$HA_DIR/s1.log" | tail -5)"
  ha_log "PASS rebuild: the log trimmed up to entry $base; s1 rebuilt from a snapshot and holds $(wc -l <"$HA_DIR/stored") jobs"
}

# Three etcd members; the first (every client's first endpoint) is killed with SIGKILL during a storm of CLI
# submits: every submit is acknowledged (at most retried), none lost or doubled, and the standby's database
# holds the same jobs (a scheduler that lost its lease meanwhile restarted first, as under a supervisor).
etcd_member_kill() {
  HA_ETCD_MEMBERS=3
  start_pair
  local n=${HA_SUBMITS:-60}
  start_storm "$n"
  wait_acked $((n / 3))
  kill -KILL "${HA_PID[etcd1]}"
  wait "${HA_PID[etcd1]}" 2>/dev/null || true
  ha_log "killed etcd member 1 (SIGKILL) after $(wc -l <"$HA_DIR/acked") submits"
  wait_acked "$n"
  # The member's loss can cost the leader its lease (etcd elects a new Raft leader meanwhile); it then ended
  # (75) and the other one leads: restarted as its supervisor would, it follows the log as a standby.
  local s
  for s in s1 s2; do kill -0 "${HA_PID[$s]}" 2>/dev/null || ha_start_sched "$s"; done
  local leader; leader=$(ha_wait_leader 20 s1 s2)
  check_acked "$(ha_url "$leader")" "$n" "$LONG"
  local standby=s2; [ "$leader" = s2 ] && standby=s1
  ha_wait_db_jobs "$standby" "$HA_DIR/stored" 30
  ha_log "PASS etcd_member_kill: $n submits acknowledged, 0 lost, 0 duplicated; $leader leads, $standby holds the same jobs"
}

# Three etcd members, two stopped (SIGSTOP): no quorum. A write is not acknowledged (503, or the leader is
# gone: it stops before its lease can expire); after the members continue, a leader takes writes again and
# every acknowledged job is there.
quorum_loss() {
  HA_ETCD_MEMBERS=3
  start_pair
  check_idempotent
  kill -STOP "${HA_PID[etcd2]}" "${HA_PID[etcd3]}"
  ha_log "etcd members 2 and 3 stopped (SIGSTOP)"
  local r status=0
  r=$(ha_submit "$(ha_url s1)" "$SHORT_SPEC" during-loss)
  [ "${r##* }" != 201 ] || ha_fail "a submit was acknowledged without an etcd quorum: $r"
  case "${r##* }" in
    503) echo "${r% *}" | grep -q . || ha_fail "503 without a reason" ;;
  esac
  wait "${HA_PID[s1]}" || status=$?
  [ "$status" = 75 ] || ha_fail "s1 exited with $status without a quorum, expected 75"
  ha_log "without a quorum: the submit got '${r##* }', s1 stopped (75)"
  kill -CONT "${HA_PID[etcd2]}" "${HA_PID[etcd3]}"
  ha_start_sched s1  # as its supervisor would
  local leader; leader=$(ha_wait_leader 30 s1 s2)
  until r=$(ha_submit "$(ha_url "$leader")" "$SHORT_SPEC" after-loss); [ "${r##* }" = 201 ]; do sleep 0.2; done
  local after; after=$(echo "${r% *}" | jq .id)
  all_job_ids "$(ha_url "$leader")" | sort -n >"$HA_DIR/stored"
  printf '%s\n' "$LONG" "$IDEM" "$after" | sort -n >"$HA_DIR/expected"
  # The submit made during the loss may or may not have been taken (it was never acknowledged): allowed once.
  grep -vxF -f "$HA_DIR/expected" "$HA_DIR/stored" >"$HA_DIR/extra" || true
  [ "$(wc -l <"$HA_DIR/extra")" -le 1 ] || ha_fail "jobs nobody submitted: $(cat "$HA_DIR/extra")"
  grep -vxF -f "$HA_DIR/stored" "$HA_DIR/expected" >"$HA_DIR/lost" || true
  [ ! -s "$HA_DIR/lost" ] || ha_fail "acknowledged jobs lost: $(cat "$HA_DIR/lost")"
  ha_log "PASS quorum_loss: no write acknowledged without a quorum, $leader leads after, nothing lost"
}

# The leader is paused (SIGSTOP) past its lease; s2 takes over and takes submits; the old leader continues
# (SIGCONT): it cannot append under its old term, ends (75), and, restarted, follows the log without a
# conflict (its database never held a write the log does not).
deposed() {
  start_pair
  kill -STOP "${HA_PID[s1]}"
  ha_log "s1 paused (SIGSTOP)"
  [ "$(ha_wait_leader 20 s2)" = s2 ] || ha_fail "s2 did not lead"
  local r i
  for i in $(seq 5); do r=$(ha_submit "$(ha_url s2)" "$SHORT_SPEC"); [ "${r##* }" = 201 ] || ha_fail "submit: $r"; done
  local status=0
  kill -CONT "${HA_PID[s1]}"
  wait "${HA_PID[s1]}" || status=$?
  [ "$status" = 75 ] || ha_fail "the deposed s1 exited with $status, expected 75"
  ha_start_sched s1
  all_job_ids "$(ha_url s2)" | sort -n >"$HA_DIR/stored"
  ha_wait_db_jobs s1 "$HA_DIR/stored" 30
  curl -sf "$(ha_url s1)/api/v1/leader" | jq -e '.self.following == null' >/dev/null ||
    ha_fail "s1 does not follow the log: $(curl -sf "$(ha_url s1)/api/v1/leader")"
  ha_log "PASS deposed: s1 woke under an old term, ended (75), and follows s2's log"
}

case "${1:-}" in
  failover) failover ;;
  rebuild) rebuild ;;
  etcd_member_kill) etcd_member_kill ;;
  quorum_loss) quorum_loss ;;
  deposed) deposed ;;
  cutoff) cutoff ;;
  etcd_restart) etcd_restart ;;
  *) echo "usage: $0 failover|cutoff|etcd_restart|rebuild|etcd_member_kill|quorum_loss|deposed" >&2; exit 2 ;;
esac
