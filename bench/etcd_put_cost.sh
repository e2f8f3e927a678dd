#!/usr/bin/env bash
# What one write transaction costs etcd itself (issue 46: the bound on replicated submits): 3 members on
# 127.0.0.1 as the HA benchmarks run them, N puts of a value the size of a 64-job log entry (5 KB), one at a
# time, through etcd's gRPC API (etcdctl) and through its JSON gateway (curl, as the scheduler's client
# speaks it); prints the CPU all members used per put, and the members' CPU while idle for comparison.
#   bench/etcd_put_cost.sh [N]   (default 300)
set -euo pipefail
N=${1:-300}
cd "$(dirname "$0")/.."
source tests/ha/lib.sh
trap ha_cleanup EXIT
command -v etcd >/dev/null && command -v etcdctl >/dev/null || ha_fail "etcd is not installed (deploy/bootstrap.sh)"
ha_start_etcd 3 >/dev/null
url=${HA_ETCD_URLS%%,*}
pids=$(for i in 1 2 3; do echo "${HA_PID[etcd$i]}"; done)
ticks() { for p in $pids; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk '{s += $1} END {print s}'; }
now_ms() { date +%s%3N; }
# per_put TICKS WALL_MS: CPU ms per put, less what the members use idle over that time (heartbeats).
per_put() { awk -v d="$1" -v w="$2" -v i="$idle" -v n="$N" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (d / hz * 1000 - i * w / 1000) / n}'; }
value=$(head -c 3800 /dev/urandom | base64 -w0)  # 5 KB of text, as a deflated entry in base64
sleep 2
i0=$(ticks)
sleep 3
idle=$(awk -v d=$(($(ticks) - i0)) -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", d / hz * 1000 / 3}')  # ms per second
t0=$(ticks) w0=$(now_ms)
for i in $(seq "$N"); do ETCDCTL_API=3 etcdctl --endpoints "$url" put "/bench/g$i" "$value" >/dev/null; done
t1=$(ticks) w1=$(now_ms)
b64=$(printf '%s' "$value" | base64 -w0)
for i in $(seq "$N"); do
  curl -sf -o /dev/null -X POST "$url/v3/kv/put" -d "{\"key\":\"$(printf '/bench/j%s' "$i" | base64 -w0)\",\"value\":\"$b64\"}"
done
t2=$(ticks) w2=$(now_ms)
echo "etcd CPU per put, all 3 members, idle use taken off: gRPC $(per_put $((t1 - t0)) $((w1 - w0))) ms," \
  "JSON gateway $(per_put $((t2 - t1)) $((w2 - w1))) ms ($N puts each; idle, the members use $idle ms per second)"
