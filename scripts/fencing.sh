#!/usr/bin/env bash
# Run experiments/fencing/ (the seed's table; 100 trials of random pauses
# longer than the lease per storage mode; 50 trials of the exactly-once job
# per strategy) and write results/fencing/ with README.md (the comparison,
# and the strategy table) and host.json.
#
#   scripts/fencing.sh                 time scale 0.1
#   SCALE=1 scripts/fencing.sh         real time
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${SCALE:-0.1}
out=${OUT:-results/fencing}
exec scripts/run-suite.sh experiments/fencing/ "$out" --time-scale "$scale" "$@"
