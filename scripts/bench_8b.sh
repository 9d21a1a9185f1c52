#!/usr/bin/env bash
# The real-size benchmark of docs/quantization.md: a random-weight model of ZAYA1-8B's exact
# shapes (configs/models/zaya1-8b.json: 8,840,488,784 parameters, 17.7 GB of bf16 — written, not
# committed), quantized with `zaya quantize` to each type, then for each form:
#   - decode tokens/s and its share of the read-bandwidth bound (zaya bench decode),
#   - prefill tokens/s at 512 and 2048 prompt tokens (zaya bench decode --prompt-tokens),
#   - load time and resident memory (the bench's load line; /usr/bin/time's maximum resident set),
# and the next-token distributions of each quantized form against bf16 (KL divergence, top-1
# agreement) over a few hundred positions, mixed policy and blanket (benchmarks/
# bench_quant_quality).
#
# usage: scripts/bench_8b.sh [DIR] (default /var/tmp/zaya-8b; about 60 GB of disk for all forms)
# Environment: BUILD (default build/release), TYPES (default "q8_0 q5_k_m q4_k_m"), PROMPTS
# (prefill lengths, default "512 2048"), STEPS (what
# to run, default "write quantize decode prefill quality").
# Everything is printed; copy the output into a benchmarks/results/ file with the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/var/tmp/zaya-8b}
build=${BUILD:-build/release}
types=${TYPES:-"q8_0 q5_k_m q4_k_m"}
steps=${STEPS:-"write quantize decode prefill quality"}
zaya=$build/zaya
mkdir -p "$dir"
has() { [[ " $steps " == *" $1 "* ]]; }
form_path() { if [ "$1" = bf16 ]; then echo "$dir/bf16"; else echo "$dir/$1.gguf"; fi; }

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(free -g | awk '/Mem:/ {print $2}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== zaya: $($zaya --version | head -1)"

if has write && [ ! -f "$dir/bf16/config.json" ]; then
  tok=()
  [ -f build/tokenizer-cache/gemma3/tokenizer.json ] &&
    tok=(--tokenizer build/tokenizer-cache/gemma3/tokenizer.json)
  echo "== writing the random bf16 model"
  "$build/benchmarks/random_model" configs/models/zaya1-8b.json "$dir/bf16" "${tok[@]}"
fi

if has quantize; then
  for t in $types; do
    [ -f "$dir/$t.gguf" ] && continue
    echo "== zaya quantize --type $t"
    /usr/bin/time -f "quantize $t: %e s, max resident %M KiB" \
      "$zaya" quantize --model "$dir/bf16" --type "$t" --out "$dir/$t.gguf" --quiet
  done
  if [ ! -f "$dir/q4_k_m-blanket.gguf" ] && [[ " $types " == *" q4_k_m "* ]] && has quality; then
    echo "== zaya quantize --type q4_k_m --blanket"
    "$zaya" quantize --model "$dir/bf16" --type q4_k_m --blanket --out "$dir/q4_k_m-blanket.gguf" \
      --quiet
  fi
fi

for f in bf16 $types; do
  m=$(form_path "$f")
  [ -e "$m" ] || continue
  if has decode; then
    echo "== $f: decode (33 steps after a 16-token prompt)"
    /usr/bin/time -f "$f decode: max resident %M KiB" "$zaya" bench decode --model "$m" --tokens 33
  fi
  if has prefill; then
    for p in ${PROMPTS:-512 2048}; do
      echo "== $f: prefill of $p tokens"
      "$zaya" bench decode --model "$m" --prompt-tokens "$p" --tokens 2 | grep -E "prefill|batch"
    done
  fi
done

if has quality; then
  models=()
  for f in $types q4_k_m-blanket; do [ -f "$dir/$f.gguf" ] && models+=("$dir/$f.gguf"); done
  echo "== next-token distributions against bf16 (256 random tokens)"
  "$build/benchmarks/bench_quant_quality" "$dir/bf16" "${models[@]}" --tokens 256
fi
