#!/usr/bin/env bash
# The test suite. The tests run real servers (Redis, PostgreSQL and etcd, which
# the harness starts itself), a real browser for the report pages, Python
# for the example programs and the schema check: whatever of that this machine lacks is installed with
# apt-get (as root), or named in one message. Then `cargo test`, with any
# arguments given here.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v etcd >/dev/null || missing+=(etcd-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null || missing+=(postgresql)
command -v chromium >/dev/null || missing+=(chromium)
command -v python3 >/dev/null || missing+=(python3)
python3 -c 'import jsonschema' 2>/dev/null || missing+=(python3-jsonschema)

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
exec cargo test "$@"
