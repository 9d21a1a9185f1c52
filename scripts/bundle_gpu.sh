#!/usr/bin/env bash
# Builds the relocatable CUDA bundle: the `gpu-bundle` preset (CMakePresets.json: CUDA sm_90a +
# sm_80, OpenBLAS/gfortran/quadmath/gomp/xxhash/libstdc++/libgcc static, fmt and toml++ header-
# only, no MPI, no HTTP server, no RPATH) into
#   build/gpu-bundle/zaya-gpu/   bin/zaya, tests/gpu/test_* (the single-process tests labelled gpu:
#                                the op tests and the model parity tests),
#                                tests/fixtures/{model,model_swa,configs,tokenizer/toy_tokenizer.json},
#                                benchmarks/bench_gpu, scripts/{gpu_check,bench_window_step}.sh,
#                                configs/models/gpu-step-bench.json (zaya bench step --device gpu's
#                                default),
#                                MANIFEST (commit, flags, libraries, glibc needed, sizes, sha256)
#   build/gpu-bundle/zaya-gpu.tar.gz, and zaya-gpu.tar.xz: the one to carry to a GPU host. Every
#   executable holds the same static OpenBLAS (~25 MB) and GPU code; gzip's 32 KiB window compresses
#   each alone (~7 MB apiece), xz with a 128 MiB dictionary finds the copies (a few MB in all).
# A binary may need only glibc's libraries and cuBLAS(Lt), which it takes from the host that runs
# it (scripts/gpu_check.sh finds them in the PyTorch wheels); anything else fails the script, as
# does an RPATH. On the GPU host: tar xJf zaya-gpu.tar.xz && bash zaya-gpu/scripts/gpu_check.sh
# usage: bash scripts/bundle_gpu.sh      (JOBS=N parallel jobs; ccache through the usual
#                                         CMAKE_CXX_COMPILER_LAUNCHER/CMAKE_CUDA_COMPILER_LAUNCHER)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build/gpu-bundle
bundle=$build/zaya-gpu
jobs=${JOBS:-$(nproc)}
die() {
  echo "bundle_gpu: error: $*" >&2
  exit 1
}

# The shared libraries a bundled binary may need (NEEDED entries): glibc's, and cuBLAS(Lt).
allowed='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|librt\.so\.1|libpthread\.so\.0|libcublasLt\.so\.[0-9]+|libcublas\.so\.[0-9]+)$'

command -v readelf >/dev/null || die "readelf (binutils) is needed to check the binaries"
[ -x /usr/local/cuda/bin/nvcc ] || die "no /usr/local/cuda/bin/nvcc: the bundle is a CUDA build"
command -v xz >/dev/null || die "xz (xz-utils) is needed for the bundle's .tar.xz"

echo "bundle_gpu: configuring (preset gpu-bundle)"
cmake --preset gpu-bundle >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; die "configuring the gpu-bundle preset failed (above)"; }
# The GPU tests: the single-process executables labelled gpu (tests/CMakeLists.txt lists them).
mapfile -t tests <"$build/tests/gpu_tests.txt"
[ "${#tests[@]}" -gt 0 ] || die "no GPU test executables in $build/tests/gpu_tests.txt"
echo "bundle_gpu: building zaya bench_gpu ${tests[*]} (-j $jobs)"
if ! cmake --build "$build" -j "$jobs" --target zaya bench_gpu "${tests[@]}"; then
  die "the build failed (above). The full CUDA link needs every GPU op of src/ops/backend_ops.inc \
(src/ops/gpu/*.cu): an 'undefined reference to zaya::ops::gpu::…' names one not written yet"
fi

rm -rf "$bundle" "$bundle.tar.gz" "$bundle.tar.xz"
mkdir -p "$bundle"/{bin,benchmarks,scripts,tests/gpu,tests/fixtures}
cp "$build/zaya" "$bundle/bin/"
cp "$build/benchmarks/bench_gpu" "$bundle/benchmarks/"
for t in "${tests[@]}"; do cp "$build/tests/$t" "$bundle/tests/gpu/"; done
cp -r tests/fixtures/model tests/fixtures/model_swa tests/fixtures/configs "$bundle/tests/fixtures/"
mkdir -p "$bundle/tests/fixtures/tokenizer"  # test_train_trainer_gpu's sample tokenizer (40 KB)
cp tests/fixtures/tokenizer/toy_tokenizer.json "$bundle/tests/fixtures/tokenizer/"
cp scripts/gpu_check.sh scripts/bench_window_step.sh "$bundle/scripts/"
mkdir -p "$bundle/configs/models"  # the default model of zaya bench step --device gpu
cp configs/models/gpu-step-bench.json "$bundle/configs/models/"
# Symbols stay (a crash on the GPU host then names its function); no debug info is built.

