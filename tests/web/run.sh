#!/usr/bin/env bash
# Builds the dashboard (web/build.sh) and runs its browser tests with node's test runner.
# Needs: node + npm, Debian's chromium, and a built railyard-scheduler (RAILYARD_BIN_DIR, default
# build/web; deploy/test.sh passes its own build dir). Exit code = the tests' result.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
RAILYARD_BIN_DIR="${RAILYARD_BIN_DIR:-$repo/build/web}"
export RAILYARD_BIN_DIR="$(realpath -m "$RAILYARD_BIN_DIR")"   # the tests run from tests/web
bash "$repo/web/build.sh"
cd "$here"
exec node --test --test-concurrency=1 --test-reporter=spec "$@" ./*.test.mjs
