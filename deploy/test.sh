#!/usr/bin/env bash
# Builds everything (Debug, ASan+UBSan) and runs every test. Installs what it needs first.
# Usage: deploy/test.sh [extra ctest args], e.g. deploy/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh
jobs=$(nproc)
cmake --preset debug >/dev/null
cmake --build --preset debug -j "$jobs"
# --repeat until-pass:2: an integration test that fails is run once more (the multi-process MPI end-to-end test
# has failed once under heavy load; a test that fails twice fails the run).
ctest --preset debug --label-exclude 'slow' --repeat until-pass:2 "$@"
