// Internals shared by the Group implementations (not for callers: include dist/group.h): the
// argument checks every backend applies before it moves data, and the backend constructors
// make_group chooses between.
#pragma once
#include <memory>

#include "dist/group.h"

namespace zaya::dist {

// Buffer of a collective: F32, F64 or I32 (throws zaya::Error naming `what` otherwise).
void check_buffer(const char* what, const Tensor& t);
// `whole` holds `ranks` chunks of `part`'s size, same dtype (reduce_scatter: send/recv;
// all_gather: recv/send).
void check_chunks(const char* what, const Tensor& whole, const Tensor& part, int ranks);
void check_root(const char* what, int root, int ranks);
// A host-memory buffer (the MPI group's): a GPU tensor throws zaya::Error naming `what` (device
// buffers need the NCCL group).
void check_host(const char* what, const Tensor& t);

// Polling a collective: the pause after `waited` seconds — none for 1 ms (a pure spin), then
// yielding the core until 10 s, then 1 ms naps (a straggler or a hang: no transfer lasts that
// long). The MPI and NCCL groups share the rhythm.
void poll_pause(double waited);
// The timeout error of collective `what` (`extra`: what the group did about it).
[[noreturn]] void fail_timeout(const char* what, double timeout_s, int rank, int ranks,
                               const char* extra = "");

std::unique_ptr<Group> make_single_group();
// The MPI group over a duplicate of MPI_COMM_WORLD (initialising MPI on first use).
std::unique_ptr<Group> make_mpi_group(double timeout_s);

}  // namespace zaya::dist
