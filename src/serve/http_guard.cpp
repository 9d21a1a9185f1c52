// GuardedHttpServer (see http_guard.h). httplib's listen loop accepts and hands each socket to
// the task queue, which calls the (virtual) process_and_close_socket on a worker thread; this
// class overrides both ends: its Queue grows threads on demand up to the limit, and its
// process_and_close_socket runs httplib's own request processing (process_request, protected)
// over a Stream whose reads carry the request deadline. With TLS the same Stream reads and writes
// through OpenSSL on a non-blocking socket, waiting in poll() for what OpenSSL asks for.
#include "serve/http_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/assert.h"

namespace zaya {

using Clock = std::chrono::steady_clock;

namespace {

// When the connection this worker thread serves was accepted (the idle grace counts from there).
thread_local Clock::time_point t_accepted;
// When the request it serves now began (GuardedHttpServer::request_start).
thread_local Clock::time_point t_request_start;

int poll_one(int sock, short events, int timeout_ms) {
  pollfd p{sock, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

int ms_until(Clock::time_point t) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return d <= 0 ? 0 : int(std::min<int64_t>(d, INT32_MAX));
}

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if ((peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&a), &len)
            : ::getsockname(sock, reinterpret_cast<sockaddr*>(&a), &len)) != 0)
    return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    port = ntohs(v6->sin6_port);
  }
  ip = buf;
}

