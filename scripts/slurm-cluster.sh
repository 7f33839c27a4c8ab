#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, private to one directory:
# its own munge key and munged, and slurmctld and slurmd reading a generated
# slurm.conf (this host's name, CPUs and memory as `slurmd -C` finds them),
# with their state, spool, sockets and logs all under DIR. Nothing
# system-wide is used but the packages, which it installs as root when the
# machine lacks them (slurm-wlm, munge).
#
#   scripts/slurm-cluster.sh install     only install what is missing
#   scripts/slurm-cluster.sh start DIR   start it; DIR must not exist. Prints
#                                        the line SLURM_CONF=DIR/slurm.conf,
#                                        which sbatch, squeue and scontrol need
#   scripts/slurm-cluster.sh stop DIR    cancel its jobs, stop its daemons
#                                        (TERM, then KILL) and remove DIR
#
# Debian's Slurm keeps no accounting without slurmdbd and a database: a
# finished job is seen by its absence from squeue, not through sacct.
set -euo pipefail

usage() {
    echo "usage: $0 install | start DIR | stop DIR" >&2
    exit 2
}
(($# >= 1)) || usage
action=$1
if [[ $action == install ]]; then
    (($# == 1)) || usage
    dir=/nonexistent
else
    (($# == 2)) || usage
    dir=$2
fi
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
conf=$dir/slurm.conf
# Written first by start: stop removes only a directory start made.
marker=.slurm-cluster
export SLURM_CONF=$conf

# pid_of NAME: the pid its pid file holds, if that process still runs.
pid_of() {
    local pid
    pid=$(cat "$dir/$1.pid" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# wait_gone SECONDS PID...: true once every PID has exited.
wait_gone() {
    local until=$((SECONDS + $1)) pid alive
    shift
    while :; do
        alive=0
        for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || return 0
        ((SECONDS < until)) || return 1
        sleep 0.2
    done
}

# descendants PID: every process below PID, deepest first.
descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        descendants "$child"
        echo "$child"
    done
}

# ours PID: does the process carry this cluster's SLURM_CONF (every daemon
# started here does, and so does each job's step daemon)?
ours() {
    tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$conf"
}

stop() {
    [[ -d $dir ]] || return 0
    if [[ ! -f $dir/$marker ]]; then
        echo "error: $dir is not a cluster's directory (no $marker): not touched" >&2
        exit 2
    fi
    if pid_of slurmctld >/dev/null; then
        # Its jobs first: each step daemon signals its job's processes
        # (SIGTERM, then SIGKILL after KillWait).
        scancel --quiet --partition=leasequake 2>/dev/null || true
        local until=$((SECONDS + 15))
        while [[ -n $(squeue -h -o %A 2>/dev/null) ]] && ((SECONDS < until)); do sleep 0.2; done
    fi
    # Whatever a job still runs (its step daemon gone, or slurmd): killed
    # with its step daemon, deepest first.
    local step pid
    for step in $(pgrep -f '^slurmstepd: \[' || true); do
        ours "$step" || continue
        for pid in $(descendants "$step") "$step"; do kill -KILL "$pid" 2>/dev/null || true; done
    done
    local pids=() name
    for name in slurmd slurmctld munged; do
        pid=$(pid_of "$name") && pids+=("$pid")
    done
    if ((${#pids[@]})); then
        kill -TERM "${pids[@]}" 2>/dev/null || true
        wait_gone 10 "${pids[@]}" || kill -KILL "${pids[@]}" 2>/dev/null || true
    fi
    if ! wait_gone 5 "${pids[@]}"; then
        echo "error: daemons of $dir still run (${pids[*]}): $dir is kept" >&2
        exit 1
    fi
    rm -rf "$dir"
}

need() { # need PACKAGE COMMAND: install PACKAGE where COMMAND is missing
    command -v "$2" >/dev/null && return 0
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
        echo "error: this needs the Debian package $1: apt-get install $1 (as root)" >&2
        exit 1
    fi
    echo "slurm-cluster.sh: installing $1" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}

install() {
    need munge munged
    need slurmctld slurmctld
    need slurmd slurmd
    need slurm-client sbatch
}

start() {
    install
    if [[ -e $dir ]]; then
        echo "error: $dir exists: a cluster's directory is made by start and removed by stop" >&2
        exit 2
    fi
    mkdir -p "$dir"/{state,spool,munge}
    touch "$dir/$marker"
    chmod 700 "$dir/munge"
    # Whatever goes wrong from here, or stops it, nothing is left running.
    trap 'echo "slurm-cluster.sh: could not start; logs in $dir were:" >&2; tail -n 20 "$dir"/*.log >&2 2>/dev/null; stop' ERR
    trap 'stop; exit 130' INT TERM

    # munge: a fresh key, its own socket. As root it needs --force.
    head -c 1024 /dev/urandom >"$dir/munge/munge.key"
    chmod 400 "$dir/munge/munge.key"
    munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
        --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"

    # Two free ports for the controller and the node daemon.
    local ports
    ports=$(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
    read -r ctld_port slurmd_port <<<"$ports"
    local host node
    host=$(hostname -s)
    # This machine as slurmd sees it (CPUs, cores, memory): a node declared
    # with more than it has would be drained.
    node=$(slurmd -C | head -n 1)
    cat >"$conf" <<EOF
# Generated by scripts/slurm-cluster.sh: a one-node cluster in $dir.
ClusterName=leasequake
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
# No cgroups: the jobs' processes are found by their parents, and each
# leasequake run keeps its own trial cgroups as it does anywhere.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
# A cancelled or requeued job's processes get SIGTERM, then SIGKILL this
# many seconds later (leasequake stops its workers well within it).
KillWait=5
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=leasequake Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    slurmctld -f "$conf"
    slurmd -f "$conf"
    # Up once the node is ready for jobs.
    local until=$((SECONDS + 60)) state=
    while ((SECONDS < until)); do
        state=$(sinfo -h -N -o %T 2>/dev/null || true)
        [[ $state == idle ]] && break
        sleep 0.5
    done
    if [[ $state != idle ]]; then
        echo "error: the node did not come up (state: ${state:-none})" >&2
        false
    fi
    trap - ERR INT TERM
    echo "SLURM_CONF=$conf"
}

case $action in
install) install ;;
start) start ;;
stop) stop ;;
*) usage ;;
esac
