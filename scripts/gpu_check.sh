#!/usr/bin/env bash
# The GPU check of a CUDA host, run from inside the bundle folder that scripts/bundle_gpu.sh made
# (zaya-gpu/: bin/zaya, tests/gpu/test_*, tests/fixtures, benchmarks/bench_gpu, this script, MANIFEST):
#   bash scripts/gpu_check.sh
# 1. host facts: kernel, glibc (against the bundle's need), nvidia-smi, the cuBLASLt it found;
# 2. cuBLAS(Lt) (and NCCL) from the host's PyTorch wheels (site-packages/nvidia/*/lib) or CUDA
#    install, put on LD_LIBRARY_PATH (ZAYA_CUBLAS_DIR=DIR overrides the search);
# 3. every GPU op test (tests/gpu/test_*, gtest --gtest_brief), each under its own timeout; a
#    failed or crashed one's failing tests again under compute-sanitizer's memcheck, where the host
#    has it (the summary names its error count);
# 4. model parity: the model test executables (tests/gpu/test_model_* and test_cli_eval*:
#    test_model_transformer_gpu, test_cli_eval_gpu), and `zaya eval --device gpu`
#    against `--device cpu` and the float64 twin's expected values on every twin case
#    (tests/fixtures/model/* and the sliding-window cases tests/fixtures/model_swa/*; logits 1e-4
#    of max |logit|, loss 1e-5, gradients 1e-3 relative L2);
# 5. the GPU benchmark (bench_gpu: fractions of the copy bandwidth and the BF16 peak it measures);
# 6. the training step benchmark: zaya bench step --device gpu at its defaults (gpu-step-bench.json,
#    36 ZAYA1-base sub-layers, 2 × 4096 tokens, bf16; 1 warm-up + 2 timed + 1 profiled steps), then
#    again with the attention through GEMMs (ZAYA_GPU_ATTENTION=gemm);
# then ONE summary. Every part runs even when an earlier one failed; exit 0 only if all passed (a
# skipped GPU test is a failure here: this host should have a GPU). Planned to finish in under 9.5
# minutes on one H200: the parts' time limits (seconds; environment overrides) are
#   ZAYA_CHECK_TEST_S=120 per test executable, ZAYA_CHECK_TESTS_S=240 all op tests together,
#   ZAYA_CHECK_MODEL_S=90 model parity, ZAYA_CHECK_BENCH_S=150 the benchmark,
#   ZAYA_CHECK_STEP_S=120 the step benchmark (planned ≤ 90 s: setup + 4 steps of ~46 TFLOP),
#   ZAYA_CHECK_STEP_GEMM_S=90 the same with ZAYA_GPU_ATTENTION=gemm (the opt-in GEMM attention);
#   ZAYA_CHECK_TUNE_S=120 zaya tune gemm on ZAYA1-base's shapes;
#   ZAYA_CHECK_WINDOW_S=120 the windowed step (7, its four runs together);
#   ZAYA_CHECK_SANITIZE_S=90 memcheck reruns of failed op tests (3), all together;
#   ZAYA_GPU_TRAIN_STEPS=20 steps of test_train_trainer_gpu (GPU trainer vs CPU trainer).
# 7. the windowed training step (scripts/bench_window_step.sh; docs/model.md §4.9): the first 8
#    sub-layers of gpu-step-bench.json, 1 × 8192 and 1 × 32768 tokens, with full attention and with
#    a 4096-key window on every attention sub-layer; the attention's time per token must stay flat
#    in T when windowed (it is O(T·W)).
# Output: everything on stdout and in gpu_check.log, summary.txt and bench_gpu.json under $OUT
# when it is set (else under logs/ in the bundle); per-test gtest JSON under logs/.
set -uo pipefail

bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$bundle" || exit 2
logs=$bundle/logs
out=${OUT:-$logs}
mkdir -p "$logs" "$out"

test_s=${ZAYA_CHECK_TEST_S:-120}
tests_s=${ZAYA_CHECK_TESTS_S:-240}
model_s=${ZAYA_CHECK_MODEL_S:-90}
bench_s=${ZAYA_CHECK_BENCH_S:-150}
step_s=${ZAYA_CHECK_STEP_S:-120}
step_gemm_s=${ZAYA_CHECK_STEP_GEMM_S:-90}
tune_s=${ZAYA_CHECK_TUNE_S:-120}
window_s=${ZAYA_CHECK_WINDOW_S:-120}
sanitize_s=${ZAYA_CHECK_SANITIZE_S:-90}

