#!/usr/bin/env bash
# A leasequake run over several machines by ssh, with GNU parallel: one
# shard per host at a time, each shard's directory brought back here, then
# one merge. Every host needs the same leasequake build on its PATH.
#
#   HOSTS=alice,bob,carol deploy/parallel.sh experiment.yaml 6 merged
#
# EXPERIMENT is a file relative to here (it is copied to each host's home),
# with a fixed seed; N the number of shards; OUT the merged directory.
# HOSTS=: runs the shards on this machine (GNU parallel's name for it).
# RUN_OPTIONS: more `leasequake run` options, e.g. "--time-scale 0.1".
set -euo pipefail

if (($# != 3)); then
    echo "usage: HOSTS=host1,host2 $0 EXPERIMENT N OUT" >&2
    exit 2
fi
experiment=$1 n=$2 out=$3

# The one line: shard {} of N on whichever host is free, returned and
# removed from the host when done. A shard whose expectations failed
# (exit 1) has still written its results; the merge judges them.
read -ra options <<<"${RUN_OPTIONS:-}"
parallel --sshlogin "${HOSTS:?set HOSTS to a comma-separated list of ssh hosts}" --jobs 1 \
    --transferfile "$experiment" --return shard-{} --cleanup \
    leasequake run "$experiment" --shard {}/"$n" --out shard-{} --quiet "${options[@]}" ::: $(seq 0 $((n - 1))) || true

shards=()
for ((k = 0; k < n; k++)); do shards+=("shard-$k"); done
exec leasequake merge "$out" "${shards[@]}"
