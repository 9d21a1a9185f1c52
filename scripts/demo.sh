#!/usr/bin/env bash
# The main job, as far as zaya goes today: inspect ZAYA1-base's shape and evaluate a tiny
# committed model (loss, logits and every gradient) — the exact forward/backward every later
# stage (training, generation) builds on. Run after `make build` (the Makefile's demo target does).
set -euo pipefail
cd "$(dirname "$0")/.."
zaya=build/release/zaya
out=${ZAYA_DEMO_OUT:-build/demo}
mkdir -p "$out"

echo "== zaya inspect: ZAYA1-base (8.3B MoE, CCA attention)"
$zaya inspect tests/data/configs/zaya1-base.json

model=tests/data/model/tiny_a
echo
echo "== zaya inspect: the tiny test model in $model"
$zaya inspect "$model"

echo
echo "== zaya eval: loss, logits and gradients of $model on its token lines"
$zaya eval --model "$model" --tokens "$model/tokens.txt" \
  --logits "$out/logits.safetensors" --grads "$out/grads.safetensors"
echo "(the PyTorch twin's loss for the same input: see $model/expected.safetensors; 'make test' checks them)"
