// GPU emulator: an NCCL stand-in, built as libnccl_emu.so and loaded by zaya's NCCL group
// (src/dist/nccl.cpp) through ZAYA_NCCL_LIB exactly as it loads libnccl.so.2. Each collective is
// the matching non-blocking MPI collective on the emulated device memory (host memory here), on
// a duplicate of MPI_COMM_WORLD (the group's MPI bootstrap initialised MPI).
//
// What it models: the entry points' signatures and semantics (in-place forms, counts per rank,
// the root of broadcast), the unique id (ranks must pass rank 0's: checked at init by an
// all-gather of the ids), non-blocking communicators (a call returns ncclInProgress while the MPI
// request is open; ncclCommGetAsyncError progresses it and says ncclSuccess when done; a blocking
// communicator waits in the call), abort (the communicator is dropped with its request open), and
// ZAYA_EMU_PROTECT (device memory is opened for the operation's lifetime). What it does not: the
// stream (one operation in flight per communicator: a second call before the first completed is
// ncclInvalidUsage; zaya's group always waits), NCCL's algorithms and their reduction order, and
// any timing.
#include <mpi.h>

#include "dist/nccl_abi.h"  // NCCL's interface, with the emulator's runtime (ops/gpu/vendor/emu.h)

#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

struct ncclComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  bool blocking = true;
  MPI_Request req = MPI_REQUEST_NULL;
  std::function<ncclResult_t()> then;  // runs when req completes (may start another request)
  bool device_open = false;            // emu::DeviceAccess held for the open operation
  std::vector<char> temp;              // in-place reduce_scatter's result before it moves
  ncclUniqueId id{};
  std::vector<ncclUniqueId> ids;  // init: every rank's id
  std::string last_error;
};

namespace {

ncclResult_t failed(ncclComm* c, ncclResult_t r, std::string why) {
  if (c) c->last_error = "nccl_emu: " + why;
  return r;
}

void open_device(ncclComm* c) {
  if (!c->device_open) emu::device_open();
  c->device_open = true;
}
void close_device(ncclComm* c) {
  if (c->device_open) emu::device_close();
  c->device_open = false;
}

MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt32:
      return MPI_INT32_T;
    case ncclFloat32:
      return MPI_FLOAT;
    case ncclFloat64:
      return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}
size_t type_size(ncclDataType_t t) {
  return t == ncclFloat64 ? 8 : 4;
}
MPI_Op mpi_op(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return MPI_SUM;
    case ncclProd:
      return MPI_PROD;
    case ncclMax:
      return MPI_MAX;
    case ncclMin:
      return MPI_MIN;
    default:
      return MPI_OP_NULL;
  }
}

// Tests the open request; on completion runs its continuation. ncclInProgress while open.
ncclResult_t progress(ncclComm* c, bool block) {
  while (c->req != MPI_REQUEST_NULL) {
    int done = 0;
    const int rc =
        block ? MPI_Wait(&c->req, MPI_STATUS_IGNORE) : MPI_Test(&c->req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      close_device(c);
      return failed(c, ncclSystemError, "MPI error " + std::to_string(rc));
    }
    if (!block && !done) return ncclInProgress;
    c->req = MPI_REQUEST_NULL;
    auto then = std::move(c->then);
    c->then = nullptr;
    const ncclResult_t r = then ? then() : ncclSuccess;
    if (r != ncclSuccess) return r;
  }
  close_device(c);
  return ncclSuccess;
}

// Common start of an operation: argument checks, then the MPI request `start` makes.
template <class Start>
ncclResult_t launch(ncclComm* c, ncclDataType_t t, size_t count, Start start,
                    std::function<ncclResult_t()> then = nullptr) {
  if (!c) return ncclInvalidArgument;
  if (c->req != MPI_REQUEST_NULL)
    return failed(c, ncclInvalidUsage, "an operation is still in progress on this communicator");
  if (mpi_type(t) == MPI_DATATYPE_NULL) return failed(c, ncclInvalidArgument, "datatype");
  if (count > size_t(INT_MAX)) return failed(c, ncclInvalidArgument, "count over INT_MAX");
  open_device(c);
  const int rc = start(int(count), mpi_type(t));
  if (rc != MPI_SUCCESS) {
    close_device(c);
    return failed(c, ncclSystemError, "MPI error " + std::to_string(rc));
  }
  c->then = std::move(then);
  const ncclResult_t r = progress(c, c->blocking);
  return r == ncclInProgress ? ncclInProgress : r;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "NCCL error";
  }
}

