// The GPU backend of a build without one (the mlx pattern): every ops::gpu op, every GPU memory
// entry point of core/device.h and the GPU GEMM layer (ops/gpu/gemm.h, for perf/gpu_gemm_rate's
// probe) fail with one clear zaya::Error naming what was asked for and how to get a GPU build.
// Linked instead of the GPU backend's sources when ZAYA_GPU is OFF (CMakeLists.txt); the build
// links ops/gpu/no_blaslt.cpp too.
#include "core/assert.h"
#include "core/device.h"
#include "ops/backend.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gemm_table_runtime.h"

namespace zaya {

namespace {

[[noreturn]] void no_gpu(const char* what) {
  fail("{}: this build has no GPU backend: configure with -DZAYA_GPU=CUDA or HIP (see docs/gpu.md)",
       what);
}

}  // namespace

namespace gpu {

void* alloc(size_t bytes) {
  no_gpu("allocating GPU memory");
}

// Nothing to release: alloc never returns memory here.
void free(void* p) noexcept {
  ZAYA_ASSERT(p == nullptr, "gpu::free of memory this build cannot have allocated");
}

void fill_zero(void* p, size_t bytes) {
  no_gpu("clearing GPU memory");
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  no_gpu("copying GPU memory");
}

void copy_to_device_async(void* /*dst*/, const void* /*src*/, size_t /*bytes*/) {
  no_gpu("copying to GPU memory");
}

void synchronize() {
  no_gpu("waiting for the GPU");
}

// No GPU work can exist, so there is nothing to mark or wait for.
Fence::~Fence() = default;
void Fence::record() {}
void Fence::wait() {}

bool available() noexcept {
  return false;
}

bool pin_host(void* /*p*/, size_t /*bytes*/) noexcept {
  return false;
}

void unpin_host(void* /*p*/) noexcept {}

std::string describe() {
  return "this build has no GPU backend (configure with -DZAYA_GPU=CUDA or HIP)";
}

std::string memory_report() {
  return "GPU memory: none (this build has no GPU backend)";
}

// The GEMM tuning table (gemm_table_runtime.h): nothing to load, record or tune; the queries
// answer "none".
std::vector<gemm_table::Validator> gemm_table_validators() {
  no_gpu("reading the GPU's GEMM table validators");
}

int64_t load_gemm_table(const std::string& path) {
  no_gpu("loading a GEMM table");
}

void clear_gemm_table() {}

bool gemm_table_loaded() {
  return false;
}

GemmTableStats gemm_table_stats() {
  return {};
}

void set_gemm_recording(const std::string& path) {
  no_gpu("recording the GPU's GEMMs");
}

int64_t write_gemm_recording() {
  return 0;
}

std::vector<GemmTuneResult> tune_gemms(const std::vector<gemm_table::GemmKey>&,
                                       const GemmTuneOptions&,
                                       const std::function<void(const GemmTuneResult&)>&) {
  no_gpu("tuning GPU GEMMs");
}

// Never reached by the GEMM-rate probe, which asks available() first.
void gemm(const Gemm& g, GemmEngine engine) {
  no_gpu("running a GPU GEMM");
}

GemmEngine gemm_engine_for(const Gemm& g) {
  no_gpu("choosing a GPU GEMM engine");
}

}  // namespace gpu

namespace ops::gpu {

#define ZAYA_BACKEND_OP(ret, name, params) \
  ret name params {                        \
    no_gpu(#name);                         \
  }
#include "ops/backend_ops.inc"
#undef ZAYA_BACKEND_OP

}  // namespace ops::gpu

}  // namespace zaya
