#!/usr/bin/env bash
# README command 2: installs what is missing, builds, runs every test (Catch2 units,
# lit stage tests, end-to-end tests, fuzz replays) through ctest.
# --with-torch: also run the PyTorch tests (ctest label 'torch'; they read
# AOTC_WITH_TORCH=1 and use tools/export/torch-python.sh); without it they
# are skipped with the reason printed.
# --sanitize=address|thread: the same suite in a sanitizer build (build-asan/ or
# build-tsan/, docs/testing.md "Sanitizer suites"), with the options of
# scripts/sanitizer-env.sh. Other arguments go to ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
args=()
for a in "$@"; do
  case "$a" in
    --with-torch) export AOTC_WITH_TORCH=1 ;;
    --sanitize=*) export AOTC_SANITIZE=${a#--sanitize=} ;;
    *) args+=("$a") ;;
  esac
done
start=$(date +%s)
bash "$root/scripts/build.sh"
case "${AOTC_SANITIZE:-}" in
  "") build=${AOTC_BUILD_DIR:-$root/build} ;;
  address) build=${AOTC_BUILD_DIR:-$root/build-asan} ;;
  thread) build=${AOTC_BUILD_DIR:-$root/build-tsan} ;;
esac
# shellcheck source=sanitizer-env.sh
source "$root/scripts/sanitizer-env.sh"
# shellcheck source=openblas-env.sh
source "$root/scripts/openblas-env.sh" "$root/build/tools/aotc/aotc"
built=$(date +%s)
cd "$build"
log=$build/test-sh.log
set +e
ctest --output-on-failure -j "${AOTC_JOBS:-2}" "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if [ "${AOTC_WITH_TORCH:-0}" != 1 ]; then
  echo "note: PyTorch tests (ctest -L torch) were skipped: torch is not needed by default;" \
       "run scripts/test.sh --with-torch (torch python: tools/export/torch-python.sh)"
fi
# The yardsticks' one-line summaries (docs/conformance.md, docs/partition.md), then
# ctest's verdict again as the last line.
summary() { # $1: ctest name, $2: line prefix; prints that test's summary line from the log
  awk -v t="$1" -v p="$2" '/ Testing: /{cur=$NF} cur==t && index($0,p)==1' \
    Testing/Temporary/LastTest.log 2>/dev/null | tail -n 1
}
summary conformance.summary "conformance: "
summary parity.min-cut "partition-parity: "
end=$(date +%s)
echo "suite ${AOTC_SANITIZE:-normal}: build $((built - start)) s, tests $((end - built)) s"
grep -E 'tests passed|tests failed' "$log" | tail -n 1
exit "$rc"
