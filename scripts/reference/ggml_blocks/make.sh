#!/usr/bin/env bash
# One-time generator of tests/fixtures/quant/ggml_blocks.bin (docs/quantization.md): compiles
# ggml_blocks.c against a GGML checkout that has been built (libggml-base) and runs it. Not part
# of the build or CI; rerun only to regenerate the fixture.
#   scripts/reference/ggml_blocks/make.sh GGML_DIR [BUILD_DIR]
# GGML_DIR is a checkout of github.com/ggml-org/ggml, BUILD_DIR its CMake build (default
# GGML_DIR/build, holding src/libggml-base.so).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
ggml=${1:?usage: make.sh GGML_DIR [BUILD_DIR]}
build=${2:-$ggml/build}
lib=$build/src
[[ -e $lib/libggml-base.so ]] || { echo "no libggml-base.so in $lib: build GGML first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -std=c11 -Wall -Wextra -I"$ggml/include" "$here/ggml_blocks.c" -o "$tmp/ggml_blocks" \
   -L"$lib" -lggml-base -lm -Wl,-rpath,"$lib"
mkdir -p "$root/tests/fixtures/quant"
"$tmp/ggml_blocks" "$root/tests/fixtures/quant/ggml_blocks.bin"
