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
# The directory is the script's output: start it afresh.
rm -rf "$out"
exec ./target/release/leasequake run "$experiments" --out "$out" "$@"
