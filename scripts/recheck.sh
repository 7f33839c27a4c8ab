#!/usr/bin/env bash
# Re-derive committed results from their recorded histories with this build,
# after a change to the checker alone (how a history is judged, not how
# trials run): `leasequake check DIR --in-place` for each suite or results
# directory named. Every table, plot and page is rewritten from events.csv,
# a suite's README.md says which build re-checked it, and checked.json
# records that build beside host.json's record of the run. A change to what
# the harness does reruns the suite's own script instead, as does a suite
# run with --shrink (refused here: its shrinks were runs of their own).
#
#   scripts/recheck.sh results/blog results/etcd
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# = 0 ]; then
    echo "error: name the results to re-check: scripts/recheck.sh results/<suite>..." >&2
    exit 2
fi
# shellcheck source=scripts/lib/results-dirs.sh
. scripts/lib/results-dirs.sh
results_dirs "$@"
cargo build --release --quiet
for dir in "$@"; do
    ./target/release/leasequake check "$dir" --in-place
done
