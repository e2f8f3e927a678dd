# shellcheck shell=bash disable=SC2034  # sets the caller's variables
# Sourced (not run) by the simulator's load sweeps (bench/placement_sweep.sh, bench/placement_samples.sh,
# bench/compact_share_sweep.sh), from the repository root, with the caller's arguments: sets R (the railyard
# binary: the first argument, default build/release/cli/railyard), tmp (a directory removed on exit), and
# clusters, the two clusters every sweep compares as "name:sim arguments": the non-blocking 4-SU DGX H100
# SuperPOD (pod, 128 nodes in 4 leaf groups of 32) and a 2:1 oversubscribed fat tree of the same size (oversub,
# 8 leaves of 16). `workload` gives the jobs.
R=${1:-build/release/cli/railyard}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$R" topo generate --preset dgx-h100-superpod --sus 4 -o "$tmp/pod.json" >/dev/null
clusters=("pod:--cluster $tmp/pod.json" "oversub:--nodes 128 --leaf-size 16 --oversubscription 2")

# workload NAME LOAD [SAMPLE]: sets src, the sim arguments of workload NAME at offered load LOAD (GPU-seconds
# asked over the submit span, per GPU of these 1,024-GPU clusters):
#   synth: the default synthetic mix, 5,000 jobs, seed SAMPLE (default 1);
#   philly: the first 2,000 jobs of Philly virtual cluster SAMPLE (default 6c71a0, the demo's slice), x8 GPUs;
#   alibaba: the Alibaba openb 2023 trace, 6,203 jobs, x8 GPUs.
workload() {
  local traces=../shared/traces
  case $1 in
    synth) src=(--synth "jobs=5000,seed=${3:-1}" --load "$2") ;;
    philly) src=(--trace "$traces/philly_gavel.csv" --user "${3:-6c71a0}" --limit 2000 --scale-gpus 8 --offered-load "$2") ;;
    alibaba) src=(--trace "$traces/alibaba_openb2023.csv" --scale-gpus 8 --offered-load "$2") ;;
    *) echo "workload: unknown $1" >&2; return 2 ;;
  esac
}