failures=()     # one line per failed part
op_lines=()     # one line per op test executable
model_lines=()  # one line per model check
host_lines=()   # host facts for the summary

section() { printf '\n======== %s (%ds)\n' "$1" "$(($(date +%s) - t_start))"; }
fail() { failures+=("$1"); echo "gpu_check: FAILED: $1"; }

# ---------------------------------------------------------------- host facts
host_facts() {
  section "host"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); $(uname -srm); $(nproc) CPUs"
  [ -f MANIFEST ] && sed -n '1,/^$/p' MANIFEST
  local glibc need
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  need=$(sed -n 's/^glibc needed: *//p' MANIFEST 2>/dev/null)
  echo "glibc: ${glibc:-unknown} (the bundle needs ${need:-?})"
  host_lines+=("glibc ${glibc:-?} (needs ${need:-?})")
  if [ -n "$glibc" ] && [ -n "$need" ] &&
    [ "$(printf '%s\n%s\n' "$need" "$glibc" | sort -V | head -1)" != "$need" ]; then
    fail "host glibc $glibc is older than the bundle's $need"
  fi
  if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi || fail "nvidia-smi"
    local gpu
    gpu=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm \
      --format=csv,noheader 2>/dev/null | head -1)
    host_lines+=("GPU: ${gpu:-?}")
  else
    fail "no nvidia-smi on this host"
  fi
  command -v nvcc >/dev/null && nvcc --version | tail -2
}

