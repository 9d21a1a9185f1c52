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
// TLS (use_tls) is done here too, not by httplib's SSLServer, whose own connection loop would lose
// the limits above: the handshake must finish within request_timeout of the connection's first
// byte, and TLS records trickled in byte by byte meet the same request deadline as plain text (the
// socket is non-blocking under OpenSSL, so no read can wait past it).
// Also here: ApiKeys, the bearer keys a server may require (checked in constant time).
#pragma once
#include <httplib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

typedef struct ssl_ctx_st SSL_CTX;

namespace zaya {

// The keys a client may present as `Authorization: Bearer KEY`. Keys are kept as SHA-256 digests;
// a presented key is hashed and compared with every digest, each comparison in constant time and
// none cut short, so the time taken says nothing about how much of a key matched, nor about the
// keys' lengths (the hash of the presented key takes time by its own length only).
class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(const std::vector<std::string>& keys);
  bool empty() const { return digests_.empty(); }
  size_t size() const { return digests_.size(); }
  bool matches(std::string_view key) const;

 private:
  std::vector<std::array<unsigned char, 32>> digests_;
};

// What an Authorization header holds, for ApiKeys: the key of "Bearer KEY" (the scheme's case
// ignored, spaces around the key trimmed), or why it is not one.
struct BearerToken {
  bool ok = false;
  std::string key;
  std::string problem;  // when !ok: what is wrong, for the 401's message
};
BearerToken parse_bearer(std::string_view header_value);

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
  // Serve HTTPS: the certificate chain and private key, PEM files. Throws zaya::Error naming the
  // file (and the flag a user gave it with: cert_flag / key_flag) when one cannot be read, is not
  // PEM of its kind, or the key does not belong to the certificate. Call before listen.
  void use_tls(const std::string& cert_path, const std::string& key_path,
               std::string_view cert_flag = "--ssl-cert", std::string_view key_flag = "--ssl-key");
  bool tls() const { return ssl_ctx_ != nullptr; }
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
  SSL_CTX* ssl_ctx_ = nullptr;          // set: TLS on every connection
  std::atomic<Queue*> queue_{nullptr};  // the live task queue (httplib owns it), or null
  std::atomic<int64_t> open_{0};
};

}  // namespace zaya
