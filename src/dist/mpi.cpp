// dist::MpiGroup: collectives on host buffers over MPI (OpenMPI on the CPU build).
//
// - MPI is initialised once per process (MPI_THREAD_FUNNELED: only the thread that made the
//   group calls collectives; OpenMP workers never do) and finalised at exit — unless a collective
//   failed or the group was torn down by an exception, because MPI_Finalize waits for every peer
//   and a dead peer would turn an error into a hang. Exiting without it, non-zero, is what makes
//   mpirun stop the remaining ranks at once.
// - Each group works on its own duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, and every
//   MPI call goes through ZAYA_MPI_CHECK, so an MPI error becomes a zaya::Error (one line naming
//   the call and MPI's own explanation) instead of an abort deep inside the library.
// - Timeouts: every collective is the non-blocking MPI-3 form, polled with MPI_Test until done or
//   until the group's deadline passes (then a zaya::Error naming the collective). See wait().
// - Determinism: for a fixed communicator size and count OpenMPI picks a fixed algorithm, so the
//   reduction order (and the result's bits) never depends on timing.
// - all_reduce and reduce_scatter run in pieces of at most 4 MiB (see kReducePieceBytes), in a
//   fixed order, so results stay deterministic. MPI counts are int: broadcast splits buffers into
//   pieces of 2^30 elements; all_gather chunks must stay below 2^31 elements.
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/assert.h"
#include "core/heartbeat.h"
#include "core/timer.h"
#include "dist/group_impl.h"

namespace zaya::dist {
namespace {

// Set once a collective failed, timed out or a group died with an exception in flight: the
// peers may be gone, so MPI_Finalize (which waits for them) must be skipped at exit.
bool g_mpi_broken = false;

[[noreturn]] void mpi_fail(int code, const char* expr, const char* file, int line) {
  g_mpi_broken = true;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  const std::string_view call(expr, std::strcspn(expr, "("));
  const char* base = std::strrchr(file, '/');
  fail("{} failed: {} (MPI error {} at {}:{}); a peer rank probably died — see its output", call,
       len ? std::string_view(text, len) : std::string_view("unknown error"), code,
       base ? base + 1 : file, line);
}

// Every MPI call: a failure becomes a zaya::Error naming the call and MPI's message.
#define ZAYA_MPI_CHECK(expr)                                                            \
  do {                                                                                  \
    const int zaya_mpi_rc_ = (expr);                                                    \
    if (zaya_mpi_rc_ != MPI_SUCCESS) mpi_fail(zaya_mpi_rc_, #expr, __FILE__, __LINE__); \
  } while (0)

void finalize_at_exit() {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (!finalized && !g_mpi_broken) MPI_Finalize();
}

void ensure_mpi_initialised() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialised = 0, finalized = 0;
    ZAYA_MPI_CHECK(MPI_Initialized(&initialised));
    ZAYA_MPI_CHECK(MPI_Finalized(&finalized));
    ZAYA_CHECK_INPUT(!finalized, "MPI was finalised already: make process groups before exit");
    if (initialised) return;  // the embedding program owns MPI's lifetime
    int provided = 0;
    ZAYA_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    ZAYA_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    std::atexit(finalize_at_exit);
  });
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::I32:
      return MPI_INT32_T;
    default:
      ZAYA_ASSERT(false, "no MPI type for {} (check_buffer lets only F32/F64/I32 through)",
                  dtype_name(t));
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

constexpr int64_t kMaxPiece = int64_t(1) << 30;  // elements per call of a split broadcast
// Reductions go in pieces of at most 4 MiB: OpenMPI allocates a temporary as large as the
// message for each reduction, and above glibc's 32 MiB mmap limit that is fresh memory every
// call, whose page faults cost more than the transfer.
constexpr size_t kReducePieceBytes = size_t(4) << 20;

class MpiGroup;

// A started collective: its MPI requests, and what wait() does once they completed (an in-place
// reduce-scatter's move to chunk rank(), returning the staging buffer). Registered with its group
// while open, for progress().
class MpiPending final : public Pending {
 public:
  MpiPending(MpiGroup& g, const char* what);
  ~MpiPending() override;
  MpiPending(const MpiPending&) = delete;
  MpiPending& operator=(const MpiPending&) = delete;

