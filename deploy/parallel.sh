#!/usr/bin/env bash
# A leasequake run over several machines by ssh, with GNU parallel: one
# shard per host at a time, each shard's directory brought back here (into
# leasequake-<UTC time>-<pid>/), then one merge. Every host needs the same
# leasequake build on its PATH.
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
if [[ -e $out ]]; then
    echo "$0: $out exists: name a new directory for the merge" >&2
    exit 2
fi
# A directory of this run's own, here and on every host: no shard of an
# earlier run is ever taken for one of this run.
work=leasequake-$(date -u +%Y%m%dT%H%M%SZ)-$$
read -ra options <<<"${RUN_OPTIONS:-}"

# The one line: shard {} of N on whichever host is free, returned and
# removed from the host when done.
status=0
parallel --sshlogin "${HOSTS:?set HOSTS to a comma-separated list of ssh hosts}" --jobs 1 \
    --transferfile "$experiment" --return "$work"/shard-{} --cleanup \
    leasequake run "$experiment" --shard {}/"$n" --out "$work"/shard-{} --quiet ${options[@]+"${options[@]}"} \
    ::: $(seq 0 $((n - 1))) || status=$?
# Exit 1 is a shard whose expectations failed: its results are whole, and
# the merge judges them. A shard that did not finish is refused by the merge.
if ((status)); then
    echo "$0: $status shard(s) exited non-zero; merging what came back from $work/" >&2
fi
shards=()
for ((k = 0; k < n; k++)); do shards+=("$work/shard-$k"); done
exec leasequake merge "$out" "${shards[@]}"
