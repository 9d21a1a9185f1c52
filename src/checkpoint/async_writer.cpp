// AsyncCheckpointWriter: snapshot on the caller's thread, write on a background thread.
// The caller is blocked only for agreeing on the temporary directory (one collective), the copy
// into staging memory (a parallel memcpy, plus waiting for a still-running previous save);
// hashing, file I/O and fsync happen in the background through the same write_checkpoint_part /
// finish_checkpoint as save_checkpoint, so a synchronous and an asynchronous save write identical
// files. Only rank 0 writes the model directory, so only rank 0 stages the parameters.
// Parameters and optimizer state on a GPU are staged by device_copy (device → host, through the
// backend), never read directly; host tensors by the parallel memcpy.
// Staging memory is anonymous huge-page-backed memory faulted in once: on a VM, first-touch page
// faults and 4 KiB TLB misses make a copy into a fresh malloc'ed buffer several times slower.
#include "checkpoint/writer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "checkpoint/retention.h"
#include "core/arena.h"
#include "core/host_buffer.h"
#include "core/log.h"
#include "core/timer.h"
#include "dist/group.h"
#include "io/model_dir.h"
#include "io/zaya_config.h"
#include "model/model.h"

namespace zaya {

namespace {

// The staging of one checkpoint (core/host_buffer.h): page-locked for a GPU run, so the device →
// host copies of the snapshot run at DMA speed rather than through the driver's pageable staging.
HostBuffer staging_memory(size_t bytes, Device source) {
  HostBuffer b(bytes, source == Device::Gpu, "checkpoint staging memory");
  if (source == Device::Gpu && !b.pinned())
    log_info(
        "checkpoint: staging memory not page-locked: device copies run from pageable memory "
        "(slower)");
  return b;
}

size_t staging_bytes(const Model& m, const CheckpointData& d, bool with_params) {
  size_t bytes = with_params ? Arena::aligned(m.layout().total * sizeof(float)) : 0;
  for (const OptimizerSlice& s : d.optimizer.slices) bytes += Arena::aligned(s.data.nbytes());
  return bytes;
}

struct CopyJob {
  void* dst;  // host (staging memory)
  const void* src;
  size_t bytes;
  Device src_device = Device::Cpu;
};

// Copies every job: a device source through device_copy, host ones split into chunks spread over
// the OpenMP threads.
void parallel_copy(const std::vector<CopyJob>& jobs) {
  constexpr size_t kChunk = size_t(4) << 20;
  std::vector<CopyJob> chunks;
  for (const CopyJob& j : jobs) {
    if (j.src_device != Device::Cpu) {
      const int64_t n = int64_t(j.bytes / sizeof(float));  // parameters and state are F32
      device_copy(Tensor(j.dst, DType::F32, {n}),
                  Tensor(const_cast<void*>(j.src), DType::F32, {n}).on(j.src_device));
      continue;
    }
    for (size_t off = 0; off < j.bytes; off += kChunk)
      chunks.push_back({static_cast<char*>(j.dst) + off, static_cast<const char*>(j.src) + off,
                        std::min(kChunk, j.bytes - off)});
  }
  const int64_t n = int64_t(chunks.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) std::memcpy(chunks[i].dst, chunks[i].src, chunks[i].bytes);
}

}  // namespace

struct AsyncCheckpointWriter::Staging {
  HostBuffer memory;
  ZayaConfig config;
  ParamLayout layout;
  bool has_model = false;
  const float* params = nullptr;  // into memory
  CheckpointData data;            // trainer_state copy + views into memory

  // What Model::save_dir writes, from the staged parameters.
  void write_model_dir(const std::string& dir) const {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const ParamSpec& s : layout.specs) {
      Tensor t(const_cast<float*>(params) + s.offset, {s.numel()});
      t.ndim = int(s.shape.size());
      for (int i = 0; i < t.ndim; ++i) t.shape[i] = s.shape[i];
      tensors.emplace_back(s.name, t);
    }
    save_model_dir(dir, config, tensors);
  }
};

AsyncCheckpointWriter::AsyncCheckpointWriter(std::string root, int keep_last)
    : AsyncCheckpointWriter(dist::make_group("single"), nullptr, std::move(root), keep_last, 0) {}

AsyncCheckpointWriter::AsyncCheckpointWriter(dist::Group& group, std::string root, int keep_last,
                                             double shard_wait_s)
    : AsyncCheckpointWriter(nullptr, &group, std::move(root), keep_last, shard_wait_s) {}

