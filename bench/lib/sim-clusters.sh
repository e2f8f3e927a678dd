# shellcheck shell=bash disable=SC2034  # sets the caller's variables
# Sourced (not run) by the simulator's load sweeps (bench/placement_sweep.sh, bench/placement_samples.sh,
# bench/compact_share_sweep.sh), from the repository root, with the caller's arguments: sets R (the railyard
# binary: the first argument, default build/release/cli/railyard), tmp (a directory removed on exit), and
# clusters, the two clusters every sweep compares as "name:sim arguments": the non-blocking 4-SU DGX H100
# SuperPOD (pod, 128 nodes in 4 leaf groups of 32) and a 2:1 oversubscribed fat tree of the same size (oversub,
# 8 leaves of 16).
R=${1:-build/release/cli/railyard}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$R" topo generate --preset dgx-h100-superpod --sus 4 -o "$tmp/pod.json" >/dev/null
clusters=("pod:--cluster $tmp/pod.json" "oversub:--nodes 128 --leaf-size 16 --oversubscription 2")
