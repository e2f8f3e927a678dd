#!/usr/bin/env bash
# Installs Slurm 22.05 (Debian's emulator build) and munge when they are missing, and points the
# slurmctld/slurmd/slurmstepd alternatives at the regular build. Idempotent; quick when already installed.
# Run by setup.sh, and by bench/vs-slurm.sh and bench/placement-replay.sh before they look for sbatch.
set -euo pipefail
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    slurm-wlm-emulator slurm-client-emulator munge >/dev/null
fi
# Installing the emulator points the slurmctld/slurmd/slurmstepd alternatives at its front-end build, whose
# slurmctld refuses to start without FrontendName ("No front end nodes defined"). Use the regular build
# (installed alongside as slurmctld-wlm etc.); slurmd execs /usr/sbin/slurmstepd, so the alternative itself
# must point there.
for d in slurmctld slurmd slurmstepd; do
  if [[ -x /usr/sbin/$d-wlm && $(readlink -f "/usr/sbin/$d") != "/usr/sbin/$d-wlm" ]]; then
    update-alternatives --set "$d" "/usr/sbin/$d-wlm" >/dev/null
  fi
done
