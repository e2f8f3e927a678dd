#!/usr/bin/env bash
# Launch latency of image jobs (issue 45): the same 2-node x 2-GPU job on the host and in an OCI image
# (localhost/railyard-runtime:bookworm, deploy/images.sh), side by side on one `railyard up` cluster, for the
# env and the mpi launcher. Each rank appends the time it started (date +%s.%N) to a file in a directory
# the job shares (mounted at its own path in the image); per run:
#   start: submit -> the last rank's first instruction (every rank running its command)
#   end:   submit -> the job COMPLETED (polling GET /jobs/ID every 10 ms), the containers' teardown included
# and, apart, the engine alone: 1, 2 and 4 containers of the image started at once and gone (podman run).
# Runs alternate host/image first, REPS of each. The image's cost should be the engine's start of a container
# (podman run: ~0.3 s here) and nothing of Railyard's on top.
#
#   bench/container_launch.sh [BUILD_DIR]          (default build/release)
#   env: REPS (10)
# Build first: ninja -C build/release railyard railyard-scheduler railyard-agent railyard-agent-exec; as root
# (the agents start containers through rootful podman).
set -euo pipefail
BUILD=$(cd "${1:-build/release}" && pwd)
REPS=${REPS:-10}
IMAGE=localhost/railyard-runtime:bookworm
export PATH=$BUILD/cli:$BUILD/scheduler:$BUILD/agent:$PATH
bash "$(dirname "$0")/../deploy/images.sh" >/dev/null
WORK=$(mktemp -d /tmp/railyard-bench.XXXXXX)
chmod 755 "$WORK"
DIR=$WORK/cluster
cleanup() {
  railyard down --state-dir "$DIR" --grace 2 >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
eval "$(railyard up --nodes 2 --profile dgx-h100 --state-dir "$DIR" --port 0 --emulate-nodes 1 --no-config \
  --timeout 120 2>"$WORK/up.log")"
S=$RAILYARD_URL/api/v1
T=$RAILYARD_TOKEN
SHARED=$WORK/shared
mkdir -p "$SHARED"

now() { date +%s.%N; }
state() { curl -sf "$S/jobs/$1" | jq -r .state; }

run() {  # run LAUNCHER host|image TAG: prints "START_S END_S"
  local launcher=$1 where=$2 tag=$3 t0 id st t1 container=""
  if [[ $where == image ]]; then container=", \"container\": {\"image\": \"$IMAGE\", \"mounts\": [\"$SHARED:$SHARED\"]}"; fi
  t0=$(now)
  id=$(curl -sf -H "Authorization: Bearer $T" \
    -d "{\"name\": \"$tag\", \"nodes\": 2, \"gpus_per_node\": 2, \"launcher\": \"$launcher\",
         \"command\": [\"sh\", \"-c\", \"date +%s.%N >> $SHARED/$tag\"], \"workdir\": \"$SHARED\"$container}" \
    "$S/jobs" | jq -r .id)
  while :; do
    st=$(state "$id")
    case $st in COMPLETED) break ;; FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
      echo "job $id ($tag) ended $st" >&2; curl -sf "$S/jobs/$id" | jq -r .reason >&2; exit 1 ;;
    esac
    sleep 0.01
  done
  t1=$(now)
  [[ $(wc -l <"$SHARED/$tag") == 4 ]] || { echo "$tag: $(wc -l <"$SHARED/$tag") of 4 ranks wrote" >&2; exit 1; }
  echo "$(sort -g "$SHARED/$tag" | tail -1) $t0 $t1" | awk '{printf "%.3f %.3f\n", $1 - $2, $3 - $2}'
}

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

engine_alone() {  # engine_alone N: seconds for N containers of the image started at once to run `true` and go
  local t0 i
  t0=$(now)
  for i in $(seq "$1"); do
    podman run --rm --pull never --log-driver none --network host --ipc host --pid host --cap-drop all \
      --security-opt no-new-privileges --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --read-only \
      "$IMAGE" true &
  done
  wait
  echo "$(now) $t0" | awk '{printf "%.3f\n", $1 - $2}'
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(podman --version), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| launcher | where | submit → all 4 ranks running, median s | all runs | submit → COMPLETED, median s | all runs |"
echo "|---|---|---|---|---|---|"
for launcher in env mpi; do
  declare -A starts=() ends=()
  for r in $(seq "$REPS"); do
    order="host image"
    ((r % 2 == 0)) && order="image host"
    for where in $order; do
      read -r s e < <(run "$launcher" "$where" "$launcher-$where-$r")
      starts[$where]+="$s "
      ends[$where]+="$e "
      echo "  $launcher $where run $r: start $s s, end $e s" >&2
    done
  done
  for where in host image; do
    printf '| %s | %s | %s | %s | %s | %s |\n' "$launcher" "$where" \
      "$(tr ' ' '\n' <<<"${starts[$where]}" | grep . | median)" "$(tr ' ' '\n' <<<"${starts[$where]}" | grep . | sort -g | paste -sd' ')" \
      "$(tr ' ' '\n' <<<"${ends[$where]}" | grep . | median)" "$(tr ' ' '\n' <<<"${ends[$where]}" | grep . | sort -g | paste -sd' ')"
  done
  unset starts ends
done
echo
echo "The engine alone (no Railyard): N containers of the image started at once with the agent's flags, each"
echo "running \`true\`, until the last is gone; $REPS runs:"
echo
echo "| containers at once | median s | all runs |"
echo "|---|---|---|"
for n in 1 2 4; do
  runs=$(for r in $(seq "$REPS"); do engine_alone "$n"; done)
  printf '| %d | %s | %s |\n' "$n" "$(median <<<"$runs")" "$(sort -g <<<"$runs" | paste -sd' ')"
done
