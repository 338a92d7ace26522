#!/usr/bin/env bash
# Installs the toolchains of the member clients in other languages and
# builds them, as CI does (.ci/run calls it):
#
#   clients/build.sh [LANG...]      # default: python go java typescript
#
# For each language it installs the Debian packages listed in
# clients/LANG/debian-packages.txt that are missing (sudo only when not
# root; apt-get update only when an install fails), runs clients/LANG/build.sh
# (which fetches what it needs from the language's registry: pip, npm; Go
# and Java build offline) and marks the client built (clients/LANG/.built,
# which tests/e2e/clients.rs looks for). The last line printed is
# ASSIGND_CLIENTS=rust,LANG,...: with that variable set, `cargo test` runs
# the end-to-end suite of tests/e2e/clients.rs with every one of those
# workers, and fails if one is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
langs=("$@")
[ ${#langs[@]} -gt 0 ] || langs=(python go java typescript)

say() { echo "clients/build.sh: $*"; }
sudo=$([ "$(id -u)" = 0 ] || echo sudo)

install_missing() {
    local missing=()
    while read -r package; do
        [ -n "$package" ] || continue
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done < "$1"
    [ ${#missing[@]} -gt 0 ] || return 0
    say "installing ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
        || { $sudo apt-get update -qq \
             && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }
}

built=(rust)
for lang in "${langs[@]}"; do
    dir="$root/clients/$lang"
    [ -d "$dir" ] || { echo "clients/build.sh: no client $lang" >&2; exit 1; }
    started=$SECONDS
    rm -f "$dir/.built"
    install_missing "$dir/debian-packages.txt"
    "$dir/build.sh"
    touch "$dir/.built"
    built+=("$lang")
    say "$lang built in $((SECONDS - started)) s"
done
echo "ASSIGND_CLIENTS=$(IFS=,; echo "${built[*]}")"
