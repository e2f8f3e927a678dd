#!/usr/bin/env bash
# Builds the dashboard into web/dist (what `railyard-scheduler --web-root web/dist` serves).
# Idempotent: installs the pinned npm packages only when node_modules is missing or stale, then copies
# the sources and uPlot's files. No bundler: the pages are plain ES modules.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null; then
  echo "build.sh: npm is missing (apt-get install -y --no-install-recommends nodejs npm)" >&2
  exit 1
fi
if [ ! -f node_modules/uplot/dist/uPlot.iife.min.js ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

rm -rf dist.tmp
mkdir -p dist.tmp/vendor
cp -R src/. dist.tmp/
cp node_modules/uplot/dist/uPlot.iife.min.js node_modules/uplot/dist/uPlot.min.css dist.tmp/vendor/
cp node_modules/uplot/LICENSE dist.tmp/vendor/uPlot.LICENSE
rm -rf dist
mv dist.tmp dist
echo "build.sh: web/dist ready ($(find dist -type f | wc -l) files, $(du -sk dist | cut -f1) KiB)"
