#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build/fuzz and runs each for SECONDS (default
# 300), starting from the saved inputs in fuzz/regressions/<target>/ and a corpus under build/fuzz/corpus.
# Crashes are written to build/fuzz/crashes/<target>/; copy them into fuzz/regressions/<target>/ once fixed.
# Prints one line per target: executions, corpus size, crashes.     fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(job_spec sbatch mllog topology_json topology_conf nvsmi hostlist http_request agent_message)
bash deploy/bootstrap.sh
command -v clang++ >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends clang >/dev/null
launcher=$(command -v ccache || true)
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" \
  -DRAILYARD_FUZZ=ON -DRAILYARD_BENCH=OFF >/dev/null
ninja -C build/fuzz -j"$(nproc)" "${targets[@]/#/fuzz_}"
# UBSan is built in recover mode for fuzzing; halting turns every report into a crash libFuzzer keeps.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
printf '%-15s %12s %8s %8s\n' target executions corpus crashes
for t in "${targets[@]}"; do
  mkdir -p "build/fuzz/corpus/$t" "build/fuzz/crashes/$t"
  log=build/fuzz/$t.log
  "build/fuzz/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/crashes/$t/" "build/fuzz/corpus/$t" "fuzz/regressions/$t" >"$log" 2>&1 || true
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [[ -n "$execs" ]] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  printf '%-15s %12s %8s %8s\n' "$t" "${execs:-?}" "$(ls "build/fuzz/corpus/$t" | wc -l)" \
    "$(ls "build/fuzz/crashes/$t" | wc -l)"
done
