// dist::NcclGroup: collectives on GPU buffers with NCCL (RCCL on AMD), one process per GPU (every
// build with a GPU backend; see dist/nccl.h for the CPU build).
//
// - Bootstrap: the MPI group (dist/mpi.cpp) gives rank and size and carries rank 0's
//   ncclUniqueId to the others; MPI moves nothing else. The device is the local rank
//   (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or MPI_LOCALRANKID; else the global rank) modulo
//   the devices of the node, chosen through ZAYA_GPU_DEVICE before the GPU backend's first use —
//   unless ZAYA_GPU_DEVICE is set already (an operator pinning ranks), which is respected. A
//   process that used its GPU before making the group, on another device, is a clear error.
// - libnccl.so.2 (librccl.so.1) is loaded at run time (open_nccl_library); the types and the
//   entry points' signatures come from the vendor's header — CUDA's nccl.h, ROCm's rccl.h — or,
//   where there is none (Debian's HIP), from dist/nccl_abi.h; the functions from
//   the library.
// - Every collective runs on the communication stream (gpu::comm_stream), ordered after the work
//   already queued on the compute stream (gpu::stream) by an event, so after the kernels that
//   wrote its buffers. A blocking call returns when the communication stream has finished it:
//   the caller may read the result at once, as with the MPI group. A started one
//   (start_reduce_scatter / start_all_gather, device buffers) returns once NCCL has enqueued it;
//   the compute stream meanwhile runs on, and its Pending's wait() polls the event after it
//   against the group's deadline (the host waits there, as for a blocking call, but the GPU has
//   had the work queued meanwhile to overlap). One stream for all of the group's collectives
//   keeps them in the order every rank issued them.
// - Timeouts: the communicator is non-blocking (NCCL's config.blocking = 0), so no NCCL call
//   waits for a peer; wait() polls ncclCommGetAsyncError and the stream until both are done, an
//   NCCL error or the group's deadline. On error or timeout the communicator is aborted
//   (ncclCommAbort), the group is unusable and the zaya::Error names the collective. The
//   deadline covers the kernels queued before the collective too (the event orders them first),
//   and the collectives started before it; a started one's wait() polls the same way.
// - Host buffers (the trainer's scalars and bookkeeping) are staged: copied to device scratch
//   memory, reduced there, copied back. Mixed calls (send on the GPU, recv on the host) work.
#if defined(ZAYA_GPU_CUDA)
#include <nccl.h>
#elif defined(ZAYA_GPU_HIP) && __has_include(<rccl/rccl.h>)
#include <rccl/rccl.h>
#else
#include "dist/nccl_abi.h"
#endif

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/assert.h"
#include "core/heartbeat.h"
#include "core/timer.h"
#include "dist/group_impl.h"
#include "dist/nccl.h"
#include "ops/gpu/runtime.h"

namespace zaya::dist {
namespace {

// The NCCL entry points zaya calls: signatures from nccl.h, addresses from the library.
struct NcclApi {
  SharedLibrary lib;
  decltype(&ncclGetVersion) get_version;
  decltype(&ncclGetErrorString) error_string;
  decltype(&ncclGetLastError) last_error;
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRankConfig) init_rank_config;
  decltype(&ncclCommGetAsyncError) async_error;
  decltype(&ncclCommFinalize) finalize;
  decltype(&ncclCommDestroy) destroy;
  decltype(&ncclCommAbort) abort;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclBroadcast) broadcast;

  template <class F>
  void bind(F& f, const char* name) {
    f = reinterpret_cast<F>(lib.symbol(name));
  }
};

constexpr int kMinVersion = NCCL_VERSION(2, 14, 0);  // non-blocking communicators, finalize