  MPI_Request& add() { return reqs.emplace_back(MPI_REQUEST_NULL); }
  void test();  // advances the requests (MPI moves data only inside MPI calls)
  void wait() override;

  std::vector<MPI_Request> reqs;
  std::vector<char> staging;  // large reduce-scatters: the pieces of every rank's chunk
  void* move_to = nullptr;    // in-place reduce-scatter: the result goes from move_from …
  const void* move_from = nullptr;
  size_t move_bytes = 0;  // … to move_to once complete

 private:
  MpiGroup& g_;
  const char* what_;
  bool done_ = false;
};

class MpiGroup final : public Group {
 public:
  explicit MpiGroup(double timeout_s) : timeout_s_(timeout_s) {
    ensure_mpi_initialised();
    ZAYA_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    ZAYA_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    MPI_Request req;
    ZAYA_MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &req));
    wait(req, "make_group");
    ZAYA_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  }
  ~MpiGroup() override {
    // Unwinding from an error: peers may be waiting in a collective this rank never reaches.
    if (std::uncaught_exceptions() > 0) g_mpi_broken = true;
    if (!g_mpi_broken) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::Mpi; }

  void all_reduce(const Tensor& buf, ReduceOp op) override {
    check_usable("all_reduce");
    check_buffer("all_reduce", buf);
    check_host("all_reduce", buf);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "all_reduce");
    const size_t elem = dtype_size(buf.dtype);
    const int64_t piece = int64_t(kReducePieceBytes / elem);
    for (int64_t at = 0; at < buf.numel() || at == 0; at += piece) {
      const int n = int(std::min(buf.numel() - at, piece));
      MPI_Request req;
      ZAYA_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(buf.data) + at * elem, n,
                                    mpi_type(buf.dtype), mpi_op(op), comm_, &req));
      wait(req, "all_reduce");
      if (buf.numel() == 0) break;
    }
  }

  void reduce_scatter(const Tensor& send, const Tensor& recv) override {
    check_reduce_scatter(send, recv);
    const int64_t chunk = recv.numel();
    const int64_t piece = reduce_piece(send);
    if (chunk <= piece) {
      MpiPending p(*this, "reduce_scatter");
      post_reduce_scatter(p, send, recv);
      p.wait();
      return;
    }
    // Large chunks: piece k of every rank's chunk is staged contiguously and reduced on its
    // own. In place is safe: piece k's result lands on piece k of chunk rank(), already staged.
    const size_t elem = dtype_size(send.dtype);
    staging_.resize(size_t(piece) * size_ * elem);
    for (int64_t at = 0; at < chunk; at += piece) {
      const int64_t n = std::min(chunk - at, piece);
      MpiPending p(*this, "reduce_scatter");
      post_piece(p, staging_.data(), send, recv, at, n);
      p.wait();
    }
  }

  // All pieces are posted at once (a later post from progress() could interleave differently
  // with other collectives on each rank), so large chunks stage the whole send buffer: one
  // host buffer per collective in flight, reused from call to call.
  std::unique_ptr<Pending> start_reduce_scatter(const Tensor& send, const Tensor& recv) override {
    check_reduce_scatter(send, recv);
    auto p = std::make_unique<MpiPending>(*this, "reduce_scatter");
    const int64_t chunk = recv.numel(), piece = reduce_piece(send);
    if (chunk <= piece) {
      post_reduce_scatter(*p, send, recv);
      return p;
    }
    p->staging = take_staging(send.nbytes());
    const size_t elem = dtype_size(send.dtype);
    for (int64_t at = 0; at < chunk; at += piece)
      post_piece(*p, p->staging.data() + size_t(at) * size_ * elem, send, recv, at,
                 std::min(chunk - at, piece));
    return p;
  }

  void all_gather(const Tensor& send, const Tensor& recv) override {
    start_all_gather(send, recv)->wait();
  }

  std::unique_ptr<Pending> start_all_gather(const Tensor& send, const Tensor& recv) override {
    check_usable("all_gather");
    check_chunks("all_gather", recv, send, size_);
    check_host("all_gather", send);
    check_host("all_gather", recv);
    const int n = chunk_count("all_gather", send);
    const char* mine = static_cast<const char*>(recv.data) + size_t(rank_) * send.nbytes();
    const void* from = send.data == mine && n > 0 ? MPI_IN_PLACE : send.data;
    auto p = std::make_unique<MpiPending>(*this, "all_gather");
    ZAYA_MPI_CHECK(MPI_Iallgather(from, n, mpi_type(send.dtype), recv.data, n, mpi_type(recv.dtype),
                                  comm_, &p->add()));
    return p;
  }

  void progress() override {
    for (MpiPending* p : live_) p->test();
  }

  void broadcast(const Tensor& buf, int root) override {
    check_usable("broadcast");
    check_buffer("broadcast", buf);
    check_host("broadcast", buf);
    check_root("broadcast", root, size_);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "broadcast");
    const size_t elem = dtype_size(buf.dtype);
    for (int64_t at = 0; at < buf.numel() || at == 0; at += kMaxPiece) {
      const int n = int(std::min(buf.numel() - at, kMaxPiece));
      MPI_Request req;
      ZAYA_MPI_CHECK(MPI_Ibcast(static_cast<char*>(buf.data) + at * elem, n, mpi_type(buf.dtype),
                                root, comm_, &req));
      wait(req, "broadcast");
      if (buf.numel() == 0) break;
    }
  }

  void barrier() override {
    check_usable("barrier");
    const heartbeat::Scope beat(heartbeat::Section::Collective, "barrier");
    MPI_Request req;
    ZAYA_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    wait(req, "barrier");
  }

 private:
  void check_usable(const char* what) const {
    ZAYA_CHECK_INPUT(!g_mpi_broken,
                     "{}: the process group is unusable after an earlier communication failure",
                     what);
  }

  static int chunk_count(const char* what, const Tensor& chunk) {
    ZAYA_CHECK_INPUT(chunk.numel() < kMaxPiece * 2,
                     "{}: a chunk of {} elements is more than MPI's 2^31-1; split the buffer "
                     "into smaller buckets",
                     what, chunk.numel());
    return int(chunk.numel());
  }

  // Polls the requests until all completed or the group's timeout passes. MPI moves data only
  // inside MPI calls (a large message is many fragments, each needing a call), so the loop keeps
  // testing: a pure spin for 1 ms, then yielding the core between tests — as OpenMPI's own
  // blocking calls do when oversubscribed. Only after 10 s (a straggler or a hang, no transfer
  // lasts that long) does it nap 1 ms between tests.
  void wait(std::span<MPI_Request> reqs, const char* what) {
    const Timer clock;
    for (;;) {
      int done = 0;
      ZAYA_MPI_CHECK(MPI_Testall(int(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE));
      if (done) return;
      const double waited = clock.seconds();
      if (waited > timeout_s_) {
        g_mpi_broken = true;
        fail_timeout(what, timeout_s_, rank_, size_);
      }
      poll_pause(waited);
    }
  }
  void wait(MPI_Request& req, const char* what) { wait(std::span<MPI_Request>(&req, 1), what); }

  friend class MpiPending;

  void check_reduce_scatter(const Tensor& send, const Tensor& recv) const {
    check_usable("reduce_scatter");
    check_chunks("reduce_scatter", send, recv, size_);
    check_host("reduce_scatter", send);
    check_host("reduce_scatter", recv);
    chunk_count("reduce_scatter", recv);
  }

  // Elements per rank of one reduce-scatter piece.
  int64_t reduce_piece(const Tensor& send) const {
    return std::max<int64_t>(1, int64_t(kReducePieceBytes / (dtype_size(send.dtype) * size_)));
  }

  // A chunk of at most one piece, straight from send (in place: MPI leaves the result at the
  // start of send, moved to chunk rank() when the request completes).
  void post_reduce_scatter(MpiPending& p, const Tensor& send, const Tensor& recv) {
    const int chunk = int(recv.numel());
    char* mine = static_cast<char*>(send.data) + size_t(rank_) * recv.nbytes();
    if (recv.data == mine && chunk > 0) {
      ZAYA_MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, send.data, chunk, mpi_type(send.dtype),
                                               MPI_SUM, comm_, &p.add()));
      if (rank_ != 0) {
        p.move_to = mine;
        p.move_from = send.data;
        p.move_bytes = recv.nbytes();
      }
      return;
    }
    ZAYA_MPI_CHECK(MPI_Ireduce_scatter_block(send.data, recv.data, chunk, mpi_type(send.dtype),
                                             MPI_SUM, comm_, &p.add()));
  }

  // Piece [at, at + n) of every rank's chunk, staged contiguously at `staged`, reduced into recv.
  void post_piece(MpiPending& p, char* staged, const Tensor& send, const Tensor& recv, int64_t at,
                  int64_t n) {
    const size_t elem = dtype_size(send.dtype);
    const int64_t chunk = recv.numel();
    for (int r = 0; r < size_; ++r)
      std::memcpy(staged + size_t(r * n) * elem,
                  static_cast<const char*>(send.data) + size_t(r * chunk + at) * elem,
                  size_t(n) * elem);
    ZAYA_MPI_CHECK(MPI_Ireduce_scatter_block(staged, static_cast<char*>(recv.data) + at * elem,
                                             int(n), mpi_type(send.dtype), MPI_SUM, comm_,
                                             &p.add()));
  }

  std::vector<char> take_staging(size_t bytes) {
    std::vector<char> v;
    if (!spare_.empty()) {
      v = std::move(spare_.back());
      spare_.pop_back();
    }
    v.resize(bytes);
    return v;
  }

  double timeout_s_;
  std::vector<char> staging_;             // reduce_scatter's pieces, size() × piece elements
  std::vector<std::vector<char>> spare_;  // started reduce-scatters' staging, for reuse
  std::vector<MpiPending*> live_;         // started and not yet finished
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

