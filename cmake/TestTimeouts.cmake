# Every ctest has a timeout, so one hang (libomp, oneDNN, a deadlocked rank) fails one test
# instead of eating CI's whole run (docs/testing.md "Timeouts").
#
# A test that sets no TIMEOUT gets AOTC_TEST_TIMEOUT: 300 s, above the longest test without
# its own (measured under ctest -j2 on 2 cores, docs/testing.md), times 3 in the sanitizer
# suites (ASan and TSan run the suite 2-3x slower). Tests measured near that set their own.
# Each CMakeLists.txt that adds tests calls aotc_test_timeouts() once, which applies the
# default at the end of that directory; ctest timeouts.every_test_has_one fails on any test
# without a TIMEOUT (a directory that forgot the call). lit's per-test limit is
# AOTC_LIT_TIMEOUT (test/lit/lit.cfg.py): 600 s, 4x its longest test (zoo/gradcheck.test, about
# 150 s under ctest -j2, and past 300 s once while the conformance ctest ran beside lit's own
# workers); the whole lit suite, one ctest, has AOTC_LIT_SUITE_TIMEOUT (1200 s).
set(AOTC_TEST_TIMEOUT 300)
set(AOTC_LIT_TIMEOUT 600)
if(AOTC_SANITIZER)
  set(AOTC_TIMEOUT_SCALE 3)
else()
  set(AOTC_TIMEOUT_SCALE 1)
endif()
math(EXPR AOTC_DEFAULT_TEST_TIMEOUT "${AOTC_TEST_TIMEOUT} * ${AOTC_TIMEOUT_SCALE}")
set(AOTC_UNIT_TIMEOUT 120)
math(EXPR AOTC_UNIT_TEST_TIMEOUT "${AOTC_UNIT_TIMEOUT} * ${AOTC_TIMEOUT_SCALE}")
set(AOTC_LIT_SUITE_TIMEOUT 1200)
math(EXPR AOTC_LIT_SUITE_TEST_TIMEOUT "${AOTC_LIT_SUITE_TIMEOUT} * ${AOTC_TIMEOUT_SCALE}")
math(EXPR AOTC_LIT_TEST_TIMEOUT "${AOTC_LIT_TIMEOUT} * ${AOTC_TIMEOUT_SCALE}")

function(_aotc_apply_default_timeouts)
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _tests)
    get_test_property(${_t} TIMEOUT _to)
    if(NOT _to)
      set_tests_properties(${_t} PROPERTIES TIMEOUT ${AOTC_DEFAULT_TEST_TIMEOUT})
    endif()
  endforeach()
endfunction()

# Call once in a CMakeLists.txt that adds tests: the default reaches every test of that
# directory, whenever it is added.
macro(aotc_test_timeouts)
  cmake_language(DEFER CALL _aotc_apply_default_timeouts)
endmacro()
