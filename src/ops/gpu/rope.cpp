// rope_tables on the GPU: the CPU's tables (ops/cpu/rope.cpp, fp32 powf/cosf/sinf of the C
// library, fp32 RoPE, docs/model.md §0.2.7) built on the host and copied to the device, so both backends hold the same bits
// (the device's cosf/sinf are not correctly rounded). rope_forward/backward are in ops/gpu/rope.cu.
#include <vector>

#include "ops/backend.h"

namespace zaya::ops::gpu {

void rope_tables(const Tensor& cos, const Tensor& sin, int64_t pos0, double theta, int64_t r) {
  if (cos.numel() == 0) return cpu::rope_tables(cos, sin, pos0, theta, r);  // checks only
  std::vector<float> host(size_t(cos.numel() + sin.numel()));
  Tensor hc = cos, hs = sin;
  hc.data = host.data();
  hs.data = host.data() + cos.numel();
  hc.device = hs.device = Device::Cpu;
  cpu::rope_tables(hc, hs, pos0, theta, r);
  zaya::gpu::copy(cos.data, Device::Gpu, hc.data, Device::Cpu, cos.nbytes());
  zaya::gpu::copy(sin.data, Device::Gpu, hs.data, Device::Cpu, sin.nbytes());
}

}  // namespace zaya::ops::gpu