# ---------------------------------------------------------------- cuBLAS(Lt)
find_cublas() {
  section "cuBLASLt"
  local want dirs=() d
  want=$(sed -n 's/^needs: *//p' MANIFEST 2>/dev/null | tr ' ' '\n' | grep -m1 '^libcublasLt')
  want=${want:-libcublasLt.so.13}
  if [ -n "${ZAYA_CUBLAS_DIR:-}" ]; then
    dirs=("$ZAYA_CUBLAS_DIR")
  else
    # The PyTorch wheels: nvidia/<pkg>/lib (cu13/lib holds cuBLAS for CUDA 13, nccl/lib NCCL).
    mapfile -t dirs < <(python3 - 2>/dev/null <<'EOF'
import glob, os, site, sys
roots = []
try:
    import nvidia
    roots += list(nvidia.__path__)
except Exception:
    pass
for sp in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    roots.append(os.path.join(sp, "nvidia"))
seen = []
for r in roots:
    for lib in sorted(glob.glob(os.path.join(r, "*", "lib"))):
        lib = os.path.realpath(lib)
        if lib not in seen:
            seen.append(lib)
print("\n".join(seen))
EOF
    )
    for d in /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib \
      /usr/local/lib/python3*/dist-packages/nvidia/*/lib /usr/local/cuda/lib64 \
      /usr/local/cuda/targets/x86_64-linux/lib; do
      [ -d "$d" ] && dirs+=("$d")
    done
  fi
  local found="" nccl="" extra=""
  for d in "${dirs[@]}"; do
    [ -z "$found" ] && [ -e "$d/$want" ] && found=$d
    [ -z "$nccl" ] && compgen -G "$d/libnccl.so*" >/dev/null && nccl=$d
  done
  if [ -z "$found" ]; then
    # Last resort: the loader's cache.
    if ldconfig -p 2>/dev/null | grep -q "$want"; then
      echo "cuBLASLt: $want from the loader's cache: $(ldconfig -p | grep -m1 "$want")"
      host_lines+=("cuBLASLt: $(ldconfig -p | grep -m1 "$want" | awk '{print $NF}') (ldconfig)")
    else
      echo "searched: ${dirs[*]:-nothing}"
      fail "no $want on this host (set ZAYA_CUBLAS_DIR)"
    fi
  else
    extra=$found
    [ -n "$nccl" ] && [ "$nccl" != "$found" ] && extra=$extra:$nccl
    export LD_LIBRARY_PATH=$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    local real
    real=$(readlink -f "$found/$want")
    echo "cuBLASLt: $real"
    [ -n "$nccl" ] && echo "NCCL: $(readlink -f "$(compgen -G "$nccl/libnccl.so*" | head -1)")"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    host_lines+=("cuBLASLt: $real")
    python3 -c 'import importlib.metadata as m
for p in ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-nccl-cu13", "torch"):
    try: print(p, m.version(p))
    except Exception: pass' 2>/dev/null
  fi
  if command -v ldd >/dev/null; then
    echo "ldd bin/zaya:"
    ldd bin/zaya
    ldd bin/zaya | grep -q "not found" && fail "bin/zaya: a library is not found (ldd above)"
  fi
}

# ---------------------------------------------------------------- gtest executables
# run_gtest NAME EXE TIMEOUT: one line "NAME: …" into $gtest_line; returns 0 when all passed.
run_gtest() {
  local name=$1 exe=$2 limit=$3 log=$logs/$1.log rc ran passed skipped failed
  if [ "$limit" -lt 10 ]; then
    gtest_line="$name: NOT RUN (time budget spent)"
    return 1
  fi
  echo "-- $name (timeout ${limit}s)"
  ZAYA_TEST_FIXTURES_DIR=$bundle/tests/fixtures ZAYA_BINARY_PATH=$bundle/bin/zaya \
    ZAYA_GPU_TRAIN_STEPS=${ZAYA_GPU_TRAIN_STEPS:-20} \
    timeout -k 5 "$limit" "$exe" --gtest_brief=1 --gtest_color=no \
    --gtest_output="json:$logs/$name.json" >"$log" 2>&1
  rc=$?
  cat "$log"
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran\..*/\1/p' "$log" | tail -1)
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -1)
  skipped=${skipped:-0}
  if [ -z "$ran" ] || [ -z "$passed" ]; then
    local why="exit $rc"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && why="TIMEOUT after ${limit}s"
    [ "$rc" -gt 128 ] && [ "$rc" != 137 ] && why="CRASHED (signal $((rc - 128)))"
    gtest_line="$name: $why before its summary (log: logs/$name.log)"
    return 1
  fi
  failed=$((ran - passed - skipped))
  # Tests of the no-GPU error path skip where a GPU is present (tests/test_skips.h): expected here.
  local present
  present=$(grep -c '^\[ SKIP WHY \] .*: a GPU is present' "$log")
  gtest_line="$name: $passed/$ran passed"
  [ "$failed" -gt 0 ] && gtest_line+=", $failed FAILED"
  [ "$present" -gt 0 ] && gtest_line+=", $present skipped (a GPU is present: expected)"
  [ "$skipped" -gt "$present" ] && gtest_line+=", $((skipped - present)) SKIPPED (no GPU seen?)"
  [ "$rc" != 0 ] && [ "$failed" = 0 ] && gtest_line+=", exit $rc"
  op_passed=$((op_passed + passed)) op_failed=$((op_failed + failed))
  op_skipped=$((op_skipped + skipped - present))
  [ "$rc" = 0 ] && [ "$failed" = 0 ] && [ "$skipped" = "$present" ]
}

# memcheck NAME EXE: after a failed or crashed test executable, its failed tests (at most 5; after
# a crash, all of them) again under compute-sanitizer's memcheck, within what is left of
# sanitize_s; one line "memcheck: …" into $memcheck_line (empty when not run). Out-of-
# bounds accesses and races are the likeliest first-run failures, and this names the kernel and
# the address in the same device call.
memcheck_line=""
memcheck() {
  local name=$1 exe=$2 log=$logs/$1.log tool filter left
  memcheck_line=""
  tool=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  [ -n "$tool" ] || return 0
  left=$((sanitize_deadline - $(date +%s)))
  [ "$left" -ge 15 ] || return 0
  filter=$(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/.]*\)\( (.*\)\?$/\1/p' "$log" | sort -u | head -5 |
    paste -sd: -)
  # A crash under --gtest_brief names no test: then all of them.
  [ -n "$filter" ] || filter='*'
  echo "-- $name under memcheck: $filter (timeout ${left}s)"
  ZAYA_TEST_FIXTURES_DIR=$bundle/tests/fixtures ZAYA_BINARY_PATH=$bundle/bin/zaya \
    timeout -k 5 "$left" "$tool" --tool memcheck --print-limit 10 --error-exitcode 99 "$exe" \
    --gtest_filter="$filter" --gtest_brief=1 --gtest_color=no >"$logs/$name.memcheck.log" 2>&1
  local rc=$? errors
  errors=$(grep -m1 'ERROR SUMMARY' "$logs/$name.memcheck.log" | sed 's/^=* *//')
  tail -40 "$logs/$name.memcheck.log"
  memcheck_line="memcheck of $filter: ${errors:-no summary (exit $rc)} (logs/$name.memcheck.log)"
}

