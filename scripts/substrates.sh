#!/usr/bin/env bash
# Run experiments/substrates/ (the same faults on every substrate: kill,
# term, pause past the lease, zero-byte and corrupt lock files where there
# is one; server pause and restart against a harness-managed Redis) and
# write results/substrates/ with README.md (the substrate × fault table and
# operation latencies) and host.json.
#
# Needs the local Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432,
# database test) and redis-server on PATH; see README, "Substrates".
#
#   scripts/substrates.sh              time scale 0.1 (~6 min here)
#   SCALE=1 scripts/substrates.sh      real time (~1 h)
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${SCALE:-0.1}
out=${OUT:-results/substrates}
exec scripts/run-suite.sh experiments/substrates/ "$out" --time-scale "$scale" "$@"
