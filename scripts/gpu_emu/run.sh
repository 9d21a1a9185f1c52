#!/usr/bin/env bash
# The GPU tests against the GPU emulator: builds the `emu` preset (ZAYA_GPU=EMU: the kernels of
# src/ops/gpu/ compiled for the host and run on the CPU; README.md here) and runs its tests.
#
#   scripts/gpu_emu/run.sh          # every `gpu` test (ctest -L gpu): the GPU-vs-CPU tests, the
#                                   # NCCL mpirun jobs and the emulator's self-test
#   scripts/gpu_emu/run.sh TEST...  # these executables only, run directly (test_ops_gpu_rope,
#                                   # test_integration_nccl_group_mpirun, gpu_emu_selftest, …)
#
# Environment: GTEST_FILTER (a gtest filter; for the whole suite it becomes ctest's -R/-E on the
# test names), ZAYA_EMU_REVERSE=1 (blocks and threads in reverse order), ZAYA_EMU_WARP=64 (64-lane
# warps in kernels, as on AMD gfx9), ZAYA_EMU_PROTECT=1 (host code touching device memory faults),
# ZAYA_EMU_SMS (multiprocessor_count, 132), ZAYA_EMU_FMA=1 (the kernels compiled with FMA
# contraction: a configure option, so the kernels rebuild), ZAYA_EMU_JOBS (build and test jobs,
# 2), ZAYA_EMU_TIMEOUT (seconds per test, 1800).
# Output: one line per executable (rc passed failed skipped) in build/emu/gpu_emu/summary.txt,
# the logs in build/emu/gpu_emu/log/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=build/emu
out=$build/gpu_emu
jobs=${ZAYA_EMU_JOBS:-2}
timeout_s=${ZAYA_EMU_TIMEOUT:-1800}
[ "${ZAYA_EMU_FMA:-0}" = 1 ] && fma=ON || fma=OFF

cmake --preset emu -DZAYA_EMU_FMA=$fma >/dev/null
mkdir -p "$out/log"
# The NCCL stand-in the NCCL group loads (as it would load libnccl.so.2).
export ZAYA_NCCL_LIB=${ZAYA_NCCL_LIB:-$root/$build/libnccl_emu.so}

# A test executable's name from its source (tests/CMakeLists.txt): tests/a/b/test_c.cpp → test_a_b_c.
exe_of() {
  local r=${1#tests/}
  local d=${r%/*} f=${r##*/}
  f=${f%.cpp}
  echo "test_${d//\//_}_${f#test_}"
}
# Where an executable lies in the build.
path_of() { if [ "$1" = gpu_emu_selftest ]; then echo "$build/$1"; else echo "$build/tests/$1"; fi; }

tests=("$@")
all=0
if [ ${#tests[@]} -eq 0 ]; then
  all=1
  # The single-process GPU tests (tests/CMakeLists.txt lists them), the NCCL jobs, the self-test.
  mapfile -t tests < <(grep -v '^$' "$build/tests/gpu_tests.txt")
  for f in tests/integration/test_nccl_*.cpp; do tests+=("$(exe_of "$f")"); done
  tests+=(gpu_emu_selftest)
fi
cmake --build "$build" -j "$jobs" --target "${tests[@]}" zaya nccl_emu >"$out/log/build.log" 2>&1 ||
  { tail -40 "$out/log/build.log"; exit 1; }

summary=$out/summary.txt
: >"$summary"
status=0
if [ $all = 1 ]; then
  # Every `gpu` test through ctest (the emu test preset: label gpu, ZAYA_NCCL_LIB), one process
  # per test case, `jobs` at a time.
  filter=()
  [ -n "${GTEST_FILTER:-}" ] && mapfile -t filter < <(python3 scripts/gpu_emu/summary.py filter "$GTEST_FILTER")
  set +e
  ctest --preset emu -j "$jobs" --timeout "$timeout_s" "${filter[@]}" \
    --output-junit "$root/$out/log/ctest.xml" 2>&1 | tee "$out/log/ctest.log"
  status=${PIPESTATUS[0]}
  set -e
  ctest --preset emu --show-only=json-v1 "${filter[@]}" >"$out/log/ctest.json"
  python3 scripts/gpu_emu/summary.py summary "$out/log/ctest.xml" "$out/log/ctest.json" |
    tee "$summary"
else
  for t in "${tests[@]}"; do
    echo "== $t"
    set +e
    (cd "$build/tests" && timeout "$timeout_s" "$root/$(path_of "$t")") >"$out/log/$t.log" 2>&1
    rc=$?
    set -e
    pass=$(grep -c '^\[       OK \]' "$out/log/$t.log" || true)
    fail=$(grep -cE '^\[  FAILED  \].*\([0-9]+ ms\)$' "$out/log/$t.log" || true)
    skip=$(grep -c '^\[  SKIPPED \]' "$out/log/$t.log" || true)
    echo "$t rc=$rc passed=$pass failed=$fail skipped=$skip" | tee -a "$summary"
    grep -E '^\[  FAILED  \].*\([0-9]+ ms\)$' "$out/log/$t.log" || true
    [ "$rc" -eq 0 ] || { status=1; [ "$fail" -gt 0 ] || tail -5 "$out/log/$t.log"; }
  done
fi
echo "summary: $summary, logs: $out/log/"
exit "$status"
