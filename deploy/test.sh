#!/usr/bin/env bash
# Builds everything (Debug, ASan+UBSan) and runs every test. Installs what it needs first.
# Usage: deploy/test.sh [extra ctest args], e.g. deploy/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh
jobs=$(nproc)
cmake --preset debug >/dev/null
cmake --build --preset debug -j "$jobs"
ctest --preset debug --label-exclude 'slow' "$@"
