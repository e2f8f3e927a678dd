#!/usr/bin/env bash
# Makes the local OCI images that Railyard's container tests and demo run jobs in (no registry is reachable:
# they are built from this machine's packages and apt sources). Rootful podman, so run as root (re-runs
# itself through sudo otherwise). Idempotent: when both images exist it only asks podman and returns in well
# under a second. Prints one line per image.
#
#   localhost/railyard-busybox:1         a static busybox (Debian's busybox-static) and nothing else, ~2 MB.
#                                        For the fast tests of the container launch: user, mounts, env,
#                                        workdir, limits, signals; a container starts and exits in ~0.3 s.
#   localhost/railyard-runtime:bookworm  Debian 12 (mmdebstrap --variant=apt) with Open MPI 4.1 (mpirun,
#                                        orted) and every library the trainer and the allreduce benchmark
#                                        link, the Debug build's libasan/libubsan included, ~255 MB. Jobs run
#                                        build/<preset>/workloads/railyard-train in it with that directory
#                                        mounted read-only at the same path; the trainer then finds its
#                                        data set beside itself (workloads/data/digits.csv.gz).
#
# The tag is the image's version: change what goes into an image and bump its tag, or callers that find the
# old one keep it. Running an image here needs `podman --runtime runc run --ulimit nofile=N:N
# --ulimit nproc=N:N ...` (crun fails on this cgroup setup; podman's default rlimits are refused).
#
# Usage: deploy/images.sh [--archive DIR]
#   --archive DIR  also write `podman save --format docker-archive` of the busybox image to
#                  DIR/railyard-busybox.tar (for the tests of docker-archive: images); kept while it
#                  holds the current image.
# RAILYARD_IMAGE_MIRROR: an apt source for mmdebstrap (URL, "deb ..." line or sources file) instead of the
# machine's /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list.
set -euo pipefail

readonly BUSYBOX_IMAGE=localhost/railyard-busybox:1
readonly RUNTIME_IMAGE=localhost/railyard-runtime:bookworm
# busybox-static (Debian 12) has no printenv applet: printenv is a script over awk (see make_busybox).
readonly BUSYBOX_APPLETS=(sh cat id ls sleep echo env test head grep stat touch mkdir dd readlink kill true
                          false awk)
# From `ldd` of build/debug/workloads/railyard-train and railyard-allreduce, each library's package
# (dpkg -S); the Release build needs the same but libasan8 and libubsan1. libnccl (the GPU backend, loaded
# with dlopen) is not here: it comes from the host's CUDA, not Debian.
readonly RUNTIME_PKGS=(openmpi-bin libopenmpi3 libasan8 libubsan1 libstdc++6 libgcc-s1 zlib1g libhwloc15
                       libevent-core-2.1-7 libevent-pthreads-2.1-7 libudev1)

archive_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --archive) archive_dir=${2:?"--archive needs a directory"}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "images: unknown argument $1 (usage: deploy/images.sh [--archive DIR])" >&2; exit 2 ;;
  esac
done

[ -z "$archive_dir" ] || archive_dir=$(realpath -m "$archive_dir")
if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=RAILYARD_IMAGE_MIRROR,TMPDIR bash "$0" ${archive_dir:+--archive "$archive_dir"}
fi
cd "$(dirname "$0")/.."

# Tests and engineers may run this at the same time: one makes an image, the others wait and find it.
exec 9>/tmp/railyard-images.lock
flock 9

work=$(mktemp -d "${TMPDIR:-/var/tmp}/railyard-images.XXXXXX")
trap 'rm -rf "$work"' EXIT
run_flags=(--runtime runc run --rm --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --network host)

image_size() { podman image inspect --format '{{.Size}}' "$1" | awk '{printf "%d MB", $1 / 1e6}'; }

