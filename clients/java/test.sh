#!/usr/bin/env bash
# Runs the unit tests: the conformance vectors (../conformance/vectors), wire
# and ranges, the transport against a local fake host, and, when ASSIGND_BIN
# names an assignd binary, a smoke test of the member against it.
set -euo pipefail
cd "$(dirname "$0")"
export ASSIGND_BIN="${ASSIGND_BIN:-}"
mvn --batch-mode -Dstyle.color=never test
