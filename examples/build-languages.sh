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
# second run only builds (16-40 s on 2 cores, the more the busier they are;
# sudo only when not root, apt-get update only when an install fails):
#   - C: examples/c-sticky/install-toolchain.sh: Debian's clang-14, lld-14,
#     wasi-libc and libclang-rt-14-dev-wasm32 (about 10 s), and
#     wit-bindgen-cli 0.63.0 with its C generator only (cargo install: no
#     Debian, PyPI or npm package has it; 4-8 minutes on 2 cores);
#   - JavaScript: Node.js and npm (Debian's, if missing), then `npm ci` in
#     examples/js-sticky (componentize-js 0.23.0, pinned by its lock file;
#     about 10 s);
#   - Python: python3 with venv (Debian's python3-venv if missing); the
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

assignd="${ASSIGND:-$root/target/debug/assignd}"
[ -x "$assignd" ] || die "no assignd binary at $assignd: run cargo build -p assignd first (or set ASSIGND)"

# --- toolchains -------------------------------------------------------------
# C: the example's own installer (apt packages, then wit-bindgen).
step "C toolchain: examples/c-sticky/install-toolchain.sh" "$root/examples/c-sticky/install-toolchain.sh"

# Node.js and npm for JavaScript, venv for Python: from Debian if missing.
apt_install() {
    local sudo=
    [ "$(id -u)" = 0 ] || sudo=sudo
    local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@")
    # apt-get update only when the install fails (a stale or empty list).
    $sudo "${install[@]}" >/dev/null || { $sudo apt-get update -qq && $sudo "${install[@]}" >/dev/null; }
}
missing=()
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
    step "apt-get install ${missing[*]}" apt_install "${missing[@]}"
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
