#!/usr/bin/env bash
# Checks the Go toolchain (Debian 12's golang-go, 1.19, or newer), then
# vets the library and builds the example worker and the bench driver
# into bin/.
set -euo pipefail
cd "$(dirname "$0")"
source ./env.sh

if ! command -v go >/dev/null 2>&1; then
    echo "error: go is missing: apt-get install golang-go (Debian 12 ships 1.19)" >&2
    exit 1
fi
version="$(go env GOVERSION)"
minor="$(echo "$version" | sed -E 's/^go1\.([0-9]+).*/\1/')"
if ! [[ "$minor" =~ ^[0-9]+$ ]] || (( minor < 19 )); then
    echo "error: Go 1.19 or newer is needed, found $version" >&2
    exit 1
fi

unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
    echo "error: not gofmt-formatted: $unformatted" >&2
    exit 1
fi
go vet ./...
go build ./...
go build -o bin/assignd-worker ./cmd/assignd-worker
go build -o bin/assignd-bench ./cmd/assignd-bench
echo "built bin/assignd-worker and bin/assignd-bench with $version"
