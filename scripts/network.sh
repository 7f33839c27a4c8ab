#!/usr/bin/env bash
# Run experiments/network/ (a partitioned leader, lost replies, delay and
# reset on the links between the workers and their Redis or PostgreSQL,
# under the blog's belief and a local deadline) and write
# results/network/ with README.md (per experiment: two leaders, stale
# belief, orphaned grants, gaps, the local deadline's theory) and host.json
# (with the proxy's own round trip).
#
# Needs the local Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432,
# database test); see README, "Network faults".
#
#   scripts/network.sh              time scale 0.1 (~7 min here)
#   SCALE=1 scripts/network.sh      real time (~1 h)
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${SCALE:-0.1}
out=${OUT:-results/network}
exec scripts/run-suite.sh experiments/network/ "$out" --time-scale "$scale" "$@"
