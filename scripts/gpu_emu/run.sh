#!/usr/bin/env bash
# GPU emulator: runs the real GPU tests (tests/ops/gpu/, tests/*/test_*_gpu.cpp) against the kernels of src/ops/gpu/,
# compiled as C++ and run on the host (see scripts/gpu_emu/README.md). Developer tool, not CI.
#
#   scripts/gpu_emu/run.sh [TEST_NAME...]   # e.g. test_ops_gpu_rope test_ops_gpu_moe (default: all)
#   scripts/gpu_emu/run.sh test_integration_nccl_group_mpirun       # tests/integration/test_nccl_*: mpirun jobs, emulated NCCL
#   scripts/gpu_emu/run.sh --selftest       # the emulator's own checks (selftest.cu)
#
# Environment: GTEST_FILTER (passed on), ZAYA_EMU_REVERSE=1 (blocks and threads in reverse
# order), ZAYA_EMU_SMS (multiprocessor_count, default 132), ZAYA_EMU_JOBS (compile jobs, 2),
# ZAYA_EMU_TIMEOUT (seconds per test executable, 1800), ZAYA_EMU_WARP=64 (64-lane warps inside
# kernels, 32 in host code, as on AMD gfx9), ZAYA_EMU_FMA=1 (let g++ contract a*b+c into FMAs).
# Builds in build/gpu-emu/ (CPU objects from build/release, preset "release").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
emu=scripts/gpu_emu
out=build/gpu-emu
rel=build/release
jobs=${ZAYA_EMU_JOBS:-2}
mkdir -p "$out/src" "$out/include/ops/gpu" "$out/obj" "$out/bin" "$out/log"

