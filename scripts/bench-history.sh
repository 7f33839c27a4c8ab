#!/usr/bin/env bash
# The checker against a history's length, written to
# results/bench/history/README.md and history.csv with the host and build:
# for a synthetic soak's history (benches/history.rs: 1000 workers on the
# blog's lease, the leader paused past its lease about once a minute; with
# fewer, 10^8 events would last longer than a trial may) of
# 10^5 to 10^8 events, `leasequake check`'s wall time (the fastest of
# three), the events it checked a second, and its peak RSS (GNU time). The histories are made
# in a temporary directory and removed; none is committed.
#
#   scripts/bench-history.sh            10^5, 10^6, 10^7, 10^8
#   POWERS="5 6" scripts/bench-history.sh   only these
#
# A size whose check would not fit in this machine's memory (judged from
# the largest one measured, as peak RSS grows with the history) is not run,
# and the README says so and why.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/bench/history}
powers=${POWERS:-5 6 7 8}
workers=1000
cargo build --release --quiet
bin=./target/release/leasequake
# The generator, built as a bench target; cargo names its executable.
gen=$(cargo bench --bench history --no-run --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*history[^"]*"' | tail -n 1 | cut -d'"' -f4 || true)
[ -x "$gen" ] || { echo "error: the history generator (benches/history.rs) did not build" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Written aside and moved into place at the end: a run that fails keeps the
# results there were.
new=$scratch/out
mkdir -p "$new"
echo "events,workers,history_mb,check_s,events_per_s,peak_rss_mb" >"$new/history.csv"
available_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
rows=()
# Until a size is measured, the peak is judged at 1 kB an event (about
# twice what a check holds).
last_events=1000 last_rss_kb=1
for p in $powers; do
    n=$(awk -v p="$p" 'BEGIN { printf "%.0f", 10 ^ p }')
    # Peak RSS grows with the events: from the largest run so far.
    need_kb=$(awk -v r="$last_rss_kb" -v a="$last_events" -v b="$n" 'BEGIN { printf "%.0f", r * b / a }')
    if ((need_kb > available_kb * 9 / 10)); then
        rows+=("| 10^$p | not run: its check would need about $((need_kb / 1024 / 1024)) GB, this machine has $((available_kb / 1024 / 1024)) GB available | | |")
        continue
    fi
    dir=$scratch/h$p
    "$gen" "$dir" "$n" "$workers" >/dev/null
    events=$(($(wc -l <"$dir/events.csv") - 1))
    size_mb=$(du -m "$dir/events.csv" | cut -f1)
    # The fastest of three checks (one for 10^8): this machine's CPU time
    # varies from run to run by a fifth; the peak RSS is the largest seen.
    runs=$((p >= 8 ? 1 : 3))
    secs="" rss_kb=0
    for _ in $(seq "$runs"); do
        rm -rf "$scratch/checked-$p"
        if ! /usr/bin/time -f '%M %e' -o "$scratch/time" "$bin" check "$dir" --out "$scratch/checked-$p" \
            >/dev/null 2>"$scratch/check.err"; then
            echo "error: check of 10^$p events failed:" >&2
            cat "$scratch/check.err" "$scratch/time" >&2
            exit 1
        fi
        read -r run_kb run_s < <(tail -n 1 "$scratch/time")
        rss_kb=$((run_kb > rss_kb ? run_kb : rss_kb))
        secs=$(awk -v a="$secs" -v b="$run_s" 'BEGIN { print (a == "" || b < a) ? b : a }')
    done
    rate=$(awk -v n="$events" -v s="$secs" 'BEGIN { printf "%.0f", n / (s > 0 ? s : 0.01) }')
    echo "$events,$workers,$size_mb,$secs,$rate,$((rss_kb / 1024))" >>"$new/history.csv"
    rows+=("| $events | $secs s | $rate | $((rss_kb / 1024)) MB |")
    last_events=$events last_rss_kb=$rss_kb
    rm -rf "$dir" "$scratch/checked-$p"
done

{
    echo "# The checker against a history's length"
    echo
    echo "Produced by \`scripts/bench-history.sh\` on $(hostname) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $((available_kb / 1024 / 1024)) GB available, kernel $(uname -r)) at $(date -u +%Y%m%dT%H%M%SZ) UTC, $($bin --version)."
    echo
    echo "One trial of a synthetic soak (\`benches/history.rs\`): $workers workers on the blog's lease (9 s, renewed and"
    echo "watched every 3 s), the leader paused past its lease at Poisson moments about once a minute; checked with"
    echo "\`leasequake check DIR --out OUT\` (reading events.csv, the checker, the tables and pages written), the"
    echo "fastest of three checks (one for 10^8) with the largest peak RSS of them. history.csv has the same figures."
    echo
    echo "| events | check | events a second | peak RSS |"
    echo "|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "A trial is checked as it is read, an instant at a time: what the checker holds is what is still open (the"
    echo "current holders, open gaps, grants and requests still to end or settle, the theory's predictions still to"
    echo "make) and what it reports (a gap, a tenure, a pause each; latencies counted by value), not the history."
} >"$new/README.md"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$new" "$out"
cat "$out/README.md"
