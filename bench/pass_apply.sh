#!/usr/bin/env bash
# bench/pass_apply.sh SCHEDULER_BIN [BATCHES] (issue 48): what applying passes costs the event loop. A
# scheduler on a 10,016-node SuperPOD (313 SUs) without agents takes BATCHES (default 60) x 1,000 one-GPU
# jobs in POST /jobs:batch calls, back to back; every job starts (no agent: they stay STARTING). Printed:
# the jobs the passes started, the sum and the largest of their "apply" times (the on-loop part of a pass,
# from the scheduler's pass log), the wall time until none is PENDING, and the last pass lines. Run it with
# two builds of railyard-scheduler to compare; port 8777 must be free.
set -euo pipefail
BIN=$1; N=${2:-60}
D=$(mktemp -d /tmp/apply.XXXX)
RAILYARD=$(dirname "$BIN")/../cli/railyard
[ -x "$RAILYARD" ] || RAILYARD=railyard
"$RAILYARD" topo generate --preset dgx-h100-superpod --sus 313 -o "$D/cluster.json" >/dev/null
T=$($BIN token create --db $D/s.db --user root --role admin 2>/dev/null | tail -1)
$BIN --listen 127.0.0.1:8777 --db $D/s.db --cluster $D/cluster.json > $D/log 2>&1 &
P=$!
for i in $(seq 50); do curl -sf http://127.0.0.1:8777/healthz >/dev/null && break; sleep 0.2; done
jq -nc '{jobs: [range(1000) | {name: "t", gpus: 1, command: ["true"]}]}' > $D/batch.json
t0=$(date +%s.%N)
for i in $(seq $N); do curl -sf -H "Authorization: Bearer $T" --data-binary @$D/batch.json http://127.0.0.1:8777/api/v1/jobs:batch >/dev/null; done
# wait until no job is PENDING
for i in $(seq 600); do
  left=$(curl -sf -H "Authorization: Bearer $T" "http://127.0.0.1:8777/api/v1/jobs?state=PENDING&limit=1" | jq '.jobs | length')
  [ "$left" = 0 ] && break; sleep 0.5
done
t1=$(date +%s.%N)
kill $P; wait $P 2>/dev/null || true
grep -o "[0-9]* started.*apply [0-9.]* s" $D/log | awk '{s=$1; a=$(NF-1); st+=s; ap+=a; if (a>mx) mx=a} END {printf "passes with starts: %d starts, apply sum %.2f s, max %.2f s\n", st, ap, mx}'
echo "wall: $(echo "$t1 - $t0" | bc) s"
grep "apply" $D/log | tail -3
rm -rf $D
