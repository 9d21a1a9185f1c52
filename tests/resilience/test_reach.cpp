// resilience/reach.h: a listening port and a refused one are reachable, a port that drops the SYN
// (the blackhole of blackhole.h: a full accept queue on 127.0.0.1) is not, within the timeout; a
// host answers when any of its addresses does; hosts without addresses count as reachable; the
// message names the unreachable ones with their addresses.
#include <gtest/gtest.h>

#include <chrono>

#include "blackhole.h"
#include "resilience/reach.h"

using namespace zaya;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(Reach, ListeningPortIsReachable) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<struct sockaddr*>(&sa), &len);
  const auto r = probe_hosts({{"here", {"127.0.0.1"}}}, ntohs(sa.sin_port), 2.0);
  ::close(fd);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].reachable);
  EXPECT_EQ(r[0].how, "connected");
}

TEST(Reach, RefusedPortIsReachable) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = probe_hosts({{"here", {"127.0.0.1"}}}, test::refused_port(), 2.0);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].reachable);
  EXPECT_EQ(r[0].how, "refused");
  EXPECT_LT(seconds_since(t0), 1.0);  // a RST is an answer: no waiting for the timeout
}

TEST(Reach, SilentPortIsUnreachableWithinTheTimeout) {
  test::Blackhole hole;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = probe_hosts({{"zmh3", {"127.0.0.1"}}}, hole.port(), 0.5);
  const double took = seconds_since(t0);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].reachable);
  EXPECT_EQ(r[0].how, "timeout");
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 1.5);
  EXPECT_EQ(describe_unreachable(r), "host zmh3 (127.0.0.1) unreachable");
  // Once the port refuses, the host is back.
  hole.open_up();
  EXPECT_TRUE(probe_hosts({{"zmh3", {"127.0.0.1"}}}, hole.port(), 0.5)[0].reachable);
}

TEST(Reach, ManyHostsAtOnceAnyAddressAnswering) {
  test::Blackhole hole;
  const auto t0 = std::chrono::steady_clock::now();
  // 127.0.0.2 is loopback too, but the blackhole listens on 127.0.0.1 only: it refuses.
  const auto r = probe_hosts(
      {{"a", {"127.0.0.1"}}, {"b", {"127.0.0.1", "127.0.0.2"}}, {"c", {}}, {"d", {"127.0.0.1"}}},
      hole.port(), 0.5);
  EXPECT_LT(seconds_since(t0), 1.5);  // one timeout for all, not one per host
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].host, "a");
  EXPECT_FALSE(r[0].reachable);
  EXPECT_TRUE(r[1].reachable);
  EXPECT_TRUE(r[2].reachable);
  EXPECT_EQ(r[2].how, "no addresses");
  EXPECT_FALSE(r[3].reachable);
  EXPECT_EQ(describe_unreachable(r),
            "host a (127.0.0.1) unreachable; host d (127.0.0.1) unreachable");
}
