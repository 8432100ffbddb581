#!/usr/bin/env bash
# Installs the C library: ffi/install.sh [PREFIX]   (default ~/.local)
#
#   PREFIX/include/a2a.h
#   PREFIX/lib/liba2a_ffi.so, liba2a_ffi.a (debuginfo stripped)
#   PREFIX/lib/pkgconfig/a2a.pc
#
# It builds the library with the `c-dist` profile (release, LTO, one codegen
# unit, stripped: the smallest library) unless A2A_FFI_LIB_DIR names a
# directory holding liba2a_ffi.so and liba2a_ffi.a already built (the C
# test does that with its debug build). Then:
#
#   export PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
#   cc host.c $(pkg-config --cflags --libs a2a) -Wl,-rpath,PREFIX/lib -o host
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX="${1:-$HOME/.local}"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"

if [ -n "${A2A_FFI_LIB_DIR:-}" ]; then
  LIB_DIR="$A2A_FFI_LIB_DIR"
else
  cargo build --locked --profile c-dist -p a2a-ffi --lib
  LIB_DIR="${CARGO_TARGET_DIR:-target}/c-dist"
fi

mkdir -p "$PREFIX/include" "$PREFIX/lib/pkgconfig"
install -m 0644 ffi/include/a2a.h "$PREFIX/include/a2a.h"
install -m 0755 "$LIB_DIR/liba2a_ffi.so" "$PREFIX/lib/liba2a_ffi.so"
install -m 0644 "$LIB_DIR/liba2a_ffi.a" "$PREFIX/lib/liba2a_ffi.a"
# rustc strips linked outputs only; the archive keeps the standard
# library's debuginfo unless stripped here.
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug "$PREFIX/lib/liba2a_ffi.a"
fi
PREFIX_ABS="$(cd "$PREFIX" && pwd)"
sed -e "s|@PREFIX@|$PREFIX_ABS|" -e "s|@VERSION@|$VERSION|" ffi/a2a.pc.in \
  >"$PREFIX/lib/pkgconfig/a2a.pc"
echo "installed a2a.h, liba2a_ffi.{so,a} and a2a.pc under $PREFIX_ABS" >&2
