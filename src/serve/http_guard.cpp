// GuardedHttpServer (see http_guard.h). httplib's listen loop accepts and hands each socket to
// the task queue, which calls the (virtual) process_and_close_socket on a worker thread; this
// class overrides both ends: its Queue grows threads on demand up to the limit, and its
// process_and_close_socket runs httplib's own request processing (process_request, protected)
// over a Stream whose reads carry the request deadline.
#include "serve/http_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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
// per-read timeout; writes bounded per write, as in httplib's SocketStream.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int sock, std::chrono::milliseconds read_timeout,
                 std::chrono::milliseconds write_timeout)
      : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

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
      const int wait = read_wait_ms();
      if (wait <= 0 || poll_one(sock_, POLLIN, wait) <= 0) return -1;
      ssize_t n;
      do {
        n = ::recv(sock_, buf_, sizeof(buf_), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      pos_ = 0, len_ = size_t(n);
    }
    const size_t k = std::min({size, budget_, len_ - pos_});
    std::memcpy(ptr, buf_ + pos_, k);
    pos_ += k, budget_ -= k;
    return ssize_t(k);
  }
  bool buffered() const { return pos_ < len_; }
  ssize_t write(const char* ptr, size_t size) override {
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
  int sock_;
  std::chrono::milliseconds read_timeout_, write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  size_t budget_ = SIZE_MAX;
  char buf_[4096];
  size_t pos_ = 0, len_ = 0;
};

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

GuardedHttpServer::~GuardedHttpServer() = default;

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
  DeadlineStream strm(sock, milliseconds(read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000),
                      milliseconds(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000));
  bool ret = false;
  for (size_t count = std::max<size_t>(1, keep_alive_max_count_); count > 0; --count) {
    if (!strm.buffered() && !wait_for_request(sock, count == keep_alive_max_count_)) break;
    t_request_start = Clock::now();
    strm.start_request(t_request_start + limits_.request_timeout,
                       payload_max_length_ + limits_.header_bytes);
    bool connection_closed = false;
    ret = process_request(strm, count == 1, connection_closed, nullptr);
    strm.end_request();
    if (!ret || connection_closed) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace zaya
