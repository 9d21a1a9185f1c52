// The main of the test executables (tests/CMakeLists.txt): gtest's, with the skip rules of
// tests/test_skips.h.
//  - Each skipped test prints its reason, "[ SKIP WHY ] Suite.Name: no GPU" ("other: …" when the
//    reason is not an allowed one); tests/skip_summary.cmake counts them after a ctest run.
//  - ZAYA_STRICT_SKIPS=1: a skip whose reason is not allowed is a failure of that test, reported
//    where it skipped.
//  - The exit status is 77 when every test that ran skipped and none failed, else gtest's (0 or
//    1). ctest runs each test alone and takes 77 as "Skipped" (SKIP_RETURN_CODE), so a test shows
//    as skipped only when it skipped and did not fail, whatever it printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "test_skips.h"

namespace {

// The skip result of `r`, or nullptr.
const testing::TestPartResult* skip_of(const testing::TestResult& r) {
  for (int i = 0; i < r.total_part_count(); ++i)
    if (r.GetTestPartResult(i).skipped()) return &r.GetTestPartResult(i);
  return nullptr;
}

class SkipRules : public testing::EmptyTestEventListener {
  // (End events reach the listeners last-added first: this runs before the printer's, so a
  // failure added here is printed and counted as the test's.)
  void OnTestEnd(const testing::TestInfo& info) override {
    if (!info.result()->Skipped()) return;
    const testing::TestPartResult* skip = skip_of(*info.result());
    if (!skip) {  // skipped by its suite's SetUpTestSuite
      const testing::TestSuite* suite = testing::UnitTest::GetInstance()->current_test_suite();
      if (suite) skip = skip_of(suite->ad_hoc_test_result());
    }
    const std::string message = skip ? skip->message() : "";
    const zaya::test::AllowedSkip* allowed = zaya::test::allowed_skip_of(message);
    std::printf("[ SKIP WHY ] %s.%s: %s\n", info.test_suite_name(), info.name(),
                allowed ? std::string(allowed->name).c_str() : ("other: " + message).c_str());
    std::fflush(stdout);
    if (allowed || !zaya::test::strict_skips()) return;
    const char* file = skip && skip->file_name() ? skip->file_name() : __FILE__;
    const int line = skip ? skip->line_number() : __LINE__;
    ADD_FAILURE_AT(file, line)
        << "ZAYA_STRICT_SKIPS=1: this test skipped for a reason that is not allowed (the allowed "
           "ones: tests/test_skips.h): "
        << message;
  }
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  testing::UnitTest::GetInstance()->listeners().Append(new SkipRules);
  const int status = RUN_ALL_TESTS();
  const testing::UnitTest& u = *testing::UnitTest::GetInstance();
  if (status == 0 && u.test_to_run_count() > 0 && u.skipped_test_count() == u.test_to_run_count())
    return 77;
  return status;
}