// A socket stream whose reads stop at a deadline (the request's), each read also bounded by the
// per-read timeout; writes bounded per write, as in httplib's SocketStream. With `ssl` set the
// bytes go through OpenSSL (the socket then is non-blocking: every wait is a poll() here, bounded
// by the same deadline and timeouts).
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int sock, SSL* ssl, std::chrono::milliseconds read_timeout,
                 std::chrono::milliseconds write_timeout)
      : sock_(sock), ssl_(ssl), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  // The next request: read within the deadline, and at most `budget` bytes (line, headers and
  // body; httplib bounds each header line and the body, not the number of header lines).
  void start_request(Clock::time_point deadline, size_t budget) {
    deadline_ = deadline;
    budget_ = budget;
  }
  void end_request() {
    deadline_ = Clock::time_point::max();
    budget_ = SIZE_MAX;
  }

  bool is_readable() const override {
    return buffered() || poll_one(sock_, POLLIN, read_wait_ms()) > 0;
  }
  // Writable within the write timeout, and the peer has not closed (httplib's is_socket_alive):
  // the server's streaming loop uses this to notice a client that went away.
  bool is_writable() const override {
    if (poll_one(sock_, POLLOUT, int(write_timeout_.count())) <= 0) return false;
    if (poll_one(sock_, POLLIN, 0) <= 0) return true;
    char c;
    const ssize_t n = ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }
  // Buffered (httplib's line reader asks for one byte at a time); bytes of a pipelined next
  // request stay in the buffer for it.
  ssize_t read(char* ptr, size_t size) override {
    if (budget_ == 0) return -1;
    if (pos_ == len_) {
      const ssize_t n = ssl_ ? ssl_read() : plain_read();
      if (n <= 0) return n;
      pos_ = 0, len_ = size_t(n);
    }
    const size_t k = std::min({size, budget_, len_ - pos_});
    std::memcpy(ptr, buf_ + pos_, k);
    pos_ += k, budget_ -= k;
    return ssize_t(k);
  }
  bool buffered() const { return pos_ < len_ || (ssl_ && SSL_has_pending(ssl_)); }
  ssize_t write(const char* ptr, size_t size) override {
    if (ssl_) return ssl_write(ptr, size);
    if (poll_one(sock_, POLLOUT, int(write_timeout_.count())) <= 0) return -1;
    for (;;) {
      const ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, false, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  int read_wait_ms() const { return std::min(int(read_timeout_.count()), ms_until(deadline_)); }
  ssize_t plain_read() {
    const int wait = read_wait_ms();
    if (wait <= 0 || poll_one(sock_, POLLIN, wait) <= 0) return -1;
    ssize_t n;
    do {
      n = ::recv(sock_, buf_, sizeof(buf_), 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  // One SSL_read into buf_: waits (in poll, within the read bounds) for what OpenSSL wants —
  // more of a record, or room to send during a renegotiation.
  ssize_t ssl_read() {
    const Clock::time_point until =
        std::min(deadline_, Clock::now() + std::chrono::milliseconds(read_timeout_));
    for (;;) {
      ERR_clear_error();
      const int n = SSL_read(ssl_, buf_, int(sizeof(buf_)));
      if (n > 0) return n;
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_ZERO_RETURN) return 0;  // close_notify: the peer is done
      const short want = err == SSL_ERROR_WANT_READ    ? POLLIN
                         : err == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                       : 0;
      const int wait = ms_until(until);
      if (want == 0 || wait <= 0 || poll_one(sock_, want, wait) <= 0) return -1;
    }
  }
  ssize_t ssl_write(const char* ptr, size_t size) {
    if (size == 0) return 0;
    const Clock::time_point until = Clock::now() + write_timeout_;
    const int len = int(std::min<size_t>(size, INT32_MAX));
    for (;;) {
      ERR_clear_error();
      const int n = SSL_write(ssl_, ptr, len);  // a retry passes the same buffer, as required
      if (n > 0) return n;
      const int err = SSL_get_error(ssl_, n);
      const short want = err == SSL_ERROR_WANT_READ    ? POLLIN
                         : err == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                       : 0;
      const int wait = ms_until(until);
      if (want == 0 || wait <= 0 || poll_one(sock_, want, wait) <= 0) return -1;
    }
  }

  int sock_;
  SSL* ssl_;
  std::chrono::milliseconds read_timeout_, write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  size_t budget_ = SIZE_MAX;
  char buf_[16384];  // one TLS record's plaintext at most
  size_t pos_ = 0, len_ = 0;
};

// The TLS handshake of an accepted connection, on its non-blocking socket, by `deadline`.
bool ssl_accept_by(SSL* ssl, int sock, Clock::time_point deadline) {
  for (;;) {
    ERR_clear_error();
    const int r = SSL_accept(ssl);
    if (r == 1) return true;
    const int err = SSL_get_error(ssl, r);
    const short want = err == SSL_ERROR_WANT_READ    ? POLLIN
                       : err == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                     : 0;
    const int wait = ms_until(deadline);
    if (want == 0 || wait <= 0 || poll_one(sock, want, wait) <= 0) return false;
  }
}

// OpenSSL's last error, as text (or `fallback` when its queue is empty).
std::string openssl_error(const char* fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

}  // namespace

// Threads started on demand up to `max`; jobs beyond them wait in order.
class GuardedHttpServer::Queue final : public httplib::TaskQueue {
 public:
  Queue(GuardedHttpServer& s, size_t max) : server_(s), max_(max) { server_.queue_.store(this); }
  ~Queue() override { server_.queue_.store(nullptr); }

  void enqueue(std::function<void()> fn) override {
    server_.open_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back({std::move(fn), Clock::now()});
    if (idle_ == 0 && threads_.size() < max_) threads_.emplace_back([this] { work(); });
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  // Connections accepted and waiting for a thread.
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_.size();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, nothing left
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      t_accepted = job.accepted;
      job.fn();
      server_.open_.fetch_sub(1);
      lock.lock();
    }
  }

  GuardedHttpServer& server_;
  const size_t max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Job {
    std::function<void()> fn;
    Clock::time_point accepted;
  };
  std::deque<Job> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stop_ = false;
};

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits) : limits_(limits) {
  const size_t n = size_t(std::max(1, limits_.max_connections));
  new_task_queue = [this, n] { return new Queue(*this, n); };
}

GuardedHttpServer::~GuardedHttpServer() {
  if (ssl_ctx_) SSL_CTX_free(ssl_ctx_);
}

void GuardedHttpServer::use_tls(const std::string& cert_path, const std::string& key_path,
                                std::string_view cert_flag, std::string_view key_flag) {
  // Readable first, so that a missing file is said plainly rather than as an OpenSSL code.
  for (const auto& [flag, path] : {std::pair{cert_flag, &cert_path}, {key_flag, &key_path}}) {
    FILE* f = std::fopen(path->c_str(), "rb");
    if (!f) fail("{} {}: cannot read it ({})", flag, *path, std::strerror(errno));
    std::fclose(f);
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) fail("TLS: cannot create an OpenSSL context ({})", openssl_error("no detail"));
  struct Free {
    SSL_CTX*& c;
    ~Free() {
      if (c) SSL_CTX_free(c);
    }
  } guard{ctx};
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_path.c_str()) != 1)
    fail("{} {}: not a PEM certificate ({})", cert_flag, cert_path,
         openssl_error("OpenSSL gave no detail"));
  if (SSL_CTX_use_PrivateKey_file(ctx, key_path.c_str(), SSL_FILETYPE_PEM) != 1) {
    // A key that reads but is another certificate's fails here too (OpenSSL checks the pair).
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
      fail("{} {} is not the private key of the certificate {} {} ({})", key_flag, key_path,
           cert_flag, cert_path, openssl_error("OpenSSL gave no detail"));
    fail("{} {}: not a PEM private key ({})", key_flag, key_path,
         openssl_error("OpenSSL gave no detail"));
  }
  if (SSL_CTX_check_private_key(ctx) != 1)
    fail("{} {} is not the private key of the certificate {} {} ({})", key_flag, key_path,
         cert_flag, cert_path, openssl_error("OpenSSL gave no detail"));
  if (ssl_ctx_) SSL_CTX_free(ssl_ctx_);
  ssl_ctx_ = ctx;
  ctx = nullptr;  // kept: the guard frees nothing
}

