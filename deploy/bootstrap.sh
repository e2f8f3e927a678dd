#!/usr/bin/env bash
# Installs every system package Railyard needs on Debian 12 (run as root).
# Idempotent: on a ready machine it only checks dpkg and returns in about a second.
set -euo pipefail

PKGS=(build-essential cmake ninja-build pkg-config libboost1.81-dev libsqlite3-dev sqlite3
      nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin
      libcli11-dev libspdlog-dev libfmt-dev libtomlplusplus-dev libssl-dev openssl ca-certificates zlib1g-dev chromium
      lld etcd-server etcd-client curl jq libbpf-dev
      runc podman mmdebstrap busybox-static docker-registry)
# runc before podman: podman depends on "crun | runc", and crun fails on these hosts' cgroups (TOOLCHAIN.md).
# podman, mmdebstrap and busybox-static make the containers' images (deploy/images.sh); docker-registry is the
# registry binary the image-pull tests serve on a free 127.0.0.1 port (they start their own; the package's
# service, where systemd runs one, is not used).

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "bootstrap: system packages present" >&2
fi
