# CMake's GoogleTest discovery (GoogleTestAddTests.cmake), less the SKIP_REGULAR_EXPRESSION
# "\[  SKIPPED \]" it gives every test: with it, a test whose output holds that text anywhere (a
# failing test's own output included) is "Skipped" whatever its exit status, and ctest's properties
# can add a regular expression but not remove one. Our tests skip by exit status only (77:
# tests/gtest_main.cpp). tests/CMakeLists.txt points gtest_discover_tests here, through a file
# that sets ZAYA_GTEST_ADD_TESTS to CMake's script (ctest, which runs a PRE_TEST discovery, does not
# know CMAKE_ROOT).

# Removes the regular expression from the test file `ctest_file` written by the discovery.
function(zaya_drop_skip_regex ctest_file)
  file(READ "${ctest_file}" text)
  string(REPLACE " SKIP_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==]" "" text "${text}")
  if(text MATCHES "SKIP_REGULAR_EXPRESSION")
    message(FATAL_ERROR "${ctest_file}: this CMake writes its skip regular expression differently; "
                        "update tests/gtest_add_tests.cmake")
  endif()
  file(WRITE "${ctest_file}" "${text}")
endfunction()

# In a POST_BUILD discovery (the default) this is a script (-P): the include discovers the tests
# and writes ${CTEST_FILE}.
include("${ZAYA_GTEST_ADD_TESTS}")
if(CMAKE_SCRIPT_MODE_FILE)
  zaya_drop_skip_regex("${CTEST_FILE}")
endif()

# In a PRE_TEST discovery ctest includes this file, then calls gtest_discover_tests_impl.
function(gtest_discover_tests_impl)
  _gtest_discover_tests_impl(${ARGV})
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "CTEST_FILE" "")
  zaya_drop_skip_regex("${arg_CTEST_FILE}")
endfunction()
