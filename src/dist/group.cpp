// make_group: chooses the backend ("auto": mpi under a launcher, else single; make_group_for:
// nccl for GPU buffers under a launcher), applies the ZAYA_DIST_TIMEOUT override, and holds the
// argument checks the backends share.
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/assert.h"
#include "dist/group_impl.h"
#include "dist/nccl.h"

namespace zaya::dist {

void check_buffer(const char* what, const Tensor& t) {
  ZAYA_CHECK_INPUT(t.dtype == DType::F32 || t.dtype == DType::F64 || t.dtype == DType::I32,
                   "{}: buffers must be F32, F64 or I32, got {}", what, dtype_name(t.dtype));
  ZAYA_CHECK_INPUT(t.defined() || t.numel() == 0, "{}: buffer of {} elements has no data", what,
                   t.numel());
}

void check_chunks(const char* what, const Tensor& whole, const Tensor& part, int ranks) {
  check_buffer(what, whole);
  check_buffer(what, part);
  ZAYA_CHECK_INPUT(whole.dtype == part.dtype, "{}: send is {} but recv is {}", what,
                   dtype_name(whole.dtype), dtype_name(part.dtype));
  ZAYA_CHECK_INPUT(whole.numel() == int64_t(ranks) * part.numel(),
                   "{}: the full buffer has {} elements but {} ranks × a chunk of {} = {} (pad "
                   "the buffer to a multiple of the number of ranks)",
                   what, whole.numel(), ranks, part.numel(), int64_t(ranks) * part.numel());
}

void check_root(const char* what, int root, int ranks) {
  ZAYA_CHECK_INPUT(root >= 0 && root < ranks, "{}: root {} is not a rank of this {}-rank group",
                   what, root, ranks);
}

void check_host(const char* what, const Tensor& t) {
  ZAYA_CHECK_INPUT(t.device == Device::Cpu,
                   "{}: the MPI group moves host buffers only, got a {} buffer (GPU buffers "
                   "need the NCCL group: make_group(\"nccl\"))",
                   what, device_name(t.device));
}

void poll_pause(double waited) {
  if (waited < 1e-3) return;
  if (waited < 10) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void fail_timeout(const char* what, double timeout_s, int rank, int ranks, const char* extra) {
  fail(
      "{}: no answer from the other ranks within {:g} s (a rank died or hung?); rank {} of {} "
      "gives up{}. Look for the first error in the other ranks' output; ZAYA_DIST_TIMEOUT=seconds "
      "changes the limit",
      what, timeout_s, rank, ranks, extra);
}

namespace {

// The pending of a collective that finished in its start call.
class Finished final : public Pending {
 public:
  void wait() override {}
};

}  // namespace

std::unique_ptr<Pending> Group::start_reduce_scatter(const Tensor& send, const Tensor& recv) {
  reduce_scatter(send, recv);
  return std::make_unique<Finished>();
}

std::unique_ptr<Pending> Group::start_all_gather(const Tensor& send, const Tensor& recv) {
  all_gather(send, recv);
  return std::make_unique<Finished>();
}

namespace {

bool launched_by_mpirun_or_srun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

// ZAYA_DIST_TIMEOUT (seconds) overrides the caller's timeout: operators can lengthen it for a
// slow filesystem or shorten it in tests without a config change.
double timeout_from_env(double timeout_s) {
  const char* env = std::getenv("ZAYA_DIST_TIMEOUT");
  if (!env || !*env) return timeout_s;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  ZAYA_CHECK_INPUT(end && *end == '\0' && v > 0,
                   "ZAYA_DIST_TIMEOUT='{}' is not a positive number of seconds", env);
  return v;
}

}  // namespace

std::unique_ptr<Group> make_group(const std::string& kind, double timeout_s) {
  ZAYA_CHECK_INPUT(timeout_s > 0, "group timeout must be positive, got {} s", timeout_s);
  timeout_s = timeout_from_env(timeout_s);
  if (kind == "auto")
    return launched_by_mpirun_or_srun() ? make_mpi_group(timeout_s) : make_single_group();
  const std::optional<Backend> backend = parse_enum<Backend>(kind);
  if (!backend)
    fail("unknown process group kind '{}': use auto, {}", kind, enum_choices<Backend>());
  switch (*backend) {
    case Backend::Single:
      return make_single_group();
    case Backend::Mpi:
      return make_mpi_group(timeout_s);
    case Backend::Nccl:
      return make_nccl_group(timeout_s);
  }
  fail("unknown process group kind '{}'", kind);
}

std::unique_ptr<Group> make_group_for(Device device, double timeout_s) {
  if (device == Device::Gpu && launched_by_mpirun_or_srun()) return make_group("nccl", timeout_s);
  return make_group("auto", timeout_s);
}

}  // namespace zaya::dist
