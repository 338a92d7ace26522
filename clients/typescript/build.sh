#!/usr/bin/env bash
# Installs the TypeScript compiler from the npm registry (as package-lock.json
# pins it) and builds the library, its tests and the example worker into dist/.
set -euo pipefail
cd "$(dirname "$0")"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "build.sh: $tool is missing (Node.js 20 with npm is needed)" >&2
    exit 1
  fi
done
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
  echo "build.sh: Node.js $(node --version) is too old (18 or later, 20 recommended)" >&2
  exit 1
fi

npm ci --no-audit --no-fund
npm run build
