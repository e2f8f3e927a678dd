#!/usr/bin/env bash
# Simulator speed (issue 31's target: 100,000 jobs on 10,000 nodes in < 60 s on 2 cores, exact passes): the
# mixed synthetic workload at load 1.0, and the Philly trace repeated 7 times (each copy 1 h later, its users
# renamed) at 8 GPUs a job. Prints CPU seconds, peak RSS and the run's summary lines for each.
# Usage: bench/sim_speed.sh [RAILYARD_BINARY]   (default build/release/cli/railyard)
set -euo pipefail
cd "$(dirname "$0")/.."
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
run() {
  echo "## $*"
  /usr/bin/time -f "CPU %U s user, peak RSS %M KiB" "$R" sim --nodes 10000 --leaf-size 32 --policy railyard "$@" 2>&1 |
    grep -E "CPU|mean JCT|min leaf span|scheduling passes"
}
run --synth jobs=100000,seed=1
run --trace "$tmp/philly_x7.csv" --scale-gpus 8 --limit 100000