# Every binary: only allowed libraries, no RPATH/RUNPATH (the host's loader path decides).
bad=0 needs=() glibc=0
for f in "$bundle"/bin/* "$bundle"/benchmarks/* "$bundle"/tests/gpu/*; do
  [ -f "$f" ] || continue
  dyn=$(readelf -d "$f")
  while read -r lib; do
    needs+=("$lib")
    if ! [[ $lib =~ $allowed ]]; then
      echo "bundle_gpu: ${f#"$bundle"/} needs $lib, which the bundle does not allow" >&2
      bad=1
    fi
  done < <(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn")
  if grep -qE '\((RPATH|RUNPATH)\)' <<<"$dyn"; then
    echo "bundle_gpu: ${f#"$bundle"/} has an RPATH/RUNPATH: $(grep -E 'RPATH|RUNPATH' <<<"$dyn")" >&2
    bad=1
  fi
  v=$(readelf -V "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  [ -n "$v" ] && glibc=$(printf '%s\n%s\n' "$glibc" "$v" | sort -V | tail -1)
done
[ "$bad" = 0 ] || die "a binary links a shared library outside glibc and cuBLAS(Lt) (above): \
link it statically in the ZAYA_STATIC_DEPS branch of CMakeLists.txt, or leave it out of the bundle"

commit=$(git rev-parse HEAD)
git diff --quiet HEAD -- src tests benchmarks CMakeLists.txt CMakePresets.json || commit+="-dirty"
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
{
  echo "zaya GPU bundle: bash scripts/gpu_check.sh from this folder on a CUDA host"
  echo "commit: $commit"
  echo "built: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -srm), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "glibc needed: $glibc"
  echo "needs: $(printf '%s\n' "${needs[@]}" | sort -u | tr '\n' ' ')"
  echo
  echo "compilers: $(cache CMAKE_CXX_COMPILER) ($(g++ -dumpfullversion)), $(/usr/local/cuda/bin/nvcc --version | tail -1)"
  for v in CMAKE_BUILD_TYPE CMAKE_CXX_FLAGS_RELEASE CMAKE_CUDA_FLAGS_RELEASE ZAYA_GPU \
    ZAYA_CUDA_ARCHITECTURES ZAYA_NATIVE ZAYA_MPI ZAYA_SERVE ZAYA_STATIC_DEPS CMAKE_SKIP_RPATH \
    OpenMP_gomp_LIBRARY; do
    echo "$v=$(cache "$v")"
  done
  echo
  echo "files (bytes, sha256):"
  (cd "$bundle" && find bin benchmarks tests/gpu scripts -type f | sort | while read -r f; do
    echo "  $f $(stat -c %s "$f") $(sha256sum "$f" | cut -c1-64)"
  done)
  echo "  tests/fixtures: $(cd "$bundle" && find tests/fixtures -type f | wc -l) files, $(du -sk "$bundle/tests/fixtures" | cut -f1) KiB"
} >"$bundle/MANIFEST"

tar -C "$build" -czf "$bundle.tar.gz" zaya-gpu
tar -C "$build" -cf - zaya-gpu | xz -T1 --lzma2=preset=3,dict=128MiB >"$bundle.tar.xz"
echo "bundle_gpu: $bundle ($(du -sh "$bundle" | cut -f1)), $bundle.tar.gz ($(du -h "$bundle.tar.gz" | cut -f1)), $bundle.tar.xz ($(du -h "$bundle.tar.xz" | cut -f1))"
echo "bundle_gpu: needs glibc >= $glibc and $(printf '%s\n' "${needs[@]}" | sort -u | grep -E 'cublas' | tr '\n' ' ')"
