#!/usr/bin/env bash
# Run experiments/network/ (a partitioned leader, lost replies, delay and
# reset on the links between the workers and their Redis or PostgreSQL,
# under the blog's belief and a local deadline; skewed and slow clocks, a
# program's among them (Python, Go and static C lock-file workers, the
# last two built here first); the renewal storm of a thousand workers) and write
# results/network/ with README.md (per experiment: two leaders, stale
# belief, orphaned grants, the storm's latencies, gaps, the local
# deadline's theory) and host.json (with the proxy's own round trip).
#
# The servers are the harness's own (managed: true): only their binaries
# are needed (scripts/test.sh installs them). Each experiment file sets its
# time scale: 0.1, but the renewal storm runs in real time (a thousand
# workers at a tenth of the time would measure the machine, not the storm).
#
#   scripts/network.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/network}
# The Go and the static C worker are built here, not committed.
examples/go/build.sh
examples/c/build.sh
exec scripts/run-suite.sh experiments/network/ "$out" "$@"
