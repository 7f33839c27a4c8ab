#!/usr/bin/env bash
# Run experiments/clients/ (the lock libraries people use, each through its
# adapter in examples/clients/, under each fault of its schedule alone: kill,
# SIGTERM, a pause past the lease, a deleted and a stale lock file or a
# partition and lost replies, a skewed clock where the library reads the
# wall clock) and write results/clients/ with README.md (a library per row,
# a fault per column) and host.json.
#
# The libraries are installed first, pinned, into .clients/
# (scripts/clients-install.sh); the servers are the harness's own.
#
#   scripts/clients.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/clients-install.sh
out=${OUT:-results/clients}
exec scripts/run-suite.sh experiments/clients/ "$out" "$@"
