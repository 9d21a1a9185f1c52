// GPU-vs-CPU op tests (label `gpu`): the CPU backend is the oracle. A DevicePair holds one host
// tensor and its copy on the GPU; a test runs an op on both sides and compares with the tolerance
// table (F32: NMSE ≤ 1e-7; BF16: abs 1e-2 + rel 8e-2). Every test begins with
// ZAYA_REQUIRE_GPU(), which skips it (ctest shows "Skipped", not a pass) where there is none.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/device.h"
#include "ops/ops.h"
#include "test_skips.h"
#include "test_util.h"

namespace zaya::test {

inline constexpr double kGpuF32Nmse = 1e-7;                      // F32 GPU vs CPU, normalised MSE
inline constexpr double kGpuBf16Abs = 1e-2, kGpuBf16Rel = 8e-2;  // BF16 GPU vs CPU

// Skips (an allowed reason: tests/test_skips.h) where there is no GPU.
#define ZAYA_REQUIRE_GPU()                                                      \
  do {                                                                          \
    if (!::zaya::gpu::available()) ZAYA_SKIP(NoGpu) << ::zaya::gpu::describe(); \
  } while (0)

// One tensor on the host and on the GPU, same shape and dtype, both zero-filled at first.
struct DevicePair {
  Buffer host_mem, gpu_mem;
  Tensor cpu, gpu;

  DevicePair(DType dtype, std::initializer_list<int64_t> dims) {
    cpu = Tensor(nullptr, dtype, dims);
    host_mem = Buffer(cpu.nbytes() + 64, Device::Cpu);
    gpu_mem = Buffer(cpu.nbytes() + 64, Device::Gpu);
    cpu.data = host_mem.data();
    gpu = cpu;
    gpu.data = gpu_mem.data();
    gpu.device = Device::Gpu;
  }
  // The host side's values copied to the GPU side.
  void upload() const { device_copy(gpu, cpu); }
  // The GPU side's values as doubles (widening BF16, F32, I32, I64, F64).
  std::vector<double> gpu_values() const {
    Buffer tmp(cpu.nbytes() + 64, Device::Cpu);
    Tensor h = cpu;
    h.data = tmp.data();
    device_copy(h, gpu);
    return values_of(h);
  }
  std::vector<double> cpu_values() const { return values_of(cpu); }

  static std::vector<double> values_of(const Tensor& h) {
    std::vector<double> v(size_t(h.numel()));
    for (size_t i = 0; i < v.size(); ++i) {
      switch (h.dtype) {
        case DType::F32:
          v[i] = static_cast<const float*>(h.data)[i];
          break;
        case DType::F64:
          v[i] = static_cast<const double*>(h.data)[i];
          break;
        case DType::BF16:
          v[i] = bf16_to_f32(static_cast<const uint16_t*>(h.data)[i]);
          break;
        case DType::I32:
          v[i] = static_cast<const int32_t*>(h.data)[i];
          break;
        case DType::I64:
          v[i] = double(static_cast<const int64_t*>(h.data)[i]);
          break;
        default:
          ADD_FAILURE() << "values_of: dtype " << dtype_name(h.dtype);
      }
    }
    return v;
  }
};

// A pair filled with normal values (std `scale`) on both sides: F32, or BF16 rounded from them.
inline DevicePair random_pair(DType dtype, std::initializer_list<int64_t> dims, uint64_t seed,
                              double scale = 1.0) {
  DevicePair p(dtype, dims);
  const int64_t n = p.cpu.numel();
  CounterRng rng{seed, 7};
  for (int64_t i = 0; i < n; ++i) {
    const float v = float(scale * rng.normal(uint64_t(i)));
    if (dtype == DType::F32)
      static_cast<float*>(p.cpu.data)[i] = v;
    else if (dtype == DType::BF16)
      static_cast<uint16_t*>(p.cpu.data)[i] = f32_to_bf16(v);
    else
      ADD_FAILURE() << "random_pair: dtype " << dtype_name(dtype);
  }
  p.upload();
  return p;
}

// A pair of I32 values from `values` (ids, choices, targets).
inline DevicePair i32_pair(const std::vector<int32_t>& values) {
  DevicePair p(DType::I32, {int64_t(values.size())});
  if (!values.empty()) std::memcpy(p.cpu.data, values.data(), values.size() * 4);
  p.upload();
  return p;
}

// Σ(gpu − cpu)² / max(Σ cpu², tiny) ≤ tol, with the worst element in the message.
inline void expect_nmse(const DevicePair& p, double tol = kGpuF32Nmse, const char* what = "") {
  const std::vector<double> a = p.gpu_values(), b = p.cpu_values();
  double num = 0, den = 0, worst = -1;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - b[i];
    num += d * d;
    den += b[i] * b[i];
    if (!(std::fabs(d) <= worst)) worst = std::fabs(d), at = i;  // NaN-safe
  }
  const double nmse = num / std::max(den, 1e-300);
  EXPECT_TRUE(nmse <= tol || (den == 0 && num == 0))
      << what << ": NMSE " << nmse << " > " << tol << "; worst element " << at << " gpu "
      << (a.empty() ? 0 : a[at]) << " cpu " << (b.empty() ? 0 : b[at]);
}

// |gpu − cpu| ≤ abs + rel·|cpu| elementwise (BF16 outputs).
inline void expect_close_bf16(const DevicePair& p, const char* what = "") {
  const std::vector<double> a = p.gpu_values(), b = p.cpu_values();
  expect_close(a, b, kGpuBf16Abs, kGpuBf16Rel, what);
}

// Exact equality (ids, choices, counts, bit moves).
inline void expect_equal(const DevicePair& p, const char* what = "") {
  const std::vector<double> a = p.gpu_values(), b = p.cpu_values();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && !(std::isnan(a[i]) && std::isnan(b[i]))) {
      ADD_FAILURE() << what << ": element " << i << " gpu " << a[i] << " cpu " << b[i];
      return;
    }
}

// The sizes every GPU op test covers (task 13): odd ones and a ZAYA1-base-like one.
inline const std::vector<int64_t>& odd_sizes() {
  static const std::vector<int64_t> s{1, 7, 31, 33, 257};
  return s;
}

}  // namespace zaya::test
