#!/usr/bin/env bash
# Run experiments/etcd/ (SIGKILL, SIGTERM, a pause and a partition of the
# leader, on etcd, Redis and PostgreSQL, each watched by polling and by
# push) and write results/etcd/ with README.md (per experiment: polling
# against push per substrate, and the blog's last claim, that a push
# "removes the watch interval entirely", with its verdict) and host.json.
#
# Real time, the blog's lease (9 s, renewed and watched every 3 s): etcd's
# TTLs are whole seconds, and its lessor's 500 ms loop does not scale. The
# servers are the harness's own (managed: true): only their binaries are
# needed (scripts/test.sh installs them).
#
#   scripts/etcd.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/etcd}
exec scripts/run-suite.sh experiments/etcd/ "$out" "$@"