op_tests() {
  section "GPU op tests"
  local deadline=$(($(date +%s) + tests_s)) exe name
  sanitize_deadline=$(($(date +%s) + tests_s + sanitize_s))
  op_passed=0 op_failed=0 op_skipped=0
  local found=0
  for exe in tests/gpu/test_*; do
    [ -x "$exe" ] || continue
    name=$(basename "$exe")
    [[ $name =~ ^test_(model_|cli_eval) ]] && continue  # model parity, below
    found=1
    local left=$((deadline - $(date +%s)))
    if ! run_gtest "$name" "$exe" "$((left < test_s ? left : test_s))"; then
      fail "$gtest_line"
      [[ $gtest_line == *TIMEOUT* || $gtest_line == *"NOT RUN"* ]] || memcheck "$name" "$exe"
    else
      memcheck_line=""
    fi
    op_lines+=("$gtest_line")
    [ -z "$memcheck_line" ] || op_lines+=("  $memcheck_line")
  done
  [ "$found" = 1 ] || fail "no GPU op test executables in tests/gpu"
}

# ---------------------------------------------------------------- model parity
# compare_py LABEL LOSS LOGITS GRADS REF_LOSS REF_LOGITS REF_GRADS: one line; exit 1 past the
# tolerances. REF_LOSS "-" reads the F64 `loss` of REF_GRADS (the twin's expected.safetensors holds
# loss, logits and every gradient). python3 + numpy: the PyTorch image has both.
compare_py() {
  python3 - "$@" <<'PY'
import json, struct, sys
import numpy as np

def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    dt = {"F32": np.float32, "F64": np.float64}
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype=dt[v["dtype"]])
            .astype(np.float64) for k, v in head.items() if k != "__metadata__"}

label, loss, logits, grads, ref_loss, ref_logits, ref_grads = sys.argv[1:8]
rg = load(ref_grads)
ref_loss = float(rg["loss"][0]) if ref_loss == "-" else float(ref_loss)
bad = []
d_loss = abs(float(loss) - ref_loss)
if d_loss > 1e-5:
    bad.append("loss %.3g" % d_loss)
got, r = load(logits)["logits"], load(ref_logits)["logits"]
d_logits = float(np.max(np.abs(got - r)) / max(np.max(np.abs(r)), 1e-30))
if d_logits > 1e-4:
    bad.append("logits %.3g" % d_logits)
g, d_grads = load(grads), 0.0
for name, rv in rg.items():
    if name in ("logits", "loss"):
        continue
    if name not in g:
        bad.append("no gradient " + name)
        continue
    norm = float(np.linalg.norm(rv))
    if norm > 0:
        rel = float(np.linalg.norm(g[name] - rv)) / norm
    else:  # zero in exact arithmetic: |g| <= 1e-6 (as tests/model) reads as rel 1e-3
        rel = float(np.max(np.abs(g[name]), initial=0.0)) * 1e3
    d_grads = max(d_grads, rel)
    if rel > 1e-3:
        bad.append("grad %s %.3g" % (name, rel))
print("%s: logits %.2g, loss %.2g, grads %.2g%s" % (label, d_logits, d_loss, d_grads,
      ("; FAILED " + ", ".join(bad[:4])) if bad else ""))
sys.exit(1 if bad else 0)
PY
}