void GuardedHttpServer::widen_backlog() {
  // httplib listens with a backlog of 5: a burst of connections beyond it has its SYNs dropped
  // and retried after 1 s, 3 s, … — clients wait in the kernel before the queue above sees them.
  // listen() on a listening socket resets its backlog.
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
}

int64_t GuardedHttpServer::open_connections() const {
  return open_.load();
}

Clock::time_point GuardedHttpServer::request_start() {
  return t_request_start;
}

bool GuardedHttpServer::wait_for_request(socket_t sock, bool first) const {
  // A new connection's grace counts from its accept (it may have waited in the queue already).
  const Clock::time_point start = first ? t_accepted : Clock::now();
  const Clock::time_point end =
      start + (first ? limits_.request_timeout : limits_.keep_alive_timeout);
  for (;;) {
    if (svr_sock_ == INVALID_SOCKET) return false;  // stopping
    bool pressed = false;                           // others wait for this thread
    if (Clock::now() - start >= limits_.idle_grace) {
      Queue* q = queue_.load();
      pressed = q && q->waiting() > 0;
    }
    const int slice = pressed ? 0 : std::min(50, ms_until(end));
    if (slice <= 0 && !pressed) return false;  // idle too long
    const int r = poll_one(sock, POLLIN, slice);
    if (r > 0) return true;  // data, or the peer closed (process_request then reads 0 and ends)
    if (r < 0 || pressed) return false;
  }
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  using std::chrono::milliseconds;
  // TLS: the client speaks first (its hello), so the handshake starts once it has, and must end
  // within request_timeout of that, as a request must.
  SSL* ssl = nullptr;
  bool first = true;
  if (ssl_ctx_) {
    const bool ready = wait_for_request(sock, true);
    first = false;
    if (ready) ssl = SSL_new(ssl_ctx_);
    if (ssl) {
      ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL, 0) | O_NONBLOCK);
      SSL_set_fd(ssl, sock);
      if (!ssl_accept_by(ssl, sock, Clock::now() + limits_.request_timeout)) {
        SSL_free(ssl);
        ssl = nullptr;
      }
    }
    if (!ssl) {
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
  }
  DeadlineStream strm(sock, ssl, milliseconds(read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000),
                      milliseconds(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000));
  bool ret = false;
  for (size_t count = std::max<size_t>(1, keep_alive_max_count_); count > 0; --count) {
    const bool fresh = first && count == keep_alive_max_count_;
    if (!strm.buffered() && !wait_for_request(sock, fresh)) break;
    t_request_start = Clock::now();
    strm.start_request(t_request_start + limits_.request_timeout,
                       payload_max_length_ + limits_.header_bytes);
    bool connection_closed = false;
    ret = process_request(strm, count == 1, connection_closed, nullptr);
    strm.end_request();
    if (!ret || connection_closed) break;
  }
  if (ssl) {
    SSL_shutdown(ssl);  // one close_notify, not waiting for the peer's
    SSL_free(ssl);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

// ApiKeys and parse_bearer (http_guard.h).

namespace {
std::array<unsigned char, 32> sha256(std::string_view s) {
  std::array<unsigned char, 32> d{};
  unsigned int n = 0;
  if (EVP_Digest(s.data(), s.size(), d.data(), &n, EVP_sha256(), nullptr) != 1 || n != d.size())
    fail("SHA-256 failed in OpenSSL ({})", openssl_error("no detail"));
  return d;
}
}  // namespace

ApiKeys::ApiKeys(const std::vector<std::string>& keys) {
  for (const std::string& k : keys) digests_.push_back(sha256(k));
}

bool ApiKeys::matches(std::string_view key) const {
  const std::array<unsigned char, 32> d = sha256(key);
  int hit = 0;
  for (const auto& k : digests_) hit |= CRYPTO_memcmp(d.data(), k.data(), d.size()) == 0;
  return hit != 0;
}

BearerToken parse_bearer(std::string_view v) {
  BearerToken t;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  v = trim(v);
  const size_t sp = v.find_first_of(" \t");
  const std::string_view scheme = v.substr(0, sp);
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  if (v.empty()) {
    t.problem = "the Authorization header is empty";
  } else if (lower(scheme) != "bearer") {
    t.problem = fmt::format("the Authorization header uses the scheme '{}', not Bearer",
                            scheme.substr(0, 32));
  } else if (sp == std::string_view::npos || trim(v.substr(sp)).empty()) {
    t.problem = "the Authorization header says Bearer but carries no key";
  } else if (trim(v.substr(sp)).find_first_of(" \t") != std::string_view::npos) {
    t.problem = "the Authorization header's key holds a space (expected 'Bearer KEY')";
  } else {
    t.ok = true;
    t.key = std::string(trim(v.substr(sp)));
  }
  return t;
}

}  // namespace zaya
