#!/bin/sh
# hugepage-copy.sh SRC DST: copies the program SRC to DST (which may be SRC itself) in 2 MiB writes, and
# renames it into place. Written that way, the file sits in the page cache in 2 MiB folios where the file
# system supports large folios (ext4 since Linux 6.16, XFS), and the kernel maps the release `railyard`'s
# 2 MiB-aligned text with huge pages at every start (cli/CMakeLists.txt, railyard_fast_start). A `cp` or
# `install` writes smaller pieces. Run by the build after linking and by `cmake --install`.
set -eu
[ $# -eq 2 ] || { echo "usage: hugepage-copy.sh SRC DST" >&2; exit 2; }
src=$1
dst=$2
mkdir -p "$(dirname "$dst")"
tmp="$dst.hugepage-copy.$$"
trap 'rm -f "$tmp"' EXIT
dd if="$src" of="$tmp" bs=2M status=none
chmod 0755 "$tmp"
mv -f "$tmp" "$dst"
trap - EXIT
