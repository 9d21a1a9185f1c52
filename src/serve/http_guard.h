// GuardedHttpServer: cpp-httplib's Server (Debian's 0.11) with the connection handling replaced so
// that slow or idle clients cannot starve the others:
//   - a request (request line, headers and body) must arrive within request_timeout of its first
//     byte, however slowly it trickles in (slow-loris: 1 byte/s is cut off at the deadline; httplib
//     alone only bounds the wait for each single read), and be at most the body limit plus
//     header_bytes long (httplib bounds each header line, not their number);
//   - connections are served by up to max_connections threads, started as needed; more wait in
//     a queue, and while any wait, connections idle between requests (keep-alive, or connected and
//     silent) are closed after a short grace so their threads serve the waiting ones;
//   - an idle keep-alive connection is closed after keep_alive_timeout in any case.
// Writes keep httplib's per-write timeout (a streamed response may run as long as generation).
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace zaya {

struct ConnectionLimits {
  int max_connections = 64;                            // served at once (threads)
  std::chrono::milliseconds request_timeout{10000};    // a whole request, first byte to last
  std::chrono::milliseconds keep_alive_timeout{5000};  // idle between requests
  std::chrono::milliseconds idle_grace{200};           // idle, while others wait for a thread
  size_t header_bytes = size_t(1) << 20;  // request line + headers, at most (beyond the body's)
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(ConnectionLimits limits);
  ~GuardedHttpServer() override;
  // After bind: a listen backlog of SOMAXCONN instead of httplib's 5.
  void widen_backlog();
  // Connections accepted and not yet closed (served or waiting); for tests and /health.
  int64_t open_connections() const;
  // When the request the calling connection thread is serving began (its first byte was there
  // to read): httplib's handlers and logger run on that thread, so the request log times it.
  static std::chrono::steady_clock::time_point request_start();

  class Queue;

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Waits for the first byte of the next request; false: close (idle too long, pressure, stop).
  bool wait_for_request(socket_t sock, bool first) const;

  ConnectionLimits limits_;
  std::atomic<Queue*> queue_{nullptr};  // the live task queue (httplib owns it), or null
  std::atomic<int64_t> open_{0};
};

}  // namespace zaya
