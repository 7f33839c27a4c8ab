#!/usr/bin/env bash
# Run this machine's shard of a leasequake run, as a scheduler's task:
#
#   shard.sh EXPERIMENTS RESULTS SPEC [run options…]
#
# EXPERIMENTS is an experiment file or a directory of them (every shard
# must be given the same), RESULTS a directory every shard can write to,
# SPEC what `leasequake run --shard` takes: K/N, k8s/N or slurm. The shard
# goes to RESULTS/shard-K, K counted from 0 as --shard counts it.
#
# A scheduler runs a failed task again. A shard of one experiment that was
# cut short is finished with `run --resume`; any other earlier attempt is
# moved aside to RESULTS/interrupted/ (never deleted) and run afresh. An
# exit of 1 means the experiments' expectations failed: the shard's results
# are written, and running it again would change nothing, so it is reported
# and the task succeeds. Any other failure is the task's.
set -euo pipefail

if (($# < 3)); then
    echo "usage: $0 EXPERIMENTS RESULTS SPEC [leasequake run options…]" >&2
    exit 2
fi
experiments=$1 results=$2 spec=$3
shift 3

case $spec in
k8s/*) k=${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX is not set: not a Kubernetes indexed Job} ;;
slurm)
    : "${SLURM_ARRAY_TASK_ID:?SLURM_ARRAY_TASK_ID is not set: not a Slurm job array}"
    k=$((SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-0}))
    ;;
*/*) k=${spec%%/*} ;;
*)
    echo "$0: SPEC must be K/N, k8s/N or slurm, not '$spec'" >&2
    exit 2
    ;;
esac

# leasequake runs as a child, its signals passed on: as a container's first
# process this script gets the scheduler's SIGTERM, which leasequake needs to
# stop after cleaning up (the kernel gives process 1 no default action).
status=0
child=
# shellcheck disable=SC2317 # called by the traps
forward() {
    if [[ -n $child ]]; then kill -s "$1" "$child" 2>/dev/null || true; fi
}
# An INT is passed on as a TERM, which leasequake takes the same way: a
# job started with `&` here ignores SIGINT, as a shell without job control
# makes it.
trap 'forward TERM' TERM INT
trap 'forward HUP' HUP
leasequake_() {
    leasequake "$@" &
    child=$!
    # A trapped signal ends `wait` early: wait again until the child is gone.
    while :; do
        status=0
        wait "$child" || status=$?
        kill -0 "$child" 2>/dev/null || break
    done
    child=
}

out=$results/shard-$k
mkdir -p "$results"
if [[ -f $out/experiment.yaml && -f $out/host.json ]]; then
    # As it started: its experiment.yaml holds the scale, trials and seed.
    echo "shard.sh: finishing the earlier attempt in $out" >&2
    leasequake_ run --resume "$out"
else
    if [[ -e $out ]]; then
        mkdir -p "$results/interrupted"
        aside=$results/interrupted/shard-$k.$(date -u +%Y%m%dT%H%M%SZ).$$
        echo "shard.sh: an earlier attempt is kept in $aside" >&2
        mv "$out" "$aside"
    fi
    leasequake_ run "$experiments" --shard "$spec" --out "$out" "$@"
fi
if ((status == 1)); then
    echo "shard.sh: shard $k: expectations failed; its results are in $out" >&2
    exit 0
fi
exit "$status"
