#!/usr/bin/env bash
# What moving a program's clock costs its clock reads: benches/clock_cost.c
# (dynamic and static) and benches/clock_cost.go run as they are, and as
# programs under test whose clock the harness moves (1 s ahead) by the
# preloaded shim and in their vDSO. Each says, per kind of read, the ns a
# call takes (the least of 7 rounds of a million). Written to
# results/bench/clock/ with the host and build: costs.csv (program, clock,
# figure, ns) and README.md. Installs golang-go (as root, apt-get) where it is missing.
#
#   scripts/clock-cost.sh
#
# Run it on a quiet machine: the figures are tens of nanoseconds.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/bench/clock}
cargo build --release --quiet
bin=./target/release/leasequake
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if ! command -v go >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
fi
cc=${CC:-cc}
$cc -O2 -o "$scratch/dynamic" benches/clock_cost.c
$cc -O2 -static -o "$scratch/static" benches/clock_cost.c
(cd benches && GO111MODULE=off GOFLAGS='' GOCACHE="$scratch/go-cache" go build -o "$scratch/go" clock_cost.go)

new=$scratch/out
mkdir -p "$new"
echo "program,clock,figure,ns" >"$new/costs.csv"
# One program as it is (its stdin closed at once), then under the harness
# with its clock moved `how` (shim or vdso).
measure() {
    local program=$1 how=$2 log
    if [ "$how" = none ]; then
        log=$scratch/$program-none.log
        "$scratch/$program" </dev/null >"$log" &
        local p=$!
        local waited=0
        until grep -q '^cost ' "$log" 2>/dev/null && [ "$(grep -c '^cost ' "$log")" -ge "$3" ]; do
            if ! kill -0 "$p" 2>/dev/null || [ "$waited" -ge 600 ]; then
                echo "error: $program did not measure" >&2
                exit 1
            fi
            sleep 0.2
            waited=$((waited + 1))
        done
        kill -TERM "$p"
        wait "$p" || true
    else
        cat >"$scratch/$program-$how.yaml" <<EOF
name: clock-cost-$program-$how
workers: 1
duration: 20s
seed: 1
worker: {clock_offset: [1s]}
program:
  command: ["$scratch/$program"]
  clock: $how
EOF
        $bin run "$scratch/$program-$how.yaml" -q --no-calibrate --out "$scratch/run-$program-$how" >/dev/null
        log=$scratch/run-$program-$how/trials/0001/worker-00.log
        ! grep -q "clock not moved" "$scratch/run-$program-$how/trials.csv" || {
            echo "error: $program's clock was not moved by $how:" >&2
            cat "$scratch/run-$program-$how/trials.csv" >&2
            exit 1
        }
    fi
    awk -v p="$program" -v h="$how" '$1 == "cost" { print p "," h "," $2 "," $3 }' "$log" >>"$new/costs.csv"
}
for how in none shim vdso; do measure dynamic "$how" 5; done
for how in none vdso; do measure static "$how" 5; done
for how in none vdso; do measure go "$how" 1; done

cost() { awk -F, -v p="$1" -v h="$2" -v f="$3" '$1 == p && $2 == h && $3 == f { print $4 }' "$new/costs.csv"; }
{
echo "# What a moved clock costs a clock read"
echo
echo "Produced by \`scripts/clock-cost.sh\` on $(hostname) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, kernel $(uname -r)) at $(date -u +%Y%m%dT%H%M%SZ) UTC, $($bin --version), $(go version | cut -d' ' -f3)."
echo
echo "ns a call, the least of 7 rounds of a million calls ([benches/clock_cost.c](../../../benches/clock_cost.c), [benches/clock_cost.go](../../../benches/clock_cost.go)): the program run as it is, and as a program under test whose wall clock the harness moves 1 s ahead by the preloaded shim or in its vDSO. costs.csv has every figure."
echo
echo "| read | as it is | shim | vDSO | static, as it is | static, vDSO |"
echo "|---|---|---|---|---|---|"
for f in clock_gettime_realtime clock_gettime_monotonic gettimeofday time system_call; do
    echo "| \`$f\` | $(cost dynamic none $f) | $(cost dynamic shim $f) | $(cost dynamic vdso $f) | $(cost static none $f) | $(cost static vdso $f) |"
done
echo
echo "| Go | as it is | vDSO |"
echo "|---|---|---|"
echo "| \`time.Now()\` | $(cost go none go_time_now) | $(cost go vdso go_time_now) |"
} >"$new/README.md"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
cp -r "$new" "$out"
cat "$out/README.md"
