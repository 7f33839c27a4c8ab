#!/usr/bin/env bash
# Shared by the result scripts: build, then run every experiment of a
# directory into a fresh output directory (its README.md table and
# host.json included).
#
#   scripts/run-suite.sh EXPERIMENT_DIR OUT [leasequake run arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
experiments=$1 out=$2
shift 2
cargo build --release --quiet
# No more trials at once than cores, unless the caller says otherwise: a
# committed result must not be one the machine disturbed (trials that
# wait for a CPU stall their operations; docs/metrics.md, "Disturbed
# trials"), and each experiment's `jobs:` above that is for a bigger machine;
# one below it (a thousand workers a trial) stands.
jobs=()
case " $* " in *" --jobs "*) ;; *) jobs=(--max-jobs "$(nproc)") ;; esac
# The directory is the script's output: start it afresh.
rm -rf "$out"
exec ./target/release/leasequake run "$experiments" --out "$out" "${jobs[@]}" "$@"
