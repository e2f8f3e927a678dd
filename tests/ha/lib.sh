# Shared by the high-availability tests and bench/ha_takeover.sh: real etcd members, railyard-scheduler
# instances and an agent on 127.0.0.1, every process started here recorded in $HA_DIR/pids and stopped by its
# pid at exit. Needs: etcd (deploy/bootstrap.sh installs it), curl, jq; RAILYARD_SCHEDULER, RAILYARD_AGENT,
# RAILYARD_CLI (the binaries).
set -euo pipefail

HA_DIR=${HA_DIR:-$(mktemp -d /tmp/railyard-ha.XXXXXX)}
mkdir -p "$HA_DIR"
HA_TTL=${HA_TTL:-3}
# Where the schedulers keep their state: etcd (each its own database under $HA_DIR/NAME/, the leader's writes
# replicated through etcd) or shared (one $HA_DIR/railyard.db for all).
HA_STATE=${HA_STATE:-etcd}
declare -A HA_PID HA_PORT
HA_ETCD_URLS=""
HA_URLS=""

ha_log() { echo "[$(date -u +%H:%M:%S.%3N)] $*" >&2; }
# A failure says what each scheduler said last (CI keeps no state directory).
ha_fail() {
  ha_log "FAIL: $*"
  local f
  for f in "$HA_DIR"/s[0-9]*.log; do
    [ -f "$f" ] || continue
    echo "--- last lines of $f:" >&2
    tail -n 15 "$f" | cut -c1-300 >&2
  done
  exit 1
}

ha_require() {
  for tool in etcd curl jq; do
    command -v "$tool" >/dev/null || ha_fail "$tool is not installed (run deploy/bootstrap.sh)"
  done
  for bin in "$RAILYARD_SCHEDULER" "$RAILYARD_AGENT" "$RAILYARD_CLI"; do
    [ -x "$bin" ] || ha_fail "$bin: not built"
  done
}

ha_cleanup() {
  local pid
  # Agents first (their workers go with them: --kill-workers-on-exit), then schedulers, then etcd.
  for role in 'agent*' 's[0-9]*|sched*' 'etcd*'; do
    for key in "${!HA_PID[@]}"; do
      eval "case \$key in $role) ;; *) continue ;; esac"
      pid=${HA_PID[$key]}
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
    done
    for key in "${!HA_PID[@]}"; do
      eval "case \$key in $role) ;; *) continue ;; esac"
      pid=${HA_PID[$key]}
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
  if [ "${HA_KEEP:-0}" = 1 ]; then ha_log "kept $HA_DIR"; else rm -rf "$HA_DIR"; fi
}

# A port nobody listens on now (bash's /dev/tcp connects or fails), below the kernel's ephemeral range: a
# port from that range can be taken meanwhile by any outgoing connection's local end (an etcd member then
# fails to start with "address already in use").
ha_free_port() {
  local p low
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  [ "$low" -gt 21000 ] || low=32768
  while :; do
    p=$((20000 + RANDOM % (low - 20000)))
    if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo "$p"; return; fi
  done
}

# ha_start_etcd N: an N-member etcd cluster.
ha_start_etcd() {
  local n=$1 i cluster="" urls=""
  for i in $(seq "$n"); do
    HA_PORT[etcd$i]=$(ha_free_port)
    HA_PORT[peer$i]=$(ha_free_port)
    cluster+="${cluster:+,}e$i=http://127.0.0.1:${HA_PORT[peer$i]}"
    urls+="${urls:+,}http://127.0.0.1:${HA_PORT[etcd$i]}"
  done
  for i in $(seq "$n"); do
    ha_run_etcd "$i" "$cluster"
  done
  HA_ETCD_URLS=$urls
  HA_ETCD_CLUSTER=$cluster
  local until=$((SECONDS + 60))  # a loaded CI machine (the browser test beside it) has taken over 10 s
  while [ $SECONDS -lt $until ]; do
    curl -sf -m 1 "http://127.0.0.1:${HA_PORT[etcd1]}/health" | grep -q '"health":"true"' && return 0
    for i in $(seq "$n"); do
      kill -0 "${HA_PID[etcd$i]}" 2>/dev/null ||
        ha_fail "etcd member $i exited; $HA_DIR/etcd$i.log ends: $(tail -3 "$HA_DIR/etcd$i.log")"
    done
    sleep 0.1
  done
  ha_fail "etcd did not become healthy within 60 s; $HA_DIR/etcd1.log ends: $(tail -5 "$HA_DIR/etcd1.log")"
}

