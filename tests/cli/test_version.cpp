// `zaya --version` (src/cli/version.cpp): one line on stdout naming the version, the commit, the
// build type and the configuration's parts, exit 0; and scripts/build_info.cmake, which writes
// the commit at build time: the commit of the tree, "-dirty" with a changed tracked file, and the
// file left untouched when nothing changed (so an unchanged commit rebuilds nothing).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "cli_util.h"
#include "test_util.h"

using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

// The output of a shell command (stderr discarded) and whether it exited 0.
struct Shell {
  bool ok = false;
  std::string out;
};
Shell shell(const std::string& dir, const std::string& cmd) {
  const int status = std::system((cmd + " >" + dir + "/shell.out 2>/dev/null").c_str());
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0, slurp(dir + "/shell.out")};
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The backends this build has (the GPU backend's macros reach the tests through zaya_lib).
std::string expected_backends() {
#if defined(ZAYA_GPU_CUDA)
  return "cpu, cuda";
#elif defined(ZAYA_GPU_HIP)
  return "cpu, hip";
#elif defined(ZAYA_GPU_HOST)
  return "cpu, emu";
#else
  return "cpu";
#endif
}

const fs::path kSourceDir = fs::path(ZAYA_TEST_FIXTURES).parent_path().parent_path();

}  // namespace

TEST(Version, OneLineOnStdout) {
  ScratchDir dir;
  const CliResult r = run_zaya_in(dir.path, "--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::regex line(
      R"(zaya (\d+\.\d+\.\d+) \(([0-9a-f]{7,}(-dirty)?|unknown), ([A-Za-z]+), backends: ([a-z, ]+), mpi (yes|no), server (yes|no)\)
)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(r.out, m, line)) << r.out;
  EXPECT_EQ(m[5].str(), expected_backends()) << r.out;
}

// The commit named is the source tree's HEAD: captured when the binary was built, not when cmake
// last configured. (A binary from elsewhere, ZAYA_BINARY_PATH, has its own.)
TEST(Version, NamesTheCommitOfTheTree) {
  if (std::getenv("ZAYA_BINARY_PATH")) return;  // another tree's binary: nothing to compare
  ScratchDir dir;
  const Shell head =
      shell(dir.path, "git -C '" + kSourceDir.string() + "' rev-parse --short=10 HEAD");
  const CliResult r = run_zaya_in(dir.path, "--version");
  ASSERT_EQ(r.code, 0) << r.err;
  if (!head.ok) {  // a source archive: no commit to name
    EXPECT_NE(r.out.find("(unknown, "), std::string::npos) << r.out;
    return;
  }
  EXPECT_NE(r.out.find("(" + trimmed(head.out)), std::string::npos)
      << "HEAD is " << head.out << " but the binary says " << r.out
      << "(a binary older than the last commit: rebuild it)";
}

// scripts/build_info.cmake on a repository of its own: the commit, then -dirty, then clean again,
// and an unchanged result leaves the file as it was.
TEST(Version, BuildInfoScriptFollowsTheCheckout) {
  ScratchDir dir;
  const std::string repo = dir / "repo", out = dir / "build_info.cpp";
  fs::create_directories(repo);
  std::ofstream(repo + "/file.txt") << "one\n";
  const std::string git = "git -C '" + repo + "' -c user.name=t -c user.email=t@t ";
  if (!shell(dir.path, git + "init -q && " + git + "add file.txt && " + git + "commit -q -m one")
           .ok)
    GTEST_FAIL() << "git cannot make a repository in " << repo;
  const std::string script = "cmake -DSOURCE_DIR='" + repo + "' -DOUT='" + out +
                             "' -DVERSION=9.8.7 -DBUILD_TYPE=Debug '-DBACKENDS=cpu, emu' -DMPI=OFF "
                             "-DSERVER=ON -P '" +
                             (kSourceDir / "scripts/build_info.cmake").string() + "'";
  const auto commit = [&] {
    return trimmed(shell(dir.path, git + "rev-parse --short=10 HEAD").out);
  };

  ASSERT_TRUE(shell(dir.path, script).ok);
  const std::string first = slurp(out);
  EXPECT_NE(first.find("{\"9.8.7\", \"" + commit() + "\", \"Debug\", \"cpu, emu\", false, true}"),
            std::string::npos)
      << first;

  // Nothing changed: the file is not rewritten (its time stays).
  const auto stamp = fs::last_write_time(out);
  fs::last_write_time(out, stamp - std::chrono::hours(1));
  ASSERT_TRUE(shell(dir.path, script).ok);
  EXPECT_EQ(fs::last_write_time(out), stamp - std::chrono::hours(1));

  std::ofstream(repo + "/file.txt") << "two\n";  // a changed tracked file
  ASSERT_TRUE(shell(dir.path, script).ok);
  EXPECT_NE(slurp(out).find("\"" + commit() + "-dirty\""), std::string::npos) << slurp(out);

  std::ofstream(repo + "/untracked.txt") << "x\n";  // committed, plus an untracked file: clean
  ASSERT_TRUE(shell(dir.path, git + "commit -q -am two").ok);
  ASSERT_TRUE(shell(dir.path, script).ok);
  const std::string last = slurp(out);
  EXPECT_NE(last.find("\"" + commit() + "\""), std::string::npos) << last;
  EXPECT_EQ(last.find("-dirty"), std::string::npos) << last;
  EXPECT_NE(last, first);
}
