#!/usr/bin/env bash
# Builds everything (Debug, ASan+UBSan) and runs every test. Installs what it needs first.
# Usage: deploy/test.sh [extra ctest args], e.g. deploy/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh
# The container tests' images: 0.2 s when they exist; making them takes 25 s on an idle machine, a minute
# beside a build.
bash deploy/images.sh
jobs=$(nproc)
# The debug preset is a unity build (CMAKE_UNITY_BUILD: eight sources per compile, so the Asio, Beast, JSON
# and GoogleTest templates they share are instantiated once per batch), linked by lld when present.
cmake --preset debug >/dev/null
cmake --build --preset debug -j "$jobs"
# Every test runs once: a test that fails fails the run.
ctest --preset debug --label-exclude 'slow' "$@"
