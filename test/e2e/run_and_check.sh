#!/usr/bin/env bash
# run_and_check.sh [--expect-fail] -- DRIVER ARGS... -- CHECK_GOLDEN ARGS...
# Runs the e2e driver, then tools/check_golden.py. With --expect-fail the test
# passes only when check_golden exits 1 (tolerance exceeded), never on 0 or on
# 2 (malformed input), so a broken pipeline cannot make it pass.
set -uo pipefail
expect_fail=0
if [ "${1:-}" = "--expect-fail" ]; then expect_fail=1; shift; fi
[ "${1:-}" = "--" ] || { echo "usage: $0 [--expect-fail] -- DRIVER... -- CHECK..." >&2; exit 2; }
shift
driver=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do driver+=("$1"); shift; done
shift
"${driver[@]}"
drc=$?
# 77: the driver needs hardware this machine lacks (a GPU driver): ctest reports "skipped".
[ $drc -eq 77 ] && exit 77
[ $drc -eq 0 ] || { echo "driver failed ($drc): ${driver[*]}" >&2; exit 1; }
"$@"
rc=$?
if [ $expect_fail -eq 1 ]; then
  if [ $rc -eq 1 ]; then echo "check_golden rejected the result, as expected"; exit 0; fi
  echo "expected check_golden to exit 1, got $rc" >&2; exit 1
fi
exit $rc
