#!/usr/bin/env bash
# Builds target/c-sticky.wasm, an assignd assignor component, from sticky.c:
#   1. wit-bindgen c      ../../guest-sdk/wit -> target/bindings/plugin.{h,c}, plugin_component_type.o
#   2. clang (wasm32-wasi, wasi-libc for malloc; no stdio, so no WASI imports) -> target/c-sticky.core.wasm
#   3. assignd component new -> target/c-sticky.wasm
# Tools (./install-toolchain.sh installs them): wit-bindgen 0.63, clang + lld 14 with
# wasi-libc and the wasm32 compiler-rt, and the assignd binary itself.
# Override with WIT_BINDGEN=..., CC=..., ASSIGND=..., WIT_DIR=... .
set -euo pipefail
cd "$(dirname "$0")"

WIT_DIR=${WIT_DIR:-../../guest-sdk/wit}
WIT_BINDGEN=${WIT_BINDGEN:-wit-bindgen}
CC=${CC:-clang-14}
OUT=target

die() { echo "build.sh: $*" >&2; exit 1; }

# The assignd binary: $ASSIGND, else `assignd` on PATH, else this clone's build.
if [ -z "${ASSIGND:-}" ]; then
    for candidate in assignd ../../target/release/assignd ../../target/debug/assignd; do
        if command -v "$candidate" >/dev/null 2>&1; then ASSIGND=$candidate; break; fi
    done
fi
[ -n "${ASSIGND:-}" ] && command -v "$ASSIGND" >/dev/null 2>&1 || die "assignd not found: build it (cargo build --release -p assignd in the clone) and put it on PATH, or set ASSIGND=/path/to/assignd"
command -v "$WIT_BINDGEN" >/dev/null 2>&1 || die "wit-bindgen not found: run ./install-toolchain.sh (cargo install wit-bindgen-cli --version 0.63.0 --locked --no-default-features --features c)"
command -v "$CC" >/dev/null 2>&1 || die "$CC not found: run ./install-toolchain.sh (apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32)"
RESOURCE_DIR=$("$CC" --print-resource-dir 2>/dev/null) || die "$CC is not clang: set CC=clang-14 (apt-get install clang-14)"
[ -f "$RESOURCE_DIR/lib/wasi/libclang_rt.builtins-wasm32.a" ] || die "the wasm32 compiler-rt of $CC is missing: run ./install-toolchain.sh (apt-get install libclang-rt-14-dev-wasm32)"
echo 'int main;' | "$CC" --target=wasm32-wasi -x c -fsyntax-only -include stdlib.h - 2>/dev/null || die "wasi-libc not found for $CC: run ./install-toolchain.sh (apt-get install wasi-libc)"
[ -x "$(dirname "$(readlink -f "$(command -v "$CC")")")/wasm-ld" ] || command -v wasm-ld >/dev/null 2>&1 || die "wasm-ld not found: run ./install-toolchain.sh (apt-get install lld-14)"
[ -d "$WIT_DIR" ] || die "no WIT at $WIT_DIR: set WIT_DIR to the clone's guest-sdk/wit"

mkdir -p "$OUT/bindings"
# 1. Bindings: generated, never edited or committed.
if ! generated=$("$WIT_BINDGEN" c "$WIT_DIR" --out-dir "$OUT/bindings" 2>&1); then
    echo "$generated" >&2
    die "wit-bindgen c $WIT_DIR failed"
fi

# 2. The core module. -nostartfiles / --no-entry: a library of exports, no main;
#    --strip-debug drops libc's DWARF but keeps the name section for backtraces.
"$CC" --target=wasm32-wasi -std=c11 -O2 -Wall -Wextra -Werror \
    -I "$OUT/bindings" -nostartfiles -Wl,--no-entry -Wl,--strip-debug \
    -o "$OUT/c-sticky.core.wasm" \
    sticky.c "$OUT/bindings/plugin.c" "$OUT/bindings/plugin_component_type.o"

# 3. The component (the host takes only components; it refuses any import but `log`).
"$ASSIGND" component new "$OUT/c-sticky.core.wasm" -o "$OUT/c-sticky.wasm"
echo "built $OUT/c-sticky.wasm ($(wc -c <"$OUT/c-sticky.wasm") bytes)"
