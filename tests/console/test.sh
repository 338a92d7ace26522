#!/usr/bin/env bash
# The console's browser tests (test_console.py) in headless Chromium against
# the real binary: ASSIGND_BIN (default target/debug/assignd, built first by
# `cargo build -p assignd`). Needs Debian's chromium, chromium-driver and
# python3-selenium (tests/run installs them). Arguments go to unittest;
# --update-baselines rewrites the layout baselines in tests/console/layout/.
# Screenshots of each page land in target/console-screenshots/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# No __pycache__ left in the tree.
export PYTHONDONTWRITEBYTECODE=1
export ASSIGND_BIN="${ASSIGND_BIN:-$root/target/debug/assignd}"
if [ ! -x "$ASSIGND_BIN" ]; then
    echo "tests/console/test.sh: no binary at $ASSIGND_BIN (cargo build -p assignd)" >&2
    exit 1
fi
# Debian's python3, which python3-selenium installs into (not a pyenv's).
exec "${PYTHON:-/usr/bin/python3}" "$here/test_console.py" "$@"