ha_run_etcd() {
  local i=$1 cluster=$2
  etcd --name "e$i" --data-dir "$HA_DIR/etcd$i" \
    --listen-client-urls "http://127.0.0.1:${HA_PORT[etcd$i]}" \
    --advertise-client-urls "http://127.0.0.1:${HA_PORT[etcd$i]}" \
    --listen-peer-urls "http://127.0.0.1:${HA_PORT[peer$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${HA_PORT[peer$i]}" \
    --initial-cluster "$cluster" --initial-cluster-state new >"$HA_DIR/etcd$i.log" 2>&1 &
  HA_PID[etcd$i]=$!
}

# ha_setup_cluster: cluster file (2 emulated DGX H100 nodes), secret, admin token.
ha_setup_cluster() {
  "$RAILYARD_CLI" topo generate --nodes 2 --profile dgx-h100 -o "$HA_DIR/cluster.json" >/dev/null
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$HA_DIR/secret"
  chmod 600 "$HA_DIR/secret"
  # The first leader's database (s1's): with replicated state its rows become the log's first entry.
  mkdir -p "$(dirname "$(ha_db s1)")"
  HA_TOKEN=$("$RAILYARD_SCHEDULER" token create --db "$(ha_db s1)" --user admin --role admin 2>/dev/null | tail -1)
  export RAILYARD_TOKEN=$HA_TOKEN
}

# ha_db NAME: the database scheduler NAME uses.
ha_db() { if [ "$HA_STATE" = etcd ]; then echo "$HA_DIR/$1/railyard.db"; else echo "$HA_DIR/railyard.db"; fi; }

# ha_start_sched NAME: a scheduler of the HA cluster (port chosen once per name, kept across restarts).
ha_start_sched() {
  local name=$1
  [ -n "${HA_PORT[$name]:-}" ] || HA_PORT[$name]=$(ha_free_port)
  mkdir -p "$(dirname "$(ha_db "$name")")"
  "$RAILYARD_SCHEDULER" --listen "127.0.0.1:${HA_PORT[$name]}" --db "$(ha_db "$name")" \
    --cluster "$HA_DIR/cluster.json" --agent-secret-file "$HA_DIR/secret" --web-root none \
    --ha-etcd "$HA_ETCD_URLS" --ha-name "$name" --ha-ttl "$HA_TTL" --ha-state "$HA_STATE" ${HA_SCHED_ARGS:-} \
    >>"$HA_DIR/$name.log" 2>&1 &
  HA_PID[$name]=$!
}

ha_url() { echo "http://127.0.0.1:${HA_PORT[$1]}"; }

# ha_start_three: schedulers s1 (the first leader: its database, with the admin token, is the replicated log's
# first entry), then s2 and s3; HA_URLS lists all three; the agent, once its 2 nodes are up at s1.
ha_start_three() {
  ha_start_sched s1
  ha_wait_leader 30 s1 >/dev/null
  ha_start_sched s2
  ha_start_sched s3
  HA_URLS="$(ha_url s1),$(ha_url s2),$(ha_url s3)"
  ha_start_agent
  ha_wait_nodes_up "$(ha_url s1)" 2 60
}

ha_start_agent() {
  "$RAILYARD_AGENT" --scheduler "$HA_URLS" --secret-file "$HA_DIR/secret" --nodes "$(ha_node_names)" \
    --emulate dgx-h100 --state-dir "$HA_DIR/agent" --allow-root-jobs --kill-workers-on-exit \
    --reconnect-max 1 >"$HA_DIR/agent.log" 2>&1 &
  HA_PID[agent]=$!
}

ha_node_names() { jq -r '[.nodes[].names] | join(",")' "$HA_DIR/cluster.json"; }

# The name of the scheduler that says it leads, or "" (asks each of NAMES).
ha_leader() {
  local name
  for name in "$@"; do
    if curl -sf -m 1 "$(ha_url "$name")/api/v1/leader" 2>/dev/null | jq -e '.self.role == "leader"' >/dev/null 2>&1; then
      echo "$name"
      return
    fi
  done
  echo ""
}

