#!/usr/bin/env bash
# An operation history checked in the spirit of Jepsen (issue 46): clients submit and cancel jobs through the
# CLI against three schedulers with replicated state (3 etcd members) while a random fault schedule runs;
# every operation and its answer is recorded; at the end of each schedule, with every process healed, a
# checker proves on the leader (and on every standby's own database) that
#   - each acknowledged submit is a job exactly once, and no submit is a job twice (acknowledged or not);
#   - each acknowledged cancel left its job CANCELLED;
#   - every standby's database, at the leader's last entry, holds exactly the leader's jobs and their states.
#
#   tests/ha/history.sh [SCHEDULES] [SEED]     (default 20 schedules, seed 1; each ~20 s)
#
# Faults, two per schedule at random times (bash's RANDOM seeded with SEED + schedule): SIGKILL of the leader
# (restarted, as a supervisor would, 1 s later), SIGSTOP of the leader past its lease (then SIGCONT: it ends
# with 75 and is restarted), SIGKILL of one etcd member (restarted after 3 s), SIGSTOP of two etcd members (a
# lost quorum, 3 s).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
trap ha_cleanup EXIT
ha_require
SCHEDULES=${1:-20}
SEED=${2:-1}
OPS_SECONDS=${HISTORY_OPS_SECONDS:-12}
SCHEDS=(s1 s2 s3)

ha_start_etcd 3
ha_setup_cluster
ha_start_three
HIST=$HA_DIR/history
: >"$HIST"

