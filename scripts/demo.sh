#!/usr/bin/env bash
# The main job: train a small ZAYA1 on the King James Bible (Debian's bible-kjv) and sample
# from it. Steps: dump the text → one document per chapter → train a 1024-token byte-fallback
# BPE → token shards (with a validation split) → `zaya train configs/kjv.toml` (prints
# step lines, validation loss and samples; checkpoints under runs/) → evaluate the result.
# Run after `make build` (the Makefile's demo target does). Re-running resumes/reuses.
set -euo pipefail
cd "$(dirname "$0")/.."
zaya=build/release/zaya
data=data/kjv

if [ ! -f "$data/chapters.done" ]; then
  echo "== dumping the King James Bible into one document per chapter ($data/chapters)"
  mkdir -p "$data/chapters"
  bible -f Gen1:1-Rev22:21 | awk -v dir="$data/chapters" '
    { ref = $1; sub(/:[0-9]+$/, "", ref); text = $0; sub(/^[^ ]+ /, "", text)
      if (ref != last) { n++; file = sprintf("%s/%04d.txt", dir, n); last = ref }
      print text > file }'
  touch "$data/chapters.done"
fi

if [ ! -f "$data/tokenizer.json" ]; then
  echo "== training a 1024-token BPE tokenizer"
  $zaya tokenizer-train --input "$data/chapters/*.txt" --vocab-size 1024 --out "$data/tokenizer.json"
fi

if [ ! -f "$data/shards/dataset.json" ]; then
  echo "== tokenizing into shards"
  $zaya data prepare --tokenizer "$data/tokenizer.json" --input "$data/chapters/*.txt" \
    --out "$data/shards"
fi

echo "== training (configs/kjv.toml; resumes from runs/kjv/checkpoints if present)"
$zaya train --config configs/kjv.toml "$@"

echo "== the trained model is a Hugging Face-layout directory:"
model="$(ls -d runs/kjv/checkpoints/step_*/model | tail -n 1)"
ls "$model"

echo "== sampling from it with the KV-cached decoder (zaya generate)"
$zaya generate --model "$model" --tokenizer "$data/tokenizer.json" --prompt "And God said" --echo \
  --max-new-tokens 60 --temperature 0.7 --top-p 0.95 --seed 1
