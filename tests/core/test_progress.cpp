// core/progress: quiet prints nothing; plain lines carry rate and ETA; the TTY line is redrawn.
#include <cstdio>
#include <string>

#include "core/progress.h"
#include "test_util.h"

using namespace zaya;

namespace {

// Everything written to a temporary FILE* by f.
template <class F>
std::string capture(F&& f) {
  std::FILE* out = std::tmpfile();
  EXPECT_NE(out, nullptr);
  f(out);
  std::fflush(out);
  std::string s(size_t(std::ftell(out)), '\0');
  std::rewind(out);
  EXPECT_EQ(std::fread(s.data(), 1, s.size(), out), s.size());
  std::fclose(out);
  return s;
}

}  // namespace

TEST(Progress, QuietPrintsNothing) {
  const std::string s = capture([](std::FILE* out) {
    Progress p("job", 100, "docs",
               Progress::Options{
                   .mode = Progress::Mode::Lines, .quiet = true, .line_interval = 0, .out = out});
    EXPECT_EQ(p.mode(), Progress::Mode::Quiet);
    for (int i = 0; i <= 100; ++i) p.update(i, "note");
    p.finish();
  });
  EXPECT_EQ(s, "");
}

TEST(Progress, LinesHaveRateAndEta) {
  const std::string s = capture([](std::FILE* out) {
    Progress p("job", 1000, "docs",
               Progress::Options{.mode = Progress::Mode::Lines, .line_interval = 0, .out = out});
    p.update(10, "1.2k tokens");
    p.update(500);
    p.finish();
  });
  EXPECT_NE(s.find("job: 10 docs / 1.0k docs (1.0%)"), std::string::npos) << s;
  EXPECT_NE(s.find("docs/s"), std::string::npos) << s;
  EXPECT_NE(s.find("ETA"), std::string::npos) << s;
  EXPECT_NE(s.find("1.2k tokens"), std::string::npos) << s;  // the note sticks
  EXPECT_NE(s.find("done in"), std::string::npos) << s;
  EXPECT_EQ(s.find('\r'), std::string::npos) << s;
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 3) << s;
}

TEST(Progress, LinesAreRateLimited) {
  const std::string s = capture([](std::FILE* out) {
    Progress p("job", 0, "steps",
               Progress::Options{.mode = Progress::Mode::Lines, .line_interval = 3600, .out = out});
    for (int i = 0; i < 1000; ++i) p.add(1);
    p.finish();
  });
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2) << s;  // the first update and the final line
  EXPECT_NE(s.find("1.0k steps"), std::string::npos) << s;
}

TEST(Progress, TtyRedrawsOneLine) {
  const std::string s = capture([](std::FILE* out) {
    Progress p("job", 1 << 20, "B",
               Progress::Options{.mode = Progress::Mode::Tty, .bytes = true, .out = out});
    p.update(1 << 10);
    p.finish();
  });
  EXPECT_EQ(s.front(), '\r');
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1) << s;
  EXPECT_NE(s.find("1.0 MiB"), std::string::npos) << s;
  EXPECT_NE(s.find("/s"), std::string::npos) << s;
}

TEST(Progress, DestructorWithoutFinishPrintsNoSummary) {
  const std::string s = capture([](std::FILE* out) {
    Progress p("job", 10, "x",
               Progress::Options{.mode = Progress::Mode::Lines, .line_interval = 3600, .out = out});
    p.update(3);
  });
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1) << s;
  EXPECT_EQ(s.find("done"), std::string::npos) << s;
}

TEST(Progress, AutoIsLinesWhenNotATerminal) {
  std::FILE* out = std::tmpfile();
  Progress p("job", 1, "x", Progress::Options{.out = out});
  EXPECT_EQ(p.mode(), Progress::Mode::Lines);
  p.finish();
  std::fclose(out);
}

TEST(Progress, HumanNumbers) {
  EXPECT_EQ(human_count(999), "999");
  EXPECT_EQ(human_count(12345), "12.3k");
  EXPECT_EQ(human_count(4.56e6), "4.56M");
  EXPECT_EQ(human_bytes(3 * 1024 * 1024), "3.0 MiB");
  EXPECT_EQ(human_duration(42), "42s");
  EXPECT_EQ(human_duration(187), "3m07s");
  EXPECT_EQ(human_duration(7500), "2h05m");
}
