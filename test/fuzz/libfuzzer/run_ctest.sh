#!/usr/bin/env bash
# ctest fuzz.libfuzzer.<name> (test/fuzz/libfuzzer/CMakeLists.txt, docs/fuzzing.md):
#   run_ctest.sh BINARY NAME FUZZ_ROOT WORK_DIR DICT RUNS
# 1. replays test/fuzz/corpus/NAME and test/fuzz/regressions/NAME (every input once;
#    regressions as files, with AOTC_FUZZ_JIT_EVERY=1);
# 2. fuzzes -seed=1 -runs=RUNS from them, new inputs going to WORK_DIR/corpus (the
#    committed folders are only read), so the run is deterministic for a given binary.
# Limits as the issue asks: -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10.
# A crash, a sanitizer report, an out-of-memory or a timeout fails the test; the input
# is left in WORK_DIR (crash-*, oom-*, timeout-*).
set -euo pipefail
bin=$1 name=$2 fuzz=$3 work=$4 dict=$5 runs=$6
root=$(cd "$(dirname "$0")/../../.." && pwd)
export AOTC_SANITIZE=address
# shellcheck source=../../../scripts/sanitizer-env.sh
source "$root/scripts/sanitizer-env.sh"
rm -rf "$work"
mkdir -p "$work/corpus"
limits=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -max_len=65536
        "-artifact_prefix=$work/" "-dict=$dict" -print_final_stats=1)
dirs=()
for d in "$fuzz/corpus/$name" "$fuzz/regressions/$name"; do
  if [ -d "$d" ] && [ -n "$(ls -A "$d")" ]; then dirs+=("$d"); fi
done
start=$(date +%s)
for d in "${dirs[@]}"; do
  echo "== $name: replay $d"
  # Regressions of fuzz_pipeline always get the JIT-vs-reference check (not 1 in 100).
  if [ "$d" = "$fuzz/regressions/$name" ]; then
    AOTC_FUZZ_JIT_EVERY=1 "$bin" "${limits[@]}" "$d"/*
  else
    "$bin" "${limits[@]}" -runs=0 "$work/corpus" "$d"
  fi
done
echo "== $name: fuzz -seed=1 -runs=$runs"
"$bin" "${limits[@]}" -seed=1 -runs="$runs" "$work/corpus" "${dirs[@]}"
echo "== $name: passed in $(( $(date +%s) - start )) s"
