#!/usr/bin/env bash
# Shrink what surprised us in results/clients/ (scripts/clients.sh) to
# minimal experiments: for each case below, the first undisturbed trial of
# that library's sweep point in which two workers believed they led, taken
# by `leasequake shrink --point` to the fewest faults at the simplest
# moments and the shortest pause or outage that still does it, then
# confirmed on 20 fresh seeds. Each lands in results/clients/shrunk/<case>/
# (shrunk.yaml runs as it is from a clone, its README says every step);
# results/clients/shrunk/README.md is the index, one row per case.
#
# Run after scripts/clients.sh (which starts results/clients/ afresh, these
# included); stage results/clients/ whole afterwards.
#
#   scripts/clients-shrink.sh
set -euo pipefail
cd "$(dirname "$0")/.."
src=${SRC:-results/clients}
out=$src/shrunk
[ -f "$src/README.md" ] || { echo "error: $src: no results; run scripts/clients.sh first" >&2; exit 2; }
scripts/clients-install.sh
cargo build --release --quiet
bin=./target/release/leasequake

# experiment | sweep point | what it shows
cases=(
    "filelock-file|fault=lock-delete|A flock lock is held on the file, not on its name: the lock file deleted under its holder lets the next process lock a new file at the same path (portalocker's Lock does the same)."
    "filelock-lease|fault=pause|SoftFileLease taken from a live holder: paused past lease_duration, its heartbeat stops, a contender takes the lease although the holder's pid is alive, and the holder, resumed, believes on until its next heartbeat finds the owner changed. Only when a contender looks between the lease's end and the holder's resumption."
    "redlock|fault=partition-replies|node-redlock when replies are lost: the leader's extend, sent with no answer coming, returns only once the link heals (past its client's command timeout), and the leader believes until then while the key expires and another acquires it."
    "proper-lockfile|fault=skew|proper-lockfile judges staleness by the contender's wall clock: a watcher whose clock is ahead takes a lock its holder keeps refreshing."
)

rm -rf "$out"
mkdir -p "$out"
rows=()
for c in "${cases[@]}"; do
    IFS='|' read -r exp point what <<<"$c"
    name="$exp-${point#fault=}"
    echo "== $name"
    rc=0
    "$bin" shrink "$src/$exp" --point "$point" --violation double-leader \
        --repeats 4 --need 3 --budget 60 --confirm 20 --jobs 2 --out "$out/$name" || rc=$?
    readme="$out/$name/README.md"
    if [ "$rc" = 1 ]; then
        # The trial's own schedule failed the same way in fewer than 3 of 4
        # runs: nothing to shrink, and that is the finding (its runs kept).
        runs=$(awk -F, 'NR == 2 {print $5 "/" $6}' "$out/$name/steps.csv")
        rows+=("| [$exp]($name/steps.csv) | ${point#fault=} | $what | not shrunk: the recorded schedule failed the same way in $runs runs | |")
        continue
    fi
    [ "$rc" = 0 ] || exit "$rc"
    rate=$(sed -n 's/^- Reproduction rate of the shrunk schedule: //p' "$readme" | sed 's/\*\*//g; s/, fresh seeds//')
    faults=$(sed -n 's/^- Faults: \*\*\(.*\)\*\*\./\1/p' "$readme")
    # The shrunk schedule's rows: | # | when | action | target | length |
    schedule=$(awk -F' *[|] *' '/^## The shrunk schedule/ {on=1; next} /^## / {on=0}
        on && $2 ~ /^[0-9]+$/ {s = s (s ? "; " : "") $4 " " $5 " at " $3 ($6 != "" ? " for " $6 : "")} END {print s}' "$readme")
    rows+=("| [$exp]($name/README.md) | ${point#fault=} | $what | [$schedule]($name/shrunk.yaml) ($faults) | $rate |")
done

{
    echo "# What surprised us, shrunk"
    echo
    echo "Produced by \`scripts/clients-shrink.sh\` on $(hostname) ($(nproc) cores, kernel $(uname -r)), $($bin --version), finished at $(date -u +%Y%m%dT%H%M%SZ) UTC, from the trials of [results/clients](../README.md)."
    echo
    echo "Each case: the first undisturbed trial of the library's sweep point in which two workers believed they led, shrunk by \`leasequake shrink --point\` (a candidate kept when 3 of its 4 runs did the same; at most 60 trials), then run on 20 fresh seeds. The schedule is in the experiment's own time; \`shrunk.yaml\` runs it as it is (\`leasequake run results/clients/shrunk/<case>/shrunk.yaml\`, after \`scripts/clients-install.sh\`); each case's README lists every step."
    echo
    echo "| library | fault | what it shows | shrunk schedule (faults before → after) | reproduced on fresh seeds |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} >"$out/README.md"
echo "wrote $out/README.md"
