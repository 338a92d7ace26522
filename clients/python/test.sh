#!/usr/bin/env bash
# Runs the Python client's tests: the conformance vectors, wire, transport,
# the member shells, and (with ASSIGND_BIN set to an assignd binary) a smoke
# test against the real host. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
[ -x target/venv/bin/python ] || ./build.sh
exec target/venv/bin/python -m pytest -q "$@"
