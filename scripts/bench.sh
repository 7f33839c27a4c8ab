#!/usr/bin/env bash
# Benchmarks of the instrument itself, written to results/bench/README.md
# with the host and build they ran on; the calibration's figures also as
# calibration.csv (and calibration-ordinary.csv, without real-time
# scheduling), the others as figures.csv (figure, value): the README's
# figures are held to these. Public tools only: bash, GNU time
# (/usr/bin/time), /proc.
#
#   scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/bench}
cargo build --release --quiet
bin=./target/release/leasequake
# Its own files only: history/ is scripts/bench-history.sh's.
mkdir -p "$out"
find "$out" -mindepth 1 -maxdepth 1 ! -name history -exec rm -rf {} +
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
now() { date +%s%N; }
# figure NAME VALUE: one row of figures.csv (the name carries the unit).
echo "figure,value" > "$out/figures.csv"
figure() { echo "$1,$2" >> "$out/figures.csv"; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) / 1e6 }'; }

# orchestrator_cpu NAME DIR SECONDS: once the 1000 workers of the run of
# benches/NAME.yaml (results in DIR) are up, the orchestrator's own CPU
# (utime + stime) over SECONDS, in % of one core; sets CPU and PEAK_MB.
orchestrator_cpu() {
    local name=$1 dir=$2 secs=$3 pid n a b
    CPU="not measured" PEAK_MB="?"
    sleep 1
    pid=$(pgrep -n -f "leasequake run benches/$name.yaml" || true)
    for _ in $(seq 120); do
        n=$(pgrep -c -f "worker --config $dir" || true)
        [ "${n:-0}" -ge 1000 ] && break
        sleep 0.25
    done
    sleep 1
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 0
    a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    sleep "$secs"
    b=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo "$a")
    PEAK_MB=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status" 2>/dev/null || echo "?")
    CPU=$(awk -v a="$a" -v b="$b" -v hz="$(getconf CLK_TCK)" -v s="$secs" 'BEGIN { printf "%.1f", (b - a) / hz / s * 100 }')
}

