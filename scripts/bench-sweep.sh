#!/usr/bin/env bash
# Benchmark: the 12-point x 10-trial sweep of benches/sweep-12x10.yaml at
# time scale 0.05, with --jobs 8 and with --jobs 1, timed with bash's
# `time`; prints both runs' per-point crash-gap medians side by side.
# Output: /tmp/leasequake-bench/{jobs8,jobs1}/ (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
out=${OUT:-/tmp/leasequake-bench}
rm -rf "$out"
for jobs in 8 1; do
    echo "== --jobs $jobs"
    time ./target/release/leasequake sweep benches/sweep-12x10.yaml --time-scale 0.05 --jobs "$jobs" \
        --out "$out/jobs$jobs" -q > "$out.jobs$jobs.txt"
done
echo "== crash-gap median per point (ms): jobs 8 | jobs 1 | difference"
col() { awk -F, -v name=crash_gap_p50_ms 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next } { print $1 "," $c }' "$1"; }
paste -d, <(col "$out/jobs8/summary.csv") <(col "$out/jobs1/summary.csv" | cut -d, -f2) |
    awk -F, '{ printf "%-45s %9.3f %9.3f %+8.3f\n", $1, $2, $3, $2 - $3 }'
