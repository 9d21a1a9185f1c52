# Prints the skips of the ctest run that has just ended, by reason: the last line of every ctest
# run in a build with the tests ("skipped: 113 (no GPU: 112, no NCCL: 1)"). ctest runs it after
# the tests (CTEST_CUSTOM_POST_TEST, in the CTestCustom.cmake that tests/CMakeLists.txt writes);
# by hand: cmake -DDIR=build/release -P tests/skip_summary.cmake.
#
# It reads ctest's log (Testing/Temporary/LastTest.log, still LastTest.log.tmp while ctest runs).
# A test that skipped printed "[ SKIP WHY ] Suite.Name: REASON" (tests/gtest_main.cpp) and exited
# 77, which the log records as "Test Passed."; a skip that strict mode failed is "Test Failed." and
# counts as a failure, not here. REASON is one of tests/test_skips.h's names, or "other: …".
file(GLOB logs "${DIR}/Testing/Temporary/LastTest*.log.tmp")
if(NOT logs)
  file(GLOB logs "${DIR}/Testing/Temporary/LastTest.log")
endif()
if(NOT logs)
  return()
endif()
list(GET logs 0 log)
file(STRINGS "${log}" lines REGEX "^[0-9]+/[0-9]+ Test: |^\\[ SKIP WHY \\] |^Test Passed\\.")

set(ran 0)
set(total 0)
set(reasons "")
set(reason "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9]+/[0-9]+ Test: ")
    math(EXPR ran "${ran} + 1")
    set(reason "")
  elseif(line MATCHES "^\\[ SKIP WHY \\] [^ ]+: (.*)$")
    set(reason "${CMAKE_MATCH_1}")
    if(reason MATCHES "^other: ")
      set(reason "other")
    endif()
  elseif(reason AND line MATCHES "^Test Passed\\.")  # (a message with ";" spans list elements)
    math(EXPR total "${total} + 1")
    string(MAKE_C_IDENTIFIER "${reason}" key)
    if(NOT DEFINED count_${key})
      list(APPEND reasons "${reason}")
      set(count_${key} 0)
    endif()
    math(EXPR count_${key} "${count_${key}} + 1")
    set(reason "")
  endif()
endforeach()

if(ran EQUAL 0)  # ctest -N, or no test selected
  return()
endif()
list(SORT reasons)  # "no …" before "other"
set(parts "")
foreach(reason IN LISTS reasons)
  string(MAKE_C_IDENTIFIER "${reason}" key)
  list(APPEND parts "${reason}: ${count_${key}}")
endforeach()
list(JOIN parts ", " parts)
if(total EQUAL 0)
  message("skipped: 0")
else()
  message("skipped: ${total} (${parts})")
endif()
