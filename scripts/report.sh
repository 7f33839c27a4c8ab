#!/usr/bin/env bash
# Write report.html, the page to open, for every committed results suite
# and each of its experiments, from their files alone (`leasequake report`:
# the histories re-checked, the plots and the first trials' timelines
# inline), and keep a screenshot of one as headless chromium renders it:
# results/sweeps/report.png. Needs chromium (apt-get install chromium).
#
#   scripts/report.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
for d in results/blog results/sweeps results/substrates results/fencing; do
    [ -f "$d/README.md" ] && ./target/release/leasequake report "$d"
done
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --user-data-dir="$profile" --window-size=1280,2400 \
    --screenshot="$PWD/results/sweeps/report.png" "file://$PWD/results/sweeps/lease-vs-pauses/report.html" 2>/dev/null
echo "results/sweeps/report.png"