# A test executable's name and its source (tests/CMakeLists.txt): tests/a/b/test_c.cpp → test_a_b_c.
exe_of() { local r=${1#tests/}; local d=${r%/*}; local f=${r##*/}; f=${f%.cpp}; echo "test_${d//\//_}_${f#test_}"; }
source_of() { local f; for f in tests/*/test_*.cpp tests/*/*/test_*.cpp; do [ "$(exe_of "$f")" = "$1" ] && { echo "${f#tests/}"; return; }; done; echo "no test source for $1" >&2; exit 1; }
selftest=0
if [ "${1:-}" = --selftest ]; then
  selftest=1
  shift
fi
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  for f in tests/ops/gpu/test_*.cpp tests/*/test_*_gpu.cpp tests/integration/test_nccl_*.cpp; do
    [ "$f" = tests/ops/gpu/test_size_class.cpp ] || tests+=("$(exe_of "$f")")
  done
fi

# 1. The CPU build: zaya_lib and the tests' objects (unchanged: the tests are plain C++).
[ -f "$rel/build.ninja" ] || cmake --preset release >/dev/null
targets=(zaya_lib)
cli=0
for t in "${tests[@]}"; do
  targets+=("tests/CMakeFiles/$t.dir/$(source_of "$t").o")
  grep -q 'cli_util.h' "tests/$(source_of "$t")" && cli=1
done
[ $cli = 1 ] && targets+=(zaya)  # tests that run the CLI get an emulated zaya binary
cmake --build "$rel" --target "${targets[@]}" -j "$jobs" >"$out/log/cpu_build.log" 2>&1 ||
  { tail -30 "$out/log/cpu_build.log"; exit 1; }

# 2. The kernels as C++ (transform.py), the host files of src/ops/gpu/, the emulator itself.
cflags=$(python3 - "$rel" <<'PY'
import json, shlex, sys
for e in json.load(open(sys.argv[1] + '/compile_commands.json')):
    if e['file'].endswith('src/ops/cpu/rope.cpp'):
        a = shlex.split(e['command'])[1:]
        keep, skip = [], False
        for x in a:
            if skip: skip = False; continue
            if x in ('-o', '-c'): skip = True; continue
            if x.startswith('-O') or x.startswith('-I'): continue
            keep.append(x)
        print(' '.join(shlex.quote(x) for x in keep)); break
PY
)
# No FMA contraction by default (reproducible; ZAYA_EMU_FMA=1: g++ contracts as nvcc may).
[ "${ZAYA_EMU_FMA:-0}" = 1 ] && contract=fast || contract=off
cflags="$cflags -O2 -g -ffp-contract=$contract -Wno-unused-variable -Wno-unused-function -Wno-unknown-pragmas"
# Headers with launches in them: transformed copies, found first on the include path.
for f in src/ops/gpu/*.cuh; do
  h="$out/include/ops/gpu/$(basename "$f")"
  if [ ! "$h" -nt "$f" ] || [ ! "$h" -nt "$emu/transform.py" ]; then
    python3 "$emu/transform.py" "$f" "$h"
  fi
done
sources=()
for f in src/ops/gpu/*.cu; do
  cpp="$out/src/$(basename "$f" .cu).cpp"
  if [ ! "$cpp" -nt "$f" ] || [ ! "$cpp" -nt "$emu/transform.py" ]; then
    python3 "$emu/transform.py" "$f" "$cpp"
  fi
  sources+=("$cpp")
done
for f in src/ops/gpu/*.cpp; do
  case "$(basename "$f")" in
    no_gpu.cpp | runtime.cpp | gemm_blaslt.cpp) ;;  # replaced by emu.cpp
    *) sources+=("$f") ;;
  esac
done
sources+=("$emu/emu.cpp" "$emu/emu_stubs.cpp" src/dist/nccl.cpp)  # the NCCL group: include/nccl.h
objs=()
stale=()
# New flags or a new emulator: rebuild everything.
stamp="$out/obj/stamp"
want="$cflags $(cat "$emu/include/ops/gpu/vendor.h" "$emu/transform.py" | md5sum)"
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || rm -f "$out"/obj/*.o
for s in "${sources[@]}"; do
  o="$out/obj/$(basename "$s" .cpp).o"
  [ "$(basename "$s")" = rope.cpp ] && [ "${s#src/}" != "$s" ] && o="$out/obj/rope_host.o"
  objs+=("$o")
  if [ ! "$o" -nt "$s" ] || [ ! "$o" -nt "$emu/include/ops/gpu/vendor.h" ] ||
    [ -n "$(find src/ops/gpu src/ops/backend_ops.inc src/core "$out/include" -newer "$o" \( -name '*.h' -o -name '*.cuh' -o -name '*.inc' \) 2>/dev/null | head -1)" ]; then
    stale+=("$s=$o")
  fi
done
if [ ${#stale[@]} -gt 0 ]; then
  printf '%s\n' "${stale[@]}" | xargs -P "$jobs" -I{} bash -c '
    s=${1%%=*}; o=${1#*=}
    eval "c++ $2 -I'"$out"'/include -I'"$emu"'/include -Isrc -x c++ -c \"\$s\" -o \"\$o\"" 2>"$o.log" ||
      { echo "COMPILE FAILED: $s"; cat "$o.log"; exit 1; }' _ {} "$cflags" || exit 1
fi
echo "$want" >"$stamp"

# 3. zaya_lib without no_gpu.cpp (its GPU entry points come from the objects above).
cp "$rel/libzaya_lib.a" "$out/libzaya_cpu.a"
ar d "$out/libzaya_cpu.a" no_gpu.cpp.o no_nccl.cpp.o
# The NCCL stand-in the group loads through ZAYA_NCCL_LIB (its MPI and emu:: symbols resolve
# against the test executable, linked -rdynamic).
mkdir -p "$out/lib"
if [ ! "$out/lib/libnccl_emu.so" -nt "$emu/nccl_emu.cpp" ] || [ ! "$out/lib/libnccl_emu.so" -nt "$emu/include/nccl.h" ]; then
  eval "c++ $cflags -fPIC -shared -I$emu/include -Isrc $emu/nccl_emu.cpp -o $out/lib/libnccl_emu.so" ||
    { echo "COMPILE FAILED: $emu/nccl_emu.cpp"; exit 1; }
fi
export ZAYA_NCCL_LIB=${ZAYA_NCCL_LIB:-$root/$out/lib/libnccl_emu.so}

if [ $selftest = 1 ]; then  # the emulator's own checks: a block sum, then three real bugs caught
  python3 "$emu/transform.py" "$emu/selftest.cu" "$out/src/selftest.cpp"
  eval "c++ $cflags -I$out/include -I$emu/include -Isrc $out/src/selftest.cpp $out/obj/emu.o \
    $out/obj/emu_stubs.o $out/libzaya_cpu.a -lfmt -fopenmp -o $out/bin/selftest"
  "$out/bin/selftest"
  exit
fi

# 4. The emulated CLI (for tests that run `zaya`), then link and run each test.
relink() {  # relink TARGET OUTPUT: the release link command of TARGET with the emulated backend
  local cmd
  cmd=$(ninja -C "$rel" -t commands "$1" | grep -- "-o $1 " | tail -1 | sed 's/^: && //; s/ && .*//')
  local abs=("${objs[@]/#/$root/}")
  cmd=${cmd/ libzaya_lib.a / ${abs[*]} $root/$out/libzaya_cpu.a }
  cmd=${cmd/ -o $1 / -rdynamic -o $2 }
  (cd "$rel" && eval "$cmd")
}
if [ $cli = 1 ]; then
  relink zaya "$root/$out/bin/zaya" >"$out/log/zaya.link.log" 2>&1 ||
    { echo "zaya LINK-FAILED"; tail -5 "$out/log/zaya.link.log"; }
fi
summary="$out/summary.txt"
: >"$summary"
status=0
for t in "${tests[@]}"; do
  link=$(ninja -C "$rel" -t commands "tests/$t" | grep -- "-o tests/$t " | tail -1 | sed 's/^: && //; s/ && .*//')
  libs=${link#*libzaya_lib.a}
  tobj=$rel/tests/CMakeFiles/$t.dir/$(source_of "$t").o
  src="tests/$(source_of "$t")"
  if grep -q 'cli_util.h\|ZAYA_HAS_GPU_BACKEND' "$src"; then
    # The same object recompiled: ZAYA_BINARY naming the emulated zaya, and the GPU-build-only
    # parts (ZAYA_HAS_GPU_BACKEND: the GEMM layer's own tests) compiled in against the emulator.
    tobj=$out/obj/$t.o
    gpu_only=0
    grep -q 'ZAYA_HAS_GPU_BACKEND' "$src" && gpu_only=1
    ccmd=$(python3 - "$rel" "$t" "$root/$out/bin/zaya" "$root/$tobj" "$(source_of "$t")" "$gpu_only" "$root/$out/include" "$root/$emu/include" <<'PY'
import json, re, sys
rel, t, zaya, obj, source, gpu_only, out_inc, emu_inc = sys.argv[1:]
for e in json.load(open(rel + '/compile_commands.json')):
    if e['file'].endswith('/tests/' + source):
        c = re.sub(r'-DZAYA_BINARY=\\"[^ ]*\\"', '-DZAYA_BINARY=\\"' + zaya + '\\"', e['command'])
        c = re.sub(r' -o [^ ]+', ' -o ' + obj, c)
        if gpu_only == '1':
            # first on the include path: the emulator's vendor headers before src/ops/gpu's
            w = c.split(' ')
            at = 2 if w[0].endswith('ccache') else 1
            c = ' '.join(w[:at] + ['-DZAYA_HAS_GPU_BACKEND=1', '-I' + out_inc, '-I' + emu_inc] + w[at:])
        print(c); break
PY
)
    (cd "$rel" && eval "$ccmd") >"$out/log/$t.compile.log" 2>&1 || { echo "$t COMPILE-FAILED" | tee -a "$summary"; status=1; continue; }
  fi
  if ! eval "c++ -O2 -rdynamic $tobj ${objs[*]} $out/libzaya_cpu.a $libs -o $out/bin/$t" \
    >"$out/log/$t.link.log" 2>&1; then
    echo "$t LINK-FAILED" | tee -a "$summary"
    grep -m5 "undefined reference\|multiple definition" "$out/log/$t.link.log" || tail -5 "$out/log/$t.link.log"
    status=1
    continue
  fi
  echo "== $t"
  set +e
  (cd "$rel/tests" && timeout "${ZAYA_EMU_TIMEOUT:-1800}" "$root/$out/bin/$t") >"$out/log/$t.log" 2>&1
  rc=$?
  set -e
  pass=$(grep -c '^\[       OK \]' "$out/log/$t.log" || true)
  fail=$(grep -cE '^\[  FAILED  \].*\([0-9]+ ms\)$' "$out/log/$t.log" || true)
  skip=$(grep -c '^\[  SKIPPED \]' "$out/log/$t.log" || true)
  line="$t rc=$rc passed=$pass failed=$fail skipped=$skip"
  echo "$line" | tee -a "$summary"
  grep -E '^\[  FAILED  \].*\([0-9]+ ms\)$' "$out/log/$t.log" || true
  [ "$rc" -eq 0 ] || { status=1; [ "$fail" -gt 0 ] || tail -5 "$out/log/$t.log"; }
done
echo "summary: $summary, logs: $out/log/"
exit $status
