#!/usr/bin/env bash
# Fetches the official `openai` npm package (v5.23.2: no dependencies; Node ≥ 18 has fetch) into
# $ZAYA_NODE_CACHE (default: <repo>/build/node-cache) as node_modules/openai, for the server test
# that drives `zaya serve` with the real client (tests/serve/openai_client.mjs; run it with
# NODE_PATH=<cache>/node_modules). Prints the node_modules path. Idempotent: no network if present.
# Downloads with scripts/npm_tarball.sh (npm pack, or curl from the registry).
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
tarball="$(bash "$(dirname "${BASH_SOURCE[0]}")/npm_tarball.sh" openai "$version" "$work")"
tar -xzf "$tarball" -C "$work"
rm -rf "$out.part" "$out"
mv "$work/package" "$out.part"
mv "$out.part" "$out"
echo "$modules"