{
echo "# leasequake benchmarks"
echo
echo "Produced by \`scripts/bench.sh\` on $(hostname) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, kernel $(uname -r)) at $(date -u +%Y%m%dT%H%M%SZ) UTC, $($bin --version)."
echo

echo "## Calibration (\`leasequake calibrate --load\`)"
echo
echo "As the machine is, then with a CPU hog per core (processes spinning at ordinary priority, as \`yes > /dev/null\`), started and stopped by the calibration itself."
echo
echo '```'
$bin calibrate --load --csv "$out/calibration.csv"
echo '```'
echo
echo "## What real-time scheduling buys (\`LEASEQUAKE_REALTIME=off leasequake calibrate --load\`)"
echo
echo "The same measurement with the harness's timing threads, its targets and the built-in worker's release at ordinary priority, as before real-time scheduling was used; its side-by-side table only:"
echo
LEASEQUAKE_REALTIME=off $bin calibrate --load --csv "$out/calibration-ordinary.csv" | sed -n '/^# Side by side/,$p' | tail -n +2
echo

echo "## The 30 × 30 election race"
echo
t0=$(now)
$bin run experiments/blog/excl-race.yaml -q --no-calibrate --out "$scratch/race" >/dev/null
t1=$(now)
echo "experiments/blog/excl-race.yaml (30 trials × 30 workers, one-shot, 300 ms each, --jobs 1): $(ms "$t0" "$t1") ms in all."
figure race_30x30_ms "$(ms "$t0" "$t1")"
t0=$(now)
$bin run experiments/blog/excl-race.yaml --jobs 4 -q --no-calibrate --out "$scratch/race4" >/dev/null
t1=$(now)
echo "The same with --jobs 4: $(ms "$t0" "$t1") ms."
figure race_30x30_jobs4_ms "$(ms "$t0" "$t1")"
echo

echo "## 1000 idle workers, one trial (60 s at time scale 0.1)"
echo
/usr/bin/time -f '%M %e %U %S' -o "$scratch/time" $bin run benches/thousand-idle.yaml --time-scale 0.1 -q --no-calibrate --out "$scratch/idle" >/dev/null &
orchestrator_cpu thousand-idle "$scratch/idle" 2
idle_cpu=$CPU
wait
read -r rss elapsed user sys < "$scratch/time"
spawn_ms=$(awk -F, '$5 == "spawn" { t[NR] = $2 } END { min = 1e18; max = -1e18; for (i in t) { if (t[i] < min) min = t[i]; if (t[i] > max) max = t[i] } printf "%.0f", max - min }' "$scratch/idle/events.csv")
# Reap: from the trial's end (SIGTERM to all, grace, SIGKILL) to the last
# death observed.
reap_ms=$(awk -F, '$5 == "trial_end" { end = $2 } $5 == "exit" && $2 > last { last = $2 } END { printf "%.0f", last - end }' "$scratch/idle/events.csv")
events=$(($(wc -l < "$scratch/idle/events.csv") - 1))
echo "| figure | value |"
echo "|---|---|"
echo "| peak RSS (largest of the orchestrator and its workers, GNU time) | $((rss / 1024)) MB |"
echo "| orchestrator CPU while the workers renew and watch (2 s sample) | ${idle_cpu} % of one core |"
echo "| spawning 1000 workers (first to last spawn) | ${spawn_ms} ms for 1000, i.e. ${spawn_ms} µs per worker |"
echo "| reaping them (trial end → last death observed: SIGTERM, release, exit) | ${reap_ms} ms for 1000, i.e. ${reap_ms} µs per worker |"
echo "| wall time, user, system | ${elapsed} s, ${user} s, ${sys} s |"
echo "| events recorded | ${events} |"
figure idle_peak_rss_mb $((rss / 1024))
figure idle_orchestrator_cpu_pct "$idle_cpu"
figure spawn_1000_ms "$spawn_ms"
figure reap_1000_ms "$reap_ms"
echo

echo "## 1000 quiet workers (the blog's pace, real time)"
echo
$bin run benches/thousand-quiet.yaml -q --no-calibrate --out "$scratch/quiet" >/dev/null &
orchestrator_cpu thousand-quiet "$scratch/quiet" 10
quiet_cpu=$CPU rss_q=$PEAK_MB
wait
echo "Orchestrator alone, over 10 s with all 1000 workers up: ${quiet_cpu} % of one core; its peak RSS ${rss_q} MB."
figure quiet_orchestrator_cpu_pct "$quiet_cpu"
figure quiet_orchestrator_peak_rss_mb "$rss_q"
echo

echo "## Event ingest: 1000 chatty programs"
echo
/usr/bin/time -f '%M %e' -o "$scratch/time2" $bin run benches/thousand-chatty.yaml -q --no-calibrate --out "$scratch/chatty" >/dev/null
read -r rss2 _ < "$scratch/time2"
span=$(awk -F, 'NR > 1 && $5 == "held_by" { n++; if (min == "" || $2 < min) min = $2; if ($2 > max) max = $2 } END { printf "%d %.0f %.0f", n, max - min, n / ((max - min) / 1000) }' "$scratch/chatty/events.csv")
read -r ingested ingest_ms ingest_rate <<< "$span"
rate="$ingested events in $ingest_ms ms: $ingest_rate events/s"
figure ingest_events_per_s "$ingest_rate"
figure ingest_peak_rss_mb $((rss2 / 1024))
echo "1000 programs × 1000 protocol lines, written as fast as they can, each stamped by the harness when it has it (\`timestamps: receipt\`): ${rate} (first to last event received); peak RSS $((rss2 / 1024)) MB. Readers hand over the lines already buffered as one batch (up to 32), and at most 2048 messages wait for the trial loop: a program that writes faster than the harness takes its lines is slowed down, the harness's memory is not."
echo

echo "## Memory against events"
echo
echo "A trial's events are written as they come, each held only until no"
echo "earlier one can still arrive (2 s, or 65,536 events, whichever is less),"
echo "and the trial is checked from its file an instant at a time: a run's"
echo "memory does not grow with its trials' length. Peak RSS (GNU time) of the"
echo "chatty run with fewer lines per program, and of ten trials in a row:"
echo
echo "| run | events | peak RSS |"
echo "|---|---|---|"
memory_run() { # LINES TRIALS
    sed "s/\"1000\", --interval-us/\"$1\", --interval-us/" benches/thousand-chatty.yaml > "$scratch/chatty-$1.yaml"
    /usr/bin/time -f '%M' -o "$scratch/time-$1-$2" $bin run "$scratch/chatty-$1.yaml" --trials "$2" -q --no-calibrate --out "$scratch/chatty-$1-$2" >/dev/null
    n=$(awk -F, 'NR > 1 && $5 == "held_by"' "$scratch/chatty-$1-$2/events.csv" | wc -l)
    echo "| 1000 programs × $1 lines, $2 trial(s) | $n | $(($(cat "$scratch/time-$1-$2") / 1024)) MB |"
    figure "memory_${1}_lines_${2}_trials_peak_rss_mb" $(($(cat "$scratch/time-$1-$2") / 1024))
}
memory_run 10 1
memory_run 100 1
memory_run 300 1
echo "| 1000 programs × 1000 lines, 1 trial (above) | 1000000 | $((rss2 / 1024)) MB |"
memory_run 100 10
# What an event costs the run's peak: its growth from 10 to 1000 lines a
# program, over the events it added (the flood's hold, not the history).
figure bytes_per_event "$(awk -v a="$(cat "$scratch/time-10-1")" -v b="$rss2" 'BEGIN { printf "%.0f", (b - a) * 1024 / (1000000 - 10000) }')"
echo
echo "The peak's growth from 10 to 1000 lines a program: about $(tail -n 1 "$out/figures.csv" | cut -d, -f2) B an event added, the events a flood holds while they wait, whatever the trial's length."
} > "$out/README.md"
cat "$out/README.md"
