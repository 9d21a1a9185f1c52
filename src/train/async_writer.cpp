// AsyncCheckpointWriter: snapshot on the caller's thread, write on a background thread.
// The caller is blocked only for the copy into staging memory (a parallel memcpy, plus waiting
// for a still-running previous save); hashing, file I/O and fsync happen in the background
// through save_checkpoint_with, so a synchronous and an asynchronous save write identical files.
// Staging memory is anonymous huge-page-backed memory faulted in once: on a VM, first-touch page
// faults and 4 KiB TLB misses make a copy into a fresh malloc'ed buffer several times slower.
#include "train/async_writer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/arena.h"
#include "core/log.h"
#include "core/timer.h"
#include "io/safetensors.h"
#include "io/zaya_config.h"
#include "model/model.h"

namespace zaya {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

// Anonymous memory, transparent huge pages requested, every page faulted in at construction.
class StagingMemory {
 public:
  StagingMemory() = default;
  explicit StagingMemory(size_t bytes) : size_((bytes + kHugePage - 1) / kHugePage * kHugePage) {
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      fail("out of memory: cannot map {} bytes of checkpoint staging memory: {}", size_,
           std::strerror(errno));
    ::madvise(p, size_, MADV_HUGEPAGE);  // a hint: fine if THP is off
    data_ = static_cast<char*>(p);
    for (size_t off = 0; off < size_; off += 4096) data_[off] = 0;  // fault in now, not in save()
  }
  StagingMemory(StagingMemory&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  StagingMemory& operator=(StagingMemory&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  ~StagingMemory() {
    if (data_) ::munmap(data_, size_);
  }
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

size_t staging_bytes(const Model& m, const CheckpointData& d) {
  size_t bytes = Arena::aligned(m.layout().total * sizeof(float));
  for (const auto& [name, t] : d.optimizer_state) bytes += Arena::aligned(t.nbytes());
  return bytes;
}

struct CopyJob {
  void* dst;
  const void* src;
  size_t bytes;
};

// Copies every job, split into chunks spread over the OpenMP threads.
void parallel_copy(const std::vector<CopyJob>& jobs) {
  constexpr size_t kChunk = size_t(4) << 20;
  std::vector<CopyJob> chunks;
  for (const CopyJob& j : jobs)
    for (size_t off = 0; off < j.bytes; off += kChunk)
      chunks.push_back({static_cast<char*>(j.dst) + off, static_cast<const char*>(j.src) + off,
                        std::min(kChunk, j.bytes - off)});
  const int64_t n = int64_t(chunks.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) std::memcpy(chunks[i].dst, chunks[i].src, chunks[i].bytes);
}

}  // namespace

struct AsyncCheckpointWriter::Staging {
  StagingMemory memory;
  ZayaConfig config;
  ParamLayout layout;
  bool has_model = false;
  const float* params = nullptr;  // into memory
  CheckpointData data;            // trainer_state copy + views into memory

  // What Model::save_dir writes, from the staged parameters.
  void write_model_dir(const std::string& dir) const {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) fail("cannot create directory '{}': {}", dir, ec.message());
    save_config(config, dir + "/config.json");
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const ParamSpec& s : layout.specs) {
      Tensor t(const_cast<float*>(params) + s.offset, {s.numel()});
      t.ndim = int(s.shape.size());
      for (int i = 0; i < t.ndim; ++i) t.shape[i] = s.shape[i];
      tensors.emplace_back(s.name, t);
    }
    save_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  }
};

AsyncCheckpointWriter::AsyncCheckpointWriter(std::string root, int keep_last)
    : root_(std::move(root)), keep_last_(keep_last), staging_(std::make_unique<Staging>()) {}

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
  const size_t bytes = staging_bytes(m, d);
  if (staging_->memory.size() >= bytes) return;
  error_what_ = "staging allocation";
  worker_ = std::thread([this, bytes] {
    try {
      staging_->memory = StagingMemory(bytes);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void AsyncCheckpointWriter::save(int64_t step, const Model& m, const CheckpointData& d) {
  Timer timer;
  wait();
  ZAYA_CHECK_INPUT(step >= 0, "checkpoint step must be non-negative, got {}", step);
  for (const auto& [name, t] : d.optimizer_state)
    if (t.dtype != DType::F32)
      fail("optimizer tensor '{}' is {}, but optimizer state must be F32", name,
           dtype_name(t.dtype));

  Staging& s = *staging_;
  const size_t bytes = staging_bytes(m, d);
  if (s.memory.size() < bytes) s.memory = StagingMemory(bytes);  // prepare() avoids this stall
  if (!s.has_model || !(s.config == m.config())) {
    s.config = m.config();
    s.layout = m.layout();
    s.has_model = true;
  }

  char* out = s.memory.data();
  std::vector<CopyJob> jobs;
  const size_t param_bytes = m.layout().total * sizeof(float);
  jobs.push_back({out, m.params(), param_bytes});
  s.params = reinterpret_cast<const float*>(out);
  out += Arena::aligned(param_bytes);
  s.data.optimizer_state.clear();
  for (const auto& [name, t] : d.optimizer_state) {
    Tensor staged = t;
    staged.data = out;
    s.data.optimizer_state.emplace_back(name, staged);
    jobs.push_back({out, t.data, t.nbytes()});
    out += Arena::aligned(t.nbytes());
  }
  parallel_copy(jobs);
  s.data.trainer_state = d.trainer_state;

  error_what_ = fmt::format("save of step {}", step);
  worker_ = std::thread([this, step] {
    try {
      const Staging& st = *staging_;
      pending_path_ = save_checkpoint_with(
          root_, step, [&st](const std::string& dir) { st.write_model_dir(dir); }, st.data,
          keep_last_);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
  last_stall_ = timer.seconds();
}

}  // namespace zaya
