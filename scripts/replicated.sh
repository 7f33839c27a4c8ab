#!/usr/bin/env bash
# Run experiments/replicated/ (a lease service that splits: a Redis primary
# and the leader cut off from the replica, the Sentinels and the other
# workers) and write results/replicated/ with README.md (double grants,
# double believers, gaps, and the theory beside them) and host.json.
#
# Real time, the blog's lease (9 s, renewed and watched every 3 s): the
# Sentinels' timers do not scale. Every server is the harness's own, one
# service per trial, each member and Sentinel on a loopback address of its
# own (127.0.0.11…, 127.0.0.21…); only redis-server is needed.
#
#   scripts/replicated.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/replicated}
exec scripts/run-suite.sh experiments/replicated/ "$out" "$@"
