#!/usr/bin/env bash
# A throwaway Slurm 22.05 (Debian's front-end emulator build) on 127.0.0.1: N emulated DGX nodes with 8 GPUs
# each (GRES), select/cons_tres, topology/tree with the same leaf groups as Railyard's fat tree
# (LEAF nodes per leaf switch), backfill. One slurmd per node. State lives under DIR; only what was started
# here is stopped by stop.sh: the daemons by pid (DIR/pids), and everything they started (the slurmstepd of
# every job step, which outlive a stopped slurmd, and the jobs' processes) through a cgroup v2 that this
# script enters before starting anything (DIR/cgroup names it; none when no writable cgroup2 mount exists:
# stop.sh then finds the step daemons by SLURM_CONF=DIR/slurm.conf in their environment).
#
#   bench/slurm/setup.sh DIR [NODES] [LEAF]      then   bench/slurm/env.sh DIR  (sets SLURM_CONF)
set -euo pipefail
dir=$(realpath -m "${1:?usage: setup.sh DIR [NODES] [LEAF]}")
nodes=${2:-1024}
leaf=${3:-32}
here=$(cd "$(dirname "$0")" && pwd)

"$here/install.sh"
[[ -e "$dir/pids" ]] && "$here/stop.sh" "$dir" || true
if [[ -d "$dir" && -n "$(ls -A "$dir")" && ! -f "$dir/slurm.conf" ]]; then
  echo "setup.sh: $dir exists and is not a Slurm state directory made by this script" >&2
  exit 2
fi
rm -rf "$dir" && mkdir -p "$dir"/{state,spool,munge}
chmod 700 "$dir/munge"

# Our own cgroup (v2: /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts): this shell moves into it,
# so every process started from here on, daemonized or not, stays in it; `cgroup.kill` ends them all.
for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
  [[ $(stat -fc %T "$root" 2>/dev/null) == cgroup2fs && -w $root ]] || continue
  cg=$root/railyard-slurm-$$-$RANDOM
  if mkdir "$cg" 2>/dev/null && echo $$ > "$cg/cgroup.procs" 2>/dev/null; then
    echo "$cg" > "$dir/cgroup"
    break
  fi
  rmdir "$cg" 2>/dev/null
done
[[ -f "$dir/cgroup" ]] || echo "setup.sh: no writable cgroup2; stop.sh will find step daemons by SLURM_CONF" >&2

# Ports on 127.0.0.1: slurmctld, then one per slurmd (a contiguous range nobody listens on). The range sits
# below the kernel's ephemeral range, where outgoing connections (and port-0 listeners) would take ports
# from under the slurmds; every port of it is checked.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
read -r eph_low _ < /proc/sys/net/ipv4/ip_local_port_range
span=$((eph_low - 10000 - nodes - 2))
((span > 0)) || { echo "setup.sh: no room for $nodes ports below the ephemeral range ($eph_low)" >&2; exit 2; }
while :; do
  ctld_port=$((10000 + (RANDOM * 32768 + RANDOM) % span))
  slurmd_port=$((ctld_port + 1))
  ok=1
  for ((p = ctld_port; p < slurmd_port + nodes; p++)); do port_free "$p" || { ok=0; break; }; done
  ((ok)) && break
done

dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
  --seed-file="$dir/munge/munged.seed" --force
for _ in $(seq 50); do [[ -S "$dir/munge/munge.sock" ]] && break; sleep 0.1; done
echo "munged $(cat "$dir/munge/munged.pid")" > "$dir/pids"

last=$(printf '%04d' "$nodes")
cat > "$dir/slurm.conf" <<CONF
ClusterName=railyard-bench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmdParameters=config_overrides
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmctldDebug=error
SlurmdDebug=error
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_min_interval=0,default_queue_depth=1000
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
TopologyPlugin=topology/tree
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MaxJobCount=200000
MaxArraySize=100001
MinJobAge=2
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=300
InactiveLimit=0
KillWait=2
NodeName=dgx[0001-$last] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$slurmd_port-$((slurmd_port + nodes - 1))] CPUs=112 Sockets=2 CoresPerSocket=56 ThreadsPerCore=1 RealMemory=2000000 Gres=gpu:8 State=UNKNOWN
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
# Regular files stand in for the GPU devices: slurmd logs "not a valid character or block device" but counts
# them (without File= it reports 0 GPUs and the node goes INVAL).
mkdir -p "$dir/dev" && touch "$dir"/dev/gpu{0..7}
echo "NodeName=dgx[0001-$last] Name=gpu Count=8 File=$dir/dev/gpu[0-7]" > "$dir/gres.conf"
{
  leaves=()
  for ((first = 1, l = 1; first <= nodes; first += leaf, l++)); do
    end=$((first + leaf - 1)); ((end > nodes)) && end=$nodes
    printf 'SwitchName=leaf%02d Nodes=dgx[%04d-%04d]\n' "$l" "$first" "$end"
    leaves+=("leaf$(printf %02d "$l")")
  done
  printf 'SwitchName=spine Switches=leaf[01-%02d]\n' "${#leaves[@]}"
} > "$dir/topology.conf"

export SLURM_CONF=$dir/slurm.conf
slurmctld -i -f "$dir/slurm.conf"
for _ in $(seq 100); do [[ -s "$dir/slurmctld.pid" ]] && break; sleep 0.1; done
echo "slurmctld $(cat "$dir/slurmctld.pid")" >> "$dir/pids"
# One slurmd per emulated node (-N names it; Debian's front-end "emulator" build cannot be used: its daemons
# link the regular libslurmfull, which refuses FrontendName).
# Started 16 at a time (each takes ~0.3 s of CPU to start); each pid is recorded as soon as its pid file
# appears, so stop.sh finds every one even if this script is interrupted.
record_slurmd() {
  local n=$1
  for _ in $(seq 100); do [[ -s "$dir/slurmd-$n.pid" ]] && break; sleep 0.05; done
  if [[ -s "$dir/slurmd-$n.pid" ]]; then echo "slurmd $(cat "$dir/slurmd-$n.pid")" >> "$dir/pids"
  else echo "setup.sh: slurmd for $n did not start: $(tail -1 "$dir/slurmd-$n.log" 2>/dev/null)" >&2; fi
}
for ((i = 1; i <= nodes; i += 16)); do
  batch=()
  for ((j = i; j < i + 16 && j <= nodes; j++)); do
    n=$(printf 'dgx%04d' "$j")
    mkdir -p "$dir/spool/$n"
    slurmd -f "$dir/slurm.conf" -N "$n" &
    batch+=("$n")
  done
  wait
  for n in "${batch[@]}"; do record_slurmd "$n"; done
done
for _ in $(seq 300); do
  idle=$(sinfo -h -o '%D %t' 2>/dev/null | awk '$2=="idle"{n+=$1} END{print n+0}')
  [[ "$idle" == "$nodes" ]] && break
  sleep 0.2
done
echo "slurm up: $idle/$nodes nodes idle; export SLURM_CONF=$dir/slurm.conf"