# client NAME SECONDS: submits (each with a unique name, the operation's key) and cancels of its own acknowledged
# jobs, one at a time; one line per operation: "submit KEY ok ID" | "submit KEY fail -" | "cancel ID ok" | ...
client() {
  local name=$1 until=$((SECONDS + $2)) i=0 id out
  local acked=()
  while [ $SECONDS -lt $until ]; do
    i=$((i + 1))
    if [ ${#acked[@]} -gt 0 ] && [ $((RANDOM % 4)) = 0 ]; then
      id=${acked[$((RANDOM % ${#acked[@]}))]}
      if RAILYARD_URL=$HA_URLS "$RAILYARD_CLI" cancel --timeout 10 "$id" >/dev/null 2>>"$HA_DIR/client.err"; then
        echo "cancel $id ok" >>"$HIST"
      else
        echo "cancel $id fail" >>"$HIST"
      fi
      continue
    fi
    local key="$name-$ROUND-$i"
    # One submit in three waits 1 s at most for its answer: some are then not acknowledged, yet may be applied.
    local wait_s=10
    [ $((i % 3)) = 0 ] && wait_s=1
    if out=$(RAILYARD_URL=$HA_URLS "$RAILYARD_CLI" submit --timeout "$wait_s" --gpus 1 --time 1h --name "$key" -- sleep 600 2>>"$HA_DIR/client.err"); then
      echo "submit $key ok $out" >>"$HIST"
      acked+=("$out")
    else
      echo "submit $key fail -" >>"$HIST"
    fi
  done
}

leader_now() { ha_leader "${SCHEDS[@]}"; }

# Restarts every scheduler that is not running (as its supervisor would) and continues every paused process.
heal() {
  local s i
  for i in 1 2 3; do kill -CONT "${HA_PID[etcd$i]}" 2>/dev/null || true; done
  for i in 1 2 3; do kill -0 "${HA_PID[etcd$i]}" 2>/dev/null || ha_run_etcd "$i" "$HA_ETCD_CLUSTER"; done
  for s in "${SCHEDS[@]}"; do
    kill -CONT "${HA_PID[$s]}" 2>/dev/null || true
    kill -0 "${HA_PID[$s]}" 2>/dev/null || ha_start_sched "$s"
  done
}

fault() {
  local leader kind=$((RANDOM % 4)) i
  leader=$(leader_now)
  case $kind in
    0) [ -n "$leader" ] || return 0
       ha_log "fault: SIGKILL leader $leader"; kill -KILL "${HA_PID[$leader]}"
       wait "${HA_PID[$leader]}" 2>/dev/null || true; sleep 1; heal ;;
    1) [ -n "$leader" ] || return 0
       ha_log "fault: SIGSTOP leader $leader past its lease"; kill -STOP "${HA_PID[$leader]}"; sleep $((HA_TTL + 1))
       kill -CONT "${HA_PID[$leader]}"; wait "${HA_PID[$leader]}" 2>/dev/null || true; sleep 1; heal ;;
    2) i=$((RANDOM % 3 + 1)); ha_log "fault: SIGKILL etcd member $i"; kill -KILL "${HA_PID[etcd$i]}"
       wait "${HA_PID[etcd$i]}" 2>/dev/null || true; sleep 3; ha_run_etcd "$i" "$HA_ETCD_CLUSTER"; sleep 1; heal ;;
    3) i=$((RANDOM % 3 + 1)); local j=$((i % 3 + 1))
       ha_log "fault: SIGSTOP etcd members $i and $j (no quorum)"; kill -STOP "${HA_PID[etcd$i]}" "${HA_PID[etcd$j]}"
       sleep 3; kill -CONT "${HA_PID[etcd$i]}" "${HA_PID[etcd$j]}"; sleep 1; heal ;;
  esac
}

check() {
  local leader url
  leader=$(ha_wait_leader 60 "${SCHEDS[@]}")
  url=$(ha_url "$leader")
  ha_all_jobs "$url" '"\(.id) \(.name) \(.state)"' | sort -n >"$HA_DIR/state"
  # Each acknowledged submit once, with its id; no name twice.
  awk '{print $2}' "$HA_DIR/state" | sort | uniq -d >"$HA_DIR/doubled"
  [ ! -s "$HA_DIR/doubled" ] || ha_fail "submits applied twice: $(head -5 "$HA_DIR/doubled")"
  local line op key res id
  while read -r op key res id; do
    [ "$op" = submit ] && [ "$res" = ok ] || continue
    grep -q "^$id $key " "$HA_DIR/state" || ha_fail "acknowledged submit $key (job $id) is not job $id on $leader"
  done <"$HIST"
  while read -r op id res _; do
    [ "$op" = cancel ] && [ "$res" = ok ] || continue
    grep -q "^$id .* CANCELLED$" "$HA_DIR/state" || ha_fail "acknowledged cancel of job $id: it is $(grep "^$id " "$HA_DIR/state")"
  done <"$HIST"
  # Every standby's own database, once at the leader's entry, holds the leader's jobs with their states. The
  # leader goes on writing (jobs end on the agent, passes start those that cancels made room for): the agent
  # is paused while they are compared, the leader waited for until it is idle, and the databases compared at
  # that entry. A standby found past it means the leader wrote again meanwhile (a standby applies what a poll
  # finds, so it may step over an entry): the comparison starts over at the leader's new entry.
  local head now until s mine round
  kill -STOP "${HA_PID[agent]}"
  for round in 1 2 3 4 5; do
    head=-1
    until=$((SECONDS + 60))
    while :; do
      now=$(sqlite3 "file:$(ha_db "$leader")?mode=ro" 'SELECT applied FROM ha_log' 2>/dev/null || echo -1)
      [ "$now" = "$head" ] && break
      [ $SECONDS -lt $until ] || ha_fail "$leader did not go idle within 60 s (entry $now)"
      head=$now
      sleep 1
    done
    sqlite3 "file:$(ha_db "$leader")?mode=ro" 'SELECT id, state FROM jobs ORDER BY id' | tr '|' ' ' >"$HA_DIR/expected.states"
    local moved=0
    for s in "${SCHEDS[@]}"; do
      [ "$s" = "$leader" ] && continue
      until=$((SECONDS + 60))
      while :; do
        mine=$(sqlite3 "file:$(ha_db "$s")?mode=ro" 'SELECT applied FROM ha_log' 2>/dev/null || echo -1)
        if [ "$mine" = "$head" ]; then
          sqlite3 "file:$(ha_db "$s")?mode=ro" 'SELECT id, state FROM jobs ORDER BY id' | tr '|' ' ' >"$HA_DIR/$s.states"
          cmp -s "$HA_DIR/$s.states" "$HA_DIR/expected.states" && break
          ha_fail "$s's database at entry $head differs from $leader's: $(diff "$HA_DIR/expected.states" "$HA_DIR/$s.states" | head -5)"
        fi
        if [ "$mine" -gt "$head" ] 2>/dev/null; then moved=1; break; fi
        [ $SECONDS -lt $until ] || ha_fail "$s did not reach entry $head of $leader within 60 s (it is at $mine)"
        sleep 0.2
      done
      [ "$moved" = 0 ] || break
    done
    [ "$moved" = 1 ] || break
    ha_log "the leader wrote past entry $head while the standbys were compared: again"
    [ "$round" -lt 5 ] || ha_fail "the leader kept writing: no entry to compare the standbys at"
  done
  kill -CONT "${HA_PID[agent]}"
  local acked unacked cancels
  acked=$(grep -c '^submit .* ok ' "$HIST" || true)
  unacked=$(grep -c '^submit .* fail ' "$HIST" || true)
  cancels=$(grep -c '^cancel .* ok' "$HIST" || true)
  local unacked_applied=0
  while read -r op key res _; do
    [ "$op" = submit ] && [ "$res" = fail ] || continue
    awk -v k="$key" '$2 == k' "$HA_DIR/state" | grep -q . && unacked_applied=$((unacked_applied + 1))
  done <"$HIST"
  ha_log "schedule $ROUND: ok on $leader: $acked submits acknowledged, $unacked not ($unacked_applied of them applied, once), $cancels cancels acknowledged; $(wc -l <"$HA_DIR/state") jobs; standbys equal at entry $head"
}

for ROUND in $(seq "$SCHEDULES"); do
  RANDOM=$((SEED * 1000 + ROUND))
  t1=$((RANDOM % 5 + 1)) t2=$((RANDOM % 4 + 6))
  client a "$OPS_SECONDS" &
  ca=$!
  client b "$OPS_SECONDS" &
  cb=$!
  sleep "$t1"; fault
  sleep "$((t2 > t1 ? t2 - t1 : 1))"; fault
  wait "$ca" "$cb"
  heal
  check
done
ha_log "PASS history: $SCHEDULES fault schedules, $(grep -c '^submit .* ok ' "$HIST") submits and $(grep -c '^cancel .* ok' "$HIST") cancels acknowledged, each applied once; none unacknowledged applied twice"
