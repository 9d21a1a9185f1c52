#!/usr/bin/env bash
# Fetches the official `openai` npm package (v5.23.2: no dependencies; Node ≥ 18 has fetch) into
# $ZAYA_NODE_CACHE (default: <repo>/build/node-cache) as node_modules/openai, for the server test
# that drives `zaya serve` with the real client (tests/infer_server/openai_client.mjs; run it with
# NODE_PATH=<cache>/node_modules). Prints the node_modules path. Idempotent: no network if present.
# Uses `npm pack`; without npm, downloads the same tarball from the registry with curl.
set -euo pipefail

version=5.23.2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${ZAYA_NODE_CACHE:-$root/build/node-cache}"
modules="$cache/node_modules"
out="$modules/openai"

if [ -s "$out/package.json" ] && grep -q "\"version\": \"$version\"" "$out/package.json"; then
  echo "$modules"
  exit 0
fi
mkdir -p "$modules"
work="$(mktemp -d "$cache/tmp.XXXXXX")"
trap 'rm -rf "$work"' EXIT
if command -v npm >/dev/null 2>&1; then
  (cd "$work" && npm pack --silent "openai@$version" >/dev/null)
elif command -v curl >/dev/null 2>&1; then
  curl -fsSL -o "$work/openai-$version.tgz" \
    "https://registry.npmjs.org/openai/-/openai-$version.tgz"
else
  echo "fetch_openai_npm: neither npm nor curl found; install one, or unpack openai@$version" \
       "into $out" >&2
  exit 1
fi
tar -xzf "$work"/openai-*.tgz -C "$work"
rm -rf "$out.part" "$out"
mv "$work/package" "$out.part"
mv "$out.part" "$out"
echo "$modules"