# ha_wait_leader SECONDS NAMES...: waits for one of NAMES to lead; prints its name.
ha_wait_leader() {
  local limit=$1
  shift
  local until=$((SECONDS + limit)) l
  while [ $SECONDS -lt $until ]; do
    l=$(ha_leader "$@")
    [ -n "$l" ] && { echo "$l"; return; }
    sleep 0.1
  done
  ha_fail "no leader among $* within $limit s"
}

# ha_wait_nodes_up URL N SECONDS
ha_wait_nodes_up() {
  local url=$1 n=$2 limit=$3 until=$((SECONDS + $3))
  while [ $SECONDS -lt $until ]; do
    [ "$(curl -sf -m 2 "$url/api/v1/nodes" | jq '[.nodes[] | select(.health == "up")] | length' 2>/dev/null)" = "$n" ] && return 0
    sleep 0.2
  done
  ha_fail "$n nodes not up at $url within $limit s"
}

# ha_submit URL SPEC [KEY]: POSTs a job; prints "HTTP_STATUS BODY".
ha_submit() {
  local url=$1 spec=$2 key=${3:-}
  curl -s -m 5 -o /dev/stdout -w ' %{http_code}' -H "Authorization: Bearer $HA_TOKEN" \
    -d "$spec" "$url/api/v1/jobs${key:+?idempotency_key=$key}" || true
}

# ha_all_jobs URL JQ: JQ (a jq expression on a job) for every job the scheduler at URL lists, a page of 10,000
# at a time (newest first).
ha_all_jobs() {
  local page before=""
  while :; do
    page=$(curl -sf "$1/api/v1/jobs?order=desc&limit=10000${before:+&before=$before}")
    echo "$page" | jq -r ".jobs[] | $2"
    before=$(echo "$page" | jq -r '.next_before // empty')
    [ -n "$before" ] || break
  done
}

# ha_job_state URL ID
ha_job_state() { curl -sf -m 2 "$1/api/v1/jobs/$2" | jq -r .state; }

# ha_wait_state URL ID STATE SECONDS
ha_wait_state() {
  local until=$((SECONDS + $4))
  while [ $SECONDS -lt $until ]; do
    [ "$(ha_job_state "$1" "$2" 2>/dev/null)" = "$3" ] && return 0
    sleep 0.2
  done
  ha_fail "job $2 not $3 at $1 within $4 s (state $(ha_job_state "$1" "$2" 2>/dev/null))"
}

# ha_wait_agent_epoch URL SECONDS: waits until the agent has registered with the leader at URL (it keeps the
# epoch of the last leader that greeted it in <state-dir>/epoch); nodes that show "up" before that are only
# the database's view, within the reconcile grace.
ha_wait_agent_epoch() {
  local want until=$((SECONDS + $2))
  want=$(curl -sf -m 2 "$1/api/v1/leader" | jq .leader.epoch)
  while [ $SECONDS -lt $until ]; do
    [ "$(cat "$HA_DIR/agent/epoch" 2>/dev/null)" = "$want" ] && return 0
    sleep 0.1
  done
  ha_fail "the agent did not register with the leader at $1 (epoch $want) within $2 s; it has $(cat "$HA_DIR/agent/epoch" 2>/dev/null)"
}

# ha_wait_db_jobs NAME FILE SECONDS: waits until scheduler NAME's own database holds exactly the job ids in
# FILE (sorted), as a standby following the replicated log does once it has caught up.
ha_wait_db_jobs() {
  local name=$1 file=$2 until=$((SECONDS + $3))
  while [ $SECONDS -lt $until ]; do
    sqlite3 "file:$(ha_db "$name")?mode=ro" 'SELECT id FROM jobs ORDER BY id' 2>/dev/null >"$HA_DIR/$name.jobs" &&
      cmp -s "$HA_DIR/$name.jobs" "$file" && return 0
    sleep 0.2
  done
  ha_fail "$name's database does not hold the leader's jobs within $3 s: $(diff "$file" "$HA_DIR/$name.jobs" | head -5)"
}

# Wall-clock milliseconds.
ha_now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
