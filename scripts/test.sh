#!/usr/bin/env bash
# The test suite. The tests run real servers (Redis, PostgreSQL and etcd, which
# the harness starts itself), a real browser for the report pages, Python
# for the example programs and the schema check, GNU parallel, shellcheck and
# kubernetes-validate for deploy/: whatever of that this machine lacks is
# installed with apt-get (as root) or pip, or named in one message. Then
# the tests of one tier:
#
#   scripts/test.sh          the fast tier (the README's test command): unit
#                            tests and tests/integration/
#   scripts/test.sh --slow   the slow tier: tests/slow/ (real-time runs,
#                            campaigns, races that need many trials, each
#                            lock library of examples/clients/, installed
#                            first by scripts/clients-install.sh; the Slurm
#                            scripts on a real one-node Slurm, which
#                            scripts/slurm-cluster.sh installs and runs)
#
# Either way, the tier's `alone::` tests run last, one at a time: each
# measures against a tight tolerance and needs the machine to itself.
# One test: `cargo test --test integration NAME` (or `--test slow`).
set -euo pipefail
cd "$(dirname "$0")/.."

case "$*" in
    "") tier=integration ;;
    --slow) tier=slow ;;
    *) echo "error: scripts/test.sh takes no argument or --slow, not: $*" >&2; exit 2 ;;
esac

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v etcd >/dev/null || missing+=(etcd-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null || missing+=(postgresql)
command -v chromium >/dev/null || missing+=(chromium)
command -v python3 >/dev/null || missing+=(python3)
python3 -c 'import jsonschema' 2>/dev/null || missing+=(python3-jsonschema)
command -v shellcheck >/dev/null || missing+=(shellcheck)
command -v parallel >/dev/null || missing+=(parallel)
if ! python3 -c 'import kubernetes_validate' 2>/dev/null && ! python3 -m pip --version >/dev/null 2>&1; then
    missing+=(python3-pip)
fi

if ((${#missing[@]})); then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "error: the tests need the Debian packages ${missing[*]}: apt-get install ${missing[*]} (as root)" >&2
        exit 1
    fi
    echo "test.sh: installing ${missing[*]}"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
        echo "error: could not install ${missing[*]} with apt-get; the tests need them" >&2
        exit 1
    fi
fi
# The Kubernetes API's schemas, checked offline: a PyPI package, not Debian's.
if ! python3 -c 'import kubernetes_validate' 2>/dev/null; then
    echo "test.sh: installing kubernetes-validate with pip"
    python3 -m pip install --quiet kubernetes-validate 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages kubernetes-validate || {
        echo "error: could not install kubernetes-validate with pip; the deploy tests need it" >&2
        exit 1
    }
fi
# The slow tier runs each lock library's adapter once (examples/clients/):
# the libraries, pinned, in .clients/.
# It also submits deploy/slurm/ to a real one-node Slurm cluster of its own
# (Debian's slurmctld, slurmd and munge).
if [ "$tier" = slow ]; then
    scripts/clients-install.sh
    scripts/slurm-cluster.sh install
fi
# A timing test that cannot judge on this machine at this moment says
# `SKIPPED:` and why (tests/helper/machine.rs), and adds a line here.
skips=$(mktemp)
trap 'rm -f "$skips"' EXIT
export LEASEQUAKE_TEST_SKIPS=$skips
status=0
if [ "$tier" = integration ]; then
    cargo test --workspace -- --skip alone:: || status=$?
else
    cargo test --test slow -- --skip alone:: || status=$?
fi
if [ "$status" = 0 ]; then
    cargo test --test "$tier" -- alone:: --test-threads 1 || status=$?
fi
# A test skipped in several parts (one per substrate) is one test skipped.
skipped=$(awk '/^SKIPPED:/ { sub(/:$/, "", $2); print $2 }' "$skips" | sort -u | wc -l)
if [ "$skipped" -gt 0 ]; then
    echo
    cat "$skips"
fi
# A skip is never silent, and a few are the most a run can take and still
# have tested the timing it is for.
if [ "$status" = 0 ] && [ "$skipped" -gt 2 ]; then
    echo "error: $skipped tests skipped (at most 2): the machine was too busy for their tolerances" >&2
    status=1
fi
exit "$status"
