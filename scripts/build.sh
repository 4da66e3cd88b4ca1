#!/usr/bin/env bash
# Configures and builds aotc (clang-19 + lld-19, Ninja).
#   AOTC_SANITIZE unset/empty: Release into build/;
#   AOTC_SANITIZE=address|thread: a sanitizer build (-O1 -gline-tables-only) into
#   build-asan/ or build-tsan/ (docs/testing.md "Sanitizer suites").
# AOTC_BUILD_DIR picks another folder; AOTC_JOBS the parallelism (default 2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
san=${AOTC_SANITIZE:-}
case "$san" in
  "") default_build=$root/build; cfg=(-DCMAKE_BUILD_TYPE=Release) ;;
  address) default_build=$root/build-asan ;;
  thread) default_build=$root/build-tsan ;;
  *) echo "build.sh: AOTC_SANITIZE must be address or thread, not '$san'" >&2; exit 2 ;;
esac
if [ -n "$san" ]; then
  cfg=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only"
       "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" "-DAOTC_SANITIZE=$san")
  # The instrumented aotc runs at build time (models compiled by aotc_model()).
  # shellcheck source=sanitizer-env.sh
  source "$root/scripts/sanitizer-env.sh"
fi
build=${AOTC_BUILD_DIR:-$default_build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja "${cfg[@]}" \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
fi
cmake --build "$build" -j "${AOTC_JOBS:-2}"
