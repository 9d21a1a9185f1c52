// A local TCP port that does not answer, for the reachability probe's tests
// (resilience/reach.h): a listener with an accept queue of one, filled and never accepted. Linux
// drops a SYN to a listener whose accept queue is full, so a connect to it times out as one to a
// host the network lost does — on 127.0.0.1, with no namespace, route or privilege. Closing it
// makes the port refuse (RST): the host is back. Its sockets are close-on-exec: a child (the
// supervisor under test) must not keep the listener open.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

namespace zaya::test {

// A port of 127.0.0.1 that nothing listens on now (bound, then closed: a connect is refused).
inline int refused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<struct sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

class Blackhole {
 public:
  // A listener on 127.0.0.1 (port 0: any free port), its queue filled.
  explicit Blackhole(int port = 0) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa {};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(uint16_t(port));
    ::bind(listener_, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa);
    ::listen(listener_, 0);
    socklen_t len = sizeof sa;
    ::getsockname(listener_, reinterpret_cast<struct sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    for (int i = 0; i < 3; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      ::connect(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa);
      fillers_.push_back(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the handshakes settle
  }
  ~Blackhole() { open_up(); }
  Blackhole(const Blackhole&) = delete;
  Blackhole& operator=(const Blackhole&) = delete;
  int port() const { return port_; }
  // Closes the listener and its queue: the port refuses from now on.
  void open_up() {
    for (int fd : fillers_) ::close(fd);
    fillers_.clear();
    if (listener_ >= 0) ::close(listener_);
    listener_ = -1;
  }

 private:
  int listener_ = -1, port_ = 0;
  std::vector<int> fillers_;
};

}  // namespace zaya::test
