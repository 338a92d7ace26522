#!/usr/bin/env bash
# The unit tests: the conformance vectors, wire, tracker, transport against
# local fake nodes, the member against a fake host, and (with ASSIGND_BIN
# naming the assignd binary) a smoke test against the real host.
set -euo pipefail
cd "$(dirname "$0")"
source ./env.sh
go test -count=1 "$@" ./...
