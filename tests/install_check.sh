#!/bin/sh
# install_check.sh BUILD_DIR [CMAKE [SOURCE_DIR]]: `cmake --install` of BUILD_DIR into a temporary prefix must
# install every program the docs name (docs/OPERATIONS.md, the systemd units), runnable: the CLI and the
# scheduler were once missing from it. With SOURCE_DIR's dashboard built (web/dist), it must be installed where
# the scheduler looks for it, PREFIX/share/railyard/web.
set -eu
build=$1
cmake=${2:-cmake}
src=${3:-}
# The sanitized test build's programs are ~0.5 GB together: skipped (ctest's SKIP_RETURN_CODE) without 2 GB free.
free_kb=$(df -Pk /tmp | awk 'NR == 2 { print $4 }')
[ "${free_kb:-0}" -ge 2097152 ] || { echo "install_check: skipped, less than 2 GB free in /tmp" >&2; exit 77; }
prefix=$(mktemp -d /tmp/railyard-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
fail=0
for p in railyard railyard-scheduler railyard-agent railyard-agent-exec railyard-train; do
  [ -x "$prefix/bin/$p" ] || { echo "install_check: $p not installed in $prefix/bin" >&2; fail=1; }
done
if [ -n "$src" ] && [ -f "$src/web/dist/index.html" ]; then
  [ -f "$prefix/share/railyard/web/index.html" ] ||
    { echo "install_check: the dashboard (web/dist) not installed in $prefix/share/railyard/web" >&2; fail=1; }
fi
[ "$fail" -eq 0 ] || exit 1
"$prefix/bin/railyard" --version | grep -q '^railyard ' || { echo "install_check: installed railyard does not run" >&2; exit 1; }
"$prefix/bin/railyard-scheduler" --help >/dev/null || { echo "install_check: installed railyard-scheduler does not run" >&2; exit 1; }
echo "install_check: ok ($prefix)"
