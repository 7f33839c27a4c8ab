#!/usr/bin/env bash
# Stage a results directory a script in scripts/ wrote, for a commit:
# every file of it but the trials' own directories (trials/NNNN/: worker
# and server logs, lock files as left, machine-specific and large; no table
# or README reads them). What is staged is exactly what the run wrote
# besides: nothing is edited or pruned by hand.
#
#   scripts/stage-results.sh results/network [results/…]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/results-dirs.sh
. scripts/lib/results-dirs.sh
results_dirs "$@"
for dir in "$@"; do
    # A directory being replaced loses the files the new run did not write.
    git rm -r -q -f --cached --ignore-unmatch "$dir" >/dev/null
    find "$dir" \( -type d -name trials -o -name '.*.tmp' \) -prune -o -type f -print0 | xargs -0 -r git add -f --
done
git status --short -- "$@" | awk '{print $1}' | sort | uniq -c
