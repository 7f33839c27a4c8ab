#!/usr/bin/env bash
# Run experiments/substrates/ (the same faults on every substrate: kill,
# term, pause past the lease, zero-byte and corrupt lock files where there
# is one; server pause and restart against a managed Redis and PostgreSQL)
# and write results/substrates/ with README.md (the substrate × fault table
# and operation latencies) and host.json.
#
# The servers are the harness's own (managed: true): only their binaries
# are needed (scripts/test.sh installs them); see README, "Substrates".
#
#   scripts/substrates.sh              time scale 0.1
#   SCALE=1 scripts/substrates.sh      real time
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${SCALE:-0.1}
out=${OUT:-results/substrates}
exec scripts/run-suite.sh experiments/substrates/ "$out" --time-scale "$scale" "$@"
