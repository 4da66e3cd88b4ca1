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
  # The address build's instrumented aotc runs at build time too (test/cuda's kernel listings).
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
build=${AOTC_BUILD_DIR:-$default_build}
if [ -n "$san" ]; then
  # The sanitizer suites' models are compiled by the normal build's aotc (AOTC_HOST_AOTC),
  # brought up to date here (and by the tree's aotc_host target on every build); the thread
  # build then builds no compiler (docs/testing.md "Sanitizer suites").
  host_cfg=()
  if [ -z "${AOTC_HOST_AOTC:-}" ]; then
    if [ "$(cd "$build" 2>/dev/null && pwd)" = "$root/build" ]; then
      echo "build.sh: AOTC_BUILD_DIR=$build is the normal build's folder, which compiles the sanitizer build's models" >&2
      exit 2
    fi
    (unset AOTC_SANITIZE ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS OMP_TOOL_LIBRARIES
     configure "$root/build" -DCMAKE_BUILD_TYPE=Release
     cmake --build "$root/build" -j "${AOTC_JOBS:-2}" --target aotc)
    AOTC_HOST_AOTC=$root/build/tools/aotc/aotc
    host_cfg=("-DAOTC_HOST_BUILD_DIR=$root/build")
  fi
  host_cfg+=("-DAOTC_HOST_AOTC=$AOTC_HOST_AOTC")
  cfg+=("${host_cfg[@]}")
  # A folder configured before (or with another aotc) takes this one.
  if [ -f "$build/CMakeCache.txt" ]; then
    for d in "${host_cfg[@]}"; do
      kv=${d#-D}
      if ! grep -q "^${kv%%=*}:[A-Z]*=${kv#*=}\$" "$build/CMakeCache.txt"; then
        cmake "$build" "${host_cfg[@]}" > /dev/null
        break
      fi
    done
  fi
fi
configure "$build" "${cfg[@]}"
cmake --build "$build" -j "${AOTC_JOBS:-2}"
