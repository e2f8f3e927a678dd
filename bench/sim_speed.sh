#!/usr/bin/env bash
# Simulator speed (issue 48's table: 100,000 jobs on 10,000 nodes, exact passes, < 60 s of CPU at every
# load): the mixed synthetic workload, and the Philly trace repeated 7 times (each copy 1 h later, its users
# renamed) at 8 GPUs a job, each at every offered load given. With -b, a second build runs each row at the
# same time (one per core: the two columns see the same machine) and the per-job outputs are compared.
# Prints CPU seconds (user), peak RSS, passes and mean JCT per run.
#   bench/sim_speed.sh [-b BEFORE_RAILYARD] [-l "1 1.5 2"] [RAILYARD]   (default build/release/cli/railyard)
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE= LOADS="1 1.5 2"
while getopts b:l: o; do
  case $o in
    b) BEFORE=$OPTARG ;;
    l) LOADS=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
R=${1:-build/release/cli/railyard}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/philly_x7.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open('../shared/traces/philly_gavel.csv')))
hdr, data = rows[0], rows[1:]
out = [[f"{r[0]}-c{k}", str(int(float(r[1])) + k * 3600), r[2], r[3], f"{r[4]}-c{k}", r[5]] for k in range(7) for r in data]
out.sort(key=lambda r: int(r[1]))
w = csv.writer(open(sys.argv[1], 'w'), lineterminator='\n')
w.writerow(hdr)
w.writerows(out)
PY
run() {  # BINARY TAG ARGS...: one run, its summary in $tmp/TAG.log, its jobs in $tmp/TAG.csv
  local bin=$1 tag=$2
  shift 2
  /usr/bin/time -f "CPU %U s user, peak RSS %M KiB" "$bin" sim --nodes 10000 --leaf-size 32 --policy railyard \
    "$@" --jobs-out "$tmp/$tag.csv" >"$tmp/$tag.log" 2>&1
}
for load in $LOADS; do
  for workload in synth philly; do
    if [ $workload = synth ]; then
      args=(--synth "jobs=100000,seed=1,load=$load")
    else
      args=(--trace "$tmp/philly_x7.csv" --scale-gpus 8 --limit 100000 --offered-load "$load")
    fi
    echo "## $workload, load $load"
    pids=()
    run "$R" after "${args[@]}" & pids+=($!)
    [ -n "$BEFORE" ] && { run "$BEFORE" before "${args[@]}" & pids+=($!); }
    wait "${pids[@]}"
    for tag in after ${BEFORE:+before}; do
      echo "$tag: $(grep -E "^CPU" "$tmp/$tag.log"); $(grep -E "scheduling passes|mean JCT" "$tmp/$tag.log" | tr -s ' ' | paste -sd ';')"
    done
    if [ -n "$BEFORE" ]; then
      cmp -s "$tmp/after.csv" "$tmp/before.csv" && echo "per-job output identical" || echo "per-job output differs"
    fi
  done
done
