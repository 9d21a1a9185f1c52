#!/usr/bin/env bash
# Builds compare.cpp (our quantizers, src/quant/formats.cpp, against GGML's reference quantizers on
# a million values) and runs it single-threaded. A development tool, not part of the build or CI.
#   scripts/reference/ggml_blocks/compare.sh GGML_DIR [BUILD_DIR]
# GGML_DIR and BUILD_DIR as for make.sh; needs libfmt-dev (the project's setup installs it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
ggml=${1:?usage: compare.sh GGML_DIR [BUILD_DIR]}
lib=${2:-$ggml/build}/src
[[ -e $lib/libggml-base.so ]] || { echo "no libggml-base.so in $lib: build GGML first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
c++ -O2 -march=native -std=c++20 -fopenmp -I"$root/src" -I"$ggml/include" "$here/compare.cpp" \
    "$root/src/quant/formats.cpp" -o "$tmp/compare" -L"$lib" -lggml-base -lfmt \
    -Wl,-rpath,"$lib"
OMP_NUM_THREADS=1 "$tmp/compare"
