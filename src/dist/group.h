// dist::Group: the one interface to collectives (docs/architecture.md). `single` (size 1, the
// default, every collective a copy or no-op), `mpi` (host buffers, OpenMPI) and `nccl` (GPU
// buffers, one process per GPU; dist/nccl.cpp) implement it; the trainer calls it
// unconditionally — there is no `if (distributed)` above this layer.
//
// Contract for every collective:
// - Buffers are contiguous Tensor views of F32, F64 or I32 (send and recv of one call share the
//   dtype); every rank calls the same collectives in the same order with the same counts, from
//   the thread that made the group (MPI runs in MPI_THREAD_FUNNELED mode).
// - Equal chunks: reduce_scatter and all_gather move size()·n elements as size() chunks of n;
//   callers pad (the ZeRO-1 buckets do) so no tensor size needs to divide the number of ranks.
// - Results are deterministic: the reduction order does not depend on timing. For `nccl` this
//   is what NCCL does in practice, not a documented guarantee: with the same ranks, devices,
//   topology, NCCL version and settings (NCCL_ALGO, NCCL_PROTO), a collective of a given size
//   picks the same algorithm and gives the same bits run to run. Not guaranteed: the same bits
//   at another rank count, on another topology or NCCL version, or as the mpi group's (another
//   reduction order: F32 sums agree to rounding, not bitwise).
// - Buffers: `single` takes any device; `mpi` host memory only (a GPU buffer is a clear error);
//   `nccl` GPU memory, and host memory staged through the device (copied in, reduced, copied
//   back: for small bookkeeping buffers, not for bulk data).
// - A peer that does not arrive within the group's timeout (killed, hung) surfaces as a
//   zaya::Error naming the collective, never a silent hang. After such a failure the group is
//   unusable (every later call throws) and the process should exit non-zero: under mpirun that
//   stops the remaining ranks. A rank that dies outright is usually reported by mpirun itself,
//   which then stops the job (docs/distributed.md).
// - Argument errors (dtype, chunk sizes, root) throw zaya::Error before anything is sent, and
//   leave the group usable.
// - Started collectives (start_reduce_scatter, start_all_gather: the ZeRO-1 overlap) follow the
//   same rules, started by every rank in the same order; until their wait() returns neither
//   buffer may be touched, and blocking collectives may run in between. They give the same bits
//   as the blocking call of the same buffers.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/enum_words.h"
#include "core/tensor.h"

namespace zaya::dist {

enum class ReduceOp { Sum, Max, Min };

// The implementations of Group.
enum class Backend { Single, Mpi, Nccl };

}  // namespace zaya::dist

template <>
struct zaya::EnumWords<zaya::dist::Backend> {
  static constexpr std::pair<dist::Backend, std::string_view> words[] = {
      {dist::Backend::Single, "single"},
      {dist::Backend::Mpi, "mpi"},
      {dist::Backend::Nccl, "nccl"}};
};

namespace zaya::dist {

// A collective started by Group::start_reduce_scatter / start_all_gather.
class Pending {
 public:
  virtual ~Pending() = default;
  // Finishes it (once; later calls return at once), against the group's timeout like a blocking
  // call: afterwards the result is there for whatever runs next. A pending destroyed unfinished
  // is finished first (not after a failure: the peers may be gone). The group must outlive it.
  virtual void wait() = 0;
};

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;

  // In place: every rank ends with the elementwise reduction of buf over the ranks.
  virtual void all_reduce(const Tensor& buf, ReduceOp op = ReduceOp::Sum) = 0;
  // send[size()·n] → recv[n]: rank r receives the sum over ranks of their chunk r. recv may be
  // chunk rank() of send (in place; send's other chunks are then left undefined).
  virtual void reduce_scatter(const Tensor& send, const Tensor& recv) = 0;
  // send[n] → recv[size()·n]: chunk r of recv is rank r's send (send may alias chunk rank()).
  virtual void all_gather(const Tensor& send, const Tensor& recv) = 0;
  // In place: every rank ends with root's buf.
  virtual void broadcast(const Tensor& buf, int root) = 0;
  virtual void barrier() = 0;

  // Asynchronous forms: start the collective and return. mpi: non-blocking MPI requests, which
  // move data only inside MPI calls, so call progress() now and then while computing; nccl:
  // device buffers (host buffers: a blocking call), on the group's communication stream after
  // the work already queued on the GPU stream, overlapping what is queued next. The single group
  // (and the default here) finishes in the call.
  virtual std::unique_ptr<Pending> start_reduce_scatter(const Tensor& send, const Tensor& recv);
  virtual std::unique_ptr<Pending> start_all_gather(const Tensor& send, const Tensor& recv);
  // Lets the started collectives advance (mpi: tests their requests); a no-op elsewhere.
  virtual void progress() {}
};

// kind: "single", "mpi", "nccl", or "auto" (mpi when launched by mpirun/srun, else single).
// "nccl" exists in the CUDA build only (elsewhere a clear zaya::Error); it needs MPI for its
// bootstrap and libnccl.so.2 at run time (dist/nccl.h). timeout_s bounds the wait of every
// collective (default 300 s); the environment variable ZAYA_DIST_TIMEOUT (seconds), when set,
// overrides it.
std::unique_ptr<Group> make_group(const std::string& kind = "auto", double timeout_s = 300);
// The group for collectives on buffers of `device`: "auto" for the CPU; for the GPU, "nccl"
// under mpirun/srun (any number of ranks: the mpi group cannot move GPU buffers), else single.
std::unique_ptr<Group> make_group_for(Device device, double timeout_s = 300);

}  // namespace zaya::dist