// Loaded once per process; a failed load is retried (and fails alike) on the next request.
const NcclApi& nccl_api() {
  static std::mutex mu;
  static std::unique_ptr<NcclApi> api;
  std::lock_guard<std::mutex> lock(mu);
  if (api) return *api;
  auto a = std::make_unique<NcclApi>();
  a->lib = open_nccl_library();
  a->bind(a->get_version, "ncclGetVersion");
  a->bind(a->error_string, "ncclGetErrorString");
  a->bind(a->last_error, "ncclGetLastError");
  a->bind(a->get_unique_id, "ncclGetUniqueId");
  a->bind(a->init_rank_config, "ncclCommInitRankConfig");
  a->bind(a->async_error, "ncclCommGetAsyncError");
  a->bind(a->finalize, "ncclCommFinalize");
  a->bind(a->destroy, "ncclCommDestroy");
  a->bind(a->abort, "ncclCommAbort");
  a->bind(a->all_reduce, "ncclAllReduce");
  a->bind(a->reduce_scatter, "ncclReduceScatter");
  a->bind(a->all_gather, "ncclAllGather");
  a->bind(a->broadcast, "ncclBroadcast");
  int version = 0;
  if (a->get_version(&version) != ncclSuccess || version < kMinVersion)
    fail("{} is NCCL version code {}; zaya needs {} (2.14) or later", a->lib.path(), version,
         kMinVersion);
  api = std::move(a);
  return *api;
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::I32:
      return ncclInt32;
    default:
      ZAYA_ASSERT(false, "no NCCL type for {} (check_buffer lets only F32/F64/I32 through)",
                  dtype_name(t));
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

int local_rank(int rank) {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return rank;
}

// The device this rank should use (set through ZAYA_GPU_DEVICE for the GPU runtime), or −1 when
// the operator set ZAYA_GPU_DEVICE.
int choose_device(int rank) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    fail("make_group: the NCCL group needs a GPU on every rank; rank {} has none ({})", rank,
         err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports no device");
  if (const char* pinned = std::getenv("ZAYA_GPU_DEVICE"); pinned && *pinned) return -1;
  const int device = local_rank(rank) % count;
  setenv("ZAYA_GPU_DEVICE", std::to_string(device).c_str(), 1);
  return device;
}

// A collective's buffer as NCCL sees it: the tensor's memory when it is on the GPU, otherwise
// (host memory) a device copy made for the call and copied back by finish().
class Staged {
 public:
  // `copy_in`: the collective reads the buffer (it is not only written). `outer`: `t` lies
  // inside that buffer's memory at `offset` bytes (the in-place chunk), so it is staged with it.
  Staged(const Tensor& t, bool copy_in, const Staged* outer = nullptr, size_t offset = 0) : t_(t) {
    if (outer) {
      ptr_ = static_cast<char*>(outer->ptr_) + offset;
      if (copy_in && t.device != Device::Gpu && t.nbytes())
        gpu::copy(ptr_, Device::Gpu, t.data, Device::Cpu, t.nbytes());
      return;
    }
    if (t.device == Device::Gpu || t.nbytes() == 0) {
      ptr_ = t.data;
      return;
    }
    scratch_.emplace(t.nbytes());
    ptr_ = scratch_->as<char>();
    if (copy_in) gpu::copy(ptr_, Device::Gpu, t.data, Device::Cpu, t.nbytes());
  }
  void* ptr() const { return ptr_; }
  // The result back to host memory (after the collective finished).
  void finish() const {
    if (t_.device != Device::Gpu && t_.nbytes())
      gpu::copy(t_.data, Device::Cpu, ptr_, Device::Gpu, t_.nbytes());
  }

 private:
  Tensor t_;
  void* ptr_ = nullptr;
  std::optional<gpu::Scratch> scratch_;
};

class NcclGroup;

// A started collective: the event after it on the communication stream. wait() polls it against
// the group's deadline (a dead peer becomes an error and an aborted communicator, not a hang).
class NcclPending final : public Pending {
 public:
  NcclPending(NcclGroup& g, const char* what) : g_(g), what_(what), done_(gpu::comm_stream()) {}
  ~NcclPending() override {
    try {
      wait();
    } catch (const std::exception&) {  // the group is broken now: the next call reports it
    }
  }
  void wait() override;

 private:
  NcclGroup& g_;
  const char* what_;
  gpu::StreamEvent done_;
  bool waited_ = false;
};

class NcclGroup final : public Group {
 public:
  explicit NcclGroup(double timeout_s) : timeout_s_(timeout_s), api_(nccl_api()) {
    bootstrap_ = make_mpi_group(timeout_s);
    rank_ = bootstrap_->rank();
    size_ = bootstrap_->size();
    const int want = choose_device(rank_);
    (void)gpu::stream();  // creates the GPU context on the chosen device
    stream_ = gpu::comm_stream();
    int device = -1;
    ZAYA_GPU_CHECK(cudaGetDevice(&device));
    if (want >= 0 && device != want)
      fail(
          "make_group: rank {} (local rank {}) should use GPU {} but this process already runs "
          "on GPU {}: make the NCCL group before any GPU work, or set ZAYA_GPU_DEVICE per rank",
          rank_, local_rank(rank_), want, device);
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank_ == 0) check(api_.get_unique_id(&id), "ncclGetUniqueId", "make_group");
    static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0);
    int32_t words[sizeof(ncclUniqueId) / sizeof(int32_t)];
    std::memcpy(words, &id, sizeof id);
    bootstrap_->broadcast(Tensor(words, {int64_t(std::size(words))}), 0);
    std::memcpy(&id, words, sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // no call waits for a peer: wait() polls with the deadline
    check(api_.init_rank_config(&comm_, size_, id, rank_, &config), "ncclCommInitRankConfig",
          "make_group");
    wait("make_group");
    barrier_word_.emplace(sizeof(int32_t));
  }

  ~NcclGroup() override {
    if (!comm_) return;
    // Unwinding from an error: peers may be waiting in a collective this rank never reaches.
    if (broken_ || std::uncaught_exceptions() > 0) {
      api_.abort(comm_);
      return;
    }
    ncclResult_t r = api_.finalize(comm_);
    const Timer clock;
    while (r == ncclInProgress && clock.seconds() < timeout_s_) {
      if (api_.async_error(comm_, &r) != ncclSuccess) break;
      if (r == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (r == ncclSuccess)
      api_.destroy(comm_);
    else
      api_.abort(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::Nccl; }

  void all_reduce(const Tensor& buf, ReduceOp op) override {
    check_usable("all_reduce");
    check_buffer("all_reduce", buf);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "all_reduce");
    if (buf.numel() == 0) return;
    const Staged b(buf, true);
    after_compute();
    check(api_.all_reduce(b.ptr(), b.ptr(), size_t(buf.numel()), nccl_type(buf.dtype), nccl_op(op),
                          comm_, stream_),
          "ncclAllReduce", "all_reduce");
    wait("all_reduce");
    b.finish();
  }

  void reduce_scatter(const Tensor& send, const Tensor& recv) override {
    check_usable("reduce_scatter");
    check_chunks("reduce_scatter", send, recv, size_);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "reduce_scatter");
    if (recv.numel() == 0) return;
    const size_t mine = size_t(rank_) * recv.nbytes();
    const bool in_place = recv.data == static_cast<char*>(send.data) + mine;
    const Staged s(send, true);
    const Staged r(recv, false, in_place ? &s : nullptr, mine);
    after_compute();
    check(api_.reduce_scatter(s.ptr(), r.ptr(), size_t(recv.numel()), nccl_type(send.dtype),
                              ncclSum, comm_, stream_),
          "ncclReduceScatter", "reduce_scatter");
    wait("reduce_scatter");
    r.finish();
  }

  void all_gather(const Tensor& send, const Tensor& recv) override {
    check_usable("all_gather");
    check_chunks("all_gather", recv, send, size_);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "all_gather");
    if (send.numel() == 0) return;
    const size_t mine = size_t(rank_) * send.nbytes();
    const bool in_place = send.data == static_cast<char*>(recv.data) + mine;
    const Staged r(recv, false);
    const Staged s(send, true, in_place ? &r : nullptr, mine);  // in place: a chunk of recv
    after_compute();
    check(api_.all_gather(s.ptr(), r.ptr(), size_t(send.numel()), nccl_type(send.dtype), comm_,
                          stream_),
          "ncclAllGather", "all_gather");
    wait("all_gather");
    r.finish();
  }

  void broadcast(const Tensor& buf, int root) override {
    check_usable("broadcast");
    check_buffer("broadcast", buf);
    check_root("broadcast", root, size_);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "broadcast");
    if (buf.numel() == 0) return;
    const Staged b(buf, rank_ == root);
    after_compute();
    check(api_.broadcast(b.ptr(), b.ptr(), size_t(buf.numel()), nccl_type(buf.dtype), root, comm_,
                         stream_),
          "ncclBroadcast", "broadcast");
    wait("broadcast");
    b.finish();
  }

  // Device buffers start on the communication stream; host buffers (staged) are blocking calls.
  std::unique_ptr<Pending> start_reduce_scatter(const Tensor& send, const Tensor& recv) override {
    check_usable("reduce_scatter");
    check_chunks("reduce_scatter", send, recv, size_);
    if (send.device != Device::Gpu || recv.device != Device::Gpu || recv.numel() == 0)
      return Group::start_reduce_scatter(send, recv);
    return start("reduce_scatter", "ncclReduceScatter", [&] {
      return api_.reduce_scatter(send.data, recv.data, size_t(recv.numel()), nccl_type(send.dtype),
                                 ncclSum, comm_, stream_);
    });
  }

  std::unique_ptr<Pending> start_all_gather(const Tensor& send, const Tensor& recv) override {
    check_usable("all_gather");
    check_chunks("all_gather", recv, send, size_);
    if (send.device != Device::Gpu || recv.device != Device::Gpu || send.numel() == 0)
      return Group::start_all_gather(send, recv);
    return start("all_gather", "ncclAllGather", [&] {
      return api_.all_gather(send.data, recv.data, size_t(send.numel()), nccl_type(send.dtype),
                             comm_, stream_);
    });
  }

  // NCCL has no barrier: a one-element all-reduce that every rank must join.
  void barrier() override {
    check_usable("barrier");
    const heartbeat::Scope beat(heartbeat::Section::Collective, "barrier");
    after_compute();
    check(api_.all_reduce(barrier_word_->as<int32_t>(), barrier_word_->as<int32_t>(), 1, ncclInt32,
                          ncclSum, comm_, stream_),
          "ncclAllReduce", "barrier");
    wait("barrier");
  }

 private:
  void check_usable(const char* what) const {
    ZAYA_CHECK_INPUT(!broken_,
                     "{}: the NCCL group is unusable after an earlier communication failure", what);
  }

  // Aborts the communicator (peers may never answer): the group is unusable from now on.
  void abandon() {
    broken_ = true;
    if (comm_) {
      api_.abort(comm_);
      comm_ = nullptr;
    }
  }
  template <class... Args>
  [[noreturn]] void give_up(fmt::format_string<Args...> f, Args&&... args) {
    std::string detail = fmt::format(f, std::forward<Args>(args)...);
    abandon();
    throw Error(detail);
  }

  // An NCCL call's result: ncclInProgress is the normal answer of a non-blocking communicator.
  void check(ncclResult_t r, const char* call, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    const char* last = comm_ ? api_.last_error(comm_) : nullptr;
    give_up("{}: {} failed on rank {} of {}: {}{}{}", what, call, rank_, size_,
            api_.error_string(r), last && *last ? ": " : "", last ? last : "");
  }

  // The collective enqueued next on the communication stream starts after the compute stream's
  // work so far (the kernels that wrote its buffers).
  void after_compute() { gpu::StreamEvent(gpu::stream()).make_wait(stream_); }

  // Polls until NCCL has no operation in progress and (stream_too) the communication stream is
  // idle, or the deadline (the MPI group's rhythm: poll_pause). A non-blocking communicator's
  // call may return before NCCL has enqueued the operation; no other NCCL call may come before
  // that has finished, which wait(what, false) waits for.
  void wait(const char* what, bool stream_too = true) {
    const Timer clock;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      check(api_.async_error(comm_, &state), "ncclCommGetAsyncError", what);
      if (state != ncclSuccess && state != ncclInProgress) check(state, "the NCCL operation", what);
      if (state == ncclSuccess && !stream_too) return;
      if (state == ncclSuccess) {
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady)
          give_up("{}: the GPU stream failed on rank {} of {}: {}", what, rank_, size_,
                  cudaGetErrorString(q));
        (void)cudaGetLastError();  // "not ready" is no error: clear it for the next launch check
      }
      const double waited = clock.seconds();
      if (waited > timeout_s_) {
        abandon();
        fail_timeout(what, timeout_s_, rank_, size_, " (NCCL communicator aborted)");
      }
      poll_pause(waited);
    }
  }

  void enqueued(const char* what) { wait(what, false); }

  // A started collective: ordered after the compute stream, enqueued by `call` (an NCCL call
  // named `name`), its pending.
  template <class Call>
  std::unique_ptr<Pending> start(const char* what, const char* name, Call call) {
    after_compute();
    check(call(), name, what);
    enqueued(what);
    return std::make_unique<NcclPending>(*this, what);
  }

 public:
  // A started collective's wait: until its event has passed, an NCCL error or the deadline.
  void wait_for(const gpu::StreamEvent& done, const char* what) {
    check_usable(what);
    const heartbeat::Scope beat(heartbeat::Section::Collective, what);
    const Timer clock;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      check(api_.async_error(comm_, &state), "ncclCommGetAsyncError", what);
      if (state != ncclSuccess && state != ncclInProgress) check(state, "the NCCL operation", what);
      bool passed = false;
      try {
        passed = done.done();
      } catch (const Error& e) {
        give_up("{}: the GPU stream failed on rank {} of {}: {}", what, rank_, size_, e.what());
      }
      if (passed) return;
      const double waited = clock.seconds();
      if (waited > timeout_s_) {
        abandon();
        fail_timeout(what, timeout_s_, rank_, size_, " (NCCL communicator aborted)");
      }
      poll_pause(waited);
    }
  }

 private:
  double timeout_s_;
  const NcclApi& api_;
  std::unique_ptr<Group> bootstrap_;  // the MPI group: rank, size, the unique id
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;             // gpu::comm_stream()
  std::optional<gpu::Scratch> barrier_word_;  // barrier()'s element
  int rank_ = 0, size_ = 1;
  bool broken_ = false;
};

void NcclPending::wait() {
  if (waited_) return;
  waited_ = true;  // (a failed wait has broken the group: no second try)
  g_.wait_for(done_, what_);
}

}  // namespace

std::unique_ptr<Group> make_nccl_group(double timeout_s) {
  return std::make_unique<NcclGroup>(timeout_s);
}

}  // namespace zaya::dist