AsyncCheckpointWriter::AsyncCheckpointWriter(std::unique_ptr<dist::Group> own_group,
                                             dist::Group* group, std::string root, int keep_last,
                                             double shard_wait_s)
    : own_group_(std::move(own_group)),
      group_(group ? *group : *own_group_),
      root_(std::move(root)),
      keep_last_(keep_last),
      shard_wait_s_(shard_wait_s),
      staging_(std::make_unique<Staging>()) {}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    log_info("warning: {}", e.what());
  }
}

void AsyncCheckpointWriter::wait() {
  if (worker_.joinable()) worker_.join();
  if (!error_) {
    if (!pending_path_.empty()) last_path_ = std::exchange(pending_path_, "");
    return;
  }
  std::exception_ptr e = std::exchange(error_, nullptr);
  pending_path_.clear();
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    fail("asynchronous checkpoint {} failed: {}", error_what_, ex.what());
  } catch (...) {
    fail("asynchronous checkpoint {} failed", error_what_);
  }
}

void AsyncCheckpointWriter::prepare(const Model& m, const CheckpointData& d) {
  wait();
  const size_t bytes = staging_bytes(m, d, group_.rank() == 0);
  if (staging_->memory.size() >= bytes) return;
  error_what_ = "staging allocation";
  worker_ = std::thread([this, bytes, device = m.device()] {
    try {
      staging_->memory = staging_memory(bytes, device);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void AsyncCheckpointWriter::save(int64_t step, const Model& m, const CheckpointData& d) {
  Timer timer;
  wait();
  error_what_ = fmt::format("save of step {}", step);
  const bool rank0 = group_.rank() == 0;
  std::string tmp;
  try {
    ZAYA_CHECK_INPUT(keep_last_ >= 0, "checkpoint keep_last must be non-negative, got {}",
                     keep_last_);
    for (const OptimizerSlice& sl : d.optimizer.slices)
      if (sl.data.dtype != DType::F32)
        fail("optimizer tensor '{}' is {}, but optimizer state must be F32", sl.tensor,
             dtype_name(sl.data.dtype));
    tmp = begin_checkpoint(group_, root_, step);  // collective: every rank gets here
  } catch (...) {
    error_ = std::current_exception();  // reported by wait(), like a background failure
    return;
  }

  Staging& s = *staging_;
  const size_t bytes = staging_bytes(m, d, rank0);
  if (s.memory.size() < bytes)
    s.memory = staging_memory(bytes, m.device());  // prepare() avoids this stall
  if (!s.has_model || !(s.config == m.config())) {
    s.config = m.config();
    s.layout = m.layout();
    s.has_model = true;
  }

  char* out = s.memory.data();
  std::vector<CopyJob> jobs;
  if (rank0) {
    const size_t param_bytes = m.layout().total * sizeof(float);
    jobs.push_back({out, m.params(), param_bytes, m.device()});
    s.params = reinterpret_cast<const float*>(out);
    out += Arena::aligned(param_bytes);
  }
  s.data.optimizer.layout = d.optimizer.layout;
  s.data.optimizer.slices.clear();
  for (const OptimizerSlice& sl : d.optimizer.slices) {
    OptimizerSlice staged = sl;
    staged.data.data = out;
    staged.data.device = Device::Cpu;
    s.data.optimizer.slices.push_back(staged);
    jobs.push_back({out, sl.data.data, sl.data.nbytes(), sl.data.device});
    out += Arena::aligned(sl.data.nbytes());
  }
  parallel_copy(jobs);
  s.data.trainer_state = d.trainer_state;
  s.data.model_files = d.model_files;  // shared bytes: the trainer never changes them

  const int rank = group_.rank(), world = group_.size();
  worker_ = std::thread([this, step, tmp, rank, world] {
    try {
      const Staging& st = *staging_;
      try {
        write_checkpoint_part(
            tmp, rank, world, [&st](const std::string& dir) { st.write_model_dir(dir); }, st.data);
      } catch (...) {
        if (rank == 0) remove_all_quietly(tmp);
        throw;
      }
      if (rank == 0)
        pending_path_ = finish_checkpoint(root_, tmp, step, world, keep_last_, shard_wait_s_);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
  last_stall_ = timer.seconds();
}

}  // namespace zaya
