#!/usr/bin/env bash
# Reproduce every measurement of "Coordination Part 2: Processes on One
# Machine" (and what it missed): runs every experiment in experiments/blog/
# and writes one directory per experiment plus README.md (the side-by-side
# table: the blog's number, ours, the theoretical bound, a verdict) and
# host.json (the machine it ran on).
#
#   scripts/reproduce-blog.sh           real time  -> results/blog/
#   scripts/reproduce-blog.sh --quick   scale 0.1  -> results/blog-quick/
#
# `leasequake plan experiments/blog/ --max-jobs $(nproc)` says how long (add
# `--time-scale 0.1` for --quick).
#
# Extra arguments go to `leasequake run` (e.g. --jobs 2). Exit code: that of
# `leasequake run` (1 if an experiment's expect: failed).
set -euo pipefail
cd "$(dirname "$0")/.."

out=results/blog
args=()
if [ "${1:-}" = "--quick" ]; then
    shift
    out=results/blog-quick
    args+=(--time-scale 0.1)
fi

exec scripts/run-suite.sh experiments/blog/ "$out" "${args[@]}" "$@"
