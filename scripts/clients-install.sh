#!/usr/bin/env bash
# Install the lock libraries examples/clients/ puts under test, pinned, into
# the project's own ignored directory .clients/ (nothing system-wide but
# Debian's packages):
#
#   .clients/python/   a virtual environment from examples/clients/requirements.txt
#                      (every package pinned, dependencies included: --no-deps)
#   .clients/node/     node_modules from examples/clients/package-lock.json (npm ci)
#   .clients/go/bin/   the Go adapters, built offline in GOPATH mode from
#                      Debian's Go packages of etcd (golang-etcd-server-dev)
#
# As root, it apt-get installs what the machine lacks (python3-venv, npm,
# golang-go, golang-etcd-server-dev). Run again, it installs only what
# changed. Then scripts/clients.sh runs the adapters.
#
#   scripts/clients-install.sh [python|node|go]...
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD/.clients
parts=("$@")
((${#parts[@]})) || parts=(python node go)
for part in "${parts[@]}"; do
    case "$part" in python | node | go) ;; *) echo "error: unknown part $part: python, node or go" >&2; exit 2 ;; esac
done

need=()
want() { # want PACKAGE TEST...: the Debian package PACKAGE when TEST fails
    local package=$1
    shift
    "$@" >/dev/null 2>&1 || need+=("$package")
}
for part in "${parts[@]}"; do
    case "$part" in
        python) want python3-venv python3 -c 'import ensurepip, venv' ;;
        node) want nodejs command -v node; want npm command -v npm ;;
        go)
            want golang-go command -v go
            want golang-etcd-server-dev test -d /usr/share/gocode/src/go.etcd.io/etcd/clientv3/concurrency
            ;;
    esac
done
if ((${#need[@]})); then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "error: the adapters need the Debian packages ${need[*]}: apt-get install ${need[*]} (as root)" >&2
        exit 1
    fi
    echo "clients-install.sh: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

mkdir -p "$root"
for part in "${parts[@]}"; do
    case "$part" in
        python)
            lock=examples/clients/requirements.txt
            if ! cmp -s "$lock" "$root/python/installed.txt" 2>/dev/null; then
                rm -rf "$root/python"
                python3 -m venv "$root/python"
                "$root/python/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock"
                cp "$lock" "$root/python/installed.txt"
            fi
            ;;
        node)
            mkdir -p "$root/node"
            cp examples/clients/package.json examples/clients/package-lock.json "$root/node/"
            if ! cmp -s examples/clients/package-lock.json "$root/node/node_modules/.installed.json" 2>/dev/null; then
                (cd "$root/node" && npm ci --silent --no-audit --no-fund)
                cp examples/clients/package-lock.json "$root/node/node_modules/.installed.json"
            fi
            ;;
        go)
            # GOPATH mode: the sources Debian ships, and ours beside them;
            # nothing is downloaded.
            mkdir -p "$root/go/bin"
            for dir in examples/clients/*/; do
                compgen -G "$dir*.go" >/dev/null || continue
                name=$(basename "$dir")
                GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$root/go/cache" \
                    go build -o "$root/go/bin/$name" "./$dir"
            done
            ;;
    esac
done
echo "clients-install.sh: ${parts[*]} ready in .clients/"
