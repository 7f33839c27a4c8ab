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
# A suite whose expectations the new judgement fails (exit 1) is still
# re-derived, and the next one too: the script ends with 1 and says which.
failed=()
for dir in "$@"; do
    status=0
    ./target/release/leasequake check "$dir" --in-place || status=$?
    case $status in
        0) ;;
        1) failed+=("$dir") ;;
        *) exit "$status" ;;
    esac
done
if ((${#failed[@]})); then
    echo "recheck.sh: re-derived, but expectations now fail in: ${failed[*]}" >&2
    exit 1
fi
