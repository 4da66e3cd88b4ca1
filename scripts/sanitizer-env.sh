# Sourced by scripts/build.sh and scripts/test.sh for --sanitize=MODE (MODE in $AOTC_SANITIZE):
# the runtime options of the sanitizer suites (docs/testing.md "Sanitizer suites").
# Every report aborts (abort_on_error=1): a sanitized aotc that finds a bug dies by SIGABRT,
# which lit's `not`, the fuzz drivers and ctest all count as a failure, never as exit 1
# (a user error) or exit 2 (an internal error).
# shellcheck shell=bash
_supp=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/sanitizers" && pwd)
case "${AOTC_SANITIZE:-}" in
  address)
    export ASAN_OPTIONS="abort_on_error=1:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1:detect_invalid_pointer_pairs=0:handle_abort=0:symbolize=1:${AOTC_ASAN_EXTRA:-}"
    export UBSAN_OPTIONS="abort_on_error=1:halt_on_error=1:print_stacktrace=1:suppressions=$_supp/ubsan.supp"
    export LSAN_OPTIONS="abort_on_error=1:suppressions=$_supp/lsan.supp:print_suppressions=0"
    ;;
  thread)
    # Uninstrumented modules (libLLVM, OpenBLAS, libomp's own code) are not reported; Archer
    # (LLVM's OMPT tool) tells TSan about libomp's barriers, tasks and reductions, so races
    # inside instrumented parallel regions are still found.
    export TSAN_OPTIONS="abort_on_error=1:halt_on_error=1:ignore_noninstrumented_modules=1:second_deadlock_stack=1:report_signal_unsafe=0:suppressions=$_supp/tsan.supp"
    export OMP_TOOL_LIBRARIES=/usr/lib/llvm-19/lib/libarcher.so
    export ARCHER_OPTIONS="verbose=0"
    ;;
  "") ;;
  *) echo "unknown sanitizer '${AOTC_SANITIZE}' (address or thread)" >&2; return 2 ;;
esac
unset _supp
