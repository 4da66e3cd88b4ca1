#!/usr/bin/env bash
# README command 2: installs what is missing, builds, runs every test (Catch2 units,
# lit stage tests, end-to-end tests) through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
build=${AOTC_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure -j "${AOTC_JOBS:-2}" "$@"
