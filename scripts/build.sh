#!/usr/bin/env bash
# Configures and builds aotc (clang-19 + lld-19, Ninja).
#   AOTC_SANITIZE unset/empty: Release into build/;
#   AOTC_SANITIZE=address|thread: a sanitizer build (-O1 -gline-tables-only) into
#   build-asan/ or build-tsan/ (docs/testing.md "Sanitizer suites"), whose models build/'s
#   aotc compiles (brought up to date here first; or $AOTC_HOST_AOTC); the thread build
#   builds no compiler.
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
  # The instrumented aotc runs at build time too (test/cuda's kernel listings).
  # shellcheck source=sanitizer-env.sh
  source "$root/scripts/sanitizer-env.sh"
fi
configure() { # $1: build folder, then cmake -D options; configures once
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$root" -B "$dir" -G Ninja "$@" \
      -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
      -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
  fi
}
if [ -n "$san" ]; then
  # The sanitizer suites' models are compiled by the normal build's aotc (AOTC_HOST_AOTC),
  # brought up to date here; the thread build then builds no compiler (docs/testing.md
  # "Sanitizer suites").
  if [ -z "${AOTC_HOST_AOTC:-}" ]; then
    configure "$root/build" -DCMAKE_BUILD_TYPE=Release
    (unset AOTC_SANITIZE ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS OMP_TOOL_LIBRARIES
     cmake --build "$root/build" -j "${AOTC_JOBS:-2}" --target aotc)
    AOTC_HOST_AOTC=$root/build/tools/aotc/aotc
  fi
  cfg+=("-DAOTC_HOST_AOTC=$AOTC_HOST_AOTC")
fi
build=${AOTC_BUILD_DIR:-$default_build}
configure "$build" "${cfg[@]}"
cmake --build "$build" -j "${AOTC_JOBS:-2}"
