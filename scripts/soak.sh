#!/usr/bin/env bash
# A real soak at real time, measured: experiments/soak/soak.yaml (100
# built-in workers on the blog's lease under a Poisson campaign) run for
# SOAK_DURATION (default 60m; the experiment itself is a day), its harness
# sampled every SAMPLE seconds (default 10): resident memory, CPU time, the
# running trial's events file; halfway through, `leasequake report --out`
# reads the live directory. Written to results/bench/soak/ with the host
# and build: samples.csv, figures.csv (figure, value) and README.md. The
# run's own results stay in a temporary directory (their history is tens of
# MB an hour; nothing of it is committed but the figures).
#
#   scripts/soak.sh
#   SOAK_DURATION=5m SAMPLE=5 scripts/soak.sh   a short try
#
# Run it on a quiet machine: the figures are the harness's, and another
# job's load would show in them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/bench/soak}
duration=${SOAK_DURATION:-60m}
sample=${SAMPLE:-10}
cargo build --release --quiet
bin=./target/release/leasequake
scratch=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT
# Written aside and moved into place at the end: a soak that fails keeps
# the results there were.
new=$scratch/out
mkdir -p "$new"
sed "s/^duration: .*/duration: $duration/" experiments/soak/soak.yaml >"$scratch/soak.yaml"
run=$scratch/run
events=$run/trials/0001/events.csv
hz=$(getconf CLK_TCK)
started=$(date +%s)
$bin run "$scratch/soak.yaml" -q --out "$run" >"$scratch/summary.txt" 2>"$scratch/stderr" &
pid=$!
cpu_s() { awk -v hz="$hz" '{ sub(/^.*\) /, ""); printf "%.1f", ($12 + $13) / hz }' "/proc/$pid/stat"; }
echo "elapsed_s,rss_mb,cpu_s,events_mb" >"$new/samples.csv"
half=$(( $($bin plan "$scratch/soak.yaml" | awk '/1 trial of/ { sub(/s;.*/, "", $4); print int($4) }') / 2 ))
live=""
while kill -0 "$pid" 2>/dev/null; do
    now=$(( $(date +%s) - started ))
    rss=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] || break
    size=$(stat -c %s "$events" 2>/dev/null || echo 0)
    echo "$now,$rss,$(cpu_s),$(awk -v b="$size" 'BEGIN { printf "%.2f", b / 1048576 }')" >>"$new/samples.csv"
    if [ -z "$live" ] && [ "$now" -ge "$half" ]; then
        t0=$(date +%s%N)
        if $bin report "$run" --out "$scratch/live.html" >/dev/null 2>"$scratch/live.err"; then
            live=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
        else
            live="failed: $(head -c 300 "$scratch/live.err")"
        fi
        live_at=$now live_mb=$(awk -v b="$(stat -c %s "$events")" 'BEGIN { printf "%.1f", b / 1048576 }')
    fi
    sleep "$sample"
done
set +e
wait "$pid"
rc=$?
pid=
set -e
[ "$rc" -eq 0 ] || { echo "error: the soak exited $rc:" >&2; cat "$scratch/stderr" >&2; exit 1; }
wall=$(( $(date +%s) - started ))
n=$(awk -F, 'NR > 1' "$run/events.csv" | wc -l)
bytes=$(stat -c %s "$run/events.csv")
# trials.csv's fields may hold commas inside quotes: read as CSV.
trial=$(python3 -c 'import csv, sys; r = next(csv.DictReader(open(sys.argv[1]))); print("\t".join(r[c] for c in ("outcome", "disturbed", "gaps", "max_leaders")))' "$run/trials.csv")
IFS=$'\t' read -r outcome disturbed gaps max_leaders <<<"$trial"
faults=$(awk -F, 'NR > 1' "$run/faults.csv" | wc -l)
figure() { echo "$1,$2" >>"$new/figures.csv"; }
echo "figure,value" >"$new/figures.csv"
peak=$(awk -F, 'NR > 1 && $2 > m { m = $2 } END { print m }' "$new/samples.csv")
# The memory once the workers are up (the first minute) against the end.
early=$(awk -F, 'NR > 1 && $1 >= 60 { print $2; exit }' "$new/samples.csv")
last=$(tail -n 1 "$new/samples.csv" | cut -d, -f2)
cpu=$(tail -n 1 "$new/samples.csv" | cut -d, -f3)
figure soak_s "$wall"
figure events "$n"
figure events_per_s "$(awk -v n="$n" -v s="$wall" 'BEGIN { printf "%.1f", n / s }')"
figure events_csv_mb "$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
figure bytes_per_event "$(awk -v b="$bytes" -v n="$n" 'BEGIN { printf "%.0f", b / n }')"
figure peak_rss_mb "$peak"
figure rss_after_1m_mb "${early:-$last}"
figure rss_at_end_mb "$last"
figure orchestrator_cpu_pct "$(awk -v c="$cpu" -v s="$wall" 'BEGIN { printf "%.2f", 100 * c / s }')"
figure faults "$faults"
figure live_report_s "${live%% *}"
{
echo "# A soak at real time"
echo
echo "Produced by \`scripts/soak.sh\` on $(hostname) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, kernel $(uname -r)) at $(date -u +%Y%m%dT%H%M%SZ) UTC, $($bin --version)."
echo
echo "[experiments/soak/soak.yaml](../../../experiments/soak/soak.yaml) for $duration instead of its day: 100 built-in workers on the blog's lease (9 s, renewed and watched every 3 s), a Poisson campaign ($faults faults delivered). The harness sampled every $sample s (samples.csv)."
echo
echo "| | |"
echo "|---|---|"
echo "| wall time | $wall s |"
echo "| events recorded | $n ($(awk -v n="$n" -v s="$wall" 'BEGIN { printf "%.1f", n / s }') a second) |"
echo "| events.csv | $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MB, $(awk -v b="$bytes" -v n="$n" 'BEGIN { printf "%.0f", b / n }') B an event |"
echo "| harness resident memory | ${early:-$last} MB after a minute, $last MB at the end, $peak MB at its peak |"
echo "| harness CPU | $cpu s, $(awk -v c="$cpu" -v s="$wall" 'BEGIN { printf "%.2f", 100 * c / s }') % of one core |"
echo "| the live page (\`report --out\`) at ${live_at:-?} s, ${live_mb:-?} MB of events | ${live:-not taken} s |"
echo "| the trial | $outcome; gaps $gaps, max leaders $max_leaders, disturbed: ${disturbed:-no} |"
echo
echo "The run's summary:"
echo
echo '```'
grep -v '^  results: ' "$scratch/summary.txt"
echo '```'
} >"$new/README.md"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
cp -r "$new" "$out"
cat "$out/README.md"