model_parity() {
  section "model parity"
  local deadline=$(($(date +%s) + model_s)) exe name left
  for exe in tests/gpu/test_*; do
    [ -x "$exe" ] || continue
    name=$(basename "$exe")
    [[ $name =~ ^test_(model_|cli_eval) ]] || continue
    left=$((deadline - $(date +%s)))
    run_gtest "$name" "$exe" "$((left < test_s ? left : test_s))" || fail "$gtest_line"
    model_lines+=("$gtest_line")
  done
  # zaya eval on every twin case: the GPU against the twin's expected values and against the CPU.
  local have_py=1 case dir tmp=$logs/eval passed=0 total=0 dev rc ok line g c twin cpu
  local -A loss
  python3 -c 'import numpy' 2>/dev/null || have_py=0
  mkdir -p "$tmp"
  for dir in tests/fixtures/model/*/ tests/fixtures/model_swa/*/; do
    dir=${dir%/}
    case=$(basename "$dir")
    [ -f "$dir/config.json" ] || continue
    total=$((total + 1))
    left=$((deadline - $(date +%s)))
    if [ "$left" -lt 5 ]; then
      model_lines+=("eval $case: NOT RUN (time budget spent)")
      fail "eval $case: not run (time budget)"
      continue
    fi
    ok=1
    for dev in gpu cpu; do
      timeout -k 5 "$left" bin/zaya eval --device "$dev" --model "$dir" --tokens "$dir/tokens.txt" \
        --logits "$tmp/$case.$dev.logits.safetensors" --grads "$tmp/$case.$dev.grads.safetensors" \
        --quiet >"$tmp/$case.$dev.out" 2>&1
      rc=$?
      loss[$dev]=$(sed -n 's/^loss //p' "$tmp/$case.$dev.out")
      if [ "$rc" != 0 ] || [ -z "${loss[$dev]}" ]; then
        ok=0
        echo "eval $case --device $dev: exit $rc: $(tail -3 "$tmp/$case.$dev.out")"
      fi
    done
    g=$tmp/$case.gpu c=$tmp/$case.cpu
    if [ "$ok" = 1 ] && [ "$have_py" = 1 ]; then
      twin=$(compare_py "vs twin" "${loss[gpu]}" "$g.logits.safetensors" "$g.grads.safetensors" - \
        "$dir/expected.safetensors" "$dir/expected.safetensors") || ok=0
      cpu=$(compare_py "vs cpu" "${loss[gpu]}" "$g.logits.safetensors" "$g.grads.safetensors" \
        "${loss[cpu]}" "$c.logits.safetensors" "$c.grads.safetensors") || ok=0
      line="$case: $twin | $cpu"
    elif [ "$ok" = 1 ]; then
      line="$case: loss gpu ${loss[gpu]} cpu ${loss[cpu]} (no numpy here: the loss only)"
      awk -v a="${loss[gpu]}" -v b="${loss[cpu]}" \
        'BEGIN { d = a - b; exit !(d <= 1e-5 && -d <= 1e-5) }' || ok=0
    else
      line="$case: zaya eval failed (logs/eval/$case.*.out)"
    fi
    echo "$line"
    [ "$ok" = 1 ] && passed=$((passed + 1)) || fail "eval $line"
    model_lines+=("eval $line")
  done
  model_lines+=("zaya eval --device gpu: $passed/$total twin cases within tolerance")
}

# ---------------------------------------------------------------- benchmark
bench() {
  section "benchmark"
  if [ ! -x benchmarks/bench_gpu ]; then
    fail "no benchmarks/bench_gpu"
    return
  fi
  timeout -k 5 "$bench_s" benchmarks/bench_gpu --json "$out/bench_gpu.json" >"$logs/bench_gpu.out" \
    2>"$logs/bench_gpu.err"
  local rc=$?
  cat "$logs/bench_gpu.err" "$logs/bench_gpu.out"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && fail "bench_gpu: TIMEOUT after ${bench_s}s (rows so far above)"
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && fail "bench_gpu: exit $rc"
  grep -q "^bench_gpu: skipped" "$logs/bench_gpu.out" && fail "bench_gpu skipped: no GPU seen"
  timeout -k 5 "$tune_s" bin/zaya tune gemm --config tests/fixtures/configs/zaya1-base.json \
    --tokens 4096 --reps 5 --candidates 4 --out "$out/gemm_table.csv" >"$logs/tune_gemm.out" 2>&1 &&
    tail -2 "$logs/tune_gemm.out" ||
    fail "zaya tune gemm (zaya1-base, 4096 tokens): exit $? (logs/tune_gemm.out)"
}

