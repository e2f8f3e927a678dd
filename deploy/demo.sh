#!/usr/bin/env bash
# Builds Railyard (Release) and the dashboard, then runs the main job: a local cluster on 127.0.0.1 (a
# scheduler and 4 agents emulating DGX H100 nodes), a real 2-node data-parallel training job over Open MPI
# launched through the agents, the same job with every rank in an OCI image (podman), their time-to-train,
# and the dashboard left up. Then a trace replay on a
# 4-SU SuperPOD under three policies. `railyard down` (printed at the end) stops the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh
cmake --preset release >/dev/null
# Only the programs the demo runs (tests and benchmarks are not needed here: `cmake --build --preset release`
# builds everything); their output goes to a log, shown only when the build fails.
mkdir -p build/release
build_log=build/release/demo-build.log
echo "== building railyard, the scheduler, the agent and the trainer (Release; log: $build_log)"
if ! cmake --build --preset release -j "$(nproc)" --target railyard railyard-scheduler railyard-agent \
    railyard-agent-exec railyard-train >"$build_log" 2>&1; then
  tail -n 40 "$build_log"
  echo "demo: the build failed; the whole log is $build_log" >&2
  exit 1
fi
bash web/build.sh
bin=build/release/cli
export PATH="$PWD/$bin:$PWD/build/release/scheduler:$PWD/build/release/agent:$PWD/build/release/workloads:$PATH"
state=${RAILYARD_DEMO_DIR:-$PWD/build/demo}
mkdir -p "$state"

railyard down --state-dir "$state/cluster" >/dev/null 2>&1 || true
eval "$(railyard up --nodes 4 --profile dgx-h100 --state-dir "$state/cluster" --port "${RAILYARD_PORT:-8600}")"
railyard nodes
echo
echo "== a 2-node x 2-GPU MPI training job to 95 % accuracy on the digits data set"
rc=0
id=$(railyard submit --wait --name digits-2n --nodes 2 --gpus-per-node 2 --launcher mpi \
  --target accuracy=0.95 --time 10m -- railyard-train --target-accuracy 0.95) || rc=$?
echo "job $id ended with exit code $rc"
railyard queue --all
echo
railyard show "$id"
echo
railyard logs "$id" | grep -E 'eval_accuracy|run_stop' | tail -3 || true

echo
echo "== the same job with every rank in an OCI image (podman; the image brings Debian's Open MPI, the job mounts"
echo "   the trainer from this build, as users mount their code)"
if bash deploy/images.sh >/dev/null; then
  w=$PWD/build/release/workloads
  rc=0
  image_id=$(railyard submit --wait --name digits-2n-image --nodes 2 --gpus-per-node 2 --launcher mpi \
    --target accuracy=0.95 --time 10m --image localhost/railyard-runtime:bookworm --mount "$w:$w:ro" \
    -- "$w/railyard-train" --target-accuracy 0.95) || rc=$?
  echo "job $image_id ended with exit code $rc"
  echo
  printf '%-22s %s\n' "time-to-train, host:" "$(railyard show "$id" --json | jq -r '.job.time_to_train_s // "-"') s"
  printf '%-22s %s\n' "time-to-train, image:" "$(railyard show "$image_id" --json | jq -r '.job.time_to_train_s // "-"') s"
else
  echo "demo: no container images (deploy/images.sh failed): skipping the image job" >&2
fi

trace=../shared/traces/philly_gavel.csv
if [ -f "$trace" ]; then
  echo
  echo "== the same scheduling core on a virtual clock: a Philly trace slice on a 4-SU DGX H100 SuperPOD"
  railyard topo generate --preset dgx-h100-superpod --sus 4 -o "$state/h100-4su.json"
  railyard sim --cluster "$state/h100-4su.json" --trace "$trace" --user 6c71a0 --limit 2000 --scale-gpus 8 \
    --policy railyard,first-fit,fifo
fi
echo
echo "Dashboard: $RAILYARD_URL/   (admin token: $RAILYARD_TOKEN)"
echo "The cluster keeps running; stop it with: $PWD/$bin/railyard down --state-dir $state/cluster"
