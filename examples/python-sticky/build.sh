#!/usr/bin/env bash
# Build the python-sticky assignor component: target/python-sticky.wasm.
#
#   ./build.sh            # venv in target/venv, bindings in target/bindings, component
#   PYTHON=python3.12 ./build.sh
#
# The component imports nothing but assignd's `log` (WASI is stubbed out as traps).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
wit="${ASSIGND_WIT:-$here/../../guest-sdk/wit/assignor.wit}"
target="$here/target"
venv="$target/venv"
out="$target/python-sticky.wasm"
python="${PYTHON:-python3}"

fail() { echo "build.sh: $*" >&2; exit 1; }

[ -f "$wit" ] || fail "WIT not found at $wit (set ASSIGND_WIT to guest-sdk/wit/assignor.wit of your assignd clone)"
command -v "$python" >/dev/null || fail "$python not found: install Python 3.10 or later (or set PYTHON)"

mkdir -p "$target"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" >/dev/null 2>&1 \
        || fail "'$python -m venv' failed: install the venv module (Debian: apt-get install python3-venv)"
fi
# Install (again) only when requirements.txt changed since the last install.
stamp="$venv/.requirements.txt"
if ! cmp -s requirements.txt "$stamp"; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r requirements.txt \
        || fail "pip install -r requirements.txt failed (is PyPI reachable?)"
    cp requirements.txt "$stamp"
fi
cpy="$venv/bin/componentize-py"
[ -x "$cpy" ] || fail "componentize-py missing from $venv: delete target/venv and run again"

# Stub bindings for editors, type checkers and the native tests (test_app.py);
# `componentize` generates the real ones itself.
rm -rf "$target/bindings"
"$cpy" -q -d "$wit" -w plugin bindings "$target/bindings" \
    || fail "componentize-py bindings failed on $wit"

# --stub-wasi: CPython's WASI imports become trapping stubs, so the component
# imports only assignd:assignor/log (the host refuses anything else).
"$cpy" -q -d "$wit" -w plugin componentize app -p "$here" --stub-wasi -o "$out" \
    || fail "componentize-py componentize failed"

echo "built $out ($(stat -c %s "$out") bytes)"
