// resilience/fence.h: the attempt file's text and who it fences; written atomically; and the
// watchdog in a child process (a rank of attempt 2): it keeps running while the file is missing or
// names its own attempt running, beats in its heartbeat meanwhile (with the host's addresses), and
// exits at once with the fencing code and its one line when a newer attempt starts or its own
// ends.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "cli_util.h"
#include "core/heartbeat.h"
#include "resilience/fence.h"
#include "resilience/hang_detector.h"
#include "test_util.h"

using namespace zaya;

TEST(Fence, AttemptTextAndWhoItFences) {
  EXPECT_EQ(fence::attempt_text(3, false), "3 running\n");
  EXPECT_EQ(fence::attempt_text(3, true), "3 ended\n");
  EXPECT_EQ(fence::recorded_attempt("3 running\n"), 3);
  EXPECT_EQ(fence::recorded_attempt("7 ended\n"), 7);
  EXPECT_EQ(fence::recorded_attempt(""), 0);
  EXPECT_EQ(fence::fence_reason("3 running\n", 2), "attempt 3 has started");
  EXPECT_EQ(fence::fence_reason("3 ended\n", 2), "attempt 3 has ended");
  EXPECT_EQ(fence::fence_reason("2 ended\n", 2), "attempt 2 has ended");
  EXPECT_EQ(fence::fence_reason("2 running\n", 2), "");
  EXPECT_EQ(fence::fence_reason("1 running\n", 2), "");
  EXPECT_EQ(fence::fence_reason("1 ended\n", 2), "");
  // Whatever does not parse fences nothing.
  for (const char* bad : {"", "3", "3 runnin", "x running", "0 ended", "-4 ended", "3  ended"}) {
    EXPECT_EQ(fence::fence_reason(bad, 2), "") << bad;
    EXPECT_EQ(fence::recorded_attempt(bad), 0) << bad;
  }
}

TEST(Fence, WriteAttemptReplacesTheFileWhole) {
  const test::ScratchDir dir;
  fence::write_attempt(dir.path, 1, false);
  EXPECT_EQ(test::slurp(dir / "attempt"), "1 running\n");
  fence::write_attempt(dir.path, 1, true);
  EXPECT_EQ(test::slurp(dir / "attempt"), "1 ended\n");
  test::expect_error([&] { fence::write_attempt(dir / "no/such/dir", 1, false); },
                     {"no/such/dir/attempt"});
}

namespace {

// A child that is rank 0 of attempt 2 of a job supervised in `dir`: heartbeat, watchdog every
// 50 ms, then 20 s of sleep (exit 0) unless fenced; its stderr goes to dir/stderr.
pid_t start_rank(const std::string& dir) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setenv("ZAYA_SUPERVISE_DIR", dir.c_str(), 1);
  ::setenv("ZAYA_SUPERVISE_ATTEMPT", "2", 1);
  const int fd = ::open((dir + "/stderr").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ::dup2(fd, 2);
  heartbeat::start(0, 1);
  fence::start_watchdog(0.05);
  std::this_thread::sleep_for(std::chrono::seconds(20));
  ::_exit(0);
}

// Waits up to `seconds` for the child to end: its wait status, or −1 if it is still running.
int wait_for(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int status = 0;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    if (std::chrono::steady_clock::now() > until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::optional<HeartbeatRecord> heartbeat_of(const test::ScratchDir& dir) {
  return parse_heartbeat(test::slurp(dir / "heartbeat_rank00000.json"));
}

}  // namespace

TEST(Fence, WatchdogExitsWhenANewerAttemptStarts) {
  const test::ScratchDir dir;
  const pid_t rank = start_rank(dir.path);
  ASSERT_GT(rank, 0);
  // No attempt file, then its own attempt running: it keeps running, and beats.
  EXPECT_EQ(wait_for(rank, 0.4), -1);
  fence::write_attempt(dir.path, 2, false);
  EXPECT_EQ(wait_for(rank, 0.4), -1);
  const auto first = heartbeat_of(dir);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->attempt, 2);
  EXPECT_GT(first->beat, 0);
  EXPECT_EQ(first->seq, 1);  // beats are not progress
  EXPECT_EQ(first->addrs, heartbeat::ipv4_addresses());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_GT(heartbeat_of(dir)->beat, first->beat);

  const auto t0 = std::chrono::steady_clock::now();
  fence::write_attempt(dir.path, 3, false);
  const int status = wait_for(rank, 5);
  if (status == -1) ::kill(rank, SIGKILL), ::waitpid(rank, nullptr, 0);
  ASSERT_NE(status, -1) << "the fenced rank still runs";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), fence::kExitCode);
  EXPECT_EQ(test::slurp(dir / "stderr"),
            "zaya: fenced: " + (dir / "attempt") +
                " says attempt 3 has started (this rank is of attempt 2): exiting with code 75\n");
}

TEST(Fence, WatchdogExitsWhenItsAttemptEnds) {
  const test::ScratchDir dir;
  fence::write_attempt(dir.path, 1, true);  // the attempt before, ended: not this rank's
  const pid_t rank = start_rank(dir.path);
  ASSERT_GT(rank, 0);
  EXPECT_EQ(wait_for(rank, 0.4), -1);
  fence::write_attempt(dir.path, 2, true);
  const int status = wait_for(rank, 5);
  if (status == -1) ::kill(rank, SIGKILL), ::waitpid(rank, nullptr, 0);
  ASSERT_NE(status, -1) << "the fenced rank still runs";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == fence::kExitCode) << status;
  test::expect_contains(test::slurp(dir / "stderr"), "says attempt 2 has ended");
}
