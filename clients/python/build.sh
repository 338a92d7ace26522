#!/usr/bin/env bash
# Builds the Python client: a venv in target/venv with the package installed
# from this directory (as `pip install ./clients/python` does) and pytest.
#
#   ./build.sh                  # python3 (3.9 or later)
#   PYTHON=python3.12 ./build.sh
#
# Needs python3 with the venv module (Debian: python3-venv) and PyPI for
# setuptools (the build backend) and pytest. The library itself uses the
# standard library only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

python="${PYTHON:-python3}"
venv=target/venv
fail() { echo "build.sh: $*" >&2; exit 1; }

command -v "$python" >/dev/null || fail "$python not found: install Python 3.9 or later (Debian: python3)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' \
    || fail "$("$python" --version 2>&1) is too old: Python 3.9 or later is needed"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" || fail "'$python -m venv' failed: install the venv module (Debian: python3-venv)"
fi
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
"${pip[@]}" install --force-reinstall --no-deps . || fail "pip install . failed (is PyPI reachable for setuptools?)"
"$venv/bin/python" -c 'import pytest' 2>/dev/null || "${pip[@]}" install 'pytest>=7' \
    || fail "pip install pytest failed"
# The build leaves its work files beside the sources.
rm -rf build src/*.egg-info
"$venv/bin/python" -c 'import assignd, sys; print(f"built assignd {assignd.__version__} for Python {sys.version.split()[0]} in target/venv")'
