#!/usr/bin/env bash
# Runs the unit tests (the conformance vectors included) with node's test
# runner over the compiled tests. ASSIGND_BIN, if set, is passed through to
# the smoke test against the real host.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -d node_modules ]; then
  ./build.sh
else
  npm run build
fi
exec node --test dist/test/*.test.js
