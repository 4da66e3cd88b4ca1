#!/usr/bin/env bash
# Runs every libFuzzer harness of test/fuzz/libfuzzer (docs/fuzzing.md) for SECONDS each.
#   bash scripts/fuzz.sh [--merge] [--only NAME[,NAME...]] [SECONDS]     (default 60)
# Builds build-asan/ first when needed (AOTC_SANITIZE=address scripts/build.sh). Each
# harness fuzzes a working corpus build-asan/fuzz-work/<name>/corpus (started from the
# committed test/fuzz/corpus/<name> and test/fuzz/regressions/<name>, which are only read)
# with -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10; crashes, out-of-memory and
# timeout inputs land in build-asan/fuzz-work/<name>/artifacts/. Prints executions and
# findings per harness; exits 1 when any harness found something.
# --merge: afterwards, merges the working corpus into test/fuzz/corpus/<name>
# (-merge=1: only inputs that add coverage are copied).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
merge=0 only="" secs=60
while [ $# -gt 0 ]; do
  case "$1" in
    --merge) merge=1 ;;
    --only) only=$2; shift ;;
    --only=*) only=${1#--only=} ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) secs=$1 ;;
  esac
  shift
done
build=$root/build-asan
harnesses=(pt2 json fx stage safetensors derivatives pipeline)
if [ -n "$only" ]; then IFS=, read -r -a harnesses <<< "$only"; fi
if [ ! -f "$build/build.ninja" ]; then
  AOTC_SANITIZE=address bash "$root/scripts/build.sh"
fi
ninja -C "$build" -j "${AOTC_JOBS:-2}" $(printf 'fuzz_%s ' "${harnesses[@]}")
export AOTC_SANITIZE=address
# shellcheck source=sanitizer-env.sh
source "$root/scripts/sanitizer-env.sh"
found=0
printf '%-12s %12s %8s %8s %8s %8s\n' harness executions crashes ooms timeouts corpus
for h in "${harnesses[@]}"; do
  w=$build/fuzz-work/$h
  mkdir -p "$w/corpus" "$w/artifacts"
  dirs=()
  for d in "$root/test/fuzz/corpus/$h" "$root/test/fuzz/regressions/$h"; do
    if [ -d "$d" ] && [ -n "$(ls -A "$d")" ]; then dirs+=("$d"); fi
  done
  before=$(ls "$w/artifacts" | wc -l)
  "$build/test/fuzz/libfuzzer/fuzz_$h" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
    -max_len=65536 -dict="$build/test/fuzz/libfuzzer/$h.dict" -artifact_prefix="$w/artifacts/" \
    -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 -max_total_time="$secs" \
    -print_final_stats=1 -print_funcs=0 "$w/corpus" "${dirs[@]}" > "$w/fuzz.log" 2>&1 || true
  execs=$(grep -o '^#[0-9]*' "$w/fuzz.log" | tail -1 | tr -d '#')
  new=$(( $(ls "$w/artifacts" | wc -l) - before ))
  crashes=$(ls "$w/artifacts" | grep -c '^crash-' || true)
  ooms=$(ls "$w/artifacts" | grep -c '^oom-' || true)
  touts=$(ls "$w/artifacts" | grep -c '^timeout-' || true)
  printf '%-12s %12s %8s %8s %8s %8s\n' "$h" "${execs:-0}" "$crashes" "$ooms" "$touts" "$(ls "$w/corpus" | wc -l)"
  [ "$new" -gt 0 ] && found=1
  if [ "$merge" = 1 ]; then
    mkdir -p "$root/test/fuzz/corpus/$h"
    "$build/test/fuzz/libfuzzer/fuzz_$h" -merge=1 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -timeout=10 -max_len=65536 "$root/test/fuzz/corpus/$h" "$w/corpus" > "$w/merge.log" 2>&1
  fi
done
[ "$found" = 0 ] || echo "fuzz.sh: new findings under $build/fuzz-work/*/artifacts (reproduce: the harness binary with the file as its argument)"
exit "$found"
