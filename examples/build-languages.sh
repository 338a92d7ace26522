#!/usr/bin/env bash
# Installs the toolchains of the C, JavaScript and Python example assignors
# and builds them from source, as CI does (.ci/run calls it):
#
#   examples/build-languages.sh [OUT_DIR]     # default: target/language-components
#
# OUT_DIR then holds c-sticky.wasm, js-sticky.wasm and python-sticky.wasm,
# and the last line printed is ASSIGND_LANGUAGE_COMPONENTS=OUT_DIR: with that
# variable set, `cargo test` runs the end-to-end tests of tests/e2e/languages.rs
# on them (without it they say so and pass).
#
# Every install is skipped when what it installs is there already, so a
# second run only builds (a few seconds plus the C build's 0.3 s):
#   - C: Debian's clang-14, lld-14, wasi-libc, libclang-rt-14-dev-wasm32
#     (apt-get, with sudo when not root; apt-get update only if the install
#     fails), and wit-bindgen-cli 0.63.0 with its C generator only (cargo
#     install: no Debian, PyPI or npm package has it; ~5 minutes on 2 cores);
#   - JavaScript: Node.js and npm (apt-get if missing), then `npm ci` in
#     examples/js-sticky (componentize-js 0.23.0, pinned by its lock file);
#   - Python: python3 with venv (apt-get python3-venv if missing); the
#     example's build.sh keeps a venv with componentize-py==0.25.1
#     (requirements.txt) in examples/python-sticky/target/venv.
# The C build makes its component with `assignd component new`: it needs the
# host binary, $ASSIGND or else target/debug/assignd (cargo build -p assignd).
# Each step prints what it does and how long it took.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/language-components}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

WIT_BINDGEN_VERSION=0.63.0
C_PACKAGES=(clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32)

die() { echo "build-languages.sh: $*" >&2; exit 1; }
say() { echo "build-languages.sh: $*"; }

started_all=$SECONDS
# Runs "$@" as one step: prints its name, then how long it took.
step() {
    local name=$1 started=$SECONDS
    shift
    say "$name ..."
    "$@" || die "$name failed"
    say "$name: $((SECONDS - started)) s"
}

sudo=
[ "$(id -u)" = 0 ] || sudo=sudo
apt_install() {
    local quiet=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends)
    $sudo "${quiet[@]}" "$@" >/dev/null \
        || { $sudo apt-get update -qq && $sudo "${quiet[@]}" "$@" >/dev/null; }
}
missing_packages() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"
    done
}

assignd="${ASSIGND:-$root/target/debug/assignd}"
[ -x "$assignd" ] || die "no assignd binary at $assignd: run cargo build -p assignd first (or set ASSIGND)"

# --- toolchains -------------------------------------------------------------
mapfile -t missing < <(missing_packages "${C_PACKAGES[@]}")
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
    step "apt-get install ${missing[*]}" apt_install "${missing[@]}"
else
    say "apt packages present: ${C_PACKAGES[*]}, node, python3 venv"
fi

# cargo install puts wit-bindgen in cargo's bin directory, which may not be on PATH.
cargo_bin="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin"
PATH="$PATH:$cargo_bin"
if wit-bindgen --version 2>/dev/null | grep -q "^wit-bindgen-cli $WIT_BINDGEN_VERSION\b"; then
    say "wit-bindgen-cli $WIT_BINDGEN_VERSION present"
else
    step "cargo install wit-bindgen-cli $WIT_BINDGEN_VERSION (C generator only)" \
        cargo install wit-bindgen-cli --version "$WIT_BINDGEN_VERSION" --locked \
        --no-default-features --features c --quiet
fi

js="$root/examples/js-sticky"
if [ -x "$js/node_modules/.bin/componentize-js" ] \
    && [ ! "$js/package-lock.json" -nt "$js/node_modules/.package-lock.json" ]; then
    say "js-sticky's node_modules up to date"
else
    step "npm ci in examples/js-sticky" \
        bash -c 'cd "$1" && npm ci --no-audit --no-fund --loglevel=error' _ "$js"
fi

# --- components ---------------------------------------------------------------
say "toolchains: $(wit-bindgen --version), $(clang-14 --version | head -n1), node $(node --version), $(python3 --version)"
step "build c-sticky" env ASSIGND="$assignd" "$root/examples/c-sticky/build.sh"
step "build js-sticky" "$js/build.sh"
step "build python-sticky (venv with componentize-py if requirements.txt changed)" \
    "$root/examples/python-sticky/build.sh"
sizes=()
for name in c-sticky js-sticky python-sticky; do
    cp "$root/examples/$name/target/$name.wasm" "$out/$name.wasm"
    sizes+=("$name.wasm $(stat -c %s "$out/$name.wasm") bytes")
done
say "done in $((SECONDS - started_all)) s: $(IFS=,; echo "${sizes[*]}" | sed 's/,/, /g') in $out"
echo "ASSIGND_LANGUAGE_COMPONENTS=$out"
