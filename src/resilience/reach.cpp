// Reachability probes by TCP connect (reach.h).
#include "resilience/reach.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/assert.h"

namespace zaya {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// An answer from the far host's stack: connected, or refused (RST). Every other error — no route,
// network unreachable, a timeout — is no answer.
bool answered(int err) {
  return err == 0 || err == ECONNREFUSED;
}

std::string err_word(int err) {
  if (err == 0) return "connected";
  if (err == ECONNREFUSED) return "refused";
  return std::strerror(err);
}

}  // namespace

std::vector<HostReach> probe_hosts(const std::vector<HostAddresses>& hosts, int port,
                                   double timeout_s) {
  std::vector<HostReach> out;
  struct Probe {
    size_t host;
    int fd;
  };
  std::vector<Probe> pending;
  for (const HostAddresses& h : hosts) {
    HostReach r{h.host, h.addrs, h.addrs.empty(), h.addrs.empty() ? "no addresses" : ""};
    out.push_back(r);
    for (const std::string& a : h.addrs) {
      HostReach& me = out.back();
      struct sockaddr_in sa {};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(uint16_t(port));
      if (::inet_pton(AF_INET, a.c_str(), &sa.sin_addr) != 1) {
        if (me.how.empty()) me.how = "bad address " + a;
        continue;
      }
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      const int err =
          ::connect(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa) == 0 ? 0 : errno;
      if (err != EINPROGRESS) {  // answered (or failed) at once: a local address, no route
        if (answered(err)) {
          me.reachable = true, me.how = err_word(err);
        } else if (!me.reachable) {
          me.how = err_word(err);
        }
        ::close(fd);
        continue;
      }
      pending.push_back({out.size() - 1, fd});
    }
  }
  const double deadline = now_s() + timeout_s;
  while (!pending.empty()) {
    std::vector<struct pollfd> fds;
    for (const Probe& p : pending) fds.push_back({p.fd, POLLOUT, 0});
    const double left = deadline - now_s();
    const int ready = left > 0 ? ::poll(fds.data(), fds.size(), std::max(1, int(left * 1000))) : 0;
    if (ready < 0 && errno == EINTR) continue;
    std::vector<Probe> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      HostReach& h = out[pending[i].host];
      if (ready > 0 && fds[i].revents) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(pending[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (answered(err)) {
          h.reachable = true, h.how = err_word(err);
        } else if (!h.reachable) {
          h.how = err_word(err);
        }
        ::close(pending[i].fd);
      } else if (ready <= 0) {
        if (!h.reachable) h.how = "timeout";
        ::close(pending[i].fd);
      } else {
        still.push_back(pending[i]);
      }
    }
    pending = std::move(still);
  }
  return out;
}

std::string describe_unreachable(const std::vector<HostReach>& probes) {
  std::string s;
  for (const HostReach& r : probes) {
    if (r.reachable) continue;
    std::string addrs;
    for (const std::string& a : r.addrs) addrs += (addrs.empty() ? "" : ", ") + a;
    s += fmt::format("{}host {} ({}) unreachable", s.empty() ? "" : "; ", r.host, addrs);
  }
  return s;
}

}  // namespace zaya