# zaya bench step --device gpu (tokens/s, MFU against the BF16 GEMM rate it measures, time split).
step_bench() {
  section "step benchmark"
  timeout -k 5 "$step_s" bin/zaya bench step --device gpu --steps 2 --warmup 1 --profile-steps 1 \
    >"$out/bench_step.txt" 2>&1
  local rc=$?
  cat "$out/bench_step.txt"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && fail "bench step: TIMEOUT after ${step_s}s"
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && fail "bench step --device gpu: exit $rc"
  # The same step with the attention through GEMMs (opt-in: its MFU decides the default).
  section "step benchmark, ZAYA_GPU_ATTENTION=gemm"
  ZAYA_GPU_ATTENTION=gemm timeout -k 5 "$step_gemm_s" bin/zaya bench step --device gpu --steps 2 \
    --warmup 1 --profile-steps 1 >"$out/bench_step_gemm.txt" 2>&1
  rc=$?
  cat "$out/bench_step_gemm.txt"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && fail "bench step (gemm attention): TIMEOUT after ${step_gemm_s}s"
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && fail "bench step (gemm attention): exit $rc"
}

# The windowed step (scripts/bench_window_step.sh, which the bundle carries): its table lines go to
# window_lines; it fails when a run fails or when the windowed attention's seconds per token at
# 32768 exceed 2x those at 8192 (full causal attention: ~4x).
window_lines=()
window_step() {
  section "windowed step"
  bash scripts/bench_window_step.sh --device gpu --zaya bin/zaya \
    --config configs/models/gpu-step-bench.json --window 4096 --tokens "8192 32768" \
    --out "$logs/window" --time-limit "$window_s" >"$logs/window.out" 2>&1
  local rc=$?
  cat "$logs/window.out"
  mapfile -t window_lines <"$logs/window.out"
  [ "$rc" = 0 ] || fail "windowed step: exit $rc (a run failed, or the windowed attention's time \
per token grew more than 2x from 8192 to 32768 tokens; logs/window/)"
}

summary() {
  section "summary"
  echo "host: ${host_lines[*]/%/;}"
  echo "op parity: $op_passed passed, $op_failed failed, $op_skipped skipped tests in ${#op_lines[@]} executables"
  [ "${#op_lines[@]}" = 0 ] || printf '  %s\n' "${op_lines[@]}"
  echo "model parity:"
  [ "${#model_lines[@]}" = 0 ] || printf '  %s\n' "${model_lines[@]}"
  echo "benchmarks (rate, fraction of the copy bandwidth or of the BF16 peak measured in the same run):"
  if grep -q '^copy bandwidth' "$logs/bench_gpu.out" 2>/dev/null; then
    sed -n '/^copy bandwidth/,$p' "$logs/bench_gpu.out" | sed 's/^/  /'
  elif [ -s "$logs/bench_gpu.out" ] || [ -s "$logs/bench_gpu.err" ]; then
    echo "  no table; its last lines:"
    tail -5 "$logs/bench_gpu.err" "$logs/bench_gpu.out" | sed 's/^/  /'
  else
    echo "  none (see the benchmark section)"
  fi
  echo "step benchmark (zaya bench step --device gpu):"
  grep -E '^(bench step|tokens/s|activations|model TFLOP|GEMM engine|BF16 GEMM|MFU|GEMM plans)' "$out/bench_step.txt" 2>/dev/null |
    sed 's/^/  /' || echo "  none (see the step benchmark section)"
  echo "step benchmark, ZAYA_GPU_ATTENTION=gemm:"
  grep -E '^(tokens/s|MFU|  attention)' "$out/bench_step_gemm.txt" 2>/dev/null |
    sed 's/^/  /' || echo "  none (see its section)"
  echo "windowed step (attention fwd+bwd of the profiled step):"
  [ "${#window_lines[@]}" = 0 ] || printf '  %s\n' "${window_lines[@]}"
  if [ "${#failures[@]}" = 0 ]; then
    echo "RESULT: PASS ($(($(date +%s) - t_start)) s)"
  else
    echo "RESULT: FAIL, ${#failures[@]} part(s) ($(($(date +%s) - t_start)) s):"
    printf '  %s\n' "${failures[@]}"
  fi
}

main() {
  t_start=$(date +%s)
  op_passed=0 op_failed=0 op_skipped=0
  host_facts
  find_cublas
  op_tests
  model_parity
  bench
  step_bench
  window_step
  summary | tee "$out/summary.txt"
  [ "${#failures[@]}" = 0 ]
}

main "$@" 2>&1 | tee "$out/gpu_check.log"
exit "${PIPESTATUS[0]}"
