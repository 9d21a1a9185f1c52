// ZAYA_GPU_ATTENTION: which implementation the GPU's training attention runs (attention.h).
#include <cstdlib>
#include <string>

#include "core/assert.h"
#include "ops/gpu/attention.h"

namespace zaya::gpu {

GpuAttentionPath gpu_attention_path() {
  const char* env = std::getenv("ZAYA_GPU_ATTENTION");
  const std::string v = env ? env : "";
  if (v.empty() || v == "flash") return GpuAttentionPath::Flash;
  if (v == "gemm") return GpuAttentionPath::Gemm;
  fail("ZAYA_GPU_ATTENTION='{}': expected flash (the default) or gemm", v);
}

}  // namespace zaya::gpu
