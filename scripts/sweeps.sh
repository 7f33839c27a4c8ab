#!/usr/bin/env bash
# Run the ready-made sweeps of experiments/sweeps/ and write results/sweeps/:
# per sweep trials.csv (with each point's settings), summary.csv (one row
# per point, with the theory's crash-gap bound beside the measured gaps and
# false-eviction rates), dial.svg and histograms.svg; plus README.md and
# host.json for the machine it ran on.
#
#   scripts/sweeps.sh                 time scale 0.1
#   SCALE=0.05 scripts/sweeps.sh      faster, coarser
set -euo pipefail
cd "$(dirname "$0")/.."

scale=${SCALE:-0.1}
out=${OUT:-results/sweeps}
exec scripts/run-suite.sh experiments/sweeps/ "$out" --time-scale "$scale" "$@"
