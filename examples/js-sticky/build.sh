#!/usr/bin/env bash
# Build target/js-sticky.wasm from sticky.js with componentize-js.
#
# --disable stdio random clocks http fetch-event turns off every WASI
# feature of the JS engine, so the component imports only
# assignd:assignor/log@0.2.0 (the host refuses any other import).
#
# The WIT world: $ASSIGND_WIT (a folder or assignor.wit), else the clone's
# guest-sdk/wit when this folder is examples/js-sticky in it.
set -uo pipefail
cd "$(dirname "$0")" || exit 1

die() { echo "build.sh: $*" >&2; exit 1; }

WIT=${ASSIGND_WIT:-../../guest-sdk/wit}
[ -e "$WIT" ] || die "no WIT world at $WIT (No such file or directory): set ASSIGND_WIT to guest-sdk/wit of your assignd clone"

command -v node >/dev/null || die "node not found: install Node.js 20 or later (with npm)"
command -v npm >/dev/null || die "npm not found: install npm (it comes with Node.js)"

CJS=node_modules/.bin/componentize-js
if [ ! -x "$CJS" ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund >&2 || die "npm ci failed (is the npm registry reachable?)"
fi
[ -x "$CJS" ] || die "componentize-js is missing from node_modules after npm ci"

mkdir -p target
if ! "$CJS" sticky.js \
  --wit "$WIT" \
  --world-name plugin \
  --disable stdio random clocks http fetch-event \
  --out target/js-sticky.wasm.tmp >target/componentize.log 2>&1; then
  rm -f target/js-sticky.wasm.tmp
  why=$(grep -m1 -E '^(\w*Error|error)' target/componentize.log || tail -n1 target/componentize.log)
  # The first error line may be a summary; keep the cause it wraps.
  cause=$(sed -n -E '/no such file|not found|os error|denied/I{s/^[[:space:]]*([0-9]+:[[:space:]]*)?//;p;q}' target/componentize.log)
  if [ -n "$cause" ] && [[ "$why" != *"$cause"* ]]; then why="$why: $cause"; fi
  die "componentize-js failed: ${why:-no output} (full output: target/componentize.log)"
fi
mv target/js-sticky.wasm.tmp target/js-sticky.wasm
echo "built target/js-sticky.wasm ($(wc -c <target/js-sticky.wasm) bytes)"
