#!/usr/bin/env bash
# Installs what build.sh needs on Debian 12 (bookworm); idempotent, and quick
# when everything is there already:
#   - clang 14, lld 14 (wasm-ld), wasi-libc (malloc/string.h for wasm32) and
#     clang's wasm32 compiler-rt, from Debian;
#   - wit-bindgen 0.63.0 (the C bindings generator), built with cargo: it has
#     no Debian, pip or npm package. Only its C generator is built (about
#     5 minutes on 2 cores). Needs Rust (rustup), which assignd needs anyway.
# The assignd binary itself comes from the clone: cargo build --release -p assignd.
set -euo pipefail

WIT_BINDGEN_VERSION=0.63.0
APT_PACKAGES=(clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32)

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-toolchain.sh: apt-get install ${missing[*]}"
    # apt-get update only when the install fails (a stale or empty list).
    install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}")
    $SUDO "${install[@]}" >/dev/null || { $SUDO apt-get update -qq && $SUDO "${install[@]}" >/dev/null; }
fi

if wit-bindgen --version 2>/dev/null | grep -q "^wit-bindgen-cli $WIT_BINDGEN_VERSION\b"; then
    :
else
    command -v cargo >/dev/null 2>&1 || {
        echo "install-toolchain.sh: cargo not found: install Rust with rustup (https://rustup.rs), then run this again" >&2
        exit 1
    }
    echo "install-toolchain.sh: cargo install wit-bindgen-cli $WIT_BINDGEN_VERSION (C generator only; a few minutes)"
    cargo install wit-bindgen-cli --version "$WIT_BINDGEN_VERSION" --locked \
        --no-default-features --features c --quiet
    command -v wit-bindgen >/dev/null 2>&1 || {
        echo "install-toolchain.sh: wit-bindgen installed into cargo's bin directory, which is not on PATH: add ${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin to PATH" >&2
        exit 1
    }
fi

echo "install-toolchain.sh: ready: $(wit-bindgen --version), $(clang-14 --version | head -n1)"