MpiPending::MpiPending(MpiGroup& g, const char* what) : g_(g), what_(what) {
  g_.live_.push_back(this);
}

MpiPending::~MpiPending() {
  if (!done_) {
    if (std::uncaught_exceptions() > 0 || g_mpi_broken) {
      // Unwinding, or after a failure: the peers may be gone, so waiting could only time out.
      // The requests stay open: MPI_Finalize must not wait for them.
      g_mpi_broken = true;
    } else {
      try {
        wait();
      } catch (const std::exception&) {
        g_mpi_broken = true;  // already reported as broken by the failed wait
      }
    }
  }
  std::erase(g_.live_, this);
}

void MpiPending::test() {
  if (done_ || reqs.empty()) return;
  int flag = 0;
  ZAYA_MPI_CHECK(MPI_Testall(int(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE));
}

void MpiPending::wait() {
  if (done_) return;
  g_.check_usable(what_);
  {
    const heartbeat::Scope beat(heartbeat::Section::Collective, what_);
    g_.wait(reqs, what_);
  }
  if (move_bytes) std::memmove(move_to, move_from, move_bytes);
  if (!staging.empty()) g_.spare_.push_back(std::move(staging));
  done_ = true;
  std::erase(g_.live_, this);
}

}  // namespace

std::unique_ptr<Group> make_mpi_group(double timeout_s) {
  return std::make_unique<MpiGroup>(timeout_s);
}

}  // namespace zaya::dist