const char* ncclGetLastError(ncclComm_t c) {
  return c ? c->last_error.c_str() : "";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::random_device rd;
  for (size_t i = 0; i < sizeof id->internal; ++i) id->internal[i] = char(rd());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) return ncclInvalidUsage;  // zaya's group bootstraps MPI first
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (nranks != world_size || rank != world_rank) return ncclInvalidArgument;
  auto* c = new ncclComm;
  c->rank = rank;
  c->size = nranks;
  c->blocking = !config || config->blocking != 0;
  c->id = id;
  c->ids.resize(size_t(nranks));
  *out = c;
  // Duplicate the world, then gather every rank's id: all must hold rank 0's.
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, &c->comm, &c->req);
  if (rc != MPI_SUCCESS) return failed(c, ncclSystemError, "MPI_Comm_idup");
  c->then = [c] {
    if (MPI_Iallgather(&c->id, sizeof c->id, MPI_BYTE, c->ids.data(), sizeof c->id, MPI_BYTE,
                       c->comm, &c->req) != MPI_SUCCESS)
      return failed(c, ncclSystemError, "MPI_Iallgather of the unique ids");
    c->then = [c] {
      for (const ncclUniqueId& other : c->ids)
        if (std::memcmp(&other, &c->ids[0], sizeof other) != 0)
          return failed(c, ncclInvalidArgument, "the ranks passed different unique ids");
      return ncclSuccess;
    };
    return ncclSuccess;
  };
  return progress(c, c->blocking);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* state) {
  if (!c) return ncclInvalidArgument;
  *state = progress(c, false);
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
  return c ? progress(c, c->blocking) : ncclInvalidArgument;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  if (c->req != MPI_REQUEST_NULL) return ncclInvalidUsage;
  if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
  delete c;
  return ncclSuccess;
}

// The peers may never answer: the open request and the communicator are abandoned (MPI cannot
// cancel a collective), device memory is closed again.
ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclSuccess;
  close_device(c);
  delete c;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t) {
  if (mpi_op(op) == MPI_OP_NULL) return failed(c, ncclInvalidArgument, "reduction op");
  return launch(c, t, count, [&](int n, MPI_Datatype mt) {
    if (send != recv) std::memcpy(recv, send, count * type_size(t));
    return MPI_Iallreduce(MPI_IN_PLACE, recv, n, mt, mpi_op(op), c->comm, &c->req);
  });
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t) {
  if (mpi_op(op) == MPI_OP_NULL) return failed(c, ncclInvalidArgument, "reduction op");
  const size_t bytes = count * type_size(t);
  const bool in_place = c && recv == static_cast<const char*>(send) + size_t(c->rank) * bytes;
  std::function<ncclResult_t()> then;
  if (in_place)
    then = [c, recv, bytes] {
      std::memcpy(recv, c->temp.data(), bytes);
      return ncclSuccess;
    };
  return launch(
      c, t, count,
      [&](int n, MPI_Datatype mt) {
        void* into = recv;
        if (in_place) {
          c->temp.resize(bytes);
          into = c->temp.data();
        }
        return MPI_Ireduce_scatter_block(send, into, n, mt, mpi_op(op), c->comm, &c->req);
      },
      std::move(then));
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t t,
                           ncclComm_t c, cudaStream_t) {
  const size_t bytes = count * type_size(t);
  const bool in_place = c && send == static_cast<const char*>(recv) + size_t(c->rank) * bytes;
  return launch(c, t, count, [&](int n, MPI_Datatype mt) {
    return MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, mt, recv, n, mt, c->comm, &c->req);
  });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t) {
  if (c && (root < 0 || root >= c->size)) return failed(c, ncclInvalidArgument, "root");
  return launch(c, t, count, [&](int n, MPI_Datatype mt) {
    if (c->rank == root && send != recv) std::memcpy(recv, send, count * type_size(t));
    return MPI_Ibcast(recv, n, mt, root, c->comm, &c->req);
  });
}

}  // extern "C"
