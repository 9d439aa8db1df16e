#!/usr/bin/env bash
# A real Slurm for the tests: slurmctld and slurmd from Debian on loopback,
# one node (this host, its CPUs; `srun -O` runs more tasks than that),
# authenticated by a munged of its own, every file under DIR. Started once
# per test run (ctest's fixture "slurm", tests/CMakeLists.txt).
#
#   tests/support/slurm.sh start DIR   starts it and writes DIR/slurm.conf;
#                                      SLURM_CONF=DIR/slurm.conf points
#                                      srun, sbatch and squeue at it
#   tests/support/slurm.sh stop DIR    stops it and removes DIR
#
# Needs root (slurmd starts tasks as the submitting user) and slurmctld,
# slurmd, slurm-client and munge (bash tools/setup.sh installs them). Exit
# status: 0; 1 when it could not start (the reason on stderr, the daemons'
# logs under DIR/log); 2 for usage.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
command=$1
dir=$(realpath -m "$2")

starting=0
fail() {
  echo "slurm: $*" >&2
  if [ "$starting" = 1 ]; then stop; fi
  exit 1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
  local daemon pid
  for daemon in slurmd slurmctld munged; do
    if [ -f "$dir/run/$daemon.pid" ]; then
      pid=$(cat "$dir/run/$daemon.pid")
      # A pid file outlives its daemon: never signal whatever has the pid now.
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$daemon" ] || continue
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}

wait_for() {
  local what=$1 seconds=$2
  for _ in $(seq $((seconds * 10))); do
    if eval "$what" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

start() {
  [ "$(id -u)" = 0 ] || fail "needs root (slurmd runs tasks as their user)"
  local program
  for program in slurmctld slurmd srun sinfo munged; do
    command -v "$program" >/dev/null 2>&1 ||
      fail "$program is not installed: bash tools/setup.sh installs slurmctld, slurmd, slurm-client and munge"
  done
  stop
  rm -rf "$dir"
  mkdir -p "$dir"/{run,log,state,spool,munge}
  starting=1

  # munged with a key of its own; it insists on private directories.
  chmod 0700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" ||
    fail "munged did not start (see $dir/log/munged.log)"

  local host ctld_port slurmd_port cpus
  host=$(hostname -s)
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  # The machine's own CPUs (slurmd drains a node that claims more); tests
  # run more tasks than cores with `srun -O`, which overcommits.
  cpus=$(nproc)
  cat >"$dir/slurm.conf" <<CONF
ClusterName=npc-tests
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=tests Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -i || fail "slurmctld did not start (see $dir/log/slurmctld.log)"
  slurmd || fail "slurmd did not start (see $dir/log/slurmd.log)"
  wait_for "sinfo -h -o %T | grep -qx idle" 30 ||
    fail "the node did not come up idle in 30 s (sinfo: $(sinfo -h -o %T 2>&1); see $dir/log)"
  starting=0
}

case $command in
  start) start ;;
  stop) stop; rm -rf "$dir" ;;
  *) usage ;;
esac
