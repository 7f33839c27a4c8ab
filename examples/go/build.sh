#!/usr/bin/env bash
# Build examples/go/lease_worker with Debian's golang-go, offline: GOPATH
# mode, the standard library only, nothing downloaded. Installs golang-go
# (as root, with apt-get) where it is missing.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v go >/dev/null; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "error: building the Go worker needs Debian's golang-go: apt-get install golang-go (as root)" >&2
        exit 1
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
fi
export GO111MODULE=off GOFLAGS='' GOCACHE="${GOCACHE:-${TMPDIR:-/tmp}/leasequake-go-cache}"
go build -o lease_worker lease_worker.go
echo "examples/go/lease_worker ($(go version | cut -d' ' -f3))"
