#!/usr/bin/env bash
# Build examples/c/lease_worker static, with the C compiler that builds
# leasequake itself: no C library is loaded when it runs.
set -euo pipefail
cd "$(dirname "$0")"
"${CC:-cc}" -static -O2 -Wall -Werror -o lease_worker lease_worker.c
echo "examples/c/lease_worker (static)"