make_busybox() {
  local root=$work/busybox
  mkdir -p "$root"/{bin,usr/bin,etc,tmp,proc,sys,dev,root}
  chmod 1777 "$root/tmp"
  # A dynamic busybox would not start in an image without a libc.
  if ldd /bin/busybox >/dev/null 2>&1; then
    echo "images: /bin/busybox is not static (install busybox-static: deploy/bootstrap.sh)" >&2
    return 1
  fi
  cp /bin/busybox "$root/bin/busybox"
  local applet
  for applet in "${BUSYBOX_APPLETS[@]}"; do ln -s busybox "$root/bin/$applet"; done
  cat >"$root/bin/printenv" <<'EOF'
#!/bin/sh
# printenv [NAME...]: the whole environment, or each NAME's value; 1 when one is unset.
[ $# -eq 0 ] && exec env
exec awk 'BEGIN { rc = 0; for (i = 1; i < ARGC; i++) if (ARGV[i] in ENVIRON) print ENVIRON[ARGV[i]]; else rc = 1; exit rc }' "$@"
EOF
  chmod 755 "$root/bin/printenv"
  # Without these podman writes its own for --user UID:GID, mode 0600 and so unreadable to that user.
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  chmod 644 "$root/etc/passwd" "$root/etc/group"
  tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$work/busybox.tar" .
  podman import -q --change ENV=PATH=/bin:/usr/bin --change 'CMD ["/bin/sh"]' "$work/busybox.tar" "$BUSYBOX_IMAGE" >/dev/null
  podman "${run_flags[@]}" --user 65534:65534 "$BUSYBOX_IMAGE" sh -c 'id -u && printenv PATH' >/dev/null
}

apt_sources() {
  if [ -n "${RAILYARD_IMAGE_MIRROR:-}" ]; then echo "$RAILYARD_IMAGE_MIRROR"
  elif [ -f /etc/apt/sources.list.d/debian.sources ]; then echo /etc/apt/sources.list.d/debian.sources
  elif [ -f /etc/apt/sources.list ]; then echo /etc/apt/sources.list
  fi  # nothing: mmdebstrap's own default, deb.debian.org with updates and security
}

make_runtime() {
  local include sources
  include=$(IFS=,; echo "${RUNTIME_PKGS[*]}")
  sources=$(apt_sources)
  # Into a file, not piped to podman import: a build that fails halfway must not leave a half image.
  # Leaving out manual pages, translations and documentation (dpkg path-exclude) would save 45 MB of
  # 255 but cost ~10 s more CPU (user time 13 s -> 23 s): dpkg's path filters are slow.
  if ! mmdebstrap --quiet --variant=apt --include="$include" bookworm "$work/runtime.tar" \
      ${sources:+"$sources"} >"$work/mmdebstrap.log" 2>&1; then
    tail -n 30 "$work/mmdebstrap.log" >&2
    echo "images: mmdebstrap failed for $RUNTIME_IMAGE" >&2
    return 1
  fi
  podman import -q --change ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --change 'CMD ["/bin/bash"]' "$work/runtime.tar" "$RUNTIME_IMAGE" >/dev/null
  local version
  version=$(podman "${run_flags[@]}" "$RUNTIME_IMAGE" mpirun --version 2>&1) || true
  if [[ "$version" != *"(Open MPI) 4.1"* ]]; then
    podman rmi -f "$RUNTIME_IMAGE" >/dev/null
    echo "images: $RUNTIME_IMAGE has no Open MPI 4.1 mpirun" >&2
    return 1
  fi
  # Where a trainer is built already, check that it starts: a library missing from RUNTIME_PKGS shows here.
  local trainer dir
  for trainer in "$PWD"/build/*/workloads/railyard-train; do
    [ -x "$trainer" ] || continue
    dir=$(dirname "$trainer")
    if ! podman "${run_flags[@]}" -v "$dir:$dir:ro" "$RUNTIME_IMAGE" "$trainer" --help >/dev/null; then
      podman rmi -f "$RUNTIME_IMAGE" >/dev/null
      echo "images: $trainer does not start in $RUNTIME_IMAGE (a library missing from RUNTIME_PKGS?)" >&2
      return 1
    fi
  done
}

ensure() {  # ensure IMAGE MAKER: make IMAGE unless podman has it
  local image=$1 maker=$2 start
  if podman image exists "$image"; then
    echo "images: $image present ($(image_size "$image"))"
    return 0
  fi
  start=$(date +%s.%N)
  "$maker"
  echo "images: $image made in $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e - s}') s ($(image_size "$image"))"
}

ensure "$BUSYBOX_IMAGE" make_busybox
ensure "$RUNTIME_IMAGE" make_runtime

if [ -n "$archive_dir" ]; then
  mkdir -p "$archive_dir"
  archive=$archive_dir/railyard-busybox.tar
  id=$(podman image inspect --format '{{.Id}}' "$BUSYBOX_IMAGE")
  # A docker-archive names its image's config by the image ID: keep an archive of the current image.
  manifest=$(tar -xOf "$archive" manifest.json 2>/dev/null) || manifest=""
  if [[ "$manifest" == *"${id#sha256:}"* ]]; then
    echo "images: $archive present"
  else
    rm -f "$archive.tmp"
    podman save -q --format docker-archive -o "$archive.tmp" "$BUSYBOX_IMAGE"
    mv "$archive.tmp" "$archive"
    echo "images: $archive written"
  fi
fi
